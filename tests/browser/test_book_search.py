"""The built book's search finds each chapter first (among the chapters) for its key terms.

The terms are tools/notebooks.py's KEYWORDS, which book/_ext/course_reading.py puts in the
index at each chapter's title; without them a search for "ZeRO" ranked chapter 9 fourth.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import notebooks as TOOLS  # noqa: E402  (tools/notebooks.py, the maintainers' tool)

CASES = [(term, Path(c.notebook).stem) for c in TOOLS.CHAPTERS
         for term in TOOLS.KEYWORDS.get(c.number, ())[:1]]


def first_chapters(page, book_server: str, term: str) -> list[str]:
    """The chapters the book's search lists for ``term``, best first."""
    page.goto(f"{book_server}/search.html?q={term}")
    page.wait_for_selector("#search-results ul li a", timeout=20_000)
    page.wait_for_function("() => !document.querySelector('#search-progress')?.textContent"
                           ".includes('Preparing')", timeout=20_000)
    hrefs = page.locator("#search-results ul li a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))")
    return [h.split("/")[-1].split(".html")[0] for h in hrefs if "notebooks/" in h]


def test_every_chapter_has_key_terms_and_no_term_names_two():
    terms = [t.lower() for c in TOOLS.CHAPTERS for t in TOOLS.KEYWORDS.get(c.number, ())]
    assert all(TOOLS.KEYWORDS.get(c.number) for c in TOOLS.CHAPTERS)
    assert len(terms) == len(set(terms))


@pytest.mark.parametrize(("term", "notebook"), CASES, ids=[t for t, _ in CASES])
def test_a_chapter_is_the_first_chapter_found_for_its_first_key_term(offline_page, book_server,
                                                                     term, notebook):
    found = first_chapters(offline_page, book_server, term)
    assert found and found[0] == notebook, f"search for {term!r}: {found[:4]}"
