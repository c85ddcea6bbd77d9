"""The alpha-beta cost model of chapter 8: ring all-reduce time and traffic, the DDP step model,
the links' cited figures, and fitting alpha and beta to measured times (chapter 10)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.parallel import cost_model as cm
from course_lib.parallel.cost_model import LINKS, Link

BIB = Path(__file__).resolve().parents[1] / "book" / "references.bib"
BIB_TEXT = BIB.read_text(encoding="utf-8")
BIB_KEYS = set(re.findall(r"^@\w+\{([^,\s]+),", BIB_TEXT, re.MULTILINE))

NVLINK4 = LINKS["NVLink 4 (H100)"]
FAST = Link("very fast", bandwidth=1e30, latency=0.0, source="nccl_docs")


# --- ring all-reduce -----------------------------------------------------------------------------

def test_one_rank_costs_nothing():
    assert cm.ring_allreduce_time(1e9, 1, NVLINK4) == 0
    assert cm.ring_allreduce_bytes(1e9, 1) == 0


def test_ring_time_by_hand():
    link = Link("toy", bandwidth=1e9, latency=1e-6, source="nccl_docs")
    # N = 4: 6 steps of 1 us, and 2 * 3/4 * 8e6 bytes at 1 GB/s = 12 ms.
    assert cm.ring_allreduce_time(8e6, 4, link) == pytest.approx(6e-6 + 12e-3)
    by_name = cm.ring_allreduce_time(8e6, 4, "NVLink 4 (H100)")
    assert by_name == cm.ring_allreduce_time(8e6, 4, NVLINK4)


def test_bandwidth_term_tends_to_twice_the_tensor_over_bandwidth():
    no_latency = Link("no latency", bandwidth=100e9, latency=0.0, source="nccl_docs")
    size = 1e9
    limit = 2 * size / no_latency.bandwidth
    times = [cm.ring_allreduce_time(size, n, no_latency) for n in (2, 8, 64, 4096)]
    assert times == sorted(times) and all(t < limit for t in times)
    assert times[0] == pytest.approx(limit / 2)
    assert times[-1] == pytest.approx(limit, rel=1e-3)


def test_latency_term_grows_linearly_with_ranks():
    empty = [cm.ring_allreduce_time(0, n, NVLINK4) for n in (2, 3, 9)]
    assert empty == pytest.approx([2 * k * NVLINK4.latency for k in (1, 2, 8)])


@pytest.mark.parametrize("n, factor", [(1, 0), (2, 1), (4, 1.5), (8, 1.75), (16, 1.875)])
def test_ring_bytes_examples(n, factor):
    assert cm.ring_allreduce_bytes(1000, n) == pytest.approx(factor * 1000)


@settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 10**12), n=st.integers(1, 10_000))
def test_ring_bytes_formula(size, n):
    sent = cm.ring_allreduce_bytes(size, n)
    assert sent == pytest.approx(2 * (n - 1) / n * size)
    assert 0 <= sent < 2 * size or size == 0


# --- the DDP step --------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(compute=st.floats(1e-4, 10), grad=st.floats(0, 1e11), n=st.integers(1, 4096),
       link=st.sampled_from(sorted(LINKS)), overlap=st.floats(0, 1))
def test_efficiency_at_most_one_and_exposed_at_most_communication(compute, grad, n, link, overlap):
    s = cm.data_parallel_step(compute, grad, n, link, overlap=overlap)
    assert 0 < s.efficiency <= 1
    assert s.speedup == pytest.approx(n * s.efficiency)
    assert 0 <= s.exposed <= s.communication * (1 + 1e-12)
    assert s.step == pytest.approx(s.compute + s.exposed)


def test_single_gpu_is_the_baseline():
    s = cm.data_parallel_step(0.2, 4e9, 1, "InfiniBand HDR")
    assert (s.communication, s.exposed, s.efficiency, s.speedup) == (0, 0, 1, 1)


def test_huge_bandwidth_scales_perfectly():
    s = cm.data_parallel_step(0.1, 4e9, 512, FAST)
    assert s.efficiency == pytest.approx(1) and s.speedup == pytest.approx(512)


def test_without_overlap_everything_is_exposed():
    s = cm.data_parallel_step(0.1, 1e9, 8, "PCIe 4.0 x16", overlap=0)
    assert s.exposed == pytest.approx(s.communication)
    # 40 buckets of 25 MiB (the last one smaller), each a ring all-reduce paying its own latency.
    buckets = -(-1e9 // cm.DDP_BUCKET_BYTES)
    link = LINKS["PCIe 4.0 x16"]
    expected = buckets * 14 * link.latency + 1.75 * 1e9 / link.bandwidth
    assert s.communication == pytest.approx(expected)


def test_long_compute_hides_all_but_the_last_bucket():
    s = cm.data_parallel_step(100.0, 1e9, 8, NVLINK4)
    assert s.exposed == pytest.approx(cm.ring_allreduce_time(cm.DDP_BUCKET_BYTES, 8, NVLINK4))
    small = cm.data_parallel_step(100.0, 1e9, 8, NVLINK4, bucket_bytes=1e3)
    assert small.exposed == pytest.approx(cm.ring_allreduce_time(1e3, 8, NVLINK4))
    assert small.exposed < 1e-4 and small.efficiency > 0.999999


def test_short_compute_exposes_the_rest():
    # 10 ms of compute, 1 GB of gradients on PCIe 4.0: communication far exceeds what hides.
    s = cm.data_parallel_step(0.01, 1e9, 8, "PCIe 4.0 x16")
    last = cm.ring_allreduce_time(cm.DDP_BUCKET_BYTES, 8, "PCIe 4.0 x16")
    assert s.exposed == pytest.approx(s.communication - 2 / 3 * 0.01)
    assert s.exposed > last and s.efficiency < 0.2


def test_faster_links_scale_better():
    order = ["Ethernet 100G", "InfiniBand HDR", "PCIe 4.0 x16", "InfiniBand NDR", "PCIe 5.0 x16",
             "NVLink 3 (A100)", "NVLink 4 (H100)"]
    eff = [cm.data_parallel_step(0.05, 2e9, 16, name).efficiency for name in order]
    assert eff == sorted(eff)


# --- the links -----------------------------------------------------------------------------------

def test_link_figures_match_the_datasheets():
    per_direction = {  # bytes per second that one GPU sends (half of a "both directions" figure)
        "PCIe 4.0 x16": 64e9 / 2,     # A100 datasheet: PCIe Gen4 64 GB/s
        "PCIe 5.0 x16": 128e9 / 2,    # H100 datasheet: PCIe Gen5 128 GB/s
        "NVLink 3 (A100)": 600e9 / 2,  # A100 SXM: 600 GB/s
        "NVLink 4 (H100)": 900e9 / 2,  # H100 SXM: 900 GB/s
        "InfiniBand HDR": 200e9 / 8,   # 200 Gb/s per port and direction
        "InfiniBand NDR": 400e9 / 8,   # 400 Gb/s
        "RoCE 400G": 400e9 / 8,        # Llama 3 405B: RoCE at 400 Gb/s per GPU
        "Ethernet 100G": 100e9 / 8,
    }
    assert {name: link.bandwidth for name, link in LINKS.items()} == per_direction
    assert all(name == link.name for name, link in LINKS.items())


def test_latencies_are_microseconds_and_explained():
    for link in LINKS.values():
        assert 1e-7 < link.latency < 1e-4, link.name
        assert link.latency_source or "assumption" in link.note, link.name


def test_every_source_is_in_the_bibliography():
    for link in LINKS.values():
        assert link.source in BIB_KEYS, (link.name, link.source)
        assert not link.latency_source or link.latency_source in BIB_KEYS, link.name
    for key in ("patarasuk2009allreduce", "nccl_docs", "pytorch_torchrun_docs"):
        assert key in BIB_KEYS


# --- bad inputs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: cm.ring_allreduce_time(-1, 2, NVLINK4), "n_bytes must be a number of bytes >= 0"),
    (lambda: cm.ring_allreduce_time(1, 0, NVLINK4), "world_size must be a whole number >= 1"),
    (lambda: cm.ring_allreduce_bytes(1, 2.5), "world_size must be a whole number"),
    (lambda: cm.ring_allreduce_bytes(float("nan"), 2), "n_bytes"),
    (lambda: cm.ring_allreduce_bytes("1e9", 2), "n_bytes must be a number of bytes"),
    (lambda: cm.ring_allreduce_time(1, 2, "NVLink 9"), "unknown link 'NVLink 9'; pass a Link"),
    (lambda: cm.data_parallel_step(0, 1, 2, NVLINK4), "compute_seconds must be"),
    (lambda: cm.data_parallel_step(0.1, -5, 2, NVLINK4), "grad_bytes must be"),
    (lambda: cm.data_parallel_step(0.1, 1, 2, NVLINK4, overlap=1.5), "between 0 and 1"),
    (lambda: cm.data_parallel_step(0.1, 1, 2, NVLINK4, bucket_bytes=0), "bucket_bytes must be > 0"),
    (lambda: Link("bad", 0, 1e-6, "nccl_docs"), "bandwidth must be a positive number"),
    (lambda: Link("bad", 1e9, -1, "nccl_docs"), "latency must be seconds >= 0"),
])
def test_bad_inputs_say_what_to_pass(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_numpy_numbers_are_accepted():
    np = pytest.importorskip("numpy")
    assert cm.ring_allreduce_bytes(np.float64(1000), np.int64(4)) == pytest.approx(1500)


# --- fitting alpha and beta to measured times (chapter 10) ----------------------------------------

FIT_SIZES = [4 * 4**k * 1024 for k in range(8)]  # 4 KiB to 64 MiB


@pytest.mark.parametrize("name", ["PCIe 4.0 x16", "NVLink 4 (H100)", "Ethernet 100G"])
@pytest.mark.parametrize("world", [2, 8])
@pytest.mark.parametrize("relative", [True, False])
def test_fit_recovers_alpha_and_beta_of_exact_times(name, world, relative):
    link = LINKS[name]
    times = [cm.ring_allreduce_time(s, world, link) for s in FIT_SIZES]
    fitted = cm.fit_alpha_beta(FIT_SIZES, times, world, relative=relative)
    assert fitted.latency == pytest.approx(link.latency, rel=1e-6)
    assert fitted.bandwidth == pytest.approx(link.bandwidth, rel=1e-9)
    assert fitted.name == "measured" and "8 all-reduce times" in fitted.note
    for s in FIT_SIZES:  # it plugs back into the model
        assert cm.ring_allreduce_time(s, world, fitted) == pytest.approx(
            cm.ring_allreduce_time(s, world, link), rel=1e-6)


@pytest.mark.parametrize("world", [2, 8])
def test_fit_with_five_percent_noise_is_close(world):
    import random

    rng = random.Random(world)
    link = LINKS["InfiniBand NDR"]
    sizes = FIT_SIZES * 3  # three noisy times per size
    times = [cm.ring_allreduce_time(s, world, link) * (1 + rng.uniform(-0.05, 0.05)) for s in sizes]
    fitted = cm.fit_alpha_beta(sizes, times, world)
    assert fitted.latency == pytest.approx(link.latency, rel=0.15)
    assert fitted.bandwidth == pytest.approx(link.bandwidth, rel=0.05)


def test_relative_fit_gets_the_latency_that_a_plain_fit_misses():
    link = Link("toy", bandwidth=10e9, latency=20e-6, source="nccl_docs")
    times = [cm.ring_allreduce_time(s, 2, link) for s in FIT_SIZES]
    times[-1] *= 1.01  # 1 % noise on the largest message only
    relative = cm.fit_alpha_beta(FIT_SIZES, times, 2)
    plain = cm.fit_alpha_beta(FIT_SIZES, times, 2, relative=False)
    assert relative.latency == pytest.approx(link.latency, rel=0.02)
    assert abs(plain.latency - link.latency) > 10 * abs(relative.latency - link.latency)


@settings(max_examples=100, deadline=None)
@given(alpha=st.floats(1e-7, 1e-3), beta=st.floats(1e8, 1e12), world=st.integers(2, 1024))
def test_fit_inverts_the_ring_model(alpha, beta, world):
    link = Link("any", bandwidth=beta, latency=alpha, source="nccl_docs")
    times = [cm.ring_allreduce_time(s, world, link) for s in FIT_SIZES]
    fitted = cm.fit_alpha_beta(FIT_SIZES, times, world)
    assert fitted.latency == pytest.approx(alpha, rel=1e-5)
    assert fitted.bandwidth == pytest.approx(beta, rel=1e-6)


def test_negative_intercept_is_clamped_and_said():
    # Times proportional to size, less a little: the line crosses zero below the origin.
    times = [s / 1e9 - 1e-7 for s in FIT_SIZES]
    fitted = cm.fit_alpha_beta(FIT_SIZES, times, 4, name="noisy")
    assert fitted.latency == 0 and fitted.name == "noisy"
    assert "set to 0" in fitted.note
    assert fitted.bandwidth == pytest.approx(2 * 3 / 4 * 1e9, rel=0.01)


@pytest.mark.parametrize("call, message", [
    (lambda: cm.fit_alpha_beta([1e3, 1e6], [1e-5], 2), "same length"),
    (lambda: cm.fit_alpha_beta([1e3, 1e3], [1e-5, 2e-5], 2), "at least 2 distinct message sizes"),
    (lambda: cm.fit_alpha_beta([1e3], [1e-5], 2), "at least 2 distinct"),
    (lambda: cm.fit_alpha_beta([1e3, 1e6], [1e-5, 0], 2), "positive number of seconds"),
    (lambda: cm.fit_alpha_beta([1e3, 1e6], [1e-5, float("nan")], 2), "positive number of seconds"),
    (lambda: cm.fit_alpha_beta([1e3, -1], [1e-5, 1e-4], 2), "every size must be a number of bytes"),
    (lambda: cm.fit_alpha_beta([1e3, 1e6], [1e-5, 1e-4], 1), "world_size must be >= 2"),
    (lambda: cm.fit_alpha_beta([1e3, 1e6], [1e-5, 1e-4], 0), "world_size must be a whole number"),
    (lambda: cm.fit_alpha_beta("1e3", [1e-5], 2), "must be lists of numbers"),
    (lambda: cm.fit_alpha_beta([1e3, 1e6], [2e-4, 1e-4], 2), "do not grow with the message size"),
])
def test_fit_bad_inputs_say_what_to_pass(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --- the cluster: NVLink in a node, the network between, NCCL's algorithms ----------------------

H100_NDR = cm.Cluster("NVLink 4 (H100)", "InfiniBand NDR")


def test_inside_one_node_every_algorithm_is_the_nvlink_ring():
    for n in (2, 4, 8):
        for algorithm in (*cm.ALGORITHMS, "best"):
            assert cm.allreduce_time(1e8, n, H100_NDR, algorithm) == pytest.approx(
                cm.ring_allreduce_time(1e8, n, NVLINK4))


def test_cluster_ring_by_hand():
    nv, net = LINKS["NVLink 4 (H100)"], LINKS["InfiniBand NDR"]
    # 16 GPUs in 2 nodes: 30 steps, 2 of them across the network; bus bandwidth min(450, 8 x 50)
    expected = 28 * nv.latency + 2 * net.latency + 2 * 15 / 16 * 1e9 / 400e9
    assert cm.allreduce_time(1e9, 16, H100_NDR, "ring") == pytest.approx(expected)
    assert H100_NDR.bus_bandwidth(16) == 400e9 and H100_NDR.bus_bandwidth(8) == 450e9


def test_tree_and_hierarchical_by_hand():
    nv, net = LINKS["NVLink 4 (H100)"], LINKS["InfiniBand NDR"]
    tree = 2 * (7 * nv.latency + 6 * net.latency) + 2 * 1e6 / 400e9  # 64 nodes
    assert cm.allreduce_time(1e6, 512, H100_NDR, "tree") == pytest.approx(tree)
    hier = (2 * 7 * nv.latency + 2 * 7 / 8 * 1e6 / nv.bandwidth
            + 2 * 63 * net.latency + 2 * 63 / 64 * 1e6 / 8 / net.bandwidth)
    assert cm.allreduce_time(1e6, 512, H100_NDR, "hierarchical") == pytest.approx(hier)


def test_ring_latency_grows_with_n_and_the_tree_with_log_n():
    small = 1e3  # latency-bound
    ring = [cm.allreduce_time(small, n, H100_NDR, "ring") for n in (64, 128, 256, 512)]
    tree = [cm.allreduce_time(small, n, H100_NDR, "tree") for n in (64, 128, 256, 512)]
    ring_steps = [b - a for a, b in zip(ring, ring[1:])]
    assert ring_steps[1] > 1.9 * ring_steps[0] and ring_steps[2] > 1.9 * ring_steps[1]
    tree_steps = [b - a for a, b in zip(tree, tree[1:])]
    assert tree_steps == pytest.approx([2 * LINKS["InfiniBand NDR"].latency] * 3)


def test_best_is_the_fastest_and_the_default():
    for n in (8, 16, 512):
        times = [cm.allreduce_time(25 * 2**20, n, H100_NDR, a) for a in cm.ALGORITHMS]
        assert cm.allreduce_time(25 * 2**20, n, H100_NDR) == min(times)


def test_allgather_is_half_the_ring_allreduce():
    assert cm.allgather_time(1e9, 64, H100_NDR) == pytest.approx(
        cm.allreduce_time(1e9, 64, H100_NDR, "ring") / 2)


def test_the_cluster_reconciles_ddp_with_near_linear_scaling():
    compute = 6 * 1.5e9 * 8 * 1024 / (0.40 * 312e12)
    flat = cm.data_parallel_step(compute, 3e9, 512, "InfiniBand NDR").efficiency
    cluster = cm.data_parallel_step(compute, 3e9, 512, H100_NDR).efficiency
    assert flat < 0.5 and cluster > 0.99
    # the Link path of data_parallel_step is what it was: a flat ring over one link
    step = cm.data_parallel_step(compute, 3e9, 8, NVLINK4, overlap=0)
    assert step.communication == pytest.approx(
        114 * cm.ring_allreduce_time(cm.DDP_BUCKET_BYTES, 8, NVLINK4)
        + cm.ring_allreduce_time(3e9 - 114 * cm.DDP_BUCKET_BYTES, 8, NVLINK4))


def test_ring_time_of_each_collective():
    link = Link("toy", bandwidth=1e9, latency=1e-6, source="nccl_docs")
    assert cm.ring_time("all-reduce", 8e6, 4, link) == cm.ring_allreduce_time(8e6, 4, link)
    assert cm.ring_time("all-gather", 8e6, 4, link) == pytest.approx(3e-6 + 6e-3)
    assert cm.ring_time("reduce-scatter", 8e6, 4, link) == pytest.approx(3e-6 + 6e-3)
    assert cm.ring_time("broadcast", 8e6, 4, link) == pytest.approx(3e-6 + 8e-3)
    assert cm.ring_time("all-gather", 8e6, 1, link) == 0
    with pytest.raises(ValueError, match="kind must be"):
        cm.ring_time("gossip", 1, 2, link)


def test_queue_on_link_waits_for_ready_and_for_the_previous_transfer():
    assert cm.queue_on_link([0.0, 0.1, 5.0], [1.0, 1.0, 1.0]) == [1.0, 2.0, 6.0]
    assert cm.queue_on_link([], []) == []
    with pytest.raises(ValueError, match="one entry per transfer"):
        cm.queue_on_link([0.0], [])


def test_ethernet_differs_from_infiniband_in_bandwidth_only():
    ethernet, ndr = LINKS["Ethernet 100G"], LINKS["InfiniBand NDR"]
    assert ethernet.latency == ndr.latency and ethernet.bandwidth < ndr.bandwidth
    assert "without RDMA" not in ethernet.note and "RoCE" in ethernet.note


@pytest.mark.parametrize("call, message", [
    (lambda: cm.allreduce_time(1, 16, "NVLink 4 (H100)"), "cluster must be a cost_model.Cluster"),
    (lambda: cm.allreduce_time(1, 16, H100_NDR, "butterfly"), "algorithm must be one of"),
    (lambda: cm.Cluster("NVLink 9"), "unknown link 'NVLink 9'"),
    (lambda: cm.Cluster(gpus_per_node=0), "world_size must be a whole number >= 1"),
])
def test_cluster_bad_inputs_say_what_to_pass(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
