"""The link emulator: collectives slowed to a link's alpha-beta time, in DDP and FSDP2 too."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from course_lib.parallel import cost_model, launch, links

#: Measured = gloo's own time + the emulated delay, within this fraction of the prediction plus
#: SLACK seconds (a sleep's wake-up, a busy machine's scheduling).
TOLERANCE, SLACK = 0.25, 0.010


@pytest.fixture
def one_rank_group():
    """A gloo group of one process, in this process, removed afterwards."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(launch.free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_the_delay_is_the_ring_model_of_the_link_times_the_scale():
    emulator = links.LinkEmulator("InfiniBand NDR", world_size=64, scale=10)
    link = cost_model.LINKS["InfiniBand NDR"]
    expected = 10 * (2 * 63 * link.latency + 2 * 63 / 64 * 1e6 / link.bandwidth)
    assert emulator.predict("all-reduce", 1e6, 2) == pytest.approx(expected)
    # the group's own size is charged when no world_size is given
    assert links.LinkEmulator(link).predict("all-gather", 1e6, 4) == pytest.approx(
        3 * link.latency + 0.75 * 1e6 / link.bandwidth)


@pytest.mark.parametrize("kwargs, words", [({"link": "Token Ring"}, "unknown link"),
                                           ({"link": "Ethernet 100G", "scale": -1}, "scale"),
                                           ({"link": "Ethernet 100G", "world_size": 0},
                                            "world_size")])
def test_bad_arguments_say_what_to_pass(kwargs, words):
    with pytest.raises(ValueError, match=words):
        links.LinkEmulator(**kwargs)


def test_emulate_slows_all_reduce_and_puts_the_functions_back(one_rank_group):
    original = dist.all_reduce
    x = torch.ones(10)
    with pytest.raises(RuntimeError, match="inside"):
        with links.emulate("Ethernet 100G", world_size=8, scale=100) as emulator:
            assert dist.all_reduce is not original
            dist.all_reduce(x)
            work = dist.all_reduce(x, async_op=True)
            work.wait()
            raise RuntimeError("an error inside")
    assert dist.all_reduce is original
    first, second = emulator.records
    assert first.emulated == pytest.approx(100 * cost_model.ring_time("all-reduce", 40, 8,
                                                                        "Ethernet 100G"))
    assert first.seconds >= first.emulated and second.seconds >= second.emulated
    assert torch.equal(x, torch.ones(10))  # one rank: the sum is the tensor


def test_collectives_queue_on_the_link(one_rank_group):
    x, y = torch.ones(10), torch.ones(10)
    with links.emulate("Ethernet 100G", world_size=8, scale=100) as emulator:
        works = [dist.all_reduce(t, async_op=True) for t in (x, y)]
        for w in works:
            w.wait()
    first, second = emulator.records
    assert second.done >= first.done + second.emulated


def test_another_group_is_not_slowed(one_rank_group):
    other = dist.new_group([0])
    with links.emulate("Ethernet 100G", world_size=8, scale=100, group=other) as emulator:
        dist.all_reduce(torch.ones(10))  # the default group: not slowed
        assert emulator.records == []
        dist.all_reduce(torch.ones(10), group=other)
    assert len(emulator.records) == 1


def test_the_ddp_hook_averages_and_labels_every_bucket(one_rank_group):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 32))
    reference = [p.detach().clone() for p in model.parameters()]
    ddp_model = DistributedDataParallel(model, bucket_cap_mb=0.001)
    emulator = links.LinkEmulator("InfiniBand NDR", world_size=8, scale=100)
    ddp_model.register_comm_hook(emulator, links.allreduce_hook)
    for _ in range(2):
        ddp_model.zero_grad()
        ddp_model(torch.ones(2, 32)).sum().backward()
    plain = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 32))
    with torch.no_grad():
        for p, r in zip(plain.parameters(), reference):
            p.copy_(r)
    plain(torch.ones(2, 32)).sum().backward()
    for p, q in zip(model.parameters(), plain.parameters()):
        assert torch.equal(p.grad, q.grad)
    labels = [r.label for r in emulator.records]
    assert labels[0] == "0" and len(set(labels[1:])) > 1  # one bucket, then the rebuilt ones
    assert all(r.seconds >= r.emulated > 0 for r in emulator.records)
    emulator.close()


def test_measured_times_agree_with_the_alpha_beta_prediction():
    sizes = [4096, 1 << 20]
    per_rank = launch.launch("course_lib.parallel.links:time_collectives", 2,
                             {"link": "Ethernet 100G", "sizes": sizes, "world_size": 64,
                              "scale": 40, "repeats": 5}, echo=False, timeout=120)
    for t in per_rank[0]:
        assert t.emulated > 0.02  # the link dominates gloo's own time
        assert abs(t.measured - t.predicted) <= TOLERANCE * t.predicted + SLACK, t


def test_fsdp2_collectives_go_through_the_link():
    per_rank = launch.launch("course_lib.parallel.links:fsdp_step_transfers", 2,
                             {"link": "InfiniBand NDR", "world_size": 8, "scale": 100},
                             echo=False, timeout=120)
    kinds = {t.kind for t in per_rank[0]}
    assert {"all-gather", "reduce-scatter"} <= kinds
    assert all(t.seconds >= t.emulated > 0 for t in per_rank[0])
