"""Grading an instructor can trust (issue 39, section 3): each answer re-checked in a fresh process.

Two learners' notebooks of chapter 11's lab are graded once, through the command line with
``--json`` (module-scoped): one fools its own notebook (an emptied case list, a hand-made checker
output) and one answers with the lab's reference; the other calls the library function the
chapter teaches, names its function otherwise, and deleted an exercise's cell.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_lib.exercises import grading, recheck
from course_lib.exercises.checker import MIME

SETUP = "from course_lib.chapters import ch11_lab as lab\nimport torch"
KEYS = {"notebook", "exercise", "status", "message"}
ORDER = ["column_shard", "one_f_one_b", "mesh_groups", "rank0_2d"]  # as chapter 11's notebook has them


def exercise(source: str, **extra) -> nbformat.NotebookNode:
    return new_code_cell(source, metadata={"tags": ["exercise"]}, **extra)


def fooled() -> nbformat.NotebookNode:
    """Every checker in this notebook says "passed"; no answer is the learner's own work."""
    fake = {"text/plain": "Right: your prediction is within 2% of the measured bytes.",
            MIME: {"exercise": "rank0_2d", "passed": True, "message": "Right: faked",
                   "case": None, "misconception": None}}
    return new_notebook(cells=[
        new_code_cell(SETUP),
        exercise("def column_shard(weight, bias, degree, rank, parts=1):\n"
                 "    raise NotImplementedError\n\n\n"
                 "lab.column_shard.cases = []  # 'passed on all 0 hidden cases'\n"
                 "lab.column_shard(column_shard)"),
        exercise("prediction = None\n"
                 "lab.rank0_2d(prediction)\n"
                 "from IPython.display import display\n"
                 f"display({fake!r}, raw=True)  # shown last: what grading used to read"),
        exercise("def groups(world_size, tp):\n"
                 "    return lab._mesh_groups(world_size, tp)\n\n\n"
                 "lab.mesh_groups(groups)"),
    ])


def shortcuts() -> nbformat.NotebookNode:
    """The taught library function for column_shard, mesh_groups' groups swapped under another
    name, and the prediction's cell deleted."""
    return new_notebook(cells=[
        new_markdown_cell("# Chapter 11, a learner's copy"),
        new_code_cell(SETUP),
        exercise("from course_lib.parallel import tensor_parallel\n\n\n"
                 "def column_shard(weight, bias, degree, rank, parts=1):\n"
                 "    rows = tensor_parallel.shard_rows(len(weight), degree, rank, parts)\n"
                 "    return weight[rows].clone(), bias[rows].clone()\n\n\n"
                 "lab.column_shard(column_shard)"),
        exercise("def my_groups(world_size, tp):\n"
                 "    grid = torch.arange(world_size).view(world_size // tp, tp)\n"
                 "    return {'tp': grid.T.tolist(), 'dp': grid.tolist()}\n\n\n"
                 "lab.mesh_groups(my_groups)"),
    ])


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[dict[tuple[str, str], dict], subprocess.CompletedProcess]:
    """The two notebooks graded once with ``--json``: records by (notebook's name, exercise)."""
    folder = tmp_path_factory.mktemp("learners")
    for name, nb in (("fooled.ipynb", fooled()), ("shortcuts.ipynb", shortcuts())):
        nbformat.write(nb, folder / name)
    done = subprocess.run([sys.executable, "-m", "course_lib", "grade", str(folder / "fooled.ipynb"),
                           str(folder / "shortcuts.ipynb"), "--timeout", "60", "--json"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    return {(Path(r["notebook"]).name, r["exercise"]): r for r in records}, done


def test_the_json_for_an_lms_lists_every_exercise_of_each_notebook(graded):
    records, done = graded
    assert all(set(r) == KEYS for r in json.loads(done.stdout))
    for notebook in ("fooled.ipynb", "shortcuts.ipynb"):
        assert [e for n, e in records if n == notebook] == ORDER
    assert all(r["status"] in ("pass", "not yet", "missing") for r in records.values())
    assert all(r["message"] and "\n" not in r["message"] for r in records.values())


def test_an_emptied_case_list_does_not_pass(graded):
    record = graded[0][("fooled.ipynb", "column_shard")]
    assert record["status"] == "not yet"
    assert record["message"].startswith("Not done yet: column_shard still raises NotImplementedError")


def test_a_hand_made_checker_output_does_not_pass(graded):
    record = graded[0][("fooled.ipynb", "rank0_2d")]
    assert record["status"] == "not yet" and record["message"].startswith("Not answered yet")


def test_an_answer_that_calls_the_labs_reference_is_named_as_such(graded):
    record = graded[0][("fooled.ipynb", "mesh_groups")]
    assert record["status"] == "not yet"
    assert record["message"].startswith("calls the lab's reference `lab._mesh_groups` instead of "
                                        "computing it: write the computation yourself")


def test_an_answer_that_calls_the_taught_library_function_is_named_as_such(graded):
    record = graded[0][("shortcuts.ipynb", "column_shard")]
    assert record["status"] == "not yet"
    assert record["message"].startswith("calls `tensor_parallel.shard_rows`, the library function "
                                        "the chapter teaches, instead of computing it")


def test_a_deleted_exercise_cell_is_listed_as_missing(graded):
    record = graded[0][("shortcuts.ipynb", "rank0_2d")]
    assert record["status"] == "missing" and "copy it back from the learner copy" in record["message"]


def test_a_row_is_named_by_the_exercise_not_by_the_learners_def(graded):
    records = graded[0]
    assert ("shortcuts.ipynb", "my_groups") not in records
    record = records[("shortcuts.ipynb", "mesh_groups")]
    assert record["status"] == "not yet"
    assert record["message"].endswith("[misconception: dp and tp groups swapped]")


def test_grading_prints_no_kernel_warnings(graded):
    done = graded[1]
    assert "IPKernelApp" not in done.stderr and "WARNING" not in done.stderr
    assert done.stderr == ""


# --- how an answer's cell is found, and what of it a re-check runs (no notebook run) -----------

def test_an_exercise_cell_is_found_by_its_checker_call_its_cell_id_or_its_def():
    nb = new_notebook(cells=[
        new_code_cell(SETUP),
        exercise("def mine(world_size, tp):\n    return {}"),  # the checker in the next cell
        new_code_cell("lab.mesh_groups(mine)"),
        exercise("prediction = 5", id="the-sources-cell"),  # its call deleted: found by its id
        exercise("def column_shard(w, b, degree, rank, parts=1):\n    return w, b"),  # its def
    ])
    found = grading._answers(nb, ORDER, {"the-sources-cell": "rank0_2d"})
    assert {name: (cell, argument) for name, (cell, _, argument) in found.items()} == {
        "mesh_groups": (2, "mine"), "rank0_2d": (4, None), "column_shard": (5, "column_shard")}


def test_a_recheck_leaves_out_what_a_cell_sets_on_the_lab_or_calls_on_it():
    cell = ("import math\n"
            "lab.column_shard.cases = []\n"
            "setattr(lab.column_shard, 'cases', [])\n"
            "del lab.mesh_groups.cases\n"
            "lab.column_shard(column_shard)\n"
            "answer = lab._mesh_groups\n"
            "def column_shard(w, b, degree, rank, parts=1):\n    return w, b\n")
    kept = [ast.unparse(node) for node in ast.parse(cell).body if recheck._kept(node)]
    assert kept == ["import math", "answer = lab._mesh_groups",
                    "def column_shard(w, b, degree, rank, parts=1):\n    return (w, b)"]


def test_a_recheck_imports_what_the_cell_and_its_answer_read_and_no_more():
    imports = ["import sys", "import torch", "import torch.nn.functional as F",
               "from course_lib.chapters import ch11", "from course_lib.parallel import (launch,\n"
               "    tensor_parallel)", "from math import *", "import numpy as np"]
    cell = "def mine(w):\n    return F.relu(w) @ tensor_parallel.x(torch.ones(2))\n"
    assert recheck._imports_used(imports, [cell, "mine"]) == [
        "import torch", "import torch.nn.functional as F",
        "from course_lib.parallel import (launch,\n    tensor_parallel)", "from math import *"]
    # a name read only by the answer handed to the checker, and an answer that is not Python
    assert recheck._imports_used(imports, ["np.ones(3)", "1 +"]) == ["from math import *",
                                                                     "import numpy as np"]
