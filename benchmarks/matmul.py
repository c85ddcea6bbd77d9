"""Matrix-multiply throughput (GFLOP/s) per dtype and size on this CPU, and on the GPU when there is one.

Run ``python benchmarks/matmul.py`` (``--sizes 512 1024``, ``--dtypes fp32 bf16 fp16``,
``--repeats 5``, ``--device cpu`` to choose). Each product of two seeded n x n matrices counts
2 n**3 floating-point operations; each cell is the fastest of several interleaved runs (see
``course_lib.hardware.matmul.matmul_benchmark``), and the last column is the throughput divided by FP32's
at the same size: above 1x the low precision is faster here, below 1x it is slower. A 16-bit dtype
is fast only where the hardware has units for it (the CPU features are printed first).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.hardware import matmul  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse the options, time every case on every device and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", help="matrix sizes (default: per device)")
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16", "fp16"], help="dtypes to time")
    parser.add_argument("--repeats", type=int, default=5, help="timings per case; the best is kept")
    parser.add_argument("--device", choices=matmul.available_devices(), help="one device only")
    args = parser.parse_args(argv)
    print("\n".join(matmul.describe_machine()))
    devices = [args.device] if args.device else matmul.available_devices()
    for device in devices:
        try:
            results = matmul.matmul_benchmark(args.sizes, args.dtypes, device, repeats=args.repeats, progress=None)
        except ValueError as err:
            parser.error(str(err))
        print()
        print(matmul.matmul_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
