"""A process that imported torch ends in a fraction of a second instead of one or two.

When a Python process ends, after its ``atexit`` handlers, the interpreter clears its modules
and collects its garbage, walking every object the garbage collector tracks. After ``import
torch`` and ``import transformers`` those are about 350,000 (torch's operator registrations,
sympy, the model classes), more once a chapter has built models and plots: the walk takes
about a second in a bare process and up to three in a chapter's kernel. A kernel's shutdown
waits for it, and so do the book build once per chapter, the launcher for a rank started cold,
and a test for every command it runs.

:func:`freeze_at_exit` registers :func:`gc.freeze` as an ``atexit`` handler: at exit, the
objects alive then are moved out of the collector's sight, so that its last collections have
nothing to walk. Everything else about the exit stays: every ``atexit`` handler runs (those
registered before this one and after it), ``weakref.finalize`` callbacks run and temporary
folders are removed, the modules are cleared, and an object whose last reference goes then is
freed and closed as before (a file written through a handle left open is flushed). What no
longer happens is the collection of reference cycles still alive at exit, whose finalizers
Python does not promise to run at exit anyway (the language reference on ``object.__del__``);
the operating system takes back their memory, files and sockets.

``import course_lib`` calls it once (as it calls :func:`course_lib.base.allocator.
keep_freed_memory`), so every chapter's kernel, rank, command and test process ends this way;
``COURSE_LIB_QUICK_EXIT=0`` keeps Python's own exit. ``benchmarks/quick_exit.py`` measures it.
"""

from __future__ import annotations

import atexit
import gc
import os

__all__ = ["freeze_at_exit"]

_registered = False


def freeze_at_exit() -> bool:
    """Register :func:`gc.freeze` to run at exit, once per process; whether it is registered.

    Returns False, registering nothing, with ``COURSE_LIB_QUICK_EXIT=0``. Called by
    ``import course_lib``.

    Used by the library's other modules.
    """
    global _registered
    if os.environ.get("COURSE_LIB_QUICK_EXIT", "1") == "0":
        return False
    if not _registered:
        atexit.register(gc.freeze)
        _registered = True
    return True
