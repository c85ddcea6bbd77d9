"""Chapter 9's lab: wrong answers, written as a learner might, that its checkers must recognise;
the references agree with the ZeRO paper, with DDP's step, and with the formulas the prediction
measures."""

import pytest
import torch
import torch.distributed as dist

from course_lib.chapters import ch09_lab


def in_bits(n_params, world_size, stage):
    n = world_size
    return {"weights": 16 * n_params / (n if stage == 3 else 1),
            "gradients": 16 * n_params / (n if stage >= 2 else 1),
            "master weights": 32 * n_params / (n if stage >= 1 else 1),
            "optimizer states": 64 * n_params / (n if stage >= 1 else 1)}


def no_master(n_params, world_size, stage):
    n = world_size
    return {"weights": 2 * n_params / (n if stage == 3 else 1),
            "gradients": 2 * n_params / (n if stage >= 2 else 1),
            "master weights": 0,
            "optimizer states": 8 * n_params / (n if stage >= 1 else 1)}


def weights_in_stage_1(n_params, world_size, stage):
    n = world_size
    return {"weights": 2 * n_params / (n if stage >= 1 else 1),
            "gradients": 2 * n_params / (n if stage >= 2 else 1),
            "master weights": 4 * n_params / (n if stage >= 1 else 1),
            "optimizer states": 8 * n_params / (n if stage >= 1 else 1)}


def never_divided(n_params, world_size, stage):
    return {"weights": 2 * n_params, "gradients": 2 * n_params,
            "master weights": 4 * n_params, "optimizer states": 8 * n_params}


def sums(params, grad, lr):
    rank, world = dist.get_rank(), dist.get_world_size()
    pad = -len(params) % world
    flat, grads = torch.cat([params, torch.zeros(pad)]), torch.cat([grad, torch.zeros(pad)])
    total = torch.empty(len(flat) // world)
    dist.reduce_scatter(total, list(grads.chunk(world)))
    shard = flat.chunk(world)[rank].clone()
    shard.grad = total  # not divided by the world size
    torch.optim.AdamW([shard], lr=lr, weight_decay=0.0).step()
    pieces = [torch.empty_like(shard) for _ in range(world)]
    dist.all_gather(pieces, shard.detach())
    return torch.cat(pieces)[:len(params)]


def own_gradient(params, grad, lr):
    rank, world = dist.get_rank(), dist.get_world_size()
    pad = -len(params) % world
    flat, grads = torch.cat([params, torch.zeros(pad)]), torch.cat([grad, torch.zeros(pad)])
    shard = flat.chunk(world)[rank].clone()
    shard.grad = grads.chunk(world)[rank].clone()  # no reduce-scatter
    torch.optim.AdamW([shard], lr=lr, weight_decay=0.0).step()
    pieces = [torch.empty_like(shard) for _ in range(world)]
    dist.all_gather(pieces, shard.detach())
    return torch.cat(pieces)[:len(params)]


def no_gather(params, grad, lr):
    rank, world = dist.get_rank(), dist.get_world_size()
    pad = -len(params) % world
    flat, grads = torch.cat([params, torch.zeros(pad)]), torch.cat([grad, torch.zeros(pad)])
    mean = torch.empty(len(flat) // world)
    dist.reduce_scatter(mean, list(grads.chunk(world)))
    shard = flat.chunk(world)[rank]  # a view: updated in place, the other shards stay old
    shard.grad = mean / world
    with torch.no_grad():
        torch.optim.AdamW([shard], lr=lr, weight_decay=0.0).step()
    return flat[:len(params)]


WRONG = {"zero_bytes": {"bits for bytes": in_bits, "a forgotten FP32 master copy": no_master,
                        "sharding the parameters in stage 1": weights_in_stage_1,
                        "not dividing by N": never_divided},
         "zero2_step": {"summing gradients instead of averaging": sums,
                        "no reduce-scatter": own_gradient, "no all-gather": no_gather}}


def test_the_reference_gives_the_zero_papers_figure_1():
    gb = [sum(ch09_lab.zero_bytes.reference(7.5e9, 64, s).values()) / 1e9 for s in range(4)]
    assert [round(x, 1) for x in gb] == [120.0, 31.4, 16.6, 1.9]
    assert ch09_lab.zero_bytes.reference(10, 3, 3)["weights"] == 20 / 3


def ddp_step(params, grad, lr):
    """What DDP does: all-reduce the mean gradient, AdamW on the whole parameters."""
    mean = grad.clone()
    dist.all_reduce(mean)
    p = params.clone()
    p.grad = mean / dist.get_world_size()
    torch.optim.AdamW([p], lr=lr, weight_decay=0.0).step()
    return p


def test_the_zero2_reference_takes_ddps_step():
    feedback = ch09_lab.zero2_step.check(ddp_step)
    assert feedback.passed, feedback.message


def test_each_rank_holds_the_formulas_bytes():
    psi = 2 * 512 * 512
    assert ch09_lab.zero_held.measure() == {"ZeRO-1": 12.0 * psi, "ZeRO-2": 10.0 * psi,
                                            "ZeRO-3": 8.0 * psi}


def test_rank_0_of_64_holds_fp32_shards_and_grades_each_component():
    """Issue 38: the prediction at full size, measured on fake ranks."""
    psi, n = 1_071_681_536, 64
    measured = ch09_lab.rank0_at_scale.measure()
    assert measured == pytest.approx({"parameters": 4 * psi / n, "gradients": 4 * psi / n,
                                      "optimizer states": 8 * psi / n}, rel=1e-3)
    assert ch09_lab.measure_at_scale().n_params == psi
    # The right total split as BF16 mixed-precision accounting splits it: wrong per part.
    bf16 = {"parameters": 2 * psi / n, "gradients": 2 * psi / n,
            "optimizer states": 12 * psi / n}
    feedback = ch09_lab.rank0_at_scale.check(bf16)
    assert not feedback.passed and "BF16" in feedback.misconception
    assert not ch09_lab.rank0_at_scale.check(16 * psi / n).passed  # components asked
