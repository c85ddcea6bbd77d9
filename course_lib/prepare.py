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

__all__ = ["model_problems", "prepare", "steps"]


def _tiny_models() -> None:
    """Chapter 1's three tiny models, one per pretraining objective."""
    for kind in models.KINDS:
        training.train_model(kind, progress=True)


def _scaling_models() -> None:
    """Chapter 1's scaling study (also used by chapter 5)."""
    scaling.scaling_models(progress=True)


def _course_model() -> None:
    """The course model of Part II, checked as a reader loads it; a damaged cached one is rebuilt."""
    target = models.course_model_dir()
    if target.exists():
        try:
            course_model.check_course_model(target)
            return
        except models.CheckpointError as err:
            why = str(err).split(". Rebuild it with")[0]
            print(f"    {why}.\n    Rebuilding it (about 3 minutes).", flush=True)
        course_model.course_model(target, rebuild=True, progress=True)
    else:
        course_model.course_model(target, progress=True)
    course_model.check_course_model(target)


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
    :class:`course_lib.base.env.CacheError` with the fix before anything trains; so does a
    folder of it that cannot be written when a model is missing there. The cached course model
    is loaded as a reader loads it (``AutoTokenizer`` too), and rebuilt if that fails.

    Used by the library's other modules.
    """
    env.check_cache(folders=False)  # a folder of the cache is checked when a model is written
    for what, step in steps():
        start = time.perf_counter()
        if verbose:
            print(f"==> {what}", flush=True)
        step()
        if verbose:
            print(f"    done in {time.perf_counter() - start:.1f} s", flush=True)


def model_problems() -> list[tuple[str, str]]:
    """(problem, fix) for each saved model of the cache that does not load as the notebooks load it.

    The course tokenizer (``AutoTokenizer``), the course model (:func:`course_lib.text.
    course_model.check_course_model`) and chapter 1's models (their record, the weights'
    checksum, ``from_pretrained``); models not built yet are no problem. For ``check``.

    Used by the library's other modules.
    """
    from transformers import AutoTokenizer

    found: list[tuple[str, str]] = []
    cache = env.cache_dir()
    redo = "run `python -m course_lib prepare`, which trains it again"
    for folder in sorted(cache.glob("tokenizer-*")):
        try:
            with models.quiet_transformers():
                AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        except Exception as err:  # noqa: BLE001 - what fails is named, not raised
            found.append((f"The course tokenizer at {folder} does not load "
                          f"({type(err).__name__})", redo))
    if models.course_model_dir().exists():
        try:
            with models.quiet_transformers():
                course_model.check_course_model()
        except models.CheckpointError as err:
            problem, _, hint = str(err).partition(". Rebuild it with ")
            found.append((problem, "run `python -m course_lib prepare`, which rebuilds it"
                          if hint else "do what the line above says, then check again"))
    for folder in sorted(p for p in (cache / "models").glob("*") if p.is_dir()):
        try:
            record = models.read_training(folder)
            if record.get("weights_sha256") != models.sha256_file(folder / models.WEIGHTS_FILE):
                raise models.CheckpointError("its weights do not match their checksum")
            with models.quiet_transformers():
                models.model_class(record["kind"]).from_pretrained(str(folder),
                                                                   local_files_only=True)
        except Exception as err:  # noqa: BLE001 - a damaged model is trained again on use
            found.append((f"The model at {folder} does not load ({str(err)[:120]})",
                          "run `python -m course_lib prepare`, which trains the notebooks' "
                          "models again; delete that folder if it remains (an older model)"))
    return found
