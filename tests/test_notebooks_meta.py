"""Every notebook carries its badge and setup cells stamped from course_lib/_about.py
and clean outputs; the chapter list of tools/notebooks.py is what the book and README
show."""

import re
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import notebooks  # noqa: E402  (tools/notebooks.py, the maintainers' tool)

PATHS = notebooks.notebook_paths()
STAMP = "run: .venv/bin/python tools/notebooks.py"
#: The addresses that open a notebook elsewhere: none may be linked before publishing.
LAUNCHERS = ("colab.research.google.com", "mybinder.org")
PUBLISHED = "the course is published: its badges are wanted"


def test_there_are_notebooks():
    assert PATHS, "no notebooks found under notebooks/"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_badges_and_setup_cell_are_stamped(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    badge = nb.cells[1]
    assert notebooks.BADGE_TAG in badge.metadata.get("tags", [])
    name = notebooks.notebook_name(path)
    assert badge.source == notebooks.badge_cell_source(name), STAMP
    setup = nb.cells[2]
    assert setup.source == notebooks.setup_source(), STAMP
    assert f"@{notebooks.COLAB_REF}" in setup.source


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_outputs_are_committed_and_clean(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    checked = [c for c in code if "nbval-check-output" in c.metadata.get("tags", [])]
    assert checked and all(c.outputs for c in checked), (
        "execute the notebook and commit outputs")
    assert not any(o.output_type == "error" for c in code for o in c.outputs)
    # No function or class is defined in a notebook: the library computes, notebooks
    # teach. The one exception: the learner's stub (tag `exercise`) and its answer
    # (`solution`).
    for c in code:
        if {"exercise", "solution"} & set(c.metadata.get("tags", [])):
            continue
        for line in c.source.splitlines():
            assert not line.lstrip().startswith(("def ", "class ")), (
                f"{path.name}: define {line.strip()!r} in course_lib, not the notebook"
            )


def test_links_point_at_the_pinned_ref():
    url = notebooks.colab_url("02_memory_wall.ipynb")
    assert url.endswith(f"/blob/{notebooks.COLAB_REF}/notebooks/02_memory_wall.ipynb")
    assert notebooks.binder_url("02_memory_wall.ipynb").endswith(
        f"/{notebooks.COLAB_REF}?labpath=notebooks/02_memory_wall.ipynb"
    )


# --- Published or not: no link that strands a reader -------------------------------


def _markdown(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.skipif(notebooks.PUBLISHED, reason=PUBLISHED)
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_an_unpublished_notebook_links_no_colab_or_binder(path):
    text = _markdown(path)
    found = [site for site in LAUNCHERS if site in text]
    assert not found, f"{path.name} links {found} while PUBLISHED is False: {STAMP}"
    badge = nbformat.read(path, as_version=4).cells[1].source
    assert "bash scripts/build.sh" in badge and "jupyter lab notebooks/" in badge


@pytest.mark.skipif(notebooks.PUBLISHED, reason=PUBLISHED)
def test_the_unpublished_landing_page_links_no_colab_binder_or_repository():
    text = notebooks.INTRO.read_text(encoding="utf-8")
    found = [site for site in (*LAUNCHERS, notebooks.REPOSITORY) if site in text]
    assert not found, f"book/intro.md links {found} while PUBLISHED is False: {STAMP}"
    assert "Open in Colab" not in text and "bash scripts/build.sh" in text


def test_the_switch_decides_the_badge_cell(monkeypatch):
    for name in ("02_memory_wall.ipynb", "nl/kwantisatie.ipynb"):
        monkeypatch.setattr(notebooks, "PUBLISHED", True)
        assert notebooks.badge_cell_source(name) == notebooks.badges_markdown(name)
        monkeypatch.setattr(notebooks, "PUBLISHED", False)
        text = notebooks.badge_cell_source(name)
        assert not any(site in text for site in LAUNCHERS) and "http" not in text
    # Each edition says it in its own language.
    dutch, english = notebooks.RUN_LOCALLY["nl"], notebooks.RUN_LOCALLY["en"]
    assert notebooks.badge_cell_source("nl/kwantisatie.ipynb") == dutch
    assert "kloon je de repository" in dutch
    assert notebooks.badge_cell_source("04_quantizing_pi.ipynb") == english


def test_a_published_fork_gets_its_badges_back(tmp_path, monkeypatch):
    """With PUBLISHED = True the badges are back in notebooks and landing page."""
    (tmp_path / "nl").mkdir()
    for name in ("02_memory_wall.ipynb", "nl/kwantisatie.ipynb"):
        (tmp_path / name).write_bytes((notebooks.NOTEBOOK_DIR / name).read_bytes())
    monkeypatch.setattr(notebooks, "NOTEBOOK_DIR", tmp_path)
    monkeypatch.setattr(notebooks, "PUBLISHED", True)
    for name in ("02_memory_wall.ipynb", "nl/kwantisatie.ipynb"):
        notebooks.stamp(tmp_path / name)
        badge = nbformat.read(tmp_path / name, as_version=4).cells[1]
        assert badge.source == notebooks.badges_markdown(name)
        assert notebooks.colab_url(name) in badge.source
        assert notebooks.stamp(tmp_path / name, write=False) is False  # idempotent
    intro = notebooks.intro_markdown(notebooks.INTRO.read_text(encoding="utf-8"))
    assert notebooks.colab_url("02_memory_wall.ipynb") in intro
    assert f"]({notebooks.REPOSITORY})" in intro and "Open in Colab" in intro


# --- The chapter list: one list, written everywhere ---------------------------------


def test_every_chapter_has_a_summary_a_time_and_earlier_prerequisites():
    numbers = [c.number for c in notebooks.CHAPTERS]
    assert numbers == list(range(1, len(numbers) + 1))
    for c in (*notebooks.CHAPTERS, *notebooks.EDITIONS):
        summary = c.summary
        assert summary and "\n" not in summary and not summary.endswith("."), c.title
        assert 60 <= len(summary) <= 240, f"{c.title}: one line, not {summary!r}"
        low, high = c.minutes
        assert 15 <= low < high <= 180, f"{c.title}: {c.minutes}"
        assert low % 5 == 0 == high % 5, f"{c.title}: {c.minutes}, rounded to 5 min"
    for c in notebooks.CHAPTERS:
        assert list(c.needs) == sorted(set(c.needs)), c.title
        assert all(1 <= n < c.number for n in c.needs), f"{c.title}: earlier ones only"


def test_the_landing_page_lists_every_chapter_with_its_facts():
    text = notebooks.INTRO.read_text(encoding="utf-8")
    assert notebooks.chapter_list_markdown() in text, STAMP
    assert notebooks.how_to_use_markdown() in text
    assert notebooks.source_markdown() in text
    for c in notebooks.CHAPTERS:
        assert f"**[{c.title}](notebooks/{c.notebook})**: {c.summary}." in text
        assert f"*About {c.minutes[0]}–{c.minutes[1]} min;" in text
        for n in c.needs:
            assert f"[{n}](notebooks/{notebooks.CHAPTERS[n - 1].notebook})" in text
    for e in notebooks.EDITIONS:
        assert f"**[{e.title}](notebooks/{e.notebook})**: {e.summary}." in text
        assert e.welcome in text
    # The times say what they are.
    assert notebooks.TIMES_NOTE in text and "estimates" in notebooks.TIMES_NOTE
    assert "[glossary](glossary.md)" in text
    assert "[bibliography](bibliography.md)" in text


def test_the_needs_read_as_a_sentence():
    one, two = notebooks.CHAPTERS[3], notebooks.CHAPTERS[4]  # chapters 4 and 5
    needs = notebooks._needs_markdown
    assert needs(notebooks.CHAPTERS[0]) == "no earlier chapter needed"
    assert needs(one) == "builds on chapter [3](notebooks/03_number_formats.ipynb)"
    assert re.fullmatch(r"builds on chapters \[1\]\(\S+\) and \[4\]\(\S+\)", needs(two))


def test_the_landing_page_names_the_licence_and_the_repository():
    licence = (notebooks.ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License\n")
    assert "Copyright (c) 2026 The course authors" in licence
    pyproject = (notebooks.ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r"^license = .*\bMIT\b", pyproject, re.MULTILINE)
    text = notebooks.INTRO.read_text(encoding="utf-8")
    assert f"[MIT License]({notebooks.MIT_LICENSE_URL})" in text and "LICENSE" in text
    assert ("](" + notebooks.REPOSITORY + ")" in text) == notebooks.PUBLISHED


#: The book's code column holds about 88 characters; longer lines scroll sideways.
MAX_CODE_LINE = 88

#: An absolute path of the machine that executed the notebook (home, temporary, system).
ABSOLUTE_PATH = re.compile(
    r"(?<![\w.])(/root|/home/\w+|/tmp|/Users/\w+|/var/folders|[A-Z]:\\\\Users)[/\\]")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_code_lines_fit_the_books_column(path):
    nb = nbformat.read(path, as_version=4)
    long = [(i, line) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for line in c.source.splitlines() if len(line) > MAX_CODE_LINE]
    assert not long, (f"{path.name}: {len(long)} code line(s) over {MAX_CODE_LINE} "
                      f"characters, e.g. cell {long[0][0]}: {long[0][1]!r}")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_outputs_show_no_path_of_the_build_machine(path):
    nb = nbformat.read(path, as_version=4)
    found = [(i, m.group(0)) for i, c in enumerate(nb.cells) if c.cell_type == "code"
             for text in notebooks.output_texts(c)
             for m in [ABSOLUTE_PATH.search(text)] if m]
    assert not found, (f"{path.name}: output of cell {found[0][0]} shows the machine's "
                       f"path {found[0][1]!r}...")


def test_the_path_pattern_catches_home_and_temporary_folders():
    for text in ("Saved to /root/.cache/course_lib/x", "at /home/ana/.cache",
                 "in /tmp/abc/model", r"C:\\Users\\ana\\x"):
        assert ABSOLUTE_PATH.search(text), text
    for text in ("window 128 / stride 64", "3 / 4 of the bytes",
                 "https://example.org/root/x", "N/A"):
        assert not ABSOLUTE_PATH.search(text), text


def test_the_chapter_list_is_written_once():
    """_toc.yml and the README's table are what tools/notebooks.py writes from PARTS."""
    assert notebooks.stamp_lists(write=False) == [], STAMP
    toc = notebooks.TOC.read_text(encoding="utf-8")
    files = re.findall(r"- file: notebooks/(\S+)", toc)
    assert files == [c.notebook.removesuffix(".ipynb") for c in notebooks.CHAPTERS] + [
        e.notebook.removesuffix(".ipynb") for e in notebooks.EDITIONS]
    assert re.search(r"- file: glossary\n\s+- file: bibliography\n", toc)
    readme = notebooks.README.read_text(encoding="utf-8")
    for c in notebooks.CHAPTERS:
        needs = ", ".join(map(str, c.needs)) or "–"
        row = (f"| {c.number} | [{c.title}](notebooks/{c.notebook}) | {c.summary} "
               f"| {c.minutes[0]}–{c.minutes[1]} min | {needs} |")
        assert row in readme


def test_a_hand_edited_toc_is_reported(tmp_path, monkeypatch):
    toc = tmp_path / "_toc.yml"
    edited = notebooks.toc_yaml().replace("notebooks/07_gptq\n", "")
    toc.write_text(edited, encoding="utf-8")
    monkeypatch.setattr(notebooks, "TOC", toc)
    monkeypatch.setattr(notebooks, "ROOT", tmp_path.parent)
    readme = tmp_path / "README.md"
    readme.write_text(notebooks.README.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(notebooks, "README", readme)
    assert notebooks.stamp_lists(write=False) == [f"{tmp_path.name}/_toc.yml"]
    notebooks.stamp_lists()
    assert "notebooks/07_gptq" in toc.read_text(encoding="utf-8")


def test_a_hand_edited_landing_page_is_reported(tmp_path, monkeypatch):
    intro = tmp_path / "intro.md"
    text = notebooks.INTRO.read_text(encoding="utf-8")
    edited = text.replace(notebooks.CHAPTERS[1].summary, "Memory.")
    intro.write_text(edited, encoding="utf-8")
    assert notebooks.stamp_intro(intro, write=False) is True
    notebooks.stamp_intro(intro)
    assert intro.read_text(encoding="utf-8") == notebooks.intro_markdown(text) == text


def test_pyproject_names_the_same_repository():
    pyproject = (notebooks.ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'Repository = "{notebooks.REPOSITORY}"' in pyproject, (
        "set [project.urls] Repository in pyproject.toml to _about.py's REPOSITORY")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_nbval_reads_tags_not_comments(path):
    """Test machinery stays off the page: nbval's cell tags, not '# NBVAL_...' lines."""
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        marks = [ln for ln in c.source.splitlines() if ln.strip().startswith("# NBVAL_")]
        assert not marks, f"{path.name} cell {c.id}: tag it 'nbval-check-output' instead"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_every_figure_is_numbered_captioned_and_described(path):
    """A plot's cell names the figure, captions it and gives its image a sentence of alt text."""
    nb = nbformat.read(path, as_version=4)
    names = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        shown = [o for o in c.outputs if o.output_type in ("display_data", "execute_result")]
        images = [o for o in shown if "image/png" in o.get("data", {})]
        figure = c.metadata.get("mystnb", {}).get("figure")
        if not images:
            assert not figure, f"{path.name} cell {c.id}: a caption without a figure"
            continue
        assert figure, f"{path.name} cell {c.id}: caption the figure (mystnb.figure)"
        # myst-nb makes a figure of every displayed output of the cell: only the plot.
        assert len(shown) == 1, f"{path.name} cell {c.id}: display tables in another cell"
        alt = c.metadata["mystnb"].get("image", {}).get("alt", "")
        assert figure.get("name", "").startswith("fig-"), (path.name, c.id)
        assert len(figure.get("caption", "").split()) >= 6, (path.name, c.id)
        a_path = re.search(r"\.(png|jpe?g|svg)\b|^\S*/\S*$", alt)
        assert len(alt.split()) >= 6 and not a_path, (path.name, c.id)
        names.append(figure["name"])
    assert len(names) == len(set(names)), f"{path.name}: two figures share a name"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_every_figure_is_referenced_from_the_text(path):
    """The text points at each figure by its number ({numref}`fig-...`, "Fig. 3" in the
    book), so that a reader knows which plot a sentence reads."""
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    names = [c.metadata["mystnb"]["figure"]["name"] for c in nb.cells
             if c.cell_type == "code" and c.metadata.get("mystnb", {}).get("figure")]
    unreferenced = [n for n in names if "{numref}`" + n + "`" not in text]
    assert not unreferenced, f"{path.name}: no {{numref}} to {unreferenced}"


#: A dict as Python prints it: ``{'key': `` or ``{"key": ``.
RAW_DICT = re.compile(r"""\{(['"])[^'"]+\1: """)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_no_output_prints_a_raw_dict(path):
    """What a reader sees is a sentence, a table or a figure (issue 42, item 6): no printed
    output, nor the text of a result, is a dict as Python writes it (errors excepted)."""
    nb = nbformat.read(path, as_version=4)
    found = []
    for k, c in enumerate(nb.cells):
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            data = o.get("data", {})
            if o.output_type == "error" or "text/html" in data or "image/png" in data:
                continue
            text = o.get("text", "") + data.get("text/plain", "")
            if RAW_DICT.search(text):
                found.append(f"cell {k}: {RAW_DICT.search(text).group(0)}...")
    assert not found, f"{path.name}: {found}"


# --- What the book shows: citations, collapsed answers, a quiet setup ----------------

BIB = notebooks.ROOT / "book" / "references.bib"


def _bibliography_keys() -> list[str]:
    """The keys of book/references.bib, less those that are the name of what they cite.

    ``bitsandbytes`` is the library's name as well as its entry's key: a key that its own
    entry's title names as a word may appear as that name.
    """
    keys = []
    for entry in re.split(r"\n(?=@)", BIB.read_text(encoding="utf-8")):
        m = re.match(r"@\s*(\w+)\s*\{\s*([^,\s]+)\s*,", entry)
        if not m or m.group(1).lower() in ("comment", "preamble", "string"):
            continue
        title = re.search(r"^\s*title\s*=\s*(.*)$", entry, re.MULTILINE | re.IGNORECASE)
        words = re.findall(r"[\w-]+", (title.group(1) if title else "").replace("{", ""))
        if m.group(2) not in words:
            keys.append(m.group(2))
    return keys


BIB_KEYS = _bibliography_keys()
#: A key as a word of its own, not part of an address, a path or a longer name.
BIB_KEY = re.compile(r"(?<![\w/.-])(" + "|".join(map(re.escape, BIB_KEYS)) + r")(?![\w-])")


def test_the_bibliography_keys_are_read_and_few_are_names():
    assert len(BIB_KEYS) > 100 and "narayanan2021megatron" in BIB_KEYS
    assert {"nvidia_h100", "rajbhandari2020zero"} <= set(BIB_KEYS)
    assert "bitsandbytes" not in BIB_KEYS  # the library's name: "8-bit Adam (bitsandbytes)"
    for text in ("source: narayanan2021megatron", "<td>nvidia_h100</td>", "(nvidia_l40s)"):
        assert BIB_KEY.search(text), text
    for text in ("see Narayanan et al. (2021)", "nvidia_h100x", "docs/nvidia_h100.html"):
        assert not BIB_KEY.search(text), text


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_outputs_cite_sources_never_by_their_bibliography_key(path):
    """A reader meets "Narayanan et al. (2021)" (tables.cite), not narayanan2021megatron."""
    nb = nbformat.read(path, as_version=4)
    found = [(c.get("id"), m.group(0)) for c in nb.cells if c.cell_type == "code"
             for text in notebooks.output_texts(c) for m in BIB_KEY.finditer(text)]
    assert not found, (f"{path.name}: {len(found)} bibliography key(s) in outputs, e.g. "
                       f"{found[:3]}: cite them (course_lib.base.tables.cite)")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_a_worked_solution_collapses_with_its_output(path):
    """The book hides a solution's code and output behind one button (myst-nb's hide-cell),
    JupyterLab both (source_hidden, outputs_hidden): a prediction's answer is its output."""
    nb = nbformat.read(path, as_version=4)
    language = notebooks.notebook_language(notebooks.notebook_name(path))
    solutions = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    for cell in solutions:
        assert notebooks.HIDE_CELL in cell.metadata.tags, (cell.id, STAMP)
        assert cell.metadata.jupyter == {"source_hidden": True, "outputs_hidden": True}
        assert cell.metadata.get("collapsed") is True, cell.id
        assert cell.metadata.mystnb == notebooks.SOLUTION_PROMPTS[language], cell.id


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_the_setup_cell_is_one_line_in_the_book_and_still_runs(path):
    nb = nbformat.read(path, as_version=4)
    setup = nb.cells[2]
    language = notebooks.notebook_language(notebooks.notebook_name(path))
    assert notebooks.SETUP_TAG in setup.metadata.tags
    assert notebooks.HIDE_CELL in setup.metadata.tags, STAMP  # code and report collapsed
    assert not {t for t in setup.metadata.tags if t.startswith(("remove", "skip"))}
    prompts = notebooks.SETUP_PROMPTS[language]
    assert setup.metadata.mystnb == prompts
    assert "\n" not in prompts["code_prompt_show"] and len(prompts["code_prompt_show"]) < 90
    assert "Colab" in prompts["code_prompt_show"]
    # It runs: in the book's build, under nbval and on Colab, where a learner sees it.
    assert setup.outputs and "jupyter" not in setup.metadata


def test_the_collapsing_is_stamped_and_idempotent(tmp_path, monkeypatch):
    for path in PATHS:
        assert notebooks.stamp(path, write=False) is False, f"{path.name}: {STAMP}"
    copy = tmp_path / "04_quantizing_pi.ipynb"
    nb = nbformat.read(notebooks.NOTEBOOK_DIR / copy.name, as_version=4)
    monkeypatch.setattr(notebooks, "NOTEBOOK_DIR", tmp_path)
    for cell in nb.cells:  # as before the book collapsed outputs
        cell.metadata.pop("mystnb", None)
        cell.metadata.pop("collapsed", None)
        tags = cell.metadata.get("tags", [])
        if notebooks.HIDE_CELL in tags:
            tags.remove(notebooks.HIDE_CELL)
        cell.metadata.get("jupyter", {}).pop("outputs_hidden", None)
    nbformat.write(nb, copy)
    assert notebooks.stamp(copy) is True and notebooks.stamp(copy) is False
    stamped = nbformat.read(copy, as_version=4)
    solutions = [c for c in stamped.cells if "solution" in c.metadata.get("tags", [])]
    assert solutions and all(c.metadata.tags.count(notebooks.HIDE_CELL) == 1
                             and c.metadata.jupyter["outputs_hidden"] for c in solutions)
    assert notebooks.HIDE_CELL in stamped.cells[2].metadata.tags
