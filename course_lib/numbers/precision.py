"""Precision in practice: what FP16 and BF16 do to real tensors, and to a short training run.

Chapter 3 (*Number formats*) builds on :mod:`course_lib.numbers.format_specs`, which computes every
format's range and precision from its bits; this module shows the same limits on real torch tensors
(the chapter's tables and plots of them are in :mod:`course_lib.chapters.ch03`):

* :func:`cast` rounds values to a torch dtype and back, :func:`cast_stats` counts what overflowed
  to inf, underflowed to zero or became subnormal;
* :func:`rms_norm` computed entirely in one dtype shows a *large activation* overflowing: one
  outlier feature of 300 squares to 90,000, beyond FP16's 65,504, and the whole output becomes 0;
* :func:`tiny_gradients` and :func:`relative_error_curve` show *tiny values* underflowing;
* :func:`train_in_mode` / :func:`compare_modes` run a small classifier in FP32, FP16 autocast without loss
  scaling, FP16 with ``torch.amp.GradScaler`` (dynamic loss scaling) and BF16 autocast, recording
  the loss and the fraction of gradient entries that are exactly zero at every step.

The training task is set up so that its gradients are as small as a language model's: the loss
of each step's batch is divided by the number of tokens of a large batch (``tokens_per_batch``,
2**22 by default, the order of GPT-3's 3.2M-token batches), as in gradient accumulation, where
each micro-batch's loss is divided by the total token count. Adam's ratio m / sqrt(v) cancels a
constant factor on the loss, but its ``eps`` (1e-8) does not: against gradients 8,192 times smaller
than a plain mean's, eps is no longer negligible and FP32 ends at a somewhat higher loss (0.016
against 0.013 on the default task). Scaling eps by the same factor (``adam_eps``) makes the update
the plain mean's again. FP16 cares about the factor for another reason: every gradient is that
much closer to its smallest number.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from course_lib.base import dtypes
from course_lib.base.checks import choice as _choice
from course_lib.base.checks import positive as _positive
from course_lib.numbers import format_specs

__all__ = [
    "CAST_FORMATS", "MODES", "MODE_LABELS", "torch_dtype", "torch_value_of_bits", "cast", "CastStats",
    "cast_stats", "activation_with_outlier", "rms_norm", "tiny_gradients", "relative_error_curve",
    "matmul_relative_error", "synthetic_task", "small_mlp", "TrainingRun", "train_in_mode",
    "compare_modes",
]  # fmt: skip

#: Training modes of :func:`train_in_mode`: the precision of the forward and backward maths.
MODES = ("fp32", "fp16", "fp16-scaled", "bf16")
MODE_LABELS = {
    "fp32": "FP32 (reference)",
    "fp16": "FP16 autocast, no loss scaling",
    "fp16-scaled": "FP16 autocast + GradScaler",
    "bf16": "BF16 autocast, no loss scaling",
}

#: The format names :func:`cast` and friends accept: the floating-point formats torch can store.
CAST_FORMATS: tuple[str, ...] = ("fp64", "fp32", "fp16", "bf16", "e4m3", "e5m2")


def torch_dtype(name: str) -> torch.dtype:
    """torch's dtype for a floating-point format name of the registry (:mod:`course_lib.base.dtypes`).

    Chapter 3, *Number formats*.
    """
    return dtypes.torch_dtype(name, CAST_FORMATS)


def torch_value_of_bits(bits: int, name: str) -> float:
    """The value torch itself reads from a bit pattern (an independent check of the codec's decoder).

    Chapter 3, *Number formats*.
    """
    dtype = torch_dtype(name)
    width = torch.empty(0, dtype=dtype).element_size() * 8
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 0 <= bits < 1 << width:
        raise ValueError(f"a {name} bit pattern is an integer from 0 to {(1 << width) - 1}, got {bits!r}")
    signed = int(bits) - (1 << width) if bits >= 1 << (width - 1) else int(bits)  # torch has no uint16/32 view
    int_dtype = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[width]
    return torch.tensor([signed], dtype=int_dtype).view(dtype).to(torch.float64).item()


def _tensor(values: Any) -> torch.Tensor:
    """Values as a float tensor: tensors keep their float dtype, everything else becomes float32."""
    if isinstance(values, torch.Tensor):
        return values if values.is_floating_point() else values.to(torch.float32)
    try:
        return torch.as_tensor(np.asarray(values, dtype=np.float64), dtype=torch.float32)
    except (TypeError, ValueError) as err:
        raise ValueError(f"values must be numbers, a list, an array or a tensor, got {values!r}") from err


def cast(values: Any, name: str) -> torch.Tensor:
    """Round values to torch's ``name`` dtype and back to float32: what storing them in that format keeps.

    Numbers and lists become float32 tensors first (as a model's FP32 tensors would be). torch's
    casts overflow to inf (FP16, BF16, E5M2) except ``float8_e4m3fn``, which has no inf: torch 2.13
    saturates every value beyond 448 (inf included) to +-448; torch 2.11 rounds first and gives
    NaN for what rounds past 448 (beyond 464, halfway to 480), on the CPU as on a GPU, so the
    version decides, not the device (clamp first to saturate on any version).

    Chapter 3, *Number formats*.
    """
    dtype = torch_dtype(name)
    x = _tensor(values)
    return x.to(dtype).to(torch.float32 if dtype != torch.float64 else torch.float64)


@dataclass(frozen=True)
class CastStats:
    """What casting a tensor to one format did to its values: counts and the worst relative error.

    Chapter 3, *Number formats*.
    """

    name: str
    total: int
    overflowed: int  # finite inputs that became +-inf or NaN
    underflowed: int  # nonzero inputs that became exactly zero
    subnormal: int  # results that are subnormal numbers of the format (reduced precision)
    max_relative_error: float  # over inputs that stayed finite and nonzero

    @property
    def overflow_fraction(self) -> float:
        """Share of the values that overflowed."""
        return self.overflowed / self.total if self.total else 0.0

    @property
    def underflow_fraction(self) -> float:
        """Share of the values that underflowed to zero."""
        return self.underflowed / self.total if self.total else 0.0

    @property
    def subnormal_fraction(self) -> float:
        """Share of the values stored as subnormals."""
        return self.subnormal / self.total if self.total else 0.0


def cast_stats(values: Any, name: str) -> CastStats:
    """Cast values to ``name`` and count overflows (to inf), underflows (to 0) and subnormal results.

    Chapter 3, *Number formats*.
    """
    fmt = format_specs.get_format(name)
    x = _tensor(values).detach().to(torch.float64).flatten()
    y = cast(x, name).to(torch.float64)
    finite, nonzero = torch.isfinite(x), x != 0
    overflow = finite & ~torch.isfinite(y)
    underflow = nonzero & finite & (y == 0)
    sub = torch.isfinite(y) & (y != 0) & (y.abs() < fmt.min_normal)
    kept = finite & nonzero & torch.isfinite(y) & (y != 0)
    rel = ((y[kept] - x[kept]).abs() / x[kept].abs()).max().item() if bool(kept.any()) else 0.0
    return CastStats(name, x.numel(), int(overflow.sum()), int(underflow.sum()), int(sub.sum()), rel)


# --------------------------------------------------------------------------------------------
# Overflow: a large activation
# --------------------------------------------------------------------------------------------


def activation_with_outlier(size: int = 1024, outlier: float = 300.0, seed: int = 0) -> torch.Tensor:
    """A seeded FP32 activation vector: N(0, 1) features plus one outlier feature of magnitude ``outlier``.

    Large outlier features are typical of transformer activations (Dettmers et al. 2022, LLM.int8()).

    Chapter 3, *Number formats*.
    """
    _positive(size, "size", integer=True)
    if not isinstance(outlier, (int, float)) or not math.isfinite(outlier):
        raise ValueError(f"outlier must be a finite number, got {outlier!r}")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(size, generator=g)
    x[size // 2] = outlier
    return x


def rms_norm(x: torch.Tensor, name: str = "fp32", eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm, ``x / sqrt(mean(x**2) + eps)``, computed entirely in ``name``'s dtype; returned in float32.

    In FP16 the square of any feature above 255.9 overflows (256**2 = 65,536 > 65,504), the mean
    becomes inf and every output becomes 0: why autocast keeps norms and reductions in FP32.

    Chapter 3, *Number formats*.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError("rms_norm() needs a floating-point torch tensor")
    dtype = torch_dtype(name)
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise ValueError("rms_norm() computes in fp64, fp32, fp16 or bf16; torch has no FP8 arithmetic")
    h = x.to(dtype)
    ms = (h * h).mean(dim=-1, keepdim=True)
    return (h / torch.sqrt(ms + eps)).to(torch.float32)


# --------------------------------------------------------------------------------------------
# Underflow: tiny gradients, and the range/precision map
# --------------------------------------------------------------------------------------------


def tiny_gradients(size: int = 100_000, low: float = 1e-10, high: float = 1e-2, seed: int = 0) -> torch.Tensor:
    """Seeded FP32 'gradient' values spread log-uniformly over [low, high], half of them negative.

    Chapter 3, *Number formats*.
    """
    _positive(size, "size", integer=True)
    _positive(low, "low")
    _positive(high, "high")
    if not low < high:
        raise ValueError(f"low must be below high, got low={low!r}, high={high!r}")
    g = torch.Generator().manual_seed(seed)
    exponents = torch.empty(size, dtype=torch.float64).uniform_(math.log10(low), math.log10(high), generator=g)
    signs = torch.where(torch.rand(size, generator=g) < 0.5, -1.0, 1.0).to(torch.float64)
    return (signs * 10.0**exponents).to(torch.float32)


def relative_error_curve(
    name: str, low: float = 2.0**-30, high: float = 2.0**20, points: int = 4000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Magnitudes spread log-uniformly over [low, high] and the relative error of storing each in ``name``.

    An underflow to zero has relative error 1; an overflow has error inf.

    Chapter 3, *Number formats*.
    """
    _positive(points, "points", integer=True)
    x = tiny_gradients(points, low, high, seed).abs()
    x, _ = torch.sort(x)
    y = cast(x, name)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = ((y.double() - x.double()).abs() / x.double()).numpy()
    err[~np.isfinite(y.numpy())] = np.inf
    return x.double().numpy(), err


def matmul_relative_error(size: int = 256, name: str = "bf16", seed: int = 0) -> float:
    """Relative (Frobenius) error of a product of two N(0, 1) matrices computed in ``name``, against float64.

    Chapter 3, *Number formats*.
    """
    _positive(size, "size", integer=True)
    dtype = torch_dtype(name)
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(size, size, generator=g), torch.randn(size, size, generator=g)
    exact = a.double() @ b.double()
    got = (a.to(dtype) @ b.to(dtype)).double()
    return (torch.linalg.norm(got - exact) / torch.linalg.norm(exact)).item()


# --------------------------------------------------------------------------------------------
# A short training run in four precisions
# --------------------------------------------------------------------------------------------


def synthetic_task(
    examples: int = 512, features: int = 32, classes: int = 64, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded classification task: N(0, 1) inputs labelled by a random teacher network (argmax of its outputs).

    Chapter 3, *Number formats*.
    """
    for value, what in [(examples, "examples"), (features, "features"), (classes, "classes")]:
        _positive(value, what, integer=True)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(examples, features, generator=g)
    w1 = torch.randn(features, 64, generator=g) / math.sqrt(features)
    w2 = torch.randn(64, classes, generator=g)
    return x, (torch.tanh(x @ w1) @ w2).argmax(dim=1)


def small_mlp(
    features: int = 32, classes: int = 64, hidden: int = 128, depth: int = 2, seed: int = 1
) -> torch.nn.Module:
    """A seeded MLP: ``depth`` tanh hidden layers of width ``hidden``, then a linear layer to the class logits.

    Chapter 3, *Number formats*.
    """
    for value, what in [(features, "features"), (classes, "classes"), (hidden, "hidden"), (depth, "depth")]:
        _positive(value, what, integer=True)
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    width = features
    for _ in range(depth):
        layers += [torch.nn.Linear(width, hidden), torch.nn.Tanh()]
        width = hidden
    layers.append(torch.nn.Linear(width, classes))
    return torch.nn.Sequential(*layers)


@dataclass
class TrainingRun:
    """One training run: per-step loss, zero-gradient fractions and loss scale, and the final accuracy.

    Chapter 3, *Number formats*.
    """

    mode: str
    losses: list[float] = field(default_factory=list)  # mean cross-entropy per example (unscaled)
    zero_fractions: list[float] = field(default_factory=list)  # parameter-gradient entries exactly 0
    logit_zero_fractions: list[float] = field(default_factory=list)  # gradient entries at the logits exactly 0
    scales: list[float] = field(default_factory=list)  # loss scale used at each step (1 without scaling)
    skipped_steps: int = 0  # steps GradScaler skipped because a gradient was inf or NaN
    accuracy: float = float("nan")  # on the training examples, after the last step
    seconds: float = 0.0

    @property
    def label(self) -> str:
        """A readable name of the mode."""
        return MODE_LABELS[self.mode]

    @property
    def final_loss(self) -> float:
        """Loss at the last step."""
        return self.losses[-1]

    @property
    def first_zero_fraction(self) -> float:
        """Fraction of parameter-gradient entries exactly zero at the first step."""
        return self.zero_fractions[0]

    @property
    def mean_zero_fraction(self) -> float:
        """Fraction of parameter-gradient entries exactly zero, averaged over the steps."""
        return float(np.mean(self.zero_fractions))

    @property
    def mean_logit_zero_fraction(self) -> float:
        """Fraction of the gradient entries at the logits exactly zero, averaged over the steps."""
        return float(np.mean(self.logit_zero_fractions))


@contextmanager
def _threads(n: int | None) -> Iterator[None]:
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_in_mode(
    mode: str,
    steps: int = 150,
    tokens_per_batch: float = 2**22,
    lr: float = 3e-3,
    seed: int = 0,
    device: str | torch.device | None = None,
    threads: int | None = 1,
    adam_eps: float = 1e-8,
) -> TrainingRun:
    """Train :func:`small_mlp` on :func:`synthetic_task` with Adam in one precision mode and record what happens.

    Every mode keeps FP32 weights (the master copy) and an FP32 optimizer; they differ in the
    maths of forward and backward: ``"fp32"``; ``"fp16"`` (``torch.autocast`` to float16, no loss
    scaling); ``"fp16-scaled"`` (the same with ``torch.amp.GradScaler``: the loss is multiplied by
    a scale, 2**16 to start, before backward, the gradients divided by it before the step, and a
    step with an inf/NaN gradient is skipped and the scale halved); ``"bf16"`` (autocast to
    bfloat16, no scaling). The step's loss is the batch's summed cross-entropy divided by
    ``tokens_per_batch`` (see the module docstring); ``losses`` records the per-example mean.
    ``adam_eps`` is Adam's eps (torch's default, 1e-8): multiplied by ``examples / tokens_per_batch``
    it makes the run train as with a plain mean, because then every term of Adam's update scales alike.
    ``threads`` (CPU only) sets torch's threads during the run: one is fastest for so small a
    model and makes the run bit-for-bit repeatable.

    Chapter 3, *Number formats*.
    """
    mode = _choice(mode, MODES, "training mode")
    _positive(steps, "steps", integer=True)
    _positive(tokens_per_batch, "tokens_per_batch")
    _positive(lr, "lr")
    _positive(adam_eps, "adam_eps")
    if threads is not None:
        _positive(threads, "threads", integer=True)
    from course_lib.base.env import get_device

    dev = get_device(None if device is None else str(device))
    x, y = synthetic_task(seed=seed)
    x, y = x.to(dev), y.to(dev)
    model = small_mlp(features=x.shape[1], seed=seed + 1).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr, eps=adam_eps)
    dtype = None if mode == "fp32" else dtypes.torch_dtype(mode.removesuffix("-scaled"))
    scaler = torch.amp.GradScaler(dev.type, enabled=mode == "fp16-scaled")
    run = TrainingRun(mode)
    logit_grads: list[torch.Tensor] = []
    start = time.perf_counter()
    with _threads(threads if dev.type == "cpu" else None):
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                logits = model(x)
            logits.register_hook(lambda g: logit_grads.append(g.detach()))
            total = torch.nn.functional.cross_entropy(logits.float(), y, reduction="sum")
            run.scales.append(float(scaler.get_scale()) if scaler.is_enabled() else 1.0)
            scaler.scale(total / tokens_per_batch).backward()
            scaler.unscale_(opt)
            grads = torch.cat([p.grad.flatten() for p in model.parameters()])
            run.zero_fractions.append((grads == 0).float().mean().item())
            run.logit_zero_fractions.append((logit_grads.pop() == 0).float().mean().item())
            scale_before = scaler.get_scale() if scaler.is_enabled() else 1.0
            scaler.step(opt)
            scaler.update()
            if scaler.is_enabled() and scaler.get_scale() < scale_before:
                run.skipped_steps += 1
            run.losses.append(total.item() / len(y))
        with torch.no_grad():
            run.accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
    run.seconds = time.perf_counter() - start
    return run


def compare_modes(modes: Sequence[str] = MODES, progress: bool | None = False, **kwargs: Any) -> dict[str, TrainingRun]:
    """Run :func:`train_in_mode` once per mode with the same seed and settings (``progress=None``: a bar in a terminal).

    Chapter 3, *Number formats*.
    """
    if isinstance(modes, str) or not modes:
        raise ValueError(f"modes must be a non-empty list of modes from {', '.join(MODES)}, got {modes!r}")
    modes = [_choice(m, MODES, "training mode") for m in modes]
    from course_lib.base.env import progress_bar

    bar = progress_bar(modes, len(modes), "training", progress is None or bool(progress))
    return {mode: train_in_mode(mode, **kwargs) for mode in bar}
