"""The ring all-reduce of chapter 8 (course_lib.parallel.ring): its schedule (every rank sends
2 (N - 1) chunks to its right-hand neighbour, and replaying it on sets of contributions leaves every
rank with every chunk summed over all ranks), and, marked slow, the real ring on 3 gloo processes
with uneven chunks: the same sum as ``dist.all_reduce`` and the traffic of the cost model."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from course_lib.parallel import cost_model, launch, ring

WORLDS = range(1, 7)


@pytest.mark.parametrize("n", WORLDS)
def test_every_rank_sends_two_n_minus_one_chunks_to_its_right(n):
    rows = ring.ring_schedule(n)
    assert len(rows) == 2 * (n - 1) * n
    expected = {r: 2 * (n - 1) for r in range(n)} if n > 1 else {}
    assert Counter(sender for _, _, sender, _, _ in rows) == Counter(expected)
    assert all(receiver == (sender + 1) % n for _, _, sender, _, receiver in rows)
    assert all(0 <= chunk < n for _, _, _, chunk, _ in rows)


@pytest.mark.parametrize("n", WORLDS)
def test_each_chunk_travels_n_minus_one_times_per_phase_once_per_step(n):
    rows = ring.ring_schedule(n)
    for phase in ("reduce-scatter", "all-gather"):
        mine = [r for r in rows if r[0] == phase]
        assert Counter(chunk for *_, chunk, _ in mine) == Counter({c: n - 1 for c in range(n)} if n > 1 else {})
        for step in range(n - 1):  # in one step every rank sends once, and every chunk moves once
            at_step = [r for r in mine if r[1] == step]
            assert sorted(r[2] for r in at_step) == list(range(n))
            assert sorted(r[3] for r in at_step) == list(range(n))
    assert {r[0] for r in rows} <= {"reduce-scatter", "all-gather"}


@pytest.mark.parametrize("n", WORLDS)
def test_replaying_the_schedule_sums_every_chunk_on_every_rank(n):
    """Rank r starts with its own contribution {r} to every chunk. Reduce-scatter adds what arrives
    (the union), all-gather replaces it; all transfers of a step use the state before the step."""
    held = [[{rank} for _ in range(n)] for rank in range(n)]
    rows = ring.ring_schedule(n)
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(n - 1):
            before = [[set(c) for c in chunks] for chunks in held]
            for _, _, sender, chunk, receiver in (r for r in rows if r[:2] == (phase, step)):
                if phase == "reduce-scatter":
                    held[receiver][chunk] = before[receiver][chunk] | before[sender][chunk]
                else:
                    held[receiver][chunk] = before[sender][chunk]
        if phase == "reduce-scatter":  # each chunk is complete on exactly one rank: (chunk - 1) mod n
            for chunk in range(n):
                complete = [r for r in range(n) if held[r][chunk] == set(range(n))]
                assert complete == [(chunk - 1) % n]
    assert all(c == set(range(n)) for chunks in held for c in chunks)


@pytest.mark.parametrize("n", [0, -2, True, 2.0, "3"])
def test_bad_world_size_is_refused(n):
    with pytest.raises(ValueError, match="world_size must be a whole number >= 1"):
        ring.ring_schedule(n)


def test_the_chunks_of_all_ranks_add_up_to_twice_n_minus_one_tensors():
    """The identity the slow test checks: with tensor_split's uneven chunks, rank r sends chunks r and
    r - 1 (reduce-scatter) and r + 1 and r (all-gather); over all ranks each chunk goes 2 (N - 1) times."""
    for n in WORLDS:
        for numel in (1, 7, 1001, 1002):
            sizes = [len(c) for c in torch.arange(numel).tensor_split(n)]
            per_rank = [sum(sizes[chunk] for _, _, sender, chunk, _ in ring.ring_schedule(n) if sender == r)
                        for r in range(n)]
            assert sum(per_rank) == 2 * (n - 1) * numel
            for sent in per_rank:  # within one element per transfer of the model's even share
                assert abs(sent - cost_model.ring_allreduce_bytes(numel, n)) <= 2 * (n - 1)


@pytest.mark.slow
def test_ring_on_three_processes_matches_all_reduce_and_the_cost_model():
    n, numel = 3, 1001  # 1001 = 334 + 334 + 333: uneven chunks
    results = launch.launch("course_lib.parallel.ring:check_against_all_reduce", n,
                            {"numel": numel, "seed": 0}, timeout=120, echo=False)
    assert [r.rank for r in results] == list(range(n))
    tensor_bytes = results[0].tensor_bytes
    assert tensor_bytes == numel * 4
    ulp = torch.finfo(torch.float32).eps
    for r in results:
        assert r.world_size == n
        assert r.integers_equal is True  # float64 sums of integers: exact in any order
        assert r.max_abs_difference <= 4 * ulp * r.max_abs_value
        assert abs(r.bytes_sent - cost_model.ring_allreduce_bytes(tensor_bytes, n)) <= 3 * 4
        assert torch.equal(r.sum, results[0].sum)  # dist.all_reduce: the same bits everywhere
    assert sum(r.bytes_sent for r in results) == 2 * (n - 1) * tensor_bytes
