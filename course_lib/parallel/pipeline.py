"""Pipeline parallelism: the course's GPT-2 in stages, GPipe and 1F1B, timed; a script.

Chapter 11 ("Beyond data parallelism: tensor and pipeline parallelism") gives each of
``p`` ranks a run of consecutive blocks (a *stage*: the first also the embeddings, the
last also the final norm, the output layer and the loss) and cuts the batch into ``m``
micro-batches that flow through the stages: activations forward, their gradients
backward, point to point. Two schedules:

* GPipe (Huang et al. 2019, arXiv 1811.06965): every micro-batch forward, then every
  micro-batch backward; a stage holds the activations of all ``m`` micro-batches at its
  peak.
* 1F1B (PipeDream-Flush, Narayanan et al. 2021, arXiv 2104.04473): after ``p - i``
  forwards, stage ``i`` alternates one backward and one forward, so it never holds more
  than ``p - i`` micro-batches' activations, at most ``p``.

Both leave the same idle share of each step, the *bubble* ``(p - 1) / (m + p - 1)``,
when forward and backward take the same time on every stage.

The schedules are PyTorch's own (``torch.distributed.pipelining``: ``PipelineStage``,
``ScheduleGPipe``, ``Schedule1F1B``), which run on CPUs with gloo in torch 2.13; the
stages are cut by hand (:class:`GPT2Stage`) rather than traced by its ``pipeline()``,
which traces transformers' GPT-2 only with ``use_cache=False, return_dict=False`` and
copies the tied embedding into the last stage without adding the two copies' gradients.
Here the first and the last stage all-reduce that gradient after each step, as
Megatron-LM does, so that the gradients equal one process's. Every forward and backward
of a micro-batch is timed on its rank (the ranks share the machine's monotonic clock),
and the bytes autograd keeps for it are counted, so that the bubble and the activations
held can be measured (:func:`bubble`, :func:`held`).

:func:`pipeline_step` runs inside each rank (start it with
:func:`course_lib.parallel.launch.launch`); the module is also the torchrun entry
point::

    torchrun --nproc-per-node=2 -m course_lib.parallel.pipeline --schedule 1f1b
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from course_lib.numbers.memory_meter import SavedTensorMeter
from course_lib.parallel import ddp, launch
from course_lib.text import course_model, data, models, training

__all__ = ["SCHEDULES", "Bubble", "Event", "GPT2Stage", "PipelineRank", "bubble",
           "causal_loss", "check_flags", "check_micro_batches", "check_stages", "held",
           "main", "pipeline_step", "replay", "split_layers",
           "theoretical_bubble"]

#: The schedules, by the name the functions and the script take.
SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B"}


def check_stages(stages: int, layers: int) -> int:
    """Return ``stages`` if each gets one of the ``layers`` blocks; else name the limit.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 2:
        raise ValueError(f"a pipeline needs at least 2 stages (one rank each), got "
                         f"{stages!r}.")
    if stages > layers:
        raise ValueError(f"{stages} pipeline stages for a model of {layers} "
                         f"transformer blocks: every stage needs at least one block; "
                         f"use at most {layers} stages.")
    return stages


def check_micro_batches(batch: int, micro_batches: int, stages: int,
                        schedule: str = "gpipe") -> int:
    """Return ``micro_batches`` if they split the batch and suit the schedule; else why.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; use one of: "
                         f"{', '.join(SCHEDULES)}.")
    if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) \
            or micro_batches < 1:
        raise ValueError(f"the number of micro-batches must be a whole number >= 1, "
                         f"got {micro_batches!r}.")
    if batch % micro_batches:
        divisors = ", ".join(str(d) for d in range(1, batch + 1) if batch % d == 0)
        raise ValueError(f"a batch of {batch} rows does not split into {micro_batches} "
                         f"equal micro-batches; use one of {divisors}.")
    if schedule == "1f1b" and micro_batches < stages:
        raise ValueError(f"1F1B needs at least as many micro-batches as stages "
                         f"(torch's Schedule1F1B): {micro_batches} < {stages}; use "
                         f"{stages} or more micro-batches, or the GPipe schedule.")
    return micro_batches


def split_layers(layers: int, stages: int) -> list[range]:
    """The blocks of each stage: consecutive runs, the first ones longer when uneven.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    check_stages(stages, layers)
    base, extra = divmod(layers, stages)
    sizes = [base + (i < extra) for i in range(stages)]
    starts = [sum(sizes[:i]) for i in range(stages)]
    return [range(a, a + n) for a, n in zip(starts, sizes)]


def theoretical_bubble(stages: int, micro_batches: int, virtual: int = 1) -> float:
    """The idle share of a step with equal stages, ``(p - 1) / (v m + p - 1)``.

    The same for GPipe and 1F1B (``v = 1``). The interleaved 1F1B of Narayanan et al.
    (2021) gives each GPU ``v`` chunks of ``L / (p v)`` layers: the bubble shrinks to
    ``(p - 1) / (v m)`` of the busy time, for ``v`` times the point-to-point messages.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    return (stages - 1) / (virtual * micro_batches + stages - 1)


class GPT2Stage(nn.Module):
    """One stage of a transformers GPT-2: blocks, the embeddings first, the head last.

    The modules are the model's own (not copies). A first stage reads token ids, the
    others the hidden states of the stage before; the last returns logits.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    def __init__(self, model: nn.Module, stage: int, stages: int) -> None:
        super().__init__()
        attention = model.config._attn_implementation
        if attention != "sdpa":
            raise ValueError("GPT2Stage relies on PyTorch's fused attention "
                             "(attn_implementation 'sdpa', transformers' default) to "
                             "mask the future without a mask; this model uses "
                             f"{attention!r}.")
        self.first, self.last = stage == 0, stage == stages - 1
        blocks = models.blocks(model)
        self.layers = split_layers(len(blocks), stages)[stage]
        self.h = nn.ModuleList(blocks[i] for i in self.layers)
        body = model.transformer
        if self.first:
            self.wte, self.wpe, self.drop = body.wte, body.wpe, body.drop
        if self.last:
            self.ln_f, self.lm_head = body.ln_f, model.lm_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """This stage's part of GPT-2's forward: token ids in first, logits out last."""
        if self.first:
            positions = torch.arange(x.shape[1], device=x.device)
            x = self.drop(self.wte(x) + self.wpe(positions))
        for block in self.h:
            x = block(x)  # no mask: fused attention masks the future itself
        if self.last:
            x = self.lm_head(self.ln_f(x))
        return x


def causal_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The next-token cross-entropy in the logits' dtype (transformers' is float32).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(),
                           ignore_index=-100)


@dataclass(frozen=True)
class Event:
    """A forward ("F") or backward ("B") of a micro-batch on a rank: when, bytes kept.

    ``start`` and ``end`` are ``time.perf_counter`` seconds; a forward's ``saved`` bytes
    are what autograd keeps for its backward (the loss's too on the last stage, whose
    forward event lasts until its loss is computed).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    kind: str
    micro_batch: int
    start: float
    end: float
    saved: int = 0


def held(events: Sequence[Event]) -> tuple[int, int]:
    """The most micro-batches whose activations a rank held at once, and the most bytes.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    saved = {e.micro_batch: e.saved for e in events if e.kind == "F"}
    count = n_bytes = peak_count = peak_bytes = 0
    for e in sorted(events, key=lambda e: e.end):
        sign = 1 if e.kind == "F" else -1
        count, n_bytes = count + sign, n_bytes + sign * saved[e.micro_batch]
        peak_count, peak_bytes = max(peak_count, count), max(peak_bytes, n_bytes)
    return peak_count, peak_bytes


@dataclass(frozen=True)
class PipelineRank:
    """What one rank of :func:`pipeline_step` measured.

    Its rank (= stage), the number of stages, the schedule and micro-batches, its
    blocks, its parameters; the step's loss (the last stage only, else ``None``) and one
    process's on the same batch; the largest difference of its gradients from one
    process's; the events of each timed step; the most micro-batches and bytes of
    activations it held at once (in the last step).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    rank: int
    stages: int
    schedule: str
    micro_batches: int
    layers: tuple[int, ...]
    n_params: int
    loss: float | None
    reference_loss: float
    grad_gap: float
    steps: tuple[tuple[Event, ...], ...]
    peak_held: int
    peak_bytes: int


class _Recorder:
    """Times each micro-batch's forward and backward on a stage; counts what it kept."""

    def __init__(self, stage: Any, parameters: list[torch.Tensor]) -> None:
        self.events: list[Event] = []
        self.saved: dict[int, int] = {}
        forward, backward = stage.forward_one_chunk, stage.backward_one_chunk

        def timed_forward(chunk: int, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            with SavedTensorMeter(exclude=parameters) as meter:
                out = forward(chunk, *args, **kwargs)
            self.saved[chunk] = meter.total
            self.events.append(Event("F", chunk, start, time.perf_counter()))
            return out

        def timed_backward(chunk: int, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = backward(chunk, *args, **kwargs)
            self.events.append(Event("B", chunk, start, time.perf_counter()))
            return out

        # The schedules call these two methods of the stage for every micro-batch
        # (torch.distributed.pipelining's PipelineStage has had them since torch 2.4).
        stage.forward_one_chunk = timed_forward
        stage.backward_one_chunk = timed_backward

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of the last forward's micro-batch, counted and timed with it."""
        with SavedTensorMeter() as meter:
            value = causal_loss(logits, labels)
        if not self.events or self.events[-1].kind != "F":  # a call to infer shapes
            return value
        last = self.events[-1]
        self.saved[last.micro_batch] += meter.total
        self.events[-1] = Event("F", last.micro_batch, last.start, time.perf_counter())
        return value

    def take(self) -> tuple[Event, ...]:
        """The events since the last call, each forward with its bytes."""
        events = tuple(Event(e.kind, e.micro_batch, e.start, e.end,
                             self.saved[e.micro_batch] if e.kind == "F" else 0)
                       for e in self.events)
        self.events, self.saved = [], {}
        return events


def pipeline_step(schedule: str = "gpipe", micro_batches: int = 4,
                  global_batch: int = 8, seq_len: int = 32, dtype: str = "float64",
                  seed: int = 0, steps: int = 1) -> PipelineRank:
    """Worker: a training step's forward and backward of the course's GPT-2, pipelined.

    Every rank is one stage. The step runs ``steps + 1`` times on the same batch (the
    first, which also sends the shapes between stages, is not timed), gradients cleared
    before each; the last step's gradients are compared with one process's, which every
    rank computes itself.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    from torch.distributed import pipelining

    worker = launch.init_worker()
    stages, rank = worker.world_size, worker.rank
    tokenizer = ddp.rank_tokenizer(worker)
    model = ddp.fresh_model(tokenizer, seed, dtype, worker.device)
    check_stages(stages, len(models.blocks(model)))
    check_micro_batches(global_batch, micro_batches, stages, schedule)
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    reference = copy.deepcopy(model)  # one process's model, before any step
    stage_module = GPT2Stage(model, rank, stages)
    parameters = list(stage_module.parameters())
    stage = pipelining.PipelineStage(stage_module, rank, stages, worker.device)
    recorder = _Recorder(stage, parameters)
    schedule_class = getattr(pipelining, SCHEDULES[schedule])
    runner = schedule_class(stage, micro_batches, loss_fn=recorder.loss)
    tied = dist.new_group([0, stages - 1])  # the embedding's weight is the output's
    recipe = ddp.recipe_for(1, global_batch, seq_len, 3e-3, seed, str(worker.device))
    batch = next(training.training_batches("gpt2", tokenizer, recipe))
    ids, labels = (batch[k].to(worker.device) for k in ("input_ids", "labels"))
    timeline, losses = [], []
    for step in range(steps + 1):
        stage_module.zero_grad(set_to_none=True)
        losses.clear()
        dist.barrier()  # every stage starts the step together
        if stage_module.first:
            runner.step(ids)
        elif stage_module.last:
            runner.step(target=labels, losses=losses)
        else:
            runner.step()
        events = recorder.take()
        if step:
            timeline.append(events)
    if stage_module.first or stage_module.last:
        shared = stage_module.wte if stage_module.first else stage_module.lm_head
        dist.all_reduce(shared.weight.grad, group=tied)
    reference_loss = causal_loss(reference(ids, use_cache=False).logits, labels)
    reference_loss.backward()
    gap = max(float((p.grad - reference.get_parameter(names[id(p)]).grad).abs().max())
              for p in parameters)
    loss = float(torch.stack(losses).detach().mean()) if losses else None
    return PipelineRank(rank, stages, schedule, micro_batches,
                        tuple(stage_module.layers), sum(p.numel() for p in parameters),
                        loss,
                        float(reference_loss.detach()), gap, tuple(timeline),
                        *held(timeline[-1]))


@dataclass(frozen=True)
class Bubble:
    """The idle share of a pipeline step, measured on every rank and by the formula.

    ``per_rank``: one minus the rank's busy seconds (its forwards and backwards) over
    the step's span (the first start to the last end, all ranks); ``measured``: their
    mean, the median over the timed steps; ``replayed``: the same from :func:`replay`
    (the measured durations, nothing for communication); ``theory``:
    :func:`theoretical_bubble`.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    stages: int
    micro_batches: int
    schedule: str
    per_rank: tuple[float, ...]
    measured: float
    replayed: float
    theory: float


def _idle(timelines: Sequence[Sequence[Event]]) -> list[float]:
    """Each rank's idle share of the span from the first start to the last end."""
    span = (max(e.end for events in timelines for e in events)
            - min(e.start for events in timelines for e in events))
    return [1 - sum(e.end - e.start for e in events) / span for events in timelines]


def replay(timelines: Sequence[Sequence[Event]]) -> list[list[Event]]:
    """The step again, each rank's work in its order and durations, with free links.

    A forward waits for the stage before to forward the same micro-batch, a backward for
    the stage after to backward it (the last stage: for its own forward); nothing else
    waits. What the measured step spent beyond this went to communication and to ranks
    sharing cores.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    p, done = len(timelines), {}
    out: list[list[Event]] = [[] for _ in timelines]
    while sum(map(len, out)) < sum(map(len, timelines)):
        placed = sum(map(len, out))
        for i, events in enumerate(timelines):
            for e in events[len(out[i]):]:
                after = (i + 1, "B") if i < p - 1 else (i, "F")
                key = (*((i - 1, "F") if e.kind == "F" else after), e.micro_batch)
                if key[0] < 0:  # the first stage's forward waits for no one
                    ready = 0.0
                elif key in done:
                    ready = done[key]
                else:
                    break
                start = max(ready, out[i][-1].end if out[i] else 0.0)
                end = start + e.end - e.start
                out[i].append(Event(e.kind, e.micro_batch, start, end, e.saved))
                done[(i, e.kind, e.micro_batch)] = end
        if sum(map(len, out)) == placed:
            raise ValueError("these timelines wait for a micro-batch that never comes: "
                             "pass every rank's events of one step, in rank order.")
    return out


def bubble(ranks: Sequence[PipelineRank]) -> Bubble:
    """The bubble of one pipeline run, from every rank's :class:`PipelineRank`.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    first = ranks[0]
    if [r.rank for r in ranks] != list(range(first.stages)):
        raise ValueError(f"bubble needs the results of all {first.stages} ranks of one "
                         f"run in rank order, got ranks {[r.rank for r in ranks]}.")
    steps = [[r.steps[step] for r in ranks] for step in range(len(first.steps))]
    shares = [_idle(timelines) for timelines in steps]
    per_rank = tuple(statistics.median(step[r] for step in shares)
                     for r in range(first.stages))
    return Bubble(first.stages, first.micro_batches, first.schedule, per_rank,
                  statistics.median(statistics.fmean(step) for step in shares),
                  statistics.median(statistics.fmean(_idle(replay(t))) for t in steps),
                  theoretical_bubble(first.stages, first.micro_batches))


def check_flags(args: argparse.Namespace, world_size: int) -> None:
    """Refuse stages, micro-batches or a sequence that do not fit, naming the flags.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    layers = course_model.course_model_config(data.course_tokenizer()).n_layer
    if world_size > layers:
        raise ValueError(f"{world_size} pipeline stages (one per rank) for the "
                         f"course's GPT-2 of {layers} blocks: every stage needs at "
                         f"least one block; use --nproc-per-node {layers} or fewer.")
    if world_size < 2:
        raise ValueError("a pipeline needs at least 2 stages, one per rank; use "
                         "--nproc-per-node 2 or more.")
    try:
        check_micro_batches(args.global_batch, args.micro_batches, world_size,
                            args.schedule)
    except ValueError as err:
        raise ValueError(f"--global-batch {args.global_batch}, --micro-batches "
                         f"{args.micro_batches}: {err}") from None
    if args.seq_len > ddp.context_length():
        raise ValueError(f"--seq-len {args.seq_len} is longer than the model's "
                         f"context: use --seq-len {ddp.context_length()} or less.")


def main(argv: Sequence[str] | None = None) -> int:
    """The torchrun entry point: a pipelined step; each stage, the bubble, the check.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    parser = launch.RankArgumentParser(
        prog="torchrun --nproc-per-node=N -m course_lib.parallel.pipeline",
        description="The course's GPT-2 as a pipeline of N stages (GPipe or 1F1B).")
    parser.add_argument("--schedule", choices=list(SCHEDULES), default="gpipe")
    parser.add_argument("--micro-batches", type=launch.whole_number(1), default=4)
    parser.add_argument("--global-batch", type=launch.whole_number(1), default=8)
    parser.add_argument("--seq-len", type=launch.whole_number(2), default=32)
    parser.add_argument("--steps", type=launch.whole_number(1), default=2,
                        help="timed steps, after one that is not timed")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--seed", type=launch.whole_number(0), default=0)
    args = ddp.parse_run_arguments(parser, argv, check_flags)
    r = pipeline_step(args.schedule, args.micro_batches, args.global_batch,
                      args.seq_len, args.dtype, args.seed, args.steps)
    everyone: list[Any] = [None] * r.stages
    dist.all_gather_object(everyone, r)
    launch.say(f"rank {r.rank}/{r.stages} ({args.schedule}): blocks {list(r.layers)}, "
               f"held at most {r.peak_held} micro-batches ({r.peak_bytes:,} bytes), "
               f"max |gradient - one process| {r.grad_gap:.1e}")
    if r.rank == 0:
        b = bubble(everyone)
        launch.say(f"loss {everyone[-1].loss:.6f} (one process "
                   f"{r.reference_loss:.6f}); bubble measured {b.measured:.2f}, with "
                   f"free links {b.replayed:.2f}, (p-1)/(m+p-1) = {b.theory:.2f}")
    launch.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
