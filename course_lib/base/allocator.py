"""The C library's allocator set for torch on the CPU: memory freed by one step kept for the next.

A training step of the course model allocates and frees, dozens of times, tensors of 4 MiB (the
MLP's activations, 16 x 128 x 512 floats) and 32 MiB (the 2,048 x 4,096 logits and their
gradient). glibc's ``malloc`` gives each block above its mmap threshold a mapping of its own (the
threshold rises as such blocks are freed, to at most 32 MiB), and hands free memory at the top
of its heap back to the system beyond its trim threshold. Every such tensor is then mapped
afresh, and the system faults in and zeroes its pages again: time spent in the kernel, not in
torch. :func:`keep_freed_memory` sets both thresholds to :data:`THRESHOLD`, so that the next step
reuses what the last one freed. Nothing computed changes (the same losses bit for bit); the
process holds on to up to that much freed memory. ``benchmarks/allocator.py`` measures it.

``import course_lib`` calls it once, so every chapter's kernel and every rank runs with it;
``COURSE_LIB_MALLOC=0`` keeps glibc's defaults. Other C libraries (macOS, Windows, musl) are
left as they are. How to set the same with environment variables, for any program, is in
glibc's manual (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``).
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["THRESHOLD", "keep_freed_memory"]

#: Both thresholds, in bytes: above the course's largest tensors (32 MiB), so none is mapped afresh.
THRESHOLD = 256 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters, from glibc's malloc.h


def keep_freed_memory(threshold: int = THRESHOLD) -> bool:
    """Set glibc's mmap and trim thresholds to ``threshold`` bytes; whether they were set.

    Returns False, changing nothing, with ``COURSE_LIB_MALLOC=0``, off Linux, or where the C
    library is not glibc (``gnu_get_libc_version`` missing). Called by ``import course_lib``.

    Used by the library's other modules.
    """
    if not isinstance(threshold, int) or isinstance(threshold, bool) or not 0 < threshold < 2**31:
        raise ValueError(f"threshold must be a whole number of bytes in (0, 2**31), got {threshold!r}.")
    if os.environ.get("COURSE_LIB_MALLOC", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc alone has it (musl's mallopt does nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, threshold))
