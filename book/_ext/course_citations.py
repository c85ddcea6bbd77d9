"""Sphinx extension of the course book: author-year citations, a bibliography to match.

sphinxcontrib-bibtex's ``author_year`` style writes "Devlin et al. [2019]"; readers of
a course expect "Devlin et al. (2019)" and "(Devlin et al., 2019)". This registers the
same style with round brackets as ``author_year_round`` (``bibtex_reference_style``).

The bibliography page labels each entry the way the text cites it: the pybtex label
style ``course_author_year`` writes "Devlin et al., 2019", the words of a parenthetical
citation, and the formatting style ``course_plain`` (pybtex's ``plain`` entries with
those labels, sorted by author, year and title) is ``bibtex_default_style``. Where two
entries would get the same label, the year gets a letter, "PyTorch, 2026a" and
"PyTorch, 2026b", and the citations in the text write the year with the same letter,
so that every citation names exactly one entry of the list.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import pybtex.plugin
from pybtex.database import Entry, Person
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle
from pybtex.style.template import Node, node
from sphinxcontrib.bibtex.plugin import register_plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle, GroupReferenceStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
from sphinxcontrib.bibtex.style.referencing.basic_author_year import (
    BasicAuthorYearParentheticalReferenceStyle,
    BasicAuthorYearTextualReferenceStyle,
)
from sphinxcontrib.bibtex.style.referencing.extra_author import (
    ExtraAuthorReferenceStyle,
)
from sphinxcontrib.bibtex.style.referencing.extra_empty import ExtraEmptyReferenceStyle
from sphinxcontrib.bibtex.style.referencing.extra_label import ExtraLabelReferenceStyle
from sphinxcontrib.bibtex.style.referencing.extra_year import ExtraYearReferenceStyle
from sphinxcontrib.bibtex.style.template import year

#: Between the authors and the year of a label, as in a parenthetical citation.
AUTHOR_YEAR_SEP = ", "


def _round() -> BracketStyle:
    """Round brackets, with the default separators."""
    return BracketStyle(left="(", right=")")


@node
def label_year(children: list, data: dict[str, Any]) -> Text:
    """The year of a cited entry as its label in the bibliography writes it."""
    assert not children
    return Text(data["formatted_entry"].label.rpartition(AUTHOR_YEAR_SEP)[2])


def _label_years(template: Any) -> Any:
    """A copy of a pybtex template whose ``year`` nodes are ``label_year`` nodes."""
    if not isinstance(template, Node):
        return template
    if template.f is year.f:
        return label_year
    clone = template._clone()
    clone.children = [_label_years(child) for child in template.children]
    return clone


class _LabelYears:
    """Mixin for a reference style: its template writes the years of the labels."""

    def inner(self, role_name: str) -> Node:
        """The parent's template, with the label's year for the entry's year."""
        return _label_years(super().inner(role_name))  # type: ignore[misc]


class _Parenthetical(_LabelYears, BasicAuthorYearParentheticalReferenceStyle):
    """(Devlin et al., 2019), the year as the bibliography labels it."""


class _Textual(_LabelYears, BasicAuthorYearTextualReferenceStyle):
    """Devlin et al. (2019), the year as the bibliography labels it."""


class _Year(_LabelYears, ExtraYearReferenceStyle):
    """(2019), the year as the bibliography labels it."""


@dataclasses.dataclass
class RoundAuthorYearStyle(AuthorYearReferenceStyle):
    """The author-year style with round brackets, its years those of the labels."""

    bracket_parenthetical: BracketStyle = dataclasses.field(default_factory=_round)
    bracket_textual: BracketStyle = dataclasses.field(default_factory=_round)
    bracket_author: BracketStyle = dataclasses.field(default_factory=_round)
    bracket_label: BracketStyle = dataclasses.field(default_factory=_round)
    bracket_year: BracketStyle = dataclasses.field(default_factory=_round)

    def __post_init__(self) -> None:
        """The parent's parts; the three that write a year read it from the label."""
        self.styles.extend([
            _Parenthetical(bracket=self.bracket_parenthetical, person=self.person,
                           author_year_sep=self.author_year_sep,
                           pre_text_sep=self.pre_text_sep,
                           post_text_sep=self.post_text_sep),
            _Textual(bracket=self.bracket_textual, person=self.person,
                     text_reference_sep=self.text_reference_sep,
                     pre_text_sep=self.pre_text_sep, post_text_sep=self.post_text_sep),
            ExtraAuthorReferenceStyle(bracket=self.bracket_author, person=self.person),
            ExtraLabelReferenceStyle(bracket=self.bracket_label),
            _Year(bracket=self.bracket_year),
            ExtraEmptyReferenceStyle(),
        ])
        GroupReferenceStyle.__post_init__(self)


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels such as "Devlin et al., 2019": a parenthetical citation's words."""

    def format_labels(self, sorted_entries: Iterable[Entry]) -> Iterator[str]:
        """One label per entry; labels that would repeat get the letters a, b, c, ..."""
        labels = [self.format_label(entry) for entry in sorted_entries]
        count, seen = Counter(labels), Counter()
        for label in labels:
            if count[label] == 1:
                yield label
            else:
                yield label + chr(ord("a") + seen[label])
                seen[label] += 1

    def format_label(self, entry: Entry) -> str:
        """The authors as a citation names them (three or more: et al.), the year."""
        style = RoundAuthorYearStyle()
        authors = style.person.author_or_editor_or_title(full=False)
        text = authors.format_data({"entry": entry, "style": style}).render_as("text")
        return f"{text}{AUTHOR_YEAR_SEP}{entry.fields.get('year', 'n.d.')}"


class AuthorYearTitleSorting(SortingStyle):
    """pybtex's author, year and title order, reading "{AMD}" as AMD."""

    def person_key(self, person: Person) -> str:
        """The parent's key for a person, without the braces of a protected name."""
        return super().person_key(person).replace("{", "").replace("}", "")


class CoursePlainStyle(PlainStyle):
    """pybtex's ``plain`` entries sorted by author, year and title, labelled so."""

    default_label_style = "course_author_year"
    default_sorting_style = "course_author_year_title"


pybtex.plugin.register_plugin("pybtex.style.labels", "course_author_year",
                              AuthorYearLabelStyle)
pybtex.plugin.register_plugin("pybtex.style.sorting", "course_author_year_title",
                              AuthorYearTitleSorting)
pybtex.plugin.register_plugin("pybtex.style.formatting", "course_plain",
                              CoursePlainStyle)
register_plugin("sphinxcontrib.bibtex.style.referencing", "author_year_round",
                RoundAuthorYearStyle)


def setup(app: object) -> dict[str, bool]:
    """Nothing to set up beyond the registrations above; safe for parallel builds."""
    return {"parallel_read_safe": True, "parallel_write_safe": True}
