"""Tests for course_lib.hardware.matmul: the matmul benchmark's structure and its errors (never its timings)."""

import runpy
from pathlib import Path

import pytest
import torch

from course_lib.hardware import matmul, roofline

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "matmul.py"


def test_flops_of_a_product():
    assert matmul.MatmulResult("cpu", "fp32", 1, (1.0,), 1).flops == 2
    assert matmul.MatmulResult("cpu", "fp32", 1024, (1.0,), 1).flops == 2 * 1024**3


def one(size, dtype="fp32", device="cpu", repeats=1, min_seconds=0.0):
    """The benchmark of one size in one dtype: its one result."""
    (r,) = matmul.matmul_benchmark([size], [dtype], device, repeats=repeats, min_seconds=min_seconds)
    return r


def test_a_benchmark_of_one_case_gives_a_complete_result():
    r = one(32, "bf16", repeats=2)
    assert (r.device, r.dtype, r.size, r.repeats) == ("cpu", "bf16", 32, 2)
    assert r.seconds > 0 and r.number >= 1
    assert r.flops == 2 * 32**3
    assert r.gflops == pytest.approx(r.flops / r.seconds / 1e9)


def test_a_result_keeps_every_run_and_reports_the_fastest_and_the_median():
    r = one(16, "fp32", repeats=5)
    assert len(r.times) == r.repeats == 5 and all(t > 0 for t in r.times)
    assert r.seconds == min(r.times)
    assert r.median_seconds == sorted(r.times)[2]
    assert r.spread == pytest.approx(r.median_seconds / r.seconds - 1) and r.spread >= 0
    made_up = matmul.MatmulResult("cpu", "fp32", 8, (2.0, 1.0, 4.0), 1)
    assert (made_up.seconds, made_up.median_seconds, made_up.spread) == (1.0, 2.0, 1.0)


def test_every_case_of_a_benchmark_gets_the_same_number_of_runs():
    results = matmul.matmul_benchmark([16, 32], ["fp32", "bf16"], "cpu", repeats=3, min_seconds=0)
    assert [r.repeats for r in results] == [3, 3, 3, 3]


def test_benchmark_covers_every_case_and_the_table_shows_ratios():
    results = matmul.matmul_benchmark([16, 32], ["fp32", "fp16"], "cpu", repeats=1)
    assert [(r.size, r.dtype) for r in results] == [(16, "fp32"), (16, "fp16"), (32, "fp32"), (32, "fp16")]
    ratios = matmul.speedups(results)
    assert ratios[("cpu", 16, "fp32")] == 1.0 and ratios[("cpu", 32, "fp32")] == 1.0
    assert ratios[("cpu", 32, "fp16")] > 0
    table = matmul.matmul_table(results)
    assert table.headers == ["device", "matrices", "dtype", "ms per product", "GFLOP/s", "vs fp32", "median run"]
    assert len(table.rows) == 4 and table.rows[0][-2] == "1.00x"
    assert all(row[-1].startswith("+") and row[-1].endswith("%") for row in table.rows)
    assert table.title == "one run per row"
    again = matmul.matmul_benchmark([16], ["fp32"], "cpu", repeats=3, min_seconds=0)
    assert matmul.matmul_table(again).title == "fastest of 3 interleaved runs per row"


def test_table_without_baseline_shows_a_dash():
    results = matmul.matmul_benchmark([16], ["bf16"], "cpu", repeats=1)
    assert matmul.matmul_table(results).rows[0][-2] == "-"


def test_default_sizes_and_devices():
    assert matmul._default_sizes(torch.device("cpu")) == (256, 512, 1024)
    assert matmul.available_devices()[0] == "cpu"
    assert ("cuda" in matmul.available_devices()) == torch.cuda.is_available()


def test_machine_description():
    lines = matmul.describe_machine()
    assert lines[0].startswith("CPU: ") and lines[-1].startswith("GPU: ")
    features = matmul._cpu_features()
    assert set(features) <= set(matmul._CPU_FEATURES)
    assert all(isinstance(v, bool) for v in features.values())
    assert matmul.cpu_name()


@pytest.mark.parametrize("dtype", ["fp8", "int4", "float", "", None, 32])
def test_unknown_dtype_is_a_clear_error(dtype):
    with pytest.raises(ValueError, match="unknown dtype .* valid values: fp32, bf16, fp16"):
        matmul.matmul_benchmark([8], [dtype])


@pytest.mark.parametrize("size", [0, -4, 2.5, True, "64"])
def test_bad_size_is_a_clear_error(size):
    with pytest.raises(ValueError, match="size must be a whole number >= 1"):
        matmul.matmul_benchmark([size])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"repeats": 0}, "repeats must be a whole number"),
        ({"min_seconds": -1.0}, "min_seconds must be a number >= 0"),
        ({"device": "tpu"}, "unknown device 'tpu'"),
        ({"device": 3}, "device must be"),
    ],
)
def test_other_bad_inputs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        matmul.matmul_benchmark([8], **kwargs)
    with pytest.raises(ValueError, match=message):
        matmul.time_products({"x": (1, 8, 8)}, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_asking_for_a_missing_gpu_says_so():
    with pytest.raises(ValueError, match="no CUDA GPU is visible"):
        matmul.matmul_benchmark([8], device="cuda")


@pytest.mark.parametrize("sizes, dtypes", [([], ["fp32"]), (64, ["fp32"]), ([64], "fp32"), ([64], [])])
def test_benchmark_lists_must_be_lists(sizes, dtypes):
    with pytest.raises(ValueError, match="must be a non-empty list"):
        matmul.matmul_benchmark(sizes, dtypes)


def test_empty_table_is_an_error():
    with pytest.raises(ValueError, match="at least one result"):
        matmul.matmul_table([])


def test_benchmark_script_prints_a_table(capsys):
    main = runpy.run_path(str(BENCHMARK))["main"]
    assert main(["--sizes", "16", "--repeats", "1", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "GFLOP/s" in out and "16 x 16" in out and "vs fp32" in out


def test_benchmark_script_rejects_bad_sizes(capsys):
    main = runpy.run_path(str(BENCHMARK))["main"]
    with pytest.raises(SystemExit):
        main(["--sizes", "0", "--device", "cpu"])
    assert "size must be a whole number >= 1" in capsys.readouterr().err


@pytest.mark.skipif(not matmul.int8_supported("cpu"), reason="this torch has no CPU INT8 product")
def test_int8_products_are_timed_and_counted_as_integer_operations():
    r = one(64, "int8", repeats=2)
    assert (r.dtype, r.flops) == ("int8", 2 * 64**3) and r.seconds > 0
    table = matmul.matmul_table([r, one(64, "fp32")])
    assert "integer operations" in table.title


def test_int8_supported_answers_a_bool_and_matches_an_exact_product():
    assert isinstance(matmul.int8_supported("cpu"), bool)
    if matmul.int8_supported("cpu"):
        a = torch.randint(-128, 128, (32, 32), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
        assert torch.equal(torch._int_mm(a, a), a.int() @ a.int())


def test_an_unsupported_int8_product_says_to_leave_it_out(monkeypatch):
    monkeypatch.setattr(matmul, "int8_supported", lambda device=None: False)
    with pytest.raises(ValueError, match="leave 'int8' out of dtypes"):
        one(32, "int8")


def test_peak_result_is_the_fastest_of_one_dtype():
    made = [matmul.MatmulResult("cpu", "fp32", 8, (t,), 1) for t in (2.0, 1.0, 3.0)]
    made.append(matmul.MatmulResult("cpu", "bf16", 8, (0.1,), 1))
    assert matmul.peak_result(made, "fp32") is made[1]
    with pytest.raises(ValueError, match=r"no fp16 result .* add 'fp16' to matmul_benchmark"):
        matmul.peak_result(made, "fp16")


def test_products_of_any_shape_are_the_rooflines_operations_timed():
    shapes = {"one token": (1, 64, 256), "a batch": (32, 64, 256)}
    results = matmul.time_products(shapes, "bf16", "cpu", repeats=2, min_seconds=0)
    assert [r.operation for r in results] == [roofline.matmul_operation(*shapes[name], "bf16", name)
                                              for name in shapes]
    for r in results:
        assert r.device == "cpu" and r.repeats == 2 and r.number >= 1
        assert r.flops_per_second == pytest.approx(r.operation.flops / min(r.times))


@pytest.mark.parametrize("shapes, dtype, message", [
    ({}, "fp32", "shapes must be a non-empty"),
    ([(1, 2, 3)], "fp32", "shapes must be a non-empty"),
    ({"x": (0, 8, 8)}, "fp32", "m must be a whole number"),
    ({"x": (1, 8, 8)}, "fp64", "unknown dtype 'fp64'; valid values: fp32, bf16, fp16"),
])
def test_time_products_says_what_to_pass(shapes, dtype, message):
    with pytest.raises(ValueError, match=message):
        matmul.time_products(shapes, dtype, "cpu")


@pytest.mark.slow
def test_the_hardware_benchmark_prints_one_row_per_measured_figure(capsys, tmp_path):
    main = runpy.run_path(str(BENCHMARK.with_name("hardware.py")))["main"]
    assert main(["--quick", "--directory", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for figure in ("matrix products, fp32", "triad, 64.00 MiB", "ridge point", "disk, sequential",
                   "disk, random 4 KiB reads", "tokenisation, 2 worker(s)",
                   "all-reduce, 2 processes: alpha", "all-reduce, 2 processes: beta"):
        assert figure in out, figure
    assert list(tmp_path.iterdir()) == []  # the disk test left no file behind
