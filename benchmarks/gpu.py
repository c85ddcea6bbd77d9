"""The notebooks' GPU paths in one run: what chapters 2 and 10 do when a CUDA GPU is present.

Run ``python benchmarks/gpu.py`` on a machine with a CUDA GPU (it says so and stops where there
is none). It makes the calls the notebooks' GPU cells make, unchanged:

* chapter 2: one training step of the chapter's GPT-2 (4 layers, hidden 256, dropout 0.1,
  eager attention, batch 8 of 128 tokens) measured by
  :func:`course_lib.numbers.memory_meter.measure_training_step` on CUDA and on the CPU: the
  weights, gradients and Adam states must be the same bytes on both, the activations are set
  next to the formula with CUDA's dropout masks (one byte per element), and the allocator's
  peak is printed;
* chapter 10: matrix products per dtype (:func:`course_lib.hardware.matmul.matmul_benchmark`),
  STREAM bandwidth of the GPU's memory (:func:`course_lib.hardware.stream.measure_bandwidth`)
  and host-to-device copies, pinned and pageable (:func:`course_lib.hardware.stream.host_to_device`),
  each next to the datasheet of the card when the course knows it.

The torchrun entry points run on the same machine with NCCL (the README's command line).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from course_lib.base.tables import Table  # noqa: E402
from course_lib.hardware import matmul, roofline, stream  # noqa: E402
from course_lib.numbers import memory, memory_meter  # noqa: E402
from course_lib.text import models  # noqa: E402

BATCH, SEQ = 8, 128


def chapter_2() -> Table:
    """Chapter 2's training step on CUDA against the CPU's and the formula."""
    config = models.tiny_config("gpt2", hidden=256, layers=4, heads=4, context=256,
                                vocab=8192, dropout=0.1, activation="gelu",
                                attention="eager")
    cpu_model = models.build_model(config, seed=0)
    shape = memory.shape_of(cpu_model)
    on_cpu = memory_meter.measure_training_step(cpu_model, batch=BATCH, seq_len=SEQ, seed=0)
    gpu_model = models.build_model(config, seed=0).to("cuda")
    on_gpu = memory_meter.measure_training_step(gpu_model, batch=BATCH, seq_len=SEQ, seed=0)
    formula = memory.activation_bytes(shape, SEQ, BATCH, bytes_per_element=4,
                                      mask_bytes=memory.dropout_mask_bytes("cuda", 4))
    rows = []
    for part in ("weights", "gradients", "optimizer_states", "activations"):
        rows.append([part, f"{getattr(on_cpu, part):,}", f"{getattr(on_gpu, part):,}",
                     f"{int(formula):,}" if part == "activations" else ""])
    rows.append(["CUDA allocator peak", "", f"{on_gpu.cuda_peak:,}", ""])
    same = all(getattr(on_cpu, p) == getattr(on_gpu, p)
               for p in ("weights", "gradients", "optimizer_states"))
    print(f"chapter 2: model states the same bytes on CPU and CUDA: {same}")
    return Table(["bytes", "CPU", torch.cuda.get_device_name(), "formula"], rows,
                 title="Chapter 2: one training step, measured")


def chapter_10() -> list[Table]:
    """Chapter 10's GPU cell: matrix products, memory bandwidth, host-to-device copies."""
    dtypes = ["fp32", "bf16", "fp16"] + (["int8"] if matmul.int8_supported() else [])
    products = matmul.matmul_benchmark(dtypes=dtypes, device="cuda", repeats=3)
    tables = [matmul.matmul_table(products),
              stream.bandwidth_table(stream.measure_bandwidth(device="cuda", repeats=3)),
              stream.bandwidth_table(stream.host_to_device())]
    name = torch.cuda.get_device_name()
    sheet = next((a for key, a in roofline.DATASHEETS.items()
                  if key.split()[0] in name), None)
    if sheet is not None:
        peaks = ", ".join(f"{k} {v / 1e12:,.0f}" for k, v in sheet.dense.items())
        print(f"datasheet of the {sheet.name}: dense TFLOP/s {peaks}; memory "
              f"{sheet.bandwidth / 1e12:.2f} TB/s")
    return tables


def main() -> int:
    """Run both chapters' GPU paths and print their tables."""
    if not torch.cuda.is_available():
        print("No CUDA GPU here: run this on a machine with one (Colab: Runtime > Change "
              "runtime type > GPU).")
        return 1
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}")
    print(chapter_2())
    for table in chapter_10():
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
