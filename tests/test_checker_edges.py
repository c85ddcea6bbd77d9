"""Issue 39, section 1: what the checkers got wrong. Hidden cases reach the edges the notebooks
name, inputs the text asks to leave alone are checked, answers right by the text are accepted, a
send and its receive of different sizes are named, misconceptions are named only where they fit,
and predictions refuse what is not a measurement and grade each component where it is asked."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.distributed as dist

from course_lib.chapters import ch01_lab, ch02_lab, ch03_lab, ch04_lab, ch06_lab, ch07_lab, ch08_lab
from course_lib.chapters import ch09_lab, ch10_lab, nl_lab
from course_lib.exercises.checker import Case, Exercise, Misconception, same
from test_ch08_lab import divides_by_two  # tests/ is on the path (pytest's rootdir)


def without(exercise: Exercise, *words: str) -> Exercise:
    """``exercise`` without the hidden cases whose label holds one of ``words``."""
    cases = exercise.cases() if callable(exercise.cases) else exercise.cases
    return dataclasses.replace(exercise, cases=[c for c in cases
                                                if not any(w in c.label for w in words)])


# --- E4M3 encoding: a count that carries into the exponent, and [2**-7, 2**-6) ---------------


def encode_or_mantissa(x):
    """Exponent field and mantissa put together with |: a mantissa that rounds to 8 is lost."""
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = min(abs(x), 448.0)
    if a < 2.0**-6:
        return sign | round(a / 2.0**-9)
    e = math.floor(math.log2(a))
    mantissa = round((a / 2.0**e - 1) * 8)
    return sign | ((e + 7) << 3) | mantissa


def encode_subnormals_below_2_to_the_minus_7(x):
    """Subnormals taken to start one binade too low: exponent -7 is treated as a normal one."""
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = min(abs(x), 448.0)
    if a < 2.0**-7:
        return sign | round(a / 2.0**-9)
    e = math.floor(math.log2(a))
    return sign | ((e + 6) * 8 + round(a / 2.0 ** (e - 3)))


@pytest.mark.parametrize("wrong, edge", [
    (encode_or_mantissa, "carries into the exponent"),
    (encode_subnormals_below_2_to_the_minus_7, "[2**-7, 2**-6)")])
def test_e4m3_encoding_has_the_edges_the_text_names(wrong, edge):
    assert without(ch03_lab.encode_e4m3, edge).check(wrong).passed  # the cases before miss it
    feedback = ch03_lab.encode_e4m3.check(wrong)
    assert not feedback.passed and edge in feedback.case, feedback.message
    assert ch03_lab.encode_e4m3.check(ch03_lab.encode_e4m3.reference).passed


# --- Wanda: round, not the ceiling nor half up ------------------------------------------------


def wanda_with(count):
    def wanda(weight, x, sparsity):
        score = weight.abs() * x.norm(dim=0)
        k = count(sparsity * weight.shape[1])
        keep = torch.ones_like(score, dtype=torch.bool)
        if k:
            keep.scatter_(1, torch.topk(score, k, dim=1, largest=False).indices, False)
        return keep
    return wanda


@pytest.mark.parametrize("count, edge", [(math.ceil, "not the ceiling"),
                                         (lambda s: math.floor(s + 0.5), "half to even")])
def test_wanda_rounds_the_number_pruned_as_pythons_round(count, edge):
    wrong = wanda_with(count)
    assert without(ch06_lab.wanda_mask, "0.33", "0.5:").check(wrong).passed  # before: unseen
    feedback = ch06_lab.wanda_mask.check(wrong)
    assert not feedback.passed and edge in feedback.case, feedback.message
    assert ch06_lab.wanda_mask.check(wanda_with(round)).passed


def test_two_four_ties_reject_topk_and_accept_a_stable_sort():
    def with_topk(weight):
        groups = weight.abs().reshape(weight.shape[0], -1, 4)
        top = torch.topk(groups, 2, dim=2).indices  # equal scores: whichever topk returns
        keep = torch.zeros_like(groups, dtype=torch.bool).scatter_(2, top, True)
        return keep.reshape(weight.shape)

    def with_stable_sort(weight):
        groups = weight.abs().reshape(weight.shape[0], -1, 4)
        top = torch.sort(groups, dim=2, descending=True, stable=True).indices[..., :2]
        keep = torch.zeros_like(groups, dtype=torch.bool).scatter_(2, top, True)
        return keep.reshape(weight.shape)

    feedback = ch06_lab.two_four_mask.check(with_topk)
    assert not feedback.passed and "ties" in feedback.case, feedback.message
    assert ch06_lab.two_four_mask.check(with_stable_sort).passed


# --- rank exercises: two world sizes, and a send larger than its receive -----------------------


def divides_by_three(grads):
    for g in grads:
        dist.all_reduce(g)
        g /= 3
    return grads


def receives_too_little(tensor):
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = [c.clone() for c in tensor.flatten().tensor_split(n)]
    for step in range(n - 1):
        send = chunks[(rank - step) % n]
        into = chunks[(rank - step - 1) % n]
        got = torch.empty(len(into) - 1)  # one element short
        req = dist.isend(send, (rank + 1) % n)
        dist.recv(got, (rank - 1) % n)
        req.wait()
        into[:-1] += got
    return chunks[(rank + 1) % n]


def test_gradient_averaging_runs_on_two_world_sizes():
    assert len(set(ch08_lab.average_gradients.world_sizes())) >= 2
    by_three, by_two = ch08_lab.average_gradients.check_many([divides_by_three, divides_by_two])
    assert not by_three.passed and "2 ranks" in by_three.case, by_three.message
    assert not by_two.passed and "3 ranks" in by_two.case, by_two.message
    for feedback in (by_three, by_two):
        assert feedback.misconception == "a hard-coded world size", feedback.message


@pytest.mark.parametrize("exercise", [ch08_lab.ring_reduce_scatter, ch08_lab.average_gradients,
                                      ch09_lab.zero2_step], ids=lambda e: e.name)
def test_every_rank_exercise_runs_on_two_world_sizes(exercise):
    assert len(set(exercise.world_sizes())) >= 2


def test_a_send_larger_than_its_receive_is_named_with_the_case():
    feedback = ch08_lab.ring_reduce_scatter.check(receives_too_little)
    assert not feedback.passed and feedback.case == "random, 3 ranks", feedback.message
    assert "the sizes of a send and its receive differ" in feedback.message, feedback.message
    assert "outside your code" not in feedback.message and "gloo" not in feedback.message.lower()
    assert "[course_lib case]" not in feedback.message


# --- inputs the text asks to leave unchanged --------------------------------------------------


def bert_in_place(ids, special, select, action, random_ids, mask_id):
    selected = (select < 0.15) & ~special
    labels = torch.where(selected, ids, -100)
    to_random = selected & (action >= 0.8) & (action < 0.9)
    ids[selected & (action < 0.8)] = mask_id  # writes into the caller's ids
    ids[to_random] = random_ids[to_random]
    return ids, labels


def gptq_in_place(w, U, scale, zero, bits):
    codes = torch.zeros(w.shape, dtype=torch.uint8)
    for j in range(w.shape[1]):
        code = torch.clamp(torch.round(w[:, j] / scale) + zero, 0, 2**bits - 1)
        codes[:, j] = code.to(torch.uint8)
        error = (w[:, j] - (code - zero) * scale) / U[j, j]
        w[:, j:] -= torch.outer(error, U[j, j:])  # no copy: the caller's weight changes
    return codes


@pytest.mark.parametrize("exercise, wrong, argument", [
    (ch01_lab.bert_masking, bert_in_place, "ids"), (ch07_lab.gptq_columns, gptq_in_place, "w")])
def test_an_input_the_text_asks_to_leave_unchanged_is_checked(exercise, wrong, argument):
    feedback = exercise.check(wrong)
    assert not feedback.passed and f"changed its argument {argument}" in feedback.message, (
        feedback.message)
    assert f"{argument}.clone()" in feedback.message


def test_a_changed_input_is_told_in_dutch():
    exercise = dataclasses.replace(ch01_lab.bert_masking, language="nl")
    assert "veranderde zijn argument ids" in exercise.check(bert_in_place).message


# --- answers right by the text: a float scale, a 0-d tensor, a numpy array ---------------------


def absmax_with_scale(convert):
    def absmax_int8(block):
        absmax = block.abs().max()
        scale = absmax / 127 if absmax > 0 else torch.ones((), dtype=block.dtype)
        return torch.round(block / scale).to(torch.int8), convert(scale)
    return absmax_int8


@pytest.mark.parametrize("convert", [float, lambda s: s.float(), lambda s: s.numpy(),
                                     lambda s: np.float32(s)],
                         ids=["python float", "float32 tensor", "0-d array", "numpy float32"])
def test_a_scale_in_another_float_type_is_accepted(convert):
    feedback = ch04_lab.absmax_int8.check(absmax_with_scale(convert))
    assert feedback.passed, feedback.message


def test_a_wrong_scale_is_still_rejected():
    feedback = ch04_lab.absmax_int8.check(absmax_with_scale(lambda s: float(s) * 1.01))
    assert not feedback.passed


def test_a_0d_tensor_for_a_float_is_accepted():
    def decode(bits):
        return torch.tensor(ch03_lab.decode_e4m3.reference(bits), dtype=torch.float64)

    assert ch03_lab.decode_e4m3.check(decode).passed
    assert same(2.5, torch.tensor(2.5)) and same(3, np.array(3)) and not same(2.5, torch.ones(1))
    assert not same(1.0, torch.tensor(True)) and not same(torch.tensor(1.0), "1.0")


def test_a_numpy_array_for_a_tensor_counts_when_its_dtype_and_values_agree():
    exercise = Exercise("double", "Double x.", lambda x: 2 * x,
                        [Case((torch.arange(4.0),), "random"), Case((torch.ones(2, 2),), "2-D")])
    assert exercise.check(lambda x: (2 * x).numpy()).passed
    feedback = exercise.check(lambda x: (2 * x).numpy().astype(np.float64))
    assert not feedback.passed and "same values, but dtype float32" in feedback.message, (
        feedback.message)


# --- misconceptions named only where they fit -------------------------------------------------


def decode_subnormals_at_minus_7(bits):
    s, e, m = (-1.0 if bits >> 7 else 1.0), (bits >> 3) & 15, bits & 7
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return s * m / 8 * 2.0**-7  # as if field 0 were exponent 0 - 7
    return s * (1 + m / 8) * 2.0 ** (e - 7)


def test_a_wrong_subnormal_exponent_is_not_told_wrong_bias():
    feedback = ch03_lab.decode_e4m3.check(decode_subnormals_at_minus_7)
    assert not feedback.passed, feedback.message
    assert feedback.misconception == "subnormal exponent -7", feedback.message
    assert "wrong bias" not in feedback.message


def sixteen_bit_moments(n_params, precision):
    half = precision != "fp32"
    w = 2 if half else 4
    return {"weights": w * n_params, "gradients": w * n_params,
            "master_weights": 4 * n_params if half else 0, "optimizer_states": 2 * w * n_params}


def test_16_bit_adam_moments_are_not_told_one_moment():
    feedback = ch02_lab.adam_model_states.check(sixteen_bit_moments)
    assert not feedback.passed and feedback.misconception == "16-bit Adam moments", feedback.message


def hfu_in_percent(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    per_token = 8 * n_params + 16 * layers * hidden * seq_len
    return 100 * tokens_per_second * per_token / peak_flops


def test_hfu_in_percent_is_named():
    feedback = ch10_lab.hardware_flops_utilisation.check(hfu_in_percent)
    assert not feedback.passed, feedback.message
    assert feedback.misconception == "percent for a fraction", feedback.message


def test_a_misconception_that_the_passed_cases_rule_out_is_not_named():
    def times(k):
        return lambda x: x * k

    cases = [Case((1.0,), "one"), Case((0.0,), "zero"), Case((2.0,), "two")]
    exercise = Exercise("same", "Return x.", lambda x: x, cases,
                        misconceptions=(Misconception("doubled", "double it", times(2.0)),))
    assert exercise.check(times(2.0)).misconception == "doubled"  # wrong from the first case
    learner = lambda x: 4.0 if x == 2.0 else x  # noqa: E731 - right on "one", then wrong on "two"
    feedback = exercise.check(learner)
    assert not feedback.passed and feedback.misconception is None, feedback.message


# --- predictions --------------------------------------------------------------------------------

SIZES = {"fp32": 9.437, "bf16": 4.719, "e4m3": 2.360}  # MB, header included, as measured


def weight_files(language: str = "en"):
    return dataclasses.replace(ch03_lab.weight_file_sizes, measure=lambda: dict(SIZES),
                               language=language)


@pytest.mark.parametrize("answer, words", [
    (math.nan, "not a number a measurement can give"), (math.inf, "not a number a measurement"),
    (-16.5, "is negative"), ({"fp32": 9.4, "bf16": -4.7, "e4m3": 2.4}, "'bf16': -4.7 is negative"),
    ({"fp32": 9.4, "bf16": math.nan, "e4m3": 2.4}, "'bf16': nan is not a number")])
def test_a_prediction_that_no_measurement_gives_is_refused(answer, words):
    feedback = weight_files().check(answer)
    assert not feedback.passed and words in feedback.message, feedback.message
    assert "nanx" not in feedback.message and "x the measured" not in feedback.message


def test_bytes_for_megabytes_is_named():
    feedback = weight_files().check({k: v * 1e6 for k, v in SIZES.items()})
    assert not feedback.passed and "give bytes where MB (10**6 bytes)" in feedback.message
    assert feedback.misconception == "give bytes where MB (10**6 bytes) were asked"


def test_each_component_is_graded_where_the_prompt_asks_for_each():
    swapped = dict(SIZES, fp32=SIZES["e4m3"], e4m3=SIZES["fp32"])
    feedback = weight_files().check(swapped)
    assert not feedback.passed and "not every part is" in feedback.message, feedback.message
    assert "fp32: your" in feedback.message and "e4m3: your" in feedback.message
    assert "bf16: your" not in feedback.message
    assert weight_files().check(dict(SIZES)).passed
    total_only = weight_files().check(sum(SIZES.values()))
    assert not total_only.passed and "fp32, bf16, e4m3" in total_only.message


def test_a_dutch_decimal_comma_gets_a_hint():
    prediction = dataclasses.replace(nl_lab.int4_op_schijf, measure=lambda: {"codes": 0.5625})
    feedback = prediction.check((0, 5625))  # what Python makes of 0,5625
    assert not feedback.passed and "0.5, niet 0,5" in feedback.message, feedback.message
    assert "0.5, not 0,5" in weight_files().check((0, 5)).message

