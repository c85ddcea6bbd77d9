"""Chapter 8's own tables and plots: the results of DDP runs, laid out for the page.

Chapter 8, *Data parallelism with DDP*, shows what :mod:`course_lib.parallel` measured: which
rows each rank trained on, the parameter checksums of every rank after every step, DDP's gradient
buckets and their timings, throughput per number of ranks, the memory each rank holds, and how
:mod:`course_lib.parallel.cost_model` predicts DDP to scale on GPUs.
The runs themselves are in :mod:`course_lib.parallel.ddp`; nothing here computes a result.
:func:`train_chapter`, the page's one launch, runs the library's workers in one process group.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from course_lib.base import diagrams
from course_lib.base.tables import Table
from course_lib.exercises.questions import Question
from course_lib.hardware import allreduce_bench
from course_lib.numbers import memory
from course_lib.parallel import buckets, cost_model, ddp, launch, ring

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["TimedRuns", "bucket_table", "checksum_table", "link_sweep_table", "memory_table",
           "plot_link_timeline", "plot_overlap", "plot_scaling", "scaling_table", "shard_table",
           "ring_allreduce_diagram", "throughput_table", "train_chapter"]


@dataclass(frozen=True)
class TimedRuns(buckets.ChapterRuns):
    """A rank's :class:`~course_lib.parallel.buckets.ChapterRuns`, and gloo timed right after them.

    ``gloo`` is gloo's all-reduce timed by the same ranks in the same process group right after
    the runs over the link: its ``fit()`` is the link that
    :func:`~course_lib.parallel.buckets.predicted_backward` needs, measured under the same
    conditions as the runs it predicts (a profile measured at another moment, on a machine busy
    then or now, is not).

    Chapter 8, *Data parallelism with DDP*.
    """

    gloo: allreduce_bench.AllReduceSweep


def train_chapter(runs: Sequence[dict[str, Any]], link_runs: Sequence[dict[str, Any]],
                  link_steps: int = 4) -> TimedRuns:
    """Worker: :func:`course_lib.parallel.buckets.train_all`, then gloo's all-reduce timed.

    The timing is :func:`course_lib.hardware.allreduce_bench.time_allreduce` (3 runs of each
    message size), in the process group the runs used.

    Chapter 8, *Data parallelism with DDP*.
    """
    done = buckets.train_all(runs, link_runs, link_steps)
    gloo = allreduce_bench.time_allreduce(launch.init_worker(), repeats=3)
    return TimedRuns(done.ddp, done.link, done.reducer, gloo)


def shard_table(global_batch: int, world_size: int) -> Table:
    """Which rows of each global batch every rank trains on (``DistributedSampler``, no shuffle).

    Chapter 8, *Data parallelism with DDP*.
    """
    rows = [[f"rank {r}", ", ".join(map(str, ddp.shard(global_batch, world_size, r)))]
            for r in range(world_size)]
    return Table(["rank", f"rows of the global batch (0-{global_batch - 1})"], rows,
                 title=f"A global batch of {global_batch} windows shared by {world_size} ranks")


def checksum_table(ranks: Sequence[ddp.DDPRank], single: ddp.TrainingRun) -> Table:
    """Per step: the loss over the global batch (DDP and one process), and every rank's checksum.

    Chapter 8, *Data parallelism with DDP*.
    """
    rows = []
    for step, loss in enumerate(single.history):
        ddp_loss = sum(r.history[step] for r in ranks) / len(ranks)
        sums = [r.checksums[step] for r in ranks]
        rows.append([step, f"{ddp_loss:.4f}", f"{loss:.4f}", *sums,
                     "yes" if len(set(sums)) == 1 else "NO"])
    headers = ["step", "loss, DDP", "loss, one process"]
    headers += [f"rank {r.rank} parameters" for r in ranks] + ["ranks identical"]
    return Table(headers, rows, title="After every step: loss and parameter checksum per rank")


def bucket_table(result: ddp.DDPRank, steps: Sequence[int] = (0, 1)) -> Table:
    """DDP's gradient buckets at some steps: how many, their sizes, and their all-reduce times.

    Chapter 8, *Data parallelism with DDP*.
    """
    rows = []
    for step in steps:
        buckets = [b for b in result.buckets if b.round == step]
        rows.append([step, len(buckets), ", ".join(f"{b.n_bytes / 1e3:,.0f}" for b in buckets),
                     f"{sum(b.n_bytes for b in buckets):,}",
                     ", ".join(f"{(b.done - b.ready) * 1e3:.1f}" for b in buckets)])
    return Table(["step", "buckets", "sizes (kB)", "bytes in all", "all-reduce (ms each)"], rows,
                 title=f"Rank {result.rank}'s gradient buckets, in the order they were reduced")


def plot_overlap(result: ddp.DDPRank, step: int = 2) -> Figure:
    """One training step of one rank on a time line: compute, and each bucket's all-reduce.

    Chapter 8, *Data parallelism with DDP*.
    """
    import matplotlib.pyplot as plt

    start = result.forwards[step]
    end = result.step_times[step]
    buckets = [b for b in result.buckets if b.round == step]
    fig, ax = plt.subplots(figsize=(9, 2.2 + 0.35 * len(buckets)))
    ax.barh(len(buckets), (end - start) * 1e3, left=0, color="#4C72B0", height=0.6,
            label="forward, backward, optimizer step")
    for i, b in enumerate(buckets):
        ax.barh(len(buckets) - 1 - i, (b.done - b.ready) * 1e3, left=(b.ready - start) * 1e3,
                color="#C44E52", height=0.6,
                label="all-reduce of a bucket" if i == 0 else None)
        ax.text((b.done - start) * 1e3, len(buckets) - 1 - i, f"  {b.n_bytes / 1e6:.1f} MB",
                va="center", fontsize=9)
    ax.set_yticks(range(len(buckets) + 1),
                  [f"bucket {b.index}" for b in reversed(buckets)] + ["compute"])
    ax.set_xlabel("milliseconds since the forward pass began")
    ax.set_title(f"Rank {result.rank}, step {step}: the buckets are reduced while "
                 "the backward pass goes on")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2, fontsize=9)
    fig.tight_layout()
    return fig


def plot_link_timeline(ranks: Sequence[buckets.LinkRun], step: int = 2) -> Figure:
    """One step of every rank over an emulated link: forward, backward, waiting, and each bucket.

    Chapter 8, *Data parallelism with DDP*.
    """
    import matplotlib.pyplot as plt

    if not ranks:
        raise ValueError("pass the LinkRun of every rank (e.g. [run_rank0, run_rank1]).")
    origin = min(r.steps[step].forward for r in ranks)
    fig, ax = plt.subplots(figsize=(7.8, 1.8 + 1.3 * len(ranks)))
    ms = lambda t: (t - origin) * 1e3  # noqa: E731 - milliseconds on the shared axis
    labels, ticks = [], []
    for i, run in enumerate(ranks):
        marks, transfers = run.steps[step], run.step_transfers(step)
        compute_end = transfers[-1].start if transfers else marks.backward_done
        y_compute, y_link = 2 * i + 1, 2 * i
        phases = [(marks.forward, marks.backward, "#4C72B0", "forward"),
                  (marks.backward, compute_end, "#55A868", "backward (computing gradients)"),
                  (compute_end, marks.backward_done, "#DDDDDD", "waiting for the last buckets"),
                  (marks.backward_done, marks.end, "#8172B2", "optimizer step")]
        for start, end, color, label in phases:
            ax.barh(y_compute, ms(end) - ms(start), left=ms(start), color=color, height=0.6,
                    label=label if i == 0 else None)
        for k, t in enumerate(transfers):
            ax.barh(y_link, ms(t.done) - ms(t.start), left=ms(t.start), height=0.6,
                    color="#C44E52" if k % 2 == 0 else "#E17C7E", edgecolor="white",
                    label="all-reduce of a bucket (emulated link)" if i == 0 and k == 0 else None)
        labels += [f"rank {run.rank}: link", f"rank {run.rank}: compute"]
        ticks += [y_link, y_compute]
    ax.set_yticks(ticks, labels)
    ax.set_xlabel("milliseconds since the step began")
    run = ranks[0]
    ax.set_title(f"Step {step} over {run.link} (x{run.scale:g}), bucket_cap_mb="
                 f"{run.bucket_cap_mb}:\nbuckets reduced while backward goes on")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2, fontsize=diagrams.SMALL)
    fig.tight_layout()
    return fig


def link_sweep_table(runs: Sequence[Sequence[buckets.LinkRun]], gloo: cost_model.Link) -> Table:
    """Per run (every rank's LinkRun): buckets per step, the link's time, backward measured and
    predicted.

    Chapter 8, *Data parallelism with DDP*.
    """
    rows = []
    for ranks in runs:
        measured, predicted = buckets.backward_medians(ranks, gloo)
        run = ranks[0]
        transfers = run.step_transfers(len(run.steps) - 1)
        link_ms = sum(t.emulated for t in transfers) * 1e3
        cap = "DDP's default" if run.bucket_cap_mb is None else f"{run.bucket_cap_mb:g}"
        rows.append([cap, f"{run.scale:g}", len(transfers), f"{link_ms:.0f}",
                     f"{measured * 1e3:.0f}", f"{predicted * 1e3:.0f}",
                     f"{(measured - predicted) / predicted:+.0%}"])
    return Table(["bucket_cap_mb", "link x", "buckets per step", "link time (ms)",
                  "backward, measured (ms)", "backward, predicted (ms)", "difference"], rows,
                 title=f"DDP over {runs[0][0].link}: the backward pass, median of the ranks and "
                       "the steps after the first")


def scaling_table(compute_seconds: float, grad_bytes: float, world_sizes: Sequence[int],
                  cluster: cost_model.Cluster, flat: cost_model.Link | str) -> Table:
    """Predicted DDP efficiency per GPU count: one flat ring over ``flat``, and NCCL's algorithms.

    Chapter 8, *Data parallelism with DDP*.
    """
    rows = []
    for n in world_sizes:
        one_ring = cost_model.data_parallel_step(compute_seconds, grad_bytes, n, flat)
        row = [n, cluster.nodes(n), f"{one_ring.efficiency:.1%}"]
        for algorithm in (*cost_model.ALGORITHMS, "best"):
            step = cost_model.data_parallel_step(compute_seconds, grad_bytes, n, cluster,
                                                 algorithm=algorithm)
            row.append(f"{step.efficiency:.1%}")
        rows.append(row)
    return Table(["GPUs", "nodes", f"flat ring over {cost_model.get_link(flat).name}",
                  "NCCL ring", "tree", "hierarchical", "best (NCCL's choice)"], rows,
                 title=f"Predicted DDP efficiency, {cluster.name}")


def throughput_table(runs: Mapping[int, Sequence[ddp.DDPRank]]) -> Table:
    """Training tokens per second for each number of ranks, from the second step to the last.

    Chapter 8, *Data parallelism with DDP*.
    """
    rows, base = [], None
    for n, results in runs.items():
        measured = [ddp.timings(r) for r in results]
        rate = min(m.tokens_per_second for m in measured)  # the ranks move in step
        share = sum(m.all_reduce_share for m in measured) / len(measured)
        base = base or rate
        rows.append([n, results[0].threads, f"{rate:,.0f}", f"{rate / base:.2f}x",
                     f"{share:.0%}"])
    return Table(["ranks", "threads per rank", "tokens/s", "speed-up", "time in all-reduce"],
                 rows, title="Training the course GPT-2 on this machine (global batch fixed)")


def memory_table(ranks: Sequence[ddp.DDPRank], single: ddp.TrainingRun,
                 estimate: memory.Breakdown) -> Table:
    """Bytes of parameters, gradients and optimizer states: each rank, one process, chapter 2.

    Chapter 8, *Data parallelism with DDP*.
    """
    expected = {"parameters": estimate.weights, "gradients": estimate.gradients,
                "optimizer states": estimate.optimizer_states + estimate.master_weights}
    rows = []
    for name, value in expected.items():
        rows.append([name, *[f"{r.state_bytes[name]:,}" for r in ranks],
                     f"{single.state_bytes[name]:,}", f"{value:,.0f}"])
    headers = ["", *[f"rank {r.rank}" for r in ranks], "one process",
               f"chapter 2's estimate ({estimate.gpus} GPUs)"]
    return Table(headers, rows, title="Model states in bytes: every rank holds all of them")


def plot_scaling(compute_seconds: float, grad_bytes: float, world_sizes: Sequence[int],
                 links: Sequence[cost_model.Link | str | cost_model.Cluster] = (
                     "PCIe 4.0 x16", "NVLink 4 (H100)", "InfiniBand NDR")) -> Figure:
    """Predicted DDP scaling against the number of GPUs: speedup (and the ideal line), efficiency.

    Chapter 8, *Data parallelism with DDP*.
    """
    import matplotlib.pyplot as plt

    sizes = sorted(world_sizes)
    if not links or not sizes:
        raise ValueError("pass at least one world size (e.g. [1, 2, 4, 8]) and one link name "
                         f"(from {list(cost_model.LINKS)}).")
    fig, (ax, eff) = plt.subplots(2, 1, figsize=(8, 7.6))
    ax.plot(sizes, sizes, ls="--", color="grey", label="ideal")
    for link in links:
        steps = [cost_model.data_parallel_step(compute_seconds, grad_bytes, n, link)
                 for n in sizes]
        label = (steps[0].link if isinstance(link, cost_model.Cluster)
                 else f"one flat ring over {steps[0].link}")
        ax.plot(sizes, [s.speedup for s in steps], marker="o", label=label)
        eff.plot(sizes, [100 * s.efficiency for s in steps], marker="o", label=label)
    for a in (ax, eff):
        a.set_xscale("log", base=2)
        a.set_xticks(sizes, [str(n) for n in sizes])
        a.set_xlabel("GPUs (log scale)")
    ax.set_yscale("log", base=2)
    ax.set_yticks(sizes, [str(n) for n in sizes])
    ax.set_ylabel("speedup over one GPU (log scale)")
    ax.set_title(f"DDP, {grad_bytes / 1e6:,.0f} MB of gradients, predicted")
    eff.set_ylabel("scaling efficiency (%)")
    eff.set_ylim(0, 105)
    eff.set_title(f"{compute_seconds * 1e3:.0f} ms of compute per step")
    ax.legend(fontsize=9)
    eff.legend(fontsize=9)
    fig.tight_layout()
    return fig


quiz = SimpleNamespace(
    q1=Question(
        "A ring all-reduce sums 1 GB (1e9 bytes) of gradients over 8 ranks. How many bytes does each rank "
        "send?",
        lambda: cost_model.ring_allreduce_bytes(1e9, 8),
        unit="bytes",
        rel_tol=1e-9,
        hint="2 (N - 1) chunks of S / N: 7 in the reduce-scatter, 7 in the all-gather, each 1e9 / 8 bytes.",
    ),
    q2=Question(
        "A 7B-parameter model is trained with BF16 mixed precision and Adam, with DDP on 8 GPUs. How many GB "
        "(1e9 bytes) of model states (weights, gradients, master weights, optimizer states) does each GPU hold?",
        lambda: memory.training_memory(7e9, "bf16-mixed", "adam", gpus=8).model_states / 1e9,
        unit="GB",
        rel_tol=0.01,
        hint="DDP copies everything to every GPU: 2 + 2 + 4 + 8 = 16 bytes per parameter, whatever the GPU count.",
    ),
    q3=Question(
        "By the alpha-beta model (cost_model.ring_allreduce_time), how many seconds does a ring all-reduce of "
        "14 GB (14e9 bytes) of gradients take over 8 GPUs linked by InfiniBand NDR, sent as one piece?",
        lambda: cost_model.ring_allreduce_time(14e9, 8, cost_model.LINKS["InfiniBand NDR"]),
        unit="s",
        rel_tol=0.02,
        hint="2 (N - 1) alpha + 2 (N - 1) / N x S / beta, with beta = 50e9 bytes/s per direction; "
             "the latency term is tiny here.",
    ),
)


#: Where :func:`ring_allreduce_diagram` puts each rank in a panel, round a square: its
#: chunks' bottom left (inches from the panel's) and the side its name is written on.
_RING_PLACES = {0: (0.75, 0.95, "left"), 1: (2.55, 0.95, "right"),
                2: (2.55, 0.15, "right"), 3: (0.75, 0.15, "left")}
_CELL = 0.3
_Sends = list[tuple[int, int, int]]  # (sender, chunk, receiver) of one step
_State = list[list[frozenset]]  # state[rank][chunk]: the ranks whose gradients it sums


def _ring_states(world: int) -> list[tuple[str, _Sends, _State]]:
    """The ring's panels: a title, the step's transfers and the state after it."""
    state = [[frozenset({r}) for _ in range(world)] for r in range(world)]
    panels = [(f"start: each rank's own gradient in {world} chunks", [], state)]
    schedule = ring.ring_schedule(world)
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(world - 1):
            sends = [(s, c, r) for p, t, s, c, r in schedule if (p, t) == (phase, step)]
            old, state = state, [list(row) for row in state]
            for sender, chunk, receiver in sends:  # everyone sends at once
                if phase == "reduce-scatter":
                    state[receiver][chunk] = old[receiver][chunk] | old[sender][chunk]
                else:
                    state[receiver][chunk] = old[sender][chunk]
            verb = "add" if phase == "reduce-scatter" else "keep"
            panels.append((f"{phase} step {step + 1}: send, {verb}", sends, state))
    return panels


def _ring_panel(ax: Any, x0: float, y0: float, title: str, sends: _Sends,
                state: _State, hues: list[str], panel: int) -> None:
    """One step of the ring: every rank's chunks, and the chunk each sends on."""

    world, width = len(state), len(state) * _CELL
    ax.text(x0 + diagrams.COLUMN_INCHES / 4, y0 + 1.66, title, ha="center", va="top",
            fontsize=diagrams.FONT, fontweight="bold")
    touched = {(s, c) for s, c, _ in sends} | {(r, c) for _, c, r in sends}
    for rank, (bx, by, side) in _RING_PLACES.items():
        for chunk in range(world):
            n = len(state[rank][chunk])
            diagrams.box(ax, x0 + bx + chunk * _CELL, y0 + by, _CELL, _CELL, str(n),
                         diagrams.tint(hues[chunk], 0.15 + 0.85 * n / world),
                         fontweight="bold" if n == world else "normal",
                         edge="black" if (rank, chunk) in touched else "white",
                         gid=f"ring-panel{panel}-rank{rank}-chunk{chunk}")
        left = side == "left"
        ax.text(x0 + bx + (-0.06 if left else width + 0.06), y0 + by + _CELL / 2,
                f"rank {rank}", ha="right" if left else "left", va="center",
                fontsize=diagrams.FONT)
    for sender, chunk, receiver in sends:
        (sx, sy, _), (rx, ry, _) = _RING_PLACES[sender], _RING_PLACES[receiver]
        if sy == ry:  # along the top or the bottom
            y = y0 + sy + _CELL / 2
            ends = (sx + width + 0.05, rx - 0.05) if sx < rx else (sx - 0.05,
                                                                   rx + width + 0.05)
            start, end, where = (x0 + ends[0], y), (x0 + ends[1], y), "above"
        else:  # down the right side or up the left
            x = x0 + sx + width / 2
            ends = (sy - 0.05, ry + _CELL + 0.05) if sy > ry else (sy + _CELL + 0.05,
                                                                   ry - 0.05)
            start, end = (x, y0 + ends[0]), (x, y0 + ends[1])
            where = "right" if sx > 1 else "left"
        diagrams.arrow(ax, start, end, f"chunk {chunk}", colour=hues[chunk], side=where,
                       fontsize=diagrams.SMALL, fontweight="bold")


def ring_allreduce_diagram() -> Figure:
    """The ring all-reduce on 4 ranks, step by step: reduce-scatter, then all-gather, a
    panel per step, each chunk saying how many ranks' gradients it sums.

    Chapter 8, *Data parallelism with DDP*.
    """

    world = len(_RING_PLACES)
    panels = _ring_states(world)
    height = 0.85 + 1.75 * world
    title = (f"Ring all-reduce on {world} ranks: {world - 1} steps of reduce-scatter, "
             f"{world - 1} of all-gather")
    fig, ax = diagrams.canvas(diagrams.COLUMN_INCHES, height, title)
    hues = [diagrams.COLOURS[k]
            for k in ("parameters", "gradients", "communication", "compute")]
    top = height - 0.45
    for i, (title, sends, state) in enumerate(panels):
        column, row = divmod(i, world)
        x0 = column * diagrams.COLUMN_INCHES / 2
        _ring_panel(ax, x0, top - (row + 1) * 1.75, title, sends, state, hues, i)
    factor = cost_model.ring_allreduce_bytes(1.0, world)
    sent = sum(1 for _, _, s, _, _ in ring.ring_schedule(world) if s == 0)
    note = (f"The number in a chunk: how many ranks' gradients it sums ({world}, in "
            f"bold: the full sum). Each step, every rank sends one chunk of "
            f"S / {world} bytes to its right-hand neighbour. After {world - 1} steps "
            f"of reduce-scatter each rank holds one full sum; after {world - 1} of "
            f"all-gather every rank holds all {world}.")
    bytes_sent = f"Each rank sends {sent} chunks: 2(N − 1)/N × S = {factor:g} S."
    ax.text(diagrams.COLUMN_INCHES / 2 + 0.25, top - world * 1.75 + 1.55,
            textwrap.fill(note, 46) + "\n" + bytes_sent, ha="left", va="top",
            fontsize=diagrams.FONT, linespacing=1.4)
    return fig
