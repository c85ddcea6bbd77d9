"""Small tables that read well as plain text (terminals, nbval) and as HTML (notebooks, the book).

Every chapter shows its results with them, from chapter 1 on.
"""

from __future__ import annotations

import html
from typing import Sequence


class Table:
    """Rows of strings under headers; prints as aligned text and renders as an HTML table.

    Chapter 1, *Pretraining objectives*.
    """

    def __init__(self, headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> None:
        self.headers = [str(h) for h in headers]
        self.rows = [[str(c) for c in row] for row in rows]
        self.title = title
        if any(len(r) != len(self.headers) for r in self.rows):
            raise ValueError("every row needs one cell per header")

    def __str__(self) -> str:
        widths = [max(len(r[i]) for r in [self.headers, *self.rows]) for i in range(len(self.headers))]

        def line(cells: Sequence[str]) -> str:
            # First column left-aligned (labels), the others right-aligned (numbers).
            parts = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))]
            return "  ".join(parts).rstrip()

        out = [self.title] if self.title else []
        out += [line(self.headers), "  ".join("-" * w for w in widths)]
        out += [line(r) for r in self.rows]
        return "\n".join(out)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self.rows
        )
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return f'<table class="course-table">{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
