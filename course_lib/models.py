"""Tiny transformers trained on the course corpus: configs, one training loop, caching, perplexity.

Chapter 1 trains one tiny model per pretraining objective, built from real ``transformers``
configs and fed with the batches of :mod:`course_lib.objectives`:

========== ============================== ================================= ==================
kind       class                          objective                         batches
========== ============================== ================================= ==================
``bert``   ``BertForMaskedLM``            masked LM (15%, 80/10/10)         ``masked_lm_batch``
``gpt2``   ``GPT2LMHeadModel``            causal LM (next token)            ``causal_lm_batch``
``t5``     ``T5ForConditionalGeneration`` span corruption (sentinels)       ``span_corruption_batch``
========== ============================== ================================= ==================

Training (:func:`train_model`) is seeded and deterministic: the weights are initialised after
``torch.manual_seed(recipe.seed)``, and the batches are windows of ``recipe.seq_len`` tokens cut
at seeded random offsets from the training split, with the stories joined by ``</s>``. A trained
model is saved with ``save_pretrained`` (safetensors) plus its tokenizer and its loss history
under ``cache_dir()/models/<kind>-<key>``, where the key hashes the config, the recipe, the
tokenizer and the corpus version; the next call with the same inputs loads that copy, so a
notebook shows the same loss history and the same weights whether it trained or loaded.

The **course model** is the decoder-only model trained longer (:data:`COURSE_RECIPE`); every lab
of Part II uses it. ``python -m course_lib train-course-model`` builds it; :func:`course_model`
builds it on first use and loads the cached copy afterwards. :func:`load_model` is the one loader:
a local directory or, when the hub is reachable, a hub id such as ``gpt2``, both through
``AutoModelForCausalLM.from_pretrained`` (never with remote code).

**Perplexity** (:func:`perplexity`) is measured on a fixed held-out text, by default the test
split of the course corpus: the stories are tokenized without special tokens and concatenated
with one ``</s>`` between consecutive stories; a window of ``window`` tokens slides over the
stream by ``stride`` tokens; each window scores only the tokens that no earlier window scored. With
``stride < window`` every token after the first is predicted exactly once, past the first window
with at least ``window - stride`` tokens of context; ``stride = window`` gives non-overlapping
windows, in which the first token of each window has no context and is not scored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch

from course_lib import data, env, objectives
from course_lib.exercises import Exercise
from course_lib.tables import Table

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "ARCHITECTURES",
    "COURSE_MODEL_NAME",
    "COURSE_RECIPE",
    "DEFAULT_STRIDE",
    "DEFAULT_WINDOW",
    "KINDS",
    "REBUILD_COMMAND",
    "Architecture",
    "CheckpointError",
    "ModelUnavailableError",
    "Perplexity",
    "Recipe",
    "ScalingPoint",
    "TrainedModel",
    "architecture_table",
    "build_course_model",
    "build_model",
    "cache_key",
    "chapter01",
    "continue_text",
    "count_parameters",
    "course_model",
    "course_model_card",
    "course_model_config",
    "course_model_dir",
    "course_model_reference",
    "fill_mask",
    "fill_spans",
    "fit_power_law",
    "load_model",
    "load_tokenizer",
    "model_card",
    "objective_loss",
    "perplexity",
    "plot_loss_curves",
    "plot_scaling",
    "save_model",
    "scaling_study",
    "scaling_models",
    "SCALING_SIZES",
    "SCALING_RECIPE",
    "tiny_config",
    "token_stream",
    "train",
    "train_model",
    "training_batches",
    "unigram_baseline",
    "validation_loss",
]

#: The three model kinds of chapter 1.
KINDS = ("bert", "gpt2", "t5")
#: Name (and cache directory) of the course model; bump the suffix when its recipe changes.
COURSE_MODEL_NAME = "course-model-v1"
#: The command that (re)builds the course model.
REBUILD_COMMAND = "python -m course_lib train-course-model"
#: Default perplexity window (tokens) and stride; the window is capped at the model's context.
DEFAULT_WINDOW = 128
DEFAULT_STRIDE = 64
_REFERENCE_FILE = Path(__file__).with_name("course_model_reference.json")
_TRAINING_FILE = "training.json"
_WEIGHTS_FILE = "model.safetensors"


class CheckpointError(ValueError):
    """A model checkpoint is missing or unreadable; the message says how to rebuild it."""


class ModelUnavailableError(data.HubUnavailableError, ValueError):
    """A hub model was asked for while the hub cannot be reached; the message names the offline model."""


# ---------------------------------------------------------------------------------------------
# The three architectures
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Architecture:
    """One transformer family of chapter 1: its transformers class, objective and uses."""

    kind: str
    family: str
    model_class: str
    objective: str
    attention: str
    typical_tasks: str
    examples: str


ARCHITECTURES: dict[str, Architecture] = {
    "bert": Architecture(
        "bert", "encoder-only (autoencoding)", "BertForMaskedLM",
        "masked LM: predict the ~15% hidden tokens (80/10/10)",
        "bidirectional: every token sees the whole sequence",
        "classification, named entities, extractive QA, embeddings",
        "BERT, RoBERTa",
    ),
    "gpt2": Architecture(
        "gpt2", "decoder-only (autoregressive)", "GPT2LMHeadModel",
        "causal LM: predict the next token",
        "causal: a token sees only the tokens before it",
        "text generation; zero/few-shot for many tasks at scale",
        "GPT, LLaMA, BLOOM",
    ),
    "t5": Architecture(
        "t5", "encoder-decoder (sequence-to-sequence)", "T5ForConditionalGeneration",
        "span corruption: rebuild spans hidden behind sentinels",
        "encoder bidirectional; decoder causal + cross-attention",
        "translation, summarisation, question answering",
        "T5, BART",
    ),
}


def architecture_table() -> Table:
    """The three architectures side by side: objective, attention and typical tasks (seed 001)."""
    rows = [[a.family, a.model_class, a.objective, a.attention, a.typical_tasks, a.examples]
            for a in ARCHITECTURES.values()]
    return Table(["architecture", "transformers class", "pretraining objective", "attention",
                  "typical tasks", "examples"], rows)


def _check_kind(kind: str) -> str:
    key = str(kind).strip().lower()
    aliases = {"encoder": "bert", "encoder-only": "bert", "decoder": "gpt2",
               "decoder-only": "gpt2", "encoder-decoder": "t5", "seq2seq": "t5"}
    key = aliases.get(key, key)
    if key not in KINDS:
        raise ValueError(f"Unknown model kind {kind!r}; use one of {', '.join(KINDS)} "
                         "(encoder-only, decoder-only, encoder-decoder).")
    return key


# ---------------------------------------------------------------------------------------------
# Configs and models
# ---------------------------------------------------------------------------------------------

def tiny_config(
    kind: str,
    tokenizer: PreTrainedTokenizerBase | None = None,
    *,
    hidden: int = 128,
    layers: int = 2,
    heads: int = 4,
    context: int = 64,
) -> PretrainedConfig:
    """A small transformers config of ``kind`` sized from the tokenizer's vocabulary.

    ``hidden`` is the model width (feed-forward width 4 x hidden), ``layers`` the number of
    blocks (for T5: encoder blocks, and as many decoder blocks), ``heads`` the attention heads,
    ``context`` the longest sequence (positions of BERT and GPT-2). Dropout is off: the tiny
    models see each token about once, so there is nothing to regularise, and training stays
    deterministic. The special-token ids come from the tokenizer (default: the course tokenizer).
    """
    kind = _check_kind(kind)
    for name, value in (("hidden", hidden), ("layers", layers), ("heads", heads),
                        ("context", context)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}.")
    if hidden % heads:
        raise ValueError(f"hidden={hidden} must be divisible by heads={heads} "
                         f"(try heads={math.gcd(hidden, heads)} or hidden={heads * (hidden // heads + 1)}).")
    tok = tokenizer if tokenizer is not None else data.course_tokenizer()
    vocab, pad, eos = len(tok), tok.pad_token_id, tok.eos_token_id
    bos = tok.bos_token_id if tok.bos_token_id is not None else eos
    if kind == "bert":
        from transformers import BertConfig

        return BertConfig(
            vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=heads, intermediate_size=4 * hidden,
            max_position_embeddings=context, type_vocab_size=1, pad_token_id=pad,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        )
    if kind == "gpt2":
        from transformers import GPT2Config

        return GPT2Config(
            vocab_size=vocab, n_positions=context, n_embd=hidden, n_layer=layers, n_head=heads,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=bos, eos_token_id=eos, pad_token_id=pad,
        )
    from transformers import T5Config

    return T5Config(
        vocab_size=vocab, d_model=hidden, d_kv=hidden // heads, d_ff=4 * hidden,
        num_layers=layers, num_decoder_layers=layers, num_heads=heads,
        relative_attention_num_buckets=16, relative_attention_max_distance=context,
        dropout_rate=0.0, pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
    )


def _kind_of_config(config: PretrainedConfig) -> str:
    kinds = {"bert": "bert", "gpt2": "gpt2", "t5": "t5"}
    if config.model_type not in kinds:
        raise ValueError(f"Config of model type {config.model_type!r} is not one of the course's "
                         f"kinds ({', '.join(KINDS)}); build one with tiny_config().")
    return kinds[config.model_type]


def _model_class(kind: str) -> Any:
    import transformers

    return getattr(transformers, ARCHITECTURES[_check_kind(kind)].model_class)


def _name_loss(model: PreTrainedModel) -> PreTrainedModel:
    """Name the loss of models whose class name transformers cannot map (GPT-2), to skip a warning."""
    if getattr(model, "loss_type", None) is None and hasattr(model, "loss_type"):
        model.loss_type = "ForCausalLM"
    return model


def build_model(config: PretrainedConfig, seed: int = 0) -> PreTrainedModel:
    """A freshly initialised model for ``config``, seeded so that the same seed gives the same weights."""
    kind = _kind_of_config(config)
    torch.manual_seed(seed)
    return _name_loss(_model_class(kind)(config))


def count_parameters(model: torch.nn.Module, *, embeddings: bool = True) -> int:
    """Number of distinct parameters (tied weights counted once); ``embeddings=False`` leaves out
    the token and position embeddings, the "non-embedding" count of Kaplan et al. (2020)."""
    seen: set[int] = set()
    total = 0
    skip: set[int] = set()
    if not embeddings:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding):
                skip.add(id(module.weight))
    for p in model.parameters():
        if id(p) in seen or id(p) in skip:
            continue
        seen.add(id(p))
        total += p.numel()
    return total


# ---------------------------------------------------------------------------------------------
# Training data
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Recipe:
    """How a model is trained: steps, batch, window, AdamW settings, schedule and seed.

    The learning rate rises linearly for ``warmup_steps`` and then follows a cosine down to
    ``min_lr_ratio * lr``; gradients are clipped to norm ``clip``. ``device`` is where training
    runs (CPU by default, so that results are the same on every machine; pass "cuda" to use a GPU).
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


def _fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """A hash of the tokenizer's vocabulary and special tokens (what decides its ids)."""
    blob = json.dumps([sorted(tokenizer.get_vocab().items()), tokenizer.all_special_tokens])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _texts_fingerprint(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def token_stream(texts: Sequence[str] | str, tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """Tokenize documents without special tokens and join them with one EOS token between each two.

    A single string counts as one document. Returns a 1-D ``torch.long`` tensor (shared by calls with
    the same texts and tokenizer: the last few streams are remembered, so do not modify it in place).
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise ValueError("No text to tokenize: pass at least one non-empty document.")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("The tokenizer has no EOS token to put between documents; set "
                         "tokenizer.eos_token, or use course_lib.data.course_tokenizer().")
    key = (_fingerprint(tokenizer), _texts_fingerprint(texts))
    if key in _TEXT_STREAMS:
        return _TEXT_STREAMS[key]
    ids: list[int] = []
    for i, row in enumerate(tokenizer(list(texts), add_special_tokens=False)["input_ids"]):
        if i:
            ids.append(int(eos))
        ids.extend(row)
    stream = torch.tensor(ids, dtype=torch.long)
    if len(_TEXT_STREAMS) >= 8:
        _TEXT_STREAMS.pop(next(iter(_TEXT_STREAMS)))
    _TEXT_STREAMS[key] = stream
    return stream


_TEXT_STREAMS: dict[tuple[str, str], torch.Tensor] = {}


_STREAMS: dict[tuple[str, str], torch.Tensor] = {}


def _course_stream(tokenizer: PreTrainedTokenizerBase, split: str) -> torch.Tensor:
    key = (_fingerprint(tokenizer) + data.CORPUS_VERSION, split)
    if key not in _STREAMS:
        _STREAMS[key] = token_stream(data.load_corpus("course", split), tokenizer)
    return _STREAMS[key]


def _too_short(n_tokens: int, window: int, what: str) -> ValueError:
    return ValueError(
        f"The text has {n_tokens} tokens, fewer than one {what} of {window} tokens. Use a longer "
        f"text (e.g. the course corpus: load_corpus('course', 'test')) or a smaller "
        f"{'window' if what == 'window' else 'seq_len'} (at most {max(n_tokens, 1)})."
    )


def _objective_batch(kind: str, windows: list[list[int]], tokenizer: PreTrainedTokenizerBase,
                     g: torch.Generator) -> dict[str, torch.Tensor]:
    if kind == "bert":
        return objectives.masked_lm_batch(windows, tokenizer, generator=g)
    if kind == "gpt2":
        return objectives.causal_lm_batch(windows, tokenizer)
    return objectives.span_corruption_batch(windows, tokenizer, generator=g)


def training_batches(
    kind: str,
    tokenizer: PreTrainedTokenizerBase,
    recipe: Recipe,
    texts: Sequence[str] | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Yield ``recipe.steps`` seeded batches of ``kind``'s objective from the training text.

    Each batch holds ``batch_size`` windows of ``seq_len`` tokens starting at random offsets of
    the token stream (the course's training split unless ``texts`` is given), turned into masked-LM,
    causal-LM or span-corruption examples by :mod:`course_lib.objectives`. The offsets and the
    objective's own randomness come from one ``torch.Generator`` seeded with ``recipe.seed``.
    """
    kind = _check_kind(kind)
    stream = token_stream(texts, tokenizer) if texts is not None else _course_stream(tokenizer, "train")
    if len(stream) < recipe.seq_len:
        raise _too_short(len(stream), recipe.seq_len, "training window")
    g = torch.Generator().manual_seed(recipe.seed)
    last_start = len(stream) - recipe.seq_len
    for _ in range(recipe.steps):
        starts = torch.randint(0, last_start + 1, (recipe.batch_size,), generator=g).tolist()
        windows = [stream[s:s + recipe.seq_len].tolist() for s in starts]
        yield _objective_batch(kind, windows, tokenizer, g)


# ---------------------------------------------------------------------------------------------
# The training loop
# ---------------------------------------------------------------------------------------------

def progress_bar(iterable: Any, total: int, desc: str, progress: bool) -> Any:
    """A tqdm bar over ``iterable`` (nothing drawn when ``progress`` is False or nothing can draw one)."""
    from tqdm.auto import tqdm

    # disable=None: a bar in terminals and notebooks that can draw one, nothing in logs.
    return tqdm(iterable, total=total, desc=desc, disable=None if progress else True,
                leave=False, mininterval=0.5)


def train(
    model: PreTrainedModel,
    kind: str,
    tokenizer: PreTrainedTokenizerBase,
    recipe: Recipe,
    *,
    texts: Sequence[str] | None = None,
    progress: bool = True,
    desc: str | None = None,
) -> list[float]:
    """Train ``model`` in place with AdamW on :func:`training_batches`; return the loss of each step.

    One step: forward the batch (the model computes its own loss from ``labels``), backward, clip
    the gradient norm, AdamW step with the recipe's learning rate for that step. The model is left
    in eval mode. ``torch.set_num_threads`` is left as the machine set it.
    """
    kind = _check_kind(kind)
    device = torch.device(recipe.device)
    model.to(device).train()
    trainable = [p for p in model.parameters() if p.requires_grad]  # frozen ones (LoRA) get no state
    decay = [p for p in trainable if p.dim() >= 2]
    no_decay = [p for p in trainable if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": recipe.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=recipe.lr, betas=recipe.betas,
    )
    history: list[float] = []
    bar = progress_bar(training_batches(kind, tokenizer, recipe, texts), recipe.steps,
                    desc or f"training {kind}", progress)
    for step, batch in enumerate(bar):
        for group in opt.param_groups:
            group["lr"] = recipe.lr_at(step)
        batch = {k: v.to(device) for k, v in batch.items()}
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, recipe.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        history.append(float(loss.item()))
        if step % 10 == 0 and hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{history[-1]:.3f}")
    if hasattr(bar, "close"):
        bar.close()
    model.eval()
    return history


@dataclass
class TrainedModel:
    """A trained model with its tokenizer, recipe, loss history and where it came from."""

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
        return count_parameters(self.model)

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


def cache_key(kind: str, config: PretrainedConfig, recipe: Recipe,
              tokenizer: PreTrainedTokenizerBase, texts: Sequence[str] | None = None) -> str:
    """The hash that names a cached model: kind, config, recipe, tokenizer and corpus version."""
    blob = {
        "kind": _check_kind(kind),
        "config": _config_blob(config),
        "recipe": asdict(recipe),
        "tokenizer": _fingerprint(tokenizer),
        "corpus": data.CORPUS_VERSION if texts is None else _texts_fingerprint(texts),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:20]


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars and info messages while saving or loading."""
    from transformers.utils import logging as hf_logging

    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_model(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    directory: str | os.PathLike[str],
    *,
    info: dict[str, Any] | None = None,
    card: str | None = None,
) -> Path:
    """Save model (safetensors), config, tokenizer, ``training.json`` and an optional model card.

    Written to a temporary sibling directory first and then renamed, so a crash never leaves a
    half-written checkpoint under ``directory``. ``training.json`` records ``info`` plus the
    SHA-256 of the weights, which :func:`course_model` checks before trusting a cached copy.
    """
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    with _quiet_transformers():
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
    weights = tmp / _WEIGHTS_FILE
    if not weights.is_file():
        raise RuntimeError(f"save_pretrained wrote no {_WEIGHTS_FILE} in {tmp}; "
                           "is safetensors installed? (pip install safetensors)")
    record = dict(info or {})
    record["weights_sha256"] = _sha256_file(weights)
    (tmp / _TRAINING_FILE).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    if card is not None:
        (tmp / "README.md").write_text(card, encoding="utf-8")
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    return target


def _read_training(directory: Path) -> dict[str, Any]:
    path = directory / _TRAINING_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path} is missing or unreadable ({err}).") from None


def _load_cached(kind: str, directory: Path, tokenizer: PreTrainedTokenizerBase,
                 recipe: Recipe) -> TrainedModel | None:
    """The cached model in ``directory``, or None if it is absent or damaged (then it is retrained)."""
    try:
        info = _read_training(directory)
        if info.get("weights_sha256") != _sha256_file(directory / _WEIGHTS_FILE):
            return None
        with _quiet_transformers():
            model = _model_class(kind).from_pretrained(str(directory), local_files_only=True)
    except Exception:  # noqa: BLE001 - any damage means: train again
        return None
    model = _name_loss(model).eval()
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

    ``config`` defaults to ``tiny_config(kind)``, ``recipe`` to ``Recipe()``, ``tokenizer`` to the
    course tokenizer, ``texts`` to the course's training split. With ``cache=True`` the result is
    stored under ``cache_dir()/models/<kind>-<cache_key>`` and later calls with the same config,
    recipe, tokenizer and corpus load it: same loss history, same weights, no training.
    """
    kind = _check_kind(kind)
    tokenizer = tokenizer if tokenizer is not None else data.course_tokenizer()
    config = config if config is not None else tiny_config(kind, tokenizer)
    if _kind_of_config(config) != kind:
        raise ValueError(f"The config is for {config.model_type!r} but kind is {kind!r}; "
                         f"build it with tiny_config({kind!r}).")
    if config.vocab_size < len(tokenizer):
        raise ValueError(f"The config's vocab_size ({config.vocab_size}) is smaller than the "
                         f"tokenizer ({len(tokenizer)} tokens); build it with tiny_config(kind, tokenizer).")
    recipe = recipe if recipe is not None else Recipe()
    directory = data.cache_dir() / "models" / f"{kind}-{cache_key(kind, config, recipe, tokenizer, texts)}"
    if cache and (directory / _TRAINING_FILE).is_file():
        cached = _load_cached(kind, directory, tokenizer, recipe)
        if cached is not None:
            return cached
    model = build_model(config, seed=recipe.seed)
    start = time.perf_counter()
    history = train(model, kind, tokenizer, recipe, texts=texts, progress=progress)
    seconds = time.perf_counter() - start
    info = {"kind": kind, "history": history, "seconds": seconds, "recipe": asdict(recipe),
            "corpus": data.CORPUS_VERSION if texts is None else "custom texts",
            "n_params": count_parameters(model), "threads": torch.get_num_threads(),
            "torch": torch.__version__}
    saved: Path | None = None
    if cache:
        try:
            saved = save_model(model.cpu(), tokenizer, directory, info=info)
        except OSError:
            saved = None  # an unwritable cache only costs a retrain next time
    return TrainedModel(kind, model, tokenizer, recipe, history, seconds, False, saved, info)


# ---------------------------------------------------------------------------------------------
# Loading: local checkpoints and hub ids
# ---------------------------------------------------------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")


def _is_hub_id(name: str) -> bool:
    return (bool(_HUB_ID.match(name)) and not name.startswith((".", "~"))
            and not name.endswith((".json", ".safetensors", ".bin")))


def _rebuild_hint(directory: Path) -> str:
    default = directory.resolve() == course_model_dir().resolve()
    where = "" if default else f" --output {directory}"
    call = "course_model(rebuild=True)" if default else f"course_model({str(directory)!r}, rebuild=True)"
    return (f"Rebuild it with `{REBUILD_COMMAND}{where}` (about 3 minutes on 2 CPU cores), "
            f"or from Python with course_lib.models.{call}.")


def _check_checkpoint(directory: Path) -> None:
    if not directory.is_dir():
        raise CheckpointError(
            f"No model checkpoint at {str(directory)!r}. Build the course model there with "
            f"`{REBUILD_COMMAND} --output {directory}`, or pass a directory written by "
            "save_pretrained (config.json + model.safetensors).")
    missing = [f for f in ("config.json", _WEIGHTS_FILE) if not (directory / f).is_file()]
    if missing:
        raise CheckpointError(f"The checkpoint at {str(directory)!r} is incomplete: "
                              f"{', '.join(missing)} missing. {_rebuild_hint(directory)}")


def load_model(name_or_path: str | os.PathLike[str]) -> PreTrainedModel:
    """Load a causal LM from a local directory or, when the hub is reachable, from a hub id.

    Both go through ``AutoModelForCausalLM.from_pretrained`` (never ``trust_remote_code``): a
    directory written by ``save_pretrained`` (the course model's, for example) is read with
    ``local_files_only=True``; a hub id such as ``"gpt2"`` or ``"facebook/opt-125m"`` is
    downloaded only when ``course_lib.env.is_online()``. Offline, a hub id raises
    :class:`ModelUnavailableError` naming the offline alternative, the course model. A missing or
    damaged checkpoint raises :class:`CheckpointError` with the rebuild command.
    """
    from transformers import AutoModelForCausalLM

    text = os.fspath(name_or_path)
    path = Path(os.path.expanduser(text))
    local = isinstance(name_or_path, os.PathLike) or path.exists() or not _is_hub_id(text)
    if not local:
        if not env.is_online():
            raise ModelUnavailableError(
                f"Cannot load {text!r} from the model hub: the hub is not reachable from this "
                f"machine (no network, or HF_HUB_OFFLINE is set), and there is no local directory "
                f"{text!r} either. Offline, use the course model: "
                f"course_lib.models.course_model() (built on first use; or `{REBUILD_COMMAND}`), "
                f"or load_model(<a local directory>).")
        with _quiet_transformers():
            return _name_loss(AutoModelForCausalLM.from_pretrained(text, trust_remote_code=False))
    _check_checkpoint(path)
    try:
        with _quiet_transformers():
            model = AutoModelForCausalLM.from_pretrained(
                str(path), local_files_only=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - reported with the fix, not a deep traceback
        raise CheckpointError(
            f"The checkpoint at {str(path)!r} could not be read ({type(err).__name__}: "
            f"{str(err)[:200]}). It is probably damaged. {_rebuild_hint(path)}") from None
    return _name_loss(model).eval()


def load_tokenizer(name_or_path: str | os.PathLike[str]) -> PreTrainedTokenizerBase:
    """Load the tokenizer saved next to a model (local directory, or hub id when online)."""
    from transformers import AutoTokenizer

    text = os.fspath(name_or_path)
    path = Path(os.path.expanduser(text))
    if isinstance(name_or_path, os.PathLike) or path.exists() or not _is_hub_id(text):
        if not (path / "tokenizer.json").is_file() and not (path / "tokenizer_config.json").is_file():
            raise CheckpointError(f"No tokenizer files in {str(path)!r}. {_rebuild_hint(path)}")
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if not env.is_online():
        raise ModelUnavailableError(
            f"Cannot load the tokenizer of {text!r}: the hub is not reachable. Offline, use "
            "course_lib.data.course_tokenizer() with the course model.")
    return AutoTokenizer.from_pretrained(text)


# ---------------------------------------------------------------------------------------------
# Perplexity
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Perplexity:
    """A perplexity measurement: exp(mean negative log-likelihood) over ``n_tokens`` predictions."""

    perplexity: float
    mean_nll: float
    n_tokens: int
    n_windows: int
    window: int
    stride: int
    text: str

    def __float__(self) -> float:
        return self.perplexity

    def __str__(self) -> str:
        return (f"perplexity {self.perplexity:.3f} (mean loss {self.mean_nll:.4f} nats over "
                f"{self.n_tokens:,} tokens of {self.text}; window {self.window}, stride {self.stride})")


def _context_length(model: PreTrainedModel) -> int | None:
    cfg = model.config
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _windows(n: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, first scored position) for each window over a stream of ``n`` tokens."""
    out, prev_end, begin = [], 0, 0
    while True:
        end = min(begin + window, n)
        first = max(prev_end, begin + 1)
        if first < end:
            out.append((begin, end, first))
        prev_end = end
        if end >= n:
            return out
        begin += stride


@torch.no_grad()
def perplexity(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase | None = None,
    *,
    split: str = "test",
    texts: Sequence[str] | str | None = None,
    window: int | None = None,
    stride: int | None = None,
    batch_size: int = 16,
) -> Perplexity:
    """Perplexity of a causal LM on a fixed held-out text: the course corpus's test split by default.

    The text (``texts``, else the course corpus's ``split``) becomes one token stream with ``</s>``
    between documents (:func:`token_stream`). Windows of ``window`` tokens (default: 128, capped at
    the model's context) start every ``stride`` tokens (default ``window // 2``); each scores only
    the tokens no earlier window scored. With ``stride < window`` every token after the first is
    predicted once and, past the first window, with at least ``window - stride`` tokens of context.
    With ``stride = window`` the windows do not overlap, the first token of each is not scored, and
    the value equals exp of the mean of the model's own ``labels=`` loss over the windows, weighted
    by tokens scored. The result is exp(mean negative log-likelihood), summed in float64 from the
    model's float32 logits. The model is evaluated in eval mode on its own device.
    """
    tokenizer = tokenizer if tokenizer is not None else data.course_tokenizer()
    if getattr(model.config, "is_encoder_decoder", False):
        raise ValueError("perplexity() measures causal (decoder-only) language models; "
                         f"{type(model).__name__} is an encoder-decoder. Use objective_loss() instead.")
    if type(model).__name__.endswith("ForMaskedLM"):
        raise ValueError("perplexity() measures causal (decoder-only) language models; a masked LM "
                         "does not predict the next token. Use objective_loss() instead.")
    context = _context_length(model)
    if window is None:
        window = min(DEFAULT_WINDOW, context) if context else DEFAULT_WINDOW
    if not isinstance(window, int) or window < 2:
        raise ValueError(f"window must be a whole number of tokens >= 2, got {window!r}.")
    if context is not None and window > context:
        raise ValueError(f"window={window} is longer than the model's context of {context} "
                         f"positions; pass window={context} or less.")
    stride = window // 2 if stride is None else stride
    if not isinstance(stride, int) or not 1 <= stride <= window:
        raise ValueError(f"stride must be between 1 and window={window}, got {stride!r}.")
    if texts is None:
        data._check_split(split)
        stream, label = _course_stream(tokenizer, split), f"the course corpus ({split} split)"
    else:
        stream, label = token_stream(texts, tokenizer), "the given text"
    n = len(stream)
    if n < window:
        raise _too_short(n, window, "window")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    spans = _windows(n, window, stride)
    # Windows of the same length are batched together (all but possibly the last).
    groups: dict[int, list[tuple[int, int, int]]] = {}
    for span in spans:
        groups.setdefault(span[1] - span[0], []).append(span)
    for length, group in groups.items():
        for i in range(0, len(group), batch_size):
            chunk = group[i:i + batch_size]
            ids = torch.stack([stream[b:e] for b, e, _ in chunk]).to(device)
            logits = model(input_ids=ids).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # predicts positions 1..L-1
            for row, (b, _, first) in enumerate(chunk):
                scored = nll[row, first - b - 1:]
                total += float(scored.double().sum())
                count += scored.numel()
    if was_training:
        model.train()
    mean = total / count
    return Perplexity(math.exp(mean), mean, count, len(spans), window, stride, label)


@torch.no_grad()
def objective_loss(trained: TrainedModel, split: str = "validation", n_batches: int = 8,
                   seed: int = 1234) -> float:
    """Mean loss of a trained model on its own objective over fixed held-out batches.

    The held-out split is cut into consecutive windows of the recipe's ``seq_len`` (no random
    offsets); masking and span choices are seeded with ``seed``. Losses of different objectives
    are not comparable with each other: each predicts different tokens from different inputs.
    """
    data._check_split(split)
    stream = _course_stream(trained.tokenizer, split)
    length, size = trained.recipe.seq_len, trained.recipe.batch_size
    n_windows = min(n_batches * size, len(stream) // length)
    if n_windows < 1:
        raise _too_short(len(stream), length, "training window")
    g = torch.Generator().manual_seed(seed)
    model = trained.model.eval()
    device = next(model.parameters()).device
    total = 0.0
    for i in range(0, n_windows, size):
        windows = [stream[j * length:(j + 1) * length].tolist() for j in range(i, min(i + size, n_windows))]
        batch = _objective_batch(trained.kind, windows, trained.tokenizer, g)
        total += float(model(**{k: v.to(device) for k, v in batch.items()}).loss) * len(windows)
    return total / n_windows


def unigram_baseline(tokenizer: PreTrainedTokenizerBase | None = None, split: str = "train",
                     k: int = 5) -> tuple[float, list[tuple[str, float]]]:
    """The loss of a model that ignores context, and the ``k`` most frequent tokens.

    A model that always predicts the token frequencies of the training split has a loss equal to
    their entropy, -Σ p ln p nats per token (special tokens left out): the plateau a language
    model sits on before it learns to use context. Returns (entropy, [(token, frequency), ...]).
    """
    tokenizer = tokenizer if tokenizer is not None else data.course_tokenizer()
    data._check_split(split)
    stream = _course_stream(tokenizer, split)
    counts = torch.bincount(stream, minlength=len(tokenizer)).double()
    counts[torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)] = 0
    p = counts / counts.sum()
    nz = p[p > 0]
    entropy = float(-(nz * nz.log()).sum())
    top = torch.topk(p, k)
    return entropy, [(tokenizer.decode([int(i)]), float(v)) for v, i in zip(top.values, top.indices)]


# ---------------------------------------------------------------------------------------------
# What each model can do
# ---------------------------------------------------------------------------------------------

def _encode_with_specials(text: str, tokenizer: PreTrainedTokenizerBase, specials: Sequence[str]) -> list[int]:
    """Tokenize ``text`` without adding specials; a space before a special token is dropped.

    In training, a hidden word's leading space belongs to the hidden token ("Ġcup"), so
    "the <mask>" must be encoded as "the" + "<mask>", not "the" + "Ġ" + "<mask>".
    """
    for s in specials:
        text = text.replace(" " + s, s)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@torch.no_grad()
def fill_mask(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, text: str,
              top_k: int = 5) -> list[tuple[str, float]]:
    """The ``top_k`` tokens a masked LM puts in the one ``<mask>`` of ``text``, with probabilities."""
    mask = tokenizer.mask_token
    if mask is None or text.count(mask) != 1:
        raise ValueError(f"The text must contain exactly one {mask or '<mask>'} token, e.g. "
                         f"'Mia dropped the {mask or '<mask>'} and it broke.'")
    ids = [tokenizer.bos_token_id] + _encode_with_specials(text, tokenizer, [mask]) + [tokenizer.eos_token_id]
    ids_t = torch.tensor([ids], device=next(model.parameters()).device)
    pos = ids.index(tokenizer.mask_token_id)
    probs = torch.softmax(model(input_ids=ids_t).logits[0, pos].float(), dim=-1)
    top = torch.topk(probs, top_k)
    return [(tokenizer.decode([int(i)]), float(p)) for p, i in zip(top.values, top.indices)]


@torch.no_grad()
def continue_text(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompt: str,
                  max_new_tokens: int = 40, *, sample: bool = False, seed: int = 0,
                  temperature: float = 0.8) -> str:
    """Continue ``prompt`` with a causal LM (greedy by default, or seeded sampling); return the new text.

    The prompt is preceded by ``</s>``, as every story after the first is in training. Generation
    stops at ``</s>`` (the end of a story) or after ``max_new_tokens`` tokens.
    """
    ids = [tokenizer.eos_token_id] + tokenizer(prompt, add_special_tokens=False)["input_ids"]
    device = next(model.parameters()).device
    context = _context_length(model)
    if context is not None and len(ids) + max_new_tokens > context:
        max_new_tokens = max(0, context - len(ids))
    x = torch.tensor([ids], device=device)
    torch.manual_seed(seed)
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                         do_sample=sample, temperature=temperature if sample else None,
                         top_k=None, top_p=None, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    return tokenizer.decode(out[0, len(ids):], skip_special_tokens=True)


@torch.no_grad()
def fill_spans(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, text: str,
               max_new_tokens: int = 24) -> tuple[str, str]:
    """Let an encoder-decoder fill the ``<extra_id_N>`` sentinels of ``text``; return (target, filled text).

    The decoder writes each sentinel followed by the tokens it guesses (greedy), as in training;
    :func:`course_lib.objectives.reconstruct_from_spans` puts them back into the text.
    """
    sentinels = data.sentinel_ids(tokenizer)
    names = [tokenizer.convert_ids_to_tokens(s) for s in sentinels]
    ids = _encode_with_specials(text, tokenizer, names)
    if not any(t in set(sentinels) for t in ids):
        raise ValueError("The text has no sentinel to fill; write e.g. "
                         "'Mia went to the <extra_id_0> and fed the <extra_id_1>.'")
    eos = tokenizer.eos_token_id
    ids = ids + [eos]
    x = torch.tensor([ids], device=next(model.parameters()).device)
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                         do_sample=False, top_k=None, top_p=None,
                         decoder_start_token_id=tokenizer.pad_token_id,
                         eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
    target = [int(t) for t in out[0].tolist()[1:]]  # drop the decoder start token
    if eos in target:
        target = target[:target.index(eos)]
    used = [s for s in sentinels if s in ids]
    if not target or target[0] not in set(sentinels):
        target = [used[0]] + target
    # A sentinel the decoder did not write is filled with nothing rather than failing.
    target += [s for s in used if s not in target]
    filled = objectives.reconstruct_from_spans(ids, target + [eos], sentinels, eos)
    return tokenizer.decode(target), tokenizer.decode(filled)


# ---------------------------------------------------------------------------------------------
# A small scaling study
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScalingPoint:
    """One model of a scaling study: its size, the compute it used and its held-out loss."""

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
    """One GPT-2 per (hidden, layers), all trained with the same recipe (cached like :func:`train_model`)."""
    recipe = recipe if recipe is not None else SCALING_RECIPE
    tokenizer = tokenizer if tokenizer is not None else data.course_tokenizer()
    return [train_model("gpt2", tiny_config("gpt2", tokenizer, hidden=hidden, layers=layers, heads=heads,
                                            context=recipe.seq_len), recipe, tokenizer, progress=progress)
            for hidden, layers in sizes]


def validation_loss(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, window: int) -> float:
    """Mean token loss on the validation split, non-overlapping windows of ``window`` tokens."""
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


def plot_scaling(points: Sequence[ScalingPoint], fit: bool = True) -> Any:
    """Two log-log panels: held-out loss against non-embedding parameters and against C = 6·N·D."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    from course_lib.plots import use_course_style

    use_course_style()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    loss = [p.validation_loss for p in points]
    for ax, xs, label in ((axes[0], [p.n_non_embedding for p in points], "non-embedding parameters N"),
                          (axes[1], [p.compute for p in points], "training compute C = 6·N·D (FLOPs)")):
        ax.plot(xs, loss, "o", color="#4C72B0", ms=8, label="tiny GPT-2s (same tokens)")
        for p, xv in zip(points, xs):
            ax.annotate(f"h{p.hidden}·L{p.layers}", (xv, p.validation_loss), textcoords="offset points",
                        xytext=(5, 5), fontsize=9)
        if fit and len(points) >= 3:
            a, alpha, r2 = fit_power_law(xs, loss)
            grid = [min(xs) * (max(xs) / min(xs)) ** (i / 50) for i in range(51)]
            ax.plot(grid, [a * g ** -alpha for g in grid], "--", color="#C44E52",
                    label=f"fit: L = {a:.3g}·x^(-{alpha:.3f}), R² = {r2:.2f}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(FormatStrFormatter("%.1f"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%.1f"))
        ax.set_xlabel(label)
        ax.set_ylabel("validation loss (nats/token)")
        ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False)
    axes[0].set_title("Loss against model size")
    axes[1].set_title("Loss against compute")
    fig.tight_layout()
    return fig


def plot_loss_curves(results: Sequence[TrainedModel], smooth: int = 10,
                     baseline: float | None = None) -> Any:
    """Training loss per step of each model (thin) and its running mean over ``smooth`` steps (thick).

    ``baseline`` draws a horizontal line, e.g. the context-free loss of :func:`unigram_baseline`.
    """
    import matplotlib.pyplot as plt

    from course_lib.plots import use_course_style

    use_course_style()
    fig, ax = plt.subplots()
    colours = {"bert": "#4C72B0", "gpt2": "#C44E52", "t5": "#55A868"}
    for r in results:
        h = r.history
        run = [sum(h[max(0, i - smooth + 1):i + 1]) / len(h[max(0, i - smooth + 1):i + 1])
               for i in range(len(h))]
        c = colours.get(r.kind, None)
        ax.plot(range(1, len(h) + 1), h, color=c, alpha=0.25, lw=1)
        ax.plot(range(1, len(h) + 1), run, color=c, lw=2,
                label=f"{ARCHITECTURES[r.kind].model_class}: {ARCHITECTURES[r.kind].objective.split(':')[0]}")
    if baseline is not None:
        ax.axhline(baseline, color="black", ls="--", lw=1,
                   label=f"context-free (unigram) loss {baseline:.2f}")
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss (nats per predicted token)")
    ax.set_title("Three tiny models, three objectives")
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# The course model
# ---------------------------------------------------------------------------------------------

#: The course model's recipe: the decoder-only model trained longer (about 3 minutes on 2 cores).
COURSE_RECIPE = Recipe(steps=600, batch_size=16, seq_len=128, lr=3e-3, warmup_steps=30,
                       min_lr_ratio=0.1, seed=0)
_COURSE_SHAPE = {"hidden": 128, "layers": 4, "heads": 4, "context": 128}


def course_model_config(tokenizer: PreTrainedTokenizerBase | None = None) -> PretrainedConfig:
    """The course model's GPT-2 config: 4 layers, hidden 128, 4 heads, 128 positions, course vocabulary."""
    return tiny_config("gpt2", tokenizer, **_COURSE_SHAPE)


def course_model_dir() -> Path:
    """Where the course model is cached: ``cache_dir()/course-model-v1``."""
    return data.cache_dir() / COURSE_MODEL_NAME


def course_model_reference() -> dict[str, Any]:
    """The reference figures of the course model's recipe, recorded in ``course_model_reference.json``."""
    try:
        return json.loads(_REFERENCE_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def model_card(info: dict[str, Any]) -> str:
    """The course model's card (Markdown): use, data, procedure, perplexity, limitations.

    ``info`` holds what a build measured (``n_params``, ``validation_perplexity``,
    ``test_perplexity``, ``validation_loss``, ``seconds``, ...), as written by
    :func:`build_course_model`.
    """
    r = info.get("recipe", asdict(COURSE_RECIPE))
    shape = info.get("shape", _COURSE_SHAPE)
    stats = info.get("corpus_tokens", {})
    tokens = r["steps"] * r["batch_size"] * r["seq_len"]
    ppl_rows = "\n".join(
        f"| {split} | {info.get(f'{split}_perplexity', float('nan')):.3f} | "
        f"{info.get(f'{split}_loss', float('nan')):.4f} | {stats.get(split, 0):,} |"
        for split in ("validation", "test"))
    seconds = info.get("seconds")
    took = f"{seconds:.0f} s on {info.get('threads', '?')} CPU thread(s)" if seconds else "about 3 minutes on 2 CPU cores"
    return f"""---
language: en
license: mit
library_name: transformers
pipeline_tag: text-generation
tags: [gpt2, tiny, course]
---

# {COURSE_MODEL_NAME}

A tiny GPT-2 ({info.get('n_params', 0):,} parameters) trained from scratch on the procedurally
generated children's stories of the course *Computational challenges of training LLMs*. It is the
model every lab of Part II quantizes, prunes and compresses.

## Intended use
Teaching and testing: perplexity before and after quantization, pruning and GPTQ; a real, trained
`transformers` model that loads offline in a second. **Not** for any real application: it knows only
the course's story world and writes nothing else.

## Training data
`{info.get('corpus', data.CORPUS_VERSION)}`: {data.N_STORIES:,} short English stories written by
`course_lib.data.generate_stories` (seed {data.DEFAULT_SEED}), split 90/5/5 into train, validation and
test by story; tokenized with the course's byte-level BPE tokenizer ({info.get('vocab_size', data.DEFAULT_VOCAB_SIZE):,}
tokens, saved with the model). Training tokens: {stats.get('train', 0):,}.

## Training procedure
- Architecture: `GPT2LMHeadModel`, {shape['layers']} layers, hidden {shape['hidden']}, {shape['heads']} heads,
  context {shape['context']} tokens, tied input/output embeddings, no dropout.
- Objective: causal language modelling (next-token prediction) on windows of {r['seq_len']} tokens
  cut at seeded random offsets from the training stories joined by `</s>`.
- Optimiser: AdamW (lr {r['lr']:g}, betas {tuple(r['betas'])}, weight decay {r['weight_decay']:g}),
  {r['warmup_steps']} warm-up steps then cosine decay to {r['min_lr_ratio']:g}×lr, gradient clipping at {r['clip']:g}.
- {r['steps']} steps × {r['batch_size']} sequences × {r['seq_len']} tokens = {tokens:,} tokens
  (C ≈ 6·N·D = {6 * info.get('n_params', 0) * tokens:.2e} FLOPs); seed {r['seed']}; {took}.
- Reproduce: `{REBUILD_COMMAND} --output DIR`.

## Evaluation
Perplexity on the held-out splits of the course corpus, stories joined by `</s>`, sliding window
of {info.get('window', DEFAULT_WINDOW)} tokens with stride {info.get('stride', DEFAULT_STRIDE)} (`course_lib.models.perplexity`):

| split | perplexity | mean loss (nats) | tokens |
|---|---|---|---|
{ppl_rows}

## Limitations
- Trained on about {stats.get('train', 0) // 1000:,}k tokens of templated stories: it continues such stories
  fluently but has no knowledge of the world, and its perplexity on any other text is very high.
- It often mixes up the characters of a story (names, pronouns) and repeats stock phrases.
- With {shape['context']} positions it cannot use context longer than {shape['context']} tokens.
- Its figures are not comparable with published perplexities of real models (different text and tokenizer).
- The stories are synthetic and simple; nothing in them was checked for bias beyond what the generator writes.
"""


def course_model_card(for_display: bool = False) -> str:
    """The course model's card with the figures of the reference build (no training needed).

    ``for_display=True`` leaves out the YAML front matter (metadata for hubs) and lowers every
    heading by three levels, so that the card nests under a notebook subsection.
    """
    ref = course_model_reference()
    if not ref:
        raise CheckpointError(f"{_REFERENCE_FILE.name} is missing from the package; run "
                              f"`{REBUILD_COMMAND}` to build the course model and read its README.md.")
    card = model_card(ref)
    if not for_display:
        return card
    body = card.split("\n---\n", 1)[1].lstrip("\n")
    return re.sub(r"^(#+) ", lambda m: "###" + m.group(1) + " ", body, flags=re.MULTILINE)


def build_course_model(output: str | os.PathLike[str] | None = None, *, progress: bool = True,
                       verbose: bool = True) -> dict[str, Any]:
    """Train the course model from scratch and save it to ``output`` (default :func:`course_model_dir`).

    Deterministic for a given machine and thread count: seeded initialisation and batches. Writes
    safetensors weights, config, tokenizer, ``training.json`` and the model card ``README.md``;
    returns the measured figures (parameters, seconds, validation/test loss and perplexity).
    """
    target = Path(output) if output is not None else course_model_dir()
    tokenizer = data.course_tokenizer()
    config = course_model_config(tokenizer)
    if verbose:
        print(f"Building the course model ({COURSE_MODEL_NAME}) into {target}: "
              f"{COURSE_RECIPE.steps} steps of {COURSE_RECIPE.batch_size} x {COURSE_RECIPE.seq_len} tokens "
              f"on {torch.get_num_threads()} CPU thread(s), about 3 minutes.", flush=True)
    model = build_model(config, seed=COURSE_RECIPE.seed)
    start = time.perf_counter()
    history = train(model, "gpt2", tokenizer, COURSE_RECIPE, progress=progress, desc="course model")
    seconds = time.perf_counter() - start
    model.cpu()
    info: dict[str, Any] = {
        "name": COURSE_MODEL_NAME, "kind": "gpt2", "history": history, "seconds": seconds,
        "recipe": asdict(COURSE_RECIPE), "shape": dict(_COURSE_SHAPE), "corpus": data.CORPUS_VERSION,
        "n_params": count_parameters(model), "vocab_size": len(tokenizer),
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "window": DEFAULT_WINDOW, "stride": DEFAULT_STRIDE,
        "corpus_tokens": {s: len(_course_stream(tokenizer, s)) for s in data.SPLITS},
    }
    import transformers

    info["transformers"] = transformers.__version__
    for split in ("validation", "test"):
        p = perplexity(model, tokenizer, split=split, window=DEFAULT_WINDOW, stride=DEFAULT_STRIDE)
        info[f"{split}_loss"] = p.mean_nll
        info[f"{split}_perplexity"] = p.perplexity
    save_model(model, tokenizer, target, info=info, card=model_card(info))
    if verbose:
        print(f"Saved to {target} in {seconds:.0f} s of training: validation perplexity "
              f"{info['validation_perplexity']:.3f}, test perplexity {info['test_perplexity']:.3f}.",
              flush=True)
    return info


def course_model(path: str | os.PathLike[str] | None = None, *, rebuild: bool = False,
                 progress: bool = True) -> PreTrainedModel:
    """The course model: built on first use (about 3 minutes), loaded from the cache afterwards.

    ``path`` defaults to :func:`course_model_dir`. A cached copy is trusted only if its weights
    match the SHA-256 in its ``training.json``; otherwise :class:`CheckpointError` says how to
    rebuild it (``rebuild=True`` does it here). Loading goes through :func:`load_model`.
    """
    target = Path(path) if path is not None else course_model_dir()
    if rebuild or not target.exists():
        print(f"The course model is not cached yet at {target}; building it now (only once).", flush=True)
        build_course_model(target, progress=progress)
    _check_checkpoint(target)
    info = _read_training(target) if (target / _TRAINING_FILE).is_file() else {}
    if info.get("weights_sha256") and info["weights_sha256"] != _sha256_file(target / _WEIGHTS_FILE):
        raise CheckpointError(f"The weights at {target} do not match the checksum recorded when they "
                              f"were saved: the file is damaged. {_rebuild_hint(target)}")
    return load_model(target)


# ---------------------------------------------------------------------------------------------
# Exercises of chapter 1
# ---------------------------------------------------------------------------------------------

def _course_model_compute() -> float:
    ref = course_model_reference()
    n = ref.get("n_params", 0)
    return 6.0 * n * COURSE_RECIPE.tokens


#: Chapter 1, "Pretraining objectives".
chapter01 = SimpleNamespace(
    q1=Exercise(
        "A batch holds 2,000 ordinary (non-special) tokens. How many of them does BERT's recipe "
        "expect to replace by <mask>?",
        lambda: 2000 * 0.15 * 0.8,
        unit="tokens",
        hint="15% are selected; of those, 80% become <mask> (10% random, 10% kept).",
    ),
    q2=Exercise(
        "T5 corrupts a sequence of 100 tokens with noise density 0.15 and mean span length 3. How "
        "many sentinel tokens appear in the encoder's input?",
        lambda: float(objectives.span_counts(100)[1]),
        unit="sentinels",
        rel_tol=0,
        hint="noise tokens = round(0.15 x length); spans = round(noise / 3); one sentinel per span.",
    ),
    q3=Exercise(
        "A model that knows nothing spreads its probability evenly over the course tokenizer's "
        "4,096 tokens. What is its perplexity?",
        lambda: float(data.DEFAULT_VOCAB_SIZE),
        rel_tol=1e-6,
        hint="perplexity = exp(mean loss); a uniform guess over V tokens has loss ln V.",
    ),
    q4=Exercise(
        "Estimate the training compute of the course model with C = 6·N·D (N = all its parameters, "
        "D = training tokens, both printed in this chapter), in FLOPs.",
        _course_model_compute,
        unit="FLOPs",
        hint="D = steps x batch size x sequence length; multiply 6 x N x D.",
    ),
)
