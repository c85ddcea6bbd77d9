"""Chapter 12's own tables and plots: context and expert parallelism, laid out for the page.

Chapter 12, *Long sequences and many experts*, shows what :mod:`course_lib.parallel` measured:
attention over a sequence split across ranks (all-gather of K/V and the pass-KV ring) against
one process, with the bytes and the work of each rank; a mixture-of-experts layer spread over
ranks by all-to-all, and on a mesh of replicas by expert ranks; the activations a
context-parallel rank keeps for backward, against 1/cp; and two published layouts, Llama 3
405B's 128K stage and DeepSeek-V3's, with the course's formulas and α–β model. The runs
themselves are in :mod:`course_lib.parallel.context_parallel`,
:mod:`~course_lib.parallel.context_memory`, :mod:`~course_lib.parallel.experts` and
:mod:`~course_lib.parallel.expert_mesh`; nothing here computes a result of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from course_lib.base.tables import Table
from course_lib.parallel import context_parallel, cost_model
from course_lib.planner import validation

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from course_lib.parallel.context_memory import CPMemory
    from course_lib.parallel.context_parallel import CPCheck
    from course_lib.parallel.expert_mesh import EPMeshCheck
    from course_lib.parallel.experts import EPCheck, NodeTraffic
    from course_lib.planner.model import PlanResult

__all__ = ["DEEPSEEK_V3", "LLAMA3_128K", "DeepSeekLayout", "Llama3LongContext",
           "cp_memory_table", "cp_table", "deepseek_table", "ep_mesh_table", "ep_table",
           "llama3_cp_table", "plot_causal_work", "plot_cp_memory"]


def cp_table(runs: Sequence[Sequence[CPCheck]], names: Sequence[str]) -> Table:
    """Per context-parallel run and rank: gaps from one process, bytes sent, scores computed.

    Chapter 12, *Long sequences and many experts*.
    """
    rows = []
    for name, ranks in zip(names, runs):
        for r in ranks:
            ring, gather = r.traffic["ring"], r.traffic["all-gather"]
            rows.append([name, r.rank, f"{max(r.gaps['all-gather'].values()):.1e}",
                         f"{max(r.gaps['ring'].values()):.1e}", f"{ring.forward_bytes:,}",
                         f"{gather.forward_bytes:,}", f"{r.bytes_formula:,}",
                         f"{ring.backward_bytes:,}", f"{ring.score_elements:,}",
                         f"{r.work_formula:,}"])
    headers = ["run", "rank", "all-gather vs one process", "ring vs one process",
               "ring sent, forward (bytes)", "all-gather sent, forward (bytes)",
               "(cp - 1) 2 (s/cp) n_kv d e", "ring sent, backward (bytes)",
               "scores computed", "formula"]
    return Table(headers, rows, title=f"Attention over a sequence split across "
                                      f"{runs[0][0].cp} ranks (max |difference|, float64)")


def plot_causal_work(seq_len: int, cp: int) -> Figure:
    """The attention scores each rank computes under a causal mask, plain and balanced.

    Chapter 12, *Long sequences and many experts*.
    """
    import matplotlib.pyplot as plt

    plain = context_parallel.causal_work(seq_len, cp, balanced=False)
    balanced = context_parallel.causal_work(seq_len, cp, balanced=True)
    full = context_parallel.causal_work(seq_len, cp, causal=False)[0]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ranks = range(cp)
    ax.bar([r - 0.2 for r in ranks], [w / full for w in plain], width=0.4,
           label="one chunk per rank", color="#C44E52")
    ax.bar([r + 0.2 for r in ranks], [w / full for w in balanced], width=0.4,
           label="two mirrored chunks per rank", color="#4C72B0")
    ax.axhline(sum(plain) / cp / full, color="black", lw=1, ls="--", label="mean, one chunk per rank")
    ax.set_xlabel("context-parallel rank")
    ax.set_ylabel("scores / a rank's unmasked")
    ax.set_xticks(list(ranks))
    ax.set_title(f"Causal attention, {seq_len:,} tokens on {cp} ranks", fontsize=10)
    ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


def cp_memory_table(records: Sequence[CPMemory]) -> Table:
    """Bytes one rank saved for backward per degree and schedule, and their share of cp = 1's.

    ``records`` are one rank's :class:`~course_lib.parallel.context_memory.CPMemory`, the
    first at ``cp = 1``.

    Chapter 12, *Long sequences and many experts*.
    """
    one = records[0]
    rows = []
    for r in records:
        gather, ring = r.total("all-gather"), r.total("ring")
        rows.append([r.cp, f"{1 / r.cp:.3f}", f"{gather:,}",
                     f"{gather / one.total('all-gather'):.3f}",
                     f"{r.as_large_as(one, 'all-gather') if r.cp > 1 else 0:,}",
                     f"{ring:,}", f"{ring / one.total('ring'):.3f}"])
    headers = ["cp", "1/cp", "all-gather (bytes)", "share of cp = 1", "of which not shrunk",
               "ring (bytes)", "share of cp = 1"]
    return Table(headers, rows, title=f"Saved for backward by one rank, attention over "
                                      f"{one.seq_len} tokens")


def plot_cp_memory(records: Sequence[CPMemory]) -> Figure:
    """What a rank saves for backward, as a share of one process's, against 1/cp.

    ``records`` as :func:`cp_memory_table`: one rank's, the first at ``cp = 1``.

    Chapter 12, *Long sequences and many experts*.
    """
    import matplotlib.pyplot as plt

    one = records[0]
    degrees = [r.cp for r in records]
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.plot(degrees, [1 / cp for cp in degrees], color="#BBBBBB", lw=6, zorder=1,
            label="1/cp")  # wide and pale: the ring's line lies on it
    for schedule, colour, marker in (("all-gather", "#C44E52", "o"), ("ring", "#4C72B0", "s")):
        share = [r.total(schedule) / one.total(schedule) for r in records]
        ax.plot(degrees, share, color=colour, marker=marker, lw=1.5,
                label=f"{schedule}, measured")
    kept = records[-1].as_large_as(one, "all-gather") / one.total("all-gather")
    ax.axhline(kept, color="#C44E52", lw=1, ls=":",
               label="all-gather: gathered K/V, whole sequence")
    ax.set_xscale("log", base=2)
    ax.set_xticks(degrees, [str(cp) for cp in degrees])
    ax.set_xlabel("context-parallel degree cp")
    ax.set_ylabel("saved / one process's")
    ax.set_ylim(0, 1.08)
    ax.set_title(f"Saved for backward by one rank, attention over {one.seq_len} tokens",
                 fontsize=10)
    ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


def ep_mesh_table(ranks: Sequence[EPMeshCheck]) -> Table:
    """Per rank of an EP x DP mesh: what it holds, what crosses which group, its gaps.

    Chapter 12, *Long sequences and many experts*.
    """
    rows = []
    for r in ranks:
        held = ", ".join(str(e) for e in r.experts_held)
        rows.append([r.rank, f"{r.dp_rank}, {r.ep_rank}", held,
                     " ".join(map(str, r.ep_group)),
                     f"{r.traffic.dispatch_bytes_to_others:,}",
                     " ".join(map(str, r.dp_group)), f"{r.expert_grad_bytes:,}",
                     f"{r.router_grad_bytes:,}", f"{r.max_gap:.1e}"])
    headers = ["rank", "replica, EP rank", "experts", "EP group",
               "tokens out of the rank (bytes)", "DP group",
               "expert grads summed over DP (bytes)", "router grad over all (bytes)",
               "max |difference| from one process"]
    first = ranks[0]
    return Table(headers, rows, title=f"A mixture-of-experts layer on {first.dp} replicas x "
                                      f"{first.ep} expert ranks, float64")


def ep_table(runs: Sequence[Sequence[EPCheck]], names: Sequence[str]) -> Table:
    """Per expert-parallel run and rank: the gap from one process, bytes, load and drops.

    Chapter 12, *Long sequences and many experts*.
    """
    rows = []
    for name, ranks in zip(names, runs):
        for r in ranks:
            t = r.traffic
            rows.append([name, r.rank, f"{r.max_gap:.1e}", f"{t.dispatch_bytes:,}",
                         f"{t.dispatch_bytes_to_others:,}", f"{t.combine_bytes:,}",
                         f"{r.bytes_bound:,}", t.rows_received,
                         f"{t.dropped} ({r.dropped_reference})", t.assignments])
    headers = ["run", "rank", "max |difference| from one process", "dispatch (bytes)",
               "to the other rank", "combine (bytes)", "bound T k h e", "rows received",
               "dropped (one process)", "assignments"]
    return Table(headers, rows, title=f"A mixture-of-experts layer on {runs[0][0].ep} "
                                      "ranks, float64")


@dataclasses.dataclass(frozen=True)
class Llama3LongContext:
    """Llama 3 405B's long-context stage (Dubey et al. 2024, Table 4 and section 3.3.2).

    Chapter 12, *Long sequences and many experts*.
    """

    seq_len: int = 131072
    tp: int = 8
    cp: int = 16
    pp: int = 16
    dp: int = 8
    hidden: int = 16384
    heads: int = 128
    kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 53248
    element: int = 2  # BF16
    tflops: float = 380e12  # per GPU, as Table 4 reports for this stage
    network: str = "RoCE 400G"

    @property
    def block_params(self) -> int:
        """Parameters of one block: GQA attention, a SwiGLU MLP, two RMSNorms."""
        h, kv = self.hidden, self.kv_heads * self.head_dim
        return 2 * h * h + 2 * h * kv + 3 * h * self.ffn + 2 * h

    def kv_bytes(self) -> int:
        """Bytes a rank sends per layer, forward: its tensor-parallel share of the K/V heads."""
        return context_parallel.kv_bytes_per_rank(self.seq_len, self.cp,
                                                  self.kv_heads // self.tp, self.head_dim,
                                                  self.element)

    def q_bytes(self) -> int:
        """Bytes of the queries a rank holds per layer: its tokens, its query heads."""
        return self.seq_len // self.cp * self.heads // self.tp * self.head_dim * self.element

    def kv_held_bytes(self) -> int:
        """Bytes of the keys and values a rank holds per layer: its tokens, its K/V heads."""
        return 2 * self.seq_len // self.cp * self.kv_heads // self.tp * self.head_dim \
            * self.element

    def allgather_seconds(self) -> float:
        """The K/V all-gather over the CP group, one GPU per node, by the α–β ring."""
        whole = self.kv_bytes() * self.cp // (self.cp - 1)
        return cost_model.ring_time("all-gather", whole, self.cp, self.network)

    def attention_seconds(self) -> float:
        """A rank's causal attention, balanced: its scores x 4 d FLOPs (QK and PV), forward."""
        scores = context_parallel.causal_work(self.seq_len, self.cp, balanced=True)[0]
        return scores * self.heads // self.tp * 4 * self.head_dim / self.tflops

    def matmul_seconds(self) -> float:
        """The block's weight matrices on a rank's tokens, 2 FLOPs per parameter, forward."""
        return 2 * self.block_params / self.tp * self.seq_len / self.cp / self.tflops


LLAMA3_128K = Llama3LongContext()


def llama3_cp_table(run: Llama3LongContext = LLAMA3_128K) -> Table:
    """What one GPU of the 128K stage sends and computes per layer, forward.

    Chapter 12, *Long sequences and many experts*.
    """
    rows = [["queries held", f"{run.q_bytes() / 1e6:.1f} MB"],
            ["keys and values held", f"{run.kv_held_bytes() / 1e6:.1f} MB"],
            ["K/V sent (the formula)", f"{run.kv_bytes() / 1e6:.1f} MB"],
            [f"K/V all-gather on {run.network}", f"{run.allgather_seconds() * 1e3:.2f} ms"],
            ["causal attention, balanced", f"{run.attention_seconds() * 1e3:.2f} ms"],
            ["the block's matrix products", f"{run.matmul_seconds() * 1e3:.2f} ms"]]
    return Table(["per GPU and layer, forward", "value"], rows,
                 title=f"Llama 3 405B, {run.seq_len:,} tokens: TP {run.tp}, CP {run.cp}, "
                       f"PP {run.pp}, at {run.tflops / 1e12:.0f} TFLOP/s per GPU")


@dataclasses.dataclass(frozen=True)
class DeepSeekLayout:
    """DeepSeek-V3's training layout and its MoE (DeepSeek-AI 2024, sections 2.1 and 3.2).

    Chapter 12, *Long sequences and many experts*.
    """

    gpus: int = 2048
    gpus_per_node: int = 8
    pp: int = 16
    ep: int = 64
    experts: int = 256
    k: int = 8
    node_limit: int = 4
    hidden: int = 7168
    ib_bandwidth: float = 50e9  # bytes/s per GPU, as the paper gives it
    nvlink_bandwidth: float = 160e9

    @property
    def dp(self) -> int:
        """Data-parallel ranks (ZeRO-1): the GPUs over the pipeline stages."""
        return self.gpus // self.pp

    @property
    def ep_nodes(self) -> int:
        """Nodes an expert-parallel group spans."""
        return self.ep // self.gpus_per_node

    @property
    def experts_per_gpu(self) -> int:
        """Routed experts a GPU holds."""
        return self.experts // self.ep


DEEPSEEK_V3 = DeepSeekLayout()


def deepseek_table(traffic: NodeTraffic, run: DeepSeekLayout = DEEPSEEK_V3) -> Table:
    """One GPU's dispatch over the network, without and with node-limited routing.

    Chapter 12, *Long sequences and many experts*.
    """
    tokens = traffic.bytes[0] / (traffic.nodes_per_token[0] * run.hidden)
    rows = []
    for i, name in enumerate(("any of the 8 nodes", f"at most {run.node_limit} nodes")):
        rows.append([name, f"{traffic.nodes_per_token[i]:.2f}",
                     f"{traffic.bytes[i] / tokens / 1e3:.1f}",
                     f"{traffic.bytes[i] / 1e6:.1f}", f"{traffic.seconds[i] * 1e3:.2f}"])
    headers = ["routing", "other nodes per token", "kB per token (FP8)",
               f"MB for {tokens:,.0f} tokens", f"ms on {traffic.link}"]
    return Table(headers, rows, title=f"DeepSeek-V3's dispatch: top-{run.k} of "
                                      f"{run.experts} experts on {run.ep_nodes} nodes, "
                                      "a random router")


#: The published runs of the planner's validation (:mod:`course_lib.planner.runs`) that
#: context and expert parallelism make expressible.
PLANNED = ("Llama 3 405B, 128K context, 16,384 H100",
           "DeepSeek-V3, 2,048 H800, per trillion tokens")


def planned_runs(names: Sequence[str] = PLANNED
                 ) -> list[tuple[validation.Row, PlanResult]]:
    """Each named run's validation row and the planner's whole plan of it, at the
    efficiency fitted for its GPUs (:func:`course_lib.planner.validation.efficiencies`).

    Chapter 12, *Long sequences and many experts*.
    """
    mfu = validation.efficiencies()
    rows = {row.run.name: row for row in validation.validate(mfu=mfu)}
    return [(rows[name], validation.plan_run(rows[name].run, mfu)) for name in names]


def planned_table(planned: Sequence[tuple[validation.Row, PlanResult]]) -> Table:
    """The planner on chapter 12's published layouts: its figure against the published
    one, and what context or expert parallelism sends and costs in the step.

    Chapter 12, *Long sequences and many experts*.
    """
    rows = []
    for row, result in planned:
        t, s = result.time, result.setup
        kind, sent, seconds = (("CP", t.cp_bytes, t.cp) if s.cp > 1
                               else ("EP", t.ep_bytes, t.ep))
        degree = s.cp if s.cp > 1 else s.ep
        rows.append([row.run.name, validation.KINDS[row.run.kind], f"{row.run.value:g}",
                     f"{row.predicted:.3g}", f"{row.ratio:.2f}", f"{kind} {degree}",
                     f"{sent / 1e6:.1f}", f"{seconds / t.step:.0%}",
                     f"{result.memory.total / result.memory.usable:.2f}"])
    return Table(["run", "figure", "published", "planner", "ratio", "layout",
                  "MB sent per GPU, layer and micro-batch", "share of the step",
                  "memory / usable"], rows,
                 title="The planner on the published layouts, from their settings alone")

