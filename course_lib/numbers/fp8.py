"""FP8 training recipes: per-tensor scaling (just in time and delayed) and MX block scaling.

An FP8 number has too little range to hold a tensor as it comes, so every FP8 tensor carries a
scale: the tensor is multiplied by it before the cast and divided by it after. Three ways to
choose the scale, each as FP8 training and inference use them:

* :func:`current_scale` (*just in time*): ``fp8_max / amax`` of the tensor itself, which needs
  a pass over the tensor before the cast;
* :func:`delayed_scaling` (Transformer Engine's ``DelayedScaling`` recipe, margin 0,
  ``amax_compute_algo="max"``): the scale of step t is ``fp8_max / max(amax history)`` of the
  steps before it, so the cast needs no extra pass, but a tensor whose range drifts upward
  saturates and one whose range shrinks underflows;
* :func:`mx_quantize` (OCP Microscaling, MX v1.0): every block of 32 consecutive elements shares
  one power-of-two scale (an E8M0 byte), ``2**(floor(log2(block amax)) - emax_elem)``, and the
  elements are FP8 (MXFP8), FP6 (MXFP6) or FP4 (MXFP4) numbers, saturated at their maximum.

The usual recipe casts weights and activations of the forward pass to E4M3 (more precision) and
gradients to E5M2 (more range): Transformer Engine's ``Format.HYBRID``. Chapter 3, *Number formats*,
writes each recipe out and compares them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from course_lib.base.checks import positive as _positive
from course_lib.numbers import format_specs, formats

__all__ = [
    "FP8_FORMATS", "MX_ELEMENT_FORMATS", "ScaledCast", "fp8_cast", "current_scale", "scaled_cast",
    "delayed_scaling", "just_in_time_scaling", "drifting_tensors", "mx_quantize", "mx_bits_per_element",
]  # fmt: skip

#: torch's FP8 dtypes by the course's format names.
_TORCH_FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
FP8_FORMATS: tuple[str, ...] = tuple(_TORCH_FP8)
#: The element formats of the OCP MX specification's floating-point types (MXFP8, MXFP6, MXFP4).
MX_ELEMENT_FORMATS: tuple[str, ...] = ("e4m3", "e5m2", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1")
_E8M0_EXPONENTS = 127  # an E8M0 scale is 2**k for k in -127..127 (pattern 255 is NaN)


def _fp8_format(name: str) -> format_specs.FloatFormat:
    if name not in _TORCH_FP8:
        raise ValueError(f"an FP8 format is one of {', '.join(FP8_FORMATS)}, got {name!r}")
    return format_specs.get_format(name)  # type: ignore[return-value]


def _float_tensor(x: torch.Tensor, what: str = "x") -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"{what} must be a floating-point torch tensor, got {type(x).__name__}")
    return x.detach().to(torch.float32)


def fp8_cast(x: torch.Tensor, scale: float, name: str = "e4m3") -> torch.Tensor:
    """``x * scale`` saturated at the format's maximum, cast to torch's FP8 dtype, divided by ``scale`` (float32).

    Chapter 3, *Number formats*.
    """
    fmt = _fp8_format(name)
    _positive(scale, "scale")
    scaled = (_float_tensor(x) * scale).clamp(-fmt.max, fmt.max)  # saturate instead of inf
    return scaled.to(_TORCH_FP8[name]).to(torch.float32) / scale


def current_scale(x: torch.Tensor, name: str = "e4m3") -> float:
    """The just-in-time scale of a tensor: ``fp8_max / amax``, so its largest magnitude maps to the format's maximum.

    Chapter 3, *Number formats*.
    """
    amax = _float_tensor(x).abs().max().item()
    return _fp8_format(name).max / amax if amax > 0 else 1.0


@dataclass(frozen=True)
class ScaledCast:
    """One tensor cast to FP8 with a scale: the scale, the tensor's amax, what saturated or vanished, the error.

    Chapter 3, *Number formats*.
    """

    scale: float
    amax: float
    saturated: int  # entries whose |x| * scale exceeded the format's maximum by more than half a gap
    underflowed: int  # nonzero entries stored as 0
    relative_error: float  # ||fp8(x) - x|| / ||x||


def scaled_cast(x: torch.Tensor, scale: float, name: str = "e4m3") -> ScaledCast:
    """Cast ``x`` with :func:`fp8_cast` and count the saturated and underflowed entries.

    Chapter 3, *Number formats*.
    """
    x, fmt = _float_tensor(x), _fp8_format(name)
    q = fp8_cast(x, scale, name)
    half_gap = 2.0 ** (math.floor(math.log2(fmt.max)) - fmt.mantissa_bits - 1)  # half an ulp at the max
    saturated = int(((x * scale).abs() > fmt.max + half_gap).sum())  # beyond what rounding explains
    underflowed = int(((q == 0) & (x != 0)).sum())
    norm = torch.linalg.norm(x).item()
    error = torch.linalg.norm(q - x).item() / norm if norm > 0 else 0.0
    return ScaledCast(scale, x.abs().max().item(), saturated, underflowed, error)


def delayed_scaling(
    tensors: Sequence[torch.Tensor], name: str = "e4m3", history: int = 16, initial_scale: float = 1.0
) -> list[ScaledCast]:
    """Cast a sequence of tensors (one per step) with delayed scaling: ``scale = fp8_max / max(last history amaxes)``.

    Step t uses the amaxes recorded at steps before t (``initial_scale`` at the first step), as
    Transformer Engine's ``DelayedScaling(margin=0, amax_compute_algo="max")`` does.

    Chapter 3, *Number formats*.
    """
    fmt = _fp8_format(name)
    _positive(history, "history", integer=True)
    _positive(initial_scale, "initial_scale")
    amaxes: list[float] = []
    scale, results = initial_scale, []
    for x in tensors:
        results.append(scaled_cast(x, scale, name))
        amaxes = (amaxes + [results[-1].amax])[-history:]  # the window of the last `history` steps
        scale = fmt.max / max(amaxes) if max(amaxes) > 0 else scale
    return results


def just_in_time_scaling(tensors: Sequence[torch.Tensor], name: str = "e4m3") -> list[ScaledCast]:
    """Cast a sequence of tensors, each with its own :func:`current_scale`.

    Chapter 3, *Number formats*.
    """
    return [scaled_cast(x, current_scale(x, name), name) for x in tensors]


def drifting_tensors(
    steps: int = 40, size: int = 4096, growth: float = 1.25, turn: int | None = None, spread: float = 0.5,
    seed: int = 0,
) -> list[torch.Tensor]:
    """A seeded sequence of tensors whose range drifts: amax grows by ``growth`` per step until ``turn``, then shrinks.

    Each tensor is N(0, 1) times 10 to the power of a N(0, ``spread``) exponent (magnitudes over a
    few decades, as activations and gradients have), times a step factor ``growth**t`` up to step ``turn`` (half of
    ``steps`` by default) and ``growth**(2 * turn - t)`` after it.

    Chapter 3, *Number formats*.
    """
    _positive(steps, "steps", integer=True)
    _positive(size, "size", integer=True)
    _positive(growth, "growth")
    _positive(spread, "spread")
    turn = steps // 2 if turn is None else turn
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in range(steps):
        factor = growth ** (t if t <= turn else 2 * turn - t)
        out.append(torch.randn(size, generator=g) * 10.0 ** (spread * torch.randn(size, generator=g)) * factor)
    return out


def mx_quantize(x: torch.Tensor, name: str = "e4m3", block: int = 32) -> torch.Tensor:
    """OCP MX quantization: each block of ``block`` elements shares the scale ``2**(floor(log2(amax)) - emax_elem)``.

    The scale is an E8M0 power of two (exponent clamped to -127..127); each element is
    ``x / scale`` rounded to nearest (ties to even) in the element format ``name`` and saturated
    at its maximum, as in the specification's conversion. Returns the dequantized values (float32,
    ``x``'s shape); the last dimension is padded with zeros to whole blocks.

    Chapter 3, *Number formats*.
    """
    if name not in MX_ELEMENT_FORMATS:
        raise ValueError(f"an MX element format is one of {', '.join(MX_ELEMENT_FORMATS)}, got {name!r}")
    _positive(block, "block", integer=True)
    x = _float_tensor(x)
    fmt = format_specs.get_format(name)
    emax_elem = math.floor(math.log2(fmt.max))  # the exponent of the element format's largest number
    flat = x.flatten()
    padded = torch.nn.functional.pad(flat, (0, -flat.numel() % block))
    blocks = padded.reshape(-1, block)
    amax = blocks.abs().amax(dim=1, keepdim=True)
    shared = torch.floor(torch.log2(amax)) - emax_elem  # log2(0) = -inf: clamped below
    scale = 2.0 ** shared.clamp(-_E8M0_EXPONENTS, _E8M0_EXPONENTS)
    scaled = (blocks / scale).to(torch.float64).numpy()
    elements = formats.round_to_format(scaled, fmt, saturate=True)
    out = torch.from_numpy(np.asarray(elements, dtype=np.float64)).to(torch.float32) * scale
    return out.flatten()[: flat.numel()].reshape(x.shape)


def mx_bits_per_element(name: str = "e4m3", block: int = 32) -> float:
    """Storage per element of an MX format: the element's bits plus the 8-bit shared scale spread over the block.

    Chapter 3, *Number formats*.
    """
    if name not in MX_ELEMENT_FORMATS:
        raise ValueError(f"an MX element format is one of {', '.join(MX_ELEMENT_FORMATS)}, got {name!r}")
    _positive(block, "block", integer=True)
    return format_specs.get_format(name).total_bits + 8 / block
