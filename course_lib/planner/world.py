"""The training planner against the world: published figures next to the planner's.

Chapters 2, 9, 10 and 11 check the planner (:mod:`course_lib.planner.model`) against the
papers they cite. :data:`FIGURES` holds every published figure in one place, each with
its bibliography key, the plan that reproduces its setting, what the planner reads off
that plan, and the tolerance within which the two must agree; :func:`comparison`
computes the planner's figure next to each. Where the planner is known to fall short
(Llama 3's measured MFU: its pipeline ran a tuned, interleaved schedule, the planner
models plain 1F1B) the row says so instead of claiming agreement.

``verified`` says how each figure was checked when it was written down: against the
paper's text, or recalled from the paper (to be checked against its table before a
chapter prints it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from course_lib.base.tables import Table
from course_lib.numbers import memory
from course_lib.planner.model import PlanResult, plan

__all__ = ["FIGURES", "Figure", "Row", "comparison", "comparison_table"]

_ZERO_SHAPE = memory.shape_for_params(7.5e9)
#: The ZeRO paper's 7.5B model on 64 GPUs (8 nodes of 8); its shape does not enter model
#: states.
_ZERO = dict(model="custom", params=7.5e9, layers=_ZERO_SHAPE.n_layers,
             hidden=_ZERO_SHAPE.hidden, heads=_ZERO_SHAPE.n_heads,
             vocab=_ZERO_SHAPE.vocab, seq_len=1024, gpu="a100-80", nodes=8,
             global_batch=64)
#: Megatron-LM's GPT of 1T parameters (Table 1's last row).
_MEGATRON_1T = dict(model="custom", params=1008e9, layers=128, hidden=25600, heads=160,
                    vocab=51200, seq_len=2048, gpu="a100-80", network_link="ib-hdr",
                    nodes=384, tp=8, pp=64, global_batch=3072, checkpointing=True,
                    tokens=450e9)
#: Llama 3 405B's pre-training layouts (Table 4), with ZeRO-1-like sharding and
#: checkpointing.
_LLAMA3 = dict(model="llama3-405b", tp=8, pp=16, zero=1, checkpointing=True)
_T5 = dict(model="t5-11b", gpu="a100-80", global_batch=64)
_GPT3 = dict(model="gpt3-175b", gpu="a100-80", nodes=128, tp=8, pp=8,
             checkpointing=True)


def _fits(r: PlanResult) -> bool:
    return r.fits


def _states_gb(r: PlanResult) -> float:
    return (r.memory.parameters + r.memory.gradients + r.memory.optimizer) / 1e9


def _compute_gpu_hours(r: PlanResult) -> float:
    """GPU-hours of compute alone at the plan's MFU: 6ND / (peak x MFU)."""
    return r.steps * r.time.compute * r.setup.gpus / 3600


def _compute_days(r: PlanResult) -> float:
    """Days of compute alone (no bubble, no communication): the paper's 8ND / (nX)."""
    return r.steps * r.time.compute / 86400


@dataclass(frozen=True)
class Figure:
    """One published figure: source (bib key), claim, value and unit, the plan that
    reproduces its setting, what to read off the planner's result, the tolerance, how it
    was checked.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    source: str
    claim: str
    value: float | bool
    unit: str
    inputs: dict[str, Any]
    read: Callable[[PlanResult], float | bool]
    tolerance: float
    verified: str
    limit: str = ""


_RECALLED = "recalled from the paper, not checked against its text here"
_QUOTED = ("the paper's 8TP/(nX) estimate; the figure as secondary sources quote it, "
           "not checked against the paper's text here")
_LLAMA2 = ("Section 2.2.1 and Table 2 (pre-training GPU-hours on A100-80GB), as "
           "secondary sources quote them")
_GPT3_D1 = "Table D.1, as secondary sources quote it"
_ABSTRACT3 = "Section 3.3.1 (3.8 x 10^25 FLOPs), as secondary sources quote it"
_FORMULA = "the paper's formula (2 + 2 + K) psi / N_d with K = 12, psi = 7.5B, N_d = 64"
_CH9 = "the course's chapter 9 reports it from the lecture notes"
_TABLE4 = ("Table 4, as the SC'24 talk's slide reproduces it (GPUs, TP, CP, PP, tokens "
           "per batch, TFLOP/s per GPU); the MFU column recalled")
_ABSTRACT = ("3,072 GPUs and 52 % of peak from the abstract; the layout as chapter 11 "
             "quotes Table 1")
_BUBBLE = ("the planner's plain 1F1B bubble (p - 1) / (m + p - 1) is 32 % with 32 "
           "and 48 % with 16 micro-batches; Llama 3's tuned (interleaved) pipeline "
           "schedule hides most of it, which the planner does not model")


def _mfu_at(tflops: float) -> Callable[[PlanResult], float]:
    """The MFU that ``tflops`` TFLOP/s per GPU make of the plan's GPU peak."""
    return lambda r: tflops * 1e12 / r.setup.peak


#: The published figures, one place: ZeRO, FSDP, Megatron-LM, GPT-3, Llama 3.
FIGURES: tuple[Figure, ...] = (
    Figure("rajbhandari2020zero", "7.5B model, 64 GPUs: DDP's model states per GPU",
           120.0, "GB", dict(_ZERO, zero=0), _states_gb, 0.05, _FORMULA),
    Figure("rajbhandari2020zero", "ZeRO stage 1 (P_os)", 31.4, "GB",
           dict(_ZERO, zero=1), _states_gb, 0.05, _FORMULA),
    Figure("rajbhandari2020zero", "ZeRO stage 2 (P_os+g)", 16.6, "GB",
           dict(_ZERO, zero=2), _states_gb, 0.05, _FORMULA),
    Figure("rajbhandari2020zero", "ZeRO stage 3 (P_os+g+p)", 1.9, "GB",
           dict(_ZERO, zero=3), _states_gb, 0.05, _FORMULA),
    Figure("zhao2023fsdp", "T5-11.3B with DDP on 8 A100 80GB: out of memory", False,
           "fits", dict(_T5, zero=0), _fits, 0, _CH9),
    Figure("zhao2023fsdp", "T5-11.3B with FSDP full sharding on 8 A100 80GB: trains",
           True, "fits", dict(_T5, zero=3), _fits, 0, _CH9),
    Figure("narayanan2021megatron", "GPT of 1T on 3,072 A100 80GB, TP 8 x PP 64, full "
           "recomputation: training iterations benchmarked (not trained)", True, "fits", _MEGATRON_1T, _fits, 0, _ABSTRACT),
    Figure("narayanan2021megatron", "GPT-3 175B, 300B tokens, 1,024 A100s at 140 "
           "TFLOP/s each (recomputation counted): 34 days", 34.0, "days",
           dict(_GPT3, mfu=140 / 312), _compute_days, 0.5, _QUOTED),
    Figure("narayanan2021megatron", "GPT of 1T, 450B tokens, 3,072 A100s at 163 "
           "TFLOP/s each: 84 days (estimated)", 84.0, "days", dict(_MEGATRON_1T, mfu=163 / 312),
           _compute_days, 1.0, _RECALLED),
    Figure("brown2020gpt3", "GPT-3 175B's training compute (Table D.1)", 3.14e23,
           "FLOPs", dict(model="gpt3-175b"), lambda r: r.flops, 0.02e23, _GPT3_D1),
    Figure("touvron2023llama2", "Llama 2 7B, 2T tokens: 184,320 A100-80GB GPU-hours "
           "(the planner at its default 40 % MFU)", 184320, "GPU-hours",
           dict(model="llama2-7b", gpu="a100-80"), _compute_gpu_hours, 18432, _LLAMA2),
    Figure("touvron2023llama2", "Llama 2 70B, 2T tokens: 1,720,320 A100-80GB GPU-hours "
           "(the planner at its default 40 % MFU)", 1720320, "GPU-hours",
           dict(model="llama2-70b", gpu="a100-80"), _compute_gpu_hours, 172032,
           _LLAMA2),
    Figure("dubey2024llama3", "Llama 3 405B's training compute", 3.8e25, "FLOPs",
           dict(model="llama3-405b"), lambda r: r.flops, 0.05e25, _ABSTRACT3),
    Figure("dubey2024llama3", "8,192 H100s (TP 8, PP 16, DP 64) at 430 TFLOP/s: BF16 "
           "MFU 43 %", 0.43, "MFU", dict(_LLAMA3, nodes=1024), _mfu_at(430), 0.01,
           _TABLE4),
    Figure("dubey2024llama3", "16,384 H100s (DP 128) at 400 TFLOP/s: BF16 MFU 41 %",
           0.41, "MFU", dict(_LLAMA3, nodes=2048), _mfu_at(400), 0.01, _TABLE4),
    Figure("dubey2024llama3", "16,384 H100s (TP 8, CP 16, PP 16, DP 8, 131,072-token "
           "sequences) at 380 TFLOP/s: BF16 MFU 38 %", 0.38, "MFU", dict(_LLAMA3, nodes=2048),
           _mfu_at(380), 0.01, _TABLE4),
    Figure("dubey2024llama3", "8,192 H100s, TP 8 x PP 16 x DP 64, 8K sequences: "
           "trained (the planner with ZeRO 1 and checkpointing; the paper used FSDP and "
           "no checkpointing)", True, "fits", dict(_LLAMA3, nodes=1024),
           _fits, 0, _TABLE4),
    Figure("dubey2024llama3", "16,384 H100s, TP 8 x PP 16 x DP 128: trained (as "
           "above)", True,
           "fits", dict(_LLAMA3, nodes=2048), _fits, 0, _TABLE4),
    Figure("dubey2024llama3", "16,384 H100s: BF16 MFU 41 % (the planner's MFU while "
           "computing set to reproduce 43 % on 8,192)", 0.41, "MFU",
           dict(_LLAMA3, nodes=2048), lambda r: r.achieved_mfu, 0.02, _TABLE4,
           limit=_BUBBLE),
)


@dataclass(frozen=True)
class Row:
    """One figure next to the planner's: whether they agree within the tolerance.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    figure: Figure
    planner: float | bool
    agrees: bool


def _calibrated_mfu() -> float:
    """The MFU while computing that gives Llama 3's published 43 % on 8,192 GPUs
    (bisection)."""
    low, high = 0.01, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if plan(**_LLAMA3, nodes=1024, mfu=mid).achieved_mfu < 0.43:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def comparison(sources: tuple[str, ...] = ()) -> list[Row]:
    """Every published figure (or those of the bibliography keys ``sources``) next to the
    planner's, and whether they agree.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    known = {f.source for f in FIGURES}
    unknown = [key for key in sources if key not in known]
    if unknown:
        raise ValueError(f"no published figures from {', '.join(unknown)}; "
                         f"the sources are {', '.join(sorted(known))}")
    rows = []
    for figure in FIGURES:
        if sources and figure.source not in sources:
            continue
        inputs = dict(figure.inputs)
        if figure.limit:
            inputs["mfu"] = min(1.0, _calibrated_mfu())
        value = figure.read(plan(**inputs))
        if isinstance(figure.value, bool):
            agrees = value is figure.value
        else:
            agrees = abs(value - figure.value) <= figure.tolerance
        rows.append(Row(figure, value, agrees))
    return rows


def comparison_table(rows: list[Row] | None = None) -> Table:
    """The comparison as a table: source, claim, published, planner, tolerance, verdict.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    def show(x: float | bool, unit: str) -> str:
        if isinstance(x, bool):
            return "fits" if x else "does not fit"
        if unit == "MFU":
            return f"{x:.1%}"
        if unit == "GPU-hours":
            return f"{x:,.0f} {unit}"
        return f"{x:.3g} {unit}" if unit == "FLOPs" else f"{x:,.2f} {unit}"

    body = []
    for row in rows or comparison():
        f = row.figure
        tolerance = "verdict" if isinstance(f.value, bool) else (
            f"± {f.tolerance:.0%}" if f.unit == "MFU"
            else f"± {f.tolerance:,g} {f.unit}")
        status = ("agrees" if row.agrees else "differs") if not f.limit else (
            "agrees" if row.agrees else "model limit: see the text")
        body.append([f.source, f.claim, show(f.value, f.unit),
                     show(row.planner, f.unit), tolerance, status])
    headers = ["source", "published", "value", "planner", "tolerance", "verdict"]
    return Table(headers, body, title="The planner against published runs")
