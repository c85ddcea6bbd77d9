"""Watching DDP's communication: a hook that records every gradient bucket it all-reduces.

Chapter 8 ("Data parallelism with DDP") measures what DDP sends. ``DistributedDataParallel`` groups
the gradients into buckets of about ``bucket_cap_mb`` megabytes (the first one smaller) and starts
the all-reduce of a bucket as soon as the backward pass has filled it, while the backward pass goes
on with earlier layers. A communication hook replaces that all-reduce; :func:`counting_hook` does
the same averaging as DDP's default hook and writes down, for each bucket, its size, when it was
ready and when its all-reduce finished. :func:`ring_hook` averages with the course's own ring
all-reduce instead and also counts the bytes that really left this rank. :func:`summing_hook` is
a broken one, for the parity checks to catch.
"""

# No ``from __future__ import annotations`` here: DDP checks the hooks' annotations at run time.
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from course_lib.parallel.ring import ring_all_reduce

__all__ = ["BucketRecord", "Traffic", "counting_hook", "ring_hook", "summing_hook"]


@dataclass(frozen=True)
class BucketRecord:
    """One all-reduce of one bucket: its round, index, bytes, its times (seconds), bytes sent.

    A round is one synchronising backward pass: one per step, or one per micro-batch when
    gradient accumulation does not use ``no_sync``.

    Chapter 8, *Data parallelism with DDP*.
    """

    round: int
    index: int
    n_bytes: int
    ready: float
    done: float
    sent: int | None = None


@dataclass
class Traffic:
    """The state a hook fills in: every bucket record, rounds so far, every forward pass's start.

    Chapter 8, *Data parallelism with DDP*.
    """

    buckets: list[BucketRecord] = field(default_factory=list)
    forwards: list[float] = field(default_factory=list)
    rounds: int = 0

    def attach(self, model: torch.nn.Module) -> None:
        """Note the time at which every forward pass of ``model`` starts."""
        model.register_forward_pre_hook(lambda *_: self.forwards.append(time.perf_counter()))

    def _arrived(self, bucket: dist.GradBucket) -> int:
        """The round of a bucket the hook has just received (hooks run in bucket order)."""
        round_ = self.rounds
        if bucket.is_last():
            self.rounds += 1
        return round_

    def _record(self, bucket: dist.GradBucket, round_: int, ready: float, sent: int | None) -> None:
        buffer = bucket.buffer()
        self.buckets.append(BucketRecord(round_, bucket.index(),
                                         buffer.numel() * buffer.element_size(),
                                         ready, time.perf_counter(), sent))


def counting_hook(state: Traffic, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's default averaging (divide by N, all-reduce), with each bucket's size and times noted.

    Register it with ``ddp_model.register_comm_hook(Traffic(), counting_hook)``.

    Chapter 8, *Data parallelism with DDP*.
    """
    ready, round_ = time.perf_counter(), state._arrived(bucket)
    buffer = bucket.buffer().div_(dist.get_world_size())
    future = dist.all_reduce(buffer, async_op=True).get_future()

    def finished(fut: torch.futures.Future) -> torch.Tensor:  # may run out of bucket order
        state._record(bucket, round_, ready, None)
        return fut.value()[0]

    return future.then(finished)


def ring_hook(state: Traffic, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average a bucket with the course's ring all-reduce (synchronously) and count the bytes sent.

    Chapter 8, *Data parallelism with DDP*.
    """
    ready, round_ = time.perf_counter(), state._arrived(bucket)
    buffer = bucket.buffer().div_(dist.get_world_size())
    sent = ring_all_reduce(buffer)
    state._record(bucket, round_, ready, sent)
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(buffer)
    return future


def summing_hook(state: Traffic, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """A broken hook: all-reduce without dividing by N, so every rank steps with N x the mean.

    The sum where the mean belongs: PyTorch's gloo average did this in 2025
    (pytorch/pytorch#162338). AdamW hardly notices, since its step divides each gradient by its
    own root mean square, and clipping rescales it anyway; a comparison of the gradients before
    clipping shows it (:func:`course_lib.parallel.ddp.gradient_gap`).

    Chapter 8, *Data parallelism with DDP*.
    """
    ready, round_ = time.perf_counter(), state._arrived(bucket)
    future = dist.all_reduce(bucket.buffer(), async_op=True).get_future()

    def finished(fut: torch.futures.Future) -> torch.Tensor:
        state._record(bucket, round_, ready, None)
        return fut.value()[0]

    return future.then(finished)
