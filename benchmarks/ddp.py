"""Data parallelism on this machine: training throughput of the course GPT-2 with 1, 2 and 4 DDP ranks.

Run ``.venv/bin/python benchmarks/ddp.py`` (a minute or two on 2 CPU cores). For each number of ranks
(``--ranks``, default 1 2 4) it starts that many processes with
:func:`course_lib.parallel.launch.launch` (gloo on CPUs, NCCL where there is a GPU per rank), which
train the freshly initialised course GPT-2 (float32) with ``DistributedDataParallel`` for ``--steps``
steps of ``--global-batch`` rows of ``--seq-len`` tokens (the global batch is shared out between the
ranks), and prints one row per run:

* the torch threads each rank uses (``--threads``; default: the machine's cores shared out);
* the median step time and the training throughput in tokens per second of the whole group, timed
  from the end of the first step to the end of the last, so that start-up, the first step and DDP's
  rebuild of its buckets after it are left out; the speed-up over the smallest number of ranks;
* the gradient bytes all-reduced per step, and the communication: the time from each bucket's being
  ready to its all-reduce's end, summed over the buckets of a step (waiting for the slowest rank
  included), per step and as a share of the step time.

The launcher starts the ranks with ``OMP_WAIT_POLICY=PASSIVE`` unless it is set already
(``--spin`` sets it to ACTIVE: idle OpenMP threads spin): with another program busy on the cores, a rank of 2 spinning
threads waits for its descheduled twin at every parallel region, which made one step of one rank
more than 20 times slower on a shared 2-core machine, and would show as a false speed-up of 2 ranks.

Then a one-line verdict. On one CPU machine every rank shares the same cores, so more ranks add
communication without adding compute: the speed-up a GPU per rank would give cannot show here
(chapter 8's cost model predicts it). Nothing is hard-coded: every number is measured on this machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.parallel import ddp, launch  # noqa: E402

TARGET = "course_lib.parallel.ddp:train_ddp"


def main() -> int:
    """Train with each number of ranks and print the table and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4], help="numbers of ranks to run")
    parser.add_argument("--steps", type=int, default=20, help="training steps per run (at least 2)")
    parser.add_argument("--global-batch", type=int, default=8, help="rows per step, shared by the ranks")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per row")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads per rank (default: the cores shared out, at least 1)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per run")
    parser.add_argument("--spin", action="store_true",
                        help="OMP_WAIT_POLICY=ACTIVE (OpenMP's idle threads spin)")
    args = parser.parse_args()
    if args.spin:
        os.environ["OMP_WAIT_POLICY"] = "ACTIVE"  # the ranks inherit it; else the launcher's PASSIVE
    if args.steps < 2:
        parser.error("--steps must be at least 2: the first step is not timed.")
    for n in args.ranks:
        launch.check_world_size(n)
        ddp.check_batch(args.global_batch, n)
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {cores} CPU core(s), load average {load:.2f} before the runs; torch "
          f"{torch.__version__}; OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')}; "
          f"{args.steps} steps of {args.global_batch} x {args.seq_len} tokens")

    runs = [(n, args.threads or max(1, cores // n)) for n in args.ranks]
    if args.threads is None and (1, 1) not in runs and any(n == 1 for n, _ in runs):
        # One rank with the cores shared out uses several threads: one thread too, for reference.
        runs.insert([n for n, _ in runs].index(1) + 1, (1, 1))
    rows, speeds, shares = [], {}, {}
    for n, threads in runs:
        start = time.perf_counter()
        results = launch.launch(TARGET, n, {"steps": args.steps, "global_batch": args.global_batch,
                                            "seq_len": args.seq_len, "return_parameters": False},
                                threads=threads, timeout=args.timeout, echo=False)
        wall = time.perf_counter() - start
        ranks = [ddp.timings(r) for r in results]
        # the ranks move in step: the slowest one counts
        speeds[n, threads] = min(m.tokens_per_second for m in ranks)
        shares[n, threads] = statistics.mean(m.all_reduce_share for m in ranks)
        step_bytes = ranks[0].bytes_per_step
        rows.append([n, results[0].backend, threads, args.global_batch // n,
                     f"{statistics.median(m.step for m in ranks) * 1e3:,.0f}",
                     f"{speeds[n, threads]:,.0f}", f"{speeds[n, threads] / speeds[runs[0]]:.2f}x",
                     f"{step_bytes / 2**20:.2f}",
                     f"{statistics.mean(m.all_reduce for m in ranks) / (args.steps - 1) * 1e3:,.1f}",
                     f"{shares[n, threads]:.0%}", f"{wall:.1f}"])
    first = f"{runs[0][0]} rank(s) x {runs[0][1]} thread(s)"
    print(Table(["ranks", "backend", "threads/rank", "rows/rank", "step (ms)", "tokens/s",
                 f"vs {first}", "all-reduced/step (MiB)", "all-reduce/step (ms)",
                 "all-reduce share", "wall (s)"], rows,
                title=f"DDP training of the course GPT-2 (float32), timed from step 2 to step "
                      f"{args.steps}; wall: the whole run, start-up included"))
    others = [run for run in runs if run[0] == 2] or [runs[-1]]
    bases = [run for run in runs if run[0] == runs[0][0]]
    if others[0] not in bases:
        other = others[0]
        gains = " and ".join(f"{speeds[other] / speeds[b]:.2f}x as fast as {b[0]} rank(s) x {b[1]} "
                             f"thread(s)" for b in bases)
        print(f"verdict: {other[0]} ranks x {other[1]} thread(s) train {gains}, with "
              f"{shares[other]:.0%} of their time in all-reduces; all ranks share this machine's "
              f"{cores} core(s), so any gain comes from using the same cores differently, not from "
              "more hardware (with a GPU per rank, the compute would divide).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
