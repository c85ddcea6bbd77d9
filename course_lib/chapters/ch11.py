"""Chapter 11's own tables and plots: tensor, sequence and pipeline parallelism, laid out for the page.

Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*, shows what
:mod:`course_lib.parallel` measured: a tensor-parallel block against one process (its
collectives, parameters and activations per rank), the pipeline's schedules on a time line and
their bubble, a 2-D mesh of ranks, activation checkpointing's cost; and how published runs lay
out their GPUs, with the course's memory estimator and α–β model. The runs themselves are in
:mod:`course_lib.parallel.tensor_parallel`, :mod:`~course_lib.parallel.pipeline`,
:mod:`~course_lib.parallel.mesh` and :mod:`~course_lib.parallel.checkpointing`; nothing here
computes a result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from course_lib.base import diagrams
from course_lib.base.tables import Table
from course_lib.numbers import memory
from course_lib.parallel import cost_model, pipeline

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from course_lib.parallel.checkpointing import CheckpointingCost
    from course_lib.parallel.mesh import MeshRank
    from course_lib.parallel.tensor_parallel import TPBlockCheck

__all__ = ["LAYOUTS", "LLAMA3_TABLE4", "Layout", "Llama3Run", "bubble_table",
           "checkpointing_table", "collectives_text", "held_table", "layout_table",
           "llama3_table", "mesh_table", "plot_pipeline", "replayed_ranks", "tp_link_table",
           "tp_table", "wire_table"]


def collectives_text(counts: dict[str, int]) -> str:
    """Collectives counted per kind, as the tables write them: "2 all-gather, 2
    reduce-scatter" for ``{"all-gather": 2, "reduce-scatter": 2}``, "-" for none.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "-"


def tp_table(checks: Sequence[TPBlockCheck], names: Sequence[str]) -> Table:
    """Per tensor-parallel run (rank 0): gaps from one process, collectives, bytes per rank.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    rows = []
    for name, r in zip(names, checks):
        torch_gap = "-" if r.torch_grad_gap != r.torch_grad_gap else f"{r.torch_grad_gap:.1e}"
        rows.append([name, f"{r.output_gap:.1e}", f"{r.grad_gap:.1e}", torch_gap,
                     collectives_text(r.forward), collectives_text(r.backward),
                     f"{r.parameter_bytes:,} ({r.parameter_bytes_formula:,})",
                     f"{r.activation_bytes:,} ({r.activation_bytes_formula:,.0f})",
                     f"{r.single_activation_bytes:,}"])
    headers = ["run", "output vs one process", "gradients vs one process",
               "vs parallelize_module", "collectives forward", "collectives backward",
               "parameter bytes (formula)", "activation bytes (formula)",
               "activations, one process"]
    return Table(headers, rows, title=f"One GPT-2 block split over {checks[0].degree} ranks "
                                      "(rank 0; max |difference| in the first three columns)")


def replayed_ranks(ranks: Sequence[pipeline.PipelineRank],
                   durations: Sequence[tuple[float, float]] | None = None
                   ) -> list[pipeline.PipelineRank]:
    """Every rank's last measured step, replayed with free links and given durations.

    Each rank keeps the order in which its schedule ran its forwards and backwards;
    ``durations`` gives each stage's (forward, backward) seconds (default: 1 and 2 on every
    stage, equal stages). :func:`course_lib.parallel.pipeline.bubble` of the result is the
    bubble of that idealised step.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    durations = list(durations or [(1.0, 2.0)] * len(ranks))
    if len(durations) != len(ranks):
        raise ValueError(f"give one (forward, backward) pair per stage: {len(ranks)} stages, "
                         f"{len(durations)} pairs.")
    unit = [[pipeline.Event(e.kind, e.micro_batch, 0.0,
                            durations[i][0 if e.kind == "F" else 1], e.saved)
             for e in r.steps[-1]] for i, r in enumerate(ranks)]
    timelines = pipeline.replay(unit)
    return [dataclasses.replace(r, steps=(tuple(t),)) for r, t in zip(ranks, timelines)]


def bubble_table(runs: Sequence[Sequence[pipeline.PipelineRank]]) -> Table:
    """Per pipeline run: the idle share of each rank, measured, replayed, and the formula.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    rows = []
    for ranks in runs:
        b = pipeline.bubble(ranks)
        equal = pipeline.bubble(replayed_ranks(ranks)).measured
        rows.append([b.schedule, b.micro_batches, ", ".join(f"{x:.2f}" for x in b.per_rank),
                     f"{b.measured:.2f}", f"{b.replayed:.2f}", f"{equal:.3f}",
                     f"{b.theory:.3f}"])
    headers = ["schedule", "micro-batches m", "idle per rank (measured)", "bubble, measured",
               "replayed (measured durations, free links)", "replayed (equal stages)",
               "(p - 1) / (m + p - 1)"]
    return Table(headers, rows, title=f"The bubble of a {runs[0][0].stages}-stage pipeline")


def wire_table(checks: Sequence[TPBlockCheck], names: Sequence[str]) -> Table:
    """Per run and pass (rank 0): its collectives, the ring formulas' bytes, the wire's.

    What a ring sends by the formula as NCCL runs it and as gloo does (whose reduce-scatter
    is an all-reduce), and what this rank sent over TCP: gloo's bytes and its headers.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    rows = []
    for name, r in zip(names, checks):
        for i, (phase, counts) in enumerate((("forward", r.forward),
                                             ("backward", r.backward))):
            rows.append([name, phase, collectives_text(counts), f"{r.ring_nccl[i]:,.0f}",
                         f"{r.ring_gloo[i]:,.0f}", f"{r.wire_sent[i]:,}"])
    headers = ["run", "pass", "collectives", "ring, NCCL (bytes)", "ring, gloo (bytes)",
               "sent on the wire, gloo (bytes)"]
    return Table(headers, rows, title="Bytes one rank sends per pass, one block on "
                                      f"{checks[0].degree} ranks")


def held_table(runs: Sequence[Sequence[pipeline.PipelineRank]]) -> Table:
    """Per pipeline run and stage: blocks, parameters, the most micro-batches held, and bytes.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    rows = []
    for ranks in runs:
        for r in ranks:
            rows.append([r.schedule, r.micro_batches, r.rank, ", ".join(map(str, r.layers)),
                         f"{r.n_params:,}", r.peak_held, f"{r.peak_bytes / 1e6:.2f}"])
    headers = ["schedule", "m", "stage", "blocks", "parameters", "micro-batches held at most",
               "activations held at most (MB)"]
    return Table(headers, rows, title="What each stage holds for backward at its peak")


def plot_pipeline(ranks: Sequence[pipeline.PipelineRank]) -> Figure:
    """One pipeline step per rank on a time line, measured and replayed with equal stages.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    import matplotlib.pyplot as plt

    colours = {"F": "#4C72B0", "B": "#55A868"}
    fig, axes = plt.subplots(2, 1, figsize=(8.4, 1.6 + 1.1 * len(ranks) * 2))
    panels = [(ranks, 1e3, "milliseconds since the step began",
               f"measured: {ranks[0].schedule}, {ranks[0].micro_batches} micro-batches"),
              (replayed_ranks(ranks), 1.0, "time in units of one forward",
               "replayed with equal stages (forward 1, backward 2) and free links")]
    for ax, (shown, scale, xlabel, title) in zip(axes, panels):
        origin = min(e.start for r in shown for e in r.steps[-1])
        for r in shown:
            y = len(shown) - 1 - r.rank
            for e in r.steps[-1]:
                left, width = (e.start - origin) * scale, (e.end - e.start) * scale
                ax.barh(y, width, left=left, height=0.6, color=colours[e.kind],
                        edgecolor="white")
                ax.text(left + width / 2, y, str(e.micro_batch), ha="center", va="center",
                        color="white", fontsize=diagrams.SMALL)
        ax.set_yticks(range(len(shown)),
                      [f"stage {len(shown) - 1 - i}" for i in range(len(shown))])
        ax.set_xlabel(xlabel)
        ax.set_title(title, fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    fig.legend(handles, ["forward of micro-batch k", "backward of micro-batch k"],
               loc="upper center", ncol=2, fontsize=diagrams.SMALL)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def mesh_table(ranks: Sequence[MeshRank]) -> Table:
    """Every rank of a (dp, tp) mesh: its place, its groups, its losses, its gap from one process.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    rows = [[r.rank, f"{r.dp_rank} of {r.dp}", f"{r.tp_rank} of {r.tp}", list(r.tp_group),
             list(r.dp_group), ", ".join(f"{x:.4f}" for x in r.history),
             r.collectives.get("all-reduce", 0), f"{r.parameter_gap:.1e}"] for r in ranks]
    headers = ["rank", "replica", "tensor rank", "tp group", "dp group", "loss per step",
               "tensor-parallel all-reduces per step", "max |parameters - one process|"]
    return Table(headers, rows, title=f"{len(ranks)} ranks as a {ranks[0].dp} x {ranks[0].tp} "
                                      "(dp x tp) mesh")


def checkpointing_table(cost: CheckpointingCost) -> Table:
    """Activations kept and step time, without and with checkpointing, measured and estimated.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    rows = [["without", f"{cost.saved_bytes / 1e6:.2f}", f"{cost.estimate / 1e6:.2f}",
             cost.block_forwards, f"{cost.seconds * 1e3:.0f}", "1.00"],
            ["with", f"{cost.checkpointed_bytes / 1e6:.2f}",
             f"{cost.checkpointed_estimate / 1e6:.2f}", cost.checkpointed_block_forwards,
             f"{cost.checkpointed_seconds * 1e3:.0f}",
             f"{cost.time_ratio:.2f} (FLOPs: {cost.expected_time_ratio:.2f})"]]
    headers = ["checkpointing", "activations kept (MB)", "chapter 2's estimate (MB)",
               "block forwards", "step (ms, fastest)", "time ratio"]
    return Table(headers, rows, title=f"The course GPT-2 shape, batch {cost.batch} x "
                                      f"{cost.seq_len} tokens, FP32")


@dataclasses.dataclass(frozen=True)
class Layout:
    """A published run's model shape and its GPUs: tensor, pipeline and data parallel degrees.

    ``params`` is the model's size as its paper states it; ``block_params`` the parameters of
    one transformer block from its shape; ``tflops`` what one GPU sustains, as reported;
    ``network`` the link between nodes (a name of ``cost_model.LINKS``); ``sharded_data``
    whether its data parallelism shards gradients and optimizer states as FSDP does, keeping
    the weights whole after the forward (ZeRO stage 2's accounting).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    name: str
    source: str
    params: float
    layers: int
    hidden: int
    block_params: float
    vocab: int
    seq_len: int
    tp: int
    pp: int
    gpus: int
    gpu: str
    node: str
    network: str
    tflops: float
    tied: bool = True
    sharded_data: bool = False

    @property
    def dp(self) -> int:
        """Data-parallel replicas: the GPUs over one replica's tensor x pipeline GPUs."""
        return self.gpus // (self.tp * self.pp)

    @property
    def counted(self) -> float:
        """Parameters from the shape: every block, the embedding, an untied output layer."""
        return (self.layers * self.block_params
                + (1 if self.tied else 2) * self.vocab * self.hidden)

    def states_per_gpu(self) -> float:
        """Bytes of BF16 mixed-precision Adam states a GPU holds, sharded as the run did."""
        share = self.counted / (self.tp * self.pp)
        return memory.training_memory(share, "bf16-mixed", gpus=self.dp,
                                      zero_stage=2 if self.sharded_data else 0).model_states


def _megatron_block(h: int) -> float:
    return 12 * h * h + 13 * h  # GPT: attention 4h^2 + 4h, MLP 8h^2 + 5h, two norms 4h


def _llama_block(h: int, kv: int, ffn: int) -> float:
    return 2 * h * h + 2 * h * kv + 3 * h * ffn + 2 * h  # GQA, SwiGLU, two RMSNorms


#: Two published runs (the papers' tables): Megatron-LM's 1T GPT, whose training iterations
#: were benchmarked (its training was estimated, not run), and Llama 3 405B's 8K-context
#: stage on 16,384 GPUs (Table 4, context parallelism 1), trained on RoCE at 400 Gb/s with
#: FSDP sharding gradients and optimizer states.
LAYOUTS = (
    Layout("Megatron-LM GPT, 1T", "narayanan2021megatron", 1008e9, 128, 25600,
           _megatron_block(25600), 51200, 2048, 8, 64, 3072, "A100", "NVLink 3 (A100)",
           "InfiniBand HDR", 163e12),
    Layout("Llama 3 405B", "dubey2024llama3", 405e9, 126, 16384,
           _llama_block(16384, 8 * 128, 53248), 128000, 8192, 8, 16, 16384, "H100",
           "NVLink 4 (H100)", "RoCE 400G", 400e12, tied=False, sharded_data=True),
)


@dataclasses.dataclass(frozen=True)
class Llama3Run:
    """One row of Llama 3's Table 4, as the paper prints it: degrees, batch, throughput.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    gpus: int
    tp: int
    cp: int
    pp: int
    dp: int
    seq_len: int
    batch_per_dp: int
    tokens_per_batch: str
    tflops: int
    mfu: str


#: Llama 3 405B's scaling configurations and MFU (Dubey et al. 2024, Table 4): the 8K-context
#: stage on 8,192 and 16,384 H100s, and the long-context stage with context parallelism 16.
LLAMA3_TABLE4 = (
    Llama3Run(8192, 8, 1, 16, 64, 8192, 32, "16M", 430, "43%"),
    Llama3Run(16384, 8, 1, 16, 128, 8192, 16, "16M", 400, "41%"),
    Llama3Run(16384, 8, 16, 16, 8, 131072, 16, "16M", 380, "38%"),
)


def llama3_table(runs: Sequence[Llama3Run] = LLAMA3_TABLE4) -> Table:
    """Llama 3's Table 4, column for column as the paper prints it.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    rows = [[f"{r.gpus:,}", r.tp, r.cp, r.pp, r.dp, f"{r.seq_len:,}", r.batch_per_dp,
             r.tokens_per_batch, r.tflops, r.mfu] for r in runs]
    headers = ["GPUs", "TP", "CP", "PP", "DP", "Seq. Len.", "Batch size/DP", "Tokens/Batch",
               "TFLOPs/GPU", "BF16 MFU"]
    return Table(headers, rows, title="Llama 3 405B: scaling configurations and MFU, "
                                      "as printed in its paper (Table 4)")


def layout_table(layouts: Sequence[Layout] = LAYOUTS) -> Table:
    """Each run's degrees, and what a GPU holds of BF16 mixed-precision Adam states.

    Per GPU: with tensor parallelism alone, with tensor x pipeline (every data-parallel
    replica whole), and as the run sharded its data parallelism (:meth:`Layout.states_per_gpu`).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    rows = []
    for run in layouts:
        per_gpu = memory.training_memory(run.counted / (run.tp * run.pp), "bf16-mixed")
        tp_only = memory.training_memory(run.counted / run.tp, "bf16-mixed")
        data = "FSDP (grads, Adam)" if run.sharded_data else "replicated"
        rows.append([run.name, f"{run.counted / 1e9:,.0f}B ({run.params / 1e9:,.0f}B)",
                     f"{run.gpus:,} {run.gpu}", run.tp, run.pp, f"{run.dp} {data}",
                     f"{tp_only.model_states / 1e9:,.0f}",
                     f"{per_gpu.model_states / 1e9:,.0f}",
                     f"{run.states_per_gpu() / 1e9:,.1f}"])
    headers = ["run", "parameters from the shape (paper)", "GPUs", "TP (in a node)",
               "PP (across nodes)", "DP (outermost)", "model states per GPU, TP only (GB)",
               "TP x PP (GB)", "as run (GB)"]
    return Table(headers, rows, title="How two published runs lay out their GPUs")


def tp_link_table(layouts: Sequence[Layout] = LAYOUTS, micro_batch: int = 1) -> Table:
    """A TP block's activation all-reduces against its compute, inside a node and across nodes.

    Per block and micro-batch, forward: two all-reduces of ``s b h`` BF16 values over the
    ``tp`` GPUs (the α–β ring of :func:`course_lib.parallel.cost_model.ring_allreduce_time`), on
    the node's link and, were the group spread one GPU per node, on the network; and the
    block's forward FLOPs (``2 x parameters`` per token, plus causal attention's ``2 s h``) split
    ``tp`` ways, at the reported rate per GPU.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    rows = []
    for run in layouts:
        n_bytes = 2 * run.seq_len * micro_batch * run.hidden
        tokens = run.seq_len * micro_batch
        compute = tokens * (2 * run.block_params + 2 * run.seq_len * run.hidden) / run.tp
        seconds = compute / run.tflops
        for link in (run.node, run.network):
            comm = 2 * cost_model.ring_allreduce_time(n_bytes, run.tp, link)
            rows.append([run.name, link, f"{n_bytes / 1e6:,.0f}", f"{comm * 1e3:.2f}",
                         f"{seconds * 1e3:.1f}", f"{comm / seconds:.0%}"])
    headers = ["run", "tensor-parallel group on", "all-reduce (MB)",
               "2 all-reduces (ms)", "block forward compute (ms)", "communication / compute"]
    return Table(headers, rows, title="One block's forward pass, per micro-batch of "
                                      f"{micro_batch} sequence(s)")
