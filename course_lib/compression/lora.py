"""Low-rank adapters (LoRA) and QLoRA: train a few small matrices next to a frozen (4-bit) model.

Chapter 5 ("Quantization") fine-tunes the course model with them.

LoRA (Hu et al. 2021, arXiv 2106.09685) keeps a layer's weight ``W`` frozen and learns
``W + (alpha / r) * B A`` with ``A`` (r x in) and ``B`` (out x r), ``B`` starting at zero so the
model starts exactly where it was. QLoRA (Dettmers et al. 2023, arXiv 2305.14314) does the same
on top of a base model stored in NF4: gradients flow through the decoded 4-bit weights into the
adapters only, so the optimizer keeps states for the adapters alone.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Iterable

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from course_lib.base.checks import positive
from course_lib.compression.quant_layers import QuantLinear, model_bytes

#: GPT-2's linear layers inside each block (its lm_head is tied to the embedding and left alone).
GPT2_TARGETS = ("c_attn", "c_proj", "c_fc")


def _features(module: nn.Module) -> tuple[int, int]:
    """(in features, out features) of nn.Linear, Conv1D or QuantLinear."""
    if isinstance(module, (nn.Linear, QuantLinear)):
        return module.in_features, module.out_features
    if isinstance(module, Conv1D):
        return module.weight.shape[0], module.weight.shape[1]
    raise ValueError(f"LoRA wraps nn.Linear, Conv1D or QuantLinear layers, not {type(module).__name__}")


def _placement(base: nn.Module) -> tuple[torch.device | None, torch.dtype]:
    """Device and compute dtype of a layer: its weight's, or for QuantLinear (which decodes to the
    input's dtype) its bias's, float32 without one."""
    if isinstance(base, QuantLinear):
        ref = base.bias if base.bias is not None else base.qweight.packed
        return ref.device, base.bias.dtype if base.bias is not None else torch.float32
    return base.weight.device, base.weight.dtype


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update: ``base(x) + (alpha / r) * x A^T B^T``.

    Chapter 5, *Quantization*.
    """

    def __init__(self, base: nn.Module, rank: int = 8, alpha: float = 16.0) -> None:
        super().__init__()
        positive(rank, "LoRA rank", integer=True)
        positive(alpha, "LoRA alpha")
        n_in, n_out = _features(base)
        self.base = base
        self.rank, self.scaling = rank, alpha / rank
        # As in the LoRA paper: A random (Kaiming-uniform like nn.Linear), B zero, so B A = 0 at the start.
        device, dtype = _placement(base)  # the adapters live where the layer lives, in its dtype
        self.lora_a = nn.Parameter(torch.empty(rank, n_in, device=device, dtype=dtype))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
        self.lora_b = nn.Parameter(torch.zeros(n_out, rank, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_a.t() @ self.lora_b.t()) * self.scaling

    def extra_repr(self) -> str:
        return f"rank={self.rank}, scaling={self.scaling:g}"


def add_lora(model: nn.Module, rank: int = 8, alpha: float = 16.0, targets: str | Iterable[str] = GPT2_TARGETS,
             seed: int = 0) -> nn.Module:
    """A copy of ``model`` with every parameter frozen and LoRA adapters on the layers named in ``targets``.

    A layer is a target when the last part of its name is in ``targets``. The adapters'
    initialisation is seeded. Raises ValueError when no layer matches.

    Chapter 5, *Quantization*.
    """
    targets = (targets,) if isinstance(targets, str) else tuple(targets)
    model = copy.deepcopy(model)
    for p in model.parameters():
        p.requires_grad_(False)
    names = [n for n, m in model.named_modules()
             if n.rpartition(".")[2] in targets and isinstance(m, (nn.Linear, Conv1D, QuantLinear))]
    if not names:
        raise ValueError(f"no nn.Linear, Conv1D or QuantLinear layer is named {', '.join(targets)}; "
                         "pass targets= with the last part of the layer names (model.named_modules())")
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        for name in names:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, LoRALinear(getattr(parent, child), rank, alpha))
    finally:
        torch.random.set_rng_state(generator_state)
    return model


def count_trainable(model: nn.Module) -> tuple[int, int]:
    """(trainable parameters, all parameters), each distinct tensor counted once.

    Chapter 5, *Quantization*.
    """
    params = {id(p): p for p in model.parameters()}.values()
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


@dataclass(frozen=True)
class FinetuneMemory:
    """Bytes measured after one AdamW step: the model's stored tensors, gradients and optimizer states.

    Chapter 5, *Quantization*.
    """

    label: str
    trainable: int
    weights: int
    gradients: int
    optimizer: int

    @property
    def total_bytes(self) -> int:
        return self.weights + self.gradients + self.optimizer


def measure_finetune_memory(model: nn.Module, batch: dict[str, torch.Tensor], label: str,
                            lr: float = 1e-4) -> FinetuneMemory:
    """Run one AdamW step on a copy of ``model`` and measure what fine-tuning keeps in memory.

    Weights: the model's stored tensors (packed codes count as they are stored); gradients: the
    ``.grad`` of trainable parameters; optimizer: AdamW's state tensors (step, two moments).
    Activations are left out: they depend on the batch, not on the method.

    Chapter 5, *Quantization*.
    """
    model = copy.deepcopy(model).train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("the model has no trainable parameter; add adapters with add_lora() first")
    opt = torch.optim.AdamW(trainable, lr=lr)
    model(**batch).loss.backward()
    opt.step()
    grads = sum(p.grad.numel() * p.grad.element_size() for p in trainable if p.grad is not None)
    states = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                 if isinstance(t, torch.Tensor))
    return FinetuneMemory(label, count_trainable(model)[0], model_bytes(model), grads, states)
