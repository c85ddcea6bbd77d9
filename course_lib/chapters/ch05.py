"""Chapter 5's own tables and plots ("Quantization"): they draw results, never compute the algorithms.

The algorithms are in :mod:`course_lib.compression.quant` (the quantizer),
:mod:`course_lib.compression.quant_layers` (quantized layers), :mod:`course_lib.compression.ptq`
(whole-model measurements), :mod:`course_lib.compression.outliers`, :mod:`course_lib.compression.qat`
and :mod:`course_lib.compression.lora`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import torch
from torch import nn

from course_lib.base.tables import Table
from course_lib.compression import lora, outliers, ptq, quant
from course_lib.compression.quant import QuantConfig
from course_lib.compression.quant_layers import describe, weight_matrix
from course_lib.exercises.questions import Question
from course_lib.numbers import memory

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def crosscheck_table(check: ptq.TorchCrosscheck) -> Table:
    """Our quantizers against torch's, as :func:`~course_lib.compression.ptq.torch_crosscheck` counted.

    Chapter 5, *Quantization*.
    """
    def share(n: int) -> str:
        return f"{n:,} of {check.total:,}"

    return Table(["our quantizer", "torch reference", "identical", "in torch's order of operations"], [
        ["INT8 absmax per tensor", "torch.quantize_per_tensor", share(check.absmax_tensor), "-"],
        ["INT8 absmax per channel", "torch.quantize_per_channel", share(check.absmax_channel), "-"],
        ["INT8 zero-point per channel", "torch.quantize_per_channel", share(check.zeropoint_channel),
         share(check.torch_order)],
        ["INT4 zero-point g64 (decoded)", "torch.fake_quantize_per_channel_affine", share(check.zeropoint_g64),
         "-"],
    ])


def ptq_table(results: Sequence[ptq.PTQResult], title: str | None = None) -> Table:
    """The PTQ results as a table, each row compared with the first (FP32).

    Chapter 5, *Quantization*.
    """
    base = results[0]
    rows = [[r.method, f"{r.bits:.3f}", f"{r.model_bytes / 1e3:,.1f}", f"{r.model_bytes / base.model_bytes:.1%}",
             f"{r.file_bytes / 1e3:,.1f}", f"{r.perplexity:.4f}",
             f"{(r.perplexity / base.perplexity - 1):+.2%}"] for r in results]
    return Table(["method", "bits / weight", "model (kB)", "of FP32", "file (kB)", "perplexity",
                  f"vs {base.method}"], rows, title=title)


def _merged_labels(points: Sequence[tuple[float, float, str]], tol: float = 1e-3) -> list[tuple[float, float, str]]:
    """Points that (almost) coincide become one point whose label names them all ("FP16 / BF16")."""
    merged: list[tuple[float, float, str]] = []
    for x, y, label in points:
        for i, (mx, my, mlabel) in enumerate(merged):
            if abs(mx - x) <= tol * max(abs(mx), 1e-12) and abs(my - y) <= tol * max(abs(my), 1e-12):
                merged[i] = (mx, my, f"{mlabel} / {label}")
                break
        else:
            merged.append((x, y, label))
    return merged


def plot_size_vs_perplexity(results: Sequence[ptq.PTQResult]) -> Any:
    """Model bytes against perplexity, one labelled point per method; the 4-bit cluster
    enlarged on the right.

    Chapter 5, *Quantization*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base import diagrams

    diagrams.use_course_style()
    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(diagrams.COLUMN_INCHES, 4.6),
                                   gridspec_kw={"width_ratios": [1.2, 1]})
    points = [(r.model_bytes / 1e6, r.perplexity, r.method) for r in results]
    four_bit = [p for p in points if "4" in p[2].split()[0]]
    colours = {r.method: f"C{i % 10}" for i, r in enumerate(results)}  # same in both
    labelled: dict[Any, list[tuple[float, float, str]]] = {ax: [], zoom: []}
    for target, subset in ((ax, points), (zoom, four_bit)):
        for x, y, label in _merged_labels(subset):
            target.scatter(x, y, s=40, zorder=3, color=colours[label.split(" / ")[0]])
            if target is zoom or (x, y, label) not in four_bit:
                labelled[target].append((x, y, label))
        target.axhline(results[0].perplexity, color="grey", lw=0.8, ls="--",
                       label=results[0].method)
        target.set_xlabel("model size in memory (MB)")
    ys = [p[1] for p in points]
    ax.set_xlim(0, max(p[0] for p in points) * 1.3)
    ax.set_ylim(min(ys) - 0.25 * (max(ys) - min(ys) + 1e-3),
                max(ys) + 0.2 * (max(ys) - min(ys) + 1e-3))
    if four_bit:
        xs, ys = [p[0] for p in four_bit], [p[1] for p in four_bit]
        width, height = max(xs) - min(xs) + 1e-3, max(ys) - min(ys) + 1e-3
        pad_x, pad_y = 0.15 * width, 0.25 * height
        corner = (min(xs) - pad_x, min(ys) - pad_y)
        ax.add_patch(plt.Rectangle(corner, width + 2 * pad_x, height + 2 * pad_y,
                                   fill=False, ls=":", color="black"))
        labelled[ax].append((max(xs) + pad_x, max(ys) + pad_y,
                             "4 bits: enlarged on the right"))
        zoom.set_xlim(min(xs) - 0.5 * width, max(xs) + 1.2 * width)
        zoom.set_ylim(min(ys) - 0.5 * height, max(ys) + 0.4 * height)
        zoom.set_title("the 4-bit methods", fontsize=diagrams.FONT + 1)
    ax.set_ylabel("perplexity on the test split\n(lower is better)")
    ax.set_title("Size against quality after PTQ", fontsize=diagrams.FONT + 1)
    legend = ax.legend(loc="upper right", fontsize=diagrams.SMALL)
    fig.tight_layout()
    for target, pts in labelled.items():  # the layout is final: place the labels apart
        diagrams.place_labels(target, [(x, y) for x, y, _ in pts], [p[2] for p in pts],
                              fontsize=diagrams.SMALL, avoid=[legend] * (target is ax))
    return fig


def plot_weight_histograms(model: nn.Module, layer: str,
                           configs: Sequence[str | QuantConfig],
                           bins: int = 120) -> Any:
    """Histograms of one layer's weights before and after quantization with each
    configuration, three panels to a row.

    Chapter 5, *Quantization*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base import diagrams

    w = weight_matrix(model.get_submodule(layer)).detach().float().contiguous()
    panels = [("FP32", w, "tab:blue")] + [
        (describe(c), quant.quantize_dequantize(w, c), "tab:orange") for c in configs]
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    diagrams.use_course_style()
    fig, axes = plt.subplots(rows, columns, sharex=True, sharey=True, squeeze=False,
                             figsize=(diagrams.COLUMN_INCHES, 0.6 + 2.5 * rows))
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):
            ax.set_visible(False)
            continue
        title, values, colour = panels[i]
        ax.hist(values.flatten().numpy(), bins=bins, color=colour)
        ax.set_title(title, fontsize=diagrams.FONT)
        if i + columns >= len(panels):  # nothing below it: it carries the x axis
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("weight value")
        if i % columns == 0:
            ax.set_ylabel("count")
    fig.suptitle(f"{layer}: {w.numel():,} weights", fontsize=diagrams.FONT + 1)
    fig.tight_layout()
    return fig


def size_table(rows_by_config: dict[str, list[ptq.SizeRow]]) -> Table:
    """The :func:`quantization_by_size` results as one table: a row per model, a column per configuration.

    Chapter 5, *Quantization*.
    """
    labels = list(rows_by_config)
    first = rows_by_config[labels[0]]
    table_rows = []
    for i, r in enumerate(first):
        table_rows.append([f"{r.n_params:,}", f"{r.fp32_loss:.4f}"]
                          + [f"{rows_by_config[k][i].perplexity_change:+.2%}" for k in labels])
    return Table(["parameters", "FP32 validation loss"] + [f"{k}: perplexity change" for k in labels], table_rows)


def size_trend(rows: Sequence[ptq.SizeRow]) -> str:
    """One sentence on whether the size of the perplexity change shrinks as the models grow (computed).

    Rounding can move perplexity up or down by a hair, so the sentence compares magnitudes
    ``|change|``: a change of -0.3% is a larger effect than one of +0.1%.

    Chapter 5, *Quantization*.
    """
    if not rows:
        raise ValueError("size_trend needs at least one model's row; pass quantization_by_size's rows")
    changes = [r.perplexity_change for r in rows]
    sizes = [abs(c) for c in changes]
    first, last = rows[0], rows[-1]
    verdict = ("shrinks at every step" if all(b <= a for a, b in zip(sizes, sizes[1:])) else
               "shrinks overall but does not shrink steadily" if sizes[-1] < sizes[0] else "does not shrink")
    return (f"From {first.n_params:,} to {last.n_params:,} parameters the size of the perplexity change goes "
            f"from {sizes[0]:.2%} to {sizes[-1]:.2%} ({changes[0]:+.2%} to {changes[-1]:+.2%}): it {verdict} "
            f"across these {len(rows)} models.")


def billion_table(n_params: float = 1e9, methods: Sequence[str] = ptq.PTQ_METHODS) -> Table:
    """Weights of a ``n_params`` GPT-like model (shape from :func:`course_lib.numbers.memory.shape_for_params`) per method.

    Chapter 5, *Quantization*.
    """
    shape = memory.shape_for_params(n_params)
    rows = []
    for method in methods:
        b = ptq.weights_at_precision(shape, method)
        bits = 8 * b["total"] / shape.n_params
        rows.append([describe(method), f"{bits:.3f}", f"{memory.gb(b['codes']):.3f}",
                     f"{memory.gb(b['overhead']):.3f}", f"{memory.gb(b['rest']):.3f}", f"{memory.gb(b['total']):.3f}"])
    return Table(["method", "bits / parameter", "codes (GB)", "scales + zeros (GB)", "FP32 rest (GB)", "total (GB)"],
                 rows, title=f"{shape.n_params:,} parameters: {shape.n_layers} layers, hidden {shape.hidden}, "
                             f"vocabulary {shape.vocab:,}")


def compare_configs(x: torch.Tensor, configs: Sequence[str | QuantConfig], title: str | None = None) -> Table:
    """Bits per value, distinct levels used and the error of each configuration on one tensor.

    Chapter 5, *Quantization*.
    """
    rows = []
    for config in configs:
        q = quant.quantize(x, config)
        stats = quant.error_stats(x, config)
        rows.append([describe(config), f"{q.bits_per_value:.3f}", f"{q.dequantize().unique().numel():,}",
                     f"{stats['rmse']:.5f}", f"{stats['max_error']:.5f}", f"{stats['snr_db']:.1f}"])
    return Table(["quantizer", "bits / value", "distinct values", "RMSE", "max error", "SNR (dB)"], rows, title=title)


def plot_error_vs_bits(x: torch.Tensor, families: dict[str, Sequence[str | QuantConfig]]) -> Any:
    """Error (RMSE) against stored bits per value, one line per family of configurations.

    Chapter 5, *Quantization*.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for name, configs in families.items():
        pts = [(quant.quantize(x, c).bits_per_value, quant.error_stats(x, c)["rmse"],
                describe(c).split(" ", 2)[-1]) for c in configs]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        for bits, rmse, label in _merged_labels(pts):
            ax.annotate(label, (bits, rmse), textcoords="offset points", xytext=(5, 4), fontsize=9)
    ax.set_yscale("log")
    ax.set_xlabel("stored bits per value (codes + scales + zero points)")
    ax.set_ylabel("RMSE against FP32 (log scale)")
    ax.set_title("Finer scales cost bits and buy accuracy")
    ax.legend()
    fig.tight_layout()
    return fig


def plot_number_line(x: torch.Tensor, config: str | QuantConfig) -> Any:
    """Values of a 1-D tensor, the grid one scale gives them, and where each value lands.

    Chapter 5, *Quantization*.
    """
    import matplotlib.pyplot as plt

    config = quant.get_config(config)
    if config.granularity != "tensor" or config.scheme == "nf4":
        raise ValueError("the number line shows one scale: use granularity='tensor' with absmax or zeropoint")
    q = quant.quantize(x, config)
    c = q.unpack()
    scale = float(c.scale.flatten()[0])
    offset = float(c.zero.flatten()[0]) if c.zero is not None else float(1 << (config.bits - 1))
    lo, hi = (0, (1 << config.bits) - 1) if config.scheme == "zeropoint" else (1, (1 << config.bits) - 1)
    grid = (torch.arange(lo, hi + 1).float() - offset) * scale
    back = q.dequantize()
    fig, ax = plt.subplots(figsize=(8, 2.8))
    ax.vlines(grid.numpy(), -0.25, 0.25, color="lightgrey", lw=1, label=f"the {grid.numel()} levels")
    ax.scatter(x.numpy(), [0.5] * x.numel(), color="tab:blue", zorder=3, label="FP32 values")
    ax.scatter(back.numpy(), [0.0] * x.numel(), color="tab:orange", zorder=3, label="after quantization")
    for a, b in zip(x.tolist(), back.tolist()):
        ax.annotate("", (b, 0.05), (a, 0.45), arrowprops={"arrowstyle": "->", "color": "grey", "lw": 0.6})
    ax.axvline(0.0, color="black", lw=0.6)
    ax.set_yticks([])
    ax.set_ylim(-0.4, 0.8)
    ax.set_xlabel("value")
    ax.set_title(f"{config.label}: scale = {scale:.4g}" + (f", zero point = {offset:.0f}" if c.zero is not None else ""))
    ax.legend(loc="upper left", fontsize=9, ncol=3)
    fig.tight_layout()
    return fig


def nf4_derivation() -> Table:
    """NF4's 16 levels: the probability each comes from, the normal quantile, the level, the paper's value.

    Chapter 5, *Quantization*.
    """
    levels = quant.nf4_codebook()
    probs, z = quant.nf4_quantiles()
    z_max = float(z.max())
    rows = []
    for i, level in enumerate(levels.tolist()):
        rows.append([f"{i:2d} ({i:04b})", f"{float(probs[i]):.6f}", f"{float(z[i]):+.6f}", f"{level:+.8f}",
                     f"{quant.NF4_PUBLISHED[i]:+.8f}", "yes" if level == quant.NF4_PUBLISHED[i] else "NO"])
    return Table(["code", "probability", "normal quantile z", f"level = z / {z_max:.4f}", "QLoRA paper",
                  "identical"], rows)


def plot_nf4_levels(w: torch.Tensor, block: int = quant.NF4_BLOCK) -> Any:
    """Weights divided by their block's absmax, with NF4's levels and a uniform INT4 grid over them.

    Chapter 5, *Quantization*.
    """
    import matplotlib.pyplot as plt

    flat = w.detach().float().reshape(-1, block)
    normed = (flat / flat.abs().amax(1, keepdim=True)).flatten()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.hist(normed.numpy(), bins=161, color="tab:blue", alpha=0.6, density=True,
            label=f"weights / block absmax (blocks of {block})")
    for i, level in enumerate(quant.nf4_codebook().tolist()):
        ax.axvline(level, color="tab:red", lw=1.0, label="NF4 levels" if i == 0 else None)
    for i, level in enumerate((torch.arange(-7, 8) / 7).tolist()):
        ax.axvline(level, color="black", lw=0.7, ls=":", label="INT4 absmax levels" if i == 0 else None)
    ax.set_xlabel("normalised weight")
    ax.set_ylabel("density")
    ax.set_title("NF4 puts its levels where normally distributed weights are dense")
    ax.legend(fontsize=9, loc="upper left")
    fig.tight_layout()
    return fig


def perplexity_table(rows: Sequence[tuple[str, float]], baseline: float, title: str | None = None) -> Table:
    """Labelled perplexities, each compared with ``baseline``.

    Chapter 5, *Quantization*.
    """
    return Table(["model", "perplexity", "change"],
                 [[label, f"{p:.4f}", f"{p / baseline - 1:+.2%}"] for label, p in rows], title=title)


def outlier_table(rows: Sequence[outliers.OutlierRow], title: str | None = None) -> Table:
    """The rows of :func:`~course_lib.compression.outliers.compare_methods` as a table.

    Chapter 5, *Quantization*.
    """
    return Table(["8-bit recipe", "relative error of X W^T", "X entries rounded to 0"],
                 [[r.method, f"{r.error:.2%}", "-" if r.zeroed != r.zeroed else f"{r.zeroed:.1%}"] for r in rows],
                 title=title)


def finetune_memory_table(rows: Iterable[lora.FinetuneMemory], n_model: int) -> Table:
    """Measured fine-tuning memory per method, trainable parameters as a share of the ``n_model``-parameter model.

    Chapter 5, *Quantization*.
    """
    headers = ["method", "trainable parameters", "weights (kB)", "gradients (kB)", "AdamW states (kB)", "total (kB)"]
    return Table(headers,
                 [[r.label, f"{r.trainable:,} ({r.trainable / n_model:.1%})", f"{r.weights / 1e3:,.0f}",
                   f"{r.gradients / 1e3:,.0f}", f"{r.optimizer / 1e3:,.0f}", f"{r.total_bytes / 1e3:,.0f}"]
                  for r in rows])


def _zeropoint_roundtrip(values: tuple[float, ...], index: int, bits: int) -> float:
    """What ``values[index]`` comes back as under per-tensor zero-point quantization with ``bits`` bits."""
    config = quant.QuantConfig(bits, "zeropoint", "tensor", scale_dtype="fp32")
    return float(quant.quantize_dequantize(torch.tensor(values), config)[index])


def _lora_parameters(n_in: int, n_out: int, rank: int) -> float:
    """Trainable parameters of one LoRA adapter, counted on a real LoRALinear (base on the meta device)."""
    return float(lora.count_trainable(lora.LoRALinear(nn.Linear(n_in, n_out, device="meta"), rank=rank))[0]
                 - n_in * n_out - n_out)


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "INT4 with zero points, groups of 128: each group stores one FP16 scale and one 4-bit zero point. "
        "How many bits does one weight cost, overhead included?",
        lambda: quant.bits_per_value((4096, 4096), "int4-g128"),
        unit="bits",
        rel_tol=1e-9,
        hint="4 bits of code, plus (16 + 4) bits shared by the 128 weights of the group.",
    ),
    q2=Question(
        "A tensor holds -1.0, 2.0 and 0.75. Quantized per tensor with 4-bit zero-point quantization "
        "(scale = (max - min) / 15, zero = round(-min / scale)), what value does 0.75 come back as?",
        lambda: _zeropoint_roundtrip((-1.0, 2.0, 0.75), 2, 4),
        rel_tol=1e-6,
        hint="scale = 3 / 15 = 0.2 and zero = 5; 0.75 / 0.2 = 3.75 rounds to 4, so the code is 9; decode (9 - 5) x 0.2.",
    ),
    q3=Question(
        "NF4 with double quantization (blocks of 64, their scales stored in 8 bits in blocks of 256, one FP32 "
        "constant per 256-block): bits per weight for a large matrix?",
        lambda: quant.bits_per_value((65536, 4096), "nf4-dq"),
        unit="bits",
        rel_tol=1e-4,
        hint="4 + 8/64 + 32/(64 x 256): the code, the 8-bit block scale, and the FP32 constant of each 256 blocks.",
    ),
    q4=Question(
        "How many trainable parameters does a rank-8 LoRA adapter add to one 4096 x 4096 linear layer?",
        lambda: _lora_parameters(4096, 4096, 8),
        unit="parameters",
        rel_tol=0,
        hint="A is rank x in and B is out x rank: 8 x 4096 + 4096 x 8.",
    ),
)


def _diagram_block() -> torch.Tensor:
    """Eight activations after a GELU, to two decimals: mostly positive (section 1)."""
    x = torch.randn(8, generator=torch.Generator().manual_seed(7))
    return torch.nn.functional.gelu(2 * x).round(decimals=2)


def _codes_panel(ax: Any, x: torch.Tensor, scheme: str, bits: int) -> None:
    """One scheme's number line: values, levels, codes, the scale and where 0.0 is."""
    from course_lib.base import diagrams

    colours, small = diagrams.COLOURS, diagrams.SMALL
    config = quant.QuantConfig(bits, scheme, "tensor", scale_dtype="fp32")
    c = quant.quantize(x, config).unpack()
    scale = float(c.scale.flatten()[0])
    zero = int(c.zero.flatten()[0]) if c.zero is not None else 1 << (bits - 1)
    lo, hi = (0 if scheme == "zeropoint" else 1), (1 << bits) - 1
    used = c.codes.flatten().int()
    first, last = int(used.min()), int(used.max())
    name = (lambda k: k - zero) if scheme == "absmax" else (lambda k: k)  # as written
    waste = [k for k in range(lo, hi + 1) if not first <= k <= last]
    for k in range(lo, hi + 1):
        tone = "#8C8C8C" if k in waste else colours["line"]
        ax.plot([(k - zero) * scale] * 2, [-0.1, 0.1], color=tone, lw=2)
        ax.text((k - zero) * scale, -0.2, f"{name(k)}", ha="center", va="top",
                fontsize=small, color=tone,
                fontweight="bold" if k == zero else "normal")
    ax.axhline(0, color=colours["line"], lw=0.8)
    for v, k in zip(x.tolist(), used.tolist()):
        ax.annotate("", ((k - zero) * scale, 0.13), (v, 0.62),
                    arrowprops={"arrowstyle": "->", "color": "grey", "lw": 0.8})
    ax.scatter(x.numpy(), [0.7] * x.numel(), color=colours["parameters"], zorder=3,
               s=30)
    mid = (first + last) // 2 - zero  # the scale: the step between two levels mid-range
    ax.annotate("", ((mid + 1) * scale, -0.5), (mid * scale, -0.5),
                arrowprops={"arrowstyle": "<->", "lw": 1})
    ax.text((mid + 0.5) * scale, -0.56, f"scale = {scale:.4g}", ha="center", va="top",
            fontsize=diagrams.FONT)
    for run, where in (([k for k in waste if k < first], "down"),
                       ([k for k in waste if k > last], "up")):
        if not run:
            continue
        left, right = (min(run) - zero - 0.5) * scale, (max(run) - zero + 0.5) * scale
        ax.axvspan(left, right, color=colours["wasted"], alpha=0.25, lw=0)
        ax.text((left + right) / 2, -0.5, f"{len(run)} of {hi - lo + 1} codes "
                f"wasted:\nno value of the block is {where} here", ha="center",
                va="top", fontsize=diagrams.FONT)
    ax.plot([0, 0], [-0.1, 0.95], color=colours["sign"], lw=1, ls=":")
    ax.text(-0.03 * float(x.abs().max()), 0.95, f"0.0 = code {name(zero)}"
            + " (the zero point z)" * (scheme == "zeropoint"), ha="right", va="center",
            fontsize=diagrams.FONT, color=colours["sign"])
    ax.set_ylim(-1.0, 1.1)
    ax.set_yticks([0.7, 0.0, -0.28], ["values", "levels", "codes"])
    ax.tick_params(axis="y", length=0)
    ax.grid(False)
    ax.spines["left"].set_visible(False)
    if scheme == "absmax":
        title = (f"absmax (symmetric): codes −{hi - zero} … {hi - zero}, "
                 f"scale = max|x| / {hi - zero} = {scale:.4g}")
    else:
        title = (f"zero-point (asymmetric): codes {lo} … {hi}, "
                 f"scale = (max − min) / {hi} = {scale:.4g},\n"
                 f"zero point z = round(−min / scale) = {zero}; x ≈ (code − z) × scale")
    ax.set_title(title, loc="left", fontsize=diagrams.FONT + 1)


def absmax_zeropoint_diagram(values: Sequence[float] | None = None,
                             bits: int = 4) -> Figure:
    """A block's values on the real line, mapped onto the codes of absmax and of
    zero-point quantization: the scale, the zero point, and the codes absmax wastes on a
    one-sided range.

    Chapter 5, *Quantization*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base import diagrams

    if values is None:
        x = _diagram_block()
    else:
        x = torch.tensor(list(values), dtype=torch.float32)
    if x.ndim != 1 or x.numel() < 2 or not bool(x.abs().max() > 0):
        raise ValueError("values must be at least 2 numbers, not all 0; "
                         f"got {values!r}")
    diagrams.use_course_style()
    fig, axes = plt.subplots(2, 1, figsize=(diagrams.COLUMN_INCHES, 6.4), sharex=True)
    for ax, scheme in zip(axes, ("absmax", "zeropoint")):
        _codes_panel(ax, x, scheme, bits)
    half = float(x.abs().max())
    axes[1].set_xlim(-half * 1.08, half * 1.08)
    axes[1].set_xlabel(f"real value (a block of {x.numel()} values, {bits}-bit codes)")
    fig.tight_layout()
    return fig
