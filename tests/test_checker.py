"""The code-exercise checker: stubs are not done, the reference passes, each misconception is named,
the learner's own line is shown, hanging code is stopped, inputs are never mutated, NaN compares."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
import torch

from course_lib.exercises import checker
from course_lib.exercises.checker import Case, Exercise, Misconception, same, summarize
from course_lib.exercises.questions import Question


def absmax_int8(x: torch.Tensor) -> torch.Tensor:
    """The reference: codes round(x / (absmax / 127)), ties to even, as int8."""
    scale = x.abs().max() / 127
    return torch.round(x / scale).to(torch.int8)


def half_away(x: torch.Tensor) -> torch.Tensor:
    scale = x.abs().max() / 127
    q = x / scale
    return (torch.sign(q) * torch.floor(q.abs() + 0.5)).to(torch.int8)


def by_128(x: torch.Tensor) -> torch.Tensor:
    return torch.round(x / (x.abs().max() / 128)).clamp(-128, 127).to(torch.int8)


def cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    return [Case((torch.randn(8, generator=g),), "random"),
            Case((torch.tensor([127.0, 0.5, -0.5, 1.5, 2.5]),), "ties at .5"),
            Case((torch.tensor([[1.0, -3.0], [2.0, 0.0]]),), "a matrix")]


EXERCISE = Exercise(
    "absmax_int8", "Quantize x to INT8 codes with one absmax scale.", absmax_int8, cases,
    misconceptions=(
        Misconception("round half away", "round ties away from zero instead of to even", half_away),
        Misconception("2^b levels", "divide by 128 instead of 127", by_128),
    ),
    timeout_s=1.0,
)


def stub(x):
    raise NotImplementedError


def test_the_stub_is_not_done_yet():
    feedback = EXERCISE.check(stub)
    assert not feedback.passed and "Not done yet" in feedback.message


def test_the_reference_passes():
    feedback = EXERCISE.check(absmax_int8)
    assert feedback.passed and "all 3 hidden cases" in feedback.message


@pytest.mark.parametrize("wrong, name", [(half_away, "round half away"), (by_128, "2^b levels")])
def test_each_misconception_is_rejected_and_named(wrong, name):
    feedback = EXERCISE.check(wrong)
    assert not feedback.passed and feedback.misconception == name
    assert f"Known misconception, {name}" in feedback.message
    assert "expected:" in feedback.message and "got:" in feedback.message


def test_an_unknown_wrong_answer_names_the_case_but_no_misconception():
    feedback = EXERCISE.check(lambda x: torch.zeros_like(x, dtype=torch.int8))
    assert not feedback.passed and feedback.misconception is None and feedback.case == "random"
    assert "int8" in feedback.message and "misconception" not in feedback.message


def test_a_wrong_dtype_is_not_accepted():
    assert not EXERCISE.check(lambda x: absmax_int8(x).float()).passed


def learner_that_divides_by_zero(x):
    scale = x.abs().max() / 127
    return torch.round(x / scale).to(torch.int8) // 0  # the learner's own line


def test_an_exception_is_shown_at_the_learners_line():
    feedback = EXERCISE.check(learner_that_divides_by_zero)
    assert not feedback.passed
    assert "RuntimeError" in feedback.message and "# the learner's own line" in feedback.message
    assert "learner_that_divides_by_zero" in feedback.message
    assert "course_lib" not in feedback.message and "Traceback" not in feedback.message
    assert "/" + "tests" not in feedback.message  # no path of this machine


def hang(x):
    while True:
        pass


def test_a_hanging_function_is_stopped_on_the_main_thread():
    start = time.perf_counter()
    feedback = EXERCISE.check(hang)
    assert time.perf_counter() - start < 3
    assert not feedback.passed and "Stopped after 1 s on the case 'random': hang did not return" in feedback.message


def test_a_hanging_function_is_stopped_off_the_main_thread():
    box = {}
    worker = threading.Thread(target=lambda: box.update(feedback=EXERCISE.check(lambda x: time.sleep(30))))
    start = time.perf_counter()
    worker.start()
    worker.join(10)
    assert time.perf_counter() - start < 3
    assert "Stopped after 1 s on the case 'random': your function did not return" in box["feedback"].message


def test_the_learner_cannot_mutate_the_inputs():
    seen = []

    def reference(x):
        seen.append(x.clone())
        return x.sum()

    def mutating(x):
        x.mul_(2)
        return x.sum() / 2

    fixed = torch.tensor([1.0, 2.0, 3.0])
    exercise = Exercise("sum", "Sum x.", reference, [Case((fixed,), "three"), Case((fixed,), "again")])
    assert exercise.check(mutating).passed
    assert torch.equal(fixed, torch.tensor([1.0, 2.0, 3.0])) and all(torch.equal(s, fixed) for s in seen)


def test_nan_must_be_where_the_reference_has_it():
    nan = float("nan")
    assert same(torch.tensor([1.0, nan]), torch.tensor([1.0, nan]))
    assert not same(torch.tensor([1.0, nan]), torch.tensor([1.0, 2.0]))
    assert not same(torch.tensor([1.0, 2.0]), torch.tensor([1.0, nan]))
    assert same(nan, nan) and not same(nan, 1.0) and not same(1.0, nan)


def test_compare_recurses_and_respects_types():
    assert same({"a": (1, 2.0)}, {"a": [1, 2.0 + 1e-9]})
    assert not same({"a": 1}, {"b": 1}) and not same([1, 2], [1, 2, 3]) and not same(3, 4)
    assert same(26, 26.0) and not same(True, 1) and not same(torch.ones(2), [1.0, 1.0])
    assert not same(torch.ones(2, 1), torch.ones(2))
    assert same(np.float32(0.1), 0.1) and same(np.int64(3), 3) and not same(np.int64(3), 4)
    assert same(np.array([1.0, np.nan]), np.array([1.0, np.nan])) and not same(np.ones(2), np.zeros(2))


def test_keyword_arguments_reach_both_functions():
    exercise = Exercise("levels", "Levels of b bits.", lambda bits=8: 2**bits - 1, [Case((), "4 bits", {"bits": 4})],
                        misconceptions=(Misconception("2^b levels", "forget the -1", lambda bits=8: 2**bits),))
    assert exercise.check(lambda bits=8: 2**bits - 1).passed
    feedback = exercise.check(lambda bits=8: 2**bits)
    assert feedback.misconception == "2^b levels" and "input: bits=4" in feedback.message


def test_inputs_are_summarized_briefly():
    text = summarize(torch.arange(100.0).reshape(10, 10))
    assert text.startswith("tensor of shape (10, 10), float32: [0, 1, 2, 3, 4, 5, ...]")
    assert len(summarize(list(range(1000)))) < 60


def test_dutch_feedback_is_dutch():
    dutch = Exercise("absmax_int8", "Kwantiseer x.", absmax_int8, cases, EXERCISE.misconceptions,
                     timeout_s=1.0, language="nl")
    assert "Nog niet gedaan" in dutch.check(stub).message
    assert "Bekende misvatting" in dutch.check(half_away).message
    assert "Geslaagd" in dutch.check(absmax_int8).message


def test_calling_prints_the_feedback(capsys):
    assert EXERCISE(stub) is None
    assert capsys.readouterr().out.startswith("Not done yet: stub still raises NotImplementedError")


def test_questions_name_a_recorded_misconception():
    q = Question("Bytes of 1e9 FP32 weights, in GB?", lambda: 4.0, unit="GB",
                 misconceptions=((32.0, "count bits instead of bytes"),))
    assert q.feedback(4.0)[0]
    ok, text = q.feedback(32.0)
    assert not ok and "This is what you get if you count bits instead of bytes." in text
    assert "what you get" not in q.feedback(5.0)[1] and math.isclose(q.solution(), 4.0)


def test_a_worked_solution_must_pass(capsys):
    EXERCISE(absmax_int8, must_pass=True)
    assert capsys.readouterr().out.startswith("Passed")
    with pytest.raises(AssertionError, match="worked solution of absmax_int8 fails"):
        EXERCISE(half_away, must_pass=True)
    EXERCISE(half_away)  # a learner's wrong answer only shows its feedback


def test_a_tuple_of_tensors_shows_each_tensor():
    text = summarize((torch.zeros(2, 3, dtype=torch.long), torch.tensor([-100, 7])))
    assert text == "(tensor of shape (2, 3), int64: [0, 0, 0, 0, 0, 0]; tensor of shape (2,), int64: [-100, 7])"


# --- "not done yet" only for the stub (issue 39) -------------------------------------------------

def _exercise() -> Exercise:
    return Exercise("to_u32", "Cast to uint32 and add one.", lambda x: x + 1,
                    [Case((torch.arange(3),), "three")])


def test_a_real_not_implemented_error_is_reported_with_the_learners_line():
    def to_u32(x):
        y = x.to(torch.uint32)
        return y.abs() + 1  # torch: "abs_cpu" not implemented for 'UInt32'

    feedback = _exercise().check(to_u32)
    assert not feedback.passed and "Not done yet" not in feedback.message
    assert "NotImplementedError" in feedback.message and "UInt32" in feedback.message
    assert "line" in feedback.message  # the learner's line is named


def test_the_untouched_stub_is_still_not_done_yet():
    def to_u32(x):
        """Cast, add one."""
        raise NotImplementedError  # your code here

    feedback = _exercise().check(to_u32)
    assert feedback.message.startswith("Not done yet: to_u32")
    assert checker.is_stub(to_u32) and not checker.is_stub(lambda x: x)

    def half_written(x):
        y = x + 1
        raise NotImplementedError  # the learner's next line is still to come

    assert _exercise().check(half_written).message.startswith("Not done yet: half_written")


def test_feedback_names_the_first_difference_and_what_differs_when_the_values_agree():
    expected = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    later = expected.clone()
    later[7] = 9.0  # beyond the six values summarize shows
    assert checker.difference(expected, later) == "first difference at index 7: expected 8, got 9"
    assert checker.difference(expected, expected[:, None]) == (
        "same values, but shape (8,) was expected, got (8, 1)")
    assert checker.difference(expected, expected.double()) == (
        "same values, but dtype float32 was expected, got float64")
    assert checker.difference(expected, expected.tolist()) == (
        "same values, but a torch.Tensor was expected, got a list")
    assert checker.difference(expected, expected.double().numpy()) == (  # read as a tensor
        "same values, but dtype float32 was expected, got float64")
    grid = torch.zeros(2, 3, dtype=torch.int64)
    other = grid.clone()
    other[1, 2] = 5
    assert checker.difference(grid, other) == "first difference at index [1, 2]: expected 0, got 5"
    assert checker.difference(1.0, 2.0) is None and checker.difference(expected, expected) is None
    exercise = Exercise("ident", "Return x.", lambda x: x, [Case((expected,), "eight")])
    message = exercise.check(lambda x: x[:, None]).message
    assert "same values, but shape (8,) was expected, got (8, 1)" in message
