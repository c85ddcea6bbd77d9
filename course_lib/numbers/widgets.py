"""Interactive widgets of the course (ipywidgets): the "will it fit?" memory calculator.

Chapter 2 (*The memory wall*) uses it. ``memory_calculator(language="nl")`` speaks Dutch: the
controls' labels, the result's title, headings, component names, verdicts and notes, and the
messages for bad input all come from :mod:`course_lib.numbers.i18n` (keys ``calc_...``), and its numbers
are written the language's way (``24,5 GB`` in Dutch). The choices' values (``fp32``, ``adam``,
the model presets) and the GPUs' names stay as they are: they are names, the same in code. In Dutch
the parameter box also reads a decimal comma (``1,3B``); a text with both a comma and a point is
refused rather than guessed at.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from course_lib.base.checks import choice
from course_lib.numbers import i18n, memory

__all__ = ["CUSTOM", "MemoryCalculator", "memory_calculator"]

CUSTOM = "custom"
#: The notes course_lib.numbers.memory.training_memory may write, by their text key.
_NOTES = ("calc_note_stage3", "calc_note_buckets", "calc_note_adam8bit", "calc_note_zero_one_gpu")
_MARK = "\x00verdict\x00"


def _error_html(message: str, language: str) -> str:
    heading = html.escape(i18n.text("calc_cannot", language))
    return f'<div class="course-error" style="color:#b00020"><b>{heading}</b> {html.escape(message)}</div>'


def _note(note: str, language: str) -> str:
    """A note of the breakdown in the language (as written, if it is one the tables do not know)."""
    for key in _NOTES:
        if note == i18n.text(key, "en"):
            return i18n.text(key, language)
    return note


def _breakdown_html(b: memory.Breakdown, title: str, language: str = "en") -> str:
    def t(key: str, **values: object) -> str:
        return i18n.text(key, language, **values)

    rows = "".join(
        f"<tr><td>{html.escape(t('calc_' + name.replace(' ', '_')))}</td>"
        + "".join(f"<td style='text-align:right'>{i18n.localise_number(cell, language)}</td>" for cell in cells)
        + "</tr>"
        for name, *cells in memory.breakdown_rows(b)
    )
    def verdict(gpu: memory.GPU, ok: bool, share: float) -> str:
        colour = "#1b7f3b" if ok else "#b00020"
        word = f"<b style='color:{colour}'>{html.escape(t('calc_fits' if ok else 'calc_no_fit'))}</b>"
        line = html.escape(t("calc_verdict", verdict=_MARK, gpu=gpu.name, share=f"{share:.0%}"))
        return f"<li class='course-verdict {'fits' if ok else 'no-fit'}'>{line.replace(_MARK, word)}</li>"

    verdicts = "".join(verdict(*v) for v in b.verdicts())
    notes = "".join(f"<li>{html.escape(_note(n, language))}</li>" for n in b.notes)
    headings = ("calc_component", "calc_gb_per_gpu", "calc_bytes_per_param", "calc_share")
    head = "".join(f"<th>{html.escape(t(k))}</th>" for k in headings)
    return (
        f"<div><p class='course-memory-title'>{html.escape(title)}</p>"
        f"<table class='course-table'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
        f"<ul class='course-verdicts'>{verdicts}</ul>"
        + (f"<ul class='course-notes' style='font-size:smaller'>{notes}</ul>" if notes else "")
        + "</div>"
    )


class MemoryCalculator(widgets.VBox):
    """A "will it fit?" calculator: model, precision, optimizer, batch, sequence, GPUs, ZeRO stage -> breakdown and verdicts.

    ``language`` ('en', the default, or 'nl') is the language of its labels, results and messages.
    ``precision`` and ``optimizer`` take the names the command line takes, in any case
    (``'BF16-mixed'`` is ``'bf16-mixed'``); an unknown one is a ValueError listing the valid ones.
    Choosing a preset with fewer positions than the sequence length lowers the sequence length to them.

    Chapter 2, *The memory wall*.
    """

    def __init__(self, params: str = "1B", precision: str = "fp32", optimizer: str = "adam", *,
                 language: str = "en") -> None:  # fmt: skip
        self.language = i18n.check_language(language)
        precision = choice(precision, memory.PRECISIONS, "precision")
        optimizer = choice(optimizer, memory.OPTIMIZERS, "optimizer")
        t = self._t
        style = {"description_width": "150px"}
        layout = widgets.Layout(width="360px")
        self.model = widgets.Dropdown(
            options=[(t("calc_custom"), CUSTOM), *((name, name) for name in memory.MODEL_PRESETS)], value=CUSTOM,
            description=t("calc_model"), style=style, layout=layout,
        )  # fmt: skip
        self.params = widgets.Text(value=params, description=t("calc_params"), style=style, layout=layout)
        self.params.add_class("course-params")
        self.precision = widgets.Dropdown(
            options=list(memory.PRECISIONS), value=precision, description=t("calc_precision"), style=style,
            layout=layout,
        )  # fmt: skip
        self.optimizer = widgets.Dropdown(
            options=list(memory.OPTIMIZERS), value=optimizer, description=t("calc_optimizer"), style=style,
            layout=layout,
        )  # fmt: skip
        self.batch = widgets.IntText(value=1, description=t("calc_batch"), style=style, layout=layout)
        self.seq_len = widgets.IntText(value=2048, description=t("calc_seq_len"), style=style, layout=layout)
        self.gpus = widgets.IntText(value=1, description=t("calc_gpus"), style=style, layout=layout)
        self.gpus.add_class("course-gpus")
        self.zero = widgets.IntText(value=0, description=t("calc_zero"), style=style, layout=layout)
        self.zero.add_class("course-zero")
        self.checkpointing = widgets.Checkbox(
            value=False, description=t("calc_checkpointing"), indent=False, layout=widgets.Layout(width="360px")
        )
        self.result = widgets.HTML()
        self.result.add_class("course-memory-result")
        controls = [
            self.model,
            self.params,
            self.precision,
            self.optimizer,
            self.batch,
            self.seq_len,
            self.gpus,
            self.zero,
            self.checkpointing,
        ]
        for control in controls:
            control.observe(self._on_change, names="value")
        super().__init__(
            [widgets.HTML(f"<b>{html.escape(t('calc_question'))}</b> {html.escape(t('calc_heading'))}"), *controls,
             self.result],  # fmt: skip
        )
        self.add_class("course-memory-calculator")
        self.add_class(f"course-lang-{self.language}")  # the book's note speaks it too
        self.update()

    def _on_change(self, change: dict) -> None:
        preset = memory.MODEL_PRESETS.get(self.model.value)
        if change["owner"] is self.model and preset and 0 < preset.positions < self.seq_len.value:
            self.seq_len.value = preset.positions  # the preset's context caps the sequence; this redraws
            return
        self.update()

    def _t(self, key: str, **values: object) -> str:
        return i18n.text(key, self.language, **values)

    def _count(self) -> float:
        """The parameter count typed in the box; a ValueError in the calculator's language if it is none."""
        text = self.params.value
        raw = text
        if self.language != "en" and i18n.text("decimal_point", self.language) == ",":
            # A decimal comma ("1,3B") is read as a point; with a point as well it is ambiguous: refused.
            raw = None if ("," in text and "." in text) else text.replace(",", ".")
        n = None if raw is None else memory.read_count(raw)
        if n is None:
            raise ValueError(self._t("calc_err_count", text=repr(text)))
        return memory.check_count(n, "calc_what_params", memory.MAX_PARAMS, self.language)

    def compute(self) -> memory.Breakdown:
        """The breakdown for the current inputs; raises ValueError (in the calculator's language) on bad input."""
        if self.model.value == CUSTOM:
            n_params, shape = self._count(), None  # training_memory gives a bare count a shape
        else:
            shape = memory.MODEL_PRESETS[self.model.value]
            n_params = shape.n_params
        memory.check_job(self.batch.value, self.seq_len.value, self.gpus.value, self.zero.value, self.language)
        if shape is not None:
            memory.check_context(shape, self.seq_len.value, self.language)
        return memory.training_memory(
            n_params,
            precision=self.precision.value,
            optimizer=self.optimizer.value,
            batch=self.batch.value,
            seq_len=self.seq_len.value,
            gpus=self.gpus.value,
            zero_stage=self.zero.value,
            shape=shape,
            activation_checkpointing=self.checkpointing.value,
        )

    def update(self) -> None:
        """Recompute and redraw the result; a bad input shows its message in place of the table."""
        self.params.disabled = self.model.value != CUSTOM
        try:
            b = self.compute()
        except ValueError as err:
            self.result.value = _error_html(str(err), self.language)
            return
        title = self._t(
            "calc_title", params=i18n.localise_number(f"{b.n_params / 1e9:,.3g}", self.language),
            precision=b.precision, optimizer=b.optimizer, batch=self.batch.value, seq_len=self.seq_len.value,
            gpus=b.gpus, zero=b.zero_stage, total=i18n.decimal(memory.gb(b.total), 1, self.language),
        )  # fmt: skip
        self.result.value = _breakdown_html(b, title, self.language)


def memory_calculator(**kwargs) -> MemoryCalculator:
    """The "will it fit?" calculator, ready to display in a notebook.

    Takes :class:`MemoryCalculator`'s arguments: ``params``, ``precision``, ``optimizer`` and the
    keyword ``language`` ('en', the default, or 'nl').

    Chapter 2, *The memory wall*.
    """
    return MemoryCalculator(**kwargs)
