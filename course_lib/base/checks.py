"""Checks of user input shared by every module: a message that names the problem and the valid values.

No chapter teaches it; every chapter meets its messages.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np


def choice(name: Any, options: Iterable[str], what: str) -> str:
    """The canonical (lower-case) name if ``name`` is one of ``options``, else a ValueError listing them.

    Used by the library's other modules.
    """
    options = list(options)
    key = name.strip().lower() if isinstance(name, str) else None
    if key not in options:
        raise ValueError(f"unknown {what} {name!r}; valid values: {', '.join(options)}")
    return key


def positive(value: Any, what: str, integer: bool = False) -> Any:
    """``value`` if it is a positive finite number (a whole number >= 1 when ``integer``), else a ValueError.

    Used by the library's other modules.
    """
    if integer:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{what} must be a whole number >= 1, got {value!r}")
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    return value
