"""GGUF-style k-quants: 4-bit codes in super-blocks of 256 weights whose block scales are quantized too.

Chapter 5 ("Quantization") counts their bits and compares a Q4_K-like quantizer with per-group INT4.

llama.cpp's k-quants (GGUF files; pull request #1684 of ggml-org/llama.cpp) store weights in
super-blocks of 256. Q4_K splits a super-block into 8 blocks of 32 weights; each weight is a
4-bit code ``q`` and is read back as ``d_b * q - m_b``, with a scale ``d_b`` and a min ``m_b`` per
block. The block scales and mins are themselves quantized to 6 bits against one FP16 scale
(``d``) and one FP16 min scale (``dmin``) per super-block: 4 + (8 * (6 + 6) + 2 * 16) / 256 =
4.5 bits per weight. The same idea as QLoRA's double quantization, one level down.

:func:`q4k_quantize` is a plain version of that layout: block ranges from min and max, scales and
mins rounded up to the 6-bit grid (so the codes cover each block's range). llama.cpp
searches each block's scale and min iteratively to lower the error further; this module does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_lib.compression import quant

#: Weights per super-block (llama.cpp's QK_K) and per block of Q4_K.
SUPER_BLOCK = 256
Q4K_BLOCK = 32


def kquant_bits_per_weight(bits: int = 4, block: int = Q4K_BLOCK, super_block: int = SUPER_BLOCK,
                           scale_bits: int = 6, min_bits: int | None = 6, super_bits: int = 16) -> float:
    """Bits per weight of a k-quant: codes, plus per-block scale (and min) codes, plus the super-block's FP16s.

    Q4_K (defaults): 4 + (8 * (6 + 6) + 2 * 16) / 256 = 4.5. ``min_bits=None`` is a type without mins
    (one FP16 per super-block instead of two), as Q6_K: ``kquant_bits_per_weight(6, 16, 256, 8, None)``
    = 6.5625.

    Chapter 5, *Quantization*.
    """
    for name, value in (("bits", bits), ("block", block), ("super_block", super_block),
                        ("scale_bits", scale_bits), ("super_bits", super_bits)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    if min_bits is not None and (isinstance(min_bits, bool) or not isinstance(min_bits, int) or min_bits < 1):
        raise ValueError(f"min_bits must be a whole number >= 1, or None for a type without mins, got {min_bits!r}")
    if super_block % block:
        raise ValueError(f"a super-block of {super_block} weights must hold whole blocks of {block}")
    blocks = super_block // block
    per_block = scale_bits + (min_bits or 0)
    supers = 2 if min_bits is not None else 1
    return bits + (blocks * per_block + supers * super_bits) / super_block


@dataclass(frozen=True)
class Q4K:
    """A tensor in a Q4_K-like layout: codes (S, 8, 32), 6-bit scale and min codes (S, 8), FP16 ``d``, ``dmin`` (S).

    Chapter 5, *Quantization*.
    """

    codes: torch.Tensor
    scale_codes: torch.Tensor
    min_codes: torch.Tensor
    d: torch.Tensor
    dmin: torch.Tensor
    shape: tuple[int, ...]

    def dequantize(self) -> torch.Tensor:
        """The values the codes stand for, ``d * sc * q - dmin * mc``, in the original shape (float32)."""
        scale = (self.d.float()[:, None] * self.scale_codes.float())[..., None]
        low = (self.dmin.float()[:, None] * self.min_codes.float())[..., None]
        return (scale * self.codes.float() - low).reshape(self.shape)

    @property
    def bits_per_value(self) -> float:
        """Storage bits per weight: 4-bit codes, 6-bit scale and min per block, two FP16 per super-block."""
        return kquant_bits_per_weight()


def q4k_quantize(w: torch.Tensor) -> Q4K:
    """Quantize ``w`` in a Q4_K-like layout: super-blocks of 256, blocks of 32, 6-bit block scales and mins.

    The tensor is read in order (row by row); its number of values must be a multiple of 256. The
    FP16 ``d`` and ``dmin`` are rounded to nearest, so a block's largest value can land a hair
    (at most 15 * 2**-11 of a step) past its last code.

    Chapter 5, *Quantization*.
    """
    w = quant.check_tensor(w, "weight")
    if w.numel() % SUPER_BLOCK:
        raise ValueError(f"Q4_K stores super-blocks of {SUPER_BLOCK} weights; a tensor of shape {tuple(w.shape)} "
                         f"has {w.numel()} values, not a multiple of {SUPER_BLOCK} (llama.cpp keeps such "
                         "tensors in another type)")
    x = w.detach().float().reshape(-1, SUPER_BLOCK // Q4K_BLOCK, Q4K_BLOCK)   # (S, 8, 32)
    low = (-x.amin(-1)).clamp(min=0.0)                                  # m_b >= 0: the block reaches -m_b
    scale = (x.amax(-1) + low) / 15                                     # d_b: the block's range in 15 steps
    d = _fp16_or_one(scale.amax(-1, keepdim=True) / 63)                 # one FP16 per super-block, (S, 1)
    dmin = _fp16_or_one(low.amax(-1, keepdim=True) / 63)
    scale_codes = torch.clamp(torch.ceil(scale / d), 0, 63)             # 6 bits, rounded up
    min_codes = torch.clamp(torch.ceil(low / dmin), 0, 63)
    block_scale, block_min = (d * scale_codes)[..., None], (dmin * min_codes)[..., None]
    safe = torch.where(block_scale > 0, block_scale, torch.ones_like(block_scale))  # an all-zero block
    codes = torch.clamp(torch.round((x + block_min) / safe), 0, 15)
    return Q4K(codes.to(torch.uint8), scale_codes.to(torch.uint8), min_codes.to(torch.uint8),
               d[:, 0].half(), dmin[:, 0].half(), tuple(w.shape))


def _fp16_or_one(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to FP16 (back in float32); a zero (an all-zero super-block) becomes 1."""
    x = x.half().float()
    return torch.where(x > 0, x, torch.ones_like(x))
