"""Feedback wrapped at 88 characters, so that the book shows every line whole.

The book cuts an output line at its right edge; feedback is written one statement per
line and wrapped only when shown (:func:`wrap`). A continuation line keeps its line's
indentation (two spaces more under an indented line). Nothing is broken inside a number
with its unit ("4,096 bytes", "1.5 GB", "10 %"), a short formula ("3 x 5", "2^b - 1"),
a quoted case label, a short bracketed value ("(4, 8)", "[1, 2, 3]") or the learner's
source after "at line N of f:"; a line indented by four spaces or more (code, a
traceback) and a line with aligned columns (a table) are left as they are. Every chapter's
exercises print through it.
"""

from __future__ import annotations

import re
import textwrap

__all__ = ["WIDTH", "longest_line", "wrap"]

#: The widest line the feedback prints: the book's code cells show 88 characters.
WIDTH = 88
#: Stands for a space that must not break a line while the text is wrapped.
_GLUE = "\ue000"
_UNITS = (r"(?:[KMGTP]i?B(?:/s)?|B|bytes?|bits?|s|ms|us|µs|ns|%|x|×|GB/s|"
          r"FLOPs?|MACs?|tokens?|parameters?|params|ranks?|GPUs?|steps?|"
          r"seconds?|hours?|minutes?|bits/weight|uur|seconden|minuten)(?![\w/])")
#: A number, then its unit: "4,096 bytes", "1.5 GB", "2^8 levels" stays "2^8" whole.
_NUMBER_UNIT = re.compile(r"(?<![\w.])([-+]?\d[\d.,_]*(?:e[-+]?\d+)?) (" + _UNITS + ")")
#: A short bracketed value or a quoted one: "(4, 8)", "[1, 2, 3]", 'ties at .5'.
_GROUP = re.compile(r"\([^()\n]{1,18}\)|\[[^\[\]\n]{1,18}\]|\{[^{}\n]{1,18}\}"
                    r"|'[^'\n]{1,40}'|\"[^\"\n]{1,40}\"")
#: A short formula: "3 x 5", "2^b - 1", "x / scale", "C = 6 N D".
_OPERATOR = re.compile(r"(?<=[\w.)\]^'²]) ([-+*/×x=<>]|[<>=!]=|->) (?=[\w.(\[π-])")
#: The "..." that ends a list of values stays with the last value shown.
_MORE = re.compile(r", \.\.\.")
#: The learner's line in the feedback, in English and Dutch: kept whole after the colon.
_SOURCE = re.compile(r"^(\s*(?:at line|op regel) \d+ (?:of|van) [^:]+: )(.+)$")


def _glued(text: str) -> str:
    """``text`` with the spaces that must not break a line replaced by :data:`_GLUE`."""
    text = _OPERATOR.sub(lambda m: _GLUE + m.group(1) + _GLUE, text)
    text = _NUMBER_UNIT.sub(lambda m: m.group(1) + _GLUE + m.group(2), text)
    text = _MORE.sub("," + _GLUE + "...", text)
    return _GROUP.sub(lambda m: m.group(0).replace(" ", _GLUE), text)


def _wrap_line(line: str, width: int) -> list[str]:
    """One line of feedback as lines of at most ``width`` characters where it can."""
    indent = line[: len(line) - len(line.lstrip(" "))]
    body = line[len(indent):]
    if len(line) <= width or len(indent) >= 4 or "  " in body.rstrip():
        return [line]
    more = indent + "  " if indent else ""
    source = _SOURCE.match(line)
    if source:  # the learner's code: on its own line under the words, never broken
        head = _wrap_line(source.group(1).rstrip(), width)
        return head + [more + "  " + source.group(2)]
    lines = textwrap.wrap(_glued(body), width, initial_indent=indent,
                          subsequent_indent=more, break_long_words=False,
                          break_on_hyphens=False)
    return [part.replace(_GLUE, " ") for part in lines] or [line]


def wrap(text: str, width: int = WIDTH) -> str:
    """``text`` with each line wrapped at ``width`` characters, as feedback is shown.

    Used by the library's other modules.
    """
    lines = text.split("\n")
    return "\n".join(part for line in lines for part in _wrap_line(line, width))


def longest_line(text: str) -> int:
    """The length of the longest line of ``text`` (0 for no text).

    Used by the library's other modules.
    """
    return max((len(line) for line in text.splitlines()), default=0)
