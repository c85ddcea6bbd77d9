"""Grading learners' notebooks: how long ``python -m course_lib grade`` takes, and where.

Run ``.venv/bin/python benchmarks/grading.py`` (about two minutes on 2 CPU cores). For each
notebook (``--notebooks``, default chapters 4 and 11) it writes the learner copy an instructor
hands out (every exercise a stub) and grades it ``--repeats`` times (default 3) with
:func:`course_lib.exercises.grading.grade_notebook`, as ``grade`` does: the notebook run in a
fresh kernel, then every exercise re-checked in a fresh process of its own, all at once. It
prints the median and range of the whole grading and of the re-checks alone, per notebook.

The goal (issue 41): the re-checks of a notebook take at most one start of a Python that
imports torch (measured here, median of ``--repeats``) per exercise, all processes' starts
included; they run at once, so on 2 cores the floor is about half of one. Every number is
measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from allocator import spread  # noqa: E402  (benchmarks/allocator.py: median (range))
from course_lib.base.tables import Table  # noqa: E402
from course_lib.exercises import grading  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    """Grade each notebook's learner copy several times; print the table and the goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="+",
                        default=["04_quantizing_pi", "11_beyond_data_parallelism"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    recheck_all = grading._recheck_all  # timed apart: the re-checks alone
    phases: list[float] = []

    def timed_rechecks(*a, **k):  # noqa: ANN002, ANN003, ANN202 - the wrapped function's own
        start = time.perf_counter()
        try:
            return recheck_all(*a, **k)
        finally:
            phases.append(time.perf_counter() - start)

    grading._recheck_all = timed_rechecks
    starts = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        starts.append(time.perf_counter() - start)
    torch_start = statistics.median(starts)
    rows, goal = [], True
    with tempfile.TemporaryDirectory(prefix="course-grading-bench-") as folder:
        for name in args.notebooks:
            copy = grading.learner_copy(ROOT / "notebooks" / f"{name}.ipynb",
                                        Path(folder) / f"{name}.ipynb")
            totals, phases[:] = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                graded = grading.grade_notebook(copy)
                totals.append(time.perf_counter() - start)
                print(f"{name}: {totals[-1]:.1f} s, re-checks {phases[-1]:.1f} s", flush=True)
            if any(row.result != "not yet" for row in graded):
                raise SystemExit(f"{name}: a stub was not graded 'not yet': {graded}")
            per = statistics.median(phases) / len(graded)
            goal = goal and per <= torch_start
            rows.append([name, len(graded), spread(totals, ".1f"), spread(phases, ".1f"),
                         f"{per:.2f}"])
    print(Table(["notebook", "exercises", "grading (s)", "re-checks (s)",
                 "per exercise (s)"], rows,
                title=f"Grading a learner copy (every exercise a stub), {args.repeats} runs "
                      f"each, on {os.cpu_count()} cores"))
    print(f"goal: re-checks at most one Python start that imports torch ({torch_start:.2f} s "
          f"here) per exercise: {'met' if goal else 'NOT met'}")
    return 0 if goal else 1


if __name__ == "__main__":
    raise SystemExit(main())
