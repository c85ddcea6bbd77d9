"""Distributed exercises: the learner's source runs on real ranks, one launch for all cases, and
errors, hangs and stubs come back as feedback without a process left behind."""

import dataclasses
import os
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from course_lib.exercises import ranks
from course_lib.exercises.checker import Case, Misconception
from course_lib.exercises.ranks import RankExercise, learner_source
from course_lib.parallel import launch, warm_ranks
from conftest import ranks_import_from

HERE = Path(__file__).resolve().parent


def _inputs(rank, world_size, value):
    """Each rank's argument: its own number."""
    return (torch.tensor([value + rank], dtype=torch.float64),)


def _total(x):
    """The reference: the sum over the ranks."""
    y = x.clone()
    dist.all_reduce(y)
    return y


def _doubled(x):
    y = x.clone()
    dist.all_reduce(y)
    return 2 * y


def mine(x):
    """A learner's right answer."""
    y = x.clone()
    dist.all_reduce(y)
    return y


def twice(x):
    """A learner's answer with the misconception 'doubled'."""
    y = x * 2
    dist.all_reduce(y)
    return y


EXERCISE = RankExercise(
    "total", "sum over the ranks", _total,
    [Case((), "random", {"value": 1.0}), Case((), "negative", {"value": -5.0})],
    misconceptions=(Misconception("doubled", "double it", _doubled),),
    inputs="test_ranks:_inputs", nprocs=2, launch_timeout=30, collective_timeout=10)


@pytest.fixture
def importable(monkeypatch):
    """Let the ranks import this test module (for ``inputs``); the child processes running before the test."""
    ranks_import_from(monkeypatch, HERE)
    return set(_children())  # what already ran (another test's browser, say): not the ranks'


def _children() -> list[int]:
    """Processes started by this one that still run (ranks left behind): not the warm server
    that forks them (course_lib.parallel.warm_ranks), which lives as long as this process."""
    found, server = [], warm_ranks._current and warm_ranks._current.process.pid
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rpartition(")")[2].split()
            if int(fields[1]) == os.getpid() and fields[0] != "Z" and int(entry.name) != server:
                found.append(int(entry.name))
    return found


def test_learner_source_reads_a_function_and_refuses_what_has_none():
    def inner(x):
        return x + 1

    source, file, line = learner_source(inner)
    assert source.startswith("def inner(x):") and file == __file__ and line > 1
    with pytest.raises(ValueError, match="not a function"):
        learner_source(lambda x: x)
    with pytest.raises(ValueError, match="not a function"):
        learner_source(len)


def test_learner_source_reads_a_cell_as_ipython_keeps_it_and_says_so_when_it_cannot():
    import linecache

    cell = "def shipped(x):\n    return x * 3\n"
    space: dict = {}
    exec(compile(cell, "<cell 1 of test_ranks>", "exec"), space)  # not in linecache: unreadable
    with pytest.raises(ValueError):
        learner_source(space["shipped"])
    linecache.cache["<cell 2 of test_ranks>"] = (len(cell), None, cell.splitlines(True), "<cell 2 of test_ranks>")
    exec(compile(cell, "<cell 2 of test_ranks>", "exec"), space)  # IPython keeps each cell so
    assert learner_source(space["shipped"])[0] == cell


def test_a_right_function_passes_and_a_wrong_one_is_named(importable, monkeypatch):
    launched, real = [], launch.launch  # counted, not timed: a busy machine's launch took 20 s
    monkeypatch.setattr(launch, "launch", lambda *a, **k: launched.append(a) or real(*a, **k))
    assert EXERCISE.check(mine).passed
    assert len(launched) == 1  # one launch for both cases
    wrong = EXERCISE.check(twice)
    assert not wrong.passed and wrong.misconception == "doubled" and wrong.case == "random"
    assert "expected (rank 0): tensor of shape (1,), float64: [3]" in wrong.message
    assert set(_children()) <= importable  # no rank left behind


def test_an_error_comes_back_at_the_learner_line_of_the_rank_that_raised(importable):
    def broken(x):
        if dist.get_rank() == 1:
            raise ValueError("no")  # the line the feedback names
        y = x.clone()
        dist.all_reduce(y)
        return y

    # A collective timeout far above what a launch takes on a busy machine (11 s was seen with
    # the 10 s of EXERCISE): waiting for it would take 60 s, failing at once takes seconds.
    patient = dataclasses.replace(EXERCISE, collective_timeout=60, launch_timeout=120)
    start = time.monotonic()
    feedback = patient.check(broken)
    # rank 1 left the group as it raised: rank 0's all-reduce failed at once, not at the timeout
    assert time.monotonic() - start < patient.collective_timeout / 2
    assert not feedback.passed and feedback.case == "random"
    assert feedback.message.startswith("Your code raised ValueError: no on the case 'random' (rank 1)")
    assert 'raise ValueError("no")  # the line the feedback names' in feedback.message
    assert "Traceback" not in feedback.message
    assert set(_children()) <= importable  # no rank left behind


def test_a_hang_is_stopped_by_the_launch_timeout(importable):
    def spins(x):
        while True:
            pass

    import dataclasses
    quick = dataclasses.replace(EXERCISE, launch_timeout=6)
    feedback = quick.check(spins)
    assert not feedback.passed and feedback.message.startswith("Stopped after 6 s: the 2 ranks")
    assert set(_children()) <= importable  # no rank left behind


def test_a_stub_is_not_done_without_starting_ranks(monkeypatch):
    def stub(x):
        """Sum it."""
        raise NotImplementedError  # your code here

    def refuse(*args, **kwargs):
        raise AssertionError("a stub must not start ranks")

    monkeypatch.setattr(launch, "launch", refuse)
    feedback = EXERCISE.check(stub)
    assert not feedback.passed and feedback.message.startswith("Not done yet: stub")
    lam = EXERCISE.check(lambda x: x)
    assert not lam.passed and "cannot be read" in lam.message


def test_the_library_functions_go_by_name_and_the_others_by_source():
    assert ranks._program(launch.hello) == {"target": "course_lib.parallel.launch:hello"}
    shipped = ranks._program(_total)
    assert shipped["name"] == "_total" and "dist.all_reduce(y)" in shipped["source"]


def test_many_functions_get_in_one_launch_what_each_gets_alone(importable, monkeypatch):
    def broken(x):
        if dist.get_rank() == 1:
            raise ValueError("no")
        y = x.clone()
        dist.all_reduce(y)
        return y

    def after(x):  # runs after a function that left rank 0 waiting: checked on its own
        y = x.clone()
        dist.all_reduce(y)
        return y + 1

    def stub(x):
        raise NotImplementedError  # your code here

    fns = [twice, mine, stub, broken, after]
    alone = [EXERCISE.check(fn) for fn in fns]
    launches = []
    real = launch.launch
    monkeypatch.setattr(launch, "launch", lambda *a, **k: launches.append(a) or real(*a, **k))
    together = EXERCISE.check_many(fns)
    assert [(f.passed, f.misconception, f.case, f.message) for f in together] == [
        (f.passed, f.misconception, f.case, f.message) for f in alone]
    assert [f.passed for f in together] == [False, True, False, False, False]
    assert len(launches) == 2  # one for all, one for the function after the one that raised
    assert set(_children()) <= importable  # no rank left behind


def _helper(x):
    return x


def uses_a_helper(x):
    """A learner's answer that calls a helper defined beside it, not inside it."""
    y = _helper(x).clone()
    dist.all_reduce(y)
    return y


def test_a_helper_left_outside_the_function_is_explained(importable):
    feedback = EXERCISE.check(uses_a_helper)
    assert not feedback.passed and "NameError" in feedback.message
    assert "travels to the ranks alone" in feedback.message
