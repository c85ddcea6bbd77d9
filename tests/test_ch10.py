"""Chapter 10's tables (course_lib.chapters.ch10) that carry facts: the GPU table's TF32 and FP32
columns and the figure the roofline uses, the all-reduce table's separate bandwidth and latency
sources (an assumption never credited to a datasheet), each source cited as the book cites it,
the time-to-train table's "fits?" column with the ZeRO-3 sharding that makes a model fit, and
the two offload schemes' host RAM."""

from __future__ import annotations

import pytest

from course_lib.base.tables import cite
from course_lib.chapters import ch10
from course_lib.hardware import roofline
from course_lib.numbers import memory
from course_lib.parallel import cost_model


def column(table, header):
    i = table.headers.index(header)
    return {row[0]: row[i] for row in table.rows}


def test_gpu_table_shows_tf32_next_to_fp32_and_what_the_roofline_uses():
    cpu = roofline.Roof("this CPU fp32", 3.7e11, 1.5e10)
    t = ch10.gpu_table("bf16", this_machine=cpu)
    tf32 = column(t, "tf32 tensor cores, dense")
    sparse = column(t, "tf32 with 2:4 sparsity")
    fp32 = column(t, "fp32 (no tensor cores)")
    assert (tf32["A100 SXM 80GB"], sparse["A100 SXM 80GB"], fp32["A100 SXM 80GB"]) == ("156.0", "312", "19.5")
    assert (tf32["H100 SXM"], sparse["H100 SXM"], fp32["H100 SXM"]) == ("494.5", "989", "67.0")
    assert (tf32["L40S"], sparse["L40S"], fp32["L40S"]) == ("183.0", "366", "91.6")
    uses = column(t, "roofline uses")
    assert uses["L40S"] == "bf16 dense" and uses["this CPU fp32"] == "fp32 measured"
    assert fp32["this CPU fp32"] == "0.370"  # the CPU's measured FP32, under FP32
    assert column(t, "ridge (FLOP/byte)")["L40S"] == "419"


def test_allreduce_table_sources_latency_apart_from_bandwidth():
    fitted = cost_model.fit_alpha_beta([4096, 2**24], [1e-4, 1e-2], 2, name="fitted")
    guessed = cost_model.Link("guessed latency", 12.5e9, 3e-5, "nvidia_connectx6")
    t = ch10.allreduce_table(14e9, 8, ["NVLink 4 (H100)", guessed, fitted])
    latency, bandwidth = column(t, "latency source"), column(t, "bandwidth source")
    # Each source as the book cites it (its label on the bibliography page), never its key.
    assert latency["NVLink 4 (H100)"] == cite("nccl_tuning_model") == "NVIDIA (2024)"
    assert bandwidth["NVLink 4 (H100)"] == cite("nvidia_h100") == "NVIDIA (2026g)"
    assert bandwidth["guessed latency"] == cite("nvidia_connectx6")
    assert latency["guessed latency"] == "assumption"  # never the adapter's datasheet
    assert latency["fitted"] == bandwidth["fitted"] == "measured here"


def test_the_datasheet_and_platform_tables_cite_their_sources():
    sources = column(ch10.gpu_table("bf16"), "source")
    assert sources == {name: cite(gpu.source) for name, gpu in roofline.DATASHEETS.items()}
    assert sources["H100 SXM"] == "NVIDIA (2026g)"
    platforms = column(ch10.platform_table(), "source")
    assert platforms == {"Intel Xeon W-3400": "Intel (2023)",
                         "AMD Threadripper PRO 7000 WX": "AMD (2023)"}


def test_time_to_train_table_says_what_fits_and_the_sharding_that_makes_it_fit():
    l40s, a100 = roofline.DATASHEETS["L40S"], roofline.DATASHEETS["A100 SXM 80GB"]
    machines = {"1 L40S": (l40s.dense["bf16"], 1, l40s.memory),
                "8 A100": (a100.dense["bf16"], 8, a100.memory),
                "no memory given": (1e12, 1)}
    t = ch10.time_to_train_table(7e9, 140e9, machines)
    fits = column(t, "fits?")
    assert fits["1 L40S"] == "no: ZeRO-3 over 3 fits" and fits["8 A100"] == "yes"
    assert fits["no memory given"] == "-"
    assert float(column(t, "needed per device (GB)")["1 L40S"]) > 112  # 16 bytes x 7e9 + activations
    # fits? is decided against chapter 2's usable memory, not the capacity
    usable = memory.GPU("A100", a100.memory).usable
    assert column(t, "usable for tensors (GB)")["8 A100"] == f"{usable / 1e9:,.1f}"
    assert column(t, "memory per device (GiB)")["8 A100"] == f"{a100.memory / memory.GIB:,.0f}"
    need = roofline.training_memory_per_device(1.5e9, 1).total
    roomy = {"x": (1e12, 1, 1.01 * need)}  # the capacity holds it, its usable part does not
    assert column(ch10.time_to_train_table(1.5e9, 1e9, roomy), "fits?")["x"].startswith("no")
    assert "112 GB of model states" in t.title
    with pytest.raises(ValueError, match="FLOP/s per device"):
        ch10.time_to_train_table(7e9, 1e9, {"x": (1e12,)})


def test_devices_to_fit_shards_model_states():
    assert roofline.devices_to_fit(7e9, 48e9) == 3  # 112 GB / 3 = 37 GB + activations
    assert roofline.devices_to_fit(7e9, 80e9) == 2
    assert roofline.devices_to_fit(1e8, 80e9) == 1
    one = roofline.training_memory_per_device(7e9, 1)
    assert one.model_states == pytest.approx(16 * 7e9)
    assert roofline.training_memory_per_device(7e9, 8).model_states == pytest.approx(16 * 7e9 / 8)
    assert roofline.devices_to_fit(7e9, 1e9, most=64) is None
    with pytest.raises(ValueError, match="memory_per_device"):
        roofline.devices_to_fit(7e9, 0)


def test_offload_table_names_the_two_schemes():
    t = ch10.offload_ram_table([7e9])
    row = dict(zip(t.headers, t.rows[0]))
    assert row["ZeRO-Offload: host bytes per parameter"] == "14"  # BF16 grads + FP32 master + Adam
    assert row["all offloaded: host bytes per parameter"] == "16"  # the parameters too
    assert row["ZeRO-Offload: host RAM (GB)"] == "98" and row["parameters offloaded too: host RAM (GB)"] == "112"
    assert "ZeRO-Offload" in t.title and "CPUOffloadPolicy" in t.title
