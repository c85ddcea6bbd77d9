"""GPTQ's speed: one large layer and the whole course model, against the goals of chapter 7.

Run ``.venv/bin/python benchmarks/gptq.py`` (about a minute on 2 CPU cores once the course model is
cached; it is built first if it is missing). It times, best of ``--repeat`` runs:

* one 4096 x 4096 layer with 4096 calibration rows, 4-bit in groups of 128 with act-order (static
  groups, the setting chapter 5's storage can hold), Hessian included: goal at most 5 s;
* the Hessian alone and GPTQ given the Hessian, to show where that time goes;
* the whole course model quantized by GPTQ at 4-bit g128 on 64 calibration sequences of 128 tokens
  (calibration forward passes included): goal at most 20 s; round-to-nearest for comparison;

and checks that GPTQ's layer-wise error on the large layer is below round-to-nearest's. The
calibration inputs of the large layer are seeded random rows with input features of different
scales (so that act-order has something to sort), not text: the time does not depend on the values.
Exits with status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.compression import gptq  # noqa: E402
from course_lib.compression.quant_layers import quantize_model  # noqa: E402
from course_lib.text import course_model, data, training

LAYER_GOAL_S = 5.0
MODEL_GOAL_S = 20.0


def best_of(call: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    """Time every case, print the table, and return 1 if a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="the large layer is size x size")
    parser.add_argument("--rows", type=int, default=4096, help="calibration rows of the large layer")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per case (the best is kept)")
    args = parser.parse_args()

    g = torch.Generator().manual_seed(0)
    w = torch.randn(args.size, args.size, generator=g) * 0.02
    x = torch.randn(args.rows, args.size, generator=g) * torch.linspace(0.2, 3.0, args.size)
    config = gptq.GPTQConfig(4, 128, act_order=True, static_groups=True)
    gptq.gptq_quantize_layer(w[:256, :256], x[:512, :256], config)  # warm-up: first calls of linalg

    hessian = {}

    def build_hessian() -> None:
        acc = gptq.HessianAccumulator(args.size)
        acc.add(x)
        hessian["H"] = acc.hessian()

    layer_s = best_of(lambda: gptq.gptq_quantize_layer(w, x, config), args.repeat)
    hessian_s = best_of(build_hessian, args.repeat)
    given_h_s = best_of(lambda: gptq.gptq_quantize_layer(w, config=config, hessian=hessian["H"]), args.repeat)
    result = gptq.gptq_quantize_layer(w, config=config, hessian=hessian["H"])
    sample = x[: min(args.rows, 1024)]
    err_gptq = gptq.layer_error(w, result.weight, sample)
    err_rtn = gptq.layer_error(w, gptq.rtn_quantize_layer(w, config), sample)

    tokenizer = data.course_tokenizer()
    model = course_model.course_model(progress=False)
    recipe = training.Recipe(steps=8, batch_size=8, seq_len=128, seed=11)
    calibration = torch.cat([b["input_ids"] for b in training.training_batches("gpt2", tokenizer, recipe)])
    model_config = gptq.GPTQConfig(4, 128)
    model_s = best_of(lambda: gptq.gptq_quantize_model(model, [calibration], model_config), args.repeat)
    rtn_s = best_of(lambda: quantize_model(model, model_config.quant_config, embeddings=False), args.repeat)

    shape = f"{args.size} x {args.size} layer, {args.rows} calibration rows"
    cases = [
        (f"{shape}: {config.label}, Hessian included", layer_s, LAYER_GOAL_S),
        ("  of which the Hessian H = 2 X^T X / n", hessian_s, None),
        ("  of which GPTQ given H (Cholesky, columns, lazy batches)", given_h_s, None),
        (f"course model: {model_config.label}, 64 x 128 calibration tokens", model_s, MODEL_GOAL_S),
        ("course model: round to nearest, same grid", rtn_s, None),
    ]
    rows = [[label, f"{s:.2f}", f"<= {goal:.0f} s" if goal else "-",
             ("yes" if s <= goal else "NO") if goal else "-"] for label, s, goal in cases]
    print(Table(["case", "seconds (best)", "goal", "met"], rows,
                title=f"GPTQ on {torch.get_num_threads()} CPU thread(s), best of {args.repeat}"))
    print()
    print(f"layer-wise error ||WX - QX||^2 / ||WX||^2 on {len(sample)} rows of the large layer: "
          f"GPTQ {err_gptq:.5f}, round to nearest {err_rtn:.5f}")
    met = all(s <= goal for _, s, goal in cases if goal) and err_gptq < err_rtn
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
