"""Chapter 12 in the built book: its runs, tables and figure render offline and the landing
page links it (the page-by-page checks of ``test_book`` and ``test_book_reading`` run on it
with every chapter)."""

from __future__ import annotations

import pytest

from .test_book import assert_chapter_complete, assert_shows, chapter_text

pytestmark = pytest.mark.browser

NOTEBOOK = "12_long_sequences_and_experts"


def test_chapter_12_renders_its_runs_tables_and_plots_offline(offline_page, book_server):
    page = offline_page
    text = chapter_text(page, book_server, NOTEBOOK)
    # Both launches ran when the notebook was executed, and their checks held.
    assert_shows(text, ("Attention over a sequence split across 2 ranks",
                        "A mixture-of-experts layer on 2 ranks, float64",
                        "Llama 3 405B, 131,072 tokens: TP 8, CP 16, PP 16",
                        "DeepSeek-V3's dispatch: top-8 of 256 experts on 8 nodes",
                        "def forward(ctx: Any, q: torch.Tensor"))
    assert "/work/" not in text and "site-packages" not in text
    assert_chapter_complete(page, "Long sequences and many experts", 1)


def test_the_landing_page_links_chapter_12(offline_page, book_server):
    page = offline_page
    page.goto(f"{book_server}/intro.html")
    link = page.locator("a", has_text="Long sequences and many experts").first
    assert link.get_attribute("href").endswith(f"notebooks/{NOTEBOOK}.html")
