"""Tests for course_lib.compression.sparse_checkpoints: exact round-trips, byte sums, files, latency rows (never speeds)."""

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from course_lib.base import timing
from course_lib.compression import sparse_checkpoints as ss

CODECS = {"csr": (ss.to_csr, ss.from_csr), "bitmask": (ss.to_bitmask, ss.from_bitmask)}
HAS_SPARSE_CORES = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)


def sparse_tensor(shape, sparsity, dtype=torch.float32, seed=0):
    """A seeded random tensor with exactly round(sparsity * numel) zeros at random places."""
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(shape, generator=g) + 0.5  # magnitudes in [0.5, 1.5): no accidental zeros in any dtype
    t[torch.rand(shape, generator=g) < 0.5] *= -1
    t.view(-1)[torch.randperm(t.numel(), generator=g)[: round(sparsity * t.numel())]] = 0
    return t.to(dtype)


def a_state(sparsity, dtype=torch.float32):
    """A small state_dict: two matrices (encoded), a bias, a 3-D tensor and an integer matrix (kept dense)."""
    return {
        "layer.weight": sparse_tensor((6, 10), sparsity, dtype),
        "layer.bias": sparse_tensor((6,), 0.5, dtype, seed=1),
        "conv": sparse_tensor((2, 3, 4), 0.5, dtype, seed=2),
        "counts": torch.arange(6).reshape(2, 3),
        "head.weight": sparse_tensor((3, 17), sparsity, dtype, seed=3),
    }


def assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("sparsity", [0.0, 0.3, 0.9, 1.0])
def test_round_trips_are_exact(codec, dtype, sparsity):
    encode, decode = CODECS[codec]
    state = a_state(sparsity, dtype)
    assert_same(decode(encode(state)), state)


def test_encoded_names_and_dtypes():
    state = a_state(0.5)
    csr = ss.to_csr(state)
    assert list(csr) == [
        "layer.weight.csr_values", "layer.weight.csr_col_indices", "layer.weight.csr_crow_indices",
        "layer.weight.shape", "layer.bias", "conv", "counts", "head.weight.csr_values",
        "head.weight.csr_col_indices", "head.weight.csr_crow_indices", "head.weight.shape",
    ]  # fmt: skip
    assert csr["layer.weight.csr_col_indices"].dtype == torch.int32  # torch's own to_sparse_csr(): int64
    assert csr["layer.weight.csr_crow_indices"].tolist()[-1] == csr["layer.weight.csr_values"].numel() == 30
    assert csr["layer.weight.shape"].dtype == torch.int64 and csr["layer.weight.shape"].tolist() == [6, 10]
    bitmask = ss.to_bitmask(state)
    head = [k for k in bitmask if k.startswith("head")]
    assert head == ["head.weight.bitmask", "head.weight.values", "head.weight.shape"]
    assert bitmask["head.weight.bitmask"].dtype == torch.uint8 and bitmask["head.weight.bitmask"].numel() == 7
    assert torch.equal(bitmask["layer.weight.values"], state["layer.weight"][state["layer.weight"] != 0])


def test_bitmask_bit_order_is_little_endian_within_a_byte():
    t = torch.zeros(1, 12)
    t[0, [0, 2, 9]] = 1.0  # byte 0: bits 0 and 2 -> 5; byte 1: bit 1 -> 2
    assert ss.to_bitmask({"w": t})["w.bitmask"].tolist() == [5, 2]


def test_negative_zero_counts_as_a_zero_and_comes_back_positive():
    t = torch.tensor([[-0.0, 1.5, 0.0, -2.0]])
    for name, (encode, decode) in CODECS.items():
        encoded = encode({"w": t})
        assert encoded["w.csr_values" if name == "csr" else "w.values"].tolist() == [1.5, -2.0]
        back = decode(encoded)["w"]
        assert torch.equal(back, t)  # -0.0 == 0.0, so torch.equal holds ...
        assert back.signbit().tolist() == [[False, False, False, True]]  # ... but the zero's sign is gone
    assert ss.count_zeros({"w": t}) == (2, 4)


def test_nan_and_infinity_are_kept_bit_for_bit():
    t = torch.tensor([[float("nan"), 0.0], [float("-inf"), 3.0]])
    for encode, decode in CODECS.values():
        assert torch.equal(decode(encode({"w": t}))["w"].view(torch.int32), t.view(torch.int32))


def five_nonzeros():
    t = torch.zeros(4, 8)
    t[0, 1], t[1, 7], t[2, 0], t[2, 5], t[3, 3] = 1.0, -2.0, 3.0, 0.5, 4.0
    return {"w": t}


def test_bytes_of_a_small_example_by_hand():
    state = five_nonzeros()
    assert ss.storage_bytes(state, "dense") == 4 * 8 * 4 == 128
    parts = {k: v.numel() * v.element_size() for k, v in ss.to_csr(state).items()}
    assert parts == {"w.csr_values": 20, "w.csr_col_indices": 20, "w.csr_crow_indices": 20, "w.shape": 16}
    assert ss.storage_bytes(state, "csr") == 76
    parts = {k: v.numel() * v.element_size() for k, v in ss.to_bitmask(state).items()}
    assert parts == {"w.bitmask": 4, "w.values": 20, "w.shape": 16}
    assert ss.storage_bytes(state, "bitmask") == 40
    with_bias = {**state, "b": torch.ones(3)}  # a 1-D tensor is stored dense in every format
    assert [ss.storage_bytes(with_bias, f) for f in ss.FORMATS] == [140, 88, 52]
    assert ss.count_zeros(with_bias) == (27, 32)


def test_break_even_densities():
    assert ss.csr_break_even() == 0.5 and ss.csr_break_even(2, 4) == pytest.approx(1 / 3)
    assert ss.bitmask_break_even() == 31 / 32 and ss.bitmask_break_even(2) == 15 / 16


@pytest.mark.parametrize("fmt, below, above", [("csr", 0.45, 0.55), ("bitmask", 0.95, 0.99)])
def test_break_even_matches_the_bytes(fmt, below, above):
    dense = ss.storage_bytes({"w": torch.ones(64, 64)}, "dense")
    assert ss.storage_bytes({"w": sparse_tensor((64, 64), 1 - below)}, fmt) < dense
    assert ss.storage_bytes({"w": sparse_tensor((64, 64), 1 - above)}, fmt) > dense


@pytest.mark.parametrize("fmt", ss.FORMATS)
def test_saved_checkpoint_loads_back_and_reports_the_zeros_it_holds(tmp_path, fmt):
    pruned = sparse_tensor((64, 64), 0.75)
    state = {"w": pruned, "b": torch.randn(64), "tied": pruned}  # tied weights share memory: still saved
    path = tmp_path / f"pruned.{fmt}.safetensors"
    size = ss.save_checkpoint(state, path, fmt)
    assert size == path.stat().st_size > ss.storage_bytes(state, fmt)  # the header adds bytes
    loaded = ss.load_checkpoint(path)
    assert_same(loaded, state)
    assert ss.count_zeros(loaded) == (2 * 3072, 2 * 4096)  # 75% of both 64 x 64 matrices, as zeroed


def test_the_formats_shrink_a_pruned_checkpoint():
    state = {"w": sparse_tensor((64, 64), 0.75)}
    sizes = {f: ss.storage_bytes(state, f) for f in ss.FORMATS}
    assert sizes == {"dense": 16384, "csr": 1024 * 8 + 65 * 4 + 16, "bitmask": 512 + 1024 * 4 + 16}


def test_a_plain_safetensors_file_loads_as_dense(tmp_path):
    path = tmp_path / "plain.safetensors"
    save_file({"w": torch.ones(2, 2)}, str(path), metadata={"format": "pt"})  # as transformers writes
    assert_same(ss.load_checkpoint(path), {"w": torch.ones(2, 2)})


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 19), density=st.floats(0, 1), seed=st.integers(0, 2**16),
       dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16]))  # fmt: skip
def test_round_trip_and_byte_formulas_property(rows, cols, density, seed, dtype):
    state = {"w": sparse_tensor((rows, cols), 1 - density, dtype, seed)}
    for encode, decode in CODECS.values():
        assert_same(decode(encode(state)), state)
    nnz, v = rows * cols - ss.count_zeros(state)[0], state["w"].element_size()
    assert ss.storage_bytes(state, "csr") == nnz * (v + 4) + (rows + 1) * 4 + 16
    assert ss.storage_bytes(state, "bitmask") == math.ceil(rows * cols / 8) + nnz * v + 16


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ss.to_csr({}), "non-empty dict"),
        (lambda: ss.to_bitmask([torch.ones(2, 2)]), "non-empty dict"),
        (lambda: ss.count_zeros({"w": [1.0, 0.0]}), "must map names"),
        (lambda: ss.to_csr({"w": torch.ones(2, 2), "w.shape": torch.ones(2)}), "clash .* rename"),
        (lambda: ss.from_bitmask({"w.bitmask": torch.ones(1, dtype=torch.uint8)}), "missing: pass the whole"),
        (lambda: ss.storage_bytes(five_nonzeros(), "zip"), "unknown fmt 'zip'; valid values: dense, csr"),
        (lambda: ss.save_checkpoint(five_nonzeros(), "x", "coo"), "valid values: dense, csr, bitmask"),
        (lambda: ss.csr_break_even(0), "value_bytes must be a whole number >= 1"),
        (lambda: ss.csr_break_even(4, 2.5), "index_bytes must be a whole number >= 1"),
        (lambda: ss.bitmask_break_even(-1), "value_bytes must be a whole number >= 1"),
    ],
)
def test_bad_storage_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_latency_rows_have_the_right_labels_and_positive_times():
    rows = ss.matmul_latency(16, 8, 4, [0.5], repeats=2)
    assert [(r.method, r.sparsity) for r in rows] == [
        (ss.DENSE, 0.0), (ss.CSR, 0.0), (ss.FEWER_ROWS, 0.0),
        (ss.DENSE, 0.5), (ss.CSR, 0.5), (ss.FEWER_ROWS, 0.5),
    ]  # fmt: skip
    assert all(0 < r.best_ms <= r.median_ms and r.speedup > 0 for r in rows)
    assert rows[0].speedup == 1.0
    once = ss.matmul_latency(8, 8, 2, [0.0, 0.5, 0.5], repeats=1)  # sparsity 0 and repeats: timed once
    assert [r.sparsity for r in once] == [0.0] * 3 + [0.5] * 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        rows[0].best_ms = 0.0
    table = ss.latency_table(rows)
    assert table.headers == ["method", "sparsity", "best ms", "median ms", "speed-up vs dense"]
    assert len(table.rows) == 6 and table.rows[3][:2] == [ss.DENSE, "50%"] and table.rows[0][-1] == "1.00x"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"sparsities": [1.0]}, r"sparsity must be a fraction in \[0, 1\)"),
        ({"sparsities": [-0.1]}, r"sparsity must be a fraction in \[0, 1\)"),
        ({"sparsities": [float("nan")]}, r"sparsity must be a fraction in \[0, 1\)"),
        ({"sparsities": ["0.5"]}, r"sparsity must be a fraction in \[0, 1\)"),
        ({"sparsities": []}, "sparsities must be a non-empty list"),
        ({"sparsities": 0.5}, "sparsities must be a non-empty list"),
        ({"out_features": 0}, "out_features must be a whole number >= 1"),
        ({"tokens": 2.5}, "tokens must be a whole number >= 1"),
        ({"repeats": 0}, "repeats must be a whole number >= 1"),
        ({"device": "tpu"}, "unknown device 'tpu'"),
    ],
)
def test_bad_latency_input_is_a_clear_error(kwargs, message):
    args = {"out_features": 8, "in_features": 8, "tokens": 2, "sparsities": [0.5], "repeats": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        ss.matmul_latency(**args)


def test_an_empty_latency_table_is_an_error():
    with pytest.raises(ValueError, match="at least one row"):
        ss.latency_table([])


def test_interleaved_times_goes_round_every_call():
    order = []
    calls = [lambda: order.append("a"), lambda: order.append("b")]
    times = timing.interleaved_times(calls, 3, "cpu", [1, 2])
    assert order == ["a", "b", "b"] * 3
    assert [len(t) for t in times] == [3, 3] and all(s >= 0 for t in times for s in t)
    with pytest.raises(ValueError, match="one count per call"):
        timing.interleaved_times([print], 1, "cpu", [1, 1])
    with pytest.raises(ValueError, match="non-empty list of functions"):
        timing.interleaved_times([], 1, "cpu")


def test_semi_structured_needs_sizes_in_multiples_of_64():
    with pytest.raises(ValueError, match="multiples of 64"):
        ss.semi_structured_latency(96, 128, 8)


def test_semi_structured_is_not_available_on_the_cpu():
    ok, reason = ss.semi_structured_available("cpu")
    assert not ok and "compute capability 8.0+" in reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_semi_structured_says_what_is_missing():
    ok, reason = ss.semi_structured_available("cuda")
    assert not ok and reason.endswith("this machine has none")
    with pytest.raises(RuntimeError, match="NVIDIA GPU with sparse tensor cores"):
        ss.semi_structured_latency(128, 128, 64)


@pytest.mark.skipif(not HAS_SPARSE_CORES, reason="needs CUDA with compute capability 8.0+")
def test_semi_structured_latency_on_a_gpu():
    assert ss.semi_structured_available("cuda")[0]
    rows = ss.semi_structured_latency(128, 128, 64, repeats=2)
    assert [(r.method, r.sparsity) for r in rows] == [(ss.DENSE_FP16, 0.0), (ss.DENSE_FP16, 0.5),
                                                      (ss.SEMI_STRUCTURED, 0.5)]  # fmt: skip
    assert all(r.best_ms > 0 for r in rows)
