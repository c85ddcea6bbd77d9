"""This machine's measured figures, chapter 10's way: compute, memory, roofline, disk, CPU, links.

Run ``python benchmarks/hardware.py`` (``--quick`` for smaller, faster measurements, ``--full`` to
print every measurement's own table too, ``--directory DIR`` for the disk to read). It prints one
table: peak matrix throughput per dtype (``course_lib.hardware.matmul``), STREAM triad bandwidth in the
caches and from main memory (``course_lib.hardware.stream``), the ridge point they make, disk
reads past the page cache (``course_lib.hardware.disk``), tokenisation with one and two worker
processes (``course_lib.hardware.input_pipeline``) and the alpha-beta fit of all-reduces between two local
processes (``course_lib.hardware.allreduce_bench``). Every figure is the fastest of several
interleaved runs; the machine is shared, so compare runs with care.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.hardware import allreduce_bench, disk, input_pipeline, matmul, roofline, stream  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Measure every part of the machine and print the summary table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs (seconds)")
    parser.add_argument("--full", action="store_true", help="also print each measurement's table")
    parser.add_argument("--directory", help="directory whose disk to read (default: the cache)")
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else 5
    print("\n".join(matmul.describe_machine()))
    start = time.perf_counter()
    rows: list[list[str]] = []

    dtypes = ["fp32", "bf16"] + (["int8"] if matmul.int8_supported() else [])
    sizes = (128, 256) if args.quick else (256, 512, 1024)
    products = matmul.matmul_benchmark(sizes, dtypes, repeats=repeats, progress=None)
    for dtype in dtypes:
        best = matmul.peak_result(products, dtype)
        unit = "GOP/s" if dtype == "int8" else "GFLOP/s"
        rows.append([f"matrix products, {dtype}", f"{best.gflops:,.1f} {unit}",
                     f"{best.size} x {best.size}, median run +{best.spread:.0%}"])

    sets = (2**16, 2**20, 2**26) if args.quick else None
    bandwidth = stream.measure_bandwidth(["triad"], sets, repeats=repeats, progress=None)
    for r in bandwidth:
        rows.append([f"triad, {r.working_set / 2**20:,.2f} MiB", f"{r.gb_per_s:,.1f} GB/s",
                     f"one thread, median {r.median_gb_per_s:,.1f} GB/s"])
    dram = stream.peak_bandwidth(bandwidth)
    roof = roofline.Roof("this CPU", matmul.peak_result(products).gflops * 1e9,
                         dram.gb_per_s * 1e9)
    rows.append(["ridge point (FP32 peak / main memory)", f"{roof.ridge:,.1f} FLOP/byte",
                 "H100 SXM BF16: " + f"{roofline.roof_of('H100 SXM').ridge:,.0f}"])

    file_mb = 16 if args.quick else 64
    for pattern, block in (("sequential", 1024), ("random", 4)):
        r = disk.read_speed(args.directory, file_mb, block, pattern, repeats=repeats)
        extra = f", {r.iops:,.0f} IOPS" if pattern == "random" else ""
        rows.append([f"disk, {pattern} {block} KiB reads", f"{r.mb_per_s:,.0f} MB/s",
                     f"{r.method} on {r.filesystem}{extra}"])

    from course_lib.text import data

    texts = data.load_corpus("course", "train")[: 500 if args.quick else 3000]
    tokenizer = data.course_tokenizer()
    for workers in (1, 2):
        r = input_pipeline.tokenize_throughput(texts, tokenizer, workers, repeats=repeats)
        rows.append([f"tokenisation, {workers} worker(s)", f"{r.tokens_per_second:,.0f} tokens/s",
                     f"{r.tokens:,} tokens of the course corpus"])

    # --quick too: up to 16 MiB and the function's 5 runs (a few ms each), so that another job
    # on the cores cannot make the largest message look faster than the smallest
    sweep = allreduce_bench.measure_allreduce(
        [2**12, 2**16, 2**24] if args.quick else None, nprocs=2)
    try:
        link = sweep.fit()
    except ValueError as err:  # a busy machine can make small messages the slowest
        link = None
        rows.append(["all-reduce, 2 processes", "no alpha-beta fit", str(err)])
    if link is not None:
        rows.append(["all-reduce, 2 processes: alpha", f"{link.latency * 1e6:,.1f} us",
                     f"{sweep.backend}, {len(sweep.sizes)} message sizes, fastest of "
                     f"{sweep.repeats}"])
        rows.append(["all-reduce, 2 processes: beta", f"{link.bandwidth / 1e9:,.2f} GB/s",
                     "per direction, ring model"])
    print()
    print(Table(["figure", "measured", "how"], rows,
                title=f"this machine, fastest of {repeats} runs "
                      f"({time.perf_counter() - start:.0f} s in all)"))
    if args.full:
        for table in (matmul.matmul_table(products), stream.bandwidth_table(bandwidth),
                      allreduce_bench.sweep_table(sweep, link)):
            print()
            print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
