"""Chapter 1's own views, tables, plots and exercises ("Pretraining objectives").

The objectives themselves live in :mod:`course_lib.text.objectives`, the models in
:mod:`course_lib.text.models`, training in :mod:`course_lib.text.training` and the scaling study
in :mod:`course_lib.text.scaling`. Here: the token-by-token views of a batch of each objective
(HTML in a notebook, plain text in a terminal), the table of the three architectures, the loss
curves of the three tiny models, the scaling plot, and the chapter's quiz.
"""

from __future__ import annotations

import html as _html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import FormatStrFormatter, NullFormatter

from course_lib.base import diagrams
from course_lib.base.plots import use_course_style
from course_lib.base.tables import Table
from course_lib.exercises.questions import Question
from course_lib.text.course_model import COURSE_RECIPE, course_model_reference
from course_lib.text.data import DEFAULT_VOCAB_SIZE, sentinel_ids
from course_lib.text.models import ARCHITECTURES
from course_lib.text.objectives import IGNORE_INDEX, reconstruct_from_spans, span_counts
from course_lib.text.scaling import ScalingPoint, fit_power_law
from course_lib.text.training import TrainedModel

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "TokenDisplay",
    "architecture_table",
    "plot_loss_curves",
    "plot_scaling_law",
    "quiz",
    "show_causal_lm",
    "show_masked_lm",
    "show_span_corruption",
]


# ---------------------------------------------------------------------------------------------
# A batch of each objective, token by token
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TokenDisplay:
    """A token-by-token view of one example: ``html`` for notebooks, ``text`` for terminals.

    Chapter 1, *Pretraining objectives*.
    """

    html: str
    text: str

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.text


_STYLE_BASE = (
    "display:inline-block;margin:1px;padding:1px 3px;border-radius:3px;white-space:pre;"
    "font-family:monospace;font-size:90%;"
)
_COLOURS = {
    "mask": ("#ffd166", "#000"),     # amber: replaced by <mask>
    "random": ("#ef476f", "#fff"),   # red: replaced by a random token
    "kept": ("#06d6a0", "#000"),     # green: selected but left unchanged
    "special": ("#e9ecef", "#6c757d"),
    "pad": ("#f8f9fa", "#adb5bd"),
    "plain": ("#ffffff", "#000"),
}
_SPAN_PALETTE = (
    "#8ecae6", "#ffb703", "#b5e48c", "#f4a261", "#cdb4db", "#ff8fab", "#90be6d", "#ffd6a5",
)


def _token_text(tokenizer: PreTrainedTokenizerBase, token_id: int) -> str:
    if token_id in (IGNORE_INDEX,):
        return "-100"
    if token_id in set(tokenizer.all_special_ids):
        return tokenizer.convert_ids_to_tokens(int(token_id))
    return tokenizer.decode([int(token_id)])


def _chip(
    text: str, kind: str = "plain", title: str | None = None, colour: str | None = None
) -> str:
    bg, fg = _COLOURS[kind]
    if colour is not None:
        bg, fg = colour, "#000"
    tip = f' title="{_html.escape(title, quote=True)}"' if title else ""
    return (f'<span style="{_STYLE_BASE}background:{bg};color:{fg};border:1px solid #ccc"{tip}>'
            f"{_html.escape(text)}</span>")


def _row(tensor_or_list: Any, row: int) -> list[int]:
    if isinstance(tensor_or_list, torch.Tensor):
        if tensor_or_list.dim() == 1:
            return [int(v) for v in tensor_or_list.tolist()]
        return [int(v) for v in tensor_or_list[row].tolist()]
    data = list(tensor_or_list)
    if data and isinstance(data[0], (list, tuple)):
        return [int(v) for v in data[row]]
    return [int(v) for v in data]


def _legend(items: Sequence[tuple[str, str]]) -> str:
    return "<div style='margin:4px 0;font-size:85%'>" + " ".join(
        _chip(label, kind) for label, kind in items) + "</div>"


def show_masked_lm(
    batch: Mapping[str, Any], tokenizer: PreTrainedTokenizerBase, row: int = 0
) -> TokenDisplay:
    """Show one masked-LM example: which tokens were masked, randomised or kept, and their labels.

    Colours: amber = replaced by ``<mask>``, red = replaced by a random token, green = selected
    but unchanged; hover a coloured token for the label it must predict. The text form writes
    ``[<mask>→cup]``, ``[dog→cup]`` (random) and ``[=cup]`` (kept).

    Chapter 1, *Pretraining objectives*.
    """
    ids = _row(batch["input_ids"], row)
    labels = _row(batch["labels"], row)
    attention = _row(batch["attention_mask"], row) if "attention_mask" in batch else [1] * len(ids)
    mask_id = getattr(tokenizer, "mask_token_id", None)
    specials = set(tokenizer.all_special_ids)
    chips, words = [], []
    counts = {"mask": 0, "random": 0, "kept": 0}
    for tok, lab, att in zip(ids, labels, attention):
        if not att:
            continue
        shown = _token_text(tokenizer, tok)
        if lab == IGNORE_INDEX:
            kind = "special" if tok in specials else "plain"
            chips.append(_chip(shown, kind))
            words.append(shown)
            continue
        target = _token_text(tokenizer, lab)
        kind = "mask" if tok == mask_id else ("kept" if tok == lab else "random")
        counts[kind] += 1
        chips.append(_chip(shown, kind, title=f"label: {target!r}"))
        words.append(f"[={target}]" if kind == "kept" else f"[{shown}→{target}]")
    n_real = sum(1 for t, a in zip(ids, attention) if a and t not in specials)
    n_sel = sum(counts.values())
    summary = (f"{n_sel} of {n_real} ordinary tokens selected: {counts['mask']} masked, "
               f"{counts['random']} random, {counts['kept']} kept")
    html = (
        "<div>" + _legend([("<mask>", "mask"), ("random", "random"), ("kept", "kept"),
                           ("special", "special")])
        + "<div style='line-height:1.9'>" + "".join(chips) + "</div>"
        + f"<div style='font-size:85%;color:#555'>{_html.escape(summary)}</div></div>"
    )
    return TokenDisplay(html=html, text="".join(words) + "\n" + summary)


def show_causal_lm(
    batch: Mapping[str, Any], tokenizer: PreTrainedTokenizerBase, row: int = 0, max_tokens: int = 64
) -> TokenDisplay:
    """Show one causal-LM example as pairs: each input token above the next token it must predict.

    The labels equal the inputs; the model shifts them, so the target under position *t* is the
    label at *t+1*. Padding (label -100) is greyed out and never predicted.

    Chapter 1, *Pretraining objectives*.
    """
    ids = _row(batch["input_ids"], row)[:max_tokens]
    labels = _row(batch["labels"], row)[: max_tokens + 1]
    specials = set(tokenizer.all_special_ids)
    top, bottom, lines = [], [], []
    for t, tok in enumerate(ids):
        nxt = labels[t + 1] if t + 1 < len(labels) else IGNORE_INDEX
        shown = _token_text(tokenizer, tok)
        if labels[t] == IGNORE_INDEX and nxt == IGNORE_INDEX:
            kind = "pad"
        else:
            kind = "special" if tok in specials else "plain"
        top.append(f"<td>{_chip(shown, kind)}</td>")
        if nxt == IGNORE_INDEX:
            bottom.append(f"<td>{_chip('·', 'pad', title='nothing to predict')}</td>")
            if kind != "pad":
                lines.append(f"{shown!r:>16} → (end)")
        else:
            target = _token_text(tokenizer, nxt)
            bottom.append(f"<td>{_chip(target, 'mask', title='next-token target')}</td>")
            lines.append(f"{shown!r:>16} → {target!r}")
    html = (
        "<table style='border-collapse:collapse'><tr><th style='text-align:right'>input</th>"
        + "".join(top) + "</tr><tr><th style='text-align:right'>predicts</th>"
        + "".join(bottom) + "</tr></table>"
    )
    return TokenDisplay(html=html, text="\n".join(lines))


def show_span_corruption(
    batch: Mapping[str, Any], tokenizer: PreTrainedTokenizerBase, row: int = 0
) -> TokenDisplay:
    """Show one span-corruption example: the input with sentinels, and the target they point to.

    Each sentinel and the tokens it hides share one colour, in the input and in the target. The
    text form prints the input and target on two lines, plus the rebuilt original.

    Chapter 1, *Pretraining objectives*.
    """
    sentinels = sentinel_ids(tokenizer)
    number = {s: k for k, s in enumerate(sentinels)}
    eos = getattr(tokenizer, "eos_token_id", None)
    pad = getattr(tokenizer, "pad_token_id", None)
    ids = _row(batch["input_ids"], row)
    attention = _row(batch["attention_mask"], row) if "attention_mask" in batch else [1] * len(ids)
    labels = [t for t in _row(batch["labels"], row) if t != IGNORE_INDEX]
    ids = [t for t, a in zip(ids, attention) if a and t != pad]

    def render(seq: Sequence[int]) -> tuple[str, str]:
        chips, words, colour = [], [], None
        for tok in seq:
            shown = _token_text(tokenizer, tok)
            if tok in number:
                colour = _SPAN_PALETTE[number[tok] % len(_SPAN_PALETTE)]
                chips.append(_chip(shown, colour=colour, title=f"sentinel {number[tok]}"))
                words.append(f" {shown}")
            elif tok == eos:
                chips.append(_chip(shown, "special"))
                words.append(shown)
                colour = None
            else:
                in_target_span = colour is not None and seq is labels
                chips.append(_chip(shown, colour=colour) if in_target_span else _chip(shown))
                words.append(shown)
        return "".join(chips), "".join(words)

    in_html, in_text = render(ids)
    out_html, out_text = render(labels)
    original = tokenizer.decode(reconstruct_from_spans(ids, labels, sentinels, eos))
    html = (
        "<div style='line-height:1.9'><b>input (encoder)</b><br>" + in_html
        + "<br><b>target (decoder)</b><br>" + out_html
        + "<br><span style='font-size:85%;color:#555'>rebuilt: "
        + f"{_html.escape(original)}</span></div>"
    )
    text = f"input : {in_text}\ntarget: {out_text}\nrebuilt: {original}"
    return TokenDisplay(html=html, text=text)


# ---------------------------------------------------------------------------------------------
# The three architectures and how they learn
# ---------------------------------------------------------------------------------------------

def architecture_table() -> Table:
    """The three architectures side by side: objective, attention and typical tasks.

    Chapter 1, *Pretraining objectives*.
    """
    rows = [[a.family, a.model_class, a.objective, a.attention, a.typical_tasks, a.examples]
            for a in ARCHITECTURES.values()]
    return Table(["architecture", "transformers class", "pretraining objective", "attention",
                  "typical tasks", "examples"], rows)


def plot_loss_curves(results: Sequence[TrainedModel], smooth: int = 10,
                     baseline: float | Mapping[str, float] | None = None) -> Figure:
    """Training loss per step of each model (thin) and its running mean over ``smooth`` steps (thick).

    ``baseline`` draws a horizontal line: one number (e.g. the context-free loss of
    :func:`course_lib.text.evaluation.unigram_baseline`) in black, or a line per model kind in the
    model's colour (e.g. each objective's :func:`course_lib.text.objectives.context_free_loss`).

    Chapter 1, *Pretraining objectives*.
    """
    use_course_style()
    fig, ax = plt.subplots(figsize=(8.2, 4.8))
    colours = {"bert": "#4C72B0", "gpt2": "#C44E52", "t5": "#55A868"}
    for r in results:
        h = r.history
        run = [sum(h[max(0, i - smooth + 1):i + 1]) / len(h[max(0, i - smooth + 1):i + 1])
               for i in range(len(h))]
        c = colours.get(r.kind, None)
        arch = ARCHITECTURES[r.kind]
        ax.plot(range(1, len(h) + 1), h, color=c, alpha=0.25, lw=1)
        ax.plot(range(1, len(h) + 1), run, color=c, lw=2,
                label=f"{arch.model_class}: {arch.objective.split(':')[0]}")
    if isinstance(baseline, Mapping):
        for r in results:
            if r.kind in baseline:
                ax.axhline(baseline[r.kind], color=colours.get(r.kind), ls="--", lw=1,
                           label=f"{ARCHITECTURES[r.kind].model_class}: context-free loss "
                                 f"{baseline[r.kind]:.2f}")
    elif baseline is not None:
        ax.axhline(baseline, color="black", ls="--", lw=1,
                   label=f"context-free (unigram) loss {baseline:.2f}")
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss (nats per predicted token)")
    ax.set_title("Three tiny models, three objectives")
    ax.legend(fontsize=diagrams.SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2,
              frameon=False)
    fig.tight_layout()
    return fig


def plot_scaling_law(points: Sequence[ScalingPoint], fit: bool = True) -> Figure:
    """Two log-log panels, one above the other: held-out loss against non-embedding parameters
    and against C = 6·N·D.

    Chapter 1, *Pretraining objectives*.
    """
    use_course_style()
    fig, axes = plt.subplots(2, 1, figsize=(8, 8.4))
    loss = [p.validation_loss for p in points]
    panels = ((axes[0], [p.n_non_embedding for p in points], "non-embedding parameters N"),
              (axes[1], [p.compute for p in points], "training compute C = 6·N·D (FLOPs)"))
    for ax, xs, label in panels:
        ax.plot(xs, loss, "o", color="#4C72B0", ms=8, label="tiny GPT-2s (same tokens)")
        for p, xv in zip(points, xs):
            ax.annotate(f"h{p.hidden}·L{p.layers}", (xv, p.validation_loss),
                        textcoords="offset points", xytext=(5, 5), fontsize=diagrams.SMALL)
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
        ax.legend(fontsize=diagrams.SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                  ncol=2, frameon=False)
    axes[0].set_title("Loss against model size")
    axes[1].set_title("Loss against compute")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Quiz
# ---------------------------------------------------------------------------------------------

def _course_model_compute() -> float:
    return 6.0 * course_model_reference().get("n_params", 0) * COURSE_RECIPE.tokens


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "A batch holds 2,000 ordinary (non-special) tokens. How many of them does BERT's recipe "
        "expect to replace by <mask>?",
        lambda: 2000 * 0.15 * 0.8,
        unit="tokens",
        hint="15% are selected; of those, 80% become <mask> (10% random, 10% kept).",
    ),
    q2=Question(
        "T5 corrupts a sequence of 100 tokens with noise density 0.15 and mean span length 3. How "
        "many sentinel tokens appear in the encoder's input?",
        lambda: float(span_counts(100)[1]),
        unit="sentinels",
        rel_tol=0,
        hint="noise tokens = round(0.15 x length); spans = round(noise / 3); one sentinel per span.",
    ),
    q3=Question(
        "A model that knows nothing spreads its probability evenly over the course tokenizer's "
        "4,096 tokens. What is its perplexity?",
        lambda: float(DEFAULT_VOCAB_SIZE),
        rel_tol=1e-6,
        hint="perplexity = exp(mean loss); a uniform guess over V tokens has loss ln V.",
    ),
    q4=Question(
        "Estimate the training compute of the course model with C = 6·N·D (N = all its parameters, "
        "D = training tokens, both printed in this chapter), in FLOPs.",
        _course_model_compute,
        unit="FLOPs",
        hint="D = steps x batch size x sequence length; multiply 6 x N x D.",
    ),
)
