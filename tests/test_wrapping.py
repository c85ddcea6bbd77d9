"""Feedback fits the book: each line the exercises print has at most 88 characters.

``wrapping.wrap`` keeps a number with its unit, a short bracketed value, a quoted label
and the learner's source line whole, and leaves code and tables as they are. For every
chapter's lab (English and Dutch) the stub, a wrong answer, an answer that raises, each
misconception and the worked answer are shown as a learner sees them, and so is each
prediction's and each numeric question's feedback: no line is longer than 88 characters
(issue 28).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from types import SimpleNamespace

import pytest

from course_lib.exercises import checker, wrapping
from course_lib.exercises.checker import Exercise, Feedback
from course_lib.exercises.predictions import Prediction
from course_lib.exercises.questions import Question
from course_lib.exercises.ranks import RankExercise
from course_lib.exercises.wrapping import WIDTH, longest_line, wrap
from labkit import LABS, check_all, existing, items, lab_module, measure_once, run_cell, tagged

NAMES = existing()
QUIZZES = [f"ch{n:02d}" for n in range(1, 11)] + ["nl"]


# --- the wrapping itself -------------------------------------------------------------

def test_a_short_line_is_left_as_it_is():
    assert wrap("Passed: f is right.") == "Passed: f is right."


def test_a_long_line_is_cut_between_words_within_the_width():
    text = " ".join(["word"] * 60)
    lines = wrap(text).splitlines()
    assert len(lines) > 1 and longest_line(wrap(text)) <= WIDTH
    assert " ".join(lines) == text


@pytest.mark.parametrize("kept", ["4,096 bytes", "1.5 GB", "10 %", "2.5e+06 bytes",
                                  "(4, 8)", "[1, 2, 3]", "'ties at .5'", "12 GiB",
                                  "3 x 5", "2^b - 1", "x / scale", "49202, ...]"])
def test_a_number_with_its_unit_or_a_short_value_is_never_cut(kept):
    for lead in range(60, 90):  # every position of the value against the line's end
        text = "x" * lead + " " + kept + " and some more words after it"
        lines = wrap(text).splitlines()
        assert kept in lines[0] or kept in lines[1]


def test_an_indented_line_keeps_its_indentation_and_continues_deeper():
    line = "  input: " + ", ".join(f"value {i}" for i in range(20))
    lines = wrap(line).splitlines()
    assert lines[0].startswith("  input: ")
    assert all(x.startswith("    ") for x in lines[1:])
    assert longest_line(wrap(line)) <= WIDTH


def test_the_learners_source_goes_whole_to_a_line_of_its_own():
    source = "scale = block.abs().max() / 127 if block.abs().max() > 0 else 1.0"
    lines = wrap(f"  at line 12 of absmax_int8: {source}").splitlines()
    assert lines == ["  at line 12 of absmax_int8:", f"      {source}"]
    dutch = wrap(f"  op regel 12 van absmax_int8: {source}").splitlines()
    assert dutch == ["  op regel 12 van absmax_int8:", f"      {source}"]


def test_code_and_tables_are_left_as_they_are():
    code = "    " + "x = torch.zeros(3) " * 8
    table = "name" + " " * 50 + "predicted (bytes)  measured (bytes)  ratio"
    assert wrap(code) == code and wrap(table) == table


def test_dutch_numbers_are_kept_with_their_unit():
    text = "Nog niet: je voorspelling " + "x " * 30 + "is 1.234.567,5 bytes, te veel"
    assert any("1.234.567,5 bytes" in line for line in wrap(text).splitlines())


# --- every exercise, as a learner sees it --------------------------------------------

def printed(feedback: Feedback, capsys: pytest.CaptureFixture) -> str:
    """What ``checker.show`` prints for ``feedback`` outside a notebook."""
    capsys.readouterr()
    checker.show(feedback)
    return capsys.readouterr().out


def assert_fits(text: str, what: str) -> None:
    long = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not long, f"{what}: lines over {WIDTH} characters:\n" + "\n".join(long)


def returns_none(*args, **kwargs):
    return None


def raises(*args, **kwargs):
    why = ("this learner's function fails on purpose, with a long message that the "
           "feedback shows with the learner's own line, the case and its input")
    raise ValueError(why)


def exercises() -> list[tuple[str, str]]:
    return [(name, key) for name in NAMES
            for key, v in items(lab_module(name)).items() if isinstance(v, Exercise)]


STUBS = [(name, i) for name in NAMES
         for i, _ in enumerate(tagged(LABS[name], "exercise"))]


@pytest.mark.parametrize("name, index", STUBS)
def test_a_stub_feedback_fits(name, index, monkeypatch, capsys):
    cell = tagged(LABS[name], "exercise")[index]
    shown = run_cell(cell.source, lab_module(name), monkeypatch)
    monkeypatch.undo()
    assert_fits(printed(shown[0], capsys), f"{name}, stub of {shown[0].exercise}")


@pytest.mark.parametrize("name, key", exercises())
def test_wrong_answers_misconceptions_and_a_pass_fit(name, key, capsys):
    exercise = items(lab_module(name))[key]
    wrong = getattr(importlib.import_module(f"test_{name}"), "WRONG", {}).get(key, {})
    answers = {"a wrong answer": returns_none, "an error": raises,
               "the reference": exercise.reference, **wrong}
    if isinstance(exercise, RankExercise):  # the ranks run source code; the error goes last,
        answers = {"the reference": exercise.reference, **wrong,  # as it stops the ranks
                   "an error": ranks_raise}
    for (what, answer), feedback in zip(answers.items(), check_all(exercise, list(answers.values()))):
        assert_fits(printed(feedback, capsys), f"{name}.{key}, {what}")
        if what == "an error":
            assert re.search(r"^  (at line|op regel) \d+", wrap(feedback.message), re.M)


def ranks_raise(*args):
    why = ("this learner's function fails on purpose on every rank, with a long "
           "message that the feedback shows with the learner's own line and rank")
    raise ValueError(why)


def predictions() -> list[tuple[str, str]]:
    return [(name, key) for name in NAMES
            for key, v in items(lab_module(name)).items() if isinstance(v, Prediction)]


@pytest.mark.parametrize("name, key", predictions())
def test_every_prediction_feedback_fits(name, key, capsys):
    prediction = items(lab_module(name))[key]
    measured = measure_once(prediction)
    fixed = dataclasses.replace(prediction, measure=lambda: measured)
    total = sum(measured.values())
    answers = [None, "a lot", total, total * 3.3, dict.fromkeys(measured, 1.0)]
    answers += [total * factor for factor, _ in prediction.misconceptions]
    for answer in answers:
        shown = printed(fixed.check(answer), capsys)
        assert_fits(shown, f"{name}.{key}({answer!r})")


def questions() -> list[tuple[str, str]]:
    found = []
    for chapter in QUIZZES:
        quiz = importlib.import_module(f"course_lib.chapters.{chapter}").quiz
        assert isinstance(quiz, SimpleNamespace)
        found += [(chapter, q) for q, v in vars(quiz).items()
                  if isinstance(v, Question)]
    return found


@pytest.mark.parametrize("chapter, name", questions())
def test_every_question_feedback_fits(chapter, name, capsys):
    quiz = importlib.import_module(f"course_lib.chapters.{chapter}").quiz
    question = getattr(quiz, name)
    right = question.solution()
    answers = [None, "sixteen", right, right * 3 + 1, right / 3 - 1]
    answers += [wrong for wrong, _ in question.misconceptions]
    for answer in answers:
        capsys.readouterr()
        question.check(answer)
        assert_fits(capsys.readouterr().out, f"{chapter}.quiz.{name}({answer!r})")


def test_a_notebook_shows_the_wrapped_text_and_grading_reads_the_message(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.get_ipython", lambda: object())
    monkeypatch.setattr("IPython.display.display", lambda data, raw: shown.append(data))
    message = "Not quite: " + "word " * 40
    checker.show(Feedback("f", False, message))
    assert shown[0]["text/plain"] == wrapping.wrap(message)
    assert shown[0][checker.MIME]["message"] == message
