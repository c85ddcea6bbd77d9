"""The CPU's job in training: turn text into tokens as fast as the GPU eats them.

A GPU that trains a model of ``P`` parameters spends about ``6 P`` floating-point operations per
token (2 P in the forward pass, 4 P in the backward pass; Kaplan et al., 2020), so at a sustained
``F`` FLOP/s it consumes ``F / (6 P)`` tokens per second (:func:`gpu_tokens_per_second`). Those
tokens come from the CPU: reading text, tokenising it, batching it and handing it over. If the
CPU is slower, the GPU waits, whatever it costs per hour.

:func:`tokenize_throughput` measures that side on the machine at hand: it runs a corpus through a
``torch.utils.data.DataLoader`` whose collate function tokenises each batch, in the main process
(``workers=0``) or in 1, 2, ... worker processes, and reports tokens per second (the fastest of a
few timed passes, and the median: the machine may be shared). Chapter 10 (*Hardware for LLM
training*) sets that rate against a GPU's demand, the share of it met and the CPU cores it would
take to keep up, and so turns "the CPU still matters" into a number.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from course_lib.base.checks import choice, positive
from course_lib.base.timing import TimedRuns
from course_lib.hardware.roofline import check_utilisation, training_flops

__all__ = ["ThroughputResult", "gpu_tokens_per_second", "tokenize_throughput"]


@dataclass(frozen=True)
class ThroughputResult(TimedRuns):
    """One tokenisation measurement: workers, texts, tokens, characters, seconds of each timed pass.

    ``workers`` 0 means the main process tokenised; ``times`` holds the seconds of every timed pass
    over all the texts, ``warmup_seconds`` those of the untimed first pass (worker start-up
    included).

    Chapter 10, *Hardware for LLM training*.
    """

    workers: int
    texts: int
    tokens: int
    characters: int
    times: tuple[float, ...]
    warmup_seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        """Tokens per second in the fastest pass."""
        return self.tokens / self.seconds

    @property
    def median_tokens_per_second(self) -> float:
        """Tokens per second in the median pass."""
        return self.tokens / self.median_seconds

    @property
    def processes(self) -> int:
        """Processes that tokenised: the workers, or the main process when ``workers`` is 0."""
        return max(1, self.workers)

    @property
    def tokens_per_second_per_process(self) -> float:
        """Tokens per second of the fastest pass divided by the processes that tokenised."""
        return self.tokens_per_second / self.processes


class _Texts(Dataset):
    """The texts as a map-style data set (module level, so that "spawn" workers can unpickle it)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int) -> str:
        return self.texts[index]


class _Tokenise:
    """Collate function: tokenise a batch of texts into one flat tensor of token ids."""

    def __init__(self, tokenizer: Callable[..., Any]) -> None:
        self.tokenizer = tokenizer

    def __call__(self, batch: list[str]) -> torch.Tensor:
        ids = self.tokenizer(batch)["input_ids"]
        return torch.tensor([i for row in ids for i in row], dtype=torch.long)


def _check_workers(workers: Any) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be a whole number >= 0 (0: tokenise in the main process), "
                         f"got {workers!r}")
    cores = os.cpu_count() or 1
    if workers > 2 * cores:
        raise ValueError(f"workers={workers} is more than twice this machine's {cores} core(s); "
                         f"use at most {cores} (more processes than cores only take turns)")
    if workers > cores:
        warnings.warn(f"workers={workers} is more than this machine's {cores} core(s): the "
                      f"processes will take turns, so expect no gain beyond {cores}",
                      stacklevel=3)
    return workers


def _check_texts(texts: Any) -> list[str]:
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise ValueError("texts must be a list of strings (e.g. data.load_corpus('course', "
                         f"'train')), got {type(texts).__name__}")
    if not texts:
        raise ValueError("texts is empty: pass at least one document, e.g. "
                         "data.load_corpus('course', 'train')")
    bad = next((t for t in texts if not isinstance(t, str)), None)
    if bad is not None:
        raise ValueError(f"texts must hold strings only, found a {type(bad).__name__}: {bad!r:.60}")
    return list(texts)


def _stop_workers(iterator: Any) -> None:
    """Shut the DataLoader's worker processes down now (not when the iterator is collected).

    An exception raised in a worker is re-raised here with a traceback whose frames still hold the
    iterator, so waiting for garbage collection could leave the workers running for a while.
    """
    stop = getattr(iterator, "_shutdown_workers", None)  # torch's own clean-up of the workers
    if stop is not None:
        stop()


def tokenize_throughput(
    texts: Sequence[str],
    tokenizer: Callable[..., Any],
    workers: int = 1,
    batch_size: int = 64,
    repeats: int = 3,
    progress: bool = False,
    start_method: str | None = None,
) -> ThroughputResult:
    """Tokenise every text through a DataLoader with ``workers`` processes; time ``repeats`` passes.

    The DataLoader's collate function calls ``tokenizer(batch)["input_ids"]`` on each batch of
    ``batch_size`` texts and returns the ids as one flat tensor, as a training pipeline hands
    tokens to the training loop. ``workers=0`` tokenises in the main process; ``workers=n`` in
    ``n`` worker processes, whose tensors travel back through shared memory.

    What is timed. One iterator makes ``repeats + 1`` passes over the texts. The first pass is a
    warm-up, not timed in ``times`` (its seconds are kept as ``warmup_seconds``): it starts the
    worker processes, a one-off cost that a real run pays once per epoch at most. Each timed pass
    runs from the last batch of the pass before to its own last batch, with the workers already
    busy: the steady rate at which the pipeline delivers tokens.

    ``TOKENIZERS_PARALLELISM`` is set to ``false`` during the measurement and restored afterwards:
    otherwise a Hugging Face fast tokenizer spreads each batch over its own threads (in the main
    process), which would fight the worker processes for the cores and blur what one process
    does. Each process then tokenises on one core. The worker processes are shut down before this
    function returns, also when tokenising fails. The Dataset and collate function are defined at
    module level, so the measurement also works where workers are started with "spawn" (macOS,
    Windows) rather than "fork" (Linux, Colab); the tokenizer must then be picklable (Hugging Face
    tokenizers are). ``start_method`` picks one ("fork", "spawn", "forkserver"; default: the
    platform's), e.g. to see what "spawn" costs in the warm-up pass. A "spawn" worker imports the
    main module again, so run it from a notebook or a script file, not ``python -`` reading
    standard input: there the workers cannot start (and Python's own spawn may then hang).

    Chapter 10, *Hardware for LLM training*.
    """
    texts = _check_texts(texts)
    workers = _check_workers(workers)
    batch_size = positive(batch_size, "batch_size", integer=True)
    repeats = positive(repeats, "repeats", integer=True)
    if not callable(tokenizer):
        raise ValueError(f"tokenizer must be callable like a Hugging Face tokenizer "
                         f"(e.g. data.course_tokenizer()), got {type(tokenizer).__name__}")
    if start_method is not None:
        start_method = choice(start_method, multiprocessing.get_all_start_methods(), "start method")
    from course_lib.base.env import progress_bar

    n_batches = math.ceil(len(texts) / batch_size)
    one_pass = [list(range(i, min(i + batch_size, len(texts))))
                for i in range(0, len(texts), batch_size)]
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    iterator = None
    try:
        loader = DataLoader(_Texts(texts), batch_sampler=one_pass * (repeats + 1),
                            collate_fn=_Tokenise(tokenizer), num_workers=workers,
                            multiprocessing_context=start_method if workers else None)
        start = time.perf_counter()
        iterator = iter(loader)
        ends, tokens, count = [], 0, 0
        bar = progress_bar(iterator, n_batches * (repeats + 1),
                           f"tokenising, {workers} worker(s)", progress)
        for count, ids in enumerate(bar, start=1):
            if count <= n_batches:
                tokens += ids.numel()
            if count % n_batches == 0:
                ends.append(time.perf_counter())
    finally:
        _stop_workers(iterator)
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before
    times = tuple(b - a for a, b in zip(ends, ends[1:]))
    return ThroughputResult(workers, len(texts), tokens, sum(len(t) for t in texts), times,
                            ends[0] - start)


def gpu_tokens_per_second(n_params: float, flops_per_second: float,
                          utilisation: float = 0.4) -> float:
    """Tokens per second a GPU consumes when training ``n_params`` parameters: ``F * u / (6 P)``.

    Training costs about 6 FLOPs per parameter per token (2 in the forward pass, 4 in the backward
    pass; Kaplan et al., 2020; attention's own FLOPs are left out, small for short sequences).
    ``flops_per_second`` is the GPU's peak for the training dtype (e.g. 989e12 for dense BF16 on an
    H100 SXM) and ``utilisation`` the share of it that training sustains (the model FLOPs
    utilisation, MFU; 0.3 to 0.5 is typical of well-tuned runs).

    Chapter 10, *Hardware for LLM training*.
    """
    flops_per_second = positive(flops_per_second, "flops_per_second")
    return flops_per_second * check_utilisation(utilisation) / training_flops(n_params, 1)
