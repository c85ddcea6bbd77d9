"""Tensor parallelism of chapter 11 (course_lib.parallel.tensor_parallel and its
communications): the degree checks and their messages, the slicing of Conv1D weights by
rank (the column and row split computed by hand equals the whole layer), the formulas of
parameter and activation bytes, a one-rank group in this process (the parallel block and
model equal transformers' own, the gradient norm equals clip_grad_norm_'s); and, marked
slow, one block split over 2 gloo ranks, by hand and by PyTorch's parallelize_module,
against one process in float64 and float32, with and without sequence parallelism: its
collectives, bytes per rank and activations kept."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.distributed as dist
from transformers.pytorch_utils import Conv1D

from course_lib.numbers import memory
from course_lib.parallel import launch, mesh, tensor_parallel, wire
from course_lib.parallel.tensor_parallel_communications import (
    collective_counts,
    grad_norm,
)
from course_lib.text import course_model, models

from conftest import refusal, tiny_gpt2

pytestmark = pytest.mark.usefixtures("one_torch_thread")



# --- the degree and its messages ---------------------------------------------------

def test_a_degree_that_does_not_divide_the_hidden_size_names_the_degrees_that_do():
    with pytest.raises(ValueError, match=r"hidden size 128 is not divisible by the "
                                         r"tensor degree 3: .* among 1, 2, 4\."):
        tensor_parallel.check_tensor_degree(3, 128, 4)


def test_a_degree_that_splits_a_head_is_refused():
    with pytest.raises(ValueError, match=r"the 4 attention heads \(hidden size 128\) "
                                         r"do not split across tensor degree 8: "
                                         r".*1, 2, 4"):
        tensor_parallel.check_tensor_degree(8, 128, 4)
    with pytest.raises(ValueError, match=r"does not divide the 6 ranks into groups; "
                                         r"use one of 1, 2, 3, 6\."):
        tensor_parallel.check_tensor_degree(4, 128, 4, world_size=6)
    assert tensor_parallel.check_tensor_degree(2, 128, 4, world_size=4) == 2


@pytest.mark.parametrize("degree", [0, -2, 1.5, True])
def test_a_degree_that_is_not_a_whole_number_is_refused(degree):
    with pytest.raises(ValueError, match="whole number >= 1"):
        tensor_parallel.check_tensor_degree(degree, 128, 4)


# --- the split, by hand, in one process ---------------------------------------------

def test_conv1d_becomes_the_linear_layer_it_is():
    conv = Conv1D(12, 4)
    torch.nn.init.normal_(conv.bias)
    x = torch.randn(3, 5, 4)
    assert torch.allclose(tensor_parallel.conv1d_as_linear(conv)(x), conv(x), atol=1e-6)


def test_each_rank_takes_the_same_heads_of_q_k_and_v():
    rows = [tensor_parallel.shard_rows(12, 2, r, parts=3).tolist() for r in range(2)]
    assert rows == [[0, 1, 4, 5, 8, 9], [2, 3, 6, 7, 10, 11]]
    assert sorted(rows[0] + rows[1]) == list(range(12))
    with pytest.raises(ValueError, match=r"do not split into 3 part\(s\) x 4 rank"):
        tensor_parallel.shard_rows(18, 4, 0, parts=3)


def test_column_then_row_split_by_hand_computes_the_whole_mlp():
    """Two ranks' shards computed here, one after the other: f copies, g sums."""
    torch.manual_seed(0)
    fc, proj = torch.nn.Linear(8, 32).double(), torch.nn.Linear(32, 8).double()
    x = torch.randn(5, 8, dtype=torch.float64)
    whole = proj(torch.nn.functional.gelu(fc(x)))
    partial = []
    for rank in range(2):
        rows = tensor_parallel.shard_rows(32, 2, rank)
        hidden = torch.nn.functional.gelu(x @ fc.weight[rows].T + fc.bias[rows])
        partial.append(hidden @ proj.weight[:, 16 * rank:16 * (rank + 1)].T)
    assert torch.allclose(sum(partial) + proj.bias, whole, rtol=0, atol=1e-14)


def test_the_parameter_formula_counts_a_block():
    block = models.blocks(tiny_gpt2(hidden=16, vocab=32))[0]
    assert tensor_parallel.block_parameters(16, 1) == models.count_parameters(block)
    split = (12 * 128**2 + 7 * 128) // 2 + 6 * 128
    assert tensor_parallel.block_parameters(128, 2) == split


def test_activation_formula_splits_chapter_2s_as_korthikanti_et_al():
    s, b, h, a, e = 32, 2, 128, 4, 4
    total = memory.activation_bytes_per_layer(s, b, h, a, e, dropout=False,
                                              attention_scores=False)
    assert total == 16 * e * s * b * h
    assert tensor_parallel.activation_bytes_tp(s, b, h, a, 1, e) == total
    tp = tensor_parallel.activation_bytes_tp(s, b, h, a, 2, e)
    assert tp == (4 + 12 / 2) * e * s * b * h
    assert tensor_parallel.activation_bytes_tp(s, b, h, a, 2, e, True) == total / 2


def test_collectives_are_named_alike_from_either_counter():
    names = ["all-reduce", "c10d.allreduce_", "c10d_functional.all_reduce",
             "c10d._allgather_base_", "reduce-scatter"]
    counts = {"all-reduce": 3, "all-gather": 1, "reduce-scatter": 1}
    assert collective_counts(names) == counts


@pytest.fixture
def one_rank():
    """A process group of this process alone (gloo, an in-memory store)."""
    if dist.is_initialized():
        pytest.skip("a process group is already running in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_a_block_split_one_way_is_the_block(one_rank):
    block = models.blocks(tiny_gpt2(hidden=16, vocab=32).double())[0]
    split = tensor_parallel.parallelize_block(copy.deepcopy(block))
    x = torch.randn(2, 6, 16, dtype=torch.float64, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    block(x).pow(2).sum().backward()
    split(x2).pow(2).sum().backward()
    assert torch.allclose(x.grad, x2.grad, rtol=0, atol=1e-12)
    expected = tensor_parallel.reference_shards(split, block, grads=True)
    for name, p in split.named_parameters():
        assert torch.allclose(p.grad, expected[name], rtol=0, atol=1e-12), name


def test_a_parallel_model_trains_like_the_model_with_the_whole_norm_clipped(one_rank,
                                                                          tokenizer):
    config = course_model.course_model_config(tokenizer)
    model = models.build_model(config, seed=0).double()
    split = tensor_parallel.parallelize_model(copy.deepcopy(model))
    draw = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (2, 16), generator=draw)
    for m in (model, split):
        m(input_ids=ids, labels=ids).loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    assert float(grad_norm(split.parameters())) == pytest.approx(float(norm), rel=1e-12)
    mesh.TensorParallelAdamW(split.parameters(), clip=0.1, lr=1e-2).step()
    torch.optim.AdamW(model.parameters(), lr=1e-2).step()
    expected = tensor_parallel.reference_shards(split, model)
    for name, p in split.named_parameters():
        assert torch.allclose(p, expected[name], rtol=0, atol=1e-12), name


# --- the torchrun entry point's flags ----------------------------------------------

@pytest.mark.parametrize(("world", "argv", "message"), [
    (3, [], "the hidden size 128 is not divisible by the tensor degree 3"),
    (8, [], "the 4 attention heads (hidden size 128) do not split across tensor "
            "degree 8"),
    (2, ["--hidden", "130", "--heads", "4"],
     "--hidden 130 is not divisible by --heads 4"),
    (2, ["--sequence-parallel", "--seq-len", "31"],
     "--seq-len 31 does not split across 2"),
])
def test_a_block_that_does_not_split_is_refused_once_naming_what_to_change(
        ranks, capsys, world, argv, message):
    ranks(world)
    err = refusal(tensor_parallel.main, argv, capsys)
    assert err.count(message) == 1, err
    assert "Traceback" not in err
    if world != 2:
        assert "change --nproc-per-node, --hidden or --heads" in err


# --- one block on two gloo ranks ---------------------------------------------------

RUNS = {
    "float64": {"dtype": "float64"},
    "float32": {"dtype": "float32"},
    "sequence parallel": {"dtype": "float64", "sequence_parallel": True},
    "gelu": {"dtype": "float32", "activation": "gelu"},
    "gelu, sequence parallel": {"dtype": "float32", "activation": "gelu",
                                "sequence_parallel": True},
}


@pytest.fixture(scope="module")
def checks():
    """Every run on 2 ranks, in one launch: name -> (rank 0's result, rank 1's)."""
    runs = [{"run": "tensor", **run} for run in RUNS.values()]
    per_rank = launch.launch("course_lib.parallel.mesh:run_many", 2, {"runs": runs},
                             timeout=300, echo=False)
    return dict(zip(RUNS, zip(*per_rank)))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "bound"), [("float64", 1e-12), ("float32", 1e-4),
                                             ("sequence parallel", 1e-12)])
def test_a_split_block_computes_what_one_process_does(checks, name, bound):
    """Measured: 4.4e-16 (output) and 3.6e-15 (gradients) in float64, 2.4e-7 and
    3.8e-6 in float32."""
    for r in checks[name]:
        assert max(r.output_gap, r.input_grad_gap, r.grad_gap) < bound
        assert r.degree == 2 and r.dtype == RUNS[name]["dtype"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["float64", "float32"])
def test_the_split_by_hand_is_pytorchs_parallelize_module(checks, name):
    """Measured: bit for bit (0.0) in both dtypes."""
    for r in checks[name]:
        assert r.torch_output_gap <= 1e-12 and r.torch_grad_gap <= 1e-12


@pytest.mark.slow
def test_a_block_all_reduces_twice_forward_and_twice_backward(checks):
    for name in ("float64", "float32"):
        for r in checks[name]:
            assert r.forward == r.backward == {"all-reduce": 2}
            assert r.torch_forward == r.torch_backward == {"all-reduce": 2}


@pytest.mark.slow
def test_sequence_parallelism_splits_each_all_reduce_into_its_halves(checks):
    """Backward gathers each layer's input again (it was kept as a shard): two more."""
    for r in checks["sequence parallel"]:
        assert r.forward == {"all-gather": 2, "reduce-scatter": 2}
        assert r.backward == {"all-gather": 4, "reduce-scatter": 2}


@pytest.mark.slow
def test_each_rank_holds_the_formulas_parameter_bytes(checks):
    for results in checks.values():
        for r in results:
            assert r.parameter_bytes == r.parameter_bytes_formula


@pytest.mark.slow
def test_activations_per_rank_match_the_formula_and_sequence_parallelism_saves(checks):
    """Measured (float32, batch 2 x 32 tokens, exact GELU): 526,336 bytes in one
    process, 329,216 per rank split 2 ways, 263,168 with sequence parallelism; the
    formula's 524,288, 327,680 and 262,144 (the rest: the fused attention's row
    statistics)."""
    tp, sp = checks["gelu"][0], checks["gelu, sequence parallel"][0]
    for r in (tp, sp):
        assert 1 <= r.activation_bytes / r.activation_bytes_formula < 1.01
    assert 1 <= tp.single_activation_bytes / (16 * 4 * 32 * 2 * 128) < 1.01
    saved = tp.activation_bytes - sp.activation_bytes
    assert saved == pytest.approx(4 * 4 * 32 * 2 * 128 * (1 - 1 / 2), rel=0.02)
    # transformers' tanh GELU keeps more than the formula counts, split all the same
    assert checks["float32"][0].activation_bytes > tp.activation_bytes


@pytest.mark.slow
@pytest.mark.skipif(not wire.COUNTS_TCP, reason="counts TCP bytes through Linux's TCP_INFO")
def test_sequence_parallelism_sends_what_the_ring_formulas_say(checks):
    """Per pass, B = s b h e bytes of activations on 2 ranks: tensor parallelism's two
    all-reduces send 2B either way. Sequence parallelism's forward (2 all-gathers, 2
    reduce-scatters) sends 2B by NCCL's ring, 3B on gloo (whose reduce-scatter is an
    all-reduce); its backward (4 all-gathers, 2 reduce-scatters) 3B and 4B. Measured on
    the wire: the gloo formula plus gloo's message headers."""
    b = 32 * 2 * 128 * 8  # float64
    tp, sp = checks["float64"][0], checks["sequence parallel"][0]
    assert tp.ring_nccl == tp.ring_gloo == (2 * b, 2 * b)
    assert sp.ring_nccl == (2 * b, 3 * b) and sp.ring_gloo == (3 * b, 4 * b)
    for r in (tp, sp):
        for sent, formula in zip(r.wire_sent, r.ring_gloo):
            assert formula <= sent < formula * 1.02, (r.sequence_parallel, sent, formula)
