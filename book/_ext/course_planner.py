"""Sphinx extension of the course book: the training planner on a Markdown page.

The chapters show the planner as a cell's output; the landing page is Markdown, so this
directive puts the same view there, built from the library when the book is built
(nothing of it is stored in the page's source)::

    ```{course-planner}
    :model: llama2-7b
    :nodes: 4
    :zero: 3
    ```

Every option is an input of :class:`course_lib.planner.inputs.Plan` (text, as the
planner's boxes read it; ``true``/``false`` for the checkboxes), or ``language`` and
``focus`` (:func:`course_lib.planner.widget.planner`). A bad input fails the build with
the planner's own message.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from sphinx.application import Sphinx

from course_lib.planner.inputs import Plan
from course_lib.planner.widget import planner

#: The inputs that are checkboxes: their option reads ``true`` or ``false``.
BOOLS = {f.name for f in dataclasses.fields(Plan) if isinstance(f.default, bool)}


def _bool(text: str | None) -> bool:
    """``true`` or ``false``, as a checkbox option is written."""
    word = (text or "").strip().lower()
    if word not in ("true", "false"):
        raise ValueError(f"write true or false, got {text!r}")
    return word == "true"


class CoursePlanner(Directive):
    """``{course-planner}``: the training planner, its starting inputs as options."""

    has_content = False
    option_spec = {f.name: (_bool if f.name in BOOLS else directives.unchanged_required)
                   for f in dataclasses.fields(Plan)}
    option_spec.update(language=directives.unchanged_required,
                       focus=directives.unchanged_required)

    def run(self) -> list[nodes.Node]:
        """The planner's HTML and script, as a raw HTML node."""
        options: dict[str, Any] = dict(self.options)
        try:
            view = planner(**options)
        except ValueError as err:
            raise self.error(f"course-planner: {err}") from err
        return [nodes.raw("", view._repr_html_(), format="html")]


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive."""
    app.add_directive("course-planner", CoursePlanner)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
