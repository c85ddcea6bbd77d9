"""Expert parallelism of chapter 12 (course_lib.parallel.experts): the all-to-all split sizes, the
capacity queue, the mixture-of-experts layer against a token-by-token dense reference (dropped
tokens included), Switch's auxiliary loss against its formula, node-limited routing and what it
saves on the links between nodes, bad degrees refused before any rank starts, and, marked slow,
the layer spread over 2 gloo ranks equal to one process in outputs and gradients."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import refusal
from course_lib.parallel import context_parallel, cost_model, launch
from course_lib.parallel import experts as ex

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TIGHT = 1e-12  # float64


def test_split_sizes_count_the_rows_for_each_ranks_experts():
    # 8 experts on 4 ranks: experts 0-1 on rank 0, 2-3 on rank 1, ...
    assert ex.split_sizes(torch.tensor([0, 1, 1, 2, 7, 7, 7]), 8, 4) == [3, 1, 0, 3]
    assert ex.split_sizes(torch.tensor([], dtype=torch.long), 8, 2) == [0, 0]


@settings(max_examples=30, deadline=None)
@given(ep=st.sampled_from([1, 2, 4]), per=st.integers(1, 3),
       rows=st.lists(st.integers(0, 11), max_size=40))
def test_split_sizes_agree_with_counting_row_by_row(ep, per, rows):
    experts = ep * per
    rows = [r % experts for r in rows]
    counted = [0] * ep
    for e in rows:
        counted[e // per] += 1
    assert ex.split_sizes(torch.tensor(rows, dtype=torch.long), experts, ep) == counted


def test_split_sizes_refuse_experts_that_do_not_split():
    with pytest.raises(ValueError, match="multiple of 4"):
        ex.split_sizes(torch.tensor([0, 1]), 6, 4)


def queue_by_hand(chosen: list[list[int]], capacity: int) -> list[list[bool]]:
    """GShard's order, one assignment at a time: all first choices, then all second ones."""
    taken: dict[int, int] = {}
    kept = [[False] * len(row) for row in chosen]
    for slot in range(len(chosen[0])):
        for token, row in enumerate(chosen):
            e = row[slot]
            if taken.get(e, 0) < capacity:
                taken[e] = taken.get(e, 0) + 1
                kept[token][slot] = True
    return kept


def test_first_choices_queue_before_second_choices():
    chosen = torch.tensor([[0, 1], [1, 0], [0, 1]])  # capacity 1: token 0 gets 0, token 1 gets 1
    kept = ex.keep_within_capacity(chosen, 2, 1)
    assert kept.tolist() == [[True, False], [True, False], [False, False]]


@settings(max_examples=30, deadline=None)
@given(data=st.data(), experts=st.integers(2, 5), capacity=st.integers(0, 4))
def test_the_capacity_queue_matches_serving_assignments_one_by_one(data, experts, capacity):
    k = data.draw(st.integers(1, experts))
    tokens = data.draw(st.integers(1, 8))
    chosen = [data.draw(st.permutations(range(experts)))[:k] for _ in range(tokens)]
    kept = ex.keep_within_capacity(torch.tensor(chosen), experts, capacity)
    assert kept.tolist() == queue_by_hand(chosen, capacity)


def dense_reference(layer: ex.MixtureOfExperts, x: torch.Tensor, groups: int) -> torch.Tensor:
    """Token by token: route, queue, and add each kept expert's gated output."""
    out = torch.zeros_like(x)
    for g, xg in enumerate(x.chunk(groups)):
        probs = torch.softmax(xg @ layer.router, -1)
        capacity = math.ceil(layer.capacity_factor * xg.shape[0] * layer.k / layer.experts)
        chosen = [torch.argsort(p + layer.bias, descending=True)[:layer.k].tolist()
                  for p in probs]
        kept = queue_by_hand(chosen, capacity)
        for t in range(xg.shape[0]):
            for slot, e in enumerate(chosen[t]):
                if kept[t][slot]:
                    hidden = F.gelu(xg[t] @ layer.w_in[e]) @ layer.w_out[e]
                    out[g * xg.shape[0] + t] += probs[t, e] * hidden
    return out


@pytest.mark.parametrize("capacity_factor, groups, skew", [(100.0, 1, 0.0), (1.0, 1, 0.0),
                                                           (0.5, 2, 0.0), (1.0, 2, 0.3)])
def test_the_layer_equals_a_token_by_token_reference(capacity_factor, groups, skew):
    layer = ex.MixtureOfExperts(6, 10, 4, k=2, capacity_factor=capacity_factor, seed=1).double()
    layer.bias.copy_(skew * torch.arange(4.0))
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    result = layer(x, groups)
    dropped = int((~result.kept).sum())
    assert (dropped == 0) == (capacity_factor == 100.0)  # the small factors do drop
    with torch.no_grad():
        assert (result.output - dense_reference(layer, x, groups)).abs().max() < TIGHT


def test_a_dropped_token_gets_nothing_from_that_expert():
    layer = ex.MixtureOfExperts(4, 8, 2, k=1, capacity_factor=0.5, seed=3).double()
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    result = layer(x)
    assert int(result.kept.sum()) <= 2 * ex.expert_capacity(8, 2, 1, 0.5)
    gone = ~result.kept[:, 0]
    assert gone.any() and torch.equal(result.output[gone], torch.zeros_like(result.output[gone]))


def test_the_auxiliary_loss_is_switchs_formula():
    g = torch.Generator().manual_seed(5)
    probs = torch.softmax(torch.randn(12, 4, generator=g, dtype=torch.float64), -1)
    chosen = probs.topk(1, -1).indices
    f = torch.tensor([(chosen == e).double().mean() for e in range(4)])
    switch = 4 * sum(f[e] * probs[:, e].mean() for e in range(4))  # alpha N sum f_i P_i
    assert abs(ex.load_balancing_loss(probs, chosen, 4) - switch) < TIGHT
    uniform = torch.full((8, 4), 0.25, dtype=torch.float64)
    assert ex.load_balancing_loss(uniform, torch.arange(8)[:, None] % 4, 4) == pytest.approx(1)
    logits = torch.randn(8, 4, generator=g, dtype=torch.float64) + torch.tensor([4, 0, 0, 0])
    skewed = torch.softmax(logits, -1)  # almost every token to expert 0: towards E = 4
    assert ex.load_balancing_loss(skewed, skewed.topk(1, -1).indices, 4) > 3


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), limit=st.integers(1, 4))
def test_node_limited_routing_reaches_at_most_m_nodes(seed, limit):
    logits = torch.randn(64, 16, generator=torch.Generator().manual_seed(seed))
    _, chosen, gates = ex.route(logits, 4, nodes=4, node_limit=limit)
    reached = [len(set((row // 4).tolist())) for row in chosen]
    assert max(reached) <= limit
    _, free, _ = ex.route(logits, 4)  # without the limit some token goes further
    assert limit == 4 or max(len(set((row // 4).tolist())) for row in free) > limit
    assert torch.equal(gates, torch.softmax(logits, -1).gather(1, chosen))


def test_node_limited_routing_saves_bytes_and_time_on_the_network():
    t = ex.node_traffic(tokens=512, hidden=64, experts=64, k=8, nodes=8, node_limit=4)
    assert t.nodes_per_token[1] <= 4 and t.nodes_per_token[0] > t.nodes_per_token[1]
    assert t.bytes[1] < t.bytes[0] and t.seconds[1] < t.seconds[0]
    assert t.bytes[0] == pytest.approx(t.nodes_per_token[0] * 512 * 64)
    link = cost_model.get_link("InfiniBand NDR")
    assert t.seconds[0] == pytest.approx(7 * link.latency + t.bytes[0] / link.bandwidth)


@pytest.mark.parametrize("args, words", [
    ((8, 9, 1.0, 1), "top-k 9 is larger than the 8 experts"),
    ((8, 2, 0.0, 1), "capacity factor must be a positive"),
    ((8, 2, -1.0, 1), "capacity factor must be a positive"),
    ((6, 2, 1.0, 4), "multiple of 4"),
    ((8, 2, 1.0, 1, 4, 5), "node_limit must be"),
    ((8, 4, 1.0, 1, 4, 1), "raise node_limit or lower k")])
def test_bad_layers_and_degrees_are_refused_before_any_rank_starts(args, words, monkeypatch):
    with pytest.raises(ValueError, match=words):
        ex.check_moe(*args)
    monkeypatch.setattr(launch, "launch", lambda *a, **k: pytest.fail("a rank was started"))
    run = dict(zip(("experts", "k", "capacity_factor"), args[:3]))
    if len(args) > 4:
        run.update(nodes=args[4], node_limit=args[5])
    with pytest.raises(ValueError, match=words):
        ex.launch_ep_check(args[3] if args[3] > 1 else 2, [run])


def test_the_torchrun_script_refuses_experts_that_do_not_split(ranks, capsys):
    ranks(3)
    err = refusal(ex.main, ["--experts", "8"], capsys)
    assert "--experts 8" in err and "on 3 ranks" in err and "multiple of 3" in err


@pytest.mark.slow
def test_the_layer_on_two_ranks_equals_one_process_dropped_tokens_included():
    runs = [{"capacity_factor": 1.0}, {"capacity_factor": 100.0, "skew": 1.0, "experts": 8},
            {"experts": 8, "nodes": 2, "node_limit": 1, "capacity_factor": 0.75}]
    per_rank = ex.launch_ep_check(2, runs, timeout=120)
    for i, run in enumerate(runs):
        results = [per_rank[rank][i] for rank in range(2)]
        for r in results:
            assert max(r.gaps.values()) < TIGHT, (run, r.gaps)
            assert set(r.gaps) >= {"output", "aux loss", "grad x", "grad router", "grad w_in"}
            t = r.traffic
            assert t.dropped == r.dropped_reference
            assert t.dispatch_bytes == (t.assignments - t.dropped) * 8 * 8 <= r.bytes_bound
        assert sum(r.traffic.combine_bytes for r in results) == \
            sum(r.traffic.dispatch_bytes for r in results)  # every row comes back
    assert per_rank[0][0].traffic.dropped > 0  # capacity 1.0 drops some
    loads = [per_rank[rank][1].traffic.rows_received for rank in range(2)]
    assert context_parallel.load_imbalance(loads) > 1.5  # the skewed router
