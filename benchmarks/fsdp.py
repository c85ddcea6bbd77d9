"""Sharding on this machine: bytes per rank and step time of the course GPT-2 under each strategy.

Run ``.venv/bin/python benchmarks/fsdp.py`` (about a minute on 2 CPU cores). For each number of ranks
(``--ranks``, default 2 4) it starts that many processes with
:func:`course_lib.parallel.launch.launch` (gloo on CPUs, NCCL where there is a GPU per rank), which
train the freshly initialised course GPT-2 (float32) for ``--steps`` steps of ``--global-batch`` rows
of ``--seq-len`` tokens under every strategy of :mod:`course_lib.parallel.fsdp` (DDP, ZeRO-1 with
``ZeroRedundancyOptimizer``, FSDP with and without resharding after forward, FSDP with CPU offload,
and hybrid sharding with factor 2 on 4 ranks), and prints one row per run:

* the bytes of model states the fullest rank holds between steps, the ZeRO formula for the strategy,
  and the peak of parameter bytes during forward (what gathering adds);
* the bytes of collectives per step, counted, in units of the FP32 parameters' bytes (Psi);
* the median step time, timed from the end of the first step to the end of the last.

On one CPU machine the ranks share the cores and offload has no device to free, so the times say how
much work each strategy adds here, not how it would scale on GPUs (chapter 9 reasons about that from
the formulas and the published results). Nothing is hard-coded: every number is measured here.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.chapters import ch09  # noqa: E402
from course_lib.parallel import ddp, launch  # noqa: E402

TARGET = "course_lib.parallel.fsdp:train_many"


def runs_for(ranks: int) -> list[dict]:
    """The strategies measured on ``ranks`` ranks."""
    runs = [{"strategy": s} for s in ("ddp", "zero1", "zero2", "zero3")]
    runs.append({"strategy": "zero3", "offload": True})
    if ranks % 2 == 0 and ranks > 2:
        runs.append({"strategy": "hsdp", "shard_factor": 2})
    return runs


def main() -> int:
    """Train under each strategy and number of ranks; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4], help="numbers of ranks")
    parser.add_argument("--steps", type=int, default=6, help="training steps per run (at least 2)")
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64)
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2: the first step is not timed")
    rows = []
    for n in args.ranks:
        kwargs = [{**run, "steps": args.steps, "global_batch": args.global_batch,
                   "seq_len": args.seq_len, "return_parameters": False} for run in runs_for(n)]
        start = time.perf_counter()
        results = ch09.by_run(launch.launch(TARGET, n, {"runs": kwargs}, timeout=600,
                                            echo=False))
        print(f"{n} ranks: {len(results)} runs in {time.perf_counter() - start:.0f} s", flush=True)
        memory = ch09.memory_table(results)
        volume = ch09.volume_table(results)
        for run, held, moved in zip(results, memory.rows, volume.rows):
            fullest = max(sum(r.state_bytes.values()) for r in run)
            rows.append([ch09.label(run), f"{fullest / 1e6:.2f}", held[5],
                         f"{max(r.peak_parameter_bytes for r in run) / 1e6:.2f}", moved[5],
                         moved[6], f"{ddp.median_step(run[0].step_times) * 1e3:.0f}"])
    print(Table(["run", "held (MB)", "ZeRO formula (MB)", "peak parameters (MB)",
                 "moved per step (Psi)", "formula (Psi)", "median step (ms)"], rows,
                title="The course GPT-2 under each sharding strategy on this machine"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
