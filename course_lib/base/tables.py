"""Small tables that read well as plain text (terminals, nbval) and as HTML (notebooks, the book).

Every chapter shows its results with them, from chapter 1 on. A table's "source" column names
a source as the book cites it (:func:`cite`: "Narayanan et al. (2021)"), never by its key in
``book/references.bib``.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Sequence


_PROSE = ' class="course-prose"'


def is_prose(text: str) -> bool:
    """Whether a cell holds a sentence (over 50 characters, six words or more), which the book
    wraps in a column of its own width instead of widening the table to its length.

    Chapter 1, *Pretraining objectives*.
    """
    return len(text) > 50 and text.count(" ") >= 5


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
            "<tr>" + "".join(f"<td{_PROSE if is_prose(c) else ''}>{html.escape(c)}</td>" for c in row)
            + "</tr>" for row in self.rows
        )
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return f'<table class="course-table">{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# --- citations ------------------------------------------------------------------------------

#: The book's bibliography in a checkout of the course (an installed package has no book).
BIBLIOGRAPHY = Path(__file__).resolve().parents[2] / "book" / "references.bib"

#: LaTeX accents of the .bib's names, as Unicode combining marks.
_ACCENTS = {"'": "\u0301", '"': "\u0308", "`": "\u0300", "^": "\u0302", "~": "\u0303",
            "c": "\u0327", "v": "\u030c", "=": "\u0304", ".": "\u0307"}
_LETTERS = {"L": "Ł", "l": "ł", "o": "ø", "O": "Ø", "ss": "ß", "aa": "å", "ae": "æ"}


def _plain(text: str) -> str:
    """A .bib value as a reader sees it: accents resolved, braces and extra spaces gone."""
    text = re.sub(r"\\([a-zA-Z]+)(?![a-zA-Z])\s*",
                  lambda m: _LETTERS.get(m.group(1), m.group(0)), text)
    text = re.sub(r"\\(['\"`^~=.]|[cv](?=[\s{]))\s*\{?([a-zA-Z])\}?",
                  lambda m: m.group(2) + _ACCENTS[m.group(1)], text)
    text = " ".join(text.replace("{", "").replace("}", "").split())
    return unicodedata.normalize("NFC", text)


def _top_level_split(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` (a regular expression) outside braces."""
    parts, depth, start = [], 0, 0
    for m in re.finditer(r"[{}]|" + separator, text):
        if m.group(0) == "{":
            depth += 1
        elif m.group(0) == "}":
            depth -= 1
        elif depth == 0:
            parts.append(text[start:m.start()])
            start = m.end()
    return parts + [text[start:]]


def _entries(text: str) -> dict[str, dict[str, str]]:
    """The entries of a .bib text: ``{key: {field: value}}``, values as written (braces kept)."""
    entries = {}
    for m in re.finditer(r"^@\s*(\w+)\s*\{", text, re.MULTILINE):
        if m.group(1).lower() in ("comment", "preamble", "string"):
            continue
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        key, *raw = _top_level_split(text[m.end():i - 1], ",")
        fields = {}
        for item in raw:
            name, _, value = item.partition("=")
            value = " ".join(value.split())
            if value[:1] + value[-1:] in ("{}", '""'):
                value = value[1:-1]
            if name.strip():
                fields[name.strip().lower()] = value
        entries[key.strip()] = fields
    return entries


def _person(name: str) -> tuple[str, str]:
    """A BibTeX name as (last names with any "von" part, first names), as written."""
    parts = [p.strip() for p in _top_level_split(name, ",")]
    if len(parts) > 1:
        return parts[0], parts[-1]
    words = _top_level_split(" ".join(name.split()), " ")
    return words[-1], " ".join(words[:-1])


def _label(fields: dict[str, str]) -> tuple[str, tuple[str, str, str]]:
    """An entry's label before any letter, "Devlin et al., 2019", and the key it sorts by."""
    names = fields.get("author") or fields.get("editor") or ""
    people = [_person(p) for p in _top_level_split(names, r"\s+and\s+")] if names else []
    last = [_plain(p[0]) for p in people]
    if not last:
        authors = _plain(fields.get("title", ""))
    elif len(last) <= 2:
        authors = " and ".join(last)
    else:
        authors = f"{last[0]} et al."
    order = "   ".join(f"{p[0]}  {p[1]}  ".replace("{", "").replace("}", "").lower()
                       for p in people)
    year = fields.get("year", "n.d.")
    return f"{authors}, {year}", (order, year, fields.get("title", ""))


@functools.lru_cache(maxsize=4)
def bibliography_labels(path: Path = BIBLIOGRAPHY) -> dict[str, str]:
    """``{key: label}`` of every entry of a .bib file, labelled as the book's bibliography page.

    A label is the authors as a citation names them (three or more: the first "et al."), a
    comma and the year: "Devlin et al., 2019". Where two entries would share a label, each
    year gets a letter in the order of the bibliography (by author, year and title):
    "PyTorch, 2026a", "PyTorch, 2026b". Empty when there is no such file.

    Chapter 1, *Pretraining objectives*.
    """
    if not Path(path).is_file():
        return {}
    entries = _entries(Path(path).read_text(encoding="utf-8"))
    labels = {key: _label(fields) for key, fields in entries.items()}
    count, seen = Counter(label for label, _ in labels.values()), Counter()
    out = {}
    for key in sorted(labels, key=lambda k: labels[k][1]):
        label = labels[key][0]
        if count[label] > 1:
            out[key] = label + chr(ord("a") + seen[label])
            seen[label] += 1
        else:
            out[key] = label
    return out


def cite(source: str, path: Path = BIBLIOGRAPHY) -> str:
    """A source as the book's text cites it: the key ``narayanan2021megatron`` of the
    bibliography becomes "Narayanan et al. (2021)", ``nvidia_h100`` "NVIDIA (2026g)".

    Anything else ("measured here", "assumption") comes back as it is, and so does a key
    where the bibliography is not at hand (an installed package carries no book).

    Chapter 1, *Pretraining objectives*.
    """
    label = bibliography_labels(path).get(source)
    if label is None:
        return source
    authors, _, year = label.rpartition(", ")
    return f"{authors} ({year})"
