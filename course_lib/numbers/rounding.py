"""Pure BF16 weights: why round-to-nearest stalls small updates, and two cures (stochastic rounding, Kahan).

A BF16 weight near 1 has neighbours 2**-7 apart; an update smaller than half of that gap is
rounded away every step, so pure-BF16 training stalls where FP32 master weights keep moving:

* :func:`stochastic_round_bf16` rounds an FP32 value up or down at random, with the probability
  of rounding up equal to the dropped fraction of a gap, so the rounding is unbiased (its mean is
  the FP32 value) and small updates survive on average (Gupta et al. 2015);
* :func:`kahan_add` keeps what rounding lost in a BF16 compensation buffer and adds it back at the
  next step (Kahan summation, as Zamirai et al. 2020 apply it to BF16 weight updates);
* :func:`bf16_regression` trains a small linear regression with BF16 weights updated each way,
  against FP32 weights as the reference.

Chapter 3, *Number formats*, writes both cures out and checks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from course_lib.base.checks import choice as _choice
from course_lib.base.checks import positive as _positive

__all__ = [
    "UPDATE_RULES", "bf16_neighbours", "stochastic_round_bf16", "kahan_add", "accumulate_bf16", "RegressionRun",
    "bf16_regression",
]  # fmt: skip

#: How :func:`bf16_regression` and :func:`accumulate_bf16` apply an update: FP32 weights (the reference),
#: BF16 weights rounded to nearest, rounded stochastically, or with Kahan compensation.
UPDATE_RULES: tuple[str, ...] = ("fp32", "nearest", "stochastic", "kahan")
_LOW_BITS = 0xFFFF  # the 16 bits of an FP32 number that BF16 drops


def _fp32(x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"expected a floating-point torch tensor, got {type(x).__name__}")
    return x.detach().to(torch.float32).contiguous()


def bf16_neighbours(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The two BF16 numbers around each FP32 value: cut towards zero, and one gap further from zero (equal if exact).

    Chapter 3, *Number formats*.
    """
    bits = _fp32(x).view(torch.int32)
    cut = bits & ~_LOW_BITS
    away = torch.where(bits & _LOW_BITS != 0, cut + (_LOW_BITS + 1), cut)
    return cut.view(torch.float32).to(torch.bfloat16), away.view(torch.float32).to(torch.bfloat16)


def stochastic_round_bf16(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Round FP32 values to BF16 stochastically: add 16 uniform random bits below the kept 16, then cut them off.

    A value a fraction f of the gap above its lower neighbour (in magnitude) rounds away from
    zero with probability f, so the result's expectation is the value itself. NaN stays NaN.

    Chapter 3, *Number formats*.
    """
    x = _fp32(x)
    bits = x.view(torch.int32)
    noise = torch.randint(0, _LOW_BITS + 1, bits.shape, generator=generator, dtype=torch.int32)
    rounded = ((bits + noise) & ~_LOW_BITS).view(torch.float32)  # a carry moves to the next number
    return torch.where(torch.isnan(x), x, rounded).to(torch.bfloat16)


def kahan_add(
    weight: torch.Tensor, compensation: torch.Tensor, update: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Add ``update`` to BF16 ``weight`` with Kahan summation; returns the new weight and compensation (both BF16).

    Each step: ``y = update - compensation``, ``new = weight + y`` (rounded to BF16), and
    ``compensation = (new - weight) - y``, minus what the rounding lost, is subtracted at the next step.

    Chapter 3, *Number formats*.
    """
    for t, what in [(weight, "weight"), (compensation, "compensation")]:
        if not isinstance(t, torch.Tensor) or t.dtype != torch.bfloat16:
            raise ValueError(f"{what} must be a bfloat16 tensor (the stored weights and buffer)")
    y = update.to(torch.bfloat16) - compensation
    new = weight + y
    return new, (new - weight) - y


def _apply(rule: str, w: torch.Tensor, c: torch.Tensor, update: torch.Tensor, g: torch.Generator):
    if rule == "fp32":
        return w + update, c
    if rule == "nearest":
        return (w.float() + update).to(torch.bfloat16), c
    if rule == "stochastic":
        return stochastic_round_bf16(w.float() + update, g), c
    return kahan_add(w, c, update)


def _start(rule: str, w0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = torch.float32 if rule == "fp32" else torch.bfloat16
    return w0.to(dtype), torch.zeros_like(w0, dtype=torch.bfloat16)


def accumulate_bf16(start: float, increment: float, steps: int, rule: str = "nearest", seed: int = 0) -> float:
    """Add ``increment`` to ``start`` ``steps`` times, stored by ``rule`` (see :data:`UPDATE_RULES`); the final sum.

    Chapter 3, *Number formats*.
    """
    rule = _choice(rule, UPDATE_RULES, "update rule")
    _positive(steps, "steps", integer=True)
    g = torch.Generator().manual_seed(seed)
    w, c = _start(rule, torch.tensor([float(start)]))
    step = torch.tensor([float(increment)])
    for _ in range(steps):
        w, c = _apply(rule, w, c, step, g)
    return w.float().item()


@dataclass
class RegressionRun:
    """A linear regression trained with one update rule: loss per step and the final weights (float32).

    Chapter 3, *Number formats*.
    """

    rule: str
    losses: list[float] = field(default_factory=list)
    weights: torch.Tensor = field(default_factory=lambda: torch.zeros(0))
    optimum_loss: float = float("nan")  # the least-squares solution's loss, in float64

    @property
    def final_loss(self) -> float:
        """Loss after the last step."""
        return self.losses[-1]


def bf16_regression(
    rule: str = "nearest", steps: int = 600, lr: float = 0.01, features: int = 16, examples: int = 256,
    noise: float = 0.3, seed: int = 0, threads: int | None = 1,
) -> RegressionRun:
    """Fit ``y = X w + noise`` by full-batch gradient descent on the mean squared error, weights kept by ``rule``.

    The weights start at 0 and the true weights are about 1, where BF16's gap is 2**-7; the
    gradient is computed in FP32 from the stored weights, and ``-lr * gradient`` is applied by
    ``rule``: ``"fp32"`` (FP32 weights, the reference), ``"nearest"`` (BF16, round to nearest),
    ``"stochastic"`` (BF16, :func:`stochastic_round_bf16`), ``"kahan"`` (BF16, :func:`kahan_add`).
    ``threads`` sets torch's threads during the run (one is fastest for so small a problem).

    Chapter 3, *Number formats*.
    """
    rule = _choice(rule, UPDATE_RULES, "update rule")
    for value, what in [(steps, "steps"), (features, "features"), (examples, "examples")]:
        _positive(value, what, integer=True)
    _positive(lr, "lr")
    if threads is not None:
        _positive(threads, "threads", integer=True)
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        return _fit(rule, steps, lr, features, examples, noise, seed)
    finally:
        torch.set_num_threads(before)


def _fit(rule: str, steps: int, lr: float, features: int, examples: int, noise: float, seed: int) -> RegressionRun:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(examples, features, generator=g)
    w_true = 1 + 0.5 * torch.rand(features, generator=g)
    y = x @ w_true + noise * torch.randn(examples, generator=g)
    best = torch.linalg.lstsq(x.double(), y.double().unsqueeze(1)).solution.squeeze(1)
    run = RegressionRun(rule, optimum_loss=((x.double() @ best - y.double()) ** 2).mean().item())
    w, c = _start(rule, torch.zeros(features))
    for _ in range(steps):
        residual = x @ w.float() - y
        gradient = 2 * x.T @ residual / examples
        w, c = _apply(rule, w, c, -lr * gradient, g)
        run.losses.append((residual**2).mean().item())
    run.losses.append(((x @ w.float() - y) ** 2).mean().item())
    run.weights = w.float()
    return run
