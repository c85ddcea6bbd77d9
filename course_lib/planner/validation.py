"""The training planner validated: published runs predicted from their settings alone.

Chapters 2, 9, 10, 11 and 12 use the planner (:mod:`course_lib.planner.model`); this
module says how far to trust it. :data:`~course_lib.planner.runs.RUNS`
(:mod:`course_lib.planner.runs`, the data) holds published training runs and benchmarks,
each with its source (a key of ``book/references.bib``), where in the source its number
stands, the planner inputs that express its setting (model shape, GPUs, layout, batch,
sequence length, precision, ZeRO/FSDP stage, checkpointing, context and expert
parallelism) and the one figure it reports: whether it fits, memory per GPU, TFLOP/s or
tokens/s per GPU, days to train.
:func:`validate` runs the planner on each run's inputs and sets its prediction next to
the published figure: their ratio, and whether it lies in the band 0.8-1.25.

No published figure is an input of its own row: the inputs hold the setting only, and
the planner's ``mfu`` (the share of the peak its matrix products reach at the compute
roof, each paying its HBM traffic on top: :mod:`~course_lib.planner.compute_time`) is
the one calibration, the efficiency of the hardware: fitted once per GPU generation
(:data:`~course_lib.planner.presets.GENERATIONS`, :func:`efficiencies`) by
:func:`calibrate` on the runs of that generation named in :data:`CALIBRATION_RUNS`
(which are then left out of the scored rows), and held fixed for every other run. Rows true by
definition are not here: a published MFU next to the same TFLOP/s over the datasheet
peak, a training time the paper derived from the same row's throughput (Megatron-LM's
Table 2 "days" and its 34- and 84-day estimates), ZeRO's model-state formulas.

``verified`` says how each number was read: from the source's own text (a table of a
repository's documentation, or a text conversion of the paper's PDF), and which inputs,
if any, the source does not state. This module is the logic: predictions, the
calibration, the table, the goals and the plot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from course_lib.base.tables import Table, cite
from course_lib.planner.model import PlanResult, plan
from course_lib.planner.presets import GENERATIONS
from course_lib.planner.runs import CALIBRATION_RUNS, KINDS, RUNS, Run

__all__ = ["BAND", "CALIBRATION_RUNS", "CLOSE", "KINDS", "RUNS", "Row", "Run", "calibrate",
           "calibration_groups", "efficiencies", "fitted_mfu", "generation", "goals",
           "plan_run", "plot_ratios", "predict", "summary", "validate",
           "validation_table"]

#: The band a prediction must fall in, as a ratio prediction / published.
BAND = (0.8, 1.25)
#: A fit verdict the planner cannot tell: memory at most this much over the usable.
CLOSE = 1.10


@dataclass(frozen=True)
class Row:
    """A run next to the planner's prediction: the ratio, whether it is in the band,
    whether the planner says the run fits, and ``margin``: its memory over the usable
    (above 1: does not fit).

    Chapter 2, *The memory wall*.
    """

    run: Run
    predicted: float | bool
    ratio: float
    within: bool
    fits: bool
    margin: float = math.nan


_CLOSE = ("within 10 % of the usable, closer than the planner's memory can tell (it "
          "leaves out the allocator's fragmentation and the gradients of activations "
          "at the peak)")


# --- predictions ------------------------------------------------------------------------

def _flops_per_token(run: Run, r: PlanResult) -> float:
    """FLOPs per token as the run's source counts them, to turn the planner's tokens/s
    into the TFLOP/s it publishes.

    This is the paper's bookkeeping, not the planner's time: PaLM's ``6 N + 12 l h s``
    counts the full attention square whatever the kernel computes, Megatron-LM's
    equation 3 counts its recomputed forward pass too. The planner's step spends time
    on the products the GPUs run (:func:`~course_lib.planner.model.attention_flops`:
    half the square under a causal mask in a fused kernel) and is then read in the
    source's units, so a run is compared in the figure it published.
    """
    s = r.setup
    if run.flops == "megatron":  # Narayanan et al. (2021), equation 3, per token
        return 96 * s.layers * s.hidden**2 * (
            1 + s.seq_len / (6 * s.hidden) + s.vocab / (16 * s.layers * s.hidden))
    if run.flops == "palm":  # Chowdhery et al. (2022), appendix B
        return 6 * s.params + 12 * s.layers * s.hidden * s.seq_len
    raise ValueError(f"{run.name}: no FLOP convention for a TFLOP/s figure "
                     "(megatron or palm)")


def _read(run: Run, r: PlanResult) -> float | bool:
    """The run's figure, as the planner predicts it."""
    tokens_per_gpu = r.tokens_per_step / (r.time.step * r.setup.gpus)
    readers: dict[str, Callable[[], float | bool]] = {
        "fits": lambda: r.fits,
        "memory_gib": lambda: r.memory.total / 2**30,
        "tokens_per_s": lambda: tokens_per_gpu,
        "tflops": lambda: tokens_per_gpu * _flops_per_token(run, r) / 1e12,
        "days": lambda: r.days,
    }
    if run.kind not in readers:
        raise ValueError(f"{run.name}: unknown kind {run.kind!r}; "
                         f"the kinds are {', '.join(KINDS)}")
    return readers[run.kind]()


#: The planner's ``mfu``: one share of the peak, or one per GPU generation.
Efficiency = float | Mapping[str, float]


def generation(run: Run) -> str:
    """The generation of the GPUs ``run`` ran on (:data:`~course_lib.planner.presets.
    GENERATIONS`), whose fitted efficiency the planner predicts it at.

    Chapter 10, *Hardware for LLM training*.
    """
    gpu = run.inputs.get("gpu", "h100")  # the planner's default GPU
    if gpu not in GENERATIONS:
        raise ValueError(f"{run.name}: the GPU {gpu!r} has no generation to fit an "
                         f"efficiency for; a validation run names one of "
                         f"{', '.join(GENERATIONS)}")
    return GENERATIONS[gpu]


def predict(run: Run, mfu: Efficiency) -> tuple[float | bool, bool]:
    """The planner's figure for ``run`` at the share of peak ``mfu`` (one for every
    GPU, or one per generation), and its verdict on whether the run fits.

    Chapter 10, *Hardware for LLM training*.
    """
    r = plan_run(run, mfu)
    return _read(run, r), r.fits


def plan_run(run: Run, mfu: Efficiency) -> PlanResult:
    """The planner's whole plan of ``run`` from its setting, at ``mfu`` (one share of the
    peak, or one per generation: its GPUs' is taken).

    Chapter 10, *Hardware for LLM training*.
    """
    if "mfu" in run.inputs:
        raise ValueError(f"{run.name}: the MFU is the calibration, not an input of a run")
    if isinstance(mfu, Mapping):
        if generation(run) not in mfu:
            raise ValueError(
                f"{run.name}: no efficiency fitted for {generation(run)} GPUs (fitted: "
                f"{', '.join(mfu) or 'none'}); name a calibration run of that "
                "generation")
        mfu = mfu[generation(run)]
    return plan(**run.inputs, mfu=mfu)


def _geomean_ratio(runs: Sequence[Run], mfu: float) -> float:
    logs = [math.log(predict(run, mfu)[0] / run.value) for run in runs]
    return math.exp(sum(logs) / len(logs))


def calibrate(names: Sequence[str] = CALIBRATION_RUNS, runs: Sequence[Run] = RUNS,
              low: float = 0.05, high: float = 1.0, target: float = 1.0) -> float:
    """The planner's ``mfu`` at which the named runs' predictions meet their published
    figures (geometric mean of the ratios = ``target``), by bisection.

    Raises ValueError when the target lies outside what ``low``..``high`` reach: the
    bisection would stop at a bound and claim a fit it did not find.

    Chapter 10, *Hardware for LLM training*.
    """
    by_name = {run.name: run for run in runs}
    missing = [name for name in names if name not in by_name]
    if missing or not names:
        raise ValueError(f"no calibration runs named {missing or 'at all'}")
    chosen = [by_name[name] for name in names]
    if any(run.kind not in ("tflops", "tokens_per_s") for run in chosen):
        raise ValueError("calibrate on throughput runs (tflops or tokens_per_s) only")
    at_low, at_high = _geomean_ratio(chosen, low), _geomean_ratio(chosen, high)
    if not at_low <= target <= at_high:
        raise ValueError(
            f"the calibration cannot reach its target: between mfu {low:g} and "
            f"{high:g} the runs' geometric-mean ratio goes from {at_low:.3f} to "
            f"{at_high:.3f}, not through {target:g}")
    for _ in range(60):
        mid = (low + high) / 2
        if _geomean_ratio(chosen, mid) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def efficiencies(names: Sequence[str] = CALIBRATION_RUNS,
                 runs: Sequence[Run] = RUNS) -> dict[str, float]:
    """The planner's ``mfu`` per GPU generation: :func:`calibrate` on the named runs of
    each generation. The validation's one calibration, the efficiency of the hardware.

    Chapter 10, *Hardware for LLM training*.
    """
    groups = calibration_groups(names, runs)
    if not groups:
        calibrate([], runs)  # raises: no runs named
    return {gen: calibrate(group, runs) for gen, group in groups.items()}


def calibration_groups(names: Sequence[str] = CALIBRATION_RUNS,
                       runs: Sequence[Run] = RUNS) -> dict[str, list[str]]:
    """The named runs by the generation of their GPUs, in their order: what
    :func:`efficiencies` fits each generation's efficiency on.

    Chapter 10, *Hardware for LLM training*.
    """
    by_name = {run.name: run for run in runs}
    groups: dict[str, list[str]] = {}
    for name in names:
        if name not in by_name:
            calibrate([name], runs)  # raises: no such run
        groups.setdefault(generation(by_name[name]), []).append(name)
    return groups


def fitted_mfu(gpu: str) -> float:
    """The efficiency :func:`efficiencies` fits for the generation of ``gpu`` (a key of
    :data:`~course_lib.planner.presets.GPUS`), to plan a run at.

    Chapter 10, *Hardware for LLM training*.
    """
    fitted = efficiencies()
    if GENERATIONS.get(gpu) not in fitted:
        raise ValueError(f"no efficiency fitted for the GPU {gpu!r}: the validation "
                         f"fits one for {', '.join(sorted(fitted))} GPUs "
                         f"({', '.join(k for k, g in GENERATIONS.items() if g in fitted)})")
    return fitted[GENERATIONS[gpu]]


def validate(runs: Sequence[Run] = RUNS, mfu: Efficiency | None = None,
             calibration: Sequence[str] = CALIBRATION_RUNS) -> list[Row]:
    """Every run (the calibration runs left out) next to the planner's prediction.

    ``mfu`` None: fitted per GPU generation by :func:`efficiencies` on ``calibration``
    (among ``RUNS``).

    Chapter 2, *The memory wall*.
    """
    if mfu is None:
        mfu = efficiencies(calibration)
    rows = []
    for run in runs:
        if run.name in calibration:
            continue
        r = plan_run(run, mfu)
        predicted, fits = _read(run, r), r.fits
        margin = r.memory.total / r.memory.usable
        if run.kind == "fits":
            close = 1 / CLOSE <= margin <= CLOSE or not run.decidable
            rows.append(Row(run, predicted, math.nan,
                            predicted is run.value and not close, fits, margin))
            continue
        ratio = predicted / run.value
        rows.append(Row(run, predicted, ratio, BAND[0] <= ratio <= BAND[1], fits,
                        margin))
    return rows


def summary(rows: Sequence[Row]) -> dict[str, tuple[int, int]]:
    """Per kind of figure (and "all" numeric rows, "ran and fits"): (in the band or
    agreeing, of how many).

    Chapter 10, *Hardware for LLM training*.
    """
    out: dict[str, tuple[int, int]] = {}
    for kind in KINDS:
        mine = [row for row in rows if row.run.kind == kind]
        if mine:
            out[kind] = (sum(row.within for row in mine), len(mine))
    numeric = [row for row in rows if row.run.kind != "fits"]
    out["all"] = (sum(row.within for row in numeric), len(numeric))
    ran = [row for row in rows if row.run.kind != "fits"]
    out["ran and fits"] = (sum(row.fits for row in ran), len(ran))
    return out


def goals(rows: Sequence[Row]) -> Table:
    """Issue 37's goals for the planner against the validation, each with its count and
    whether it is met.

    Chapter 2, *The memory wall*.
    """
    ran = [row for row in rows if row.run.kind != "fits"]
    refused = [row for row in ran if not row.fits]
    no_fit = [row for row in rows if row.run.kind == "fits" and row.run.value is False]
    decided = [row for row in no_fit
               if row.run.decidable and not 1 / CLOSE <= row.margin <= CLOSE]
    speed = [row for row in ran if row.run.kind in ("tflops", "tokens_per_s")]
    fast = sum(row.within for row in speed)
    out = [row for row in ran if not row.within]
    told = sum(bool(row.run.note) for row in out)
    days = [row for row in ran if row.run.kind == "days"]
    body = [
        ["every run that ran fits in the planner", f"{len(ran) - len(refused)} of "
         f"{len(ran)}", "yes" if not refused else "no: " + ", ".join(
             row.run.name for row in refused)],
        ["a run reported out of memory does not fit, where the margin can tell",
         f"{sum(not row.predicted for row in decided)} of {len(decided)} "
         f"({len(no_fit) - len(decided)} too close to tell)",
         "yes" if all(not row.predicted for row in decided) else "no"],
        ["at least 80 % of the throughput figures within 0.8-1.25", f"{fast} of "
         f"{len(speed)} ({fast / max(1, len(speed)):.0%})",
         "yes" if fast >= 0.8 * len(speed) else "no"],
        ["every figure outside the band explained", f"{told} of {len(out)}",
         "yes" if told == len(out) else "no"],
        ["days to train within 0.8-1.25", f"{sum(r.within for r in days)} of "
         f"{len(days)}", "no run in the set publishes its days" if not days else
         "yes" if all(r.within for r in days) else "no"],
    ]
    return Table(["goal", "count", "met"], body,
                 title="The planner's goals against the validation set")


def _shown(x: float | bool, kind: str) -> str:
    if isinstance(x, bool):
        return "fits" if x else "does not fit"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}"


def validation_table(rows: Sequence[Row] | None = None) -> Table:
    """The validation as a table: run, source, figure, published, planner, ratio, in
    the band, the planner's fit verdict, and the reason of a miss where one is known.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    body = []
    for row in rows if rows is not None else validate():
        run = row.run
        if run.kind == "fits" and not run.decidable:
            ratio, verdict = "-", "cannot tell"
        elif run.kind == "fits" and 1 / CLOSE <= row.margin <= CLOSE:
            ratio, verdict = "-", "too close"
            run = replace(run, note=_CLOSE)
        elif run.kind == "fits":
            ratio, verdict = "-", "agrees" if row.within else "differs"
        else:
            ratio = f"{row.ratio:.2f}"
            verdict = "in band" if row.within else "out"
        reasons = [] if row.within else [run.note]
        if run.kind != "fits" and not row.fits:
            reasons.append(f"ran, but the planner's memory is {row.margin:.2f} of the "
                           "usable: " + (_CLOSE if row.margin <= CLOSE
                                         else run.memory_note or run.note))
        elif run.kind == "fits" and run.memory_note:
            reasons.append(run.memory_note)
        body.append([run.name, f"{cite(run.source)}, {run.where}", KINDS[run.kind],
                     _shown(run.value, run.kind), _shown(row.predicted, run.kind),
                     ratio, verdict, "yes" if row.fits else "no",
                     f"{row.margin:.2f}", "; ".join(x for x in reasons if x)])
    headers = ["run", "source", "figure", "published", "planner", "ratio", "verdict",
               "fits", "memory / usable", "why it misses"]
    return Table(headers, body, title="The planner against published runs, predicted "
                 "from their settings alone")


def plot_ratios(rows: Sequence[Row] | None = None, ax: Any = None) -> Any:
    """The ratio prediction / published per run on a log scale, against the band.

    Returns the matplotlib Axes. Verdict rows (fits) are left out: they have no ratio.

    Chapter 10, *Hardware for LLM training*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base.diagrams import COLUMN_INCHES, SMALL, use_course_style

    rows = [row for row in (rows if rows is not None else validate())
            if row.run.kind != "fits"]
    if ax is None:  # the book's column wide, names in its smallest readable font
        use_course_style()
        _, ax = plt.subplots(figsize=(COLUMN_INCHES, max(3.0, 0.25 * len(rows))),
                             layout="constrained")
    y = list(range(len(rows)))
    colours = ["tab:green" if row.within else "tab:red" for row in rows]
    ax.axvspan(*BAND, color="0.9", label=f"band {BAND[0]}-{BAND[1]}")
    ax.axvline(1.0, color="0.5", linewidth=0.8)
    ax.scatter([row.ratio for row in rows], y, c=colours, s=18, zorder=3)
    ax.set_xscale("log")
    ratios = [row.ratio for row in rows] or [1.0]
    ticks = [t for t in (0.05, 0.1, 0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0)
             if min(ratios) / 1.5 <= t <= max(ratios) * 1.5]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(y)
    ax.set_yticklabels([row.run.name for row in rows], fontsize=SMALL)
    ax.invert_yaxis()
    ax.set_xlabel("planner / published (log scale)")
    ax.set_ylabel("published run")
    ax.set_title("Planner against published runs")
    ax.legend(loc="lower right", fontsize=SMALL)
    return ax

