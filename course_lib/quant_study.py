"""Chapter 5's experiments: post-training quantization of the course model, QAT, QLoRA, model size.

Each function runs one measured experiment on the course model (or chapter 1's scaling-study
models) and returns plain results; tables and plots read those results, never typed-in numbers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase
from transformers.pytorch_utils import Conv1D

from course_lib import data, env, evaluation, memory, models, quant, scaling, training
from course_lib.quant import QuantConfig
from course_lib.quant_layers import (
    FLOAT_DTYPES,
    describe,
    effective_bits,
    finish_qat,
    model_bytes,
    prepare_qat,
    quantize_model,
    safetensors_bytes,
    weight_matrix,
)
from course_lib.tables import Table

#: The methods of chapter 5's post-training quantization table, in order.
PTQ_METHODS: tuple[str, ...] = ("fp32", "fp16", "bf16", "int8-channel", "int4-g128", "int4-g64", "int4-g32",
                                "nf4", "nf4-dq", "int3-g128")

#: Fine-tuning recipe of the QAT experiment: 40 short steps at 1/30 of the course model's peak rate (3e-3),
#: gentle enough that the same steps of plain FP32 training (the control) do not disturb the model.
QAT_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=1e-4, warmup_steps=5, seed=1)

#: Recipes of the QLoRA experiment (adapters take a larger rate than full fine-tuning, as usual).
QLORA_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=3e-3, warmup_steps=5, seed=2)
FULL_FT_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=5e-4, warmup_steps=5, seed=2)


#: How chapter 5 measures perplexity: windows of 128 tokens that do not overlap (half the work of the
#: model card's stride of 64, so that ten models fit in the chapter's time; every token is still scored once).
EVAL_WINDOW = EVAL_STRIDE = 128


def test_perplexity(model: nn.Module, tokenizer: PreTrainedTokenizerBase | None = None,
                    texts: Sequence[str] | None = None) -> float:
    """Perplexity on the course corpus's test split (or on ``texts``), windows of 128 without overlap."""
    return evaluation.perplexity(model, _tokenizer(tokenizer), split="test", texts=texts,
                             window=EVAL_WINDOW, stride=EVAL_STRIDE).perplexity


def _tokenizer(tokenizer: PreTrainedTokenizerBase | None) -> PreTrainedTokenizerBase:
    return tokenizer if tokenizer is not None else data.course_tokenizer()


# ---------------------------------------------------------------------------------------------
# Post-training quantization
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PTQResult:
    """One row of the PTQ table: what a method stores and how well the model still predicts."""

    method: str
    bits: float
    model_bytes: int
    file_bytes: int
    perplexity: float
    seconds: float


def ptq_study(model: nn.Module, methods: Sequence[str | QuantConfig] = PTQ_METHODS,
              tokenizer: PreTrainedTokenizerBase | None = None, *, progress: bool = True) -> list[PTQResult]:
    """Quantize ``model`` with each method; measure bytes, safetensors file size and perplexity.

    ``seconds`` is the time :func:`quantize_model` takes for the whole model. Perplexity is
    :func:`test_perplexity`: the fixed test split, windows of 128 without overlap.
    """
    tokenizer = _tokenizer(tokenizer)
    results = []
    for method in env.progress_bar(methods, len(methods), "quantizing", progress):
        start = time.perf_counter()
        q = quantize_model(model, method)
        seconds = time.perf_counter() - start
        ppl = test_perplexity(q, tokenizer)
        results.append(PTQResult(describe(method), effective_bits(q), model_bytes(q), safetensors_bytes(q),
                                 ppl, seconds))
    return results


def ptq_table(results: Sequence[PTQResult], title: str | None = None) -> Table:
    """The PTQ results as a table, each row compared with the first (FP32)."""
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


def plot_size_vs_perplexity(results: Sequence[PTQResult]) -> Any:
    """Model bytes against perplexity, one labelled point per method; the 4-bit cluster enlarged on the right."""
    import matplotlib.pyplot as plt

    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(11, 4.3), gridspec_kw={"width_ratios": [1.3, 1]})
    points = [(r.model_bytes / 1e6, r.perplexity, r.method) for r in results]
    four_bit = [p for p in points if "4" in p[2].split()[0]]
    colours = {r.method: f"C{i % 10}" for i, r in enumerate(results)}  # one colour per method in both panels
    for target, subset in ((ax, points), (zoom, four_bit)):
        for i, (x, y, label) in enumerate(sorted(_merged_labels(subset))):
            target.scatter(x, y, s=40, zorder=3, color=colours[label.split(" / ")[0]])
            if target is zoom or (x, y, label) not in four_bit:  # neighbours' labels above and below in turn
                target.annotate(label, (x, y), textcoords="offset points", xytext=(6, 5 if i % 2 else -13), fontsize=8)
        target.axhline(results[0].perplexity, color="grey", lw=0.8, ls="--", label=f"{results[0].method}")
        target.set_xlabel("model size in memory (MB)")
    if four_bit:
        xs, ys = [p[0] for p in four_bit], [p[1] for p in four_bit]
        pad_x, pad_y = 0.15 * (max(xs) - min(xs)) + 1e-3, 0.25 * (max(ys) - min(ys)) + 1e-3
        ax.add_patch(plt.Rectangle((min(xs) - pad_x, min(ys) - pad_y), max(xs) - min(xs) + 2 * pad_x,
                                   max(ys) - min(ys) + 2 * pad_y, fill=False, ls=":", color="black"))
        ax.annotate("4 bits: enlarged on the right", (max(xs) + pad_x, max(ys) + pad_y), textcoords="offset points",
                    xytext=(8, 10), fontsize=8)
        zoom.set_xlim(min(xs) - 2 * pad_x, max(xs) + 6 * pad_x)
        zoom.set_title("the 4-bit methods", fontsize=10)
    ax.set_xlim(right=max(p[0] for p in points) * 1.15)
    ax.set_ylabel("perplexity on the test split (lower is better)")
    ax.set_title("Size against quality after post-training quantization", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig


def plot_weight_histograms(model: nn.Module, layer: str, configs: Sequence[str | QuantConfig],
                           bins: int = 120) -> Any:
    """Histograms of one layer's weights before and after quantization with each configuration."""
    import matplotlib.pyplot as plt

    w = weight_matrix(model.get_submodule(layer)).detach().float().contiguous()
    fig, axes = plt.subplots(1, len(configs) + 1, figsize=(3.2 * (len(configs) + 1), 3.0), sharey=True)
    axes[0].hist(w.flatten().numpy(), bins=bins, color="tab:blue")
    axes[0].set_title("FP32", fontsize=10)
    for ax, config in zip(axes[1:], configs):
        q = quant.quantize_dequantize(w, config)
        ax.hist(q.flatten().numpy(), bins=bins, color="tab:orange")
        ax.set_title(describe(config), fontsize=10)
    for ax in axes:
        ax.set_xlabel("weight value")
    axes[0].set_ylabel("count")
    fig.suptitle(f"{layer}: {w.numel():,} weights", fontsize=11)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Quantization-aware training
# ---------------------------------------------------------------------------------------------

@dataclass
class FinetuneResult:
    """A fine-tuned model, its loss history and the seconds training took."""

    label: str
    model: nn.Module
    history: list[float]
    seconds: float


def finetune(model: nn.Module, label: str, recipe: training.Recipe, tokenizer: PreTrainedTokenizerBase | None = None,
             texts: Sequence[str] | None = None, progress: bool = True) -> FinetuneResult:
    """Train ``model`` in place with :func:`course_lib.models.train` (its trainable parameters only)."""
    tokenizer = _tokenizer(tokenizer)
    start = time.perf_counter()
    history = training.train(model, "gpt2", tokenizer, recipe, texts=texts, progress=progress, desc=label)
    return FinetuneResult(label, model, history, time.perf_counter() - start)


def qat(model: nn.Module, config: str | QuantConfig, recipe: training.Recipe = QAT_RECIPE,
        tokenizer: PreTrainedTokenizerBase | None = None, progress: bool = True) -> FinetuneResult:
    """Quantization-aware fine-tuning: train with fake-quantized weights, then store them quantized.

    Returns the really quantized model (:func:`quantize_model` of the trained float weights), whose
    forward pass equals the one the fake-quantized model trained with.
    """
    fake = prepare_qat(model, config)
    result = finetune(fake, f"QAT {describe(config)}", recipe, tokenizer, progress=progress)
    result.model = quantize_model(finish_qat(fake), config)
    return result


# ---------------------------------------------------------------------------------------------
# QLoRA in miniature
# ---------------------------------------------------------------------------------------------

def lowercase_split(split: str) -> list[str]:
    """The course corpus's ``split`` in lower case: a style the course model has never read."""
    return [t.lower() for t in data.load_corpus("course", split)]


# ---------------------------------------------------------------------------------------------
# Does quantization hurt larger models less?
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SizeRow:
    """One scaling-study model: size, validation loss in FP32 and after quantization."""

    n_params: int
    fp32_loss: float
    quantized_loss: float

    @property
    def perplexity_change(self) -> float:
        """Relative change of perplexity, exp(quantized loss - FP32 loss) - 1."""
        return math.exp(self.quantized_loss - self.fp32_loss) - 1


def quantization_by_size(configs: Sequence[str | QuantConfig] = ("int4-channel",),
                         tokenizer: PreTrainedTokenizerBase | None = None,
                         progress: bool = True) -> dict[str, list[SizeRow]]:
    """Chapter 1's scaling-study models (cached), each quantized with every config; validation losses.

    Returns the rows per configuration label, smallest model first.
    """
    tokenizer = _tokenizer(tokenizer)
    window = scaling.SCALING_RECIPE.seq_len
    labels = [describe(c) for c in configs]
    if len(set(labels)) < len(labels):
        raise ValueError(f"two configurations share a label ({', '.join(labels)}); compare configurations that "
                         "differ in bits, scheme or granularity")
    out: dict[str, list[SizeRow]] = {label: [] for label in labels}
    for t in scaling.scaling_models(tokenizer=tokenizer, progress=progress):
        n = models.count_parameters(t.model)
        fp32 = scaling.validation_loss(t.model, tokenizer, window)
        for config in configs:
            loss = scaling.validation_loss(quantize_model(t.model, config), tokenizer, window)
            out[describe(config)].append(SizeRow(n, fp32, loss))
    return out


def size_table(rows_by_config: dict[str, list[SizeRow]]) -> Table:
    """The :func:`quantization_by_size` results as one table: a row per model, a column per configuration."""
    labels = list(rows_by_config)
    first = rows_by_config[labels[0]]
    table_rows = []
    for i, r in enumerate(first):
        table_rows.append([f"{r.n_params:,}", f"{r.fp32_loss:.4f}"]
                          + [f"{rows_by_config[k][i].perplexity_change:+.2%}" for k in labels])
    return Table(["parameters", "FP32 validation loss"] + [f"{k}: perplexity change" for k in labels], table_rows)


# ---------------------------------------------------------------------------------------------
# A billion parameters at every precision
# ---------------------------------------------------------------------------------------------

def model_matrices(shape: memory.ModelShape) -> list[tuple[int, int]]:
    """The weight matrices (out, in) of a GPT-2-style model: the tied token embedding, then 4 per layer."""
    h = shape.hidden
    per_layer = [(3 * h, h), (h, h), (4 * h, h), (h, 4 * h)]
    return [(shape.vocab, h)] + per_layer * shape.n_layers


def weights_at_precision(shape: memory.ModelShape, method: str | QuantConfig) -> dict[str, float]:
    """Bytes of a model's weights under ``method``: quantized matrices (codes + overhead) and the FP32 rest.

    The same split as :func:`quantize_model`: matrices quantized, position embeddings, biases and
    layer norms kept in FP32. Returns codes, overhead (scales, zero points), rest and total bytes.
    """
    matrices = model_matrices(shape)
    n_matrix = sum(a * b for a, b in matrices)
    if isinstance(method, str) and method.strip().lower() in FLOAT_DTYPES:
        total = memory.weight_memory(shape.n_params, method)
        return {"codes": total, "overhead": 0.0, "rest": 0.0, "total": total}
    codes = overhead = 0.0
    for m in matrices:
        parts = quant.storage_bytes(m, method)
        codes += parts["codes"]
        overhead += sum(parts.values()) - parts["codes"]
    rest = memory.weight_memory(shape.n_params - n_matrix, "fp32")
    return {"codes": codes, "overhead": overhead, "rest": rest, "total": codes + overhead + rest}


def billion_table(n_params: float = 1e9, methods: Sequence[str] = PTQ_METHODS) -> Table:
    """Weights of a ``n_params`` GPT-like model (shape from :func:`course_lib.memory.shape_for_params`) per method."""
    shape = memory.shape_for_params(n_params)
    rows = []
    for method in methods:
        b = weights_at_precision(shape, method)
        bits = 8 * b["total"] / shape.n_params
        rows.append([describe(method), f"{bits:.3f}", f"{memory.gb(b['codes']):.3f}",
                     f"{memory.gb(b['overhead']):.3f}", f"{memory.gb(b['rest']):.3f}", f"{memory.gb(b['total']):.3f}"])
    return Table(["method", "bits / parameter", "codes (GB)", "scales + zeros (GB)", "FP32 rest (GB)", "total (GB)"],
                 rows, title=f"{shape.n_params:,} parameters: {shape.n_layers} layers, hidden {shape.hidden}, "
                             f"vocabulary {shape.vocab:,}")


# ---------------------------------------------------------------------------------------------
# One tensor, several quantizers
# ---------------------------------------------------------------------------------------------

def compare_configs(x: torch.Tensor, configs: Sequence[str | QuantConfig], title: str | None = None) -> Table:
    """Bits per value, distinct levels used and the error of each configuration on one tensor."""
    rows = []
    for config in configs:
        q = quant.quantize(x, config)
        stats = quant.error_stats(x, config)
        rows.append([describe(config), f"{q.bits_per_value:.3f}", f"{q.dequantize().unique().numel():,}",
                     f"{stats['rmse']:.5f}", f"{stats['max_error']:.5f}", f"{stats['snr_db']:.1f}"])
    return Table(["quantizer", "bits / value", "distinct values", "RMSE", "max error", "SNR (dB)"], rows, title=title)


def plot_error_vs_bits(x: torch.Tensor, families: dict[str, Sequence[str | QuantConfig]]) -> Any:
    """Error (RMSE) against stored bits per value, one line per family of configurations."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for name, configs in families.items():
        pts = [(quant.quantize(x, c).bits_per_value, quant.error_stats(x, c)["rmse"],
                describe(c).split(" ", 2)[-1]) for c in configs]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        for bits, rmse, label in _merged_labels(pts):
            ax.annotate(label, (bits, rmse), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("stored bits per value (codes + scales + zero points)")
    ax.set_ylabel("RMSE against FP32 (log scale)")
    ax.set_title("Finer scales cost bits and buy accuracy")
    ax.legend()
    fig.tight_layout()
    return fig


def plot_number_line(x: torch.Tensor, config: str | QuantConfig) -> Any:
    """Values of a 1-D tensor, the grid one scale gives them, and where each value lands."""
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
    fig, ax = plt.subplots(figsize=(9, 2.6))
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
    ax.legend(loc="upper left", fontsize=8, ncol=3)
    fig.tight_layout()
    return fig


def nf4_derivation() -> Table:
    """NF4's 16 levels: the probability each comes from, the normal quantile, the level, the paper's value."""
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
    """Weights divided by their block's absmax, with NF4's levels and a uniform INT4 grid over them."""
    import matplotlib.pyplot as plt

    flat = w.detach().float().reshape(-1, block)
    normed = (flat / flat.abs().amax(1, keepdim=True)).flatten()
    fig, ax = plt.subplots(figsize=(8.5, 3.6))
    ax.hist(normed.numpy(), bins=161, color="tab:blue", alpha=0.6, density=True,
            label=f"weights / block absmax (blocks of {block})")
    for i, level in enumerate(quant.nf4_codebook().tolist()):
        ax.axvline(level, color="tab:red", lw=1.0, label="NF4 levels" if i == 0 else None)
    for i, level in enumerate((torch.arange(-7, 8) / 7).tolist()):
        ax.axvline(level, color="black", lw=0.7, ls=":", label="INT4 absmax levels" if i == 0 else None)
    ax.set_xlabel("normalised weight")
    ax.set_ylabel("density")
    ax.set_title("NF4 puts its levels where normally distributed weights are dense")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def torch_crosscheck(model: nn.Module) -> Table:
    """Our codes against torch's own quantizers on every linear weight of ``model``.

    INT8 absmax per tensor and per channel against ``torch.quantize_per_tensor`` /
    ``torch.quantize_per_channel`` (qint8, zero point 0) with our scales; INT8 zero-point per
    channel against ``torch.quantize_per_channel`` (quint8) with our scales and zero points; INT4
    zero-point in groups of 64 against ``torch.fake_quantize_per_channel_affine`` with the groups
    laid out as channels. ``torch.quantize_per_channel`` adds the zero point *before* rounding
    (``round(zero + x / scale)``, in float32) where we, like ``fake_quantize``, round first; the
    last column redoes our codes in torch's order to show that this is the only difference.
    """
    import warnings

    configs = {
        "tensor": QuantConfig(8, "absmax", "tensor", scale_dtype="fp32"),
        "channel": QuantConfig(8, "absmax", "channel", scale_dtype="fp32"),
        "zero": QuantConfig(8, "zeropoint", "channel", scale_dtype="fp32"),
        "group": QuantConfig(4, "zeropoint", "group", 64, scale_dtype="fp32"),
    }
    same = dict.fromkeys(configs, 0)
    torch_order = 0
    total = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's quantized tensors are deprecated; still the reference
        for module in model.modules():
            if not isinstance(module, (nn.Linear, Conv1D)):
                continue
            w = weight_matrix(module).detach().float().contiguous()
            total += w.numel()
            c = quant.quantize(w, configs["tensor"]).unpack()
            ref = torch.quantize_per_tensor(w, float(c.scale), 0, torch.qint8).int_repr()
            same["tensor"] += int((c.codes.reshape(w.shape).int() - 128 == ref.int()).sum())
            c = quant.quantize(w, configs["channel"]).unpack()
            zeros = torch.zeros(w.shape[0], dtype=torch.long)
            ref = torch.quantize_per_channel(w, c.scale[:, 0].double(), zeros, 0, torch.qint8).int_repr()
            same["channel"] += int((c.codes.reshape(w.shape).int() - 128 == ref.int()).sum())
            c = quant.quantize(w, configs["zero"]).unpack()
            scale, zero = c.scale[:, 0], c.zero[:, 0].float()
            ref = torch.quantize_per_channel(w, scale.double(), zero.long(), 0, torch.quint8).int_repr()
            same["zero"] += int((c.codes.reshape(w.shape) == ref).sum())
            reordered = torch.clamp(torch.round(zero[:, None] + w * (1.0 / scale)[:, None]), 0, 255)
            torch_order += int((reordered.to(torch.uint8) == ref).sum())
            cfg = configs["group"]
            c = quant.quantize(w, cfg).unpack()
            ours = quant.quantize_dequantize(w, cfg).reshape(-1, cfg.group_size)
            ref = torch.fake_quantize_per_channel_affine(w.reshape(-1, cfg.group_size), c.scale.flatten(),
                                                         c.zero.flatten().int(), 0, 0, 15)
            same["group"] += int((ours == ref).sum())

    def share(n: int) -> str:
        return f"{n:,} of {total:,}"

    return Table(["our quantizer", "torch reference", "identical", "in torch's order of operations"], [
        ["INT8 absmax per tensor", "torch.quantize_per_tensor", share(same["tensor"]), "-"],
        ["INT8 absmax per channel", "torch.quantize_per_channel", share(same["channel"]), "-"],
        ["INT8 zero-point per channel", "torch.quantize_per_channel", share(same["zero"]), share(torch_order)],
        ["INT4 zero-point g64 (decoded)", "torch.fake_quantize_per_channel_affine", share(same["group"]), "-"],
    ])


def perplexity_table(rows: Sequence[tuple[str, float]], baseline: float, title: str | None = None) -> Table:
    """Labelled perplexities, each compared with ``baseline``."""
    return Table(["model", "perplexity", "change"],
                 [[label, f"{p:.4f}", f"{p / baseline - 1:+.2%}"] for label, p in rows], title=title)


def trend(rows: Sequence[SizeRow]) -> str:
    """One sentence on whether the perplexity change shrinks as the models grow (computed, not assumed)."""
    changes = [r.perplexity_change for r in rows]
    shrinking = all(b <= a for a, b in zip(changes, changes[1:]))
    first, last = rows[0], rows[-1]
    verdict = ("shrinks at every step" if shrinking else
               "does not shrink steadily" if changes[-1] < changes[0] else "does not shrink")
    return (f"From {first.n_params:,} to {last.n_params:,} parameters the perplexity change goes from "
            f"{changes[0]:+.2%} to {changes[-1]:+.2%}: it {verdict} across these {len(rows)} models.")


def style_table(models_by_name: dict[str, nn.Module], styled: Sequence[str], tokenizer: PreTrainedTokenizerBase | None = None,
                title: str | None = None) -> Table:
    """Perplexity of each model on ``styled`` test texts and on the original test split (windows of 128, no overlap)."""
    tokenizer = _tokenizer(tokenizer)
    rows = []
    for name, m in models_by_name.items():
        new = test_perplexity(m, tokenizer, texts=styled)
        old = test_perplexity(m, tokenizer)
        rows.append([name, f"{new:.2f}", f"{old:.3f}"])
    return Table(["model", "lower-case test", "original test"], rows, title=title)
