"""Chapter 2, *The memory wall*: the chapter's lab, code exercises and a prediction checked against the library.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
"""

from __future__ import annotations

import torch

from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction
from course_lib.numbers import memory, memory_meter
from course_lib.text import models

# ---------------------------------------------------------------------------------------------
# The bytes of model states with Adam
# ---------------------------------------------------------------------------------------------

STATES = ("weights", "gradients", "master_weights", "optimizer_states")


def _adam_model_states(n_params: int, precision: str) -> dict[str, float]:
    """The reference: the model states of ``memory.training_memory`` with Adam on one GPU."""
    parts = memory.training_memory(n_params, precision, "adam").components()
    return {k: parts[k] for k in STATES}


def _states_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2)
    # fp32 first: an answer right there but not in mixed precision tells 16-bit Adam moments
    # (2 + 2 bytes) from a single FP32 moment (4 bytes), which give the same mixed-precision bytes
    return [Case((124_439_808, "fp32"), "pure fp32: no master copy"),
            Case((int(torch.randint(10**8, 10**10, (), generator=g)), "bf16-mixed"),
                 "random, bf16-mixed"),
            Case((int(torch.randint(10**6, 10**9, (), generator=g)), "fp16-mixed"), "fp16-mixed"),
            Case((1, "bf16-mixed"), "one parameter"),
            Case((175_000_000_000, "bf16-mixed"), "175B")]


def _with(n_params: int, precision: str, **changes: float) -> dict[str, float]:
    """The reference's states with some of them replaced by ``bytes per parameter x n_params``."""
    return {**_adam_model_states(n_params, precision), **{k: v * n_params for k, v in changes.items()}}


def _no_master(n, precision):
    return _with(n, precision, master_weights=0)


def _one_moment(n, precision):
    return _with(n, precision, optimizer_states=4)


def _half_moments(n, precision):
    return _with(n, precision, optimizer_states=8 if precision == "fp32" else 4)


def _bits(n, precision):
    return {k: 8 * v for k, v in _adam_model_states(n, precision).items()}


def _master_in_fp32(n, precision):
    return _with(n, precision, master_weights=4)


def _fp32_gradients(n, precision):
    return _with(n, precision, gradients=4)


adam_model_states = Exercise(
    "adam_model_states",
    "Bytes of weights, gradients, master weights and Adam states for n_params parameters in a precision.",
    _adam_model_states, _states_cases,
    misconceptions=(
        Misconception("forgotten master copy", "leave out the FP32 master weights that mixed precision "
                      "updates (4 bytes per parameter)", _no_master),
        Misconception("one Adam moment", "keep one FP32 state per parameter, where Adam keeps two: "
                      "momentum and variance", _one_moment),
        Misconception("16-bit Adam moments", "keep Adam's momentum and variance in the weights' "
                      "16-bit format (2 + 2 bytes); mixed precision keeps them in FP32, 4 + 4 "
                      "bytes per parameter", _half_moments),
        Misconception("bits for bytes", "count bits instead of bytes (16 for a bf16 value, 32 for an FP32 one)",
                      _bits),
        Misconception("a master copy in fp32 too", "add an FP32 master copy to weights that are FP32 already",
                      _master_in_fp32),
        Misconception("FP32 gradients", "keep the gradients in FP32 (the 20-byte convention) where this "
                      "course's mixed precision keeps them in 16 bits", _fp32_gradients),
    ),
)

# ---------------------------------------------------------------------------------------------
# Activations of one transformer layer (Korthikanti et al. 2022)
# ---------------------------------------------------------------------------------------------


def _activation_bytes_per_layer(seq_len: int, batch: int, hidden: int, heads: int, bytes_per_element: float,
                                mask_bytes: float) -> float:
    """The reference: ``memory.activation_bytes_per_layer``, with dropout and stored attention scores."""
    return memory.activation_bytes_per_layer(seq_len, batch, hidden, heads, bytes_per_element, mask_bytes)


def _activation_cases() -> list[Case]:
    g = torch.Generator().manual_seed(3)
    heads = int(torch.randint(8, 33, (), generator=g))
    random = (int(torch.randint(256, 4097, (), generator=g)), int(torch.randint(1, 9, (), generator=g)),
              64 * heads, heads, 2, 1)
    return [Case(random, "random, 16-bit with 1-byte masks (a GPU)"),
            Case((128, 8, 256, 4, 4, 4), "fp32 on a CPU: 4-byte masks"),
            Case((7, 1, 8, 1, 2, 1), "one sequence, one head"),
            Case((8192, 1, 1024, 16, 2, 1), "a sequence longer than the hidden size")]


def _scores_linear(s, b, h, a, e, d):
    return s * b * h * (16 * e + 2 * d) + a * s * b * (2 * e + d)


def _papers_numbers(s, b, h, a, e, d):
    return s * b * h * (34 + 5 * a * s / h)


def _bits_per_layer(s, b, h, a, e, d):
    return 8 * _activation_bytes_per_layer(s, b, h, a, e, d)


def _wide_masks(s, b, h, a, e, d):
    return _activation_bytes_per_layer(s, b, h, a, e, e)


activation_bytes_per_layer = Exercise(
    "activation_bytes_per_layer",
    "Bytes one transformer layer saves for backward: s*b*h*(16e + 2d) + a*s^2*b*(2e + d).",
    _activation_bytes_per_layer, _activation_cases,
    misconceptions=(
        Misconception("scores grow with s, not s²", "count a*s*b attention scores instead of a*s*s*b: "
                      "each of the s queries has a score for each of the s keys", _scores_linear),
        Misconception("the paper's 34 and 5 for every size", "use the paper's 34 and 5, which hold only "
                      "for 2-byte activations and 1-byte masks", _papers_numbers),
        Misconception("bits for bytes", "count bits instead of bytes", _bits_per_layer),
        Misconception("masks as wide as the data", "store the dropout masks at bytes_per_element instead of "
                      "mask_bytes", _wide_masks),
    ),
)

# ---------------------------------------------------------------------------------------------
# Predict, then measure: the memory of one training step of the chapter's GPT-2
# ---------------------------------------------------------------------------------------------

#: The chapter's GPT-2 (layers, width, heads, vocabulary, positions) and the step the prediction measures.
SHAPE = memory.ModelShape(4, 256, 4, 8192, 256)
BATCH, SEQ = 4, 224


def _training_step_memory() -> dict[str, float]:
    """One fp32 Adam step of the chapter's GPT-2 on the CPU, measured component by component, in MB."""
    config = models.tiny_config("gpt2", hidden=SHAPE.hidden, layers=SHAPE.n_layers, heads=SHAPE.n_heads,
                                context=SHAPE.positions, vocab=SHAPE.vocab, dropout=0.1, activation="gelu",
                                attention="eager")
    with torch.random.fork_rng():  # building and dropout draw from torch's generator: leave it as it was
        step = memory_meter.measure_training_step(models.build_model(config, seed=0), BATCH, SEQ)
    return {"weights": step.weights / 1e6, "gradients": step.gradients / 1e6,
            "optimizer states": step.optimizer_states / 1e6, "activations": step.activations / 1e6}


def _formula(mask_bytes: float = 4, state_bytes: int = 16, activations: bool = True, logits: bool = True) -> float:
    """The step's bytes by the chapter's formulas, or with a mistake in them (the mask size, a state, a term)."""
    acts = memory.activation_bytes(SHAPE, SEQ, BATCH, bytes_per_element=4, mask_bytes=mask_bytes)
    acts -= 0 if logits else BATCH * SEQ * SHAPE.vocab * 4  # the loss's FP32 log-probabilities
    return state_bytes * SHAPE.n_params + (acts if activations else 0)


def _share(**mistake: float) -> float:
    """Prediction / measurement for a prediction made with ``mistake``."""
    return _formula(**mistake) / _formula()


training_step_memory = Prediction(
    "training_step_memory",
    "Memory of one fp32 Adam step of the chapter's GPT-2 at batch 4 x 224 tokens on a CPU, in MB, by component.",
    _training_step_memory, unit="MB", rel_tol=0.02,
    misconceptions=(
        (8.0, "count bits instead of bytes"),
        (1e6 / 2**20, "divide by 2**20 (MiB) where MB (10**6 bytes) was asked: the GB-for-GiB mix-up"),
        (_share(state_bytes=12), "leave out 4 bytes per parameter: one of Adam's two moments, or the gradients"),
        (_share(mask_bytes=1), "count the paper's 1-byte dropout masks, which a GPU keeps; a CPU keeps them "
                               "in the data's 4 bytes"),
        (_share(activations=False), "leave out the activations, a large share of a training step's memory"),
        (_share(logits=False), "leave out the loss's FP32 log-probabilities, batch x sequence x vocabulary "
                               "values"),
    ),
)
