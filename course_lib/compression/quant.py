"""Quantizing a tensor: a scale from its range, integer codes, real bit packing, and NF4.

Chapter 5 ("Quantization") teaches it.

A quantizer turns float values into small integers (codes) plus a few floats that say how to read
them back (scales, zero points). Three choices decide how well it works:

* the **scheme**: *absmax* (symmetric) uses ``scale = max|x| / (2**(b-1) - 1)`` and codes in
  ``[-(2**(b-1) - 1), 2**(b-1) - 1]``; *zero-point* (asymmetric) spreads ``2**b`` levels over
  ``[min(x, 0), max(x, 0)]`` and shifts them by an integer zero point so that 0.0 stays exact;
  *NF4* (QLoRA, Dettmers et al. 2023, arXiv 2305.14314) uses 16 fixed levels placed at quantiles
  of the normal distribution, scaled by each block's absmax;
* the **granularity**: one scale for the whole tensor, one per channel (a row: a linear layer's
  output feature) or one per group of ``group_size`` consecutive values along a row;
* the **bits**: 2 to 8 here.

Rounding follows torch: ``code = round_half_even(x * (1 / scale)) + zero``, clamped to the grid.
Absmax INT8 per tensor and per channel gives the same integers as ``torch.quantize_per_tensor`` /
``torch.quantize_per_channel``, and every scheme and bit width the same values as
``torch.fake_quantize_per_tensor_affine`` / ``..._per_channel_affine``. (``torch.quantize_per_*``
with a non-zero zero point rounds ``zero + x / scale`` as one number, so at exact .5 ties with an
odd zero point it lands one code away; tests/test_quant.py records both behaviours.)

Storage is real: codes are bit-packed into a ``uint8`` tensor (two 4-bit codes per byte, eight
3-bit codes per three bytes), zero points are packed the same way, and scales are stored in
``scale_dtype`` (float16 by default; NF4 keeps float32 block scales as bitsandbytes does, or,
with double quantization, 8-bit codes of them in blocks of 256). :class:`QTensor` holds exactly
those tensors, so its ``nbytes`` is what the quantized tensor really occupies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from course_lib.base import dtypes
from course_lib.base.checks import choice, tensor_shape, whole

SCHEMES = ("absmax", "zeropoint", "nf4")
GRANULARITIES = ("tensor", "channel", "group")
SCALE_DTYPES: tuple[str, ...] = dtypes.FLOAT_NAMES
MIN_BITS, MAX_BITS = 2, 8

#: NF4's block size and the block size of its double quantization (QLoRA's choices).
NF4_BLOCK = 64
DQ_BLOCK = 256

#: The NF4 levels as printed in the QLoRA paper (appendix E), to check the derivation against.
NF4_PUBLISHED = (
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
)


@dataclass(frozen=True)
class QuantConfig:
    """How to quantize a weight: bits, scheme, granularity, group size and how scales are stored.

    ``group_size`` is required for ``granularity="group"`` and must divide the row length of every
    tensor it is applied to. NF4 always uses 4 bits and groups (blocks) of 64 unless told otherwise;
    ``double_quant`` (NF4 only) stores its block scales as 8-bit codes in blocks of 256.

    Chapter 5, *Quantization*.
    """

    bits: int = 8
    scheme: str = "absmax"
    granularity: str = "channel"
    group_size: int | None = None
    double_quant: bool = False
    scale_dtype: str = "fp16"

    def __post_init__(self) -> None:
        bits = self.bits
        if isinstance(bits, bool) or not isinstance(bits, int) or not MIN_BITS <= bits <= MAX_BITS:
            raise ValueError(f"bits must be a whole number from {MIN_BITS} to {MAX_BITS}, got {bits!r}; "
                             "use 8 for INT8, 4 for INT4 (below 2 bits nothing useful is left, above 8 "
                             "keep the weights in FP16/BF16)")
        object.__setattr__(self, "scheme", choice(self.scheme, SCHEMES, "quantization scheme"))
        object.__setattr__(self, "granularity", choice(self.granularity, GRANULARITIES, "granularity"))
        object.__setattr__(self, "scale_dtype", choice(self.scale_dtype, SCALE_DTYPES, "scale dtype"))
        if self.scheme == "nf4":
            if bits != 4:
                raise ValueError(f"NF4 has 16 levels, so bits must be 4, got {bits}")
            if self.granularity != "group":
                raise ValueError("NF4 scales blocks of values: use granularity='group' "
                                 f"(group_size={NF4_BLOCK} in QLoRA)")
        elif self.double_quant:
            raise ValueError("double_quant applies to NF4's block scales only; use scheme='nf4'")
        if self.granularity == "group":
            size = self.group_size
            if isinstance(size, bool) or not isinstance(size, int) or size < 2:
                raise ValueError(f"granularity='group' needs group_size, a whole number >= 2 "
                                 f"(128, 64 or 32 are usual), got {size!r}")
        elif self.group_size is not None:
            raise ValueError(f"group_size={self.group_size} only applies to granularity='group', "
                             f"not {self.granularity!r}")

    @property
    def label(self) -> str:
        """A short name for tables: 'INT4 zero-point g128', 'NF4 + DQ', 'INT8 absmax per channel'."""
        if self.scheme == "nf4":
            return "NF4 + DQ" if self.double_quant else "NF4"
        kind = "absmax" if self.scheme == "absmax" else "zero-point"
        where = {"tensor": "per tensor", "channel": "per channel"}.get(self.granularity, f"g{self.group_size}")
        return f"INT{self.bits} {kind} {where}"


def nf4(double_quant: bool = True, block: int = NF4_BLOCK) -> QuantConfig:
    """QLoRA's NormalFloat4: 16 normal-quantile levels, absmax blocks of 64, optional double quantization.

    Chapter 5, *Quantization*.
    """
    return QuantConfig(bits=4, scheme="nf4", granularity="group", group_size=block,
                       double_quant=double_quant, scale_dtype="fp32")


#: The configurations the course compares, by name.
PRESETS: dict[str, QuantConfig] = {
    "int8-tensor": QuantConfig(8, "absmax", "tensor", scale_dtype="fp32"),
    "int8-channel": QuantConfig(8, "absmax", "channel"),
    "int4-channel": QuantConfig(4, "zeropoint", "channel"),
    "int4-g128": QuantConfig(4, "zeropoint", "group", 128),
    "int4-g64": QuantConfig(4, "zeropoint", "group", 64),
    "int4-g32": QuantConfig(4, "zeropoint", "group", 32),
    "nf4": nf4(double_quant=False),
    "nf4-dq": nf4(double_quant=True),
    "int3-g128": QuantConfig(3, "zeropoint", "group", 128),
}


def get_config(config: QuantConfig | str) -> QuantConfig:
    """A :class:`QuantConfig` itself, or the preset of that name (a typo lists the valid names).

    Chapter 5, *Quantization*.
    """
    if isinstance(config, QuantConfig):
        return config
    return PRESETS[choice(config, PRESETS, "quantization preset")]


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def check_tensor(x: Any, what: str = "tensor") -> torch.Tensor:
    """``x`` as a float tensor if it can be quantized; a ValueError naming the problem otherwise.

    Chapter 5, *Quantization*.
    """
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{what} has dtype {x.dtype}; quantization starts from floating-point values")
    if x.numel() == 0:
        raise ValueError(f"{what} is empty (shape {tuple(x.shape)}): there is nothing to quantize")
    finite = torch.isfinite(x)
    if not bool(finite.all()):
        n_nan = int(torch.isnan(x).sum())
        n_inf = int((~finite).sum()) - n_nan
        raise ValueError(f"{what} has {n_nan} NaN and {n_inf} infinite value(s); quantization needs "
                         "finite numbers (one NaN makes its scale NaN). Find where they come from, "
                         "e.g. a diverged training run, or clean them with torch.nan_to_num")
    return x


# ---------------------------------------------------------------------------------------------
# Bit packing
# ---------------------------------------------------------------------------------------------

def _packed_size(n: int, bits: int) -> int:
    """Bytes that ``n`` codes of ``bits`` bits take when packed back to back: ceil(n * bits / 8)."""
    return -(-n * bits // 8)


def pack_bits(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack unsigned ``bits``-bit codes into bytes, back to back, least significant bit first.

    The stream layout: code ``i`` occupies bits ``i*bits .. i*bits+bits-1`` of the byte string,
    counting from bit 0 of byte 0. For 4 bits that is the familiar "first code in the low nibble".

    Chapter 5, *Quantization*.
    """
    whole(bits, "bits", MIN_BITS - 1, MAX_BITS)
    if not isinstance(codes, torch.Tensor) or codes.is_floating_point() or codes.is_complex():
        what = codes.dtype if isinstance(codes, torch.Tensor) else type(codes).__name__
        raise ValueError(f"codes must be a tensor of whole numbers (integer dtype), got {what}: "
                         "round to codes first (quant.encode_codes), or pass torch.tensor(codes)")
    flat = codes.reshape(-1).to(torch.int32)
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= 1 << bits):
        raise ValueError(f"codes must lie in [0, {(1 << bits) - 1}] to fit in {bits} bits")
    n = flat.numel()
    if bits == 8:
        return flat.to(torch.uint8)
    if 8 % bits == 0:  # 1, 2 or 4 bits: whole codes per byte
        per = 8 // bits
        padded = torch.nn.functional.pad(flat, (0, (-n) % per)).reshape(-1, per)
        shifts = torch.arange(per, dtype=torch.int32, device=flat.device) * bits
        return (padded << shifts).sum(1).to(torch.uint8)
    stream = ((flat[:, None] >> torch.arange(bits, dtype=torch.int32, device=flat.device)) & 1).reshape(-1)
    stream = torch.nn.functional.pad(stream, (0, (-stream.numel()) % 8)).reshape(-1, 8)
    return (stream << torch.arange(8, dtype=torch.int32, device=flat.device)).sum(1).to(torch.uint8)


def unpack_bits(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """The ``n`` codes that :func:`pack_bits` packed, as ``uint8``.

    Chapter 5, *Quantization*.
    """
    whole(bits, "bits", MIN_BITS - 1, MAX_BITS)  # as pack_bits: 9 bits would not fit the uint8 codes
    whole(n, "n (the number of codes)", 0)
    if packed.numel() != _packed_size(n, bits):
        raise ValueError(f"{packed.numel()} bytes cannot hold exactly {n} codes of {bits} bits "
                         f"({_packed_size(n, bits)} bytes expected)")
    data = packed.reshape(-1).to(torch.uint8)  # the same low 8 bits of every byte
    if bits == 8:
        return data[:n].clone()
    mask = (1 << bits) - 1
    if 8 % bits == 0:  # 1, 2 or 4 bits: whole codes per byte, shifted out of each byte
        shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=data.device)
        return ((data[:, None] >> shifts) & mask).reshape(-1)[:n]
    # Otherwise `bits` bytes hold 8 codes: one integer (least significant byte first).
    word_dtype = torch.int32 if bits <= 3 else torch.int64
    grouped = torch.nn.functional.pad(data, (0, (-data.numel()) % bits)).reshape(-1, bits).to(word_dtype)
    word = sum(grouped[:, j] << (8 * j) for j in range(bits))  # disjoint bits: sum = or
    shifts = torch.arange(0, 8 * bits, bits, dtype=word_dtype, device=data.device)
    return ((word[:, None] >> shifts) & mask).reshape(-1)[:n].to(torch.uint8)


# ---------------------------------------------------------------------------------------------
# NF4
# ---------------------------------------------------------------------------------------------

#: Where NF4's outermost quantile sits: halfway between the 1/32 and 1/30 tails,
#: 1 - (1/32 + 1/30) / 2 = 0.96770833..., rounded to 7 digits as the reference implementation
#: (bitsandbytes' create_normal_map) does; with it the levels equal the paper's table bit for bit.
NF4_OFFSET = 0.9677083


def nf4_quantiles() -> tuple[torch.Tensor, torch.Tensor]:
    """The 16 probabilities NF4 starts from and their standard-normal quantiles z (float64), ascending.

    The positive half takes 8 equally spaced probabilities from 0.5 to ``NF4_OFFSET`` (leaving out
    0.5 itself), the negative half the mirror images of 7; two halves of different size make the
    code asymmetric but give 0 a code of its own.

    Chapter 5, *Quantization*.
    """
    def half(count: int) -> torch.Tensor:
        return torch.linspace(NF4_OFFSET, 0.5, count + 1, dtype=torch.float32)[:-1].double()

    neg, pos = half(7), half(8)
    probs = torch.cat([1 - neg, torch.full((1,), 0.5, dtype=torch.float64), pos])
    z = torch.cat([-torch.special.ndtri(neg), torch.zeros(1, dtype=torch.float64), torch.special.ndtri(pos)])
    order = torch.argsort(z)
    return probs[order], z[order]


def nf4_codebook() -> torch.Tensor:
    """NF4's 16 levels: the quantiles of :func:`nf4_quantiles` divided by the largest, so in [-1, 1].

    Chapter 5, *Quantization*.
    """
    levels = nf4_quantiles()[1].float()
    return levels / levels.max()


_NF4 = nf4_codebook()
_NF4_EDGES = (_NF4[1:] + _NF4[:-1]) / 2


# ---------------------------------------------------------------------------------------------
# Quantize and dequantize
# ---------------------------------------------------------------------------------------------

def geometry(shape: tuple[int, ...] | torch.Size, config: QuantConfig) -> tuple[int, int, int]:
    """(rows, groups per row, values per group) for a tensor of ``shape`` under ``config``.

    Rows are dim 0 (a linear layer's output features, an embedding's tokens); a 1-D tensor is one
    row. Per tensor: one group of everything. Per channel: one group per row. Per group: rows cut
    into ``group_size`` consecutive values, which must divide the row length.

    Chapter 5, *Quantization*.
    """
    numel = math.prod(shape)
    rows = shape[0] if len(shape) >= 2 else 1
    cols = numel // rows if rows else 0
    if config.granularity == "tensor":
        return 1, 1, numel
    if config.granularity == "channel":
        return rows, 1, cols
    size = config.group_size
    if cols % size:
        divisors = [d for d in (256, 128, 64, 32, 16, 8) if cols % d == 0]
        raise ValueError(f"group_size={size} does not divide the row length {cols} of a tensor of shape "
                         f"{tuple(shape)}; choose one that divides it ({', '.join(map(str, divisors)) or 'none of the usual'}) "
                         "or per-channel scaling")
    return rows, cols // size, size


@dataclass(frozen=True)
class Codes:
    """Unpacked quantization result: codes (R, G, S) uint8, scales (float32) and zero points (uint8) (R, G).

    Chapter 5, *Quantization*.
    """

    codes: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor | None


def _round_scale(scale: torch.Tensor, config: QuantConfig) -> torch.Tensor:
    """The scales as they will be stored in ``scale_dtype``, back in float32.

    A stored scale is rounded *up* to the next value of its dtype, never down: a smaller scale
    would push the group's extreme values past the last code, where clamping costs more than half
    a step; a slightly larger one keeps every value within half a step of its code.
    """
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero group: any scale works
    dtype = dtypes.torch_dtype(config.scale_dtype)
    stored = scale.to(dtype)
    if bool(torch.isfinite(stored).all()) and not bool((stored == 0).any()):
        below = stored.float() < scale
        stored = torch.where(below, torch.nextafter(stored, torch.full_like(stored, math.inf)), stored)
    stored = stored.float()
    if not bool(torch.isfinite(stored).all()) or bool((stored == 0).any()):
        raise ValueError(f"a scale ({float(scale.min()):.3g} .. {float(scale.max()):.3g}) does not fit "
                         f"in {config.scale_dtype}; use scale_dtype='fp32'")
    return stored


def encode_codes(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None, bits: int) -> torch.Tensor:
    """Integer codes (uint8) of ``x`` on the grid of ``scale`` and ``zero`` (None: absmax), broadcast.

    The one rounding rule of the library: round half to even of ``x * (1 / scale)``, clamped to the
    grid; absmax codes -qmax..qmax are stored shifted by 2**(bits - 1). GPTQ rounds with it too.

    Chapter 5, *Quantization*.
    """
    x = torch.round(x * (1.0 / scale))
    if zero is None:
        qmax = (1 << (bits - 1)) - 1
        return (torch.clamp(x, -qmax, qmax) + (1 << (bits - 1))).to(torch.uint8)
    return torch.clamp(x + zero.float(), 0, (1 << bits) - 1).to(torch.uint8)


def decode_codes(codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None, bits: int) -> torch.Tensor:
    """The values (float32) that integer ``codes`` stand for: ``(code - zero) * scale``, broadcast.

    Chapter 5, *Quantization*.
    """
    offset = zero.float() if zero is not None else float(1 << (bits - 1))
    return (codes.float() - offset) * scale


def quantize_codes(x: torch.Tensor, config: QuantConfig) -> Codes:
    """The integer codes, scales and zero points of ``x`` under ``config``, per group.

    Chapter 5, *Quantization*.
    """
    rows, groups, size = geometry(tuple(x.shape), config)
    g = x.detach().float().reshape(rows, groups, size)
    if config.scheme == "absmax":
        qmax = (1 << (config.bits - 1)) - 1
        scale = _round_scale(g.abs().amax(-1) / qmax, config)
        return Codes(encode_codes(g, scale[..., None], None, config.bits), scale, None)
    if config.scheme == "zeropoint":
        top = (1 << config.bits) - 1
        lo = torch.clamp(g.amin(-1), max=0.0)
        hi = torch.clamp(g.amax(-1), min=0.0)
        scale = _round_scale((hi - lo) / top, config)
        zero = torch.clamp(-torch.round(lo / scale), 0, top)
        return Codes(encode_codes(g, scale[..., None], zero[..., None], config.bits), scale, zero.to(torch.uint8))
    # NF4: nearest of 16 levels after dividing each block by its absmax (float32 scales).
    absmax = g.abs().amax(-1)
    absmax = torch.where(absmax > 0, absmax, torch.ones_like(absmax))
    normed = g * (1.0 / absmax)[..., None]
    codes = torch.bucketize(normed.contiguous(), _NF4_EDGES.to(normed.device))
    return Codes(codes.to(torch.uint8), absmax, None)


def _dequantize_codes(c: Codes, config: QuantConfig) -> torch.Tensor:
    if config.scheme == "nf4":
        return _NF4.to(c.codes.device)[c.codes.long()] * c.scale[..., None]
    zero = c.zero[..., None] if c.zero is not None else None
    return decode_codes(c.codes, c.scale[..., None], zero, config.bits)


def _double_quantize(scale: torch.Tensor, block: int = DQ_BLOCK) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """8-bit codes of NF4's block scales: subtract their mean, then absmax INT8 in blocks of 256.

    Returns (int8 codes, one float32 scale per block, the float32 mean). bitsandbytes stores these
    8-bit codes on its own dynamic 8-bit map; a plain absmax INT8 grid costs the same bits.
    """
    flat = scale.reshape(-1)
    mean = flat.mean()
    centred = flat - mean
    n_blocks = -(-flat.numel() // block)
    padded = torch.nn.functional.pad(centred, (0, n_blocks * block - flat.numel())).reshape(n_blocks, block)
    s2 = padded.abs().amax(-1) / 127
    s2 = torch.where(s2 > 0, s2, torch.ones_like(s2))
    q = torch.clamp(torch.round(padded * (1.0 / s2)[:, None]), -127, 127).reshape(-1)[: flat.numel()]
    return q.to(torch.int8), s2.float(), mean.reshape(1).float()


def _double_dequantize(q: torch.Tensor, s2: torch.Tensor, mean: torch.Tensor, block: int = DQ_BLOCK) -> torch.Tensor:
    index = torch.arange(q.numel(), device=q.device) // block
    return q.float() * s2[index] + mean


@dataclass
class QTensor:
    """A quantized tensor as it is stored: bit-packed codes, scales, zero points (all real tensors).

    ``nbytes`` is the sum of the stored tensors' bytes; :meth:`dequantize` rebuilds float values.
    For NF4 with double quantization ``scale`` holds int8 codes of the block scales and
    ``dq_scale`` / ``dq_mean`` the float32 numbers that decode them.

    Chapter 5, *Quantization*.
    """

    packed: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor | None
    dq_scale: torch.Tensor | None
    dq_mean: torch.Tensor | None
    shape: tuple[int, ...]
    config: QuantConfig

    def tensors(self) -> dict[str, torch.Tensor]:
        """The stored tensors by name (those that exist for this configuration)."""
        names = ("packed", "scale", "zero", "dq_scale", "dq_mean")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes really stored: codes, scales, zero points and double-quantization constants."""
        return sum(t.numel() * t.element_size() for t in self.tensors().values())

    @property
    def bits_per_value(self) -> float:
        """Stored bits per original value, overheads included (8 * nbytes / numel)."""
        return 8 * self.nbytes / _numel(self.shape)

    def unpack(self) -> Codes:
        """The codes, the scales as used to decode and the zero points, unpacked and shaped (rows, groups, ...)."""
        rows, groups, size = geometry(self.shape, self.config)
        bits = self.config.bits
        codes = unpack_bits(self.packed, bits, self.numel).reshape(rows, groups, size)
        zero = unpack_bits(self.zero, bits, rows * groups).reshape(rows, groups) if self.zero is not None else None
        if self.config.double_quant:
            scale = _double_dequantize(self.scale, self.dq_scale, self.dq_mean).reshape(rows, groups)
        else:
            scale = self.scale.float()
        return Codes(codes, scale, zero)

    def codes(self) -> torch.Tensor:
        """The unpacked integer codes, shaped (rows, groups, values per group), uint8."""
        return self.unpack().codes

    def scales(self) -> torch.Tensor:
        """The scales as used to decode (after scale-dtype rounding or double quantization), float32."""
        return self.unpack().scale

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The values the codes stand for, in the original shape."""
        return _dequantize_codes(self.unpack(), self.config).reshape(self.shape).to(dtype)


def quantize(x: torch.Tensor, config: QuantConfig | str = "int8-channel") -> QTensor:
    """Quantize ``x`` under ``config`` (a :class:`QuantConfig` or a preset name) into packed storage.

    Chapter 5, *Quantization*.
    """
    config = get_config(config)
    x = check_tensor(x)
    c = quantize_codes(x, config)
    bits = config.bits
    packed = pack_bits(c.codes, bits)
    zero = pack_bits(c.zero, bits) if c.zero is not None else None
    dq_scale = dq_mean = None
    if config.double_quant:
        scale, dq_scale, dq_mean = _double_quantize(c.scale)
    else:
        scale = c.scale.to(dtypes.torch_dtype(config.scale_dtype))
    return QTensor(packed, scale, zero, dq_scale, dq_mean, tuple(x.shape), config)


def dequantize(q: QTensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The float values a :class:`QTensor` stands for (same as ``q.dequantize()``).

    Chapter 5, *Quantization*.
    """
    return q.dequantize(dtype)


def quantize_dequantize(x: torch.Tensor, config: QuantConfig | str) -> torch.Tensor:
    """``x`` rounded to the quantization grid and read back, without packing: what a model computes with.

    Chapter 5, *Quantization*.
    """
    config = get_config(config)
    x = check_tensor(x)
    c = quantize_codes(x, config)
    if config.double_quant:
        scale = _double_dequantize(*_double_quantize(c.scale)).reshape(c.scale.shape)
        c = replace(c, scale=scale)
    return _dequantize_codes(c, config).reshape(x.shape).to(x.dtype)


class StraightThrough(torch.autograd.Function):
    """Forward: the quantized value. Backward: the gradient passes through unchanged (STE).

    Chapter 5, *Quantization*.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, config: QuantConfig) -> torch.Tensor:
        return quantize_dequantize(x, config)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


def fake_quantize(x: torch.Tensor, config: QuantConfig | str) -> torch.Tensor:
    """Quantize-then-dequantize in the forward pass with a straight-through gradient (for QAT).

    Rounding has zero gradient almost everywhere; the straight-through estimator (Bengio et al.
    2013) treats it as the identity in the backward pass, so the float weights keep learning while
    the forward pass already sees the quantized ones.

    Chapter 5, *Quantization*.
    """
    return StraightThrough.apply(x, get_config(config))


# ---------------------------------------------------------------------------------------------
# Bytes, without quantizing anything
# ---------------------------------------------------------------------------------------------

def storage_bytes(shape: tuple[int, ...], config: QuantConfig | str) -> dict[str, int]:
    """Bytes a tensor of ``shape`` takes under ``config``, by part: codes, scales, zero points, DQ.

    The same accounting :class:`QTensor` realises with tensors (the tests check both agree), so it
    can price a model that is too large to quantize here, such as a billion-parameter one.

    Chapter 5, *Quantization*.
    """
    config = get_config(config)
    rows, groups, size = geometry(tensor_shape(shape), config)
    n_scales = rows * groups
    out = {"codes": _packed_size(rows * groups * size, config.bits)}
    if config.double_quant:
        out["scales"] = n_scales  # one int8 code each
        out["double quantization"] = 4 * -(-n_scales // DQ_BLOCK) + 4
    else:
        out["scales"] = n_scales * torch.empty(0, dtype=dtypes.torch_dtype(config.scale_dtype)).element_size()
    if config.scheme == "zeropoint":
        out["zero points"] = _packed_size(n_scales, config.bits)
    return out


def bits_per_value(shape: tuple[int, ...], config: QuantConfig | str) -> float:
    """Stored bits per value of a ``shape`` tensor under ``config``, overheads included.

    Chapter 5, *Quantization*.
    """
    return 8 * sum(storage_bytes(shape, config).values()) / _numel(tensor_shape(shape))


def _numel(shape: tuple[int, ...]) -> int:
    """The number of values of a ``shape`` tensor, refusing an empty one (it has no bits per value)."""
    if math.prod(shape) == 0:
        raise ValueError(f"a tensor of shape {shape} holds no values, so it has no bits per value; "
                         "storage_bytes gives its bytes")
    return math.prod(shape)


def error_stats(x: torch.Tensor, config: QuantConfig | str) -> dict[str, float]:
    """How far the quantized values land from ``x``: RMSE, max error, and signal-to-noise in dB.

    Chapter 5, *Quantization*.
    """
    x = check_tensor(x).detach().float()
    err = quantize_dequantize(x, config).float() - x
    rmse = float(err.pow(2).mean().sqrt())
    signal = float(x.pow(2).mean().sqrt())
    return {"rmse": rmse, "max_error": float(err.abs().max()),
            "snr_db": 20 * math.log10(signal / rmse) if rmse > 0 else math.inf}
