"""Throughput of course_lib.numbers.formats' exact codecs against torch's own casts, on the CPU.

Run ``python benchmarks/formats.py``. It encodes 4 million seeded FP32 values to FP16, BF16,
E4M3 and E5M2 and decodes them back, with the codec and with ``tensor.to(dtype)``, checks that
both give identical bits, then times each operation: the best of several runs, codec and torch
runs on one thread interleaved so that both meet the same load on the machine. torch's time is
the faster of its runs on one thread (t1) and on all threads (tN, timed apart); the codec runs on
one thread.
E4M3 is encoded with ``saturate=True`` because torch's float8_e4m3fn cast saturates.
Two inputs: N(0, 1) values (typical activations) and "wide" values spread log-uniformly over
2**-30..2**20 (many subnormals and overflows, which the codec finishes with extra passes).

It also counts the codec's numpy passes per value (one numpy call over an array of k values is
k/N of a pass) and times one plain numpy pass, which is what the codec's time is made of. The last
line says whether every encoder is within 10x of torch's cast (the goal), and if not, why.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.numbers import formats as F  # noqa: E402

N = 4_000_000
REPEATS = 9
SEED = 0
GOAL = 10.0  # the codec's encoders should be within this factor of torch's cast time
CASES = [
    (F.FP16, torch.float16, False),
    (F.BF16, torch.bfloat16, False),
    (F.E4M3, torch.float8_e4m3fn, True),
    (F.E5M2, torch.float8_e5m2, False),
]
PASS_CALLS = {"copyto", "max", "nonzero", "count_nonzero", "take"}  # numpy functions that are passes


class PassCounter:
    """Stands in for numpy inside course_lib.numbers.formats and counts the values its calls go over."""

    def __init__(self) -> None:
        self.values = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(np, name)
        if not (isinstance(attr, np.ufunc) or name in PASS_CALLS):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            arrays = [a for a in (*args, *kwargs.values()) if isinstance(a, np.ndarray)]
            self.values += max((a.size for a in arrays), default=0)
            return attr(*args, **kwargs)

        return counted


def passes(fn: Callable[[], object]) -> float:
    """How many numpy passes over N values one call of ``fn`` makes inside course_lib.numbers.formats."""
    counter = PassCounter()
    F.np = counter  # type: ignore[assignment]
    try:
        fn()
    finally:
        F.np = np
    return counter.values / N


def interleaved_best(runs: dict[str, tuple[Callable[[], object], int]]) -> dict[str, float]:
    """Best wall time of each (function, torch threads) over REPEATS rounds that call each once in turn."""
    best = dict.fromkeys(runs, float("inf"))
    before = torch.get_num_threads()
    try:
        for round_ in range(REPEATS + 1):  # round 0 warms up
            for name, (fn, threads) in runs.items():
                torch.set_num_threads(threads)
                start = time.perf_counter()
                fn()
                elapsed = time.perf_counter() - start
                if round_:
                    best[name] = min(best[name], elapsed)
    finally:
        torch.set_num_threads(before)
    return best


def one_pass_seconds() -> float:
    """Best time of one plain numpy pass over N uint32 values, in the codec's chunks (``a += 1``)."""
    a = np.zeros(N, np.uint32)
    one = np.uint32(1)

    def run() -> None:
        for start in range(0, N, F._CHUNK):
            chunk = a[start : start + F._CHUNK]
            np.add(chunk, one, out=chunk)

    return interleaved_best({"pass": (run, 1)})["pass"]


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


def main() -> None:
    """Check every case against torch, time it, and print the tables and the verdict."""
    rng = np.random.default_rng(SEED)
    data = inputs(rng)
    threads = torch.get_num_threads()
    rows = []  # (input, format, op, codec s, tN s, t1 s, passes)
    for label, x in data.items():
        t = torch.from_numpy(x)
        for fmt, dtype, saturate in CASES:
            bits = F.encode(x, fmt, saturate=saturate)
            y = t.to(dtype)
            assert np.array_equal(bits, torch_bits(y)), f"{fmt.name}: codec and torch encode differently"
            assert np.array_equal(F.decode(bits, fmt, dtype="float32"), y.to(torch.float32).numpy())
            assert np.array_equal(F.decode(bits, fmt), y.to(torch.float64).numpy())
            ops = [
                ("encode", lambda: F.encode(x, fmt, saturate=saturate), lambda: t.to(dtype)),
                ("decode f32", lambda: F.decode(bits, fmt, dtype="float32"), lambda: y.to(torch.float32)),
                ("decode f64", lambda: F.decode(bits, fmt), lambda: y.to(torch.float64)),
            ]
            for op, ours, theirs in ops:
                best = interleaved_best({"codec": (ours, 1), "t1": (theirs, 1)})
                # torch's idle worker threads spin for a while after a multi-threaded cast and would slow
                # the codec's next run on a small machine: its tN runs are timed apart, afterwards
                best |= interleaved_best({"tN": (theirs, threads)})
                rows.append((label, fmt.name, op, best["codec"], best["tN"], best["t1"], passes(ours)))
    pass_s = one_pass_seconds()

    print(f"course_lib.numbers.formats vs torch casts: {N:,} FP32 values, seed {SEED}, best of {REPEATS} "
          "interleaved runs")
    print(f"numpy {np.__version__}, torch {torch.__version__}, {os.cpu_count()} CPUs; the codec runs "
          f"on one thread, torch on {threads} (tN) and on 1 (t1); torch = the faster of the two")
    header = (f"{'input':<7} {'format':<6} {'op':<10} {'codec ms':>9} {'tN ms':>7} {'t1 ms':>7} "
              f"{'codec Mval/s':>13} {'codec/torch':>12} {'numpy passes':>13}")
    print(header)
    print("-" * len(header))
    ratio = {}
    for label, name, op, ours, many, single, count in rows:
        ratio[label, name, op] = ours / min(many, single)
        print(f"{label:<7} {name:<6} {op:<10} {ours * 1e3:9.2f} {many * 1e3:7.2f} {single * 1e3:7.2f} "
              f"{N / ours / 1e6:13.0f} {ratio[label, name, op]:11.1f}x {count:13.1f}")

    print()
    print("Per case, codec time / torch time (lower is better; 1.0x = as fast as torch):")
    print(f"{'input':<7} {'format':<6} {'encode':>7} {'decode f32':>11} {'decode f64':>11}")
    for label in data:
        for fmt, _, _ in CASES:
            cells = [f"{ratio[label, fmt.name, op]:.1f}x" for op in ("encode", "decode f32", "decode f64")]
            print(f"{label:<7} {fmt.name:<6} {cells[0]:>7} {cells[1]:>11} {cells[2]:>11}")

    encodes = [(label, name, ours, count, r) for (label, name, op, ours, *_, count), r
               in zip(rows, ratio.values()) if op == "encode"]
    worst = max(encodes, key=lambda e: e[4])
    fp16 = [e for e in encodes if e[1] == "fp16"]
    print()
    print(f"One plain numpy pass over the {N:,} values, in the codec's chunks of {F._CHUNK:,}, takes "
          f"{pass_s * 1e3:.2f} ms here. The codec writes each step of the rounding as its own numpy "
          f"operation, and each is such a pass: FP16 encoding makes "
          + " and ".join(f"{e[3]:.1f} ({e[0]} input, {e[2] / pass_s:.0f} passes' worth of time)"
                         for e in fp16)
          + ". torch's cast is one compiled loop that reads each value once and writes its pattern "
          "once, all steps in registers (for FP16 with the CPU's own conversion instruction).")
    over = [e for e in encodes if e[4] > GOAL]
    if over:
        print(f"Why some encoders are over {GOAL:.0f}x: "
              + ", ".join(f"{e[0]} {e[1]} makes {e[3]:.1f} passes, {e[4]:.1f}x torch" for e in over)
              + f". At {pass_s * 1e3:.2f} ms a pass, {GOAL:.0f}x torch's time leaves room for only "
              + ", ".join(f"{GOAL * e[2] / e[4] / pass_s:.1f} passes for {e[0]} {e[1]}" for e in over)
              + ": that is the price of exact rounding written as readable array steps rather than "
              "one compiled loop.")
        print(f"NOT every encoder is within {GOAL:.0f}x of torch's cast: {len(over)} of {len(encodes)} "
              f"are over (worst: {worst[0]} {worst[1]}, {worst[4]:.1f}x).")
    else:
        print(f"Every encoder is within {GOAL:.0f}x of torch's cast (worst: {worst[0]} {worst[1]}, "
              f"{worst[4]:.1f}x).")


if __name__ == "__main__":
    main()
