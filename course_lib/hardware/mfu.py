"""Model FLOPs utilisation (MFU) and hardware FLOPs utilisation (HFU) of a real training run.

MFU is the share of a machine's peak that training turns into the model's own arithmetic
(Chowdhery et al., 2022, PaLM, Appendix B): the observed tokens per second times the model's
FLOPs per token, over the peak FLOP/s. A decoder of ``N`` parameters with ``L`` layers of
``H`` heads of size ``Q`` (``H Q`` = the hidden size ``d``), trained on sequences of ``T``
tokens, costs per token::

    6 N + 12 L H Q T        (forward 2 N + 4 L d T, backward twice the forward)

``6 N``: every weight multiplies each token once forward (a multiply and an add) and twice
backward (the gradients of the input and of the weight); ``12 L d T``: the two attention
products ``Q K^T`` and ``A V``, each ``2 T d`` FLOPs per token and layer forward, counted over the
whole ``T x T`` square as PaLM counts them (a causal kernel may skip half). ``N`` here is the
weights that enter matrix products (:func:`matmul_parameters`): the position table is a lookup
and biases and layer norms are a few FLOPs per element, so they are left out.

HFU counts what the hardware executed instead: with activation checkpointing the backward pass
recomputes forward activations, FLOPs that MFU does not count, so HFU >= MFU (PaLM 540B: 46.2 %
MFU, 57.8 % HFU). Korthikanti et al. (2023) recompute only the parts of attention that are
cheap to recompute and costly to keep (selective recomputation): a 530B GPT-3-style model on
2,240 A100s reached 54.2 % MFU, against 42.1 % with full recomputation.

:func:`count_flops` counts the executed FLOPs of one training step with
``torch.utils.flop_counter.FlopCounterMode``, recomputation included (torch's
non-reentrant checkpointing stops recomputing once backward has what it needs, so a full
recomputation is an upper bound). :func:`measure_utilisation` times steps of the course's own
training loop (:func:`course_lib.text.training.train`) and returns a :class:`Utilisation`.

Chapter 10 (*Hardware for LLM training*) computes both on the course model, against this
machine's measured FP32 peak (:mod:`course_lib.hardware.profile`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import flop_counter

from course_lib.base.checks import positive
from course_lib.text import training

__all__ = ["Utilisation", "count_flops", "matmul_parameters", "measure_utilisation",
           "model_flops_per_token", "model_shape"]


def _cpu_attention(query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None,
                   **kwargs: Any) -> int:
    return flop_counter.sdpa_flop_count(query, key, value)


def _cpu_attention_backward(grad_out: Any, query: Any, key: Any, value: Any, *args: Any,
                            out_shape: Any = None, **kwargs: Any) -> int:
    return flop_counter.sdpa_backward_flop_count(grad_out, query, key, value)


def _custom_mapping() -> dict[Any, Any]:
    """torch's flop counter knows the GPU attention kernels; the CPU's fused one is added here."""
    ops = torch.ops.aten
    mapping = {}
    if hasattr(ops, "_scaled_dot_product_flash_attention_for_cpu"):
        mapping[ops._scaled_dot_product_flash_attention_for_cpu] = _cpu_attention
    if hasattr(ops, "_scaled_dot_product_flash_attention_for_cpu_backward"):
        mapping[ops._scaled_dot_product_flash_attention_for_cpu_backward] = _cpu_attention_backward
    return mapping


def matmul_parameters(model: torch.nn.Module) -> int:
    """Parameters that multiply activations: the weights of every linear layer and of the output head.

    ``nn.Linear`` and transformers' ``Conv1D`` (GPT-2's linear layers), and the output embedding
    (``get_output_embeddings()``, tied to the input table or not), each tensor counted once.

    Chapter 10, *Hardware for LLM training*.
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"matmul_parameters() needs a torch model, got {type(model).__name__}")
    weights = {}
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D":
            weights[id(module.weight)] = module.weight.numel()
    head = getattr(model, "get_output_embeddings", lambda: None)()
    if head is not None:
        weights[id(head.weight)] = head.weight.numel()
    if not weights:
        raise ValueError("the model has no linear layers: matmul_parameters() counts the weights of "
                         "nn.Linear / Conv1D layers and the output head")
    return sum(weights.values())


def model_flops_per_token(n_params: float, layers: int, hidden: int, seq_len: int) -> float:
    """PaLM's training FLOPs per token: ``6 N + 12 L d T`` (d = heads x head size = hidden size).

    Chapter 10, *Hardware for LLM training*.
    """
    n = positive(n_params, "n_params")
    for value, what in ((layers, "layers"), (hidden, "hidden"), (seq_len, "seq_len")):
        positive(value, what, integer=True)
    return 6 * n + 12 * layers * hidden * seq_len


def model_shape(model: torch.nn.Module) -> tuple[int, int]:
    """(layers, hidden size) of a transformers decoder, from its config.

    Chapter 10, *Hardware for LLM training*.
    """
    config = getattr(model, "config", None)
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    if not layers or not hidden:
        raise ValueError("model_shape() needs a transformers model whose config gives the layers "
                         "and the hidden size (num_hidden_layers, hidden_size)")
    return int(layers), int(hidden)


def count_flops(model: torch.nn.Module, batch: Mapping[str, torch.Tensor],
                backward: bool = True) -> int:
    """FLOPs that one forward (and backward) of ``batch`` executes, by ``FlopCounterMode``.

    Counts matrix products and attention (the CPU's fused attention kernel too), the
    recomputation of activation checkpointing included; gradients are cleared afterwards.

    Chapter 10, *Hardware for LLM training*.
    """
    if not isinstance(batch, Mapping) or "input_ids" not in batch:
        raise ValueError("count_flops() needs a batch dict with input_ids (and labels), as "
                         "training.training_batches() yields")
    counter = flop_counter.FlopCounterMode(display=False, custom_mapping=_custom_mapping())
    with counter:
        out = model(**batch)
        if backward:
            out.loss.backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def _checkpointing_switch(model: torch.nn.Module) -> tuple[Any, Any]:
    """(enable, disable) of a transformers model's activation checkpointing, by either name."""
    for on, off in (("activation_checkpointing_enable", "activation_checkpointing_disable"),
                    ("gradient_checkpointing_enable", "gradient_checkpointing_disable")):
        if hasattr(model, on) and hasattr(model, off):
            return getattr(model, on), getattr(model, off)
    raise ValueError("checkpointing=True needs a transformers model "
                     "(activation_checkpointing_enable)")


@dataclass(frozen=True)
class Utilisation:
    """A timed training run: tokens, seconds, model and hardware FLOPs per token, the peak; MFU and HFU.

    Chapter 10, *Hardware for LLM training*.
    """

    tokens: int
    seconds: float
    model_flops_per_token: float
    hardware_flops_per_token: float
    peak: float
    checkpointing: bool = False

    def __post_init__(self) -> None:
        positive(self.tokens, "tokens", integer=True)
        for name in ("seconds", "model_flops_per_token", "hardware_flops_per_token", "peak"):
            positive(getattr(self, name), name)

    @property
    def tokens_per_second(self) -> float:
        """Training throughput of the timed steps."""
        return self.tokens / self.seconds

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: tokens/s x model FLOPs per token / peak FLOP/s."""
        return self.tokens_per_second * self.model_flops_per_token / self.peak

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilisation: tokens/s x executed FLOPs per token (recomputation too) / peak."""
        return self.tokens_per_second * self.hardware_flops_per_token / self.peak


def measure_utilisation(model: torch.nn.Module, tokenizer: Any, recipe: training.Recipe,
                        peak: float, checkpointing: bool = False, untimed: int = 1) -> Utilisation:
    """Train ``model`` for ``recipe.steps`` steps with the course's loop; MFU and HFU of the timed steps.

    The first ``untimed`` steps warm up (kernels chosen, memory allocated) and are not timed; the
    clock runs from the end of the last of them to the end of the last step, so it includes
    everything a step does (batch, forward, backward, clipping, AdamW). The executed FLOPs come
    from :func:`count_flops` on the first batch (with ``checkpointing``, recomputation included).
    ``peak``: FLOP/s, e.g. ``machine_profile().matmul_flops``. The model is trained in place and
    gradient checkpointing is switched off again afterwards.

    Chapter 10, *Hardware for LLM training*.
    """
    peak = positive(peak, "peak (FLOP/s)")
    untimed = positive(untimed, "untimed", integer=True)
    if recipe.steps <= untimed:
        raise ValueError(f"recipe.steps ({recipe.steps}) must exceed untimed ({untimed}): at least "
                         "one step must be timed")
    if checkpointing not in (True, False):
        raise ValueError(f"checkpointing must be True or False, got {checkpointing!r}")
    switch = _checkpointing_switch(model) if checkpointing else None
    layers, hidden = model_shape(model)
    kind = "gpt2"  # the course's causal-LM objective: next-token prediction
    first = next(training.training_batches(kind, tokenizer, recipe))
    tokens_per_step = recipe.batch_size * recipe.seq_len
    use_cache = getattr(model.config, "use_cache", None)
    if switch is not None:
        model.config.use_cache = False  # a cache is of no use in training, and clashes with it
        switch[0]()
    try:
        model.train()
        executed = count_flops(model, first) / tokens_per_step
        stamps: list[float] = []
        training.train(model, kind, tokenizer, recipe, progress=False,
                       on_step=lambda step, loss, opt: stamps.append(time.perf_counter()))
    finally:
        if switch is not None:
            switch[1]()
            model.config.use_cache = use_cache
    seconds = stamps[-1] - stamps[untimed - 1]
    flops = model_flops_per_token(matmul_parameters(model), layers, hidden, recipe.seq_len)
    return Utilisation((recipe.steps - untimed) * tokens_per_step, seconds, flops, executed, peak,
                       checkpointing)
