"""Every comparative claim in a notebook's text stands next to an assertion.

A sentence such as "gradual pruning beats one shot" or "the GPU is 20× faster" is a claim
about measured values; the course backs each one with an ``assert`` in a code cell beside
it, so that a run which makes the sentence false fails instead of printing a page that
contradicts itself. "Beside it" means the code cell just before the sentence's markdown
cell, or one of the code cells right after it (up to the next markdown cell).

The patterns are deliberately narrow (comparatives of speed, quality and accuracy); a
sentence they catch that is not about values measured on the page (a paper's finding, a
question put to the reader) is allowed by an entry of ``ALLOWED``, which says why.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import notebooks  # noqa: E402  (tools/notebooks.py, the maintainers' tool)

#: Comparisons of measured values, in English and in the Dutch edition's words.
CLAIM = re.compile(
    r"\b(?:faster|slower|better|worse|cheaper)\s+than\b"
    r"|\b(?:beats|beating|outperform(?:s|ed|ing)?)\b"
    r"|\b(?:more|less)\s+accurate\b"
    r"|\d+(?:[.,]\d+)?\s*(?:×|x|times)\s+(?:faster|slower)\b"
    r"|\b(?:lower|higher)\s+(?:perplexity|loss|error|accuracy)\s+than\b"
    r"|\b(?:sneller|trager|langzamer|beter|slechter|nauwkeuriger)\s+dan\b",
    re.IGNORECASE)

#: (notebook, words of the sentence) -> why the sentence needs no assertion beside it.
ALLOWED: dict[tuple[str, str], str] = {
    ("03_number_formats.ipynb", "they run 16-bit matrix products many times faster than FP32"):
        "GPU tensor cores against FP32, from the cited datasheets: this page measures a CPU",
}

ASSERT = re.compile(r"^\s*assert\b", re.MULTILINE)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)  # fenced blocks and inline code
SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+|\n\s*\n|\n\s*[*-]\s+|\n#+\s")


def _text(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _sentences(markdown: str) -> list[str]:
    """The markdown's sentences, code removed and each on one line."""
    prose = CODE.sub(" ", markdown)
    return [" ".join(s.split()) for s in SENTENCE_END.split(prose) if s.strip()]


def _has_assert(cell: dict) -> bool:
    return cell["cell_type"] == "code" and bool(ASSERT.search(_text(cell)))


def _asserted(cells: list[dict], i: int) -> bool:
    """Whether the code cell just before cell ``i`` or a code cell after it asserts."""
    if i > 0 and _has_assert(cells[i - 1]):
        return True
    for cell in cells[i + 1:]:
        if cell["cell_type"] == "markdown":
            return False
        if _has_assert(cell):
            return True
    return False


def unasserted_claims(nb: dict, name: str,
                      allowed: dict[tuple[str, str], str] = ALLOWED) -> list[str]:
    """The comparative sentences of a notebook with no assertion beside them."""
    cells, found = nb["cells"], []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        claims = [s for s in _sentences(_text(cell)) if CLAIM.search(s)
                  and not any(nb_name == name and words in s
                              for nb_name, words in allowed)]
        if claims and not _asserted(cells, i):
            found += [f"{name} cell {i}: {s}" for s in claims]
    return found


def _cell(kind: str, source: str) -> dict:
    return {"cell_type": kind, "source": source, "metadata": {}}


def test_a_claim_without_an_assertion_fails():
    nb = {"cells": [_cell("markdown", "# A page"),
                    _cell("code", "x = measure()\nprint(x)"),
                    _cell("markdown", "Intro. BF16 is 3× faster than FP32 here.\n"),
                    _cell("code", "fig = plot(x)  # assert nothing"),
                    _cell("markdown", "## Next")]}
    (found,) = unasserted_claims(nb, "synthetic.ipynb")
    assert found == "synthetic.ipynb cell 2: BF16 is 3× faster than FP32 here."
    nb["cells"][3] = _cell("code", "fig = plot(x)\nassert x.bf16 < x.fp32 / 3")
    assert unasserted_claims(nb, "synthetic.ipynb") == []
    nb["cells"][3] = _cell("code", "fig = plot(x)")
    nb["cells"][1] = _cell("code", "x = measure()\nassert x.bf16 < x.fp32 / 3")
    assert unasserted_claims(nb, "synthetic.ipynb") == []


def test_the_patterns_catch_the_claims_and_leave_the_rest():
    for claim in ("Wanda beats magnitude pruning.", "It outperforms RTN.",
                  "gradual pruning is better than one shot", "a 2.5x faster step",
                  "the GPU is 40 times slower", "GPTQ is more accurate",
                  "lower perplexity than RTN", "BF16 is sneller dan FP32"):
        assert CLAIM.search(claim), claim
    for prose in ("a value larger than 65,504 overflows", "better still, measure it",
                  "the heartbeat of training", "`a.beats(b)` in code"):
        assert not any(CLAIM.search(s) for s in _sentences(prose)), prose


def test_an_allowed_sentence_passes_and_only_in_its_notebook():
    nb = {"cells": [_cell("markdown", "Big models beat small ones, says the paper.")]}
    allowed = {("a.ipynb", "Big models beat small ones"): "a paper's finding"}
    assert unasserted_claims(nb, "a.ipynb", allowed) == []
    nb["cells"][0]["source"] = "Big models beats small ones, says the paper."
    assert len(unasserted_claims(nb, "b.ipynb", allowed)) == 1


@pytest.mark.parametrize("path", notebooks.notebook_paths(), ids=notebooks.notebook_name)
def test_every_comparative_claim_is_asserted_beside_it(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = unasserted_claims(nb, notebooks.notebook_name(path))
    assert not found, ("comparative sentences with no assert in the code cell before them or "
                       "the code cells after them:\n" + "\n".join(found))


def test_every_allowed_sentence_still_exists():
    texts = {notebooks.notebook_name(p): " ".join(" ".join(_text(c).split()) for c in
                                                  json.loads(p.read_text("utf-8"))["cells"]
                                                  if c["cell_type"] == "markdown")
             for p in notebooks.notebook_paths()}
    stale = [key for key in ALLOWED if key[1] not in texts.get(key[0], "")]
    assert not stale, f"allowlist entries that no longer match a sentence: {stale}"
