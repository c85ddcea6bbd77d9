"""The course corpus and tokenizer, so that every notebook runs offline; token streams for training.

Pretraining needs text and a tokenizer. Downloading either from a hub makes a course fragile
(no network in a classroom, rate limits, data sets that move), so the course ships its own
(chapter 1, "Pretraining objectives"):

* a corpus of short stories written by :mod:`course_lib.text.stories` from a fixed seed, split once
  into train, validation and test by story;
* a byte-level BPE tokenizer trained on its training split, with the special tokens that the
  three pretraining objectives of chapter 1 need (``<pad>``, ``<mask>``, ``<s>``, ``</s>``,
  ``<unk>`` and the sentinels ``<extra_id_0>`` ... ``<extra_id_31>``);
* token streams: documents tokenized and joined by ``</s>``, the input of training and of
  perplexity.

``load_corpus`` also reads a local text file, or (only where the optional ``datasets`` package
is installed and the hub is reachable) a hub data set such as WikiText-2.

Sentinel order. As in T5, the sentinels sit at the very top of the vocabulary and count down:
``<extra_id_0>`` has the highest id (``len(tokenizer) - 1``), ``<extra_id_1>`` the next lower one,
and so on. ``sentinel_ids(tokenizer)`` returns them in the order extra_id_0, extra_id_1, ...
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from course_lib.base.env import cache_dir
from course_lib.text.stories import CORPUS_VERSION, DEFAULT_SEED, N_STORIES, generate_stories

if TYPE_CHECKING:  # imported lazily at run time: transformers is slow to import
    from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

__all__ = [
    "CORPUS_VERSION",
    "DEFAULT_VOCAB_SIZE",
    "N_SENTINELS",
    "SPECIAL_TOKENS",
    "SPLITS",
    "CorpusStats",
    "HubUnavailableError",
    "check_split",
    "corpus_stats",
    "course_stream",
    "course_tokenizer",
    "load_corpus",
    "sentinel_ids",
    "token_stream",
    "tokenizer_for",
    "train_tokenizer",
]

#: Names of the three splits, in order.
SPLITS = ("train", "validation", "test")
#: Default tokenizer size (sentinels included).
DEFAULT_VOCAB_SIZE = 4096
#: Number of T5-style sentinel tokens.
N_SENTINELS = 32
#: The non-sentinel special tokens, in id order (``<pad>`` is id 0).
SPECIAL_TOKENS = {"pad": "<pad>", "eos": "</s>", "unk": "<unk>", "bos": "<s>", "mask": "<mask>"}

_HUB_ALIASES: dict[str, tuple[str, str | None]] = {
    "wikitext-2-raw-v1": ("Salesforce/wikitext", "wikitext-2-raw-v1"),
    "wikitext-2-v1": ("Salesforce/wikitext", "wikitext-2-v1"),
    "wikitext-103-raw-v1": ("Salesforce/wikitext", "wikitext-103-raw-v1"),
    "wikitext": ("Salesforce/wikitext", "wikitext-2-raw-v1"),
    "salesforce/wikitext": ("Salesforce/wikitext", "wikitext-2-raw-v1"),
    "tinystories": ("roneneldan/TinyStories", None),
}


class HubUnavailableError(RuntimeError):
    """Raised when a hub data set cannot be loaded (offline, or ``datasets`` not installed).

    Chapter 1, *Pretraining objectives*.
    """



# ---------------------------------------------------------------------------------------------
# The course corpus: the generated stories, split by story
# ---------------------------------------------------------------------------------------------

def _split_of(index: int) -> str:
    """Story ``index`` goes to train (18 in 20), validation (1 in 20) or test (1 in 20)."""
    r = index % 20
    return "train" if r < 18 else ("validation" if r == 18 else "test")


@lru_cache(maxsize=4)
def _course_splits(seed: int = DEFAULT_SEED, n: int = N_STORIES) -> dict[str, tuple[str, ...]]:
    stories = generate_stories(n, seed)
    out: dict[str, list[str]] = {name: [] for name in SPLITS}
    for i, story in enumerate(stories):
        out[_split_of(i)].append(story)
    return {k: tuple(v) for k, v in out.items()}



# ---------------------------------------------------------------------------------------------
# Loading text: the course corpus, a local file, or a hub data set
# ---------------------------------------------------------------------------------------------

def check_split(split: str) -> None:
    """Raise a ValueError naming the valid splits unless ``split`` is one of them.

    Chapter 1, *Pretraining objectives*.
    """
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; use one of {', '.join(SPLITS)}.")


def _looks_like_path(source: str | os.PathLike[str]) -> bool:
    if isinstance(source, os.PathLike):
        return True
    s = str(source)
    return (
        s.lower().endswith((".txt", ".text", ".md"))
        or s.startswith(("/", "./", "../", "~", "\\"))
        or os.path.isfile(os.path.expanduser(s))
        or bool(re.match(r"^[A-Za-z]:[\\/]", s))
    )


def _split_local_text(text: str) -> dict[str, list[str]]:
    """Cut a text into documents (paragraphs, or lines if few) and then 90/5/5 in order."""
    docs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(docs) < 20:
        docs = [line.strip() for line in text.splitlines() if line.strip()]
    n = len(docs)
    if n < 3:
        raise ValueError(
            f"The text has only {n} non-empty line(s); at least 3 are needed to make train, "
            "validation and test splits. Use a longer file, or load_corpus('course')."
        )
    n_val = max(1, round(0.05 * n))
    n_test = max(1, round(0.05 * n))
    n_train = n - n_val - n_test
    return {
        "train": docs[:n_train],
        "validation": docs[n_train:n_train + n_val],
        "test": docs[n_train + n_val:],
    }


def _import_datasets() -> Any:
    """Import the optional ``datasets`` package, or return None if it is not installed."""
    try:
        return importlib.import_module("datasets")
    except ImportError:
        return None


def _hub_reachable(host: str = "huggingface.co", port: int = 443, timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection (and offline mode is not set)."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return False
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


_OFFLINE_HINT = (
    "Use the course's built-in corpus instead: load_corpus('course'), or pass the path of a "
    "local .txt file: load_corpus('my_text.txt')."
)


def _load_hub(name: str, split: str) -> list[str]:
    datasets = _import_datasets()
    if datasets is None:
        raise HubUnavailableError(
            f"Cannot load hub data set {name!r}: the optional 'datasets' package is not installed "
            f"(pip install datasets), and the hub may not be reachable anyway. {_OFFLINE_HINT}"
        )
    if not _hub_reachable():
        raise HubUnavailableError(
            f"Cannot load hub data set {name!r}: the Hugging Face hub is not reachable from this "
            f"machine (no network, or HF_HUB_OFFLINE is set). {_OFFLINE_HINT}"
        )
    path, config = _HUB_ALIASES.get(name.lower(), (name, None))
    try:
        ds = datasets.load_dataset(path, config, split=split)
    except Exception as err:  # noqa: BLE001 - any failure of the hub is reported the same way
        raise HubUnavailableError(
            f"Loading hub data set {name!r} ({path}, config {config}) failed: {err}. "
            f"{_OFFLINE_HINT}"
        ) from err
    column = "text" if "text" in ds.column_names else ds.column_names[0]
    return [t for t in ds[column] if isinstance(t, str) and t.strip()]


def load_corpus(source: str | os.PathLike[str] = "course", split: str = "train") -> list[str]:
    """Return one split of a corpus as a list of documents, from the course generator by default.

    ``source`` is ``"course"`` (the built-in stories, split 90/5/5 by story), a path to a local
    text file (split into paragraphs, or lines if it has fewer than 20 paragraphs, then the first
    90% train, next 5% validation, last 5% test), or any other string, taken as a hub data set
    name such as ``"wikitext-2-raw-v1"``; the latter needs the optional ``datasets`` package and
    network, and otherwise raises :class:`HubUnavailableError` naming the offline alternatives.

    Chapter 1, *Pretraining objectives*.
    """
    check_split(split)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a string or a path, got {type(source).__name__}.")
    if isinstance(source, str) and source.strip().lower() == "course":
        return list(_course_splits()[split])
    if _looks_like_path(source):
        path = Path(os.path.expanduser(os.fspath(source)))
        if not path.is_file():
            raise FileNotFoundError(
                f"No text file at {str(path)!r} (resolved to {str(path.resolve())!r}). Check the "
                "path, or use the built-in corpus with load_corpus('course')."
            )
        text = path.read_text(encoding="utf-8", errors="replace")
        return _split_local_text(text)[split]
    return _load_hub(str(source), split)


@dataclass(frozen=True)
class CorpusStats:
    """Size of a corpus per split, and one sample story.

    Chapter 1, *Pretraining objectives*.
    """

    version: str
    stories: dict[str, int]
    characters: dict[str, int]
    bytes: dict[str, int]
    sample: str

    @property
    def total_bytes(self) -> int:
        """Bytes of UTF-8 text over all splits (documents joined by blank lines)."""
        return sum(self.bytes.values())

    def __str__(self) -> str:
        rows = [f"{'split':<11}{'stories':>9}{'characters':>12}{'bytes':>11}"]
        for s in SPLITS:
            rows.append(f"{s:<11}{self.stories[s]:>9}{self.characters[s]:>12}{self.bytes[s]:>11}")
        return "\n".join(rows + [f"version {self.version}; sample: {self.sample}"])


def corpus_stats(source: str | os.PathLike[str] = "course") -> CorpusStats:
    """Count the stories, characters and UTF-8 bytes of each split, and pick a sample story.

    Chapter 1, *Pretraining objectives*.
    """
    per = {s: load_corpus(source, s) for s in SPLITS}
    texts = {s: "\n\n".join(docs) for s, docs in per.items()}
    version = CORPUS_VERSION if str(source).lower() == "course" else str(source)
    return CorpusStats(
        version=version,
        stories={s: len(per[s]) for s in SPLITS},
        characters={s: len(texts[s]) for s in SPLITS},
        bytes={s: len(texts[s].encode("utf-8")) for s in SPLITS},
        sample=per["train"][0] if per["train"] else "",
    )


# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------

def _sentinel_token(i: int) -> str:
    return f"<extra_id_{i}>"


def train_tokenizer(
    texts: Iterable[str] | None = None,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    n_sentinels: int = N_SENTINELS,
    min_frequency: int = 2,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer and wrap it as a transformers ``PreTrainedTokenizerFast``.

    Byte-level BPE starts from the 256 byte values, so any text round-trips and ``<unk>`` is never
    needed in practice; merges are learnt from ``texts`` (default: the course's training split).
    Ids: ``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2, ``<s>`` 3, ``<mask>`` 4, then the learnt tokens,
    then the sentinels at the top, T5 style: ``<extra_id_0>`` is ``vocab_size - 1`` and the ids
    count down. Encoding with ``add_special_tokens=True`` wraps a text as ``<s> ... </s>``.
    ``vocab_size`` counts everything (specials and sentinels included); if the texts do not have
    enough distinct pairs the tokenizer ends up smaller (the course corpus supports about 4,190).

    Chapter 1, *Pretraining objectives*.
    """
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    base = list(SPECIAL_TOKENS.values())
    if vocab_size < 256 + len(base) + n_sentinels + 1:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: a byte-level BPE needs 256 byte tokens plus "
            f"{len(base)} special tokens and {n_sentinels} sentinels; use at least "
            f"{256 + len(base) + n_sentinels + 1}."
        )
    if n_sentinels < 0:
        raise ValueError(f"n_sentinels must be >= 0, got {n_sentinels}.")
    if texts is None:
        texts = load_corpus("course", "train")
    tok = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk"]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - n_sentinels,
        min_frequency=min_frequency,
        special_tokens=base,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    # Sentinels are appended from the highest number down, so <extra_id_0> gets the top id.
    tok.add_special_tokens([AddedToken(_sentinel_token(i), special=True, normalized=False)
                            for i in reversed(range(n_sentinels))])
    bos, eos = SPECIAL_TOKENS["bos"], SPECIAL_TOKENS["eos"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} $B:1 {eos}:1",
        special_tokens=[(bos, tok.token_to_id(bos)), (eos, tok.token_to_id(eos))],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        unk_token=SPECIAL_TOKENS["unk"],
        pad_token=SPECIAL_TOKENS["pad"],
        mask_token=SPECIAL_TOKENS["mask"],
        additional_special_tokens=[_sentinel_token(i) for i in range(n_sentinels)],
        model_max_length=1024,
        padding_side="right",
        clean_up_tokenization_spaces=False,
    )


def course_tokenizer(
    vocab_size: int = DEFAULT_VOCAB_SIZE, use_cache: bool = True
) -> PreTrainedTokenizerBase:
    """Return the course tokenizer (trained on the course's training split), cached on disk.

    The first call trains it (a few seconds) and saves it with ``save_pretrained`` under
    ``cache_dir()/tokenizer-<CORPUS_VERSION>-<vocab_size>``; later calls load it from there with
    ``AutoTokenizer.from_pretrained``. ``use_cache=False`` always retrains and writes nothing.

    Chapter 1, *Pretraining objectives*.
    """
    if not use_cache:
        return train_tokenizer(vocab_size=vocab_size)
    from transformers import AutoTokenizer

    target = cache_dir() / f"tokenizer-{CORPUS_VERSION}-{vocab_size}"
    if (target / "tokenizer.json").is_file():
        try:
            return AutoTokenizer.from_pretrained(str(target))
        except Exception:  # noqa: BLE001 - a damaged cache is rebuilt below
            pass
    tokenizer = train_tokenizer(vocab_size=vocab_size)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    try:
        tokenizer.save_pretrained(str(tmp))
        if target.exists():
            import shutil

            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except OSError:
        pass  # an unwritable cache only costs a retrain next time
    return tokenizer


def tokenizer_for(kind: str, tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """A copy of the course tokenizer that adds the special tokens ``kind`` saw in training.

    Saved next to a model, it makes ``AutoTokenizer`` + ``pipeline`` behave as with a hub model:
    ``gpt2`` prepends ``</s>`` (every story in training follows one; nothing is appended, so
    ``generate`` continues the prompt instead of starting a new story), ``bert`` wraps the text as
    ``<s> ... </s>``, ``t5`` appends ``</s>``. ``<mask>`` and the sentinels absorb the space before
    them, as the hidden token's leading space did in training.

    Chapter 1, *Pretraining objectives*.
    """
    import copy

    from tokenizers import AddedToken, processors

    if kind not in ("bert", "gpt2", "t5"):
        raise ValueError(f"Unknown model kind {kind!r}; use one of bert, gpt2, t5.")
    bos, eos = SPECIAL_TOKENS["bos"], SPECIAL_TOKENS["eos"]
    single, pair = {
        "gpt2": (f"{eos} $A", f"{eos} $A {eos} $B:1"),
        "bert": (f"{bos} $A {eos}", f"{bos} $A {eos} $B:1 {eos}:1"),
        "t5": (f"$A {eos}", f"$A {eos} $B:1 {eos}:1"),
    }[kind]
    out = copy.deepcopy(tokenizer)
    names = ["input_ids", "attention_mask"]  # no token_type_ids: none of the kinds uses them
    out.model_input_names = names
    out.init_kwargs["model_input_names"] = names  # saved with the tokenizer (transformers 4.x too)
    backend = out.backend_tokenizer
    ids = {t: out.convert_tokens_to_ids(t) for t in (bos, eos)}
    backend.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=[(t, i) for t, i in ids.items() if t in single + pair])
    stripped = [SPECIAL_TOKENS["mask"]] + [_sentinel_token(i) for i in range(len(sentinel_ids(out)))]
    backend.add_special_tokens([AddedToken(t, lstrip=True, special=True, normalized=False)
                                for t in stripped])
    return out


def sentinel_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The ids of the sentinel tokens in the order ``<extra_id_0>``, ``<extra_id_1>``, ...

    Raises ``ValueError`` if the tokenizer has no ``<extra_id_0>``.

    Chapter 1, *Pretraining objectives*.
    """
    vocab = tokenizer.get_vocab()
    ids: list[int] = []
    while _sentinel_token(len(ids)) in vocab:
        ids.append(vocab[_sentinel_token(len(ids))])
    if not ids:
        raise ValueError(
            "The tokenizer has no sentinel tokens (<extra_id_0>, <extra_id_1>, ...), which span "
            "corruption needs. Use course_lib.text.data.course_tokenizer(), or add them with "
            "tokenizer.add_special_tokens({'additional_special_tokens': "
            "[f'<extra_id_{i}>' for i in range(32)]})."
        )
    return ids


# ---------------------------------------------------------------------------------------------
# Token streams
# ---------------------------------------------------------------------------------------------

def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """A hash of the tokenizer's vocabulary and special tokens (what decides its ids).

    Chapter 1, *Pretraining objectives*.
    """
    blob = json.dumps([sorted(tokenizer.get_vocab().items()), tokenizer.all_special_tokens])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def texts_fingerprint(texts: Sequence[str]) -> str:
    """A hash of a list of documents (their text and their boundaries).

    Chapter 1, *Pretraining objectives*.
    """
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def token_stream(texts: Sequence[str] | str, tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """Tokenize documents without special tokens and join them with one EOS token between each two.

    A single string counts as one document. Returns a 1-D ``torch.long`` tensor (shared by calls with
    the same texts and tokenizer: the last few streams are remembered, so do not modify it in place).

    Chapter 5, *Quantization*.
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise ValueError("No text to tokenize: pass at least one non-empty document.")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("The tokenizer has no EOS token to put between documents; set "
                         "tokenizer.eos_token, or use course_lib.text.data.course_tokenizer().")
    key = (tokenizer_fingerprint(tokenizer), texts_fingerprint(texts))
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


#: The layout of :func:`token_stream`'s ids; a change to it must change this, so that the
#: streams cached on disk are made again.
STREAM_FORMAT = "eos-between-documents-1"


def course_stream(tokenizer: PreTrainedTokenizerBase, split: str) -> torch.Tensor:
    """The token stream of one split of the course corpus (computed once per tokenizer).

    Generating the corpus and tokenizing it cost about a second, in every process that
    needs it (each rank of every launch): the stream is kept on disk too, under
    ``cache_dir()/streams``, named by a hash of the tokenizer's whole definition, the
    corpus's version (:data:`CORPUS_VERSION`, to which the tests pin the corpus's bytes, as
    the trained models are keyed by it), the split and :data:`STREAM_FORMAT`, so that a
    change to one of them makes it again. A damaged or unwritable cache costs only the work.

    Chapter 1, *Pretraining objectives*.
    """
    key = (tokenizer_fingerprint(tokenizer) + CORPUS_VERSION, split)
    if key not in _STREAMS:
        check_split(split)
        backend = getattr(tokenizer, "backend_tokenizer", None)
        definition = backend.to_str() if backend is not None else key[0]
        digest = hashlib.sha256("\0".join(
            (definition, CORPUS_VERSION, split, STREAM_FORMAT)).encode()).hexdigest()
        path = cache_dir() / "streams" / f"{split}-{digest[:24]}.npy"
        stream = _load_stream(path)
        if stream is None:
            stream = token_stream(load_corpus("course", split), tokenizer)
            _save_stream(path, stream)
        _STREAMS[key] = stream
    return _STREAMS[key]


def _load_stream(path: Path) -> torch.Tensor | None:
    import numpy as np

    try:
        return torch.from_numpy(np.load(path, allow_pickle=False).astype(np.int64))
    except (OSError, ValueError, EOFError):
        return None


def _save_stream(path: Path, stream: torch.Tensor) -> None:
    import numpy as np

    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.npy")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(tmp, stream.numpy().astype(np.int32), allow_pickle=False)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def too_short_error(n_tokens: int, window: int, what: str) -> ValueError:
    """The error for a text shorter than one window, naming both fixes.

    Chapter 1, *Pretraining objectives*.
    """
    return ValueError(
        f"The text has {n_tokens} tokens, fewer than one {what} of {window} tokens. Use a longer "
        f"text (e.g. the course corpus: load_corpus('course', 'test')) or a smaller "
        f"{'window' if what == 'window' else 'seq_len'} (at most {max(n_tokens, 1)})."
    )
