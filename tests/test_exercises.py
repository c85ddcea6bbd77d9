"""Tests for the exercise checkers: right answers pass, wrong ones get a hint, non-answers are told so."""

import pytest

from course_lib import memory
from course_lib.exercises import chapter02


def test_right_answers_pass():
    assert chapter02.q1.feedback(26)[0]  # 13e9 * 2 bytes = 26 GB
    assert chapter02.q2.feedback(16)[0]
    assert chapter02.q3.feedback(14)[0]  # 70e9 * 16 / N <= 80 * 2**30  ->  N = 14
    expected = 4096 * 4096 * (34 + 5 * 32 * 4096 / 4096) / 1e9
    assert chapter02.q4.feedback(expected)[0]


@pytest.mark.parametrize("answer, word", [(52, "too high"), (13, "too low")])
def test_wrong_answers_get_a_hint(answer, word):
    ok, text = chapter02.q1.feedback(answer)
    assert not ok and word in text and "Hint:" in text


def test_not_answered_and_not_a_number(capsys):
    chapter02.q2.check(None)
    assert "Not answered yet" in capsys.readouterr().out
    ok, text = chapter02.q2.feedback("sixteen")
    assert not ok and "not a number" in text


def test_q3_answer_is_the_smallest_that_fits():
    n = int(chapter02.q3.solution())
    cap = 80 * memory.GIB
    assert memory.zero_model_state_bytes(70e9, n, 3) <= cap < memory.zero_model_state_bytes(70e9, n - 1, 3)
