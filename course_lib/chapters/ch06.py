"""Chapter 6's own plots and tables ("Pruning lab"); the pruning itself lives in :mod:`course_lib.compression.prune`,
:mod:`course_lib.compression.prune_structured` and :mod:`course_lib.compression.sparse_checkpoints`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt

from course_lib.base.plots import use_course_style
from course_lib.base.tables import Table
from course_lib.compression import prune
from course_lib.exercises.questions import Question

if TYPE_CHECKING:
    import torch
    from matplotlib.figure import Figure
    from torch import nn

__all__ = ["plot_layer_sparsity", "plot_sparsity_sweep", "sparsity_table", "sweep_table"]

#: One colour per pruning scope, the same in every plot of the chapter.
SCOPE_COLOURS = {"layer": "#4C72B0", "global": "#C44E52"}


def plot_sparsity_sweep(sweep: Mapping[str, Mapping[float, tuple[float, float]]], dense: float) -> Figure:
    """Perplexity against sparsity, one colour per scope, dashed before and solid after fine-tuning.

    ``sweep[scope][sparsity] = (perplexity after pruning, perplexity after fine-tuning)``; the
    dense model is the grey reference line.

    Chapter 6, *Pruning lab*.
    """
    use_course_style()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for scope, points in sweep.items():
        xs = sorted(points)
        colour = SCOPE_COLOURS.get(scope)
        ax.plot([100 * x for x in xs], [points[x][0] for x in xs], ls="--", marker="o", color=colour,
                label=f"{scope} threshold, pruned")
        ax.plot([100 * x for x in xs], [points[x][1] for x in xs], ls="-", marker="s", color=colour,
                label=f"{scope} threshold, pruned + fine-tuned")
    ax.axhline(dense, color="grey", lw=1.2, label=f"dense model ({dense:.2f})")
    ax.set_yscale("log")
    ax.set_xlabel("sparsity of the block weights (%)")
    ax.set_ylabel("test perplexity (log scale)")
    ax.set_title("Magnitude pruning of the course model, before and after fine-tuning")
    ax.legend(fontsize=9, loc="upper left")
    fig.tight_layout()
    return fig


def plot_layer_sparsity(masks: Mapping[str, torch.Tensor], title: str) -> Figure:
    """One bar per weight matrix: the share of its weights that ``masks`` prune.

    Chapter 6, *Pruning lab*.
    """
    use_course_style()
    names = [n.removeprefix("transformer.h.").removesuffix(".weight").replace(".", " ", 1)
             for n in masks]  # "0.attn.c_attn" -> "block 0 attn.c_attn"
    names = [f"block {n}" if n[:1].isdigit() else n for n in names]
    shares = [100 * float((~m).float().mean()) for m in masks.values()]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    ax.bar(range(len(shares)), shares, color="#C44E52")
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=9)
    ax.set_ylabel("weights pruned (%)")
    overall = 100 * sum(int((~m).sum()) for m in masks.values()) / sum(m.numel() for m in masks.values())
    ax.axhline(overall, color="grey", lw=1.2, ls="--", label=f"all matrices together ({overall:.0f} %)")
    ax.legend(fontsize=9, loc="lower right")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def sweep_table(sweep: Mapping[str, Mapping[float, tuple[float, float]]], dense: float,
                sparsities: Sequence[float] | None = None) -> Table:
    """The sweep as a table: perplexity after pruning and after fine-tuning, per scope and sparsity.

    Chapter 6, *Pruning lab*.
    """
    scopes = list(sweep)
    xs = sorted(sparsities if sparsities is not None else next(iter(sweep.values())))
    headers = ["sparsity"] + [f"{s}: {when}" for s in scopes for when in ("pruned", "fine-tuned")]
    rows = [[f"{x:.0%}"] + [f"{sweep[s][x][i]:.2f}" for s in scopes for i in (0, 1)] for x in xs]
    return Table(headers, rows, title=f"Test perplexity (dense model: {dense:.2f})")


def sparsity_table(model: nn.Module, title: str | None = None) -> Table:
    """Zeros per kind of prunable layer (summed over blocks), the prunable total, and the whole model.

    Chapter 6, *Pruning lab*.
    """
    kinds: dict[str, list[int]] = {}
    for name, w in prune.prunable_weights(model).items():
        kind = ".".join(p for p in name.split(".")[:-1] if not p.isdigit() and p not in ("transformer", "h"))
        zeros_total = kinds.setdefault(kind, [0, 0])
        zeros_total[0] += int((w == 0).sum())
        zeros_total[1] += w.numel()
    everything = [int((p == 0).sum()) for p in model.parameters()], [p.numel() for p in model.parameters()]
    rows = [[k, f"{t:,}", f"{z:,}", f"{z / t:.1%}"] for k, (z, t) in kinds.items()]
    z, t = sum(v[0] for v in kinds.values()), sum(v[1] for v in kinds.values())
    rows.append(["all prunable weights", f"{t:,}", f"{z:,}", f"{z / t:.1%}"])
    za, ta = sum(everything[0]), sum(everything[1])
    rows.append(["whole model (with embeddings, norms, biases)", f"{ta:,}", f"{za:,}", f"{za / ta:.1%}"])
    return Table(["weights", "count", "zeros", "sparsity"], rows, title=title)


def _csr_bytes(rows: int, cols: int, density: float) -> float:
    """Bytes of a float32 [rows, cols] matrix in CSR with int32 indices, measured on a real matrix."""
    import torch

    from course_lib.compression.sparse_checkpoints import storage_bytes

    n = rows * cols
    flat = torch.zeros(n)
    flat[torch.randperm(n, generator=torch.Generator().manual_seed(0))[:round(density * n)]] = 1.0
    return float(storage_bytes({"w": flat.view(rows, cols)}, "csr") - 2 * 8)  # less the stored shape


def _mlp_unit_parameters(hidden: int, units: int) -> float:
    """Parameters that go with ``units`` MLP units of one GPT-2 block of width ``hidden``, counted on models."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from course_lib.text.models import count_parameters

    def size(inner: int) -> int:
        config = GPT2Config(vocab_size=8, n_positions=8, n_embd=hidden, n_layer=1, n_head=1, n_inner=inner,
                            bos_token_id=0, eos_token_id=0)
        with torch.device("meta"):
            return count_parameters(GPT2LMHeadModel(config))

    return float(size(4 * hidden) - size(4 * hidden - units))


def _cubic(final: float, stages: int, stage: int) -> float:
    """The sparsity after ``stage`` of ``stages`` on the cubic schedule to ``final``."""
    return prune.cubic_schedule(final, stages)[stage - 1]


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "A 1024 x 1024 FP32 matrix is pruned to 90 % sparsity and stored in CSR: 4-byte values, 4-byte "
        "column indices, and 1025 row pointers of 4 bytes. How many bytes, against 4,194,304 dense?",
        lambda: _csr_bytes(1024, 1024, 0.1),
        unit="bytes",
        rel_tol=1e-5,
        hint="104,858 non-zeros (10 % of 1,048,576, rounded) x (4 + 4) bytes, plus 1025 x 4 bytes of row pointers.",
    ),
    q2=Question(
        "Gradual pruning to 80 % in 4 stages on the cubic schedule s = s_f (1 - (1 - t/n)^3): what sparsity "
        "(as a fraction) does the model have after stage 2?",
        lambda: _cubic(0.8, 4, 2),
        rel_tol=1e-9,
        hint="t/n = 2/4, so 0.8 x (1 - 0.5^3) = 0.8 x 0.875.",
    ),
    q3=Question(
        "GPT-2 small has width 768 and 3072 MLP units per block. How many parameters does one block lose "
        "when half of its MLP units are removed (weights and biases)?",
        lambda: _mlp_unit_parameters(768, 1536),
        unit="parameters",
        rel_tol=0,
        hint="Each unit takes its incoming column (768), its bias (1) and its outgoing row (768).",
    ),
)
