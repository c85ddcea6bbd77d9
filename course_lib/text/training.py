"""The course's one training loop: recipes, seeded batches, AdamW, and the trained-model cache.

Chapter 1 ("Pretraining objectives") trains its tiny models with :func:`train_model` and shows
the loop itself; chapter 5 fine-tunes the course model with :func:`train`. Training is seeded and
deterministic: the weights are initialised after ``torch.manual_seed(recipe.seed)``, and the
batches are windows of ``recipe.seq_len`` tokens cut at seeded random offsets from the training
split, with the stories joined by ``</s>``. A trained model is saved with ``save_pretrained``
(safetensors) plus its tokenizer and its loss history under ``cache_dir()/models/<kind>-<key>``,
where the key hashes the config, the recipe, the tokenizer and the corpus version; the next call
with the same inputs loads that copy, so a notebook shows the same loss history and the same
weights whether it trained or loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from course_lib.base import env
from course_lib.text import data, models, objectives

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "Recipe",
    "TrainedModel",
    "backward_micro_batches",
    "train",
    "train_model",
    "training_batches",
]


@dataclass(frozen=True)
class Recipe:
    """How a model is trained: steps, batch, window, AdamW settings, schedule and seed.

    The learning rate rises linearly for ``warmup_steps`` and then follows a cosine down to
    ``min_lr_ratio * lr``; gradients are clipped to norm ``clip``. ``device`` is where training
    runs (CPU by default, so that results are the same on every machine; pass "cuda" to use a GPU).

    Chapter 1, *Pretraining objectives*.
    """

    steps: int = 160
    batch_size: int = 8
    seq_len: int = 64
    lr: float = 2e-3
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.95)
    clip: float = 1.0
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Recipe.{name} must be a whole number >= 1, got {value!r}.")
        if self.seq_len < 2:
            raise ValueError(f"Recipe.seq_len must be at least 2 tokens, got {self.seq_len}.")
        if not self.lr > 0:
            raise ValueError(f"Recipe.lr must be positive, got {self.lr!r} (a typical value is 3e-3).")
        if self.warmup_steps < 0 or not 0 <= self.min_lr_ratio <= 1:
            raise ValueError("Recipe.warmup_steps must be >= 0 and min_lr_ratio between 0 and 1.")

    @property
    def tokens(self) -> int:
        """Tokens the model reads during training: steps x batch size x window."""
        return self.steps * self.batch_size * self.seq_len

    def lr_at(self, step: int) -> float:
        """The learning rate at ``step`` (0-based): linear warm-up, then cosine decay."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        span = max(1, self.steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        cosine = 0.5 * (1 + math.cos(math.pi * progress))
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * cosine)


def training_batches(
    kind: str,
    tokenizer: PreTrainedTokenizerBase,
    recipe: Recipe,
    texts: Sequence[str] | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Yield ``recipe.steps`` seeded batches of ``kind``'s objective from the training text.

    Each batch holds ``batch_size`` windows of ``seq_len`` tokens starting at random offsets of
    the token stream (the course's training split unless ``texts`` is given), turned into masked-LM,
    causal-LM or span-corruption examples by :mod:`course_lib.text.objectives`. The offsets and the
    objective's own randomness come from one ``torch.Generator`` seeded with ``recipe.seed``.

    Chapter 1, *Pretraining objectives*.
    """
    kind = models.check_kind(kind)
    stream = data.token_stream(texts, tokenizer) if texts is not None else data.course_stream(tokenizer, "train")
    if len(stream) < recipe.seq_len:
        raise data.too_short_error(len(stream), recipe.seq_len, "training window")
    g = torch.Generator().manual_seed(recipe.seed)
    last_start = len(stream) - recipe.seq_len
    for _ in range(recipe.steps):
        starts = torch.randint(0, last_start + 1, (recipe.batch_size,), generator=g).tolist()
        windows = [stream[s:s + recipe.seq_len].tolist() for s in starts]
        yield objectives.objective_batch(kind, windows, tokenizer, g)


def _steps(batches: Iterable[dict[str, torch.Tensor]], accumulate: int,
           steps: int) -> Iterator[list[dict[str, torch.Tensor]]]:
    """Group ``batches`` into ``steps`` lists of ``accumulate`` micro-batches each."""
    source = iter(batches)
    for step in range(steps):
        group = list(itertools.islice(source, accumulate))
        if len(group) < accumulate:
            raise ValueError(f"the batches ran out at step {step}: training {steps} steps of "
                             f"{accumulate} micro-batch(es) needs {steps * accumulate} batches.")
        yield group


def _is_fsdp(model: torch.nn.Module) -> bool:
    """Whether ``fully_shard`` (FSDP2, torch >= 2.6) has sharded ``model``."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return isinstance(model, FSDPModule)


def backward_micro_batches(model: torch.nn.Module, micro_batches: Sequence[dict[str, torch.Tensor]],
                           device: torch.device, no_sync: bool = True) -> list[float]:
    """Forward and backward each micro-batch, gradients summed; return each micro-batch's loss.

    Each loss is divided by the number of micro-batches, so the summed gradient is the gradient
    of their mean. With ``no_sync`` and a model that has ``no_sync()`` (DDP), gradients are
    all-reduced only in the last micro-batch's backward pass.

    Chapter 8, *Data parallelism with DDP*.
    """
    losses = []
    for i, batch in enumerate(micro_batches):
        batch = {k: v.to(device) for k, v in batch.items()}
        last = i == len(micro_batches) - 1
        skip_sync = no_sync and not last and hasattr(model, "no_sync")
        with model.no_sync() if skip_sync else contextlib.nullcontext():
            loss = model(**batch).loss
            (loss / len(micro_batches)).backward()
        losses.append(float(loss.item()))
    return losses


def train(
    model: PreTrainedModel,
    kind: str,
    tokenizer: PreTrainedTokenizerBase,
    recipe: Recipe,
    *,
    texts: Sequence[str] | None = None,
    batches: Iterable[dict[str, torch.Tensor]] | None = None,
    accumulate: int = 1,
    no_sync: bool = True,
    on_step: Callable[[int, float, torch.optim.Optimizer], None] | None = None,
    on_backward: Callable[[int], None] | None = None,
    optimizer: Callable[..., torch.optim.Optimizer] | None = None,
    progress: bool = True,
    desc: str | None = None,
) -> list[float]:
    """Train ``model`` in place with AdamW on :func:`training_batches`; return the loss of each step.

    One step: forward the batch (the model computes its own loss from ``labels``), backward, clip
    the gradient norm, AdamW step with the recipe's learning rate for that step. The model is left
    in eval mode. ``torch.set_num_threads`` is left as the machine set it.

    Chapter 8 trains with the same loop: ``model`` may be wrapped in ``DistributedDataParallel``,
    ``batches`` replaces the seeded batches (each rank passes its own share), and ``accumulate``
    micro-batches make one step, their losses divided by ``accumulate``; with ``no_sync`` (and a
    model that has ``no_sync()``, as DDP does) the gradients are all-reduced only after the last
    micro-batch. ``on_step(step, loss, optimizer)`` runs after each optimizer step, before the
    gradients are cleared (so they are clipped by then); ``on_backward(step)`` runs after each
    step's backward pass, before the clipping, when the gradients are those of the step's mean
    loss (reduced across ranks by DDP or FSDP). The returned loss of a step is the mean of its
    micro-batches' losses.
    Chapter 9 passes ``optimizer``, called as ``optimizer(param_groups, lr=..., betas=...)``
    instead of AdamW (``ZeroRedundancyOptimizer`` wrapping AdamW), and FSDP-sharded models, which
    stay where FSDP placed their shards.

    Chapter 1, *Pretraining objectives*.
    """
    kind = models.check_kind(kind)
    if not isinstance(accumulate, int) or accumulate < 1:
        raise ValueError(f"accumulate must be a whole number >= 1, got {accumulate!r}.")
    device = torch.device(recipe.device)
    if not _is_fsdp(model):  # FSDP keeps its shards where it put them (on the CPU, offloaded)
        model.to(device)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]  # frozen ones (LoRA) get no state
    decay = [p for p in trainable if p.dim() >= 2]
    no_decay = [p for p in trainable if p.dim() < 2]
    opt = (optimizer or torch.optim.AdamW)(
        [{"params": decay, "weight_decay": recipe.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=recipe.lr, betas=recipe.betas,
    )
    history: list[float] = []
    if batches is None:
        batches = training_batches(kind, tokenizer, recipe, texts)
    bar = env.progress_bar(_steps(batches, accumulate, recipe.steps), recipe.steps,
                           desc or f"training {kind}", progress)
    for step, micro_batches in enumerate(bar):
        for group in opt.param_groups:
            group["lr"] = recipe.lr_at(step)
        losses = backward_micro_batches(model, micro_batches, device, no_sync)
        if on_backward is not None:
            on_backward(step)
        torch.nn.utils.clip_grad_norm_(trainable, recipe.clip)
        opt.step()
        history.append(sum(losses) / len(losses))
        if on_step is not None:
            on_step(step, history[-1], opt)
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0 and hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{history[-1]:.3f}")
    if hasattr(bar, "close"):
        bar.close()
    model.eval()
    return history


@dataclass
class TrainedModel:
    """A trained model with its tokenizer, recipe, loss history and where it came from.

    Chapter 1, *Pretraining objectives*.
    """

    kind: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    recipe: Recipe
    history: list[float]
    seconds: float
    from_cache: bool = False
    path: Path | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_params(self) -> int:
        """Parameters of the model (tied weights counted once)."""
        return models.count_parameters(self.model)

    @property
    def tokens_per_second(self) -> float:
        """Training throughput measured when the model was trained (not when it was loaded)."""
        return self.recipe.tokens / self.seconds if self.seconds > 0 else float("nan")


def _config_blob(config: PretrainedConfig) -> dict[str, Any]:
    blob = config.to_dict()
    for volatile in ("transformers_version", "_name_or_path", "architectures", "dtype",
                     "torch_dtype", "_attn_implementation_autoset", "_commit_hash"):
        blob.pop(volatile, None)
    return blob


def _cache_key(kind: str, config: PretrainedConfig, recipe: Recipe,
              tokenizer: PreTrainedTokenizerBase, texts: Sequence[str] | None = None) -> str:
    """The hash that names a cached model: kind, config, recipe, tokenizer and corpus version.

    Chapter 1, *Pretraining objectives*.
    """
    blob = {
        "kind": models.check_kind(kind),
        "config": _config_blob(config),
        "recipe": asdict(recipe),
        "tokenizer": data.tokenizer_fingerprint(tokenizer),
        "corpus": data.CORPUS_VERSION if texts is None else data.texts_fingerprint(texts),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _load_cached(kind: str, directory: Path, tokenizer: PreTrainedTokenizerBase,
                 recipe: Recipe) -> TrainedModel | None:
    """The cached model in ``directory``, or None if it is absent or damaged (then it is retrained)."""
    try:
        info = models.read_training(directory)
        if info.get("weights_sha256") != models.sha256_file(directory / models.WEIGHTS_FILE):
            return None
        with models.quiet_transformers():
            model = models.model_class(kind).from_pretrained(str(directory), local_files_only=True)
    except Exception:  # noqa: BLE001 - any damage means: train again
        return None
    model = models.name_loss(model).eval()
    return TrainedModel(kind, model, tokenizer, recipe, list(info["history"]),
                        float(info["seconds"]), True, directory, info)


def train_model(
    kind: str,
    config: PretrainedConfig | None = None,
    recipe: Recipe | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    *,
    texts: Sequence[str] | None = None,
    cache: bool = True,
    progress: bool = True,
) -> TrainedModel:
    """Train a tiny model of ``kind`` on the course corpus, or load the identical cached copy.

    ``config`` defaults to ``models.tiny_config(kind)``, ``recipe`` to ``Recipe()``, ``tokenizer`` to the
    course tokenizer, ``texts`` to the course's training split. With ``cache=True`` the result is
    stored under ``cache_dir()/models/<kind>-<key>`` and later calls with the same config,
    recipe, tokenizer and corpus load it: same loss history, same weights, no training. A cache
    that cannot be written raises :class:`course_lib.base.env.CacheError` with the fix
    (``cache=False`` trains without it).

    Chapter 1, *Pretraining objectives*.
    """
    kind = models.check_kind(kind)
    tokenizer = tokenizer if tokenizer is not None else data.course_tokenizer()
    config = config if config is not None else models.tiny_config(kind, tokenizer)
    if models.kind_of_config(config) != kind:
        raise ValueError(f"The config is for {config.model_type!r} but kind is {kind!r}; "
                         f"build it with models.tiny_config({kind!r}).")
    if config.vocab_size < len(tokenizer):
        raise ValueError(f"The config's vocab_size ({config.vocab_size}) is smaller than the "
                         f"tokenizer ({len(tokenizer)} tokens); build it with models.tiny_config(kind, tokenizer).")
    recipe = recipe if recipe is not None else Recipe()
    directory = env.cache_dir() / "models" / f"{kind}-{_cache_key(kind, config, recipe, tokenizer, texts)}"
    if cache and (directory / models.TRAINING_FILE).is_file():
        cached = _load_cached(kind, directory, tokenizer, recipe)
        if cached is not None:
            return cached
    if cache:
        env.check_cache()  # before training, not after
    model = models.build_model(config, seed=recipe.seed)
    start = time.perf_counter()
    history = train(model, kind, tokenizer, recipe, texts=texts, progress=progress)
    seconds = time.perf_counter() - start
    info = {"kind": kind, "history": history, "seconds": seconds, "recipe": asdict(recipe),
            "corpus": data.CORPUS_VERSION if texts is None else "custom texts",
            "n_params": models.count_parameters(model), "threads": torch.get_num_threads(),
            "torch": torch.__version__}
    saved: Path | None = None
    if cache:
        from safetensors import SafetensorError

        try:  # overwrite: the folder is this cache's own entry, maybe a damaged one
            saved = models.save_model(model.cpu(), tokenizer, directory, info=info, overwrite=True)
        except (OSError, SafetensorError) as err:
            raise env.cache_write_error(directory, err) from None
    return TrainedModel(kind, model, tokenizer, recipe, history, seconds, False, saved, info)
