"""The planner's validation set: published runs (course_lib.planner.runs) predicted from
their settings alone (course_lib.planner.validation)."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from course_lib.planner import runs, validation  # noqa: E402
from course_lib.planner.model import plan  # noqa: E402

BIB = Path(__file__).resolve().parents[1] / "book" / "references.bib"
#: The size of the validation set reached when it was written (issue 37 asks for 40).
MIN_RUNS = 50


@pytest.fixture(scope="module")
def mfu() -> dict[str, float]:
    return validation.efficiencies()


def test_the_set_is_large_and_from_several_sources():
    published = runs.RUNS
    assert len(published) >= MIN_RUNS
    assert len({run.name for run in published}) == len(published), "names are unique"
    assert len({run.source for run in published}) >= 5
    keys = set(re.findall(r"^@\w+\{([^,]+),", BIB.read_text(encoding="utf-8"), re.M))
    assert {run.source for run in published} <= keys, "every source is in the bibliography"
    for run in published:
        assert run.kind in runs.KINDS
        assert run.where and run.verified, run.name
        assert isinstance(run.value, bool) == (run.kind == "fits"), run.name


@pytest.mark.parametrize("run", runs.RUNS, ids=lambda run: run.name)
def test_every_run_is_accepted_by_the_planner(run):
    assert "mfu" not in run.inputs, "the efficiency is the calibration, never an input"
    result = plan(**run.inputs)
    assert result.time.step > 0


def test_no_published_value_is_an_input_of_its_own_row(mfu):
    """Move every published figure: no prediction may move with it."""
    moved = [dataclasses.replace(run, value=(not run.value) if run.kind == "fits"
                                 else run.value * 1.37) for run in runs.RUNS]
    before = validation.validate(mfu=mfu)
    after = validation.validate(moved, mfu=mfu)
    assert len(before) == len(after)
    for a, b in zip(before, after):
        assert a.predicted == b.predicted, a.run.name
        if a.run.kind != "fits":
            assert b.ratio == pytest.approx(a.ratio / 1.37)


def test_no_published_value_enters_the_calibration():
    """The calibration reads the named runs' figures; moving any other leaves it."""
    named = set(runs.CALIBRATION_RUNS)
    moved = tuple(run if run.name in named or run.kind == "fits"
                  else dataclasses.replace(run, value=run.value * 3)
                  for run in runs.RUNS)
    assert validation.efficiencies(runs=moved) == validation.efficiencies()


def test_the_calibration_runs_are_left_out_of_the_rows(mfu):
    rows = validation.validate(mfu=mfu)
    names = {row.run.name for row in rows}
    assert not names & set(runs.CALIBRATION_RUNS)
    assert len(rows) == len(runs.RUNS) - len(runs.CALIBRATION_RUNS)


def test_the_calibration_meets_its_target_on_its_runs(mfu):
    """One efficiency per GPU generation, each meeting its own runs (geometric mean of
    the ratios 1), and each run predicted at its own generation's."""
    assert set(mfu) == {"Ampere", "Hopper"}
    for generation, value in mfu.items():
        assert 0.05 < value < 1
        chosen = [run for run in runs.RUNS if run.name in runs.CALIBRATION_RUNS
                  and validation.generation(run) == generation]
        logs = [math.log(validation.predict(run, mfu)[0] / run.value) for run in chosen]
        assert chosen and sum(logs) / len(logs) == pytest.approx(0, abs=1e-6)
        assert all(validation.predict(run, value) == validation.predict(run, mfu)
                   for run in chosen)
    assert validation.fitted_mfu("h800") == validation.fitted_mfu("h100") == mfu["Hopper"]
    assert validation.fitted_mfu("a100-40") == mfu["Ampere"]


def test_one_efficiency_for_every_gpu_misses_what_one_per_generation_meets():
    """Why the efficiency is fitted per generation: fitted alone, the two A100 runs agree
    within 1 % and the H100 run lies a quarter below; one value fitted on all three
    leaves the H100s' MPT runs without checkpointing 25-40 % fast and misses the
    throughput goal that the per-generation fit meets."""
    alone = [validation.calibrate([name]) for name in runs.CALIBRATION_RUNS]
    assert max(alone[:2]) / min(alone[:2]) < 1.01 and alone[2] < 0.8 * min(alone[:2])

    def share(rows):
        speed = [row for row in rows if row.run.kind in ("tflops", "tokens_per_s")]
        return sum(row.within for row in speed) / len(speed)

    one = validation.calibrate()
    assert share(validation.validate(mfu=one)) < 0.8 <= share(validation.validate())
    fast = [validation.predict(run, one)[0] / run.value for run in runs.RUNS
            if run.name.startswith("MPT-") and run.inputs["gpu"] == "h100"
            and not run.inputs["checkpointing"] and run.name not in runs.CALIBRATION_RUNS]
    assert len(fast) == 5 and all(1.25 < ratio < 1.4 for ratio in fast)


def test_a_generation_without_a_fitted_efficiency_is_named():
    """A run whose GPUs' generation has no calibration run, and a GPU with none, raise
    with the generation and what to do, never predicting at another's efficiency."""
    h100 = next(run for run in runs.RUNS if run.inputs["gpu"] == "h100")
    with pytest.raises(ValueError, match="no efficiency fitted for Hopper GPUs.*"
                                         "calibration run of that generation"):
        validation.predict(h100, {"Ampere": 0.6})
    with pytest.raises(ValueError, match="no efficiency fitted for the GPU 'l40s'"):
        validation.fitted_mfu("l40s")
    with pytest.raises(ValueError, match="no calibration runs"):
        validation.efficiencies(["no such run"])
    with pytest.raises(ValueError, match="no calibration runs"):
        validation.efficiencies([])
    custom = dataclasses.replace(h100, inputs={**h100.inputs, "gpu": "custom"})
    with pytest.raises(ValueError, match="'custom' has no generation"):
        validation.predict(custom, {"Hopper": 0.5})


@pytest.mark.parametrize("target", [50.0, 1e-4])
def test_the_calibration_raises_when_its_target_is_unreachable(target):
    with pytest.raises(ValueError, match="cannot reach its target"):
        validation.calibrate(target=target)


def test_the_calibration_refuses_unknown_or_verdict_runs():
    with pytest.raises(ValueError, match="no calibration runs"):
        validation.calibrate(["no such run"])
    verdict = next(run.name for run in runs.RUNS if run.kind == "fits")
    with pytest.raises(ValueError, match="throughput runs"):
        validation.calibrate([verdict])


def test_a_run_with_an_mfu_input_is_refused():
    run = dataclasses.replace(runs.RUNS[0], inputs={**runs.RUNS[0].inputs,
                                                          "mfu": 0.5})
    with pytest.raises(ValueError, match="calibration"):
        validation.predict(run, 0.4)


def test_per_gpu_throughput_rises_with_model_size_as_in_megatron_table_1(mfu):
    """Megatron-LM's weak scaling (Table 1: 137 TFLOP/s per GPU at 1.7B, 163 at 1T):
    each product's HBM traffic from its shape makes the planner's rise too, from the
    smallest model to the largest, at the A100s' one calibrated efficiency."""
    rows = [row for row in validation.validate(mfu=mfu)
            if row.run.where == "Table 1"]
    first, last = rows[0], rows[-1]
    assert first.run.value < last.run.value
    assert last.predicted > 1.05 * first.predicted
    # Rising all the way from the middle of the table to its end.
    tail = [row.predicted for row in rows[3:]]
    assert tail == sorted(tail)


def test_rows_carry_ratio_and_band(mfu):
    rows = validation.validate(mfu=mfu)
    low, high = validation.BAND
    for row in rows:
        close = (1 / validation.CLOSE <= row.margin <= validation.CLOSE
                 or not row.run.decidable)
        assert row.fits == (row.margin <= 1)
        if row.run.kind == "fits":
            # A verdict within 10 % of the usable memory is too close to count.
            assert row.within == (row.predicted is row.run.value and not close)
        else:
            assert row.ratio == pytest.approx(row.predicted / row.run.value)
            assert row.within == (low <= row.ratio <= high)
    summary = validation.summary(rows)
    good, total = summary["all"]
    assert total == sum(row.run.kind != "fits" for row in rows) and 0 <= good <= total


def test_the_table_and_the_plot_are_produced(mfu):
    rows = validation.validate(mfu=mfu)
    table = validation.validation_table(rows)
    assert len(table.rows) == len(rows)
    text = str(table)
    assert "ratio" in text and "Megatron" in text and "cannot tell" in text
    # Every run that ran but does not fit in the planner says why.
    for row, line in zip(rows, table.rows):
        if row.run.kind != "fits" and not row.fits:
            assert "ran, but the planner's memory is" in line[-1], row.run.name
    ax = validation.plot_ratios(rows)
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    assert len(ax.get_yticklabels()) == sum(row.run.kind != "fits" for row in rows)
    matplotlib.pyplot.close(ax.figure)


def test_the_landing_page_and_readme_state_the_validation_as_it_comes_out():
    """The counts written in book/intro.md and the README are the ones validate() gives."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    rows = validation.validate()
    within, numeric = validation.summary(rows)["all"]
    intro = (root / "book" / "intro.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert f"next to {numeric} figures of published runs" in intro
    assert 0.8 < within / numeric < 0.9 and "more than four in five" in intro
    assert f"{within} of the {numeric} figures with a number" in readme
    assert f"{len(runs.RUNS)} runs of Megatron-LM" in readme
    assert f"the other {len(rows)} are" in readme


def test_the_goals_table_counts_and_can_fail(mfu):
    rows = validation.validate(mfu=mfu)
    met = {line[0]: line[2] for line in validation.goals(rows).rows}
    speed = [row for row in rows if row.run.kind in ("tflops", "tokens_per_s")]
    share = sum(row.within for row in speed) / len(speed)
    throughput = "at least 80 % of the throughput figures within 0.8-1.25"
    assert (met[throughput] == "yes") == (share >= 0.8)
    ran = [row for row in rows if row.run.kind != "fits"]
    assert (met["every run that ran fits in the planner"] == "yes") == all(
        row.fits for row in ran)
    # Only the rows in the band: the throughput goal is met, and an unexplained miss
    # (a note taken away) is caught.
    good = [row for row in rows if row.within]
    assert {l[0]: l[2] for l in validation.goals(good).rows}[throughput] == "yes"
    out = next(row for row in rows if not row.within and row.run.kind != "fits")
    silent = dataclasses.replace(out, run=dataclasses.replace(out.run, note=""))
    told = {l[0]: l[2] for l in validation.goals([*good, silent]).rows}
    assert told["every figure outside the band explained"] == "no"


def test_llama3_is_planned_interleaved_as_the_paper_ran_it(mfu):
    """Eight one-layer chunks per GPU (section 3.3.2: the layer removed from the first
    stage leaves its first chunk the embedding alone): both 8K-sequence rows in the band
    and fitting; planned as plain 1F1B, the same rows fall below it."""
    rows = {row.run.name: row for row in validation.validate(mfu=mfu)}
    for name in ("Llama 3 405B, 8,192 H100", "Llama 3 405B, 16,384 H100"):
        row = rows[name]
        assert (row.run.inputs["virtual_stages"], row.run.inputs["edge_layers"]) == (8, 7)
        assert row.within and row.fits, name
        plain = dataclasses.replace(row.run, inputs={**row.run.inputs, "virtual_stages": 1})
        assert validation.predict(plain, mfu)[0] / row.run.value < 0.8, name
