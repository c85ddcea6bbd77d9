"""Chapter 5's lab: wrong answers, written as a learner might, that its checkers must recognise,
and the references checked against torch's own quantizers."""

import math

import torch

from course_lib.chapters import ch05_lab
from course_lib.compression import quant


def pack(codes):
    flat = codes.flatten().to(torch.uint8)
    if flat.numel() % 2:
        flat = torch.cat([flat, torch.zeros(1, dtype=torch.uint8)])
    return flat[0::2] + flat[1::2] * 16


def groups_with(levels, per_tensor=False, high_first=False):
    def int4_groups(w, group_size):
        g = w.reshape(w.shape[0], w.shape[1] // group_size, group_size)
        absmax = w.abs().max().expand(g.shape[:2]) if per_tensor else g.abs().amax(-1)
        scale = absmax / levels
        scale[scale == 0] = 1.0
        codes = (g / scale.unsqueeze(-1)).round().clamp(-levels, 7) + 8
        if high_first:
            flat = codes.flatten().to(torch.uint8)
            return flat[0::2] * 16 + flat[1::2], scale
        return pack(codes), scale
    return int4_groups


def zeropoint_with(levels=None, per_tensor=False, include_zero=True, zero_first=False):
    def zeropoint_channel(w, bits):
        top = 2**bits - 1
        if per_tensor:
            lo, hi = w.min().repeat(w.shape[0]), w.max().repeat(w.shape[0])
        else:
            lo, hi = w.min(dim=1).values, w.max(dim=1).values
        if include_zero:
            lo, hi = torch.minimum(lo, torch.zeros(())), torch.maximum(hi, torch.zeros(()))
        scale = (hi - lo) / (levels(bits) if levels else top)
        scale[scale == 0] = 1.0
        zero = (-lo / scale).round().clamp(0, top)
        x = w / scale[:, None]
        codes = (x + zero[:, None]).round() if zero_first else x.round() + zero[:, None]
        return codes.clamp(0, top), scale, zero
    return zeropoint_channel


WRONG = {
    "int4_groups": {"2^b levels instead of 2^b - 1": groups_with(8),
                    "a per-tensor scale": groups_with(7, per_tensor=True),
                    "nibbles in the wrong order": groups_with(7, high_first=True)},
    "zeropoint_channel": {"2^b levels instead of 2^b - 1": zeropoint_with(levels=lambda bits: 2**bits),
                          "a per-tensor scale": zeropoint_with(per_tensor=True),
                          "a range without 0": zeropoint_with(include_zero=False),
                          "zero point added before rounding": zeropoint_with(zero_first=True)},
}


def test_the_right_answer_with_float_codes_is_accepted():
    # codes and zero points as floats: the values count, not the dtype
    assert ch05_lab.zeropoint_channel.check(zeropoint_with()).passed
    assert ch05_lab.int4_groups.check(groups_with(7)).passed


def test_int4_groups_reference_agrees_with_torchs_fake_quantization():
    for case in ch05_lab.int4_groups.cases():
        w, size = case.args
        packed, scale = ch05_lab.int4_groups.reference(w, size)
        codes = torch.stack([packed & 0x0F, packed >> 4], 1).flatten()[: w.numel()].float() - 8
        by_group = w.reshape(-1, size)
        fake = torch.fake_quantize_per_channel_affine(
            by_group, scale.flatten(), torch.zeros(scale.numel(), dtype=torch.int32), 0, -7, 7)
        assert torch.equal(codes.reshape(by_group.shape) * scale.flatten()[:, None], fake), case.label


def test_zeropoint_reference_agrees_with_torchs_fake_quantization():
    for case in ch05_lab.zeropoint_channel.cases():
        w, bits = case.args
        codes, scale, zero = ch05_lab.zeropoint_channel.reference(w, bits)
        fake = torch.fake_quantize_per_channel_affine(w, scale, zero.to(torch.int32), 0, 0, 2**bits - 1)
        back = (codes.float() - zero.float()[:, None]) * scale[:, None]
        assert torch.allclose(back, fake, rtol=0, atol=1e-6), case.label


def test_zeropoint_edges_worked_by_hand():
    codes, scale, zero = ch05_lab.zeropoint_channel.reference(torch.tensor([[-1.5, 6.0, 0.25, 0.75]]), 4)
    assert scale.tolist() == [0.5] and zero.tolist() == [3]  # range 7.5 in 15 steps; -1.5 is code 0
    assert codes.tolist() == [[0, 15, 3, 5]]  # 0.5 rounds to 0 and 1.5 to 2 (even), then + 3
    codes, scale, zero = ch05_lab.zeropoint_channel.reference(torch.zeros(1, 3), 4)
    assert codes.tolist() == [[0, 0, 0]] and scale.tolist() == [1.0] and zero.tolist() == [0]


def test_an_odd_number_of_codes_leaves_the_last_high_nibble_empty():
    packed, scale = ch05_lab.int4_groups.reference(torch.tensor([[0.3, -1.2, 0.9]]), 3)
    codes = [round(v / scale.item()) + 8 for v in (0.3, -1.2, 0.9)]
    assert packed.tolist() == [codes[0] | codes[1] << 4, codes[2]]


def test_nf4_on_disk_measures_what_storage_bytes_counts_plus_a_small_header():
    measured = ch05_lab.nf4_on_disk.measure()
    counted = quant.storage_bytes((2048, 2048), "nf4-dq")
    for part in ("codes", "scales", "double quantization"):
        assert round(measured[part] * 1e6) == counted[part]
    assert 0 < measured["header"] * 1e6 < 1000
    assert math.isclose(sum(measured.values()) * 8e6 / 2048**2, 4.127, rel_tol=0.001)
