"""The English edition's glossary: book/glossary.md defines the course's terms, the book
lists it next to the bibliography, every {term} a notebook links is defined there, and
every term is linked from at least one chapter (once per chapter, at its first use)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"
sys.path.insert(0, str(ROOT / "tools"))
import notebooks  # noqa: E402  (tools/notebooks.py, the maintainers' tool)

#: {term}`perplexity` and {term}`Perplexity <perplexity>`: the target is the last part.
TERM_ROLE = re.compile(r"\{term\}`(?:[^`<]*<)?([^`<>]+?)>?`")
#: The terms the course cannot do without (issue 28), whatever else the glossary holds.
REQUIRED = (
    "absmax", "activation checkpointing", "all-reduce", "arithmetic intensity",
    "BF16", "bucket", "calibration data", "causal LM", "data parallelism", "DDP",
    "E4M3", "E5M2", "FSDP", "GPTQ", "gradient accumulation", "Hessian", "MFU",
    "mixed precision", "NF4", "optimizer states", "perplexity", "quantization",
    "reduce-scatter", "ring all-reduce", "roofline", "sharding", "sparsity",
    "subnormal", "tensor core", "ULP", "Wanda", "ZeRO", "zero point",
)
CHAPTERS = [notebooks.NOTEBOOK_DIR / c.notebook for c in notebooks.CHAPTERS]


def glossary_entries(text: str) -> list[tuple[list[str], str]]:
    """(term names, definition) of each entry of a page's ```{glossary} directive."""
    body = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    assert body, "book/glossary.md has no ```{glossary} directive"
    entries: list[tuple[list[str], str]] = []
    names: list[str] = []
    for line in body.group(1).splitlines():
        if not line.strip() or line.startswith(":"):
            continue
        if line[0].isspace():
            if names:
                entries.append((names, ""))
                names = []
            names_so_far, text_so_far = entries[-1]
            entries[-1] = (names_so_far, f"{text_so_far} {line.strip()}".strip())
        else:
            names.append(line.strip())
    assert not names, f"terms without a definition: {names}"
    return entries


ENTRIES = glossary_entries(GLOSSARY.read_text(encoding="utf-8"))
DEFINED = {name.casefold() for names, _ in ENTRIES for name in names}


def linked_terms(path: Path) -> list[str]:
    """The targets of every {term} role in a notebook's markdown cells, in order."""
    nb = nbformat.read(path, as_version=4)
    return [t for c in nb.cells if c.cell_type == "markdown"
            for t in TERM_ROLE.findall(c.source)]


def test_the_role_pattern_reads_both_forms():
    text = ("{term}`perplexity` and {term}`Buckets <bucket>` and "
            "{term}`2:4 pattern <2:4 sparsity>`")
    assert TERM_ROLE.findall(text) == ["perplexity", "bucket", "2:4 sparsity"]


def test_the_reader_finds_terms_and_definitions():
    page = ("```{glossary}\n:sorted:\n\nE4M3\nE5M2\n  Two formats.\n  Of FP8.\n\n"
            "ULP\n  A gap.\n```")
    assert glossary_entries(page) == [(["E4M3", "E5M2"], "Two formats. Of FP8."),
                                      (["ULP"], "A gap.")]


def test_the_glossary_is_in_the_references_next_to_the_bibliography():
    toc = notebooks.toc_yaml()
    assert toc.endswith('  - caption: "References"\n    chapters:\n'
                        "      - file: glossary\n      - file: bibliography\n")
    assert notebooks.TOC.read_text(encoding="utf-8") == toc, "run: tools/notebooks.py"
    assert GLOSSARY.read_text(encoding="utf-8").startswith("# Glossary\n")


def test_the_glossary_holds_the_course_terms():
    assert 30 <= len(ENTRIES) <= 50, f"{len(ENTRIES)} entries: about 30 to 45"
    names = [name.casefold() for names, _ in ENTRIES for name in names]
    assert len(names) == len(set(names)), "a term is defined twice"
    missing = [t for t in REQUIRED if t.casefold() not in DEFINED]
    assert not missing, f"the glossary lacks {missing}"
    assert ":sorted:" in GLOSSARY.read_text(encoding="utf-8")


@pytest.mark.parametrize("names, definition", ENTRIES, ids=lambda x: str(x)[:30])
def test_each_definition_is_a_sentence_or_two(names, definition):
    prose = re.sub(r"\(\[Chapter \d+\]\([^)]*\)\)$", "", definition).strip()
    sentences = [s for s in re.split(r"(?<=\.)\s+(?=[A-Z])", prose) if s]
    assert prose.endswith(".") and len(sentences) <= 2, f"{names}: {prose!r}"
    assert 40 <= len(prose) <= 330, f"{names}: {len(prose)} characters"
    teaches = r"\(\[Chapter (\d+)\]\(notebooks/\d\d_\w+\.ipynb\)\)$"
    assert re.search(teaches, definition), (
        f"{names}: end with the chapter that teaches it, ([Chapter N](notebooks/...))")


def test_every_term_a_notebook_links_is_defined():
    undefined = [f"{path.name}: {t}" for path in notebooks.notebook_paths()
                 for t in linked_terms(path) if t.casefold() not in DEFINED]
    assert not undefined, "{term} targets missing from book/glossary.md:\n" + "\n".join(
        undefined)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_a_chapter_links_a_term_once(path):
    terms = [t.casefold() for t in linked_terms(path)]
    twice = sorted({t for t in terms if terms.count(t) > 1})
    assert not twice, f"{path.name} links {twice} more than once: only the first use"


def test_every_glossary_term_is_used_by_a_chapter():
    used = {t.casefold() for path in CHAPTERS for t in linked_terms(path)}
    unused = [names for names, _ in ENTRIES if not {n.casefold() for n in names} & used]
    assert not unused, (f"no chapter links {unused}: make its first use in a chapter "
                        "{term}`...`, or drop it from the glossary")
