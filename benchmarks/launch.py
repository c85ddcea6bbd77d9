"""Starting ranks on this machine: a cold launch against one from the warm server.

Run ``.venv/bin/python benchmarks/launch.py`` (about a minute on 2 CPU cores). For 2 and 4
ranks (``--ranks``) it times :func:`course_lib.parallel.launch.launch` of two targets, each
``--repeats`` times (default 5), started cold (a new Python per rank, which imports torch,
``COURSE_LIB_WARM_RANKS=0``) and warm (forked from :mod:`course_lib.parallel.warm_ranks`'s
server, whose own start is the first launch's and is printed apart):

* ``hello``: join the group, all-reduce one number, return (the launch's own cost);
* ``ddp``: chapter 8's data-parallel training, 2 steps of the course GPT-2 (a launch as the
  chapters run it: the rank imports the model's modules and builds it).

It prints the median and the range per row and the ratio cold / warm. The goal (issue 41):
a warm launch of ``hello`` at most a quarter of a cold one. Every number is measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.parallel import launch, warm_ranks  # noqa: E402

TARGETS = {"hello": ("course_lib.parallel.launch:hello", {}),
           "ddp": ("course_lib.parallel.ddp:train_many",
                   {"runs": [{"steps": 2, "global_batch": 4, "seq_len": 32}]})}


def timed(target: str, kwargs: dict, nprocs: int, warm: bool, timeout: float) -> float:
    os.environ["COURSE_LIB_WARM_RANKS"] = "1" if warm else "0"
    start = time.perf_counter()
    launch.launch(target, nprocs, kwargs, timeout=timeout, echo=False)
    return time.perf_counter() - start


def main() -> int:
    """Time every target cold and warm on each number of ranks; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    if not warm_ranks.enabled():
        print("warm ranks are off here (not Linux, or COURSE_LIB_WARM_RANKS=0): nothing "
              "to compare.")
        return 1
    rows, goal = [], True
    first = timed(*TARGETS["hello"], 2, True, args.timeout)  # starts the server
    for nprocs in args.ranks:
        launch.check_world_size(nprocs)
        for name in args.targets:
            target, kwargs = TARGETS[name]
            cold = [timed(target, kwargs, nprocs, False, args.timeout)
                    for _ in range(args.repeats)]
            warm = [timed(target, kwargs, nprocs, True, args.timeout)
                    for _ in range(args.repeats)]
            ratio = statistics.median(cold) / statistics.median(warm)
            if name == "hello":
                goal = goal and ratio >= 4
            rows.append([nprocs, name, f"{statistics.median(cold):.2f}",
                         f"{min(cold):.2f}-{max(cold):.2f}", f"{statistics.median(warm):.2f}",
                         f"{min(warm):.2f}-{max(warm):.2f}", f"{ratio:.1f}"])
    print(Table(["ranks", "target", "cold (s)", "cold range", "warm (s)", "warm range",
                 "cold / warm"], rows,
                title=f"Launches, {args.repeats} of each (the server's first launch: "
                      f"{first:.2f} s)"))
    print(f"goal: a warm launch of hello at most a quarter of a cold one: "
          f"{'met' if goal else 'NOT met'}")
    return 0 if goal else 1


if __name__ == "__main__":
    raise SystemExit(main())
