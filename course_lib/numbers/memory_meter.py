"""Training memory measured on a real model: what autograd saves for backward, byte by byte.

Chapter 2 (*The memory wall*) checks its estimates (:mod:`course_lib.numbers.memory`) with it: one
Adam step of a real model, its weights, gradients and optimizer states counted from their storages
and its activations counted as autograd saves them (:class:`SavedTensorMeter`); on a GPU the CUDA
allocator's peak as well. The same meter measures the remedies for activations: activation
checkpointing and fused attention (:func:`saved_activations`) and gradient accumulation
(:func:`accumulate_gradients`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch

from course_lib.base.checks import positive as _positive
from course_lib.numbers import memory

__all__ = ["SavedTensorMeter", "Measurement", "SavedActivations", "measure_training_step",
           "saved_activations", "accumulate_gradients"]


class SavedTensorMeter:
    """Counts the bytes autograd saves for backward, using ``torch.autograd.graph.saved_tensors_hooks``.

    Storages already owned by parameters (a weight saved by a matmul) are not activations and are
    left out; each storage counts once however many times it is saved.

    Chapter 2, *The memory wall*.
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self._exclude = {p.untyped_storage().data_ptr() for p in exclude}
        self.storages: dict[int, int] = {}
        self.shapes: dict[int, tuple[int, ...]] = {}  # the shape each storage was first saved with

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self._exclude:
            self.storages[ptr] = storage.nbytes()
            self.shapes.setdefault(ptr, tuple(t.shape))
        return t

    @staticmethod
    def _unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    def __enter__(self) -> "SavedTensorMeter":
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    @property
    def total(self) -> int:
        """Bytes of all distinct saved storages."""
        return sum(self.storages.values())


@dataclass
class Measurement:
    """Bytes measured on a real model after one full training step.

    Chapter 2, *The memory wall*.
    """

    n_params: int
    weights: int
    gradients: int
    optimizer_states: int
    activations: int
    cuda_peak: int | None = None


def measure_training_step(model: torch.nn.Module, batch: int, seq_len: int, seed: int = 0) -> Measurement:
    """Run one Adam training step on random tokens and measure every kind of memory byte by byte.

    Chapter 2, *The memory wall*.
    """
    _positive(batch, "batch size")
    _positive(seq_len, "sequence length")
    device = next(model.parameters()).device
    params = list(model.parameters())
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq_len), generator=gen).to(device)
    model.train()
    optimizer = torch.optim.Adam(params, lr=1e-4)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    with SavedTensorMeter(exclude=params) as meter:
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    cuda_peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    states = [t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
    n_params = sum(p.numel() for p in params)
    result = Measurement(
        n_params=n_params,
        weights=memory.tensor_bytes(params),
        gradients=memory.tensor_bytes(p.grad for p in params),
        optimizer_states=memory.tensor_bytes(states),
        activations=meter.total,
        cuda_peak=cuda_peak,
    )
    optimizer.zero_grad(set_to_none=True)
    return result


@dataclass
class SavedActivations:
    """What one training step of a causal LM saved for backward, and how often its blocks ran forward.

    Chapter 2, *The memory wall*.
    """

    bytes: int  # distinct storages autograd saved in the forward pass (parameters left out)
    shapes: list[tuple[int, ...]]  # the shape of each
    block_forwards: int  # forward calls of the transformer blocks, recomputation in backward included


def _blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    from transformers.modeling_layers import GradientCheckpointingLayer

    blocks = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if not blocks:
        raise ValueError(f"{type(model).__name__} has no transformer blocks that transformers can "
                         "checkpoint; use a course model (models.build_model) or a hub GPT-2.")
    return blocks


def saved_activations(model: torch.nn.Module, input_ids: torch.Tensor, checkpointing: bool = False) -> SavedActivations:
    """Forward and backward of a causal LM on ``input_ids`` (labels = inputs), measuring what it saves.

    ``checkpointing`` wraps each block in ``torch.utils.checkpoint`` (non-reentrant, through
    transformers' ``activation_checkpointing_enable``, ``gradient_checkpointing_enable`` before 5.x)
    for this step only: a block keeps its input and runs forward again in backward. The gradients are
    added to ``.grad``, as a training step does.

    Chapter 2, *The memory wall*.
    """
    # A recomputed block runs its forward() directly, without its own hooks: count its parts' calls.
    blocks = _blocks(model)
    parts = [(i, part) for i, block in enumerate(blocks) for part in block.children()]
    calls: list[dict[int, int]] = [{} for _ in blocks]

    def count(i: int, part: torch.nn.Module) -> None:
        calls[i][id(part)] = calls[i].get(id(part), 0) + 1

    handles = [part.register_forward_pre_hook(lambda m, _, i=i: count(i, m)) for i, part in parts]
    enable, disable = (("activation_checkpointing_enable", "activation_checkpointing_disable")
                       if hasattr(model, "activation_checkpointing_enable") else  # transformers >= 5.x
                       ("gradient_checkpointing_enable", "gradient_checkpointing_disable"))
    if checkpointing:
        getattr(model, enable)({"use_reentrant": False})
    model.train()
    try:
        with SavedTensorMeter(exclude=model.parameters()) as meter:
            loss = model(input_ids=input_ids, labels=input_ids, use_cache=False).loss
        loss.backward()
    finally:
        for h in handles:
            h.remove()
        if checkpointing:
            getattr(model, disable)()
    forwards = sum(max(c.values(), default=0) for c in calls)
    return SavedActivations(meter.total, list(meter.shapes.values()), forwards)


def accumulate_gradients(model: torch.nn.Module, input_ids: torch.Tensor, micro_batches: int) -> list[int]:
    """Gradient accumulation: backward each of ``micro_batches`` equal slices of the batch with its loss
    divided by their number, summing into ``.grad``; returns the bytes each slice's forward saved.

    The gradients equal one step on the whole batch (up to rounding), while at most one slice's
    activations are alive at a time.

    Chapter 2, *The memory wall*.
    """
    _positive(micro_batches, "number of micro-batches")
    if input_ids.shape[0] % micro_batches:
        raise ValueError(f"A batch of {input_ids.shape[0]} sequences does not split into {micro_batches} "
                         "equal micro-batches; pick a number of micro-batches that divides it.")
    model.train()
    saved = []
    for ids in input_ids.chunk(micro_batches):
        with SavedTensorMeter(exclude=model.parameters()) as meter:
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss / micro_batches
        loss.backward()  # adds this slice's gradients; its activations are freed here
        saved.append(meter.total)
    return saved
