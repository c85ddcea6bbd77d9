"""Chapter 4's lab: wrong answers, written as a learner might, that its checkers must recognise."""

import math

import numpy as np
import torch

from course_lib.chapters import ch04_lab
from course_lib.compression import quant


def half_away(block):
    scale = block.abs().max() / 127
    q = block / scale
    return torch.where(q >= 0, torch.floor(q + 0.5), torch.ceil(q - 0.5)).to(torch.int8), scale


def truncated(block):
    scale = block.abs().max() / 127
    return (block / scale).to(torch.int8), scale


def bits_of(values):
    return values.view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def bf16_truncated(values):
    return bits_of(values) // 65536  # the top half of the 32 bits


def bf16_half_away(values):
    bits = bits_of(values)
    top = bits >> 16
    return torch.where((bits & 0xFFFF) >= 0x8000, top + 1, top)


def bf16_nan_forgotten(values):
    bits = bits_of(values)
    keep = (bits >> 16) & 1
    return (bits + 0x7FFF + keep) >> 16


WRONG = {"absmax_int8": {"round half away": half_away, "truncation": truncated},
         "bf16_bits": {"truncation": bf16_truncated, "round half away": bf16_half_away,
                       "NaN rounded like a number": bf16_nan_forgotten}}


def test_an_all_zero_block_is_an_edge_the_stub_must_handle():
    codes, scale = ch04_lab.absmax_int8.reference(torch.zeros(3, dtype=torch.float64))
    assert codes.tolist() == [0, 0, 0] and scale.item() == 1.0


def test_bf16_reference_agrees_with_torchs_cast_on_every_hidden_case():
    exercise = ch04_lab.bf16_bits
    for case in exercise.cases():
        (values,) = case.args
        torch_bits = values.to(torch.bfloat16).view(torch.int16).to(torch.int64) & 0xFFFF
        assert exercise.matches(exercise.reference(values), torch_bits), case.label


def test_bf16_ties_worked_by_hand():
    # 1 + 2**-8 lies halfway between BF16's 1.0 (0x3F80) and 1 + 2**-7 (0x3F81): to the even one
    values = torch.from_numpy(np.array([0x3F808000, 0x3F818000, 0xBF808000], np.uint32).view(np.float32))
    assert values[0].item() == 1 + 2**-8
    assert ch04_lab.bf16_bits.reference(values).tolist() == [0x3F80, 0x3F82, 0xBF80]


def test_bf16_compare_accepts_any_nan_and_integer_dtype_but_not_floats_or_shapes():
    exercise = ch04_lab.bf16_bits
    expected = torch.tensor([0x7FC0, 0x3F80])
    assert exercise.matches(expected, torch.tensor([0xFFFF, 0x3F80], dtype=torch.int32))
    assert not exercise.matches(expected, torch.tensor([0x7F80, 0x3F80]))  # infinity is no NaN
    assert not exercise.matches(expected, torch.tensor([0x7FC0, 0x3F80]).float())
    assert not exercise.matches(expected, torch.tensor([[0x7FC0, 0x3F80]]))


def test_int4_on_disk_measures_codes_scales_and_a_small_header():
    measured = ch04_lab.int4_on_disk.measure()
    counted = quant.storage_bytes((1_000_000,), quant.QuantConfig(4, "absmax", "group", 64,
                                                                  scale_dtype="fp32"))
    assert measured["codes"] * 1e6 == counted["codes"] == 500_000
    assert measured["scales"] * 1e6 == counted["scales"] == 62_500
    assert 0 < measured["header"] * 1e6 < 1000
    assert math.isclose(sum(measured.values()), 0.5625, rel_tol=0.001)
