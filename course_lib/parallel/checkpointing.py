"""Activation checkpointing on the course's GPT-2: memory it saves, time it costs.

Chapter 11 ("Beyond data parallelism: tensor and pipeline parallelism") weighs
checkpointing against tensor, sequence and pipeline parallelism as ways to fit
activations. Chapter 2 already measures what a step keeps for backward with and without
``torch.utils.checkpoint`` (:func:`course_lib.numbers.memory_meter.saved_activations`)
and estimates it (:func:`course_lib.numbers.memory.activation_bytes`);
:func:`checkpointing_cost` puts both next to the time a step takes either way, timed
with the course's one timing harness (:mod:`course_lib.base.timing`). The price is one
more forward pass of every block in backward: about a third more arithmetic for the
blocks (forward ``2N``, backward ``4N`` FLOPs per token), less for the whole model,
whose embeddings, output layer and loss are not recomputed.

The model is the course's GPT-2 shape with the exact GELU (``activation="gelu"``), as
chapter 2 measures: transformers' default tanh approximation keeps three more tensors
per block than the formula counts. Attention is PyTorch's fused kernel (no ``s x s``
scores are kept).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_lib.base import timing
from course_lib.numbers import memory, memory_meter
from course_lib.text import course_model, data, models

__all__ = ["CheckpointingCost", "checkpointing_cost"]


@dataclass(frozen=True)
class CheckpointingCost:
    """A training step's activations and time, without and with checkpointing.

    Bytes autograd kept for backward (measured) and chapter 2's estimates of them; the
    blocks' forward calls (recomputation included); the fastest of the timed
    forward-and-backward runs (seconds); and the model's forward FLOPs per token in its
    blocks and in all.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    batch: int
    seq_len: int
    saved_bytes: int
    checkpointed_bytes: int
    estimate: float
    checkpointed_estimate: float
    block_forwards: int
    checkpointed_block_forwards: int
    seconds: float
    checkpointed_seconds: float
    block_flops: float
    model_flops: float

    @property
    def memory_saved(self) -> float:
        """The share of the activation bytes that checkpointing saved (measured)."""
        return 1 - self.checkpointed_bytes / self.saved_bytes

    @property
    def time_ratio(self) -> float:
        """A checkpointed step's time over a plain step's (measured)."""
        return self.checkpointed_seconds / self.seconds

    @property
    def expected_time_ratio(self) -> float:
        """The same from the FLOPs: the blocks' forward again over forward and backward.
        """
        return 1 + self.block_flops / (3 * self.model_flops)


def checkpointing_cost(batch: int = 8, seq_len: int = 128, repeats: int = 5,
                       seed: int = 0, device: str | None = "cpu") -> CheckpointingCost:
    """One step of the course's GPT-2 shape without and with checkpointing: bytes, time.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    tokenizer = data.course_tokenizer()
    shape = course_model.course_model_config(tokenizer)
    config = models.tiny_config("gpt2", tokenizer, hidden=shape.n_embd,
                                layers=shape.n_layer, heads=shape.n_head,
                                context=shape.n_positions, activation="gelu")
    if seq_len > config.n_positions:
        raise ValueError(f"seq_len={seq_len} is longer than the model's context; use "
                         f"seq_len <= {config.n_positions}.")
    dev = timing.check_device(device)
    model = models.build_model(config, seed).to(dev)
    ids = torch.randint(0, config.vocab_size, (batch, seq_len),
                        generator=torch.Generator().manual_seed(seed)).to(dev)

    def step(checkpointing: bool) -> memory_meter.SavedActivations:
        kept = memory_meter.saved_activations(model, ids, checkpointing)
        model.zero_grad(set_to_none=True)
        return kept

    plain, checkpointed = step(False), step(True)  # also the warm-up of the timed runs
    times = timing.interleaved_times([lambda: step(False), lambda: step(True)], repeats,
                                     dev)
    model_shape = memory.shape_of(model)
    element = next(model.parameters()).element_size()
    estimates = [memory.activation_bytes(model_shape, seq_len, batch, element,
                                         dropout=False, checkpointing=c,
                                         attention_scores=False)
                 for c in (False, True)]
    h, layers = config.n_embd, config.n_layer
    blocks = 2 * layers * (12 * h * h + 2 * seq_len * h)  # linear layers and attention
    return CheckpointingCost(batch, seq_len, plain.bytes, checkpointed.bytes,
                             *estimates, plain.block_forwards,
                             checkpointed.block_forwards, min(times[0]), min(times[1]),
                             blocks, blocks + 2 * h * config.vocab_size)
