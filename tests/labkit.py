"""What every chapter's lab test shares: the lab modules, their notebooks, and running a lab cell.

Each chapter's exercises live in ``course_lib/chapters/chNN_lab.py`` (the Dutch edition's in
``nl_lab.py``); its notebook imports it as ``lab``. ``tests/test_chNN_lab.py`` records, in a
dict ``WRONG = {exercise name: {misconception name: wrong function}}``, one wrong implementation
per misconception the checkers claim to recognise, written in the tests (not the library's own);
``tests/test_labs.py`` runs the checks that every lab shares.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import linecache
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import numpy as np
import torch

from course_lib.exercises import checker, predictions
from course_lib.exercises.checker import Exercise, Feedback
from course_lib.exercises.predictions import Prediction

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
_CELLS = itertools.count()

#: Each lab module and the notebook that uses it.
LABS = {f"ch{p.name[:2]}_lab": p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))}
LABS["nl_lab"] = NOTEBOOKS / "nl" / "kwantisatie.ipynb"


def lab_module(name: str) -> ModuleType:
    """The lab module ``course_lib.chapters.<name>``."""
    return importlib.import_module(f"course_lib.chapters.{name}")


def existing() -> list[str]:
    """The lab modules that exist (``test_labs`` requires them all; the others' tests run on these)."""
    return [name for name in sorted(LABS) if importlib.util.find_spec(f"course_lib.chapters.{name}")]


def items(module: ModuleType) -> dict[str, Exercise | Prediction]:
    """The lab's exercises and predictions, by the name the notebook calls them with."""
    return {k: v for k, v in vars(module).items() if isinstance(v, (Exercise, Prediction))}


def check_all(exercise: Exercise, fns: list[Any]) -> list[Feedback]:
    """``exercise.check`` of each of ``fns``; a checker that launches ranks checks them all in one
    launch (:meth:`~course_lib.exercises.ranks.RankExercise.check_many`)."""
    from course_lib.exercises.ranks import RankExercise

    if isinstance(exercise, RankExercise):
        return exercise.check_many(fns)
    return [exercise.check(fn) for fn in fns]


_MEASURED: dict[int, dict[str, float]] = {}


def measure_once(prediction: Prediction) -> dict[str, float]:
    """``prediction.measure()``, once per session: ``test_labs`` and ``test_wrapping`` grade the same
    measurement (a launch on ranks, for some)."""
    if id(prediction) not in _MEASURED:
        _MEASURED[id(prediction)] = prediction.measure()
    return dict(_MEASURED[id(prediction)])


def tagged(path: Path, tag: str) -> list[nbformat.NotebookNode]:
    """The code cells of the notebook at ``path`` that carry ``tag``."""
    nb = nbformat.read(path, as_version=4)
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


def run_cell(source: str, module: ModuleType, monkeypatch: Any) -> list[Feedback]:
    """Run a lab cell's source with ``torch``, ``math``, ``np`` and ``lab`` defined; return the feedback it showed."""
    shown: list[Feedback] = []
    monkeypatch.setattr(checker, "show", shown.append)
    monkeypatch.setattr(predictions, "show", shown.append)
    name = f"<lab cell {next(_CELLS)}>"  # each cell its own file in linecache, as IPython does
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), {"torch": torch, "math": math, "np": np, "lab": module})
    return shown
