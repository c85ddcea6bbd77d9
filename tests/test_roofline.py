"""Tests for course_lib.hardware.roofline: intensities against hand-computed values, roofs, bad input;
and chapter 10's table and plot of them."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from course_lib.chapters import ch10
from course_lib.hardware import roofline
from course_lib.hardware.matmul import ProductResult
from course_lib.parallel.cost_model import LINKS


def test_matmul_intensity_by_hand():
    # (4 x 8) @ (8 x 2) in bf16: 2*4*8*2 = 128 FLOPs; (32 + 16 + 8) elements * 2 bytes = 112 bytes.
    op = roofline.matmul_operation(4, 8, 2, "bf16")
    assert (op.flops, op.bytes) == (128.0, 112.0)
    assert op.intensity == pytest.approx(128 / 112)
    # Square n x n in fp32: 2 n^3 / (3 n^2 * 4) = n / 6.
    assert roofline.matmul_operation(600, 600, 600, "fp32").intensity == pytest.approx(100)


def test_a_matrix_vector_product_has_intensity_one_in_bf16():
    # Decoding one token: (1 x h) @ (h x h) reads h*h weights of 2 bytes for 2 h*h FLOPs.
    op = roofline.matmul_operation(1, 4096, 4096, "bf16")
    assert op.intensity == pytest.approx(1.0, rel=1e-3)


def test_batched_products_scale_flops_and_bytes_alike():
    one, many = roofline.matmul_operation(3, 5, 7), roofline.matmul_operation(3, 5, 7, batch=12)
    assert (many.flops, many.bytes) == (12 * one.flops, 12 * one.bytes)


@given(st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 4096))
def test_intensity_never_exceeds_the_smallest_dimension_bound(m, k, n):
    # 2mkn / (2(mk + kn + mn)) <= min(m, k, n): no matmul beats its smallest side in bf16.
    assert roofline.matmul_operation(m, k, n).intensity <= min(m, k, n) * (1 + 1e-12)


def test_roof_ridge_and_attainable():
    roof = roofline.Roof("toy", peak=100e12, bandwidth=1e12)
    assert roof.ridge == 100
    assert roofline.attainable(10, roof) == 10e12
    assert roofline.attainable(1000, roof) == 100e12
    op = roofline.Operation("x", flops=2e12, bytes=1e12)
    assert op.bound(roof) == "memory" and op.seconds(roof) == 1.0


def test_datasheet_figures_are_dense_halves_of_sparse_ones_and_links_exist():
    for gpu in roofline.DATASHEETS.values():
        assert gpu.source.startswith("nvidia_")
        for dtype, sparse in gpu.sparse.items():
            # Within rounding: the L40S datasheet prints 362.05 dense beside 733 sparse (BF16).
            assert gpu.dense[dtype] == pytest.approx(sparse / 2, rel=0.015), (gpu.name, dtype)
        assert gpu.host_link in LINKS and (gpu.gpu_link == "" or gpu.gpu_link in LINKS)
    h100 = roofline.roof_of("H100 SXM", "bf16")
    assert h100.ridge == pytest.approx(989.5e12 / 3.35e12)


def test_decoding_is_memory_bound_and_training_matmuls_compute_bound_on_every_gpu():
    roofs = [roofline.roof_of(name) for name in roofline.DATASHEETS]
    decode = roofline.block_operations(batch=1, mode="decode")
    train = {op.name: op for op in roofline.block_operations(batch=64, mode="train")}
    assert all(op.bound(r) == "memory" for op in decode for r in roofs)
    assert all(train["MLP up"].bound(r) == "compute" for r in roofs)
    assert train["softmax"].bound(roofs[0]) == "memory"


def test_block_operations_count_a_gpt2_block_by_hand():
    h, s, b = 64, 16, 2
    ops = {op.name: op for op in roofline.block_operations(h, 4, s, b, "train", "fp32")}
    t = b * s
    # The four weight matmuls: 2 * t * (3h*h + h*h + 4h*h + 4h*h) = 24 t h^2 FLOPs.
    weights = ["QKV projection", "output projection", "MLP up", "MLP down"]
    assert sum(ops[n].flops for n in weights) == 24 * t * h * h
    # Attention: two products of 2 * b * s * s * h FLOPs each.
    assert ops["attention scores Q K^T"].flops == ops["attention x V"].flops == 2 * b * s * s * h
    decode = {op.name: op for op in roofline.block_operations(h, 4, s, b, "decode", "fp32")}
    assert decode["MLP up"].flops == 2 * b * h * 4 * h
    assert decode["attention scores Q K^T"].bytes == b * 4 * (16 + 16 * s + s) * 4


def test_training_flops_and_time_to_train():
    assert roofline.training_flops(1e9, 20e9) == 1.2e20
    seconds = roofline.time_to_train(1e9, 20e9, 1e15, utilisation=0.5, devices=8)
    assert seconds == pytest.approx(1.2e20 / (1e15 * 0.5 * 8))


def test_operations_table_has_a_bound_column_per_roof():
    roofs = [roofline.roof_of("A100 SXM 80GB"), roofline.Roof("laptop", 1e11, 2e10)]
    table = ch10.operations_table(roofline.block_operations(), roofs)
    assert len(table.rows) == 8 and table.headers[-2].startswith("A100 SXM 80GB bf16: ridge 153")
    assert {row[-1] for row in table.rows} <= {"memory", "compute"}


def test_plot_roofline_has_labelled_axes_and_one_line_per_roof():
    import matplotlib.pyplot as plt

    roofs = [roofline.roof_of("H100 SXM"), roofline.Roof("this CPU", 2e11, 2e10)]
    measured = ProductResult(roofline.matmul_operation(1, 64, 64, "fp32", "measured"), "cpu", (1e-3,), 1)
    fig = ch10.plot_roofline(roofs, roofline.block_operations()[:2], [measured])
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 2 and "intensity" in ax.get_xlabel() and "FLOP/s" in ax.get_ylabel()
    (note,) = ax.texts
    assert note.get_text() == "measured" and note.xy == (measured.operation.intensity, measured.flops_per_second)
    plt.close(fig)


@pytest.mark.parametrize("call, message", [
    (lambda: roofline.matmul_operation(0, 4, 4), "m must be a whole number"),
    (lambda: roofline.matmul_operation(4, 4, 4, "fp7"), "unknown dtype 'fp7'"),
    (lambda: roofline.roof_of("B200"), "unknown GPU 'B200'; choose one of"),
    (lambda: roofline.roof_of("A100 SXM 80GB", "fp8"), "no published fp8 figure"),
    (lambda: roofline.Roof("x", 0, 1), "peak"),
    (lambda: roofline.Roof("x", 1, math.nan), "bandwidth"),
    (lambda: roofline.block_operations(hidden=100, heads=12), "multiple of heads"),
    (lambda: roofline.block_operations(mode="prefill"), "unknown mode 'prefill'"),
    (lambda: roofline.time_to_train(1e9, 1e9, 1e12, utilisation=40), r"share in \(0, 1\]"),
    (lambda: roofline.time_to_train(1e9, 1e9, 1e12, devices=0), "devices must be"),
    (lambda: ch10.plot_roofline([]), "at least one roof"),
])
def test_bad_input_gets_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()
