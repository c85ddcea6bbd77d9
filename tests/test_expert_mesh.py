"""Chapter 12 on four ranks (course_lib.parallel.expert_mesh and context_memory): the
mixture-of-experts layer on a 2 x 2 mesh of data-parallel replicas by expert ranks equal to one
process (output, auxiliary loss, gradients of the input, router and experts), what autograd
saves for backward counted once per storage, bad meshes and degrees refused before any rank
starts, and, marked slow, one launch of four gloo ranks that checks the mesh and measures the
activations a context-parallel rank saves at cp = 1, 2 and 4: the ring's exactly 1/cp, the
all-gather's 1/cp but for the gathered keys and values, which are the whole sequence's."""

from __future__ import annotations

import pytest
import torch

from conftest import refusal
from course_lib.parallel import context_memory, expert_mesh, launch

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TIGHT = 1e-12  # float64
#: How close the terms that should fall as 1/cp must come to it (they are exact today).
MEMORY_TOLERANCE = 0.01


def test_a_storage_saved_twice_counts_once():
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    with context_memory.saved_for_backward() as saved:
        y = x[:2].sin() + x[2:].sin()  # saves two views of x's one storage
    assert saved.tensors == [((2, 8), 4 * 8 * 8)]  # the whole storage, once
    assert saved.total == 256
    y.sum().backward()  # the hooks leave the graph as it was
    assert torch.allclose(x.grad, x.detach().cos())


def test_saved_tensors_that_did_not_shrink_are_matched_in_order():
    one = context_memory.SavedTensors([((8,), 64), ((4, 8), 256), ((8, 8), 512)])
    half = context_memory.SavedTensors([((8,), 64), ((2, 8), 128), ((8, 8), 512)])
    assert half.as_large_as(one) == 64 + 512
    with pytest.raises(ValueError, match="not the same forward pass"):
        half.as_large_as(context_memory.SavedTensors([((8,), 64)]))


@pytest.mark.parametrize("nprocs, run, words", [
    (4, {"dp": 3}, "3 data-parallel replicas do not split 4 ranks"),
    (4, {"dp": 0}, "0 data-parallel replicas"),
    (4, {"dp": 1, "experts": 6}, "1 replicas x 4 expert-parallel ranks: 6 experts do not "
                                 "split across 4"),
    (4, {"dp": 2, "k": 5}, "top-k 5 is larger than the 4 experts"),
    (4, {"run": "memory"}, "one of mesh, cp memory"),
    (4, {"run": "cp memory", "degrees": [1, 3]}, "degree of 3 does not divide the 4 ranks"),
    (4, {"run": "cp memory", "seq_len": 30}, "multiple of 4"),
])
def test_bad_meshes_and_degrees_are_refused_before_any_rank_starts(nprocs, run, words,
                                                                   monkeypatch):
    monkeypatch.setattr(launch, "launch", lambda *a, **k: pytest.fail("a rank was started"))
    with pytest.raises(ValueError, match=words):
        expert_mesh.launch_ep_mesh_check(nprocs, [{}, run])


def test_the_torchrun_script_refuses_a_mesh_that_does_not_fit(ranks, capsys):
    ranks(4)
    err = refusal(expert_mesh.main, ["--dp", "3"], capsys)
    assert "--dp 3" in err and "do not split 4 ranks" in err
    ranks(6)
    err = refusal(expert_mesh.main, ["--dp", "2", "--experts", "8"], capsys)
    assert "2 replicas x 3 expert-parallel ranks" in err and "multiple of 3" in err


MESH_RUNS = [{"tokens": 16}, {"tokens": 16, "experts": 8, "skew": 1.0},
             {"tokens": 8, "dp": 4, "capacity_factor": 2.0}]
MEMORY_RUN = {"run": "cp memory", "seq_len": 128, "heads": 8, "kv_heads": 2, "head_dim": 24}


@pytest.fixture(scope="module")
def four_ranks():
    """One launch of 4 ranks: every mesh run, then the activation measurement."""
    return expert_mesh.launch_ep_mesh_check(4, [*MESH_RUNS, MEMORY_RUN], timeout=120)


@pytest.mark.slow
def test_the_mesh_on_four_ranks_equals_one_process(four_ranks):
    for i, run in enumerate(MESH_RUNS):
        ranks = [four_ranks[rank][i] for rank in range(4)]
        dp = run.get("dp", 2)
        ep, experts = 4 // dp, run.get("experts", 4)
        for r in ranks:
            assert set(r.gaps) == {"output", "aux loss", "grad x", "grad router",
                                   "grad w_in", "grad w_out"}
            assert r.max_gap < TIGHT, (run, r.rank, r.gaps)
            assert (r.dp, r.ep, r.dp_rank, r.ep_rank) == (dp, ep, r.rank // ep, r.rank % ep)
            assert r.ep_group == tuple(range(r.dp_rank * ep, (r.dp_rank + 1) * ep))
            assert r.dp_group == tuple(range(r.ep_rank, 4, ep))
            local = experts // ep
            assert r.experts_held == tuple(range(r.ep_rank * local, (r.ep_rank + 1) * local))
            assert r.router_grad_bytes == 8 * experts * 8  # (h, E) float64
            if ep == 1:  # every expert on the rank: no token leaves it
                assert r.traffic.dispatch_bytes_to_others == 0
        for replica in range(dp):  # each replica's EP group holds every expert once
            held = [e for r in ranks if r.dp_rank == replica for e in r.experts_held]
            assert sorted(held) == list(range(experts))


@pytest.mark.slow
def test_a_rank_saves_one_cpth_but_for_the_gathered_keys_and_values(four_ranks):
    s, heads, d, e = 128, 8, 24, 8
    for rank in range(4):
        one, *split = four_ranks[rank][-1]
        assert [m.cp for m in (one, *split)] == [1, 2, 4]
        assert [m.rank for m in split] == [rank % 2, rank]
        for m in split:
            ring = m.total("ring") * m.cp / one.total("ring")
            assert ring == pytest.approx(1, rel=MEMORY_TOLERANCE)
            kept = m.as_large_as(one, "all-gather")
            # the gathered K and V repeated to the query heads, and the index of the keys
            assert kept == 2 * heads * s * d * e + s * 8
            rest = (m.total("all-gather") - kept) * m.cp / (one.total("all-gather") - kept)
            assert rest == pytest.approx(1, rel=MEMORY_TOLERANCE)
            assert m.total("all-gather") * m.cp > 1.1 * one.total("all-gather")
