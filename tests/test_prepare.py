"""``python -m course_lib prepare`` (course_lib/prepare.py): the first steps in this process, the
rest side by side in processes that share the cores, a failure or a step too long stopping them
all; chapter 6's fine-tuning parts together make every run of the chapter, each once."""

from __future__ import annotations

import functools
import inspect
import os
import pickle
import time
from pathlib import Path

import pytest
import torch

from course_lib import prepare
from course_lib.compression import finetuning, prune, prune_structured


def record(name: str, folder: str, seconds: float = 0.0, fail: bool = False,
           progress: bool = True) -> None:
    """A step of the pool (found again by name in its process): write down where it ran."""
    if fail:
        raise ValueError(f"step {name} failed")
    time.sleep(seconds)
    (Path(folder) / name).write_text(f"{os.getpid()} {torch.get_num_threads()} {progress}")


def only(monkeypatch, chosen: list) -> list[str]:
    """Have prepare run ``chosen`` instead of its steps; the list records the first ones."""
    ran: list[str] = []
    first = [(what, functools.partial(ran.append, what)) for what in prepare.FIRST]
    monkeypatch.setattr(prepare, "steps", lambda: first + chosen)
    monkeypatch.setattr(prepare.env, "check_cache", lambda **k: None)
    return ran


@pytest.mark.parametrize("cores,expected", [(1, (1, 1)), (2, (2, 1)), (8, (2, 4))])
def test_side_by_side_shares_the_cores(monkeypatch, cores, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert prepare.side_by_side() == expected
    assert prepare.side_by_side(4) == (4, max(1, cores // 4))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_side_by_side_refuses_a_count_that_is_not_a_whole_number(bad):
    with pytest.raises(ValueError, match="workers must be a whole number >= 1"):
        prepare.side_by_side(bad)


def test_one_worker_runs_every_step_here_in_order(monkeypatch, tmp_path, capsys):
    chosen = [(n, functools.partial(record, n, str(tmp_path))) for n in ("a", "b")]
    ran = only(monkeypatch, chosen)
    prepare.prepare(workers=1)
    assert ran == list(prepare.FIRST)
    for name in ("a", "b"):
        pid, _, progress = (tmp_path / name).read_text().split()
        assert int(pid) == os.getpid() and progress == "True"
    out = capsys.readouterr().out
    assert out.index("==> a") < out.index("==> b") and "side by side" not in out


@pytest.mark.slow
def test_the_later_steps_run_side_by_side_in_other_processes(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    names = ("a", "b", "c")
    ran = only(monkeypatch, [(n, functools.partial(record, n, str(tmp_path), 3))
                             for n in names])
    prepare.prepare()
    assert ran == list(prepare.FIRST)
    where = [(tmp_path / n).read_text().split() for n in names]
    assert all(int(pid) != os.getpid() for pid, _, _ in where)
    assert len({pid for pid, _, _ in where}) == 2, "two processes share the three steps"
    assert {(threads, progress) for _, threads, progress in where} == {("2", "False")}
    out = capsys.readouterr().out
    assert "==> side by side on 2 processes of 2 thread(s) each:" in out
    assert all(f"s: {n}\n" in out for n in names)


@pytest.mark.slow
def test_a_failed_step_stops_the_others_and_its_error_is_raised(monkeypatch, tmp_path):
    steps = [("fails", functools.partial(record, "fails", str(tmp_path), fail=True)),
             ("long", functools.partial(record, "long", str(tmp_path), 60))]
    only(monkeypatch, steps)
    start = time.monotonic()
    with pytest.raises(ValueError, match="step fails failed"):
        prepare.prepare(workers=2)
    assert time.monotonic() - start < 30 and not (tmp_path / "long").exists()


@pytest.mark.slow
def test_a_step_that_outlasts_the_timeout_stops_every_step(monkeypatch, tmp_path):
    monkeypatch.setattr(prepare, "STEP_TIMEOUT", 1.0)
    only(monkeypatch, [(n, functools.partial(record, n, str(tmp_path), 60)) for n in "ab"])
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="ran longer than 1 s and every step was stopped"):
        prepare.prepare(workers=2)
    assert time.monotonic() - start < 30 and not list(tmp_path.iterdir())


def test_prepare_s_steps_after_the_first_take_progress_and_travel_by_name():
    every = prepare.steps()
    later = every[len(prepare.FIRST):]
    assert [what for what, _ in every[:len(prepare.FIRST)]] == list(prepare.FIRST)
    assert len(later) == 3 + len(prune.CHAPTER_PARTS)
    for what, function in later:
        assert "progress" in inspect.signature(function).parameters, what
        assert pickle.loads(pickle.dumps(function)) is not None, what


def chapter6_runs(monkeypatch, parts) -> list[tuple]:
    """The runs chapter_finetunes makes for ``parts``, none trained: (what, label, seed)."""
    runs: list[tuple] = []
    monkeypatch.setattr(prune, "magnitude_masks", lambda model, s, scope: (s, scope))
    monkeypatch.setattr(prune, "prune_and_finetune", lambda model, masks, label, recipe, *a:
                        runs.append(("one shot", label, recipe.seed)))
    monkeypatch.setattr(prune, "gradual_prune", lambda model, final, stages, scope, recipe, *a:
                        runs.append(("gradual", f"{scope} {final:.0%}", recipe.seed)))
    monkeypatch.setattr(prune_structured, "neurons_to_keep", lambda model, share: share)
    monkeypatch.setattr(prune_structured, "shrink_mlp", lambda model, keep: model)
    monkeypatch.setattr(finetuning, "finetune", lambda model, label, recipe, *a, **k:
                        runs.append(("structured", label, recipe.seed)))
    prune.chapter_finetunes(object(), tokenizer=object(), progress=False, parts=parts)
    return runs


def test_chapter6_parts_together_make_every_run_once(monkeypatch):
    every = chapter6_runs(monkeypatch, prune.CHAPTER_PARTS)
    by_part = [chapter6_runs(monkeypatch, [part]) for part in prune.CHAPTER_PARTS]
    assert sorted(run for part in by_part for run in part) == sorted(every)
    assert len(set(every)) == len(every), "a run made twice"
    sweep = [r for r in every if r[1].startswith("magnitude") and r[2] == 3]
    assert len(sweep) == 2 * len(prune.SWEEP) - 1  # the unpruned control once
    assert [r for r in every if r[0] == "gradual"] == [
        ("gradual", "global 90%", seed) for seed in prune.GRADUAL_SEEDS]
    one_shot_90 = [r[2] for r in every if r[1] == "magnitude global 90%"]
    assert sorted(one_shot_90) == sorted(prune.GRADUAL_SEEDS)  # the recipe's seed once
    assert ("structured", "neurons 50%", 3) in every


def test_chapter6_refuses_an_unknown_part(monkeypatch):
    with pytest.raises(ValueError, match="parts are magnitude layer, magnitude global, "
                                         "gradual, neurons; got sweep"):
        chapter6_runs(monkeypatch, ["sweep"])
