"""The book's bibliography: book/references.bib is well formed, every key a chapter
cites exists, the list is labelled as the text cites it, and learner-facing text points
at the lecture notes and the bibliography, not at maintainers' files.

The .bib file is parsed here with a small brace-matching reader (no BibTeX dependency);
the book build (sphinxcontrib-bibtex, ``--warningiserror``) is the second check: it
fails on a cited key that is missing.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
BIB = BOOK / "references.bib"
sys.path.insert(0, str(ROOT / "tools"))
import notebooks  # noqa: E402  (tools/notebooks.py, the maintainers' tool)

NOTEBOOKS = notebooks.notebook_paths()  # the chapters and the editions

# Entry types pybtex's "plain" style can format, with the fields it cannot do without.
REQUIRED_BY_TYPE = {
    "article": {"journal"},
    "book": {"publisher"},
    "booklet": set(),
    "inbook": {"publisher"},
    "incollection": {"booktitle", "publisher"},
    "inproceedings": {"booktitle"},
    "manual": set(),
    "mastersthesis": {"school"},
    "misc": set(),
    "phdthesis": {"school"},
    "proceedings": set(),
    "techreport": {"institution"},
    "unpublished": {"note"},
}
NON_ENTRIES = {"comment", "string", "preamble"}

# {cite}`a`, {cite:p}`a,b`, {cite:t}`a`, {cite:ps}`a`, {cite:year}`a`, ... in MyST.
CITE_ROLE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]*)`")

# Learner-facing text speaks of "the lecture notes" and cites the bibliography; these
# are maintainers' words.
FORBIDDEN = re.compile(r"REFERENCES\.md|references file|course['’]s references|seed 00",
                       re.IGNORECASE)


def _matching_brace(text: str, start: int) -> int:
    """Index of the brace that closes the one at ``text[start]``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced braces from offset {start}")


def _split_top_level(body: str) -> list[str]:
    """Split an entry body at the commas that are not inside braces or quotes."""
    parts, depth, quoted, current = [], 0, False, []
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == '"' and depth == 0:
            quoted = not quoted
        if ch == "," and depth == 0 and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _field_value(raw: str) -> str:
    raw = raw.strip()
    if raw.startswith("{") and raw.endswith("}"):
        return raw[1:-1].strip()
    if raw.startswith('"') and raw.endswith('"'):
        return raw[1:-1].strip()
    return raw  # a number or a macro such as jul


def parse_bib(text: str) -> list[dict]:
    """Entries of a .bib text as dicts: ``type``, ``key``, ``fields``, ``line``."""
    entries = []
    for m in re.finditer(r"^@\s*(\w+)\s*\{", text, re.MULTILINE):
        kind = m.group(1).lower()
        if kind in NON_ENTRIES:
            continue
        open_brace = m.end() - 1
        body = text[open_brace + 1:_matching_brace(text, open_brace)]
        key, *raw_fields = _split_top_level(body)
        fields = {}
        for raw in raw_fields:
            name, sep, value = raw.partition("=")
            assert sep, f"entry {key!r}: cannot read field {raw[:40]!r}"
            fields[name.strip().lower()] = _field_value(value)
        entries.append({"type": kind, "key": key, "fields": fields,
                        "line": text.count("\n", 0, m.start()) + 1})
    return entries


ENTRIES = parse_bib(BIB.read_text(encoding="utf-8"))
KEYS = {e["key"] for e in ENTRIES}


def _markdown_sources() -> list[tuple[str, str]]:
    """(where, text) of every notebook's markdown cells and every page of the book."""
    sources = []
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "markdown":
                where = f"{notebooks.notebook_name(path)} cell {i}"
                sources.append((where, "".join(cell["source"])))
    for path in sorted(BOOK.glob("*.md")):
        sources.append((f"book/{path.name}", path.read_text(encoding="utf-8")))
    return sources


def _cited_keys(text: str) -> list[str]:
    return [key.strip() for roles in CITE_ROLE.findall(text) for key in roles.split(",")
            if key.strip()]


# --- (a) the .bib file ---------------------------------------------------------------

def test_the_bibliography_has_the_course_sources():
    assert len(ENTRIES) >= 25, f"only {len(ENTRIES)} entries in {BIB.name}"
    for key in ("devlin2019bert", "rajbhandari2020zero", "frantar2023gptq",
                "ieee754_2019", "zhao2023fsdp"):
        assert key in KEYS


def test_keys_are_unique_and_readable():
    keys = [e["key"] for e in ENTRIES]
    lower = [x.lower() for x in keys]
    duplicates = sorted({k for k in keys if lower.count(k.lower()) > 1})
    assert not duplicates, f"duplicate keys: {duplicates}"
    for key in keys:
        assert re.fullmatch(r"[a-z][a-z0-9_\-]*", key), (
            f"key {key!r}: use lower case, digits, _ and -")


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["key"])
def test_entry_is_complete(entry):
    fields, where = entry["fields"], f"{entry['key']} (line {entry['line']})"
    assert entry["type"] in REQUIRED_BY_TYPE, (
        f"{where}: @{entry['type']} cannot be formatted by the plain style")
    assert fields.get("author") or fields.get("organization"), (
        f"{where}: no author or organisation")
    assert fields.get("title"), f"{where}: no title"
    names = [n.strip() for n in re.split(r"\s+and\s+", fields.get("author", ""))]
    assert names[-1] != "others" or len(names) >= 3, (  # "A and others" cites as "A and others"
        f"{where}: name at least two authors before 'and others', so that it cites as 'et al.'")
    assert re.fullmatch(r"(19|20)\d\d", fields.get("year", "")), (
        f"{where}: year must be four digits")
    missing = REQUIRED_BY_TYPE[entry["type"]] - fields.keys()
    assert not missing, f"{where}: @{entry['type']} needs {sorted(missing)}"
    if "eprint" in fields:
        assert re.fullmatch(r"\d{4}\.\d{4,5}", fields["eprint"]), (
            f"{where}: eprint is not an arXiv id")
    if "url" in fields:
        assert fields["url"].startswith("https://"), f"{where}: url must be https"
    if "doi" in fields:
        assert fields["doi"].startswith("10."), (
            f"{where}: doi without the https://doi.org/ prefix")


def test_the_parser_reads_nested_braces():
    text = ("% comment\n@misc{a_1,\n  author = {{Hugging Face}},\n"
            "  title = {{BERT}: x, y},\n  year = 2020,\n}\n")
    (entry,) = parse_bib(text)
    assert entry["key"] == "a_1"
    assert entry["fields"] == {"author": "{Hugging Face}", "title": "{BERT}: x, y",
                               "year": "2020"}


# --- (b) every cited key exists, and the book is wired to the bibliography -----------

def test_the_cite_pattern_reads_every_role_form():
    text = "{cite:p}`a, b` and {cite:t}`c` and {cite}`d` and {cite:ps}`e`"
    assert _cited_keys(text) == ["a", "b", "c", "d", "e"]


def test_every_cited_key_is_in_the_bibliography():
    missing = [f"{where}: {key}" for where, text in _markdown_sources()
               for key in _cited_keys(text) if key not in KEYS]
    assert not missing, ("cited keys missing from book/references.bib:\n"
                         + "\n".join(missing))


def test_the_book_builds_the_bibliography_page():
    config = (BOOK / "_config.yml").read_text(encoding="utf-8")
    assert re.search(r"^bibtex_bibfiles:.*references\.bib", config, re.MULTILINE)
    assert "bibtex_reference_style: author_year" in config
    toc = (BOOK / "_toc.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s*- file: bibliography\s*$", toc, re.MULTILINE)
    page = (BOOK / "bibliography.md").read_text(encoding="utf-8")
    assert page.startswith("# Bibliography")
    assert re.search(r"```\{bibliography\}\s*\n:all:\s*\n```", page), (
        "list every entry, cited or not yet")
    assert "still being written" not in page


# --- (b2) the bibliography is labelled as the text cites it --------------------------

#: A label: the authors as a parenthetical citation names them, a comma, the year, and
#: a letter where two entries would share a label.
LABEL = re.compile(r"(?P<authors>\S.*), (?P<year>(19|20)\d\d)(?P<letter>[a-z]?)")


@pytest.fixture(scope="module")
def citations():
    """book/_ext/course_citations.py, imported as the book build imports it."""
    pytest.importorskip("sphinxcontrib.bibtex")
    sys.path.insert(0, str(BOOK / "_ext"))
    try:
        import course_citations
    finally:
        sys.path.remove(str(BOOK / "_ext"))
    return course_citations


@pytest.fixture(scope="module")
def labels(citations):
    """{key: label} of every entry, in the order of the bibliography page."""
    from pybtex.database import parse_file

    style = citations.CoursePlainStyle()
    entries = style.sort(parse_file(str(BIB)).entries.values())
    return dict(zip([e.key for e in entries], style.format_labels(entries)))


def test_the_book_uses_the_author_year_labels():
    config = (BOOK / "_config.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s+bibtex_default_style: course_plain\s*$", config,
                     re.MULTILINE)
    assert re.search(r"^\s+bibtex_reference_style: author_year_round\s*$", config,
                     re.MULTILINE)


def test_entries_are_labelled_as_the_text_cites_them(labels):
    assert labels["devlin2019bert"] == "Devlin et al., 2019"  # four authors
    assert labels["frantar2022obc"] == "Frantar and Alistarh, 2022"  # two
    assert labels["goldberg1991floating"] == "Goldberg, 1991"  # one
    assert labels["ieee754_2019"] == "IEEE Computer Society, 2019"  # an organisation
    assert len(labels) == len(KEYS)
    assert len(set(labels.values())) == len(labels), "labels are unique"
    for key, label in labels.items():
        m = LABEL.fullmatch(label)
        assert m, f"{key}: label {label!r} is not 'Authors, year'"
        entry = next(e for e in ENTRIES if e["key"] == key)
        assert m["year"] == entry["fields"]["year"], f"{key}: {label!r}"
        assert "{" not in label and "}" not in label, f"{key}: braces in {label!r}"


def test_a_letter_only_where_two_entries_would_share_a_label(labels):
    plain = {}
    for key, label in labels.items():
        m = LABEL.fullmatch(label)
        plain.setdefault(f"{m['authors']}, {m['year']}", []).append(m["letter"])
    for label, letters in plain.items():
        expected = [chr(ord("a") + i) for i in range(len(letters))]
        expected = [""] if len(letters) == 1 else expected
        assert letters == expected, f"{label}: letters {letters}"
    assert labels["ocp2023ofp8"].endswith("2023a")
    assert labels["ocp2023mx"].endswith("2023b")


def test_the_list_is_sorted_by_author(labels):
    authors = [LABEL.fullmatch(x)["authors"].casefold() for x in labels.values()]
    firsts = [a.split(" and ")[0].split(" et al.")[0].split(",")[0] for a in authors]
    assert firsts == sorted(firsts), "sorted by first author (braces of {AMD} ignored)"


def test_citations_in_the_text_write_the_labels_year(citations):
    """The in-text templates read the year, letter included, from the entry's label."""
    style = citations.RoundAuthorYearStyle()

    def nodes(template):
        yield template
        for child in getattr(template, "children", []):
            yield from nodes(child)

    for role in ("p", "t", "ps", "ts", "year", "yearpar"):
        template = style.role_style[role].inner(role)
        names = [getattr(n, "f", None) for n in nodes(template)]
        assert citations.label_year.f in names, role
        assert citations.year.f not in names, f"{role}: the year without its letter"


# --- (c) learner-facing text ---------------------------------------------------------

def _cell_texts(cell: dict) -> list[str]:
    """A cell's source and, for code cells, the text of its committed outputs."""
    return ["".join(cell["source"]), *notebooks.output_texts(cell)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_speak_of_the_lecture_notes(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    hits = [f"cell {i} ({cell['cell_type']}): "
            f"...{text[max(0, m.start() - 30):m.end() + 30]!r}..."
            for i, cell in enumerate(nb["cells"])
            if cell["cell_type"] in ("markdown", "code")
            for text in _cell_texts(cell) for m in FORBIDDEN.finditer(text)]
    assert not hits, (f"{path.name}: say 'the lecture notes' and cite the "
                      "bibliography, not the seeds or the maintainers' references "
                      "file:\n" + "\n".join(hits))
