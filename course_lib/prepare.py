"""Train ahead of time every model the notebooks load, so that a notebook (or the book) only loads.

``python -m course_lib prepare`` runs :func:`prepare`; ``scripts/build.sh`` calls it before it
executes the book, so that no page shows a first-run message. Each step is cached in
:func:`course_lib.base.env.cache_dir` and skipped when its result is already there: a second run only
loads. Chapter 1 trains the tiny models and the scaling study; Part II uses the course model;
chapter 5 fine-tunes it (QAT, QLoRA, LoRA, full fine-tuning), chapter 6 fine-tunes pruned copies.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from course_lib.base import env
from course_lib.compression import prune, qat
from course_lib.text import course_model, data, models, scaling, training

__all__ = ["prepare", "steps"]


def _tiny_models() -> None:
    """Chapter 1's three tiny models, one per pretraining objective."""
    for kind in models.KINDS:
        training.train_model(kind, progress=True)


def _scaling_models() -> None:
    """Chapter 1's scaling study (also used by chapter 5)."""
    scaling.scaling_models(progress=True)


def _course_model() -> None:
    """The course model of Part II."""
    course_model.course_model(progress=True)


def _chapter5_finetunes() -> None:
    """Chapter 5's fine-tuning runs (QAT, its FP32 control, QLoRA, LoRA, full fine-tuning) of the course model."""
    qat.chapter_finetunes(course_model.course_model(progress=True), progress=True)


def _chapter6_finetunes() -> None:
    """Chapter 6's fine-tuning runs (pruned copies of the course model, masks held) and gradual pruning."""
    prune.chapter_finetunes(course_model.course_model(progress=True), progress=True)


def steps() -> list[tuple[str, Callable[[], object]]]:
    """The preparation steps in order: (what, function).

    Used by the library's other modules.
    """
    return [
        ("course tokenizer", data.course_tokenizer),
        ("chapter 1: three tiny models", _tiny_models),
        ("chapter 1: scaling study", _scaling_models),
        ("Part II: the course model", _course_model),
        ("chapter 5: fine-tuning runs", _chapter5_finetunes),
        ("chapter 6: fine-tuning after pruning", _chapter6_finetunes),
    ]


def prepare(verbose: bool = True) -> None:
    """Run every preparation step (cached steps only load), printing each step and its time.

    The cache is checked first: one that cannot be written raises
    :class:`course_lib.base.env.CacheError` with the fix before anything trains.

    Used by the library's other modules.
    """
    env.check_cache()
    for what, step in steps():
        start = time.perf_counter()
        if verbose:
            print(f"==> {what}", flush=True)
        step()
        if verbose:
            print(f"    done in {time.perf_counter() - start:.1f} s", flush=True)
