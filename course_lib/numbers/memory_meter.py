"""Training memory measured on a real model: what autograd saves for backward, byte by byte.

Chapter 2 (*The memory wall*) checks its estimates (:mod:`course_lib.numbers.memory`) with it: one
Adam step of a real model, its weights, gradients and optimizer states counted from their storages
and its activations counted as autograd saves them (:class:`SavedTensorMeter`); on a GPU the CUDA
allocator's peak as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch

from course_lib.base.checks import positive as _positive
from course_lib.numbers import memory

__all__ = ["SavedTensorMeter", "Measurement", "measure_training_step"]


class SavedTensorMeter:
    """Counts the bytes autograd saves for backward, using ``torch.autograd.graph.saved_tensors_hooks``.

    Storages already owned by parameters (a weight saved by a matmul) are not activations and are
    left out; each storage counts once however many times it is saved.

    Chapter 2, *The memory wall*.
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self._exclude = {p.untyped_storage().data_ptr() for p in exclude}
        self.storages: dict[int, int] = {}

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self._exclude:
            self.storages[ptr] = storage.nbytes()
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
