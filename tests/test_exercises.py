"""Tests for the exercise checkers: right answers pass, wrong ones get a hint, non-answers are told so."""

import pytest

from course_lib.chapters.ch02 import quiz as chapter02
from course_lib.numbers import memory


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
    # ZeRO stage 3 keeps (2 + 2 + 12) x parameters / N bytes of model states on each GPU.
    assert 16 * 70e9 / n <= cap < 16 * 70e9 / (n - 1)
    assert n == 14


def test_chapter05_answers_worked_by_hand():
    from course_lib.chapters.ch05 import quiz as chapter05

    assert chapter05.q1.feedback(4 + (16 + 4) / 128)[0]  # 4.15625 bits
    assert chapter05.q2.feedback(0.8)[0]  # scale 0.2, zero 5, code round(3.75) + 5 = 9 -> (9 - 5) * 0.2
    assert not chapter05.q2.feedback(0.6)[0]  # truncating 3.75 to 3 instead of rounding
    assert chapter05.q3.feedback(4 + 8 / 64 + 32 / (64 * 256))[0]  # the QLoRA paper's 4.127
    assert not chapter05.q3.feedback(4.5)[0]  # NF4 without double quantization
    assert chapter05.q4.feedback(8 * 4096 + 4096 * 8)[0]
    assert not chapter05.q4.feedback(8 * 4096)[0]  # only A counted


def test_chapter03_answers_worked_by_hand():
    from course_lib.chapters.ch03 import quiz as chapter03

    assert chapter03.q1.feedback(2.0**-24)[0]  # 2**(1 - 15 - 10)
    assert not chapter03.q1.feedback(2.0**-14)[0]  # the smallest normal, not subnormal
    assert chapter03.q2.feedback(2.0)[0]  # 2**(8 - 7)
    assert chapter03.q3.feedback(448)[0] and not chapter03.q3.feedback(240)[0]  # 240: IEEE-like
    assert chapter03.q4.feedback(16)[0]  # 1e-9 * 2**16 = 6.6e-5 >= 2**-14 = 6.1e-5
    assert not chapter03.q4.feedback(15)[0]


def test_chapter04_answers_worked_by_hand():
    from course_lib.chapters.ch04 import quiz as chapter04

    assert chapter04.q1.feedback(3.0)[0] and not chapter04.q1.feedback(3.5)[0]
    assert chapter04.q2.feedback(2.0**-6)[0]  # 2**(1 - 7)
    assert chapter04.q3.feedback(80 * 5.0 / 127)[0]  # pi / (5/127) = 79.8 -> code 80
    assert not chapter04.q3.feedback(79 * 5.0 / 127)[0]  # truncated instead of rounded
    assert chapter04.q4.feedback(4 + 16 / 128)[0]  # 4.125 bits
    assert not chapter04.q4.feedback(4 + 32 / 128)[0]  # an FP32 scale instead of FP16


def test_chapter06_answers_worked_by_hand():
    from course_lib.chapters.ch06 import quiz as chapter06

    assert chapter06.q1.feedback(104_858 * (4 + 4) + 1025 * 4)[0]  # 842,964 bytes
    assert chapter06.q1.feedback(0.1 * 1024 * 1024 * 8 + 1025 * 4)[0]  # unrounded count: within 8 bytes
    assert not chapter06.q1.feedback(104_858 * 4 + 1025 * 4)[0]  # values only, no column indices
    assert chapter06.q2.feedback(0.8 * (1 - 0.5**3))[0]
    assert not chapter06.q2.feedback(0.4)[0]  # linear schedule
    assert chapter06.q3.feedback(1536 * (768 + 1 + 768))[0]
    assert not chapter06.q3.feedback(1536 * 768 * 2)[0]  # biases forgotten


def test_chapter07_answers_worked_by_hand():
    from course_lib.chapters.ch07 import quiz as chapter07

    assert chapter07.q1.feedback(4096 * 4096 * 4)[0]  # 64 MiB, whatever the outputs and tokens
    assert not chapter07.q1.feedback(4096 * 4096 * 2)[0]  # FP16
    assert not chapter07.q1.feedback(4096 * 11008 * 4)[0]  # the weight's size, not H's
    assert chapter07.q2.feedback(0.50 - 0.05 / 2 * 1)[0]  # 0.475
    assert not chapter07.q2.feedback(0.50)[0]  # no error feedback: round-to-nearest leaves w2 alone
    assert not chapter07.q2.feedback(0.45)[0]  # the error not divided by [H^-1]_11
    assert not chapter07.q2.feedback(0.525)[0]  # the wrong sign
    assert chapter07.q3.feedback(2)[0]  # 70e9 x 4.15625 / 8 = 36.4e9 bytes > 24 GiB = 25.8e9
    assert not chapter07.q3.feedback(1)[0]
