"""Sending a rank's result back to the launcher: plain pickle against the library's way.

Run ``.venv/bin/python benchmarks/results.py`` (a few seconds). A rank
of :func:`course_lib.parallel.launch.launch` writes what its function returned to a file
(:func:`course_lib.parallel.failures.send`), and the launcher reads it back. Chapter 9's runs
send each rank's whole parameters and first gradient: about 400 MB in one launch. For results
of several sizes (a frozen dataclass holding float32 tensors, as the chapters' ranks return)
it times, ``--repeats`` times each (default 5), taking turns:

* ``pickle``: ``pickle.dumps`` written to a file, read back with ``pickle.loads`` (what the
  library did before 2026-12-05);
* ``library``: ``failures.send`` (``torch.save``: each tensor's bytes written from its own
  memory) and the launcher's own reader.

It prints the median and the range of writing and of reading, and exits 1 unless the library
is faster, writing and reading together, on every result of 16 MB or more.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from course_lib.base.tables import Table  # noqa: E402
from course_lib.parallel import failures, launch  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Result:
    """What a rank of chapter 9 sends back, in miniature: numbers, and tensors."""

    history: tuple[float, ...]
    parameters: torch.Tensor
    gradient: torch.Tensor


def made(megabytes: float) -> Result:
    """A result whose two tensors hold ``megabytes`` MB together."""
    n = int(megabytes * 1e6 / 8)
    return Result((2.5, 2.25), torch.randn(n), torch.randn(n))


def timed(write, read, result: Result, folder: Path) -> tuple[float, float]:
    start = time.perf_counter()
    write(result, folder / "rank0.pkl")
    middle = time.perf_counter()
    back = read(folder, 0)
    end = time.perf_counter()
    assert torch.equal(back.parameters, result.parameters)  # the same numbers came back
    (folder / "rank0.pkl").unlink()
    return middle - start, end - middle


WAYS = {
    "pickle": (lambda result, path: path.write_bytes(pickle.dumps(result)),
               lambda folder, rank: pickle.loads((folder / f"rank{rank}.pkl").read_bytes())),
    "library": (failures.send, launch._result),
}


def span(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> int:
    """Time both ways on each size, taking turns; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 16, 200],
                        help="MB of tensors per result")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)  # a rank's share of 2 cores
    rows, goal = [], True
    with tempfile.TemporaryDirectory(prefix="course-results-") as folder:
        for megabytes in args.sizes:
            result = made(megabytes)
            times: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
            for _ in range(args.repeats):
                for way, (write, read) in WAYS.items():
                    times[way].append(timed(write, read, result, Path(folder)))
            total = {way: statistics.median(w + r for w, r in t) for way, t in times.items()}
            if megabytes >= 16:
                goal = goal and total["library"] < total["pickle"]
            for way, t in times.items():
                rows.append([f"{megabytes:g}", way, span([w for w, _ in t]),
                             span([r for _, r in t]), f"{total[way]:.3f}"])
    print(Table(["MB", "way", "write (s)", "read (s)", "both, median (s)"], rows,
                title=f"A result written by a rank and read by the launcher, "
                      f"{args.repeats} of each, taking turns"))
    print(f"goal: the library faster from 16 MB on: {'met' if goal else 'NOT met'}")
    return 0 if goal else 1


if __name__ == "__main__":
    raise SystemExit(main())
