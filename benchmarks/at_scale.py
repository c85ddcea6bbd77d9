"""One rank of a real-size run measured on a fake process group: time, peak RSS, and chapter 2's estimate.

Run ``.venv/bin/python benchmarks/at_scale.py`` (not run in CI). Each measurement runs in a fresh
process (:func:`course_lib.parallel.at_scale.measure_rank`), whose peak resident memory is read
with ``getrusage(RUSAGE_CHILDREN)`` after it ends. The first table: Llama 2 7B on 64 ranks (FSDP2
full sharding, BF16 mixed precision, micro-batch 1 of 4,096 tokens) and, with ``--big``, Llama 3
405B's shape on 1,024 ranks (TP 8, a pipeline stage of 16 blocks, checkpointing). The second,
with ``--table``: predicted (chapter 2's ``training_memory``) against measured, per category, for
a grid of configurations (``--quick`` keeps the sequences and stages short).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.parallel import at_scale  # noqa: E402
from course_lib.parallel.at_scale import Layout  # noqa: E402

HEADLINE = [("llama2-7b", Layout(64, "zero3", seq_len=4096), "Llama 2 7B, 64 ranks")]
BIG = [("llama3-405b", Layout(1024, "zero3", tp=8, layers=16, seq_len=8192, checkpointing=True),
        "Llama 3 405B, 1,024 ranks, TP 8, 16-block stage")]


def grid(quick: bool) -> list[tuple[str, Layout]]:
    """At least 30 configurations: models x strategies x ranks x TP x checkpointing."""
    seq, layers = (512, 2) if quick else (2048, 4)
    out = []
    for model in ("gpt2-xl", "llama2-7b", "llama3-8b", "llama2-70b", "gpt3-175b"):
        s = min(seq, 1024) if model == "gpt2-xl" else seq
        for strategy, world in (("ddp", 8), ("zero2", 8), ("zero3", 8), ("zero3", 64)):
            out.append((model, Layout(world, strategy, layers=layers, seq_len=s)))
        out.append((model, Layout(64, "zero3", tp=8 if model != "gpt2-xl" else 5, layers=layers,
                                  seq_len=s)))
        out.append((model, Layout(64, "zero3", layers=layers, seq_len=s, checkpointing=True)))
        out.append((model, Layout(16, "zero3", layers=layers, seq_len=s, mixed_precision=False)))
    return out


def headline(runs: list) -> None:
    """Time and peak RSS of each headline run, each in its own process."""
    rows = []
    for model, layout, label in runs:
        start = time.perf_counter()
        r = at_scale.measure_rank(model, layout, timeout=600)
        wall = time.perf_counter() - start
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        rows.append([label, f"{r.n_params / 1e9:.2f}B", f"{r.peak_total / 1e9:.2f}",
                   f"{r.end['parameters'] / 1e9:.3f}", f"{r.end['optimizer states'] / 1e9:.3f}",
                   f"{r.after_forward['activations'] / 1e9:.2f}", f"{r.flops / 1e12:.1f}",
                   f"{wall:.1f}", f"{rss:.0f}"])
        for row in at_scale.comparison_rows(at_scale.compare([r])):
            print("   ", " | ".join(row[2:]))
    print(Table(["run", "N (stage)", "peak GB", "params GB", "Adam GB", "acts GB", "TFLOP",
                 "seconds", "child RSS MB"], rows))


def main() -> int:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", action="store_true", help="also Llama 3 405B on 1,024 ranks")
    parser.add_argument("--table", action="store_true", help="predicted vs measured, >= 30 rows")
    parser.add_argument("--quick", action="store_true", help="short sequences and stages")
    args = parser.parse_args()
    headline(HEADLINE + (BIG if args.big else []))
    if args.table:
        configs = grid(args.quick)
        start = time.perf_counter()
        results = at_scale.measure_many([(m, lay, 0) for m, lay in configs], timeout=3600)
        print(Table(["model", "layout", "category", "estimate GB", "measured GB", "ratio",
                     "within 5%"], at_scale.comparison_rows(at_scale.compare(results))))
        print(f"{len(configs)} configurations in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
