"""Interactive widgets of the course (ipywidgets): the "will it fit?" memory calculator.

Chapter 2 (*The memory wall*) uses it.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from course_lib import memory

CUSTOM = "custom"


def _error_html(message: str) -> str:
    return f'<div class="course-error" style="color:#b00020"><b>Cannot compute:</b> {html.escape(message)}</div>'


def _breakdown_html(b: memory.Breakdown, title: str) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td style='text-align:right'>{gbs}</td>"
        f"<td style='text-align:right'>{per}</td><td style='text-align:right'>{share}</td></tr>"
        for name, gbs, per, share in memory.breakdown_rows(b)
    )
    verdicts = "".join(
        f"<li class='course-verdict {'fits' if ok else 'no-fit'}'>"
        f"<b style='color:{'#1b7f3b' if ok else '#b00020'}'>{'fits' if ok else 'does not fit'}</b> on "
        f"{html.escape(gpu.name)}: {share:.0%} of its memory</li>"
        for gpu, ok, share in b.verdicts()
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in b.notes)
    return (
        f"<div><p class='course-memory-title'>{html.escape(title)}</p>"
        "<table class='course-table'><thead><tr><th>component</th><th>GB per GPU</th>"
        f"<th>bytes/param</th><th>share</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<ul class='course-verdicts'>{verdicts}</ul>"
        + (f"<ul class='course-notes' style='font-size:smaller'>{notes}</ul>" if notes else "")
        + "</div>"
    )


class MemoryCalculator(widgets.VBox):
    """A "will it fit?" calculator: model, precision, optimizer, batch, sequence, GPUs, ZeRO stage -> breakdown and verdicts.

    Chapter 2, *The memory wall*.
    """

    def __init__(self, params: str = "1B", precision: str = "fp32", optimizer: str = "adam") -> None:
        style = {"description_width": "150px"}
        layout = widgets.Layout(width="360px")
        self.model = widgets.Dropdown(
            options=[CUSTOM, *memory.MODEL_PRESETS], value=CUSTOM, description="Model", style=style, layout=layout
        )
        self.params = widgets.Text(value=params, description="Parameters", style=style, layout=layout)
        self.params.add_class("course-params")
        self.precision = widgets.Dropdown(
            options=list(memory.PRECISIONS), value=precision, description="Precision", style=style, layout=layout
        )
        self.optimizer = widgets.Dropdown(
            options=list(memory.OPTIMIZERS), value=optimizer, description="Optimizer", style=style, layout=layout
        )
        self.batch = widgets.IntText(value=1, description="Batch per GPU", style=style, layout=layout)
        self.seq_len = widgets.IntText(value=2048, description="Sequence length", style=style, layout=layout)
        self.gpus = widgets.IntText(value=1, description="GPUs", style=style, layout=layout)
        self.gpus.add_class("course-gpus")
        self.zero = widgets.IntText(value=0, description="ZeRO stage (0-3)", style=style, layout=layout)
        self.zero.add_class("course-zero")
        self.checkpointing = widgets.Checkbox(
            value=False, description="Activation checkpointing", indent=False, layout=widgets.Layout(width="360px")
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
            [widgets.HTML("<b>Will it fit?</b> Training memory per GPU"), *controls, self.result],
        )
        self.add_class("course-memory-calculator")
        self.update()

    def _on_change(self, _change: dict) -> None:
        self.update()

    def compute(self) -> memory.Breakdown:
        """The breakdown for the current inputs; raises ValueError with the valid values on bad input."""
        if self.model.value == CUSTOM:
            n_params = memory.parse_count(self.params.value)
            shape = memory.shape_for_params(n_params)
        else:
            shape = memory.MODEL_PRESETS[self.model.value]
            n_params = shape.n_params
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
            self.result.value = _error_html(str(err))
            return
        title = (
            f"{b.n_params / 1e9:,.3g}B parameters, {b.precision}, {b.optimizer}, batch {self.batch.value} x "
            f"{self.seq_len.value} tokens, {b.gpus} GPU(s), ZeRO stage {b.zero_stage}: "
            f"{memory.gb(b.total):,.1f} GB per GPU"
        )
        self.result.value = _breakdown_html(b, title)


def memory_calculator(**kwargs) -> MemoryCalculator:
    """The "will it fit?" calculator, ready to display in a notebook.

    Chapter 2, *The memory wall*.
    """
    return MemoryCalculator(**kwargs)
