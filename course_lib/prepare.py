"""Train ahead of time every model the notebooks load, so that a notebook (or the book) only loads.

``python -m course_lib prepare`` runs :func:`prepare`; ``scripts/build.sh`` calls it before it
executes the book, so that no page shows a first-run message. Each step is cached in
:func:`course_lib.base.env.cache_dir` and skipped when its result is already there: a second run only
loads. Chapter 1 trains the tiny models and the scaling study; Part II uses the course model;
chapter 5 fine-tunes it (QAT, QLoRA, LoRA, full fine-tuning), chapter 6 fine-tunes pruned copies.
The tokenizer and the course model come first; the other steps need nothing of each other and
run side by side in two processes that share the cores (:func:`side_by_side`).
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import time
from collections.abc import Callable

from course_lib.base import env
from course_lib.compression import prune, qat
from course_lib.text import course_model, data, models, scaling, training

__all__ = ["FIRST", "STEP_TIMEOUT", "model_problems", "prepare", "side_by_side", "steps"]


def _tiny_models(progress: bool = True) -> None:
    """Chapter 1's three tiny models, one per pretraining objective."""
    for kind in models.KINDS:
        training.train_model(kind, progress=progress)


def _scaling_models(progress: bool = True) -> None:
    """Chapter 1's scaling study (also used by chapter 5)."""
    scaling.scaling_models(progress=progress)


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


def _chapter5_finetunes(progress: bool = True) -> None:
    """Chapter 5's fine-tuning runs (QAT, its FP32 control, QLoRA, LoRA, full fine-tuning) of the course model."""
    qat.chapter_finetunes(course_model.course_model(progress=progress), progress=progress)


def _chapter6_finetunes(part: str, progress: bool = True) -> None:
    """One part of chapter 6's fine-tuning runs (:data:`course_lib.compression.prune.CHAPTER_PARTS`)."""
    prune.chapter_finetunes(course_model.course_model(progress=progress), progress=progress,
                            parts=[part])


#: The steps every other step needs, run first and in this process: the rest need nothing of
#: each other, and :func:`prepare` runs them side by side.
FIRST = ("course tokenizer", "Part II: the course model")
#: Seconds :func:`prepare` waits for a step run beside others before it stops them all (the
#: longest takes about 1.5 minutes on 2 cores).
STEP_TIMEOUT = 3600.0


def steps() -> list[tuple[str, Callable[..., object]]]:
    """The preparation steps in order: (what, function). The functions of the steps after
    :data:`FIRST` take ``progress`` (whether to draw progress bars) and are found again by
    name in another process (functions of a module, or ``functools.partial`` of one).

    Used by the library's other modules.
    """
    def sixth(part: str) -> tuple[str, Callable[..., object]]:
        return (f"chapter 6: fine-tuning after pruning ({part})",
                functools.partial(_chapter6_finetunes, part))

    return [
        ("course tokenizer", data.course_tokenizer),
        ("Part II: the course model", _course_model),
        # the longest first (side by side on 2 cores, 2026-12-04: 84, 72, 60, 24, 20, 9 and
        # 5 s), so that the processes finish together
        sixth("magnitude layer"),
        sixth("magnitude global"),
        sixth("gradual"),
        ("chapter 1: three tiny models", _tiny_models),
        ("chapter 5: fine-tuning runs", _chapter5_finetunes),
        sixth("neurons"),
        ("chapter 1: scaling study", _scaling_models),
    ]


def side_by_side(processes: int | None = None) -> tuple[int, int]:
    """(processes, threads each) for the steps after :data:`FIRST`: by default two processes
    where there are two cores or more, the cores shared out between them.

    On two cores, two processes of one thread each train the course's small models faster
    than one process of two threads, whose threads wait on each other at every small matrix
    product (``benchmarks/prepare.py`` measures it).

    Used by the library's other modules.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    if processes is None:
        processes = 2 if cores >= 2 else 1
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"workers must be a whole number >= 1, got {processes!r}.")
    return processes, max(1, cores // processes)


def _worker_setup(threads: int) -> None:
    """In a process of the pool: its share of the cores; it ends should prepare's process die,
    and ends as a Python program ends when it is stopped (SIGTERM), its exit handlers run."""
    import torch

    from course_lib.parallel import lifetime

    lifetime.end_with_parent(1)
    torch.set_num_threads(threads)


def _run_step(step: tuple[str, Callable[..., object]]) -> tuple[str, float]:
    """In a process of the pool: run ``step`` (what, function) without progress bars (two
    processes drawing on one terminal garble each other's); (what, seconds)."""
    what, function = step
    start = time.perf_counter()
    function(progress=False)
    return what, time.perf_counter() - start


def prepare(verbose: bool = True, workers: int | None = None) -> None:
    """Run every preparation step (cached steps only load), printing each step and its time.

    The cache is checked first: one that cannot be written raises
    :class:`course_lib.base.env.CacheError` with the fix before anything trains; so does a
    folder of it that cannot be written when a model is missing there. The cached course model
    is loaded as a reader loads it (``AutoTokenizer`` too), and rebuilt if that fails.
    The steps of :data:`FIRST` run here, in order; the others in ``workers`` processes side by
    side (default :func:`side_by_side`), each on its share of the cores, or here too when one
    process is all there is or one step is left. A step that fails, or outlasts
    :data:`STEP_TIMEOUT`, stops the others, and its error is raised here.

    Used by the library's other modules.
    """
    env.check_cache(folders=False)  # a folder of the cache is checked when a model is written
    every = steps()
    first = [step for step in every if step[0] in FIRST]
    rest = [step for step in every if step[0] not in FIRST]
    processes, threads = side_by_side(workers)
    processes = min(processes, len(rest))
    for what, step in first + (rest if processes < 2 else []):
        start = time.perf_counter()
        if verbose:
            print(f"==> {what}", flush=True)
        step()
        if verbose:
            print(f"    done in {time.perf_counter() - start:.1f} s", flush=True)
    if processes < 2:
        return
    if verbose:
        print(f"==> side by side on {processes} processes of {threads} thread(s) each:",
              flush=True)
        for what, _ in rest:
            print(f"    {what}", flush=True)
    pool = multiprocessing.get_context("spawn").Pool(processes, _worker_setup, (threads,))
    try:
        results = pool.imap_unordered(_run_step, rest)
        for _ in rest:
            what, seconds = results.next(timeout=STEP_TIMEOUT)
            if verbose:
                print(f"    done in {seconds:.1f} s: {what}", flush=True)
    except multiprocessing.TimeoutError:
        pool.terminate()
        raise TimeoutError(f"a preparation step ran longer than {STEP_TIMEOUT:.0f} s and "
                           "every step was stopped; run `python -m course_lib prepare` again "
                           "(steps already done only load).") from None
    except BaseException:  # a step failed, or Ctrl-C: stop the others now
        pool.terminate()
        raise
    finally:
        pool.close()  # the processes end by themselves once every step is done
        pool.join()


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
