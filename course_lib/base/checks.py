"""Checks of user input shared by every module: a message that names the problem and the valid values.

No chapter teaches it; every chapter meets its messages.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import torch


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


def whole(value: Any, what: str, low: int = 1, high: int | None = None) -> int:
    """``value`` if it is a whole number (an int) from ``low`` to ``high``; a TypeError for another type
    (a float such as 4.0 included), a ValueError outside the range.

    Used by the library's other modules.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be a whole number (int), got {value!r} of type {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ValueError(f"{what} must be {bounds}, got {value}")
    return int(value)


def number(value: Any, what: str) -> float:
    """``value`` if it is a real number (int or float, not a string or a bool), else a TypeError naming the type.

    Used by the library's other modules.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{what} must be a number (int or float), got {value!r} of type {type(value).__name__}")
    return value


def tensor_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    """``shape`` as a tuple of whole numbers >= 0 (0: an empty tensor); a TypeError or ValueError naming a bad size.

    Used by the library's other modules.
    """
    try:
        sizes = tuple(shape)
    except TypeError:
        raise TypeError(f"{what} must be a tuple of sizes such as (4096, 4096), got {shape!r}") from None
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise TypeError(f"{what} {sizes!r} has the size {size!r}; every size must be a whole number (int)")
        if size < 0:
            raise ValueError(f"{what} {sizes!r} has the size {size}; every size must be >= 0")
    return tuple(int(s) for s in sizes)


def context_length(model: Any) -> int | None:
    """The longest sequence a transformers model reads (its position count), or None if its config names none.

    Used by the library's other modules.
    """
    config = getattr(model, "config", None)
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def token_ids(ids: Any, model: Any, what: str = "token ids") -> torch.Tensor:
    """``ids`` as [batch, seq] if ``model`` can read them: integer ids below its vocabulary size, no
    sequence longer than its context; else a ValueError naming the limit and the fix (where the
    embedding lookup would fail with a bare IndexError).

    Used by the library's other modules.
    """
    if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32) or ids.dim() > 2:
        tensor = isinstance(ids, torch.Tensor)
        kind = f"a {ids.dtype} tensor of shape {tuple(ids.shape)}" if tensor else type(ids).__name__
        raise ValueError(f"{what} must be an integer tensor [batch, seq] (as a tokenizer returns with "
                         f"return_tensors='pt'), got {kind}")
    if ids.numel() == 0:
        raise ValueError(f"{what} are empty (shape {tuple(ids.shape)}): pass at least one token")
    ids = ids.reshape(1, -1) if ids.dim() < 2 else ids
    table = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    vocab = getattr(table, "num_embeddings", None) or getattr(getattr(model, "config", None), "vocab_size", None)
    lowest, highest = int(ids.min()), int(ids.max())
    if vocab and (lowest < 0 or highest >= vocab):
        bad = lowest if lowest < 0 else highest
        raise ValueError(f"{what} hold the id {bad}, outside the model's vocabulary of {vocab:,} tokens "
                         f"(ids 0 to {vocab - 1:,}); tokenize with the model's own tokenizer")
    context = context_length(model)
    if context and ids.shape[-1] > context:
        raise ValueError(f"{what} hold sequences of {ids.shape[-1]:,} tokens, longer than the model's context "
                         f"of {context:,} positions; cut them to {context:,} tokens or fewer, e.g. "
                         f"ids[:, :{context}] or tokenizer(..., truncation=True, max_length={context})")
    return ids
