"""ZeRO-1 and ZeRO-2 by hand (course_lib.parallel.zero) and the wire counters of chapter 9
(course_lib.parallel.wire): the stage check, ZeroAdamW against torch's AdamW with the collectives
of one rank, the ring formulas (NCCL's and gloo's), TCP bytes counted on a real socket; and, marked
slow, two gloo ranks in float64: DDP and both stages bit for bit equal (the first gradient, whose
shards the stages keep, as well, and that gradient equal to one process's), the states each keeps,
every collective's bytes on the wire equal to the ring formula plus gloo's headers."""

from __future__ import annotations

import os
import socket
import struct
import threading

import pytest
import torch

from course_lib.chapters import ch09
from course_lib.parallel import ddp, fsdp, launch, lifetime, wire, zero

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --- checks of the input ---------------------------------------------------------------------------

@pytest.mark.parametrize("stage", [3, -1, True, "2", None])
def test_a_stage_outside_0_to_2_is_refused_pointing_to_fsdp(stage):
    with pytest.raises(ValueError, match=r"stage must be one of \[0, 1, 2\].*fully_shard"):
        zero.check_stage(stage)
    assert [zero.check_stage(s) for s in (0, 1, 2)] == [0, 1, 2]


@pytest.mark.parametrize(("kind", "size"), [("broadcast", 2), ("all-gather", 0), ("all-reduce", True)])
def test_ring_formula_refuses_what_it_does_not_know(kind, size):
    with pytest.raises(ValueError, match="must be"):
        wire.ring_sent(kind, 100, size)


# --- the ring formulas -----------------------------------------------------------------------------

def test_ring_formula_sends_n_minus_1_over_n_and_gloo_reduce_scatters_by_all_reduce():
    assert wire.ring_sent("all-gather", 400, 4) == 300
    assert wire.ring_sent("reduce-scatter", 400, 4) == 300
    assert wire.ring_sent("all-reduce", 400, 4) == 600
    assert wire.ring_sent("reduce-scatter", 400, 4, "gloo") == 600  # an all-reduce in gloo
    assert wire.ring_sent("all-gather", 400, 1) == 0
    # a step's volume (the paper's count: an all-reduce of B counted 2B) -> bytes per rank
    volume = {"all-reduce": 800, "all-gather": 400, "reduce-scatter": 400}
    assert wire.step_ring_sent(volume, 4) == 600 + 300 + 300
    assert wire.step_ring_sent(volume, 4, "gloo") == 600 + 300 + 600


# --- bytes on the wire -----------------------------------------------------------------------------

def test_wire_snapshot_counts_the_bytes_a_socket_sends_and_receives():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    got = bytearray()
    reader = threading.Thread(target=lambda: [got.extend(peer.recv(65536))
                                              for _ in iter(lambda: len(got) < 300_000, False)])
    try:
        before = wire.wire_snapshot()
        reader.start()
        client.sendall(b"x" * 300_000)
        reader.join(timeout=10)
        peer.sendall(b"y" * 1000)
        client.recv(1000)
        moved = wire.wire_snapshot() - before
    finally:
        for s in (client, peer, server):
            s.close()
    # both ends live in this process: each direction counted once as sent, once as received
    assert moved.sent == 300_000 + 1000
    assert moved.received == 300_000 + 1000


def test_the_rendezvous_stores_connections_are_not_counted(monkeypatch):
    """Both ends of a connection on MASTER_PORT (the store's) are left out; others count."""
    pairs = []
    for _ in range(2):
        server = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(server.getsockname())
        pairs.append((server, client, server.accept()[0]))
    monkeypatch.setenv("MASTER_PORT", str(pairs[0][0].getsockname()[1]))
    try:
        before = wire.wire_snapshot()
        for _, client, peer in pairs:
            client.sendall(b"x" * 105)
            peer.recv(105)
        moved = wire.wire_snapshot() - before
    finally:
        for s in (s for pair in pairs for s in pair):
            s.close()
    assert (moved.sent, moved.received) == (105, 105)  # the other pair's only


def test_a_socket_opened_between_snapshots_counts_from_zero():
    earlier = wire.WireSnapshot({1: (100, 50)})
    later = wire.WireSnapshot({1: (150, 60), 2: (7, 3)})
    assert later - earlier == wire.WireBytes(57, 13)


def test_a_socket_closed_between_snapshots_is_counted_as_closed():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    try:
        before = wire.wire_snapshot()
        client.sendall(b"x" * 1000)
        peer.recv(1000)
        client.close()  # its 1,000 bytes leave with it: the later snapshot cannot see them
        moved = wire.wire_snapshot() - before
    finally:
        for s in (client, peer, server):
            s.close()
    assert moved.closed == 1 and moved.sent == 0


def test_what_is_acknowledged_before_the_queue_is_seen_empty_counts_in_that_snapshot(
        monkeypatch):
    """The peer acknowledges a socket's last 100 bytes right after the snapshot reads the first
    of the socket's two counters (bytes acknowledged, bytes in the send queue). Reading the
    acknowledged bytes first, the snapshot then saw an empty queue without those 100 bytes
    counted: they fell into the next span (chapter 8's ring, now and then: 121,760 bytes of
    its first phase counted in the second). Reading the queue first, it waits and counts them."""
    import fcntl
    import termios

    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    watched = os.fstat(client.fileno()).st_ino
    state = {"acked": 0, "queued": 100}

    def reading(fd: int, counter: str) -> int | None:
        if os.fstat(fd).st_ino != watched:
            return None
        value = state[counter]
        state.update(acked=100, queued=0)  # the acknowledgement arrives
        return value

    real_ioctl, real_socket = fcntl.ioctl, socket.socket

    def ioctl(fd, request, arg):
        found = reading(fd, "queued") if request == termios.TIOCOUTQ else None
        return real_ioctl(fd, request, arg) if found is None else struct.pack("i", found)

    class Socket(real_socket):
        def getsockopt(self, level, option, *size):
            info = super().getsockopt(level, option, *size)
            acked = reading(self.fileno(), "acked") if option == socket.TCP_INFO else None
            if acked is not None:
                info = bytearray(info)
                struct.pack_into("Q", info, wire._ACKED_RECEIVED_AT, acked)
                info = bytes(info)
            return info

    monkeypatch.setattr(fcntl, "ioctl", ioctl)
    monkeypatch.setattr(socket, "socket", Socket)
    try:
        snapshot = wire.wire_snapshot()
    finally:
        monkeypatch.undo()
        for s in (client, peer, server):
            s.close()
    assert snapshot.sockets[watched][0] == 100


def test_launched_ranks_wait_for_each_other_before_closing_their_sockets(monkeypatch):
    calls = []
    monkeypatch.setattr(lifetime.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(lifetime.dist, "barrier", lambda: calls.append("barrier"))
    lifetime.wait_for_peers()
    assert calls == ["barrier"]

    def broken() -> None:
        raise RuntimeError("a peer died")

    monkeypatch.setattr(lifetime.dist, "barrier", broken)
    lifetime.wait_for_peers()  # the launcher reports the peer; this rank returns normally


# --- ZeroAdamW in one process ----------------------------------------------------------------------

class _OneRank:
    """torch.distributed as one rank sees it alone: the collectives copy."""

    @staticmethod
    def get_rank(group=None):
        return 0

    @staticmethod
    def get_world_size(group=None):
        return 1

    @staticmethod
    def reduce_scatter_single(output, input, *args, **kwargs):
        output.copy_(input)

    @staticmethod
    def all_gather_single(output, input, *args, **kwargs):
        output.copy_(input)

    reduce_scatter_tensor, all_gather_into_tensor = reduce_scatter_single, all_gather_single


def _groups(model):
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_adamw_on_one_rank_is_adamw_bit_for_bit(monkeypatch, stage):
    monkeypatch.setattr(zero, "dist", _OneRank)
    torch.manual_seed(0)
    ours = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3))
    theirs = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3))
    theirs.load_state_dict(ours.state_dict())
    ours, theirs = ours.double(), theirs.double()
    opt = zero.ZeroAdamW(_groups(ours), lr=1e-2, betas=(0.9, 0.95), stage=stage, keep_first=True)
    reference = torch.optim.AdamW(_groups(theirs), lr=1e-2, betas=(0.9, 0.95))
    x = torch.randn(8, 16, dtype=torch.float64)
    for _ in range(3):
        for model, optimizer in ((ours, opt), (theirs, reference)):
            model(x).square().mean().backward()
            optimizer.step()
        assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), theirs.parameters()))
        held = opt.state_bytes(ours)
        grads_whole = sum(p.grad is not None for p in ours.parameters())
        assert grads_whole == (len(list(ours.parameters())) if stage == 1 else 0)
        assert held["optimizer states"] == 2 * held["parameters"]  # two moments, one rank
        opt.zero_grad()
        reference.zero_grad()
    assert opt.first_record["lr"] == 1e-2 and opt.first_record["weight_decay"] == [0.1, 0.0]
    assert all(len(f) % zero.ALIGN == 0 for f in opt.first_record["start"])


def test_zero_adamw_pads_flat_buffers_and_makes_parameters_views(monkeypatch):
    monkeypatch.setattr(zero, "dist", _OneRank)
    model = torch.nn.Linear(5, 3)  # 15 weights and 3 biases: both padded to 16
    before = [p.detach().clone() for p in model.parameters()]
    opt = zero.ZeroAdamW(_groups(model), stage=2)
    assert [flat.numel() for _, flat, _ in opt.groups] == [16, 16]
    for (params, flat, _), old in zip(opt.groups, before):
        assert params[0].untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
        assert torch.equal(params[0].detach(), old)


# --- two gloo ranks --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def by_hand():
    """DDP, ZeRO-1 and ZeRO-2 by hand, float64, two ranks, one launch."""
    results = launch.launch(fsdp.__name__ + ":train_many", 2,
                            {"runs": [{"stage": s, "steps": 3, "seq_len": 32} for s in (0, 1, 2)]},
                            timeout=400, echo=False)
    return ch09.by_run(results)


@pytest.mark.slow
def test_zero_1_and_2_by_hand_are_ddp_bit_for_bit(by_hand):
    reference = by_hand[0][0]
    assert reference.history == by_hand[1][0].history == by_hand[2][0].history
    for run in by_hand:
        for rank in run:
            assert torch.equal(rank.parameters, reference.parameters)
    table = ch09.by_hand_table(by_hand)
    assert [row[-1] for row in table.rows] == ["yes"] * 3


@pytest.mark.slow
def test_zero_1_and_2_by_hand_reduce_the_gradient_of_one_process(by_hand):
    """The first step's mean gradient: DDP's whole, the stages' reduce-scattered shards gathered.
    Measured: 8.3e-17 from one process's, norm ratio 1.0 (float64)."""
    single = ddp.train_single(steps=1, global_batch=8, seq_len=32, dtype="float64")
    reference = by_hand[0][0].gradient
    for run in by_hand:
        for rank in run:
            assert torch.equal(rank.gradient, reference), (rank.stage, rank.rank)
    gap = ddp.gradient_gap(reference, single.gradient)
    assert gap.within(1e-14), gap
    # a shard left as the sum of the 2 ranks (no division by N) would be flagged
    assert not ddp.gradient_gap(2 * reference, single.gradient).within(1e-4)


@pytest.mark.slow
def test_each_stage_keeps_its_share_of_the_states(by_hand):
    psi = 8 * by_hand[0][0].n_params
    ddp_states, one, two = (run[0].state_bytes for run in by_hand)
    assert ddp_states == {"parameters": psi, "gradients": psi, "optimizer states": 2 * psi}
    assert one == {"parameters": psi, "gradients": psi + psi // 2, "optimizer states": psi}
    assert two == {"parameters": psi, "gradients": psi // 2, "optimizer states": psi}


@pytest.mark.slow
def test_every_collective_sends_the_ring_formula_plus_gloo_headers(by_hand):
    for run in by_hand[1:]:
        for rank in run:
            assert [c.kind for c in rank.collectives[:4]] == ["reduce-scatter"] * 2 + ["all-gather"] * 2
            for c in rank.collectives:
                excess = c.wire.sent - wire.ring_sent(c.kind, c.n_bytes, 2, "gloo")
                assert 0 <= excess < 4096 and excess % wire.GLOO_HEADER == 0, c
    for run in by_hand:
        for rank in run:
            for step in range(1, 3):
                formula = wire.step_ring_sent(rank.volume[step], 2, "gloo")
                assert 0 <= rank.wire[step].sent - formula <= 0.002 * formula
    # the paper's count is the same for the three (2 Psi); gloo's wire is not
    sent = [run[0].wire[1].sent for run in by_hand]
    assert sent[1] == sent[2] == pytest.approx(1.5 * sent[0], rel=1e-3)


def test_without_the_kernels_tcp_counters_nothing_is_counted(monkeypatch):
    monkeypatch.setattr(wire, "COUNTS_TCP", False)  # as on macOS or Windows
    assert wire.wire_snapshot() == wire.WireSnapshot({})
    assert wire.wire_snapshot() - wire.wire_snapshot() == wire.WireBytes(0, 0)
