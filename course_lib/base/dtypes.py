"""The course's one table of data types: name, torch dtype, bytes per value and number format.

Chapter 2 ("The memory wall") counts bytes per parameter with it, chapter 3 ("Number formats")
casts to each format, chapter 5 ("Quantization") stores scales in one of them, chapter 10
("Hardware for LLM training") times products and memory traffic in them; every module looks names
up here, so "bf16" means the same thing, and the same number of bytes, everywhere. Formats torch
cannot store (INT4, TF32's 19 bits, any other ExMy) have no torch dtype;
:mod:`course_lib.numbers.formats` encodes every format exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_lib.base.checks import choice

__all__ = ["ALIASES", "BYTES", "DTYPES", "FLOAT_NAMES", "TORCH", "DType", "torch_dtype"]


@dataclass(frozen=True)
class DType:
    """One data type: the course's name, torch's dtype (None if torch cannot store it), bytes, format.

    Chapter 2, *The memory wall*.
    """

    name: str
    torch: torch.dtype | None
    bytes: float
    format: str  # the name :func:`course_lib.numbers.format_specs.get_format` knows


#: Every data type the course names, in the order tables list them.
DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("fp64", torch.float64, 8, "fp64"),
    DType("fp32", torch.float32, 4, "fp32"),
    DType("tf32", None, 4, "fp32"),  # TF32 multiplies with 10 mantissa bits but stores FP32
    DType("fp16", torch.float16, 2, "fp16"),
    DType("bf16", torch.bfloat16, 2, "bf16"),
    DType("e4m3", torch.float8_e4m3fn, 1, "e4m3"),
    DType("e5m2", torch.float8_e5m2, 1, "e5m2"),
    DType("fp8", torch.float8_e4m3fn, 1, "e4m3"),  # the E4M3 variant used for weights
    DType("int8", torch.int8, 1, "int8"),
    DType("int4", None, 0.5, "int4"),
)}

#: torch's dtype for each name that torch can store.
TORCH: dict[str, torch.dtype] = {d.name: d.torch for d in DTYPES.values() if d.torch is not None}

#: Bytes one stored value takes, per name.
BYTES: dict[str, float] = {d.name: d.bytes for d in DTYPES.values()}

#: Other spellings of the formats' names (torch's, NumPy's, the OCP's), lower case.
ALIASES: dict[str, str] = {
    "float64": "fp64", "double": "fp64", "float32": "fp32", "single": "fp32", "float16": "fp16",
    "half": "fp16", "bfloat16": "bf16", "e4m3fn": "e4m3", "fp8_e4m3": "e4m3", "float8_e4m3fn": "e4m3",
    "fp8_e5m2": "e5m2", "float8_e5m2": "e5m2", "float8_e4m3fnuz": "e4m3fnuz",
    "float8_e5m2fnuz": "e5m2fnuz", "e2m1": "fp4_e2m1", "fp4": "fp4_e2m1",
}  # fmt: skip

#: The floating-point names a model's weights can be cast to as a whole (the float rows of chapter 5).
FLOAT_NAMES: tuple[str, ...] = ("fp32", "fp16", "bf16")


def torch_dtype(name: str, allowed: tuple[str, ...] | None = None) -> torch.dtype:
    """torch's dtype for ``name`` or an alias such as "half", optionally limited to ``allowed``.

    Chapter 2, *The memory wall*.
    """
    options = allowed if allowed is not None else tuple(TORCH)
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in options and isinstance(key, str):
        key = ALIASES.get(key, key)
    return TORCH[choice(key, options, "dtype")]
