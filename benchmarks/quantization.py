"""Post-training quantization of the course model: time to quantize, bytes against FP32, perplexity.

Run ``.venv/bin/python benchmarks/quantization.py`` (about 30 s on 2 CPU cores once the course
model is cached; it is built first if it is missing). For every method of chapter 5's table it

* times :func:`course_lib.compression.quant_layers.quantize_model` on the whole model (best of ``--repeat``);
* measures the bytes of the quantized model's tensors and its safetensors file against FP32;
* measures perplexity on the fixed test split (window 128, stride 64);

then prints the goals: INT4 with groups of 128 at most 16% of the FP32 bytes, NF4 with double
quantization about 4.13 bits per weight, INT8 per channel within 1% of the FP32 perplexity, and
whole-model quantization under 5 s. Exits with status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.compression import ptq  # noqa: E402
from course_lib.compression.quant_layers import quantize_model  # noqa: E402
from course_lib.text import course_model, data, models


def best_time(model: torch.nn.Module, method: str, repeat: int) -> float:
    """The fastest of ``repeat`` whole-model quantizations, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        quantize_model(model, method)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed quantizations per method (best is kept)")
    args = parser.parse_args()
    tokenizer = data.course_tokenizer()
    model = course_model.course_model(progress=False)
    results = ptq.ptq_study(model, ptq.PTQ_METHODS, tokenizer, progress=False)
    base = results[0]
    rows = []
    for method, r in zip(ptq.PTQ_METHODS, results):
        seconds = best_time(model, method, args.repeat)
        rows.append([r.method, f"{seconds * 1000:.0f}", f"{r.bits:.3f}", f"{r.model_bytes:,}",
                     f"{r.model_bytes / base.model_bytes:.1%}", f"{r.file_bytes:,}", f"{r.perplexity:.4f}",
                     f"{r.perplexity / base.perplexity - 1:+.2%}"])
    print(Table(["method", "quantize (ms)", "bits / weight", "model bytes", "of FP32", "file bytes", "perplexity",
                 "vs FP32"], rows, title=f"The course model ({models.count_parameters(model):,} parameters), "
                                        f"{torch.get_num_threads()} CPU thread(s)"))
    by = {r.method: r for r in results}
    int4, nf4dq, int8 = by["INT4 zero-point g128"], by["NF4 + DQ"], by["INT8 absmax per channel"]
    slowest = max(best_time(model, m, 1) for m in ptq.PTQ_METHODS)
    goals = [
        ("INT4 g128 bytes <= 16% of FP32", f"{int4.model_bytes / base.model_bytes:.1%}",
         int4.model_bytes <= 0.16 * base.model_bytes),
        ("NF4 + DQ about 4.13 bits per weight", f"{nf4dq.bits:.4f}", abs(nf4dq.bits - 4.127) < 0.01),
        ("INT8 per channel within 1% of FP32 perplexity", f"{int8.perplexity / base.perplexity - 1:+.3%}",
         abs(int8.perplexity / base.perplexity - 1) < 0.01),
        ("whole-model quantization < 5 s", f"{slowest:.2f} s", slowest < 5),
    ]
    print()
    print(Table(["goal", "measured", "met"], [[g, v, "yes" if ok else "NO"] for g, v, ok in goals]))
    return 0 if all(ok for _, _, ok in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
