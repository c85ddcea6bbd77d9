"""The course's one registry of data type names and the torch dtype behind each.

Chapter 2 ("The memory wall") checks its bytes-per-parameter table against these dtypes, chapter 3
("Number formats") casts to each format, chapter 5 ("Quantization") stores scales in one of them;
every module looks names up here, so "bf16" means the same thing everywhere. Formats torch cannot
store (INT4, any other ExMy) have no entry; :mod:`course_lib.formats` encodes them exactly.
"""

from __future__ import annotations

import torch

from course_lib.checks import choice

__all__ = ["FLOAT_NAMES", "TORCH", "torch_dtype"]

#: torch's dtype for each name that torch can store ("fp8" is the E4M3 variant used for weights).
TORCH: dict[str, torch.dtype] = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "e4m3": torch.float8_e4m3fn,
    "e5m2": torch.float8_e5m2,
    "fp8": torch.float8_e4m3fn,
    "int8": torch.int8,
}

#: The floating-point names a model's weights can be cast to as a whole (the float rows of chapter 5).
FLOAT_NAMES: tuple[str, ...] = ("fp32", "fp16", "bf16")


def torch_dtype(name: str, allowed: tuple[str, ...] | None = None) -> torch.dtype:
    """torch's dtype for ``name`` or a format alias such as "half", optionally limited to ``allowed``.

    Chapter 2, *The memory wall*.
    """
    options = allowed if allowed is not None else tuple(TORCH)
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in options:
        from course_lib import formats  # aliases ("half", "float16", "bfloat16", ...) live with the formats

        try:
            key = formats.get_format(name).name
        except (ValueError, TypeError):
            pass
    return TORCH[choice(key, options, "dtype")]

