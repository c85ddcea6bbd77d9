"""course_lib.base.tables.Table: aligned text, and HTML whose sentences wrap in the book.

A cell that holds a sentence is marked ``course-prose`` (course.css wraps it in a column of a
readable width); figures, names and short labels are not, so they keep to one line.
tests/browser/test_book_pages.py measures the result on every page.
"""

from __future__ import annotations

import pytest

from course_lib.base.tables import Table, is_prose

WHY = ("in the paper, DeepSpeed's ZeRO 3 took about as long per step on this many GPUs as "
       "on half of them")


@pytest.mark.parametrize("text, prose", [
    (WHY, True),
    ("the planner holds what FSDP holds: a whole layer gathered", True),
    ("Megatron ZeRO-3 175B, 384 GPUs", False),  # a name
    ("Narayanan et al. (2021), Table 2, caption", False),  # a source, short
    ("1,234,567,890,123,456,789,012,345,678,901,234,567,890,123", False),  # a figure
    ("x" * 80, False),  # one long word: nothing to wrap at
    ("", False),
])
def test_only_sentences_are_prose(text, prose):
    assert is_prose(text) is prose


def test_the_html_marks_the_sentence_cells_and_nothing_else():
    table = Table(["run", "ratio", "why it misses"], [["A, 8 GPUs", "1.85", WHY],
                                                     ["B, 16 GPUs", "0.97", ""]],
                  title="The planner against published runs")
    html = table._repr_html_()
    assert html.count('class="course-prose"') == 1
    assert f'<td class="course-prose">{WHY.replace(chr(39), "&#x27;")}</td>' in html
    assert "<td>A, 8 GPUs</td>" in html and "<td>1.85</td>" in html
    assert str(table).splitlines()[0] == "The planner against published runs"
