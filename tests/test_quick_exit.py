"""course_lib.base.quick_exit: ``import course_lib`` freezes the collector's objects at exit, every
other part of a process's exit still happens, and ``COURSE_LIB_QUICK_EXIT=0`` keeps Python's own.
How much sooner a process ends is measured by ``benchmarks/quick_exit.py``, not here."""

import atexit
import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

import course_lib  # noqa: F401  (registers the freeze, as every notebook's import does)
from course_lib.base import quick_exit

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import atexit, gc, shutil, sys, tempfile, weakref
from pathlib import Path

out = Path(sys.argv[1])
# Registered before course_lib's handler, so it runs after it: the frozen objects, if any.
atexit.register(lambda: (out / "frozen").write_text(str(gc.get_freeze_count())))
import course_lib
import torch  # noqa: F401  (what a notebook imports: the objects whose walk costs a second)
atexit.register(lambda: (out / "handler").write_text("ran"))  # after: it runs first
left_open = open(out / "left open.txt", "w")
left_open.write("x" * 100_000)  # buffered, never closed: flushed as the module is cleared
folder = Path(tempfile.mkdtemp(dir=out))
class Holder:
    pass
holder = Holder()
weakref.finalize(holder, shutil.rmtree, folder)
class Cycle:
    def __init__(self):
        self.say, self.other = sys.stderr.write, None  # what it needs, held
    def __del__(self):
        self.say("a cycle collected\n")
a, b = Cycle(), Cycle()
a.other, b.other = b, a
del a, b
gc.disable()  # no collection before the exit's own
"""


def run_child(tmp_path: Path, setting: str | None) -> str:
    """Run CHILD with ``COURSE_LIB_QUICK_EXIT=setting`` (unset: None), writing into ``tmp_path``;
    what it wrote to stderr."""
    env = {k: v for k, v in os.environ.items() if k != "COURSE_LIB_QUICK_EXIT"}
    if setting is not None:
        env["COURSE_LIB_QUICK_EXIT"] = setting
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_import_course_lib_registers_the_freeze_once(monkeypatch):
    registered = []
    monkeypatch.setattr(atexit, "register", registered.append)
    assert quick_exit.freeze_at_exit() is True
    assert registered == []  # import course_lib registered it already
    monkeypatch.setattr(quick_exit, "_registered", False)  # as in a new process
    assert quick_exit.freeze_at_exit() is True
    assert registered == [gc.freeze]


@pytest.mark.parametrize("setting", [None, "1"])
def test_at_exit_the_objects_are_frozen_and_everything_else_still_happens(tmp_path, setting):
    stderr = run_child(tmp_path, setting)
    assert int((tmp_path / "frozen").read_text()) > 100_000  # torch's objects, out of the walk
    assert (tmp_path / "handler").read_text() == "ran"
    assert (tmp_path / "left open.txt").read_text() == "x" * 100_000
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []  # weakref.finalize removed it
    assert "a cycle collected" not in stderr  # a cycle alive at exit: left (as documented)


def test_quick_exit_0_keeps_pythons_own_exit(tmp_path):
    stderr = run_child(tmp_path, "0")
    assert int((tmp_path / "frozen").read_text()) == 0
    assert (tmp_path / "handler").read_text() == "ran"
    assert (tmp_path / "left open.txt").read_text() == "x" * 100_000
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []
    assert stderr.count("a cycle collected") == 2  # what the freeze gives up


def test_the_switch_is_read_when_called(monkeypatch):
    registered = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(quick_exit, "_registered", False)
    monkeypatch.setenv("COURSE_LIB_QUICK_EXIT", "0")
    assert quick_exit.freeze_at_exit() is False
    assert registered == []
