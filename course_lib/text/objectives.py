"""The three pretraining objectives of chapter 1, written as batch builders you can read.

Every objective turns the same raw token sequences into a different (input, target) pair:

* **Masked LM** (BERT, encoder-only): pick about 15% of the ordinary tokens; of those, 80% become
  ``<mask>``, 10% a random ordinary token and 10% stay as they are; the model predicts the
  original token at the picked positions only (labels are -100 everywhere else).
* **Causal LM** (GPT, decoder-only): the labels are the inputs themselves; transformers' causal
  models shift them by one inside ``forward``, so position *t* is trained to predict token *t+1*.
  Padding gets the label -100, which the loss ignores.
* **Span corruption** (T5, encoder-decoder): about 15% of the tokens, in spans of mean length 3,
  are cut out of the input and each span is replaced by one sentinel (``<extra_id_0>``,
  ``<extra_id_1>``, ... in order); the target lists each sentinel followed by the tokens it hid.
  As in T5, both the input and the target end with ``</s>``.

Each builder returns a dict of ``torch`` tensors (``input_ids``, ``attention_mask``, ``labels``)
and accepts a ``torch.Generator`` (or an int seed) for reproducible randomness. Chapter 1 shows
their batches token by token with :mod:`course_lib.chapters.ch01`'s ``show_*`` views.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

import torch

from course_lib.text.data import sentinel_ids

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "IGNORE_INDEX",
    "causal_lm_batch",
    "context_free_loss",
    "mask_tokens",
    "mask_with_draws",
    "masked_lm_batch",
    "objective_batch",
    "random_spans_noise_mask",
    "reconstruct_from_spans",
    "span_corruption_batch",
    "span_counts",
]

#: Label value that transformers' losses ignore.
IGNORE_INDEX = -100

#: What the builders accept: texts, lists of token ids, a 2-D tensor padded with the pad id,
#: or a mapping with ``input_ids`` (and optionally ``attention_mask``), e.g. a tokenizer's output.
Examples = Union[Sequence[str], Sequence[Sequence[int]], torch.Tensor, Mapping[str, Any]]
GeneratorLike = Union[torch.Generator, int, None]


# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------

def _generator(generator: GeneratorLike) -> torch.Generator | None:
    if generator is None or isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, int):
        g = torch.Generator()
        g.manual_seed(generator)
        return g
    raise TypeError(
        "generator must be a torch.Generator, an int seed or None, "
        f"got {type(generator).__name__}."
    )


def _check_probability(name: str, p: float, *, open_interval: bool = True) -> None:
    ok = (0.0 < p < 1.0) if open_interval else (0.0 <= p <= 1.0)
    if not ok:
        interval = "strictly between 0 and 1" if open_interval else "between 0 and 1"
        raise ValueError(
            f"{name} must be {interval}, got {p!r}. Pass a fraction such as 0.15 (15%), not a "
            "percentage."
        )


def _pad_id(tokenizer: PreTrainedTokenizerBase) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        raise ValueError(
            "The tokenizer has no padding token, which is needed to batch sequences of different "
            "lengths. Set one, e.g. tokenizer.pad_token = tokenizer.eos_token, or use "
            "course_lib.text.data.course_tokenizer()."
        )
    return int(pad)


def _sequences(
    examples: Examples,
    tokenizer: PreTrainedTokenizerBase,
    *,
    add_special_tokens: bool,
    max_length: int | None,
) -> list[list[int]]:
    """Turn any accepted input into a list of unpadded token-id lists."""
    if isinstance(examples, Mapping):
        if "input_ids" not in examples:
            raise ValueError("A mapping passed as examples needs an 'input_ids' entry.")
        ids = examples["input_ids"]
        mask = examples.get("attention_mask")
        rows = ids.tolist() if isinstance(ids, torch.Tensor) else [list(r) for r in ids]
        if mask is None:
            masks = [[1] * len(r) for r in rows]
        else:
            masks = mask.tolist() if isinstance(mask, torch.Tensor) else [list(m) for m in mask]
        seqs = [[t for t, m in zip(r, mr) if m] for r, mr in zip(rows, masks)]
    elif isinstance(examples, torch.Tensor):
        if examples.dim() != 2:
            raise ValueError(
                "A tensor of examples must be 2-D (batch, length), got shape "
                f"{tuple(examples.shape)}."
            )
        pad = _pad_id(tokenizer)
        seqs = [[t for t in row if t != pad] for row in examples.tolist()]
    elif isinstance(examples, (str, bytes)):
        raise ValueError("Pass a list of texts, not a single string: e.g. [text] instead of text.")
    else:
        examples = list(examples)
        if examples and all(isinstance(e, str) for e in examples):
            enc = tokenizer(list(examples), add_special_tokens=add_special_tokens,
                            truncation=max_length is not None, max_length=max_length)
            seqs = [list(r) for r in enc["input_ids"]]
        else:
            seqs = [[int(t) for t in e] for e in examples]
    if not seqs:
        raise ValueError("The batch is empty: pass at least one text or token sequence.")
    if max_length is not None:
        if max_length < 1:
            raise ValueError(f"max_length must be a positive number of tokens, got {max_length}.")
        seqs = [s[:max_length] for s in seqs]
    return seqs


def _pad(seqs: Sequence[Sequence[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad ``seqs`` to the longest one; return (ids, attention mask)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), max(width, 1)), value, dtype=torch.long)
    mask = torch.zeros((len(seqs), max(width, 1)), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, : len(s)] = torch.tensor(list(s), dtype=torch.long)
            mask[i, : len(s)] = 1
    return ids, mask


def _special_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    return sorted({int(i) for i in tokenizer.all_special_ids})


# ---------------------------------------------------------------------------------------------
# Masked LM
# ---------------------------------------------------------------------------------------------

def mask_tokens(
    input_ids: torch.Tensor,
    tokenizer: PreTrainedTokenizerBase,
    *,
    mlm_probability: float = 0.15,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    special_tokens_mask: torch.Tensor | None = None,
    generator: GeneratorLike = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply BERT's masking to a padded id tensor: select, then mask / randomise / keep.

    Each non-special token is selected independently with probability ``mlm_probability``
    (a Bernoulli draw per token, as in transformers' ``DataCollatorForLanguageModeling``). A
    selected token becomes ``<mask>`` with probability ``mask_replace_prob``, a random token drawn
    uniformly from the non-special vocabulary with probability ``random_replace_prob``, and stays
    unchanged otherwise. Special tokens (padding included) are never selected. Returns the new
    inputs and the labels (the original id at selected positions, -100 elsewhere).

    Chapter 1, *Pretraining objectives*.
    """
    _check_probability("mlm_probability", mlm_probability)
    _check_probability("mask_replace_prob", mask_replace_prob, open_interval=False)
    _check_probability("random_replace_prob", random_replace_prob, open_interval=False)
    if mask_replace_prob + random_replace_prob > 1.0 + 1e-9:
        raise ValueError(
            f"mask_replace_prob + random_replace_prob must be at most 1, got "
            f"{mask_replace_prob} + {random_replace_prob}. The rest is the share kept unchanged."
        )
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise ValueError(
            "The tokenizer has no mask token, which masked language modelling needs. Add one "
            "with tokenizer.add_special_tokens({'mask_token': '<mask>'}) (and resize the model's "
            "embeddings), or use course_lib.text.data.course_tokenizer()."
        )
    if input_ids.dim() != 2:
        raise ValueError(
            f"input_ids must be 2-D (batch, length), got shape {tuple(input_ids.shape)}."
        )
    if input_ids.numel() == 0:
        raise ValueError("The batch is empty: pass at least one non-empty token sequence.")
    g = _generator(generator)
    specials = _special_ids(tokenizer)
    if special_tokens_mask is None:
        special_tokens_mask = torch.isin(input_ids, torch.tensor(specials, dtype=input_ids.dtype))
    special_tokens_mask = special_tokens_mask.bool()

    select = torch.rand(input_ids.shape, generator=g)
    action = torch.rand(input_ids.shape, generator=g)
    ordinary = torch.tensor(
        sorted(set(range(len(tokenizer))) - set(specials)), dtype=torch.long
    )
    random_ids = ordinary[torch.randint(len(ordinary), input_ids.shape, generator=g)]
    return mask_with_draws(input_ids, special_tokens_mask, select, action, random_ids, int(mask_id),
                           mlm_probability=mlm_probability, mask_replace_prob=mask_replace_prob,
                           random_replace_prob=random_replace_prob)


def mask_with_draws(
    input_ids: torch.Tensor,
    special: torch.Tensor,
    select: torch.Tensor,
    action: torch.Tensor,
    random_ids: torch.Tensor,
    mask_id: int,
    *,
    mlm_probability: float = 0.15,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking rule on given uniform draws: select where ``select < p``, then mask / randomise / keep by ``action``.

    The core of :func:`mask_tokens`, which draws ``select``, ``action`` and ``random_ids`` from its
    generator; special tokens are never selected. Returns the new inputs and the labels.

    Chapter 1, *Pretraining objectives*.
    """
    selected = (select < mlm_probability) & ~special.bool()
    to_mask = selected & (action < mask_replace_prob)
    to_random = (
        selected & (action >= mask_replace_prob)
        & (action < mask_replace_prob + random_replace_prob)
    )
    inputs = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    inputs = torch.where(to_random, random_ids.to(input_ids.dtype), inputs)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return inputs, labels


def masked_lm_batch(
    examples: Examples,
    tokenizer: PreTrainedTokenizerBase,
    *,
    mlm_probability: float = 0.15,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    max_length: int | None = None,
    generator: GeneratorLike = None,
) -> dict[str, torch.Tensor]:
    """Build a BERT-style masked-LM batch: ``input_ids`` with masks, ``attention_mask``, ``labels``.

    Texts are tokenized with the tokenizer's special tokens (``<s> ... </s>``), truncated to
    ``max_length`` if given and right-padded; then :func:`mask_tokens` picks ~15% of the ordinary
    tokens to predict.

    Chapter 1, *Pretraining objectives*.
    """
    seqs = _sequences(examples, tokenizer, add_special_tokens=True, max_length=max_length)
    ids, attention = _pad(seqs, _pad_id(tokenizer))
    special_ids = torch.tensor(_special_ids(tokenizer), dtype=ids.dtype)
    specials = torch.isin(ids, special_ids) | (attention == 0)
    inputs, labels = mask_tokens(
        ids, tokenizer, mlm_probability=mlm_probability, mask_replace_prob=mask_replace_prob,
        random_replace_prob=random_replace_prob, special_tokens_mask=specials, generator=generator,
    )
    return {"input_ids": inputs, "attention_mask": attention, "labels": labels}


# ---------------------------------------------------------------------------------------------
# Causal LM
# ---------------------------------------------------------------------------------------------

def causal_lm_batch(
    examples: Examples, tokenizer: PreTrainedTokenizerBase, *, max_length: int | None = None
) -> dict[str, torch.Tensor]:
    """Build a GPT-style causal-LM batch: the labels are the inputs, with padding set to -100.

    No shift happens here: transformers' ``*ForCausalLM`` models compare the logits at position
    *t* with the label at *t+1* inside ``forward``. Nothing is random.

    Chapter 1, *Pretraining objectives*.
    """
    seqs = _sequences(examples, tokenizer, add_special_tokens=True, max_length=max_length)
    ids, attention = _pad(seqs, _pad_id(tokenizer))
    labels = ids.masked_fill(attention == 0, IGNORE_INDEX)
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


# ---------------------------------------------------------------------------------------------
# Span corruption
# ---------------------------------------------------------------------------------------------

def span_counts(
    length: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0
) -> tuple[int, int]:
    """How many tokens T5 hides in a sequence of ``length`` tokens, and in how many spans.

    ``noise = round(noise_density * length)``, clipped to ``[1, length - 1]``;
    ``spans = max(1, round(noise / mean_noise_span_length))`` (Python's ``round`` rounds halves to
    even, like TensorFlow's). The spans are also capped at ``length - noise`` so that every span
    can be separated by at least one kept token (T5 never reaches that cap at density 0.15).

    Chapter 1, *Pretraining objectives*.
    """
    _check_length(length)
    _check_probability("noise_density", noise_density)
    if mean_noise_span_length < 1:
        raise ValueError(
            f"mean_noise_span_length must be at least 1 token, got {mean_noise_span_length}."
        )
    noise = min(max(round(noise_density * length), 1), length - 1)
    spans = max(1, round(noise / mean_noise_span_length))
    spans = min(spans, noise, length - noise)
    return noise, spans


def _check_length(length: int) -> None:
    if length < 2:
        raise ValueError(
            f"A sequence of {length} token(s) is too short to corrupt: span corruption needs at "
            "least 2 tokens (one to keep, one to hide). Drop or merge very short texts first."
        )


def _random_segmentation(n_items: int, n_segments: int, g: torch.Generator | None) -> list[int]:
    """Split ``n_items`` into ``n_segments`` non-empty parts at random, as T5 does.

    T5 shuffles the ``n_items - 1`` gaps between items and starts a new segment after the first
    ``n_segments - 1`` of them in shuffled order; the lengths are what is left between the cuts.
    """
    if n_segments == 1:
        return [n_items]
    order = torch.randperm(n_items - 1, generator=g)
    first_in_segment = torch.zeros(n_items, dtype=torch.long)
    first_in_segment[1:] = (order < n_segments - 1).long()
    segment_id = torch.cumsum(first_in_segment, 0)
    return torch.bincount(segment_id, minlength=n_segments).tolist()


def random_spans_noise_mask(
    length: int,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    generator: GeneratorLike = None,
) -> torch.Tensor:
    """Choose which tokens T5 hides: a boolean mask of ``length`` with noise in random spans.

    Follows ``random_spans_noise_mask`` of the T5 code: the counts come from :func:`span_counts`;
    the noise tokens and the kept tokens are each cut into that many non-empty random segments,
    which are interleaved kept, noise, kept, noise, ... so the sequence always starts with kept
    tokens and every noise span is followed by kept tokens or the end.

    Chapter 1, *Pretraining objectives*.
    """
    noise, spans = span_counts(length, noise_density, mean_noise_span_length)
    g = _generator(generator)
    noise_lengths = _random_segmentation(noise, spans, g)
    keep_lengths = _random_segmentation(length - noise, spans, g)
    mask = torch.zeros(length, dtype=torch.bool)
    pos = 0
    for keep, hide in zip(keep_lengths, noise_lengths):
        pos += keep
        mask[pos : pos + hide] = True
        pos += hide
    return mask


def _corrupt_spans(
    token_ids: Sequence[int], noise_mask: torch.Tensor | Sequence[bool],
    sentinels: Sequence[int], eos_id: int | None,
) -> tuple[list[int], list[int]]:
    """Replace each noise span by its sentinel; return (input, target) as T5 builds them.

    The k-th noise span becomes ``sentinels[k]`` in the input; the target is ``sentinels[0]``,
    the hidden tokens of span 0, ``sentinels[1]``, the tokens of span 1, ... Both end with
    ``eos_id`` (pass None to leave it out).
    """
    if isinstance(noise_mask, torch.Tensor):
        noise_mask = noise_mask.tolist()
    mask = [bool(m) for m in noise_mask]
    if len(mask) != len(token_ids):
        raise ValueError(
            f"noise_mask has {len(mask)} entries but the sequence has {len(token_ids)} tokens."
        )
    inputs: list[int] = []
    targets: list[int] = []
    span = -1
    for i, (tok, hide) in enumerate(zip(token_ids, mask)):
        if hide:
            if i == 0 or not mask[i - 1]:
                span += 1
                if span >= len(sentinels):
                    raise ValueError(
                        f"The sequence needs more than {len(sentinels)} sentinels. Use shorter "
                        "sequences (max_length) or a tokenizer with more <extra_id_N> tokens."
                    )
                inputs.append(int(sentinels[span]))
                targets.append(int(sentinels[span]))
            targets.append(int(tok))
        else:
            inputs.append(int(tok))
    if eos_id is not None:
        inputs.append(int(eos_id))
        targets.append(int(eos_id))
    return inputs, targets


def reconstruct_from_spans(
    inputs: Sequence[int], targets: Sequence[int], sentinels: Sequence[int], eos_id: int | None
) -> list[int]:
    """Rebuild the original sequence from a span-corrupted (input, target) pair.

    Each sentinel in the input is replaced by the tokens that follow the same sentinel in the
    target, up to the next sentinel or ``eos_id``. Padding (-100 or anything after ``eos_id``)
    is ignored. This undoes what :func:`span_corruption_batch` does to each sequence.

    Chapter 1, *Pretraining objectives*.
    """
    sentinel_set = {int(s) for s in sentinels}

    def _strip(seq: Sequence[int]) -> list[int]:
        out = []
        for t in seq:
            t = int(t)
            if (eos_id is not None and t == eos_id) or t == IGNORE_INDEX:
                break
            out.append(t)
        return out

    spans: dict[int, list[int]] = {}
    current: int | None = None
    for t in _strip(targets):
        if t in sentinel_set:
            current = t
            spans[current] = []
        elif current is None:
            raise ValueError("The target must start with a sentinel token.")
        else:
            spans[current].append(t)
    rebuilt: list[int] = []
    for t in _strip(inputs):
        if t in sentinel_set:
            if t not in spans:
                raise ValueError(f"Sentinel id {t} appears in the input but not in the target.")
            rebuilt.extend(spans[t])
        else:
            rebuilt.append(t)
    return rebuilt


def span_corruption_batch(
    examples: Examples,
    tokenizer: PreTrainedTokenizerBase,
    *,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    max_length: int | None = None,
    generator: GeneratorLike = None,
) -> dict[str, torch.Tensor]:
    """Build a T5-style span-corruption batch: ``input_ids``, ``attention_mask``, ``labels``.

    Texts are tokenized without special tokens and truncated to ``max_length`` tokens before
    corruption; each sequence gets its own :func:`random_spans_noise_mask`. Inputs are padded
    with the pad id, labels (the targets) with -100; both end with ``</s>``. The returned
    ``labels`` can be given straight to ``T5ForConditionalGeneration``, which builds the decoder
    inputs from them.

    Chapter 1, *Pretraining objectives*.
    """
    _check_probability("noise_density", noise_density)
    sentinels = sentinel_ids(tokenizer)
    eos = getattr(tokenizer, "eos_token_id", None)
    pad = _pad_id(tokenizer)
    seqs = _sequences(examples, tokenizer, add_special_tokens=False, max_length=max_length)
    g = _generator(generator)
    inputs, targets = [], []
    for i, seq in enumerate(seqs):
        if len(seq) < 2:
            raise ValueError(
                f"Example {i} has {len(seq)} token(s), too short to corrupt: span corruption "
                "needs at least 2 tokens. Drop or merge very short texts first."
            )
        mask = random_spans_noise_mask(len(seq), noise_density, mean_noise_span_length, g)
        x, y = _corrupt_spans(seq, mask, sentinels, eos)
        inputs.append(x)
        targets.append(y)
    input_ids, attention = _pad(inputs, pad)
    label_ids, label_mask = _pad(targets, pad)
    labels = label_ids.masked_fill(label_mask == 0, IGNORE_INDEX)
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def objective_batch(kind: str, windows: list[list[int]], tokenizer: PreTrainedTokenizerBase,
                    g: torch.Generator) -> dict[str, torch.Tensor]:
    """The batch of ``kind``'s objective (bert, gpt2 or t5) built from token windows.

    Chapter 1, *Pretraining objectives*.
    """
    if kind == "bert":
        return masked_lm_batch(windows, tokenizer, generator=g)
    if kind == "gpt2":
        return causal_lm_batch(windows, tokenizer)
    return span_corruption_batch(windows, tokenizer, generator=g)


def context_free_loss(kind: str, token_ids: torch.Tensor | Sequence[int],
                      tokenizer: PreTrainedTokenizerBase, seq_len: int = 64,
                      generator: GeneratorLike = 0) -> float:
    """The loss of the best context-free guess at ``kind``'s targets: the entropy of their frequencies.

    ``token_ids`` is cut into windows of ``seq_len`` tokens and turned into ``kind``'s batches
    (bert, gpt2 or t5) as in training; the targets are the labels the loss scores (a causal
    model shifts its labels, so the first of each window is never a target). A model that ignores
    its input and always predicts these frequencies has exactly this loss, -sum p ln p nats per
    target, on these targets; each objective has its own, since each predicts different tokens.

    Chapter 1, *Pretraining objectives*.
    """
    if kind not in ("bert", "gpt2", "t5"):
        raise ValueError(f"Unknown objective {kind!r}: use 'bert', 'gpt2' or 't5'.")
    ids = torch.as_tensor(token_ids, dtype=torch.long).flatten()
    if seq_len < 2 or len(ids) < seq_len:
        raise ValueError(f"Need windows of at least 2 tokens and a stream of at least one "
                         f"window; got seq_len={seq_len} and {len(ids)} tokens.")
    windows = ids[: len(ids) // seq_len * seq_len].view(-1, seq_len)
    g = _generator(generator)
    counts = torch.zeros(len(tokenizer), dtype=torch.float64)
    for rows in windows.split(512):  # 512 windows per batch: a few MB at a time
        labels = objective_batch(kind, rows.tolist(), tokenizer, g)["labels"]
        if kind == "gpt2":
            labels = labels[:, 1:]  # position t predicts token t + 1
        targets = labels[labels != IGNORE_INDEX]
        counts += torch.bincount(targets, minlength=len(counts)).double()
    p = counts[counts > 0] / counts.sum()
    return float(-(p * p.log()).sum())
