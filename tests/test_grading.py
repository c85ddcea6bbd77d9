"""Grading a learner's notebook headless, and writing learner copies without the solutions."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbclient
import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_lib.exercises import grading

SETUP = "from course_lib.chapters import ch11_lab as lab"  # chapter 11's lab: quick hidden cases
#: mesh_groups, solved under another name.
GROUPS = ("def my_groups(world_size, tp):\n"
          "    rows = [list(range(d * tp, (d + 1) * tp)) for d in range(world_size // tp)]\n"
          "    return {'tp': rows, 'dp': [list(column) for column in zip(*rows)]}")
SHARD = ("def column_shard(weight, bias, degree, rank, parts=1):\n"
         "    rows = torch.cat([block.tensor_split(degree)[rank]\n"
         "                      for block in torch.arange(len(weight)).tensor_split(parts)])\n"
         "    return weight[rows].clone(), bias[rows].clone()")


def exercise(source: str, **extra) -> nbformat.NotebookNode:
    return new_code_cell(source, metadata={"tags": ["exercise"]}, **extra)


def half_solved() -> nbformat.NotebookNode:
    """Chapter 11's lab with its prediction's cell deleted, mesh_groups solved (its checker called
    in the next cell), column_shard still its stub, and column_shard's worked solution."""
    stub_output = new_output("stream", name="stdout", text="stale output of the stub\n")
    return new_notebook(cells=[
        new_markdown_cell("# A tiny lab"),
        new_code_cell(SETUP + "\nimport torch"),
        exercise(GROUPS),
        new_code_cell("lab.mesh_groups(my_groups)"),
        exercise("def column_shard(weight, bias, degree, rank, parts=1):\n    raise NotImplementedError",
                 outputs=[stub_output]),
        new_code_cell("lab.column_shard(column_shard)"),
        new_code_cell(SHARD + "\n\n\nlab.column_shard(column_shard)", metadata={"tags": ["solution"]}),
    ])


@pytest.fixture(scope="module")
def notebook(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lab") / "lab.ipynb"
    nbformat.write(half_solved(), path)
    return path


def test_the_grade_command_grades_one_pass_one_not_yet_and_prints_the_table(notebook, monkeypatch):
    """One grading (a kernel and a fresh process per exercise), through the command: the rows it
    grades, the table it prints and its exit status; the learner's file is never written, and
    nothing it started is left running."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    original = notebook.read_bytes()
    graded, grade = [], grading.grade_notebook
    monkeypatch.setattr(grading, "grade_notebook", lambda *args: graded.append(grade(*args)) or graded[-1])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert grading.main(["grade", str(notebook), "--timeout", "60"]) == 0
    [rows] = graded
    assert [(r.exercise, r.result) for r in rows] == [
        ("column_shard", "not yet"), ("one_f_one_b", "missing"), ("mesh_groups", "pass"),
        ("rank0_2d", "missing")]
    assert rows[0].feedback.startswith("Not done yet: column_shard")  # its solution was not graded
    assert notebook.read_bytes() == original  # the learner's file is never written
    left = started_since(before)
    assert not left, f"the grader left processes behind: {[p.cmdline() for p in left]}"
    text = out.getvalue()
    assert re.search(r"^exercise +result +feedback$", text, re.M)
    assert re.search(r"^mesh_groups +pass +Passed: mesh_groups", text, re.M)
    assert re.search(r"^column_shard +not yet +Not done yet: column_shard", text, re.M)
    assert re.search(r"^rank0_2d +missing +its exercise cell .* is gone", text, re.M)


def started_since(before: set[int]) -> list[psutil.Process]:
    """This process's descendants still running that are not in ``before`` and were not started
    by a process in ``before`` (a browser an earlier test of this worker keeps starts helpers of
    its own at any time; the grader's kernel and what it starts are new, and still counted)."""
    left = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.pid in before or any(a.pid in before for a in p.parents()):
                continue
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
        except psutil.NoSuchProcess:
            continue
    return left


def test_a_learner_copy_has_no_solution_and_clean_exercises(tmp_path):
    source = half_solved()
    source.cells[3].outputs = [new_output("stream", name="stdout", text="Passed\n")]
    nbformat.write(source, tmp_path / "lab.ipynb")
    copy = nbformat.read(grading.learner_copy(tmp_path / "lab.ipynb", tmp_path / "out" / "lab.ipynb"), as_version=4)
    assert len(copy.cells) == len(source.cells) - 1
    assert not any("solution" in c.metadata.get("tags", []) for c in copy.cells)
    assert [c.source for c in copy.cells] == [c.source for c in source.cells[:-1]]
    assert copy.cells[4].outputs == [] and copy.cells[3].outputs[0].text == "Passed\n"


def test_learner_copies_keep_relative_paths(tmp_path, capsys):
    for rel in ("01_a.ipynb", "nl/b.ipynb", ".ipynb_checkpoints/01_a-checkpoint.ipynb"):
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(half_solved(), tmp_path / "src" / rel)
    assert grading.main(["learner-copies", str(tmp_path / "dst"), "--source", str(tmp_path / "src")]) == 0
    written = sorted(p.relative_to(tmp_path / "dst").as_posix() for p in (tmp_path / "dst").rglob("*.ipynb"))
    assert written == ["01_a.ipynb", "nl/b.ipynb"] and "wrote 2 learner copies" in capsys.readouterr().out
    assert grading.main(["learner-copies", str(tmp_path / "src"), "--source", str(tmp_path / "src")]) == 2


def test_bad_input_exits_2_with_a_message(tmp_path, capsys):
    assert grading.main(["grade", str(tmp_path / "missing.ipynb")]) == 2
    assert "no notebook" in capsys.readouterr().err
    (tmp_path / "bad.ipynb").write_text("not json")
    assert grading.main(["grade", str(tmp_path / "bad.ipynb")]) == 2
    assert "not a readable notebook" in capsys.readouterr().err
    assert grading.main(["learner-copies", str(tmp_path / "x"), "--source", str(tmp_path / "nowhere")]) == 2


def test_a_real_chapter_half_solved_grades_its_solved_exercise_pass_and_the_rest_not_yet(tmp_path):
    source = Path(__file__).resolve().parents[1] / "notebooks" / "04_quantizing_pi.ipynb"
    copy = grading.learner_copy(source, tmp_path / "04_quantizing_pi.ipynb")
    nb = nbformat.read(copy, as_version=4)
    stubs = [c for c in nb.cells if "exercise" in c.metadata.get("tags", [])]
    solution = next(c for c in nbformat.read(source, as_version=4).cells if "solution" in c.metadata.get("tags", []))
    stubs[0].source = solution.source.replace(", must_pass=True", "")  # the learner solved the first one
    nbformat.write(nb, copy)
    rows = grading.grade_notebook(copy, timeout_s=120)
    assert len(rows) == len(stubs) >= 3
    assert rows[0].result == "pass" and rows[0].feedback.startswith("Passed")
    assert all(r.result == "not yet" and r.feedback.startswith(("Not done yet", "Not answered yet")) for r in rows[1:])


# --- nothing lost, nothing hung (issue 40) ----------------------------------------------------------

def test_grading_runs_the_notebook_away_from_the_files_beside_it(tmp_path):
    """A learner's cell that deletes files by relative path deletes nothing real."""
    lab = tmp_path / "course" / "lab"
    (tmp_path / "course" / "other").mkdir(parents=True)
    lab.mkdir()
    (lab / "keep.txt").write_text("keep")
    (tmp_path / "course" / "other" / "answers.csv").write_text("a,b")
    nb = half_solved()
    nb.cells.insert(1, new_code_cell(
        "import os, pathlib\n"
        "for name in ('keep.txt', '../other/answers.csv'):\n"
        "    if pathlib.Path(name).exists():\n"
        "        os.remove(name)\n"
        "print(sorted(os.listdir('.')))"))
    nbformat.write(nb, lab / "lab.ipynb")
    rows = grading.grade_notebook(lab / "lab.ipynb", timeout_s=60)
    assert [r.exercise for r in rows] == ["column_shard", "one_f_one_b", "mesh_groups", "rank0_2d"]
    assert (lab / "keep.txt").read_text() == "keep"
    assert (tmp_path / "course" / "other" / "answers.csv").read_text() == "a,b"


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(notebook, capsys, timeout):
    assert grading.main(["grade", str(notebook), "--timeout", timeout]) == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and "must be a positive number" in err and "Traceback" not in err


def test_a_cell_stopped_by_the_timeout_says_so_and_one_deaf_to_it_does_not_hold_the_grading(
        tmp_path, monkeypatch):
    """The kernel never answers a cell that ignores the interrupt (a bare ``except:`` in a loop
    can do the same): the grading goes on past it, where nbclient would interrupt it forever;
    the exercise stuck in its own loop is then re-checked, and timed out, in its own process."""
    deaf = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    nb = new_notebook(cells=[new_code_cell(SETUP), new_code_cell(deaf),
                             exercise("def my_groups(world_size, tp):\n    while True:\n        pass"),
                             new_code_cell("lab.mesh_groups(my_groups)")])
    nbformat.write(nb, tmp_path / "loop.ipynb")
    clients, rows = [], []

    class Recorded(nbclient.NotebookClient):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            clients.append(self)

    monkeypatch.setattr(nbclient, "NotebookClient", Recorded)
    grader = threading.Thread(daemon=True, target=lambda: rows.extend(
        grading.grade_notebook(tmp_path / "loop.ipynb", timeout_s=3)))
    grader.start()
    grader.join(60)
    if grader.is_alive():  # the kernel still spins: kill it, so that nothing is left running
        os.kill(clients[0].km.provisioner.pid, signal.SIGKILL)
        grader.join(30)
        pytest.fail("the grading still waited on a cell a minute after its 3 s timeout")
    row = {r.exercise: r for r in rows}["mesh_groups"]
    assert row.result == "not yet" and row.feedback.startswith("timed out after 3 s (")
    assert "KeyboardInterrupt" not in row.feedback and "--timeout" in row.feedback


def test_a_notebook_without_exercises_is_not_graded_silently(tmp_path, capsys):
    nbformat.write(new_notebook(cells=[new_code_cell("1 + 1")]), tmp_path / "other.ipynb")
    assert grading.main(["grade", str(tmp_path / "other.ipynb")]) == 2
    assert "has no exercises" in capsys.readouterr().err


def test_learner_copies_never_overwrite_a_learners_work(tmp_path, capsys):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    nbformat.write(half_solved(), src / "lab.ipynb")
    assert grading.main(["learner-copies", str(dst), "--source", str(src)]) == 0
    assert grading.main(["learner-copies", str(dst), "--source", str(src)]) == 0  # untouched
    worked = nbformat.read(dst / "lab.ipynb", as_version=4)
    worked.cells[4].source = SHARD  # the learner's answer
    nbformat.write(worked, dst / "lab.ipynb")
    before = (dst / "lab.ipynb").read_bytes()
    capsys.readouterr()
    assert grading.main(["learner-copies", str(dst), "--source", str(src)]) == 2
    err = capsys.readouterr().err
    assert "lab.ipynb" in err and "--force" in err and "Nothing was written" in err
    assert (dst / "lab.ipynb").read_bytes() == before
    assert grading.main(["learner-copies", str(dst), "--source", str(src), "--force"]) == 0
    assert (dst / "lab.ipynb").read_bytes() != before


@pytest.mark.parametrize("case", ["no notebooks", "dest holds the source"])
def test_learner_copies_that_would_write_nothing_say_why(tmp_path, capsys, case):
    src = tmp_path / "src"
    src.mkdir()
    if case == "no notebooks":
        (src / "notes.txt").write_text("x")
        dest, message = tmp_path / "dst", "holds no notebooks"
    else:
        nbformat.write(half_solved(), src / "lab.ipynb")
        dest, message = tmp_path, "holds the source folder"
    assert grading.main(["learner-copies", str(dest), "--source", str(src)]) == 2
    assert message in capsys.readouterr().err


def test_the_commands_take_no_abbreviated_options(notebook, capsys):
    with pytest.raises(SystemExit):
        grading.main(["grade", str(notebook), "--time", "5"])
    assert "unrecognized arguments: --time" in capsys.readouterr().err


# --- a broken notebook: one line, nothing run, nothing written (issue 40) -------------------------

BROKEN = {
    "a cell without its outputs": ('{"cell_type": "code", "metadata": {"tags": ["exercise"]}, '
                                   '"source": "x = 1"}', "cell 2: 'outputs' is a required property"),
    "an unknown cell type": ('{"cell_type": "banana", "metadata": {}, "source": "x"}',
                             "cell 2: is not a markdown, code or raw cell"),
}


def broken_notebook(path: Path, cell: str) -> Path:
    """A notebook file whose second cell breaks the format (nbformat reads it, its schema does not)."""
    good = '{"cell_type": "markdown", "metadata": {}, "source": "# lab"}'
    path.write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, '
                    f'"cells": [{good}, {cell}]}}')
    return path


@pytest.mark.parametrize("case", BROKEN)
def test_grade_refuses_a_notebook_that_breaks_the_format_in_one_line(tmp_path, capsys, case):
    cell, where = BROKEN[case]
    path = broken_notebook(tmp_path / "lab.ipynb", cell)
    before = path.read_bytes()
    assert grading.main(["grade", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured
    assert f"{path} is not a valid notebook: {where}" in captured.err
    assert "Traceback" not in captured.err and path.read_bytes() == before


@pytest.mark.parametrize("broken", ["not JSON", "a cell without its outputs"])
def test_learner_copies_from_a_broken_notebook_write_nothing(tmp_path, capsys, broken):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    nbformat.write(half_solved(), src / "01_lab.ipynb")  # read (and would be written) first
    if broken == "not JSON":
        (src / "02_lab.ipynb").write_text('{"cells": [')
    else:
        broken_notebook(src / "02_lab.ipynb", BROKEN[broken][0])
    assert grading.main(["learner-copies", str(dst), "--source", str(src)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "02_lab.ipynb is not a" in err and "Nothing was written" in err
    assert not dst.exists()


def test_learner_copies_over_a_corrupted_notebook_leave_it_as_it_is(tmp_path, capsys):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    nbformat.write(half_solved(), src / "lab.ipynb")
    (dst / "lab.ipynb").write_text('{"cells": [ half a learner\'s notebook')
    assert grading.main(["learner-copies", str(dst), "--source", str(src)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lab.ipynb" in err and "--force" in err
    assert (dst / "lab.ipynb").read_text() == '{"cells": [ half a learner\'s notebook'


def test_the_leak_check_sees_a_new_process_and_not_an_older_ones_helper():
    """``started_since`` can fail: a process started after ``before`` is named; one that an
    older process starts meanwhile (a browser's helper) is not."""
    older = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                              "sys.stdin.readline(); subprocess.Popen(['sleep', '30']); "
                              "time.sleep(30)"], stdin=subprocess.PIPE, text=True)
    try:
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        new = subprocess.Popen(["sleep", "30"])
        older.stdin.write("go\n")
        older.stdin.flush()
        for _ in range(100):  # the older process's helper starts
            if len(psutil.Process(older.pid).children()) == 1:
                break
            time.sleep(0.05)
        assert [p.pid for p in started_since(before)] == [new.pid]
        new.kill()
        new.wait()
    finally:
        for p in psutil.Process(older.pid).children(recursive=True):
            p.kill()
        older.kill()
        older.wait()
