"""Sphinx extension of the course book: author-year citations in round brackets.

sphinxcontrib-bibtex's ``author_year`` style writes "Devlin et al. [2019]"; readers of a course
expect "Devlin et al. (2019)" and "(Devlin et al., 2019)". This registers the same style with
round brackets as ``author_year_round`` (used in ``_config.yml``).
"""

from __future__ import annotations

import dataclasses

from sphinxcontrib.bibtex.plugin import register_plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle


def _round() -> BracketStyle:
    """Round brackets, with the default separators."""
    return BracketStyle(left="(", right=")")


@dataclasses.dataclass
class RoundAuthorYearStyle(AuthorYearReferenceStyle):
    """The author-year style with round brackets around years and parenthetical citations."""

    bracket_parenthetical: BracketStyle = dataclasses.field(default_factory=_round)
    bracket_textual: BracketStyle = dataclasses.field(default_factory=_round)
    bracket_author: BracketStyle = dataclasses.field(default_factory=_round)
    bracket_label: BracketStyle = dataclasses.field(default_factory=_round)
    bracket_year: BracketStyle = dataclasses.field(default_factory=_round)


register_plugin("sphinxcontrib.bibtex.style.referencing", "author_year_round", RoundAuthorYearStyle)


def setup(app: object) -> dict[str, bool]:
    """Nothing to set up beyond the registration above; safe for parallel builds."""
    return {"parallel_read_safe": True, "parallel_write_safe": True}
