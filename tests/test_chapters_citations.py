"""The chapters' tables cite their sources as the book does (course_lib.base.tables.cite):
"Narayanan et al. (2021)", the label of the book's bibliography page with the year in
brackets, never the key of book/references.bib; the published runs of chapters 9 and 10
say a yes-or-no figure's tolerance in words."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from course_lib.base import tables
from course_lib.base.tables import cite

BOOK = Path(__file__).resolve().parents[1] / "book"


@pytest.fixture(scope="module")
def book_labels() -> dict[str, str]:
    """{key: label} as the book's bibliography page writes them (book/_ext, pybtex)."""
    pytest.importorskip("sphinxcontrib.bibtex")
    from pybtex.database import parse_file

    sys.path.insert(0, str(BOOK / "_ext"))
    try:
        import course_citations
    finally:
        sys.path.remove(str(BOOK / "_ext"))
    style = course_citations.CoursePlainStyle()
    entries = style.sort(parse_file(str(tables.BIBLIOGRAPHY)).entries.values())
    return dict(zip([e.key for e in entries], style.format_labels(entries)))


def test_the_library_labels_every_entry_as_the_bibliography_page(book_labels):
    assert tables.bibliography_labels() == book_labels


def test_a_key_is_cited_as_the_text_cites_it():
    assert cite("narayanan2021megatron") == "Narayanan et al. (2021)"  # three or more
    assert cite("frantar2022obc") == "Frantar and Alistarh (2022)"  # two
    assert cite("goldberg1991floating") == "Goldberg (1991)"  # one
    assert cite("nvidia_h100") == "NVIDIA (2026g)"  # an organisation, its letter
    assert cite("amd_threadripper_pro_7000") == "AMD (2023)"  # "{AMD}": no braces
    assert cite("dettmers2022llmint8") == "Dettmers et al. (2022a)"


def test_anything_else_is_left_as_it_is(tmp_path):
    assert cite("measured here") == "measured here"
    assert cite("assumption") == "assumption"
    # Without the book (an installed package), a key is all there is to show.
    missing = tmp_path / "references.bib"
    assert tables.bibliography_labels(missing) == {}
    assert cite("nvidia_h100", missing) == "nvidia_h100"


def test_a_small_bib_file_reads_as_bibtex_does(tmp_path):
    bib = tmp_path / "refs.bib"
    bib.write_text("""@comment{ignored}
@article{b, author = {R{\\'e}, Christopher}, title = {Zeta}, year = {2020}}
@misc{a, author = {Hugging{ }Face}, title = {Beta}, year = 2021}
@misc{c, author = {{Hugging Face}}, title = {Alpha}, year = 2021}
@book{d, author = {von Werra, Leandro and Wolf, Thomas and others}, title = "T", year = {2019}}
""", encoding="utf-8")
    assert tables.bibliography_labels(bib) == {
        "b": "Ré, 2020", "c": "Hugging Face, 2021a", "a": "Hugging Face, 2021b",
        "d": "von Werra et al., 2019"}


