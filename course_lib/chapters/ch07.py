"""Chapter 7's own tables and plots ("GPTQ lab"); GPTQ itself lives in :mod:`course_lib.compression.gptq`.

The published figures here are OPT's WikiText2 perplexities from Frantar, Ashkboos, Hoefler and
Alistarh, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained Transformers"
(ICLR 2023, arXiv 2210.17323), Table 3: per-row asymmetric grid, no groups, 128 calibration
sequences of 2048 tokens from C4. They were transcribed through secondary sources, not re-read
from the paper here; the chapter says so where it shows them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt

from course_lib.base import diagrams
from course_lib.base.plots import use_course_style
from course_lib.base.tables import Table
from course_lib.compression import ptq, quant
from course_lib.compression.quant import QuantConfig
from course_lib.exercises.questions import Question
from course_lib.numbers import memory

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["DEVICES", "PAPER_COLUMNS", "PAPER_OPT_WIKITEXT2", "devices_table", "paper_table",
           "plot_bits", "plot_calibration"]

#: The columns of the GPTQ paper's OPT table, in its order.
PAPER_COLUMNS: tuple[str, ...] = ("FP16", "RTN 4-bit", "GPTQ 4-bit", "RTN 3-bit", "GPTQ 3-bit")

#: OPT's WikiText2 perplexity in the GPTQ paper (Table 3), per model size: (parameters, row).
PAPER_OPT_WIKITEXT2: dict[str, tuple[float, dict[str, float]]] = {
    "OPT-125M": (125e6, dict(zip(PAPER_COLUMNS, (27.65, 37.28, 31.12, 1.3e3, 53.85)))),
    "OPT-350M": (350e6, dict(zip(PAPER_COLUMNS, (22.00, 25.94, 24.24, 64.57, 33.79)))),
    "OPT-175B": (175e9, dict(zip(PAPER_COLUMNS, (8.34, 10.54, 8.37, 7.3e3, 8.68)))),
}

#: Memory the device table compares against: a phone's RAM and a consumer GPU (binary gigabytes).
DEVICES: dict[str, int] = {
    "phone, 8 GB RAM": 8 * memory.GIB,
    "GPU, 24 GB (RTX 4090)": 24 * memory.GIB,
}

#: The formats of the device table: "fp16" casts everything, a QuantConfig the block matrices.
_FORMATS: dict[str, str | QuantConfig] = {
    "FP16": "fp16",
    "INT8 per channel": quant.get_config("int8-channel"),
    "GPTQ INT4 g128": quant.get_config("int4-g128"),
    "GPTQ INT3 g128": quant.get_config("int3-g128"),
}


def _perplexity(value: float) -> str:
    """Two decimals (three below 10, where the course model's small changes show), 1.3e3 above 1000."""
    if value >= 1000:
        return f"{value:.1e}".replace("e+0", "e")
    return f"{value:.3f}" if value < 10 else f"{value:.2f}"


def paper_table(course: Mapping[str, float] | None = None, models: Sequence[str] | None = None,
                course_label: str = "course model (1.3M)") -> Table:
    """The GPTQ paper's OPT rows (perplexity and change against FP16), with the course model's row below.

    ``course`` maps the paper's column names to the course model's perplexities (its "FP16"
    column holds the FP32 perplexity).

    Chapter 7, *GPTQ lab*.
    """
    names = list(PAPER_OPT_WIKITEXT2) if models is None else list(models)
    unknown = [n for n in names if n not in PAPER_OPT_WIKITEXT2]
    if unknown:
        raise ValueError(f"no published row for {unknown}; choose from {list(PAPER_OPT_WIKITEXT2)}")
    rows: list[tuple[str, Mapping[str, float]]] = [(n, PAPER_OPT_WIKITEXT2[n][1]) for n in names]
    if course is not None:
        missing = [c for c in PAPER_COLUMNS if c not in course]
        if missing:
            raise ValueError(f"the course row needs every column {list(PAPER_COLUMNS)}; missing {missing}")
        rows.append((course_label, course))
    out = []
    for label, row in rows:
        base = row["FP16"]
        cells = [_perplexity(base)] + [f"{_perplexity(row[c])} ({row[c] / base - 1:+.1%})" for c in PAPER_COLUMNS[1:]]
        out.append([label, *cells])
    headers = ["model", "FP16 (course: FP32)", *PAPER_COLUMNS[1:]]
    return Table(headers, out, title="Perplexity (change against the unquantized model); OPT: WikiText2, "
                                     "GPTQ paper Table 3; course model: its test stories")


def devices_table(n_params: Sequence[float] = (7e9, 70e9)) -> Table:
    """Weights of GPT-like models in FP16, INT8 and GPTQ's 4- and 3-bit g128 storage, against a phone and a GPU.

    Shapes come from :func:`course_lib.numbers.memory.shape_for_params`. The block matrices are quantized
    (codes plus every FP16 scale and packed zero point, chapter 5's accounting); the embedding,
    biases and norms stay in FP16, as GPTQ checkpoints keep them. Weights only: the KV cache,
    activations and the operating system need memory on top.

    Chapter 7, *GPTQ lab*.
    """
    rows = []
    for n in n_params:
        shape = memory.shape_for_params(n)
        for name, config in _FORMATS.items():
            total = ptq.weights_at_precision(shape, config, embedding=False, rest="fp16")["total"]
            fits = ["yes" if total <= cap else "no" for cap in DEVICES.values()]
            rows.append([f"{shape.n_params / 1e9:.1f}B", name, f"{8 * total / shape.n_params:.2f}",
                         f"{memory.gb(total):.1f}", *fits])
    return Table(["parameters", "format", "bits / parameter", "weights (GB)",
                  *[f"fits: {d}" for d in DEVICES]], rows,
                 title="Weights only, GPT-like shapes; embedding, biases and norms in FP16")


def _colour(label: str) -> str:
    """One colour per bit width in every plot of the chapter: 4 bits blue, 3 bits red, the rest grey."""
    return "C0" if "4-bit" in label else "C3" if "3-bit" in label else "grey"


def plot_calibration(sizes: Sequence[int], gptq_ppl: Mapping[str, Sequence[float]],
                     references: Mapping[str, float]) -> Figure:
    """Perplexity against the number of calibration sequences, one line per GPTQ setting, references dashed.

    ``gptq_ppl[label]`` holds one perplexity per entry of ``sizes``; ``references`` maps a label
    (FP32, round-to-nearest) to a perplexity drawn as a horizontal line.

    Chapter 7, *GPTQ lab*.
    """
    use_course_style()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for label, values in gptq_ppl.items():
        if len(values) != len(sizes):
            raise ValueError(f"{label}: {len(values)} perplexities for {len(sizes)} calibration sizes")
        ax.plot(list(sizes), list(values), marker="o", color=_colour(label), label=label)
    for label, value in references.items():
        ax.axhline(value, ls="-" if "FP" in label else "--", lw=1.2, color=_colour(label), label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(sizes), [str(s) for s in sizes])
    ax.set_xlabel("calibration sequences of 128 tokens (log scale)")
    ax.set_ylabel("test perplexity")
    ax.set_title("GPTQ on the course model: how much calibration text it needs")
    ax.legend(fontsize=diagrams.SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2,
              frameon=False)
    fig.tight_layout()
    return fig


def plot_bits(bits: Sequence[int], rtn: Sequence[float], gptq: Sequence[float], fp32: float) -> Figure:
    """Two panels, one above the other: the course model's perplexity change against bits
    (RTN, GPTQ); the paper's OPT sizes at 4 and 3 bits.

    Chapter 7, *GPTQ lab*.
    """
    if not len(bits) == len(rtn) == len(gptq):
        raise ValueError(f"one perplexity per bit width: {len(bits)} bit widths, {len(rtn)} RTN and "
                         f"{len(gptq)} GPTQ perplexities")
    use_course_style()
    fig, (ax, paper) = plt.subplots(2, 1, figsize=(8, 8))
    style = {"RTN": {"ls": "--", "marker": "o"}, "GPTQ": {"ls": "-", "marker": "s"}}
    for values, method in ((rtn, "RTN"), (gptq, "GPTQ")):
        ax.plot(list(bits), [100 * (v / fp32 - 1) for v in values], color="#444444",
                label="round to nearest" if method == "RTN" else method, **style[method])
    ax.axhline(0, color="grey", lw=1)
    ax.set_xticks(list(bits))
    ax.set_xlabel("bits per weight (per channel)")
    ax.set_ylabel("perplexity change vs FP32 (%)")
    ax.set_title("The course model (1.3M parameters), measured")
    ax.legend(fontsize=diagrams.SMALL)
    names = list(PAPER_OPT_WIKITEXT2)
    for column in PAPER_COLUMNS[1:]:
        change = [100 * (row[column] / row["FP16"] - 1) for _, row in PAPER_OPT_WIKITEXT2.values()]
        paper.plot(range(len(names)), change, color=_colour(column), label=column,
                   **style[column.split()[0]])
    paper.set_yscale("log")
    paper.set_xticks(range(len(names)), names)
    paper.set_xlabel("model (sizes not to scale)")
    paper.set_ylabel("perplexity change vs FP16 (%, log scale)")
    paper.set_title("OPT on WikiText2, as published (GPTQ paper)")
    paper.legend(fontsize=diagrams.SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4,
                 frameon=False)
    fig.tight_layout()
    return fig


def _feedback_update(w: tuple[float, float], step: float, hinv: tuple[tuple[float, float], ...]) -> float:
    """GPTQ's error feedback on a row of two weights: w2 after w1 is rounded, in the library's Cholesky form."""
    import torch

    u = torch.linalg.cholesky(torch.tensor(hinv, dtype=torch.float64), upper=True)  # H^-1 = U^T U
    error = w[0] - round(w[0] / step) * step
    return float(w[1] - error / u[0, 0] * u[0, 1])  # = w2 - error / [H^-1]_11 x [H^-1]_12


def _gpus_for_weights(n_params: float, config: str, capacity: int) -> float:
    """How many devices of ``capacity`` bytes hold ``n_params`` weights stored under ``config``."""
    bits = quant.bits_per_value((4096, 4096), config)
    return float(math.ceil(n_params * bits / 8 / capacity))


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "GPTQ keeps one Hessian H = 2 X X^T per linear layer. For a layer with 4096 inputs and 11008 outputs, "
        "calibrated on 128 x 2048 tokens, how many bytes does H take in FP32?",
        lambda: 4096 * 4096 * 4,
        unit="bytes",
        rel_tol=0,
        hint="H is inputs x inputs: it depends neither on the outputs nor on the number of calibration tokens.",
    ),
    q2=Question(
        "A row of two weights w = (0.30, 0.50) is quantized on a grid of step 0.25 (levels ..., 0.25, 0.50, ...). "
        "The inverse Hessian is [[2, 1], [1, 2]]. GPTQ rounds w1 first. What value does w2 hold just before "
        "it is rounded?",
        lambda: _feedback_update((0.30, 0.50), 0.25, ((2.0, 1.0), (1.0, 2.0))),
        rel_tol=1e-9,
        hint="w1 rounds to 0.25, an error of 0.05; w2 moves by -0.05 / [H^-1]_11 x [H^-1]_12 = -0.05 / 2 x 1.",
    ),
    q3=Question(
        "A 70B-parameter model is stored with GPTQ at 4 bits in groups of 128 (an FP16 scale and a 4-bit zero "
        "point per group; count every parameter at that rate). How many GPUs of 24 GiB does it take just to "
        "hold the weights?",
        lambda: _gpus_for_weights(70e9, "int4-g128", 24 * memory.GIB),
        unit="GPUs",
        rel_tol=0,
        hint="4.15625 bits per weight: 70e9 x 4.15625 / 8 bytes, about 36.4 GB, against 24 x 2^30 bytes per GPU.",
    ),
)
