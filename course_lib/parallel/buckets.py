"""DDP's gradient buckets, watched: over an emulated link, rebuilt after the first step, unused.

Chapter 8 ("Data parallelism with DDP") opens DDP's reducer.

* :func:`train_over_link` trains a stack of linear layers with DDP while every bucket's
  all-reduce crosses a link emulated by :mod:`course_lib.parallel.links`, and marks when each
  step's forward and backward passes began and ended: a per-rank time line of communication
  overlapping the backward pass, for any ``bucket_cap_mb``. The stack, not the course's GPT-2,
  because its equal layers make their gradients ready evenly through the backward pass.
  :func:`predicted_backward` predicts how long the backward pass lasts from when the buckets
  became ready and the alpha-beta model of the link.
* :func:`reducer_facts` shows what DDP's logging data says about the buckets (one bucket in the
  first step, rebuilt afterwards in the order the gradients became ready), and what
  ``find_unused_parameters`` and ``static_graph`` change for a model with a parameter that gets
  no gradient.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from course_lib.parallel import cost_model, ddp, launch, links

__all__ = ["ChapterRuns", "LinkRun", "ReducerFacts", "StepMarks", "backward_medians",
           "layer_stack", "predicted_backward", "reducer_facts", "train_all", "train_over_link"]


def layer_stack(width: int, depth: int, seed: int = 0) -> torch.nn.Sequential:
    """``depth`` linear layers of ``width`` x ``width``, each followed by a ReLU, seeded.

    Chapter 8, *Data parallelism with DDP*.
    """
    for name, value in (("width", width), ("depth", depth)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}.")
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


@dataclass(frozen=True)
class StepMarks:
    """When one training step's phases began and ended (seconds of ``time.perf_counter``).

    ``forward`` and ``backward`` are when they were called, ``backward_done`` when
    ``loss.backward()`` returned (DDP returns only once every bucket is all-reduced), ``end``
    when the optimizer step had been taken.

    Chapter 8, *Data parallelism with DDP*.
    """

    forward: float
    backward: float
    backward_done: float
    end: float


@dataclass(frozen=True)
class LinkRun:
    """One rank's DDP run over an emulated link (:func:`train_over_link`): every step's marks,
    every bucket's transfer, the link's settings and the bytes of the gradients.

    Chapter 8, *Data parallelism with DDP*.
    """

    rank: int
    link: str
    scale: float
    emulated_world: int
    bucket_cap_mb: float | None
    steps: tuple[StepMarks, ...]
    transfers: tuple[links.Transfer, ...]
    grad_bytes: int

    def step_transfers(self, step: int) -> list[links.Transfer]:
        """The buckets all-reduced during ``step``'s backward pass, in order."""
        marks = self.steps[step]
        return [t for t in self.transfers if marks.backward <= t.start <= marks.backward_done]


def train_over_link(runs: Sequence[dict[str, Any]], steps: int = 4, width: int = 256,
                    depth: int = 16, batch: int = 512, seed: int = 0) -> list[LinkRun]:
    """Worker: DDP runs of :func:`layer_stack` whose buckets cross an emulated link; each marked.

    Each run is a dict of ``link`` (a name of ``cost_model.LINKS``), ``scale`` (0: gloo alone),
    ``world_size`` (the ranks the link is charged for; default: the group's) and
    ``bucket_cap_mb`` (default: DDP's). Every bucket goes through
    :func:`course_lib.parallel.links.allreduce_hook`; each rank trains on its own seeded rows of
    ``batch`` inputs, regressing the stack's output onto zero.

    Chapter 8, *Data parallelism with DDP*.
    """
    worker = launch.init_worker()
    out = []
    for run in runs:
        model = layer_stack(width, depth, seed)
        ddp_model = DistributedDataParallel(model, bucket_cap_mb=run.get("bucket_cap_mb"))
        emulator = links.LinkEmulator(run["link"], run.get("world_size"),
                                      scale=run.get("scale", 1.0))
        ddp_model.register_comm_hook(emulator, links.allreduce_hook)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        generator = torch.Generator().manual_seed(seed + worker.rank)
        marks = []
        for _ in range(steps):
            x = torch.randn(batch, width, generator=generator)
            dist.barrier()  # the ranks start every step together
            forward = time.perf_counter()
            loss = ddp_model(x).square().mean()
            backward = time.perf_counter()
            loss.backward()
            backward_done = time.perf_counter()
            optimizer.step()
            optimizer.zero_grad()
            marks.append(StepMarks(forward, backward, backward_done, time.perf_counter()))
        emulator.close()
        grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        out.append(LinkRun(worker.rank, emulator.link.name, emulator.scale,
                           emulator.world_size or worker.world_size, run.get("bucket_cap_mb"),
                           tuple(marks), tuple(emulator.records), grad_bytes))
    return out


def predicted_backward(ranks: Sequence[LinkRun], step: int,
                       gloo: cost_model.Link) -> list[float]:
    """Each rank's seconds from ``loss.backward()`` to its return in ``step``, predicted.

    ``ranks`` holds the same run of every rank. A bucket's all-reduce can start when the last
    rank has it ready (the ranks' clocks are the same machine's); it takes gloo's alpha-beta time
    on this machine (``gloo``, 2 ranks) plus the emulated link's, and the link carries one bucket
    at a time (:func:`course_lib.parallel.cost_model.queue_on_link`). A rank's backward pass
    returns when the last bucket is reduced.

    Chapter 8, *Data parallelism with DDP*.
    """
    if not ranks:
        raise ValueError("pass the LinkRun of every rank of one run.")
    per_rank = [run.step_transfers(step) for run in ranks]
    if not per_rank[0] or len({len(t) for t in per_rank}) != 1:
        raise ValueError(f"step {step}: every rank must have reduced the same buckets; pass a "
                         f"step of the run (0 to {len(ranks[0].steps) - 1}).")
    run = ranks[0]
    ready = [max(t.start for t in same) for same in zip(*per_rank)]
    durations = [cost_model.ring_allreduce_time(t.n_bytes, len(ranks), gloo)
                 + run.scale * cost_model.ring_time("all-reduce", t.n_bytes, t.world_size,
                                                    run.link)
                 for t in per_rank[0]]
    end = cost_model.queue_on_link(ready, durations)[-1]
    return [end - r.steps[step].backward for r in ranks]


def backward_medians(ranks: Sequence[LinkRun], gloo: cost_model.Link) -> tuple[float, float]:
    """Medians over the ranks and the steps after the first: backward measured, and predicted.

    The first step is left out: DDP reduces all gradients in one bucket there (see
    :func:`reducer_facts`). Predictions by :func:`predicted_backward`.

    Chapter 8, *Data parallelism with DDP*.
    """
    steps = range(1, len(ranks[0].steps)) if ranks else range(0)
    if not steps:
        raise ValueError("pass every rank's LinkRun of a run of at least 2 steps (the first "
                         "is left out).")
    measured = statistics.median(r.steps[s].backward_done - r.steps[s].backward
                                 for s in steps for r in ranks)
    predicted = statistics.median(p for s in steps for p in predicted_backward(ranks, s, gloo))
    return measured, predicted


@dataclass(frozen=True)
class ReducerFacts:
    """What :func:`reducer_facts` saw: bucket sizes per step, and DDP with an unused parameter.

    ``bucket_sizes`` are the bytes of every bucket all-reduced in each of the first steps of a
    plain DDP run (its comm hook's view); ``logged`` a few entries of its
    ``_get_ddp_logging_data()`` after those steps. ``unused`` maps each setting
    ("default", "find_unused_parameters", "static_graph") to the first line of the error it
    raised, or "" when both steps trained; ``unused_logged`` the logging data of each setting's
    run.

    Chapter 8, *Data parallelism with DDP*.
    """

    bucket_sizes: tuple[tuple[int, ...], ...]
    logged: dict[str, Any]
    unused: dict[str, str]
    unused_logged: dict[str, dict[str, Any]]


#: The entries of DDP's logging data that chapter 8 shows.
LOGGED = ("bucket_sizes", "rebuilt_bucket_sizes", "has_rebuilt_buckets", "find_unused_parameters",
          "static_graph", "can_set_static_graph", "unused_parameter_size")


class _WithUnused(torch.nn.Module):
    """Two linear layers, of which forward uses only the first: the second gets no gradient."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.used, self.unused = torch.nn.Linear(width, width), torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def _logged(model: DistributedDataParallel) -> dict[str, Any]:
    data = model._get_ddp_logging_data()
    return {k: data[k] for k in LOGGED if k in data}


def reducer_facts(steps: int = 3, width: int = 64, depth: int = 4) -> ReducerFacts:
    """Worker: DDP's buckets step by step, and a parameter without a gradient under three settings.

    Chapter 8, *Data parallelism with DDP*.
    """
    launch.init_worker()
    model = DistributedDataParallel(layer_stack(width, depth), bucket_cap_mb=width**2 * 4 / 2**20)
    emulator = links.LinkEmulator("NVLink 4 (H100)", scale=0)
    model.register_comm_hook(emulator, links.allreduce_hook)
    sizes = []
    for _ in range(steps):
        seen = len(emulator.records)
        model(torch.ones(2, width)).sum().backward()
        sizes.append(tuple(t.n_bytes for t in emulator.records[seen:]))
    emulator.close()
    unused, unused_logged = {}, {}
    for setting in ("default", "find_unused_parameters", "static_graph"):
        torch.manual_seed(0)
        options = {} if setting == "default" else {setting: True}
        ddp_model = DistributedDataParallel(_WithUnused(width), **options)
        try:
            for _ in range(2):
                ddp_model(torch.ones(2, width)).sum().backward()
            unused[setting] = ""
        except RuntimeError as err:
            unused[setting] = str(err).strip().splitlines()[0]
        unused_logged[setting] = _logged(ddp_model)
    return ReducerFacts(tuple(sizes), _logged(model), unused, unused_logged)


@dataclass(frozen=True)
class ChapterRuns:
    """One rank's results of :func:`train_all`: DDP trainings, runs over a link, reducer facts.

    Chapter 8, *Data parallelism with DDP*.
    """

    ddp: list[ddp.DDPRank]
    link: list[LinkRun]
    reducer: ReducerFacts


def train_all(runs: Sequence[dict[str, Any]], link_runs: Sequence[dict[str, Any]],
              link_steps: int = 4) -> ChapterRuns:
    """Worker: :func:`course_lib.parallel.ddp.train_many`, :func:`train_over_link` and
    :func:`reducer_facts` in one process group (starting processes costs seconds).

    Chapter 8, *Data parallelism with DDP*.
    """
    trained = ddp.train_many(runs)
    return ChapterRuns(trained, train_over_link(link_runs, link_steps), reducer_facts())
