"""Chapter 11's lab: wrong answers, written as a learner might, that its checkers must recognise;
the references agree with the library's column-parallel layer, with the groups of a real 2 x 2
mesh, and with the arithmetic of the prediction at full size."""

import pytest
import torch

from course_lib.chapters import ch11_lab
from course_lib.parallel import tensor_parallel

# -- column_shard ---------------------------------------------------------------------------------


def input_features(weight, bias, degree, rank, parts=1):
    n = weight.shape[1] // degree
    return weight[:, rank * n:(rank + 1) * n], bias  # the row-parallel cut


def whole_bias(weight, bias, degree, rank, parts=1):
    n = weight.shape[0] // parts // degree
    rows = [i for p in range(parts) for i in range(p * n * degree + rank * n,
                                                   p * n * degree + (rank + 1) * n)]
    return weight[rows], bias


def one_block(weight, bias, degree, rank, parts=1):
    return weight.chunk(degree)[rank], bias.chunk(degree)[rank]  # c_attn cut as one


# -- mesh_groups ----------------------------------------------------------------------------------


def swapped(world_size, tp):
    dp = world_size // tp
    return {"tp": [list(range(r, world_size, tp)) for r in range(tp)],
            "dp": [list(range(d * tp, (d + 1) * tp)) for d in range(dp)]}


def tp_groups_counted(world_size, tp):
    size = world_size // tp  # tp groups of world_size // tp ranks
    return {"tp": [list(range(g * size, (g + 1) * size)) for g in range(tp)],
            "dp": [list(range(r, world_size, size)) for r in range(size)]}


# -- one_f_one_b ----------------------------------------------------------------------------------


def all_forwards_first(stage, stages, micro_batches):
    return [f"F{m}" for m in range(micro_batches)] + [f"B{m}" for m in range(micro_batches)]


def warmup_i_plus_1(stage, stages, micro_batches):
    warm = min(micro_batches, stage + 1)
    order = [f"F{m}" for m in range(warm)]
    for m in range(micro_batches):
        order += [f"B{m}"] + ([f"F{warm + m}"] if warm + m < micro_batches else [])
    return order


def megatron_count_backward_first(stage, stages, micro_batches):
    warm = stages - stage - 1  # Megatron's count, but the steady state begins with B
    order = [f"F{m}" for m in range(min(warm, micro_batches))]
    for m in range(micro_batches):
        order.append(f"B{m}")
        if warm + m < micro_batches:
            order.append(f"F{warm + m}")
    return order


def p_forwards_everywhere(stage, stages, micro_batches):
    return warmup_i_plus_1(stages - 1, stages, micro_batches)  # stage p - 1 has i + 1 = p


WRONG = {"column_shard": {
             "slicing the input features (row-parallel) instead of the output features":
                 input_features,
             "the whole bias on every rank": whole_bias,
             "the fused q, k, v cut as one block": one_block},
         "mesh_groups": {"dp and tp groups swapped": swapped,
                         "tp read as the number of groups": tp_groups_counted},
         "one_f_one_b": {"GPipe's order": all_forwards_first,
                         "warm-up counted from the first stage": warmup_i_plus_1,
                         "one warm-up forward short": megatron_count_backward_first,
                         "the same warm-up on every stage": p_forwards_everywhere}}


def test_the_column_slice_is_what_the_library_layer_keeps():
    """ColumnParallelLinear keeps weight[shard_rows(...)]: the same as the reference."""
    weight, bias = torch.randn(12, 4), torch.randn(12)
    for rank in range(2):
        rows = tensor_parallel.shard_rows(12, 2, rank, parts=3)
        mine = ch11_lab._column_shard(weight, bias, 2, rank, parts=3)
        assert torch.equal(mine[0], weight[rows]) and torch.equal(mine[1], bias[rows])
    halves = [ch11_lab._column_shard(weight, bias, 2, r)[0] for r in range(2)]
    assert torch.equal(torch.cat(halves), weight)  # contiguous halves, in rank order


def test_the_mesh_groups_are_those_of_the_chapters_run():
    """tests/test_mesh.py measured these groups on a real (2, 2) DeviceMesh of 4 ranks."""
    groups = ch11_lab._mesh_groups(4, 2)
    assert groups == {"tp": [[0, 1], [2, 3]], "dp": [[0, 2], [1, 3]]}
    big = ch11_lab._mesh_groups(16, 8)
    assert big["tp"] == [list(range(8)), list(range(8, 16))]
    assert all(len(g) == 2 for g in big["dp"]) and len(big["dp"]) == 8


def test_rank_0_of_the_8_by_8_mesh_holds_a_64th_and_gathers_an_eighth_of_a_block():
    """Issue 38: the 2-D layout measured on fake ranks, against the arithmetic the page asks for.
    Tensor parallelism splits the blocks' matrices and (by the vocabulary) the embedding and head
    8 ways, FSDP shards that 8 ways more; its all-gather brings back a block's eighth in BF16."""
    psi, block = 3_946_913_792, 855_654_400
    norms = 2 * 8192  # a block's two RMSNorms, whole on every tensor-parallel rank
    measured = ch11_lab.rank0_2d.measure()
    assert measured["model states"] == pytest.approx(16 * psi / 64, rel=1e-3)
    assert measured["a gathered block"] == 2 * ((block - norms) // 8 + norms)
    assert ch11_lab.measure_at_scale().n_params == psi
    # the embedding and head kept whole by tensor parallelism: 16 bytes x 2 V h over 8 more
    whole = {"model states": 16 * ((psi - 2 * 32000 * 8192) / 64 + 2 * 32000 * 8192 / 8),
             "a gathered block": measured["a gathered block"]}
    assert not ch11_lab.rank0_2d.check(whole).passed
    assert not ch11_lab.rank0_2d.check(sum(measured.values())).passed  # components asked
