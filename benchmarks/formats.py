"""Throughput of course_lib.formats' exact codecs against torch's own casts, on the CPU.

Run ``python benchmarks/formats.py``. It encodes 4 million seeded FP32 values to FP16, BF16,
E4M3 and E5M2 and decodes them back to float32, with the codec and with ``tensor.to(dtype)``,
checks that both give identical bits, and prints the best of several timings per operation.
E4M3 is encoded with ``saturate=True`` because torch's float8_e4m3fn cast saturates.
Two inputs: N(0, 1) values (typical activations) and "wide" values spread log-uniformly over
2**-30..2**20 (many subnormals and overflows, which the codec handles on a slower exact path).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib import formats as F  # noqa: E402

N = 4_000_000
REPEATS = 7
SEED = 0
CASES = [
    (F.FP16, torch.float16, False),
    (F.BF16, torch.bfloat16, False),
    (F.E4M3, torch.float8_e4m3fn, True),
    (F.E5M2, torch.float8_e5m2, False),
]


def best_seconds(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    """Best wall time of ``repeats`` calls after one warm-up call (least disturbed by other load)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The two seeded FP32 inputs."""
    normal = rng.standard_normal(N).astype(np.float32)
    wide = np.ldexp(rng.uniform(1, 2, N), rng.integers(-30, 21, N)) * rng.choice([-1.0, 1.0], N)
    return {"normal": normal, "wide": wide.astype(np.float32)}


def torch_bits(y: torch.Tensor) -> np.ndarray:
    """A torch low-precision tensor's bit patterns as an unsigned numpy array."""
    if y.element_size() == 1:
        return y.view(torch.uint8).numpy()
    return y.view(torch.int16).numpy().view(np.uint16)


def torch_seconds(fn: Callable[[], object], threads: int) -> float:
    """Best time of a torch call with ``threads`` intra-op threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return best_seconds(fn)
    finally:
        torch.set_num_threads(before)


def main() -> None:
    """Time every case and print the table."""
    rng = np.random.default_rng(SEED)
    data = inputs(rng)
    threads = torch.get_num_threads()
    rows = []
    for label, x in data.items():
        t = torch.from_numpy(x)
        for fmt, dtype, saturate in CASES:
            bits = F.encode(x, fmt, saturate=saturate)
            y = t.to(dtype)
            assert np.array_equal(bits, torch_bits(y)), f"{fmt.name}: codec and torch disagree"
            assert np.array_equal(F.decode(bits, fmt, dtype="float32"), y.to(torch.float32).numpy())
            ops = [
                ("encode", lambda: F.encode(x, fmt, saturate=saturate), lambda: t.to(dtype)),
                ("decode f32", lambda: F.decode(bits, fmt, dtype="float32"), lambda: y.to(torch.float32)),
                ("decode f64", lambda: F.decode(bits, fmt), lambda: y.to(torch.float64)),
            ]
            for op, ours, theirs in ops:
                rows.append((label, fmt.name, op, best_seconds(ours),
                             torch_seconds(theirs, threads), torch_seconds(theirs, 1)))

    print(f"course_lib.formats vs torch casts: {N:,} FP32 values, seed {SEED}, best of {REPEATS} runs")
    print(f"numpy {np.__version__}, torch {torch.__version__}, {os.cpu_count()} CPUs; the codec runs "
          f"on one thread, torch on {threads} (tN) and on 1 (t1)")
    header = (f"{'input':<7} {'format':<6} {'op':<10} {'codec ms':>9} {'tN ms':>7} {'t1 ms':>7} "
              f"{'codec Mval/s':>13} {'tN Mval/s':>10} {'codec/tN':>9} {'codec/t1':>9}")
    print(header)
    print("-" * len(header))
    for label, name, op, ours, many, single in rows:
        print(f"{label:<7} {name:<6} {op:<10} {ours * 1e3:9.2f} {many * 1e3:7.2f} {single * 1e3:7.2f} "
              f"{N / ours / 1e6:13.0f} {N / many / 1e6:10.0f} {ours / many:8.1f}x {ours / single:8.1f}x")
    print("codec/tN, codec/t1 = codec time / torch time (lower is better; 1.0x = as fast as torch)")


if __name__ == "__main__":
    main()
