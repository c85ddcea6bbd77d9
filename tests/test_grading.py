"""Grading a learner's notebook headless, and writing learner copies without the solutions."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_lib.exercises import grading
from course_lib.exercises.checker import MIME

SETUP = """from course_lib.exercises.checker import Case, Exercise
total = Exercise("list_sum", "Sum a list.", sum, [Case(([1, 2, 3],), "three"), Case(([],), "empty")])
double = Exercise("double", "Double x.", lambda x: 2 * x, [Case((3,), "three"), Case((-1.5,), "negative")])"""


def exercise(source: str, **extra) -> nbformat.NotebookNode:
    return new_code_cell(source, metadata={"tags": ["exercise"]}, **extra)


def half_solved() -> nbformat.NotebookNode:
    """A notebook with two exercises, the first solved, the second still its stub, and a worked solution."""
    stub_output = new_output("stream", name="stdout", text="stale output of the stub\n")
    return new_notebook(cells=[
        new_markdown_cell("# A tiny lab"),
        new_code_cell(SETUP),
        exercise("def my_sum(xs):\n    out = 0\n    for x in xs:\n        out += x\n    return out"),
        new_code_cell("total(my_sum)"),
        exercise("def my_double(x):\n    raise NotImplementedError", outputs=[stub_output]),
        new_code_cell("double(my_double)"),
        new_code_cell("def my_double(x):\n    return 2 * x\n\n\ndouble(my_double)", metadata={"tags": ["solution"]}),
    ])


@pytest.fixture(scope="module")
def notebook(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lab") / "lab.ipynb"
    nbformat.write(half_solved(), path)
    return path


def test_a_half_solved_notebook_grades_one_pass_one_not_yet(notebook):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    original = notebook.read_bytes()
    rows = grading.grade_notebook(notebook, timeout_s=60)
    assert [(r.exercise, r.result) for r in rows] == [("list_sum", "pass"), ("double", "not yet")]
    assert rows[1].feedback.startswith("Not done yet: my_double")  # the solution cell was not graded
    assert notebook.read_bytes() == original  # the learner's file is never written
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"the grader left processes behind: {[p.cmdline() for p in left]}"


def test_the_grade_command_prints_the_table_and_exits_0(notebook):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert grading.main(["grade", str(notebook), "--timeout", "60"]) == 0
    text = out.getvalue()
    assert re.search(r"^exercise +result +feedback$", text, re.M)
    assert re.search(r"^list_sum +pass +Passed: list_sum", text, re.M)
    assert re.search(r"^double +not yet +Not done yet: my_double", text, re.M)


def test_results_are_read_from_the_checkers_outputs():
    def result(name: str, passed: bool) -> nbformat.NotebookNode:
        data = {"text/plain": "shown", MIME: {"exercise": name, "passed": passed, "message": f"{name} said so\nmore"}}
        return new_output("display_data", data=data)

    error = new_output("error", ename="SyntaxError", evalue="invalid syntax", traceback=[])
    nb = new_notebook(cells=[
        exercise("...", outputs=[result("a", False)]),  # no def: named by its cell
        new_code_cell("", outputs=[result("a", True)]),  # run again after a fix: the last result counts
        exercise("def broken(:", outputs=[error]),
        exercise("def never_checked(): ..."),
    ])
    rows = grading.read_results(nb)
    assert [(r.exercise, r.result, r.feedback) for r in rows] == [
        ("a", "pass", "a said so"),
        ("broken (cell 3)", "not yet", "the cell raised SyntaxError: invalid syntax"),
        ("never_checked (cell 4)", "not yet", "its checker did not run"),
    ]
    assert re.search(r"^a +pass +a said so$", grading.grade_table(rows), re.M)


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


def test_a_named_misconception_reaches_the_table():
    data = {"text/plain": "shown", MIME: {"exercise": "ring", "passed": False, "misconception": "sum vs mean",
                                          "message": "Not quite: ring is wrong on the case 'random'.\n  input: ..."}}
    nb = new_notebook(cells=[exercise("def ring(): ...", outputs=[new_output("display_data", data=data)])])
    (row,) = grading.read_results(nb)
    assert row.feedback == "Not quite: ring is wrong on the case 'random'. [misconception: sum vs mean]"


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
    assert [r.exercise for r in rows] == ["list_sum", "double"]
    assert (lab / "keep.txt").read_text() == "keep"
    assert (tmp_path / "course" / "other" / "answers.csv").read_text() == "a,b"


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(notebook, capsys, timeout):
    assert grading.main(["grade", str(notebook), "--timeout", timeout]) == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and "must be a positive number" in err and "Traceback" not in err


def test_a_cell_stopped_by_the_timeout_says_so(tmp_path):
    nb = new_notebook(cells=[new_code_cell(SETUP),
                             exercise("def my_sum(xs):\n    while True:\n        pass"),
                             new_code_cell("total(my_sum)")])
    nbformat.write(nb, tmp_path / "loop.ipynb")
    (row,) = grading.grade_notebook(tmp_path / "loop.ipynb", timeout_s=3)
    assert row.result == "not yet" and row.feedback.startswith("stopped after 3 s")


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
    worked.cells[4].source = "def my_double(x):\n    return x + x"  # the learner's answer
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
