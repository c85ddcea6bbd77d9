"""Tiny transformers of the course: configs, building, counting, saving and loading.

Chapter 1 ("Pretraining objectives") builds one tiny model per pretraining objective from real
``transformers`` configs:

========== ============================== =================================
kind       class                          objective
========== ============================== =================================
``bert``   ``BertForMaskedLM``            masked LM (15%, 80/10/10)
``gpt2``   ``GPT2LMHeadModel``            causal LM (next token)
``t5``     ``T5ForConditionalGeneration`` span corruption (sentinels)
========== ============================== =================================

:func:`tiny_config` is the course's one tiny-model builder (chapter 2 measures memory on it,
chapter 5 quantizes a model built from it). :func:`save_model` writes safetensors, config,
tokenizer and a record of training; :func:`load_model` is the one loader: a local directory or,
when the hub is reachable, a hub id such as ``gpt2``, both through
``AutoModelForCausalLM.from_pretrained`` (never with remote code). Training lives in
:mod:`course_lib.text.training`, evaluation in :mod:`course_lib.text.evaluation`.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from course_lib.base import env
from course_lib.text import data

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "ARCHITECTURES", "COURSE_MODEL_NAME", "REBUILD_COMMAND", "KINDS", "Architecture",
    "CheckpointError", "ModelUnavailableError", "WRITTEN_BY", "blocks", "build_model",
    "check_checkpoint", "check_kind", "check_output_dir", "count_parameters", "course_model_dir",
    "course_record", "load_model",
    "model_class", "read_training", "rebuild_hint", "save_model", "sha256_file", "tiny_config",
]

#: The three model kinds of chapter 1.
KINDS = ("bert", "gpt2", "t5")
WEIGHTS_FILE = "model.safetensors"
TRAINING_FILE = "training.json"


class CheckpointError(ValueError):
    """A model checkpoint is missing or unreadable; the message says how to rebuild it.

    Chapter 1, *Pretraining objectives*.
    """


class ModelUnavailableError(data.HubUnavailableError, ValueError):
    """A hub model was asked for while the hub cannot be reached; the message names the offline model.

    Chapter 1, *Pretraining objectives*.
    """


# --- The three architectures ------------------------------------------------------------------

@dataclass(frozen=True)
class Architecture:
    """One transformer family of chapter 1: its transformers class, objective and uses.

    Chapter 1, *Pretraining objectives*.
    """

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


def check_kind(kind: str) -> str:
    """The canonical kind (bert, gpt2, t5) for ``kind`` or an alias such as "decoder-only".

    Chapter 1, *Pretraining objectives*.
    """
    key = str(kind).strip().lower()
    aliases = {"encoder": "bert", "encoder-only": "bert", "decoder": "gpt2",
               "decoder-only": "gpt2", "encoder-decoder": "t5", "seq2seq": "t5"}
    key = aliases.get(key, key)
    if key not in KINDS:
        raise ValueError(f"Unknown model kind {kind!r}; use one of {', '.join(KINDS)} "
                         "(encoder-only, decoder-only, encoder-decoder).")
    return key


# --- Configs and models ----------------------------------------------------------------------

def tiny_config(
    kind: str,
    tokenizer: PreTrainedTokenizerBase | None = None,
    *,
    hidden: int = 128,
    layers: int = 2,
    heads: int = 4,
    context: int = 64,
    vocab: int | None = None,
    dropout: float = 0.0,
    activation: str | None = None,
    attention: str | None = None,
) -> PretrainedConfig:
    """A small transformers config of ``kind`` sized from the tokenizer's vocabulary.

    ``hidden`` is the model width (feed-forward width 4 x hidden), ``layers`` the number of
    blocks (for T5: encoder blocks, and as many decoder blocks), ``heads`` the attention heads,
    ``context`` the longest sequence (positions of BERT and GPT-2), ``vocab`` the vocabulary size
    (default: the tokenizer's). Dropout is off unless ``dropout`` is given: the tiny models see
    each token about once, so there is nothing to regularise, and training stays deterministic.
    ``activation`` overrides the feed-forward activation (e.g. exact "gelu" for GPT-2, as chapter 2
    measures); ``attention="eager"`` materialises every attention matrix (what chapter 2's
    activation formula counts). The special-token ids come from the tokenizer (default: the course
    tokenizer).

    Chapter 1, *Pretraining objectives*.
    """
    kind = check_kind(kind)
    for name, value in (("hidden", hidden), ("layers", layers), ("heads", heads),
                        ("context", context)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}.")
    if hidden % heads:
        raise ValueError(f"hidden={hidden} must be divisible by heads={heads} "
                         f"(try heads={math.gcd(hidden, heads)} or hidden={heads * (hidden // heads + 1)}).")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}.")
    tok = tokenizer if tokenizer is not None else data.course_tokenizer()
    pad, eos = tok.pad_token_id, tok.eos_token_id
    if vocab is None:
        vocab = len(tok)
    elif not isinstance(vocab, int) or vocab <= max(pad, eos):
        raise ValueError(f"vocab must be a whole number above the special-token ids, got {vocab!r}.")
    bos = tok.bos_token_id if tok.bos_token_id is not None else eos
    if kind == "bert":
        from transformers import BertConfig

        config = BertConfig(
            vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=heads, intermediate_size=4 * hidden,
            max_position_embeddings=context, type_vocab_size=1, pad_token_id=pad,
            hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
            **({"hidden_act": activation} if activation else {}),
        )
    elif kind == "gpt2":
        from transformers import GPT2Config

        config = GPT2Config(
            vocab_size=vocab, n_positions=context, n_embd=hidden, n_layer=layers, n_head=heads,
            resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
            bos_token_id=bos, eos_token_id=eos, pad_token_id=pad,
            **({"activation_function": activation} if activation else {}),
        )
    else:
        from transformers import T5Config

        config = T5Config(
            vocab_size=vocab, d_model=hidden, d_kv=hidden // heads, d_ff=4 * hidden,
            num_layers=layers, num_decoder_layers=layers, num_heads=heads,
            relative_attention_num_buckets=16, relative_attention_max_distance=context,
            dropout_rate=dropout, pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
            **({"feed_forward_proj": activation} if activation else {}),
        )
    if attention is not None:
        config._attn_implementation = attention
    return config


def kind_of_config(config: PretrainedConfig) -> str:
    """The course kind (bert, gpt2, t5) of a transformers config.

    Chapter 1, *Pretraining objectives*.
    """
    kinds = {"bert": "bert", "gpt2": "gpt2", "t5": "t5"}
    if config.model_type not in kinds:
        raise ValueError(f"Config of model type {config.model_type!r} is not one of the course's "
                         f"kinds ({', '.join(KINDS)}); build one with tiny_config().")
    return kinds[config.model_type]


def model_class(kind: str) -> Any:
    """The transformers class that implements ``kind``.

    Chapter 1, *Pretraining objectives*.
    """
    import transformers

    return getattr(transformers, ARCHITECTURES[check_kind(kind)].model_class)


def name_loss(model: PreTrainedModel) -> PreTrainedModel:
    """Name the loss of models whose class name transformers cannot map (GPT-2), to skip a warning.

    Chapter 1, *Pretraining objectives*.
    """
    if getattr(model, "loss_type", None) is None and hasattr(model, "loss_type"):
        model.loss_type = "ForCausalLM"
    return model


def blocks(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The model's transformer blocks: GPT-2's ``transformer.h``, or the first list of layers.

    Chapter 1, *Pretraining objectives*.
    """
    from transformers.pytorch_utils import Conv1D

    linear = (torch.nn.Linear, Conv1D)
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) and all(
                any(isinstance(m, linear) for m in block.modules()) for block in module):
            return module
    raise ValueError(f"{type(model).__name__} has no transformer blocks with linear layers "
                     "(a GPT-2 style model keeps them in model.transformer.h)")


def build_model(config: PretrainedConfig, seed: int = 0) -> PreTrainedModel:
    """A freshly initialised model for ``config``, seeded so that the same seed gives the same weights.

    Chapter 1, *Pretraining objectives*.
    """
    kind = kind_of_config(config)
    torch.manual_seed(seed)
    return name_loss(model_class(kind)(config))


def count_parameters(model: torch.nn.Module, *, embeddings: bool = True) -> int:
    """Number of distinct parameters (tied weights counted once); ``embeddings=False`` leaves out
    the token and position embeddings, the "non-embedding" count of Kaplan et al. (2020).

    Chapter 5, *Quantization*.
    """
    skip = set() if embeddings else {
        id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    distinct = {id(p): p for p in model.parameters() if id(p) not in skip}
    return sum(p.numel() for p in distinct.values())


# --- Saving and loading: local checkpoints and hub ids ---------------------------------------

@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars and info messages while saving or loading.

    Chapter 1, *Pretraining objectives*.
    """
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


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file, read in blocks.

    Chapter 1, *Pretraining objectives*.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


#: Files a checkpoint written by :func:`save_model` may hold (``save_pretrained``, record, card).
CHECKPOINT_FILES = frozenset({
    "config.json", "generation_config.json", WEIGHTS_FILE, "model.safetensors.index.json",
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.json", "merges.txt", "chat_template.jinja", "chat_template.json"})
_SHARD = re.compile(r"^model-\d{5}-of-\d{5}\.safetensors$")
#: What :func:`save_model` writes into every ``training.json``: the mark of a course model.
WRITTEN_BY = "course_lib.text.models.save_model"


def course_record(directory: Path) -> dict[str, Any] | None:
    """The ``training.json`` that :func:`save_model` wrote in ``directory``, else None: one that
    names :data:`WRITTEN_BY` (or, written before that mark, the weights' SHA-256 and the files).

    Chapter 1, *Pretraining objectives*.
    """
    try:
        record = json.loads((directory / TRAINING_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ours = isinstance(record, dict) and isinstance(record.get("files"), list) and (
        record.get("written_by") == WRITTEN_BY or isinstance(record.get("weights_sha256"), str))
    return record if ours else None


def _foreign_files(directory: Path) -> list[str]:
    """Entries of ``directory`` that :func:`save_model` did not write (a card or a
    ``training.json`` are the course's only if its record lists them)."""
    record = course_record(directory)
    recorded = set(record["files"]) if record else set()
    return sorted(p.name for p in directory.iterdir() if p.is_symlink() or not p.is_file()
                  or not (p.name in CHECKPOINT_FILES or p.name in recorded or _SHARD.match(p.name)))


def _what_is_at(target: Path) -> str:
    """Nothing, empty, course model (maybe damaged; anything at its place in the cache),
    checkpoint (model files, no course record), file or foreign (other files) at ``target``."""
    if not target.exists():
        return "nothing"
    cached = target == course_model_dir().expanduser().resolve()  # the course's own place
    if not target.is_dir():
        return "course model" if cached else "file"
    foreign = set(_foreign_files(target))
    if foreign and not (cached and foreign <= {TRAINING_FILE, "README.md"}):
        return "foreign"
    if not any(target.iterdir()):
        return "empty"
    return "course model" if cached or course_record(target) else "checkpoint"


def check_output_dir(directory: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """The absolute place to write a model, checked before any training; :class:`CheckpointError` else.

    Fine: a new or empty directory, a course model (even a damaged one); with ``overwrite``, model
    files without ``training.json``. Refused: any other file, the cache, the current directory, a
    folder that holds either, a place whose parent cannot be written.

    Chapter 1, *Pretraining objectives*.
    """
    target = Path(directory).expanduser().resolve()
    cache = env.cache_dir().expanduser().resolve()
    new_dir = "Choose a new or empty directory for --output"
    if target.is_relative_to(cache) and target != cache:
        env.check_cache()
    if cache.is_relative_to(target):
        raise CheckpointError(f"{target} {'is' if cache == target else 'holds'} the course cache: writing "
                              f"a model there would delete the cached models. {new_dir}, or leave it "
                              f"out to use {course_model_dir()}.")
    if Path.cwd().resolve().is_relative_to(target):
        raise CheckpointError(f"{target} is the current directory or holds it: writing a model there "
                              f"would delete what it holds. {new_dir}, e.g. --output course-model.")
    kind = _what_is_at(target)
    if kind == "file":
        raise CheckpointError(f"{target} is a file, not a directory. {new_dir}.")
    if kind == "foreign":
        names = _foreign_files(target)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        never = " (--overwrite replaces only a model, never other files)" if overwrite else ""
        raise CheckpointError(f"{target} holds files that are not part of a model ({shown}); "
                              f"writing the model there would delete them. {new_dir}{never}.")
    if kind == "checkpoint" and not overwrite:
        raise CheckpointError(f"{target} holds a model that is not a course model (no {TRAINING_FILE}). "
                              f"{new_dir}, or add --overwrite (overwrite=True in Python) to replace it.")
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        why = "is a file" if not parent.is_dir() else "is not writable"
        raise CheckpointError(f"Cannot write {target}: {parent} {why}. Choose a directory for --output "
                              "in a folder you can write to.")
    return target


def _sibling(target: Path, tag: str) -> Path:
    """A name beside ``target`` that nothing uses yet: ``<name>.<tag><pid>-<n>``."""
    names = (target.with_name(f"{target.name}.{tag}{os.getpid()}-{n}") for n in itertools.count())
    return next(path for path in names if not path.exists() and not path.is_symlink())


def _remove_checkpoint(old: Path, ours: frozenset[str] = frozenset()) -> None:
    """Delete a replaced checkpoint: only its model files (and ``ours``), then the folder."""
    if not old.is_dir():
        old.unlink()
        return
    foreign = sorted(set(_foreign_files(old)) - ours)
    for path in old.iterdir():
        if path.name not in foreign:
            path.unlink()
    if foreign:  # they appeared while the model was written: never delete them
        warnings.warn(f"Kept {old}: it now holds {', '.join(foreign)}.", stacklevel=3)
    else:
        old.rmdir()


def save_model(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    directory: str | os.PathLike[str],
    *,
    info: dict[str, Any] | None = None,
    card: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Save model (safetensors), config, tokenizer, ``training.json`` and an optional model card.

    ``directory`` is checked with :func:`check_output_dir` (``overwrite`` as there), then written
    beside it and swapped in with renames: a crash leaves the old checkpoint or none, never half of
    one, and no temporary folder. ``training.json`` records ``info``, the files written and the
    SHA-256 of the weights, which :func:`course_model` checks before trusting a cached copy.

    Chapter 1, *Pretraining objectives*.
    """
    target = check_output_dir(directory, overwrite=overwrite)
    if data.SPECIAL_TOKENS["mask"] in tokenizer.get_vocab() and "<extra_id_0>" in tokenizer.get_vocab():
        # The course tokenizer: save the variant that adds what this kind saw in training.
        tokenizer = data.tokenizer_for(kind_of_config(model.config), tokenizer)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(target, "tmp")
    tmp.mkdir()
    try:
        with quiet_transformers():
            model.save_pretrained(str(tmp), safe_serialization=True)
            tokenizer.save_pretrained(str(tmp))
        weights = tmp / WEIGHTS_FILE
        if not weights.is_file():
            raise RuntimeError(f"save_pretrained wrote no {WEIGHTS_FILE}: pip install safetensors")
        if card is not None:
            (tmp / "README.md").write_text(card, encoding="utf-8")
        record = {**(info or {}), "written_by": WRITTEN_BY}
        record["weights_sha256"] = sha256_file(weights)
        record["files"] = sorted({p.name for p in tmp.iterdir()} | {TRAINING_FILE})
        (tmp / TRAINING_FILE).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
        old = _sibling(target, "old") if _what_is_at(target) != "nothing" else None
        if old is not None:
            check_output_dir(target, overwrite=overwrite)  # again: files may have appeared meanwhile
            os.replace(target, old)
        try:
            os.replace(tmp, target)
        except BaseException:
            if old is not None:
                os.replace(old, target)
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if old is not None:  # the cache's course model: its damaged record and card are its own
        cached = target == course_model_dir().expanduser().resolve()
        _remove_checkpoint(old, frozenset({TRAINING_FILE, "README.md"}) if cached else frozenset())
    return Path(directory)


def read_training(directory: Path) -> dict[str, Any]:
    """The ``training.json`` record saved next to a checkpoint.

    Chapter 1, *Pretraining objectives*.
    """
    path = directory / TRAINING_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path} is missing or unreadable ({err}).") from None
    if not isinstance(record, dict):
        raise CheckpointError(f"{path} is damaged: it holds no record of training.")
    return record


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")


def _is_hub_id(name: str) -> bool:
    return (bool(_HUB_ID.match(name)) and not name.startswith((".", "~"))
            and not name.endswith((".json", ".safetensors", ".bin")))


#: Name (and cache directory) of the course model; bump the suffix when its recipe changes.
COURSE_MODEL_NAME = "course-model-v1"
#: The command that (re)builds the course model.
REBUILD_COMMAND = "python -m course_lib train-course-model"


def course_model_dir() -> Path:
    """Where the course model is cached: ``cache_dir()/course-model-v1``.

    Chapter 1, *Pretraining objectives*.
    """
    return env.cache_dir() / COURSE_MODEL_NAME


def rebuild_hint(directory: Path) -> str:
    """How to rebuild the checkpoint at ``directory``: a command that works on what is there now.

    Chapter 1, *Pretraining objectives*.
    """
    try:
        path = check_output_dir(directory, overwrite=True)
    except env.CacheError as err:
        return str(err)
    except CheckpointError:
        return (f"Nothing is written over {directory} (not a course model's directory): build the course "
                f"model in a new one with `{REBUILD_COMMAND} --output NEW_DIR` (about 3 minutes on 2 CPU "
                "cores) and load it with course_lib.text.course_model.course_model('NEW_DIR').")
    default = path == course_model_dir().expanduser().resolve()
    overwrite = _what_is_at(path) == "checkpoint"
    where = ("" if default else f" --output {directory}") + (" --overwrite" if overwrite else "")
    args = ("" if default else f"{str(directory)!r}, ") + ("overwrite=True" if overwrite else "rebuild=True")
    call = f"build_course_model({args})" if overwrite else f"course_model({args})"
    return (f"Rebuild it with `{REBUILD_COMMAND}{where}` (about 3 minutes on 2 CPU cores), "
            f"or from Python with course_lib.text.course_model.{call}.")


def check_checkpoint(directory: Path) -> None:
    """Raise :class:`CheckpointError` with the fix unless ``directory`` holds config and weights.

    Chapter 1, *Pretraining objectives*.
    """
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"{str(directory)!r} is a file, not a model directory. "
                              f"{rebuild_hint(directory)}")
    if not directory.is_dir():
        raise CheckpointError(
            f"No model checkpoint at {str(directory)!r}. Build the course model there with "
            f"`python -m course_lib train-course-model --output {directory}`, or pass a directory written by "
            "save_pretrained (config.json + model.safetensors).")
    missing = [f for f in ("config.json", WEIGHTS_FILE) if not (directory / f).is_file()]
    if missing:
        raise CheckpointError(f"The checkpoint at {str(directory)!r} is incomplete: "
                              f"{', '.join(missing)} missing. {rebuild_hint(directory)}")


def load_model(name_or_path: str | os.PathLike[str]) -> PreTrainedModel:
    """Load a causal LM from a local directory or, when the hub is reachable, from a hub id.

    Both go through ``AutoModelForCausalLM.from_pretrained`` (never ``trust_remote_code``): a
    directory written by ``save_pretrained`` (the course model's, for example) is read with
    ``local_files_only=True``; a hub id such as ``"gpt2"`` or ``"facebook/opt-125m"`` is
    downloaded only when ``course_lib.base.env.is_online()``. Offline, a hub id raises
    :class:`ModelUnavailableError` naming the offline alternative, the course model. A missing or
    damaged checkpoint raises :class:`CheckpointError` with the rebuild command.

    Chapter 1, *Pretraining objectives*.
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
                f"course_lib.text.course_model.course_model() (built on first use; or `python -m course_lib train-course-model`), "
                f"or load_model(<a local directory>).")
        with quiet_transformers():
            return name_loss(AutoModelForCausalLM.from_pretrained(text, trust_remote_code=False))
    check_checkpoint(path)
    try:
        with quiet_transformers():
            model = AutoModelForCausalLM.from_pretrained(
                str(path), local_files_only=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - reported with the fix, not a deep traceback
        raise CheckpointError(
            f"The checkpoint at {str(path)!r} could not be read ({type(err).__name__}: "
            f"{str(err)[:200]}). It is probably damaged. {rebuild_hint(path)}") from None
    return name_loss(model).eval()
