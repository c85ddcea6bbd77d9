"""Chapter 9's own tables and plots: sharded runs and the ZeRO arithmetic, laid out for the page.

Chapter 9, *Sharding with ZeRO and FSDP*, shows what :mod:`course_lib.parallel.fsdp` measured
(bytes per rank, peaks, collectives, equality with one process) next to the ZeRO formulas of
:func:`course_lib.numbers.memory.training_memory`, and the published figures it is checked against.
The runs themselves are in :mod:`course_lib.parallel.fsdp`; nothing here trains.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from course_lib.base.tables import Table
from course_lib.chapters.ch09_diagrams import fsdp_layer_diagram, zero_stages_diagram
from course_lib.exercises.questions import Question
from course_lib.numbers import memory
from course_lib.parallel import at_scale, cost_model, ddp, fsdp, rank_estimate, wire, zero

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from course_lib.planner.model import PlanResult

__all__ = ["STAGE", "ZERO_PAPER_GB", "at_scale_table", "by_hand_table", "by_run",
           "collective_wire_table",
           "equality_table", "factor_table", "fsdp_layer_diagram", "fsdp_paper_table",
           "label", "memory_table",
           "offload_table", "plot_memory", "link_table", "plot_reduction", "prefetch_table",
           "reshard_table", "volume_table", "wire_table",
           "zero_paper_table", "zero_stages_diagram"]

#: The ZeRO stage whose formula each strategy is compared with.
STAGE = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3, "hsdp": 3}
#: The ZeRO paper's worked example (Figure 1): GB per GPU for 7.5B parameters on 64 GPUs.
ZERO_PAPER_GB = {0: 120, 1: 31.4, 2: 16.6, 3: 1.9}
_STATES = ("parameters", "gradients", "optimizer states")

Run = Sequence[fsdp.ShardedRank]  # one run: the result of every rank, in rank order


def by_run(results: Sequence[Sequence[fsdp.ShardedRank]]) -> list[list[fsdp.ShardedRank]]:
    """Turn ``launch``'s answer (per rank, a list of runs) into a list of runs (each per rank).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    return [list(ranks) for ranks in zip(*results)]


def label(run: Sequence) -> str:
    """A run's name on the page: strategy, ranks, and the options that change it.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    r = run[0]
    if isinstance(r, zero.ZeroRank):
        return f"{'DDP' if r.stage == 0 else f'ZeRO-{r.stage} by hand'}, {r.world_size} ranks"
    name = f"{r.strategy}, {r.world_size} ranks"
    if r.strategy == "hsdp":
        name += f", factor {r.shard_factor}"
    if r.offload:
        name += ", offload"
    if r.mixed_precision:
        name += ", bf16"
    if r.prefetch != "implicit":
        name += f", {r.prefetch} prefetch"
    if r.reshard_after_forward:
        name += f", reshard to {r.reshard_after_forward}"
    return name


def _estimate(run: Run) -> memory.Breakdown:
    """Chapter 2's estimate for this run: FP32 Adam, the strategy's ZeRO stage over its ranks."""
    r = run[0]
    gpus = r.shard_factor if r.strategy == "hsdp" else r.world_size
    return memory.training_memory(r.n_params, "fp32", gpus=gpus, zero_stage=STAGE[r.strategy])


def _span(values: Sequence[int]) -> str:
    low, high = min(values), max(values)
    return f"{low / 1e6:.2f}" if low == high else f"{low / 1e6:.2f}-{high / 1e6:.2f}"


def memory_table(runs: Sequence[Run]) -> Table:
    """Per rank, after a step: bytes of each model state, their total, the formula, the peak.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    rows = []
    for run in runs:
        held = [sum(r.state_bytes.values()) for r in run]
        gathered = [r.peak_parameter_bytes - r.state_bytes["parameters"] for r in run]
        rows.append([label(run), *[_span([r.state_bytes[k] for r in run]) for k in _STATES],
                     _span(held), f"{_estimate(run).model_states / 1e6:.2f}",
                     f"{STAGE[run[0].strategy]}", _span(gathered)])
    return Table(["run", "parameters", "gradients", "optimizer states", "held", "ZeRO formula",
                  "stage", "+ gathered at peak"], rows,
                 title="MB per rank between steps (min-max over the ranks), and what the "
                       "forward pass gathers on top")


def plot_memory(runs: Sequence[Run]) -> Figure:
    """Stacked bars of each run's bytes per rank, the gathered peak hatched, the formula marked.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base.diagrams import SMALL

    fig, ax = plt.subplots(figsize=(8, 5))  # no wider than the book's column: 9 pt stays 9
    colors = {"parameters": "#4C72B0", "gradients": "#DD8452", "optimizer states": "#55A868"}
    for i, run in enumerate(runs):
        worst = max(run, key=lambda r: sum(r.state_bytes.values()))
        bottom = 0.0
        for name in _STATES:
            value = worst.state_bytes[name] / 1e6
            ax.bar(i, value, bottom=bottom, color=colors[name], label=name if i == 0 else None)
            bottom += value
        extra = (worst.peak_parameter_bytes - worst.state_bytes["parameters"]) / 1e6
        ax.bar(i, extra, bottom=bottom, color="white", edgecolor="#4C72B0", hatch="//",
               label="parameters gathered at the peak" if i == 0 else None)
        ax.plot(i, _estimate(run).model_states / 1e6, "k_", markersize=28, mew=2,
                label="ZeRO formula" if i == 0 else None)
    ax.set_xticks(range(len(runs)), [label(r).replace(", ", "\n", 1) for r in runs],
                  fontsize=SMALL)
    ax.set_ylabel("MB held by the fullest rank")
    ax.set_title("Model states per rank: what each strategy shards, and what gathering adds")
    ax.legend(fontsize=SMALL, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    fig.tight_layout()
    return fig


def volume_table(runs: Sequence[Run], step: int = 1) -> Table:
    """Bytes of every kind of collective in one step, counted, against the formula, in Psi.

    Psi is the bytes of the model's FP32 parameters; the ZeRO paper's accounting (an all-reduce
    moves twice its tensor).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    kinds = ("all-gather", "reduce-scatter", "all-reduce", "broadcast")
    rows = []
    for run in runs:
        r = run[0]
        counted = r.volume[step]
        psi = 4 * r.n_params
        expected = fsdp.expected_volume(r.unit_numels, r.strategy, r.world_size, r.shard_factor,
                                        param_bytes=2 if r.mixed_precision else 4)
        rows.append([label(run), *[f"{counted.get(k, 0) / 1e6:.2f}" for k in kinds],
                     f"{sum(counted.values()) / psi:.2f}", f"{sum(expected.values()) / psi:.2f}",
                     "yes" if counted == expected else "NO"])
    return Table(["run", *[f"{k} (MB)" for k in kinds], "counted (Psi)", "formula (Psi)",
                  "equal"], rows,
                 title=f"Communication of rank 0 in step {step}, in MB and in units of Psi "
                       f"(the FP32 parameters' bytes)")


def equality_table(runs: Sequence[Run], single: ddp.TrainingRun,
                   initial: torch.Tensor) -> Table:
    """How far each run's final parameters are from one process's, absolutely and per update,
    and its first gradient (:func:`~course_lib.parallel.ddp.gradient_gap`).

    The relative error is ||theta_run - theta_one|| / ||theta_one - theta_start||: the share of
    the training update that the run got wrong. The gradient is compared too, because Adam
    hides a gradient scaled by a constant (a sum where a mean belongs): its norm ratio would be
    the number of ranks.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    update = (single.parameters - initial).norm()
    rows = []
    for run in runs:
        gap = run[0].parameters - single.parameters
        grad = ddp.gradient_gap(run[0].gradient, single.gradient)
        rows.append([label(run), f"{float(gap.abs().max()):.1e}",
                     f"{float(gap.norm() / update):.1e}",
                     f"{run[0].history[-1] - single.history[-1]:+.4f}",
                     f"{grad.max_difference:.1e}", f"{grad.norm_ratio:.6f}"])
    return Table(["run", "max |difference|", "relative to the update",
                  "last loss - one process'", "gradient: max |difference|",
                  "gradient norm ratio"],
                 rows, title="Final parameters and first gradient against one process trained "
                             "on the global batch (rank 0's loss is its own half of the batch)")


def factor_table(runs: Sequence[Run], step: int = 1) -> Table:
    """Hybrid sharding side by side: copies of the model, bytes per rank, bytes moved per step.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    rows = []
    for run in runs:
        r = run[0]
        moved = r.volume[step]
        rows.append([r.shard_factor, r.world_size // r.shard_factor,
                     f"{sum(r.state_bytes.values()) / 1e6:.2f}",
                     f"{r.peak_parameter_bytes / 1e6:.2f}",
                     f"{(moved.get('all-gather', 0) + moved.get('reduce-scatter', 0)) / 1e6:.2f}",
                     f"{moved.get('all-reduce', 0) / 1e6:.2f}"])
    return Table(["sharding factor", "copies of the model", "held per rank (MB)",
                  "peak parameters (MB)", "within a shard group (MB)", "across groups (MB)"],
                 rows, title=f"{runs[0][0].world_size} ranks, from replicated (factor 1) "
                             "to fully sharded: memory against communication")


def offload_table(n_params: Sequence[float] = (1.3e9, 7e9, 13e9), gpus: int = 8,
                  links: Sequence[str] = ("PCIe 4.0 x16", "PCIe 5.0 x16")) -> Table:
    """What FSDP's CPU offload saves on each GPU (ZeRO-3, BF16 mixed) and what its copies cost.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    rows = []
    for n in n_params:
        b = memory.training_memory(n, "bf16-mixed", gpus=gpus, zero_stage=3)
        rows.append([f"{n / 1e9:g}B", f"{b.model_states / 1e9:.1f}",
                     f"{b.temporaries / 1e9:.2f}",
                     *[f"{cost_model.offload_transfer_time(n, gpus, link):.2f}" for link in links]])
    return Table(["model", "model states per GPU (GB)", "with offload: gathered layers (GB)",
                  *[f"copies per step, {link} (s)" for link in links]], rows,
                 title=f"ZeRO-3 on {gpus} GPUs with and without FSDP's CPU offload of "
                       "parameters, gradients and optimizer states (chapter 2's estimator; "
                       "alpha-beta model of the host link)")


def zero_paper_table() -> Table:
    """The ZeRO paper's 7.5B / 64 GPU example, chapter 2's estimator, and DeepSpeed's estimators.

    DeepSpeed's ``estimate_zero2_model_states_mem_needs`` (no offload) counts 2Ψ + 18Ψ/N at
    stage 2 since its 2024 fix (pull request #5099) and counted 4Ψ + 16Ψ/N before it, the figure
    older guides still quote; stage 3 is 18Ψ/N in both (its largest-layer term left out here).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    n, gpus = 7.5e9, 64
    # 18 bytes a parameter: 16 of the paper plus 4 of FP32 gradients for accumulation
    since_2024 = {2: 2 * n + 18 * n / gpus, 3: 18 * n / gpus}
    before = {2: 4 * n + 16 * n / gpus, 3: 18 * n / gpus}
    rows = []
    for stage, paper in ZERO_PAPER_GB.items():
        ours = memory.training_memory(n, "bf16-mixed", gpus=gpus, zero_stage=stage).model_states
        deepspeed = [f"{d[stage] / 1e9:.1f}" if stage in d else "-"
                     for d in (since_2024, before)]
        rows.append([stage, f"{paper:g}", f"{ours / 1e9:.1f}", *deepspeed])
    return Table(["ZeRO stage", "paper (GB)", "chapter 2's estimator (GB)",
                  "DeepSpeed's estimator since 2024, 18 bytes (GB)",
                  "DeepSpeed's estimator before 2024 (GB)"], rows,
                 title="Model states per GPU: 7.5B parameters, mixed precision Adam, 64 GPUs")


def plot_reduction(max_gpus: int = 1024) -> Figure:
    """How many times less each ZeRO stage holds per GPU than DDP, against the number of GPUs.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base.diagrams import SMALL

    counts = [2**k for k in range(max_gpus.bit_length()) if 2**k <= max_gpus]
    base = memory.training_memory(1e9, "bf16-mixed").model_states
    fig, ax = plt.subplots(figsize=(8, 4))
    for stage, color in ((1, "#4C72B0"), (2, "#DD8452"), (3, "#55A868")):
        ratio = [base / memory.training_memory(1e9, "bf16-mixed", gpus=g,
                                               zero_stage=stage).model_states for g in counts]
        ax.plot(counts, ratio, "o-", color=color, label=f"stage {stage}")
    for limit, text in ((4, "stage 1 tends to 16/4 = 4x"), (8, "stage 2 tends to 16/2 = 8x")):
        ax.axhline(limit, color="grey", ls="--", lw=1)
        ax.text(counts[0], limit * 1.08, text, fontsize=SMALL, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("GPUs sharing the model states (N)")
    ax.set_ylabel("reduction against DDP (x)")
    ax.set_title("ZeRO's savings: stages 1 and 2 level off, stage 3 grows like N")
    ax.legend()
    fig.tight_layout()
    return fig


def fsdp_paper_table() -> Table:
    """The FSDP paper's results as the lecture notes state them, each with where it comes from.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    notes = "lecture notes, from the paper's figures; not re-read from its text"
    rows = [
        ["FSDP gives performance comparable to DDP and near-linear TFLOPS scaling", "-",
         "Zhao et al. 2023, abstract"],
        ["T5 611M and 2.28B: FSDP and DDP perform about the same", "611M, 2.28B", notes],
        ["T5 11.3B: DDP runs out of memory; FSDP trains it (faster in 16-bit)", "11.3B", notes],
        ["T5 11B from 8 to 512 A100 80GB: per-GPU TFLOPS about 7 % lower (batch 8 and 16)",
         "11B", notes],
    ]
    return Table(["claim", "model size", "source"], rows,
                 title="Published FSDP results (Zhao et al. 2023), as checked here")


#: The temporaries FSDP2's tracker names that the estimate and the planner hold for full
#: sharding: the gathered units (the root unit and blocks), their all-gather buffers and the
#: reduce-scatter's FP32 gradients.
_GATHERED = ("Unsharded Param", "All Gather", "Reduce Scatter")


def at_scale_table(rank: at_scale.RankMemory, planned: PlanResult) -> Table:
    """Rank r of a full-size run measured on fake ranks next to chapter 2's estimate and the
    planner (GB): model states after the step, gathered units and buffers at the peak, other
    temporaries, activations when the forward pass ends, the peak; measured over planned.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    est = {c.category: c.estimate for c in rank_estimate.compare([rank])}
    m = planned.memory
    states = ("parameters", "gradients", "optimizer states")
    rows = [
        ("model states after the step", sum(est[k] for k in states),
         m.parameters + m.gradients + m.optimizer, sum(rank.end[k] for k in states)),
        ("gathered units and their buffers at the peak", est["temporaries"], m.buffers,
         sum(rank.detail[k] for k in _GATHERED)),
        ("other temporaries at the peak (activation gradients, logits)", 0.0, 0.0,
         sum(v for k, v in rank.detail.items() if k in ("Temp", "Inputs", "Buffer"))),
        ("activations when the forward pass ends", est["activations"], m.activations,
         rank.after_forward["activations"]),
        ("the peak", est["total"], m.total, rank.peak_total),
    ]
    body = [[what, f"{e / 1e9:.2f}", f"{p / 1e9:.2f}", f"{x / 1e9:.2f}",
             f"{x / p:.2f}" if p else "-"] for what, e, p, x in rows]
    lay = rank.layout
    return Table(["what rank 0 holds", "chapter 2 (GB)", "planner (GB)", "measured (GB)",
                  "measured / planner"], body,
                 title=f"Rank {rank.rank} of {lay.world_size}, {rank.model}: "
                       f"{rank.n_params / 1e9:.2f}B parameters, full sharding"
                       f"{f' x tensor {lay.tp}' if lay.tp > 1 else ''}"
                       f"{' with sequence parallelism' if lay.sequence_parallel else ''}, "
                       "measured on a fake process group")


def _lowest_zero_stage(n_params: float, gpus: int, capacity: float) -> float:
    """The lowest ZeRO stage whose model states (BF16 mixed, Adam) fit ``capacity`` bytes per GPU."""
    for stage in memory.ZERO_STAGES:
        if memory.training_memory(n_params, "bf16-mixed", gpus=gpus,
                                  zero_stage=stage).model_states <= capacity:
            return float(stage)
    return math.inf


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "A 13B-parameter model is trained with BF16 mixed precision and Adam on 8 GPUs of 40 GB (4e10 "
        "bytes). Counting model states only, which is the lowest ZeRO stage (0, 1, 2 or 3) that fits?",
        lambda: _lowest_zero_stage(13e9, 8, 40e9),
        rel_tol=0,
        hint="Stage 1: 4 x 13 + 12 x 13 / 8 GB; stage 2: 2 x 13 + 14 x 13 / 8 GB; stage 3: 16 x 13 / 8 GB.",
    ),
    q2=Question(
        "With ZeRO stage 3, how many GB (1e9 bytes) does one training step of a 1B-parameter model move "
        "when parameters and gradients travel in BF16? Use the ZeRO paper's accounting.",
        lambda: sum(fsdp.expected_volume([10**9], "zero3", 8, param_bytes=2,
                                         reduce_bytes=2).values()) / 1e9,
        unit="GB",
        rel_tol=1e-9,
        hint="An all-gather for forward, another for backward, a reduce-scatter of the gradients: Psi each.",
    ),
    q3=Question(
        "64 GPUs train a 7B model (BF16 mixed, Adam) with hybrid sharding, sharding factor 8. How many GB of "
        "model states does each GPU hold?",
        lambda: memory.training_memory(7e9, "bf16-mixed", gpus=8, zero_stage=3).model_states / 1e9,
        unit="GB",
        rel_tol=0.01,
        hint="The states are sharded over the 8 GPUs of a group (16 bytes x 7e9 / 8) and replicated across "
             "the 8 groups, which saves nothing per GPU.",
    ),
)


def by_hand_table(runs: Sequence[Sequence[zero.ZeroRank]]) -> Table:
    """ZeRO-1 and -2 by hand against DDP in float64: bytes held per rank, and bit-for-bit equality.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    reference = runs[0][0].parameters
    rows = []
    for run in runs:
        r = run[0]
        rows.append([label(run), *[_span([x.state_bytes[k] for x in run]) for k in _STATES],
                     f"{r.history[-1]:.4f}",
                     "yes" if all(torch.equal(x.parameters, reference) for x in run) else "NO"])
    return Table(["run", *[f"{k} (MB)" for k in _STATES], "last loss",
                  "parameters bit for bit DDP's"], rows,
                 title=f"Float64, {len(runs[0][0].history)} steps, clipping off: MB per rank "
                       "after the first step")


def _psi_bytes(r: object) -> int:
    """Bytes of the run's parameters in its own dtype (float64 by hand, float32 with FSDP)."""
    return (8 if isinstance(r, zero.ZeroRank) else 4) * r.n_params


def wire_table(runs: Sequence[Sequence], step: int = 1) -> Table:
    """Per rank and step: the collectives, the paper's count, the ring formula, the bytes sent.

    The ring formula is gloo's (its reduce-scatter sends what an all-reduce does); "measured" is
    what rank 0's TCP sockets sent in that step.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    rows = []
    for run in runs:
        r = run[0]
        psi = _psi_bytes(r)
        formula = wire.step_ring_sent(r.volume[step], r.world_size, "gloo")
        sent = r.wire[step].sent
        kinds = ", ".join(f"{k} {v / (2 if k == 'all-reduce' else 1) / 1e6:.2f}"
                          for k, v in sorted(r.volume[step].items()))
        rows.append([label(run), kinds, f"{sum(r.volume[step].values()) / psi:.2f}",
                     f"{formula / 1e6:.3f}", f"{sent / 1e6:.3f}", f"{sent - formula:,.0f}",
                     f"{sent / psi:.2f}"])
    return Table(["run", "collectives: tensor MB", "paper (Psi)", "ring formula sent (MB)",
                  "measured sent (MB)", "excess (bytes)", "measured (Psi)"], rows,
                 title=f"Bytes on the wire of rank 0 in step {step}, against the ZeRO paper's "
                       "count and the ring formula (Psi: the parameters' bytes)")


def collective_wire_table(run: Sequence[zero.ZeroRank], step: int = 1) -> Table:
    """Every collective of one by-hand ZeRO step: tensor, ring formula (NCCL, gloo), bytes sent.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    r = run[0]
    per_step = len(r.collectives) // len(r.history)
    rows = []
    for c in r.collectives[step * per_step:(step + 1) * per_step]:
        gloo = wire.ring_sent(c.kind, c.n_bytes, c.group_size, "gloo")
        rows.append([c.kind, f"{c.n_bytes:,}",
                     f"{wire.ring_sent(c.kind, c.n_bytes, c.group_size):,.0f}",
                     f"{gloo:,.0f}", f"{c.wire.sent:,}", f"{(c.wire.sent - gloo) / 48:.0f}"])
    return Table(["collective", "tensor (bytes)", "ring, NCCL (bytes)", "ring, gloo (bytes)",
                  "measured sent (bytes)", "gloo headers (48 bytes)"], rows,
                 title=f"{label(run)}: each collective of step {step}, rank 0")


def prefetch_table(runs: Sequence[Run]) -> Table:
    """FSDP's all-gathers in forward: how many started ahead, and the time the thread waited.

    Medians over the steps after the first (which also initialises FSDP).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    rows = []
    for run in runs:
        r = run[0]
        later = r.exposed[1:]
        rows.append([r.prefetch, f"{later[0]['gathers']:.0f}", f"{later[0]['ahead']:.0f}",
                     f"{statistics.median(e['forward'] for e in later) * 1e3:.1f}",
                     f"{statistics.median(e['backward'] for e in later) * 1e3:.1f}",
                     f"{ddp.median_step(r.step_times) * 1e3:.0f}"])
    return Table(["prefetch", "all-gathers in forward", "started ahead",
                  "waited in forward (ms)", "waited in backward (ms)", "median step (ms)"], rows,
                 title="FSDP2 on 2 ranks: the time the training thread spends issuing, waiting "
                       "for and copying out all-gathers (rank 0)")


def reshard_table(runs: Sequence[Run], step: int = 1) -> Table:
    """``reshard_after_forward`` as True or a whole number: bytes kept after forward, gathers.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    rows = []
    for run in runs:
        r = run[0]
        gathers = r.group_volume[step]
        rows.append([str(r.reshard_after_forward or True),
                     f"{r.after_forward_bytes / 1e6:.2f}",
                     *[f"{gathers.get(f'all-gather over {n}', 0) / 1e6:.2f}"
                       for n in (r.world_size, 2)]])
    n = runs[0][0].world_size
    return Table(["reshard_after_forward", "parameters held after forward (MB)",
                  f"all-gathered over {n} ranks (MB)", "all-gathered over 2 ranks (MB)"], rows,
                 title=f"{n} ranks: what each rank keeps between forward and backward, and "
                       "where backward gathers")


def link_table(emulated: Sequence[Run], plain: Sequence[Run]) -> Table:
    """Runs on emulated links: the link time predicted, the collectives' time measured, the steps.

    The predicted time is what the emulator added to a step's collectives (the alpha-beta model
    times its scale); the measured one is how long those collectives took from call to
    completion (gloo's own work included). Medians over the steps after the first (rank 0),
    next to the median steps of the same runs without emulation.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    rows = []
    for run, base in zip(emulated, plain):
        r = run[0]
        crossing = {k: v for k, v in r.group_volume[1].items()
                    if int(k.rsplit(" ", 1)[1]) > 2 or k.startswith("all-reduce")}
        rows.append([label(run), f"{sum(crossing.values()) / 1e6:.2f}",
                     f"{statistics.median(r.link_delays[1:]) * 1e3:.0f}",
                     f"{statistics.median(r.link_seconds[1:]) * 1e3:.0f}",
                     f"{ddp.median_step(base[0].step_times) * 1e3:.0f}",
                     f"{ddp.median_step(r.step_times) * 1e3:.0f}"])
    return Table(["run", "crosses the network per step (MB, paper's count)",
                  "link time predicted (ms)", "collectives measured (ms)",
                  "median step, no emulation (ms)", "median step, emulated (ms)"], rows,
                 title="Two nodes of two ranks: NVLink inside a node, 100G Ethernet between "
                       "nodes (both slowed by the same factor)")
