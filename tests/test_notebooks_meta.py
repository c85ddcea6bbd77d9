"""Every notebook carries its badges and setup cell stamped from course_lib/_about.py, and clean outputs."""

import re
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import notebooks  # noqa: E402  (tools/notebooks.py, the maintainers' tool)

PATHS = notebooks.notebook_paths()


def test_there_are_notebooks():
    assert PATHS, "no notebooks found under notebooks/"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_badges_and_setup_cell_are_stamped(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    badge = nb.cells[1]
    assert badge.source == notebooks.badges_markdown(notebooks.notebook_name(path)), "run: .venv/bin/python tools/notebooks.py"
    setup = nb.cells[2]
    assert setup.source == notebooks.setup_source(), "run: .venv/bin/python tools/notebooks.py"
    assert f"@{notebooks.COLAB_REF}" in setup.source


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_outputs_are_committed_and_clean(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs for c in code if "NBVAL_CHECK_OUTPUT" in c.source), "execute the notebook and commit outputs"
    assert not any(o.output_type == "error" for c in code for o in c.outputs)
    # No function or class is defined in a notebook: the library computes, notebooks teach. The one
    # exception: the learner's stub (cell tag `exercise`) and its worked answer (tag `solution`).
    for c in code:
        if {"exercise", "solution"} & set(c.metadata.get("tags", [])):
            continue
        for line in c.source.splitlines():
            assert not line.lstrip().startswith(("def ", "class ")), (
                f"{path.name}: define {line.strip()!r} in course_lib, not in the notebook"
            )


def test_links_point_at_the_pinned_ref():
    url = notebooks.colab_url("02_memory_wall.ipynb")
    assert url.endswith(f"/blob/{notebooks.COLAB_REF}/notebooks/02_memory_wall.ipynb")
    assert notebooks.binder_url("02_memory_wall.ipynb").endswith(
        f"/{notebooks.COLAB_REF}?labpath=notebooks/02_memory_wall.ipynb"
    )


def test_landing_page_lists_every_chapter():
    text = notebooks.INTRO.read_text(encoding="utf-8")
    assert notebooks.chapter_list_markdown() in text, "run: .venv/bin/python tools/notebooks.py"
    for number, title, name in notebooks.CHAPTERS:
        assert title in text


#: The book's code column holds about 88 characters; longer lines scroll sideways.
MAX_CODE_LINE = 88

#: An absolute path of the machine that executed the notebook (home, temporary or system folders).
ABSOLUTE_PATH = re.compile(r"(?<![\w.])(/root|/home/\w+|/tmp|/Users/\w+|/var/folders|[A-Z]:\\\\Users)[/\\]")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_code_lines_fit_the_books_column(path):
    nb = nbformat.read(path, as_version=4)
    long = [(i, line) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for line in c.source.splitlines() if len(line) > MAX_CODE_LINE]
    assert not long, f"{path.name}: {len(long)} code line(s) over {MAX_CODE_LINE} characters, e.g. cell {long[0][0]}: {long[0][1]!r}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_outputs_show_no_path_of_the_build_machine(path):
    nb = nbformat.read(path, as_version=4)
    found = [(i, m.group(0)) for i, c in enumerate(nb.cells) if c.cell_type == "code"
             for text in notebooks.output_texts(c) for m in [ABSOLUTE_PATH.search(text)] if m]
    assert not found, f"{path.name}: output of cell {found[0][0]} shows the machine's path {found[0][1]!r}..."


def test_the_path_pattern_catches_home_and_temporary_folders():
    for text in ("Saved to /root/.cache/course_lib/x", "at /home/ana/.cache", "in /tmp/abc/model",
                 r"C:\\Users\\ana\\x"):
        assert ABSOLUTE_PATH.search(text), text
    for text in ("window 128 / stride 64", "3 / 4 of the bytes", "https://example.org/root/x", "N/A"):
        assert not ABSOLUTE_PATH.search(text), text


def test_the_chapter_list_is_written_once():
    """_toc.yml and the README's table are what tools/notebooks.py writes from its one list, PARTS."""
    assert notebooks.stamp_lists(write=False) == [], "run: .venv/bin/python tools/notebooks.py"
    toc = notebooks.TOC.read_text(encoding="utf-8")
    files = re.findall(r"- file: notebooks/(\S+)", toc)
    assert files == [n.removesuffix(".ipynb") for _, _, n in notebooks.CHAPTERS] + [
        n.removesuffix(".ipynb") for _, _, n, _ in notebooks.EDITIONS]
    readme = notebooks.README.read_text(encoding="utf-8")
    for number, title, name in notebooks.CHAPTERS:
        assert f"| {number} | [{title}](notebooks/{name}) | ready |" in readme


def test_a_hand_edited_toc_is_reported(tmp_path, monkeypatch):
    toc = tmp_path / "_toc.yml"
    toc.write_text(notebooks.toc_yaml().replace("notebooks/07_gptq\n", ""), encoding="utf-8")
    monkeypatch.setattr(notebooks, "TOC", toc)
    monkeypatch.setattr(notebooks, "ROOT", tmp_path.parent)
    readme = tmp_path / "README.md"
    readme.write_text(notebooks.README.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(notebooks, "README", readme)
    assert notebooks.stamp_lists(write=False) == [f"{tmp_path.name}/_toc.yml"]
    notebooks.stamp_lists()
    assert "notebooks/07_gptq" in toc.read_text(encoding="utf-8")


def test_pyproject_names_the_same_repository():
    pyproject = (notebooks.ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'Repository = "{notebooks.REPOSITORY}"' in pyproject, (
        "set [project.urls] Repository in pyproject.toml to course_lib/_about.py's REPOSITORY")
