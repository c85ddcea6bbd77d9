"""Every chapter is a lab: at least two code exercises and one prediction, each stub not accepted,
each worked solution accepted, each misconception a checker claims recognised on a wrong answer
written in the tests (issue 27)."""

from __future__ import annotations

import dataclasses
import importlib
import re

import nbformat
import pytest

from course_lib.exercises.checker import PHRASES, Exercise
from course_lib.exercises.predictions import PHRASES as PREDICTION_PHRASES
from course_lib.exercises.predictions import Prediction
from labkit import LABS, check_all, existing, items, lab_module, measure_once, run_cell, tagged

NAMES = existing()


@pytest.mark.parametrize("name", sorted(LABS))
def test_every_chapter_has_a_lab(name):
    assert name in NAMES, f"write course_lib/chapters/{name}.py, the lab of {LABS[name].name}"


def calls(source: str) -> list[str]:
    """The lab items a cell calls: ``lab.name(``."""
    return re.findall(r"\blab\.(\w+)\(", source)


@pytest.mark.parametrize("name", NAMES)
def test_every_lab_has_two_exercises_and_a_prediction(name):
    found = items(lab_module(name))
    assert sum(isinstance(v, Exercise) for v in found.values()) >= 2, f"{name}: write two code exercises"
    assert sum(isinstance(v, Prediction) for v in found.values()) >= 1, f"{name}: write a prediction"
    for key, item in found.items():
        assert item.name == key, f"{name}.{key} is named {item.name!r}: use the attribute's name"
        if isinstance(item, Exercise):
            cases = item.cases() if callable(item.cases) else item.cases
            assert len(cases) >= 3 and len({c.label for c in cases}) >= 2, f"{key}: random cases and edges"


@pytest.mark.parametrize("name", NAMES)
def test_every_exercise_has_a_stub_and_a_collapsed_solution_in_its_notebook(name):
    path = LABS[name]
    stubs = [calls(c.source) for c in tagged(path, "exercise")]
    solutions = tagged(path, "solution")
    assert sorted(k for s in stubs for k in s) == sorted(items(lab_module(name))), (
        f"{path.name}: one cell tagged exercise per item of {name}")
    assert sorted(k for c in solutions for k in calls(c.source)) == sorted(items(lab_module(name))), (
        f"{path.name}: one cell tagged solution per item of {name}")
    imports = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
               and f"import {name} as lab" in c.source and not {"exercise", "solution"} & set(c.metadata.get("tags", []))]
    assert imports, f"{path.name}: import {name} as lab in a cell of its own or the imports cell, which no answer replaces"
    for cell in solutions:
        assert "hide-input" in cell.metadata.tags, f"{path.name}: the book shows solutions collapsed"
        stamped = cell.metadata.get("mystnb", {}).get("code_prompt_show") and cell.metadata.get("jupyter", {}).get("source_hidden")
        assert stamped, "run: .venv/bin/python tools/notebooks.py (it collapses the solutions in the book and JupyterLab)"
        assert "must_pass=True" in cell.source, f"{path.name}: a worked solution's cell must fail if it fails"


def lab_cells(tag: str) -> list[tuple[str, int]]:
    return [(name, i) for name in NAMES for i, _ in enumerate(tagged(LABS[name], tag))]


@pytest.mark.parametrize("name, index", lab_cells("exercise"))
def test_the_stub_is_not_accepted(name, index, monkeypatch):
    module = lab_module(name)
    cell = tagged(LABS[name], "exercise")[index]
    shown = run_cell(cell.source, module, monkeypatch)
    assert len(shown) == 1 and not shown[0].passed
    language = items(module)[shown[0].exercise].language
    first = {PHRASES[language]["not_done"].split(":")[0], PREDICTION_PHRASES[language]["not_answered"].split(":")[0]}
    assert shown[0].message.split(":")[0] in first, shown[0].message


@pytest.mark.parametrize("name, index", lab_cells("solution"))
def test_the_worked_solution_is_accepted(name, index, monkeypatch):
    cell = tagged(LABS[name], "solution")[index]
    shown = run_cell(cell.source, lab_module(name), monkeypatch)
    assert len(shown) == 1 and shown[0].passed, shown[0].message


def exercises() -> list[tuple[str, str]]:
    return [(name, key) for name in NAMES for key, v in items(lab_module(name)).items() if isinstance(v, Exercise)]


@pytest.mark.parametrize("name, key", exercises())
def test_each_misconception_is_named_on_a_wrong_answer_written_in_the_tests(name, key):
    exercise = items(lab_module(name))[key]
    wrong = getattr(importlib.import_module(f"test_{name}"), "WRONG", {}).get(key, {})
    claimed = {m.name for m in exercise.misconceptions}
    assert claimed, f"{name}.{key}: name at least one misconception its checker recognises"
    assert set(wrong) == claimed, f"tests/test_{name}.py: WRONG[{key!r}] needs one wrong answer per misconception"
    pairs = [(known, fn) for known in exercise.misconceptions for fn in (wrong[known.name], known.wrong)]
    *feedback, right = check_all(exercise, [fn for _, fn in pairs] + [exercise.reference])
    for (known, _), got in zip(pairs, feedback):
        assert not got.passed and got.misconception == known.name, got.message
    assert right.passed


def predictions() -> list[tuple[str, str]]:
    return [(name, key) for name in NAMES for key, v in items(lab_module(name)).items() if isinstance(v, Prediction)]


@pytest.mark.parametrize("name, key", predictions())
def test_each_prediction_names_its_misconceptions(name, key):
    prediction = items(lab_module(name))[key]
    measured = measure_once(prediction)
    assert measured and all(v >= 0 for v in measured.values()), "measure returns components"
    fixed = dataclasses.replace(prediction, measure=lambda: measured)
    total = sum(measured.values())

    def times(factor):  # the answer off by ``factor``: each component, where each is asked
        if prediction.components:
            return {k: v * factor for k, v in measured.items()}
        return total * factor

    assert fixed.check(times(1)).passed
    assert prediction.misconceptions, f"{name}.{key}: name at least one misconception"
    for factor, explain in prediction.misconceptions:
        feedback = fixed.check(times(factor))
        assert not feedback.passed and feedback.misconception == explain, feedback.message
