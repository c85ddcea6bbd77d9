"""Pipeline parallelism on this machine: the bubble and the activations held, per schedule.

Run ``.venv/bin/python benchmarks/pipeline.py`` (a minute or two on 2 CPU cores). For each
number of stages (``--stages``, default 2 4) it starts that many ranks with
:func:`course_lib.parallel.launch.launch` (gloo on CPUs, NCCL where there is a GPU per
rank) and, in one launch, runs chapter 11's pipelined training step of the course GPT-2
(:func:`course_lib.parallel.pipeline.pipeline_step`, float32) with GPipe and 1F1B for each
number of micro-batches (``--micro-batches``, default 1 2 4 8; 1F1B needs at least as many
micro-batches as stages), and prints one row per run:

* the step's median time (the first step, which also sends the shapes, is not timed);
* the bubble: measured (one minus each rank's busy share of the step, averaged), replayed
  (the measured durations in the schedule's order with free links) and the formula
  (p - 1) / (m + p - 1) of equal stages;
* the most micro-batches and megabytes of activations a stage held at once (stage 0).

The measured bubble is above the formula because the stages are not equal: the last
carries the output layer and the loss. Nothing is hard-coded: every number is measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.parallel import launch, pipeline  # noqa: E402

TARGET = "course_lib.parallel.mesh:run_many"


def main() -> int:
    """Run every schedule and micro-batch count on each number of stages; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--micro-batches", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per run")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    rows = []
    for stages in args.stages:
        launch.check_world_size(stages)
        runs = [{"run": "pipeline", "schedule": s, "micro_batches": m, "dtype": "float32",
                 "global_batch": args.global_batch, "seq_len": args.seq_len,
                 "steps": args.steps}
                for s in ("gpipe", "1f1b") for m in args.micro_batches
                if s == "gpipe" or m >= stages]
        ranks = launch.launch(TARGET, stages, {"runs": runs}, timeout=args.timeout,
                              echo=False)
        for i, run in enumerate(runs):
            per_rank = [r[i] for r in ranks]
            b = pipeline.bubble(per_rank)
            spans = [max(e.end for e in step) - min(e.start for e in step)
                     for step in per_rank[0].steps]
            rows.append([stages, run["schedule"], run["micro_batches"],
                         f"{statistics.median(spans) * 1e3:.0f}", f"{b.measured:.2f}",
                         f"{b.replayed:.2f}", f"{b.theory:.2f}", per_rank[0].peak_held,
                         f"{per_rank[0].peak_bytes / 1e6:.2f}"])
    print(Table(["stages", "schedule", "micro-batches", "rank 0 step (ms)",
                 "bubble measured", "replayed", "(p-1)/(m+p-1)", "held (micro-batches)",
                 "held (MB)"], rows,
                title=f"Pipelined steps of {args.global_batch} x {args.seq_len} tokens"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
