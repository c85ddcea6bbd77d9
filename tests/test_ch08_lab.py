"""Chapter 8's lab: wrong answers, written as a learner might, that its checkers must recognise;
the references agree with torch.distributed's own collectives, on real ranks."""

import torch
import torch.distributed as dist

from course_lib.chapters import ch08_lab
from course_lib.parallel import cost_model, wire


def returns_own_chunk(tensor):
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = [c.clone() for c in tensor.flatten().tensor_split(n)]
    for step in range(n - 1):
        send = chunks[(rank - step) % n]
        into = chunks[(rank - step - 1) % n]
        got = torch.empty_like(into)
        req = dist.isend(send, (rank + 1) % n)
        dist.recv(got, (rank - 1) % n)
        req.wait()
        into += got
    return chunks[rank]  # the chunk index of the rank itself


def copies(tensor):
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = [c.clone() for c in tensor.flatten().tensor_split(n)]
    for step in range(n - 1):
        send = chunks[(rank - step) % n]
        into = chunks[(rank - step - 1) % n]
        got = torch.empty_like(into)
        req = dist.isend(send, (rank + 1) % n)
        dist.recv(got, (rank - 1) % n)
        req.wait()
        into[:] = got  # no addition
    return chunks[(rank + 1) % n]


def averages(tensor):
    rank, n = dist.get_rank(), dist.get_world_size()
    total = tensor.flatten().clone()
    dist.all_reduce(total)
    return total.tensor_split(n)[(rank + 1) % n] / n


def sums(grads):
    for g in grads:
        dist.all_reduce(g)
    return grads


def keeps_own(grads):
    return grads


def divides_by_two(grads):
    for g in grads:
        dist.all_reduce(g)
        g /= 2
    return grads


WRONG = {"ring_reduce_scatter": {"off-by-one in the chunk index": returns_own_chunk,
                                 "copying instead of adding": copies,
                                 "averaging in the reduce-scatter": averages},
         "average_gradients": {"summing instead of averaging": sums, "no all-reduce": keeps_own,
                               "a hard-coded world size": divides_by_two}}


def with_reduce_scatter(tensor):
    """torch.distributed's reduce_scatter, each rank given chunk rank + 1 as the ring leaves it."""
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = list(tensor.flatten().tensor_split(n))
    turned = [c.contiguous() for c in chunks[1:] + chunks[:1]]
    out = torch.empty_like(turned[rank])
    dist.reduce_scatter(out, turned)
    return out


def with_all_reduce(grads):
    for g in grads:
        dist.all_reduce(g)
        g /= dist.get_world_size()
    return grads


def test_the_references_agree_with_torch_distributed():
    feedback = ch08_lab.ring_reduce_scatter.check(with_reduce_scatter)
    assert feedback.passed, feedback.message
    feedback = ch08_lab.average_gradients.check(with_all_reduce)
    assert feedback.passed, feedback.message


def test_fewer_elements_than_ranks_leave_an_empty_chunk():
    chunks = torch.zeros(2).tensor_split(ch08_lab.RANKS)
    assert [len(c) for c in chunks] == [1, 1, 0]  # rank 1 owns chunk 2: an empty tensor
    labels = [c.label for c in ch08_lab._ring_cases()]
    assert labels[0] == "random" and "fewer elements than ranks" in labels


def test_the_ring_sends_the_formula_per_phase_plus_gloo_headers():
    measured = ch08_lab.ring_bytes.measure()
    params = 512 * 1024 + 1024 + 1024 * 512 + 512
    formula = cost_model.ring_allreduce_bytes(4 * params, 2) / 2  # per phase
    for phase in ("reduce-scatter", "all-gather"):
        assert 0 <= measured[phase] - formula <= 10 * wire.GLOO_HEADER, measured
