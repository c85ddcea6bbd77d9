"""A small scaling study: tiny GPT-2s of several sizes on one token budget, and a power-law fit.

Chapter 1 ("Pretraining objectives") trains the models and draws loss against non-embedding
parameters N and training compute C ≈ 6·N·D (Kaplan et al. 2020); chapter 5 quantizes the same
models to ask whether larger models suffer less.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from course_lib.text import data
from course_lib.text.evaluation import perplexity
from course_lib.text.models import count_parameters, tiny_config
from course_lib.text.training import Recipe, TrainedModel, train_model

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "SCALING_RECIPE",
    "SCALING_SIZES",
    "ScalingPoint",
    "fit_power_law",
    "scaling_models",
    "scaling_study",
    "validation_loss",
]


@dataclass(frozen=True)
class ScalingPoint:
    """One model of a scaling study: its size, the compute it used and its held-out loss.

    Chapter 1, *Pretraining objectives*.
    """

    hidden: int
    layers: int
    n_params: int
    n_non_embedding: int
    tokens: int
    validation_loss: float
    seconds: float

    @property
    def compute(self) -> float:
        """Training compute C ≈ 6·N·D FLOPs (N non-embedding parameters, D tokens; Kaplan et al. 2020)."""
        return 6.0 * self.n_non_embedding * self.tokens

    @property
    def compute_total(self) -> float:
        """6·N·D with N counting the embeddings too."""
        return 6.0 * self.n_params * self.tokens


#: The scaling study's GPT-2 sizes as (hidden, layers), and the recipe they all share.
SCALING_SIZES: tuple[tuple[int, int], ...] = ((32, 1), (64, 1), (96, 2), (128, 2))
SCALING_RECIPE = Recipe(steps=40, seq_len=64)


def scaling_models(
    sizes: Sequence[tuple[int, int]] = SCALING_SIZES,
    recipe: Recipe | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    *,
    heads: int = 2,
    progress: bool = True,
) -> list[TrainedModel]:
    """One GPT-2 per (hidden, layers), all trained with the same recipe (cached like :func:`train_model`).

    Chapter 1, *Pretraining objectives*.
    """
    recipe = recipe if recipe is not None else SCALING_RECIPE
    tokenizer = tokenizer if tokenizer is not None else data.course_tokenizer()
    return [train_model("gpt2", tiny_config("gpt2", tokenizer, hidden=hidden, layers=layers, heads=heads,
                                            context=recipe.seq_len), recipe, tokenizer, progress=progress)
            for hidden, layers in sizes]


def validation_loss(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, window: int) -> float:
    """Mean token loss on the validation split, non-overlapping windows of ``window`` tokens.

    Chapter 1, *Pretraining objectives*.
    """
    return perplexity(model, tokenizer, split="validation", window=window, stride=window).mean_nll


def scaling_study(
    sizes: Sequence[tuple[int, int]] = SCALING_SIZES,
    recipe: Recipe | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    *,
    heads: int = 2,
    progress: bool = True,
) -> list[ScalingPoint]:
    """Train one GPT-2 per (hidden, layers) on the same token budget; measure validation loss.

    Every model uses the same recipe (same batches, same learning-rate schedule, same tokens);
    the held-out loss is the mean token loss on the course's validation split with
    non-overlapping windows of the recipe's length. Results are cached like :func:`train_model`.

    Chapter 1, *Pretraining objectives*.
    """
    recipe = recipe if recipe is not None else SCALING_RECIPE
    tokenizer = tokenizer if tokenizer is not None else data.course_tokenizer()
    points = []
    for (hidden, layers), t in zip(sizes, scaling_models(sizes, recipe, tokenizer, heads=heads, progress=progress)):
        points.append(ScalingPoint(hidden, layers, count_parameters(t.model),
                                   count_parameters(t.model, embeddings=False), recipe.tokens,
                                   validation_loss(t.model, tokenizer, recipe.seq_len), t.seconds))
    return points


def fit_power_law(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Fit y = a · x^(-alpha) by least squares on log-log axes; return (a, alpha, R²).

    Raises ValueError with fewer than 3 points or non-positive values: two points always fit.

    Chapter 1, *Pretraining objectives*.
    """
    if len(x) != len(y):
        raise ValueError(f"x and y need the same length, got {len(x)} and {len(y)}.")
    if len(x) < 3:
        raise ValueError(f"A power law needs at least 3 points to be tested (2 always fit); got {len(x)}.")
    if min(x) <= 0 or min(y) <= 0:
        raise ValueError("A power law is fitted on log axes: every x and y must be positive.")
    lx = torch.tensor([math.log(v) for v in x], dtype=torch.float64)
    ly = torch.tensor([math.log(v) for v in y], dtype=torch.float64)
    mx, my = lx.mean(), ly.mean()
    slope = float(((lx - mx) * (ly - my)).sum() / ((lx - mx) ** 2).sum())
    intercept = float(my - slope * mx)
    pred = intercept + slope * lx
    ss_res = float(((ly - pred) ** 2).sum())
    ss_tot = float(((ly - my) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0
    return math.exp(intercept), -slope, r2
