"""Measuring language models: perplexity on a fixed held-out text, objective losses, and what a model writes.

**Perplexity** (:func:`perplexity`, taught in chapter 1 and used by every later chapter) is
measured on a fixed held-out text, by default the test split of the course corpus: the stories
are tokenized without special tokens and concatenated with one ``</s>`` between consecutive
stories; a window of ``window`` tokens slides over the stream by ``stride`` tokens; each window
scores only the tokens that no earlier window scored. With ``stride < window`` every token after
the first is predicted exactly once, past the first window with at least ``window - stride``
tokens of context; ``stride = window`` gives non-overlapping windows, in which the first token of
each window has no context and is not scored.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from course_lib.base.checks import context_length
from course_lib.text import data, objectives

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from course_lib.text.training import TrainedModel

__all__ = [
    "DEFAULT_STRIDE",
    "DEFAULT_WINDOW",
    "Perplexity",
    "continue_text",
    "fill_mask",
    "fill_spans",
    "objective_loss",
    "perplexity",
    "unigram_baseline",
]

#: Default perplexity window (tokens) and stride; the window is capped at the model's context.
DEFAULT_WINDOW = 128
DEFAULT_STRIDE = 64


@dataclass(frozen=True)
class Perplexity:
    """A perplexity measurement: exp(mean negative log-likelihood) over ``n_tokens`` predictions.

    Chapter 1, *Pretraining objectives*.
    """

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

    Chapter 1, *Pretraining objectives*.
    """
    tokenizer = tokenizer if tokenizer is not None else data.course_tokenizer()
    if getattr(model.config, "is_encoder_decoder", False):
        raise ValueError("perplexity() measures causal (decoder-only) language models; "
                         f"{type(model).__name__} is an encoder-decoder. Use objective_loss() instead.")
    if type(model).__name__.endswith("ForMaskedLM"):
        raise ValueError("perplexity() measures causal (decoder-only) language models; a masked LM "
                         "does not predict the next token. Use objective_loss() instead.")
    context = context_length(model)
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
        data.check_split(split)
        stream, label = data.course_stream(tokenizer, split), f"the course corpus ({split} split)"
    else:
        stream, label = data.token_stream(texts, tokenizer), "the given text"
    n = len(stream)
    if n < window:
        raise data.too_short_error(n, window, "window")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    spans = _windows(n, window, stride)
    # Windows of the same length are batched together (all but possibly the last).
    groups: dict[int, list[tuple[int, int, int]]] = {}
    for span in spans:
        groups.setdefault(span[1] - span[0], []).append(span)
    # With overlapping windows only the last positions of most windows are scored: a model that
    # takes transformers' logits_to_keep computes the output layer for those positions alone.
    keeps = "logits_to_keep" in inspect.signature(model.forward).parameters
    for length, group in groups.items():
        for i in range(0, len(group), batch_size):
            chunk = group[i:i + batch_size]
            ids = torch.stack([stream[b:e] for b, e, _ in chunk]).to(device)
            skip = min(first - b - 1 for b, _, first in chunk) if keeps else 0  # unscored
            extra = {"logits_to_keep": length - skip} if skip else {}
            logits = model(input_ids=ids, **extra).logits.float()
            # log_softmax over the whole (contiguous) logits, then the slice: the same values,
            # faster than over the strided slice
            logp = torch.log_softmax(logits, dim=-1)[:, :-1]
            # logits at positions skip..L-2 predict the tokens at skip+1..L-1
            nll = -logp.gather(-1, ids[:, skip + 1:, None]).squeeze(-1)
            for row, (b, _, first) in enumerate(chunk):
                scored = nll[row, first - b - 1 - skip:]
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

    Chapter 1, *Pretraining objectives*.
    """
    data.check_split(split)
    stream = data.course_stream(trained.tokenizer, split)
    length, size = trained.recipe.seq_len, trained.recipe.batch_size
    n_windows = min(n_batches * size, len(stream) // length)
    if n_windows < 1:
        raise data.too_short_error(len(stream), length, "training window")
    g = torch.Generator().manual_seed(seed)
    model = trained.model.eval()
    device = next(model.parameters()).device
    total = 0.0
    for i in range(0, n_windows, size):
        windows = [stream[j * length:(j + 1) * length].tolist() for j in range(i, min(i + size, n_windows))]
        batch = objectives.objective_batch(trained.kind, windows, trained.tokenizer, g)
        total += float(model(**{k: v.to(device) for k, v in batch.items()}).loss) * len(windows)
    return total / n_windows


def unigram_baseline(tokenizer: PreTrainedTokenizerBase | None = None, split: str = "train",
                     k: int = 5) -> tuple[float, list[tuple[str, float]]]:
    """The loss of a model that ignores context, and the ``k`` most frequent tokens.

    A model that always predicts the token frequencies of the training split has a loss equal to
    their entropy, -Σ p ln p nats per token (special tokens left out): the plateau a language
    model sits on before it learns to use context. Returns (entropy, [(token, frequency), ...]).

    Chapter 1, *Pretraining objectives*.
    """
    tokenizer = tokenizer if tokenizer is not None else data.course_tokenizer()
    data.check_split(split)
    stream = data.course_stream(tokenizer, split)
    counts = torch.bincount(stream, minlength=len(tokenizer)).double()
    counts[torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)] = 0
    p = counts / counts.sum()
    nz = p[p > 0]
    entropy = float(-(nz * nz.log()).sum())
    top = torch.topk(p, k)
    return entropy, [(tokenizer.decode([int(i)]), float(v)) for v, i in zip(top.values, top.indices)]


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
    """The ``top_k`` tokens a masked LM puts in the one ``<mask>`` of ``text``, with probabilities.

    Chapter 1, *Pretraining objectives*.
    """
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

    Chapter 1, *Pretraining objectives*.
    """
    ids = [tokenizer.eos_token_id] + tokenizer(prompt, add_special_tokens=False)["input_ids"]
    device = next(model.parameters()).device
    context = context_length(model)
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
    :func:`course_lib.text.objectives.reconstruct_from_spans` puts them back into the text.

    Chapter 1, *Pretraining objectives*.
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
