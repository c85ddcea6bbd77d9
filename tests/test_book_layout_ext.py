"""book/_ext/course_reading.py: the rules that arrange a chapter's page in the book.

The folding of checks is tested on small cells and on every cell of the course's notebooks
(nothing lost, nothing left in view that the rule takes); the run line and the quiz answers
on their own; and the whole arrangement on a one-notebook book built here with Sphinx and
myst-nb, warnings as errors, as the course's book is built (a few seconds). The built book
itself is read in chromium by tests/browser/test_book_reading.py.
"""

from __future__ import annotations

import ast
import html
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest
from docutils import nodes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_reading as reading  # noqa: E402  (book/_ext/course_reading.py)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("**/*.ipynb"))


def lines(text: str) -> Counter:
    return Counter(line for line in text.splitlines() if line.strip())


# ---------------------------------------------------------------------------------------
# Checks folded
# ---------------------------------------------------------------------------------------

def test_trailing_asserts_and_their_comment_fold_below_the_code():
    source = ("x = compute()\n"
              "print(x)\n"
              "\n"
              "# the library agrees\n"
              "assert x == library(), (\n"
              "    \"differs\")\n"
              "assert x > 0  # positive\n")
    folded = reading.fold_checks(source)
    assert folded.shown == "x = compute()\nprint(x)"
    assert folded.checks == ("# the library agrees\nassert x == library(), (\n"
                             "    \"differs\")\nassert x > 0  # positive")
    assert folded.count == 2


def test_an_assert_in_the_middle_leaves_the_code_around_it_in_order():
    source = "a = 1\nassert a == 1\nb = a + 1\n\n\nassert b == 2\nprint(b)\n"
    folded = reading.fold_checks(source)
    assert folded.shown == "a = 1\nb = a + 1\n\n\nprint(b)"
    assert folded.checks == "assert a == 1\nassert b == 2"
    assert folded.count == 2


def test_no_blank_line_is_doubled_where_checks_went():
    source = "a = 1\n\nassert a\n\nb = 2\n"
    assert reading.fold_checks(source).shown == "a = 1\n\nb = 2"


def test_a_loop_of_asserts_folds_whole():
    only = "for m in ms:  # every method\n    assert ok(m), m\n"
    folded = reading.fold_checks("r = run()\n" + only)
    assert folded.shown == "r = run()" and folded.checks == only.rstrip("\n")
    assert folded.count == 1


def test_a_loop_that_does_more_keeps_its_code_and_lists_its_asserts_under_its_header():
    folded = reading.fold_checks("for m in ms:\n    assert ok(m)\n    print(m)\n")
    assert folded.shown == "for m in ms:\n    print(m)"
    assert folded.checks == "for m in ms:\n    assert ok(m)" and folded.count == 1
    source = ("rows = []\n"
              "for m in ms:  # each method\n"
              "    x = f(m)\n"
              "    # positive\n"
              "    assert x > 0\n"
              "    if x > 1:\n"
              "        assert g(x)\n"
              "    rows.append(x)\n"
              "assert rows\n")
    folded = reading.fold_checks(source)
    assert folded.shown == "rows = []\nfor m in ms:  # each method\n    x = f(m)\n" \
        "    rows.append(x)"
    assert folded.checks == ("for m in ms:  # each method\n    ...\n    # positive\n"
                             "    assert x > 0\n    if x > 1:\n        assert g(x)\n"
                             "assert rows")
    assert folded.count == 3


def test_nested_loops_write_each_header_once_and_mark_the_code_they_skip():
    source = ("for a in A:\n"
              "    for b in B:\n"
              "        y = a * b\n"
              "        assert y\n"
              "        assert -y\n"
              "    z = 1\n"
              "    assert z\n")
    folded = reading.fold_checks(source)
    assert folded.shown == "for a in A:\n    for b in B:\n        y = a * b\n    z = 1"
    assert folded.checks == ("for a in A:\n    for b in B:\n        ...\n"
                             "        assert y\n        assert -y\n    ...\n    assert z")
    assert folded.count == 3
    assert reading.is_check(ast.parse(folded.checks).body[0])


def test_asserts_in_an_else_a_function_or_a_block_of_nothing_else_stay():
    branches = "if a:\n    x = 1\n    assert x\nelse:\n    y = 2\n    assert y\n"
    folded = reading.fold_checks(branches)
    assert folded.shown == "if a:\n    x = 1\nelse:\n    y = 2\n    assert y"
    assert folded.count == 1
    assert reading.fold_checks("def f():\n    x = 1\n    assert x\n") is None
    assert reading.fold_checks("for m in ms:\n    x = f(m); assert x\n") is None


def test_an_if_of_asserts_folds_but_an_assert_sharing_a_line_does_not():
    assert reading.fold_checks("if fast:\n    assert t < 1\n    assert t > 0\n").count == 2
    assert reading.fold_checks("x = f(); assert x\n") is None
    assert reading.fold_checks("x = f()\nprint(x)\n") is None


def test_a_cell_of_checks_only_shows_nothing_but_its_toggle():
    folded = reading.fold_checks("assert a\nassert b\n")
    assert folded.shown == "" and folded.count == 2


def test_ipython_lines_parse_and_broken_code_is_left_alone():
    folded = reading.fold_checks("!pip install x\n%time y = 1\nassert y\n")
    assert folded.shown == "!pip install x\n%time y = 1"
    assert reading.fold_checks("def broken(:\nassert x\n") is None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_of_the_course_folds_without_loss(path):
    """On the real notebooks: the code shown and the checks are the cell's lines; the code
    shown still compiles and has no top-level assert; N counts the asserts folded."""
    folded_cells = 0
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code" or not (folded := reading.fold_checks(cell.source)):
            continue
        folded_cells += 1
        taken = lines(cell.source) - lines(folded.shown)
        assert lines(folded.shown) + taken == lines(cell.source)
        headers = lines(folded.checks) - taken
        assert all(line.strip() == "..." or line in lines(folded.shown)
                   for line in headers), headers  # the blocks' headers, and "..."
        shown = reading._parse(folded.shown)
        assert shown is not None, folded.shown
        assert not any(isinstance(s, ast.Assert) for s in shown.body)
        checks = ast.parse(folded.checks)
        assert all(reading.is_check(s) for s in checks.body)
        assert folded.count == sum(isinstance(n, ast.Assert) for n in ast.walk(checks))
    assert folded_cells


def test_no_assert_is_left_in_the_code_the_book_shows():
    """Every assert of a cell the book shows folds away, at any depth (a cell where one
    cannot, e.g. in an ``else``, is rewritten so that it can)."""
    left = []
    for path in NOTEBOOKS:
        for k, cell in enumerate(nbformat.read(path, as_version=4).cells):
            tags = set(cell.metadata.get("tags", []))
            if cell.cell_type != "code" or tags & reading.UNFOLDED_TAGS:
                continue
            folded = reading.fold_checks(cell.source)
            shown = reading._parse(folded.shown if folded else cell.source)
            if shown and any(isinstance(n, ast.Assert) for n in ast.walk(shown)):
                left.append(f"{path.relative_to(ROOT)}, cell {k}")
    assert not left, left


# ---------------------------------------------------------------------------------------
# The line on how to run, the quiz answers
# ---------------------------------------------------------------------------------------

def test_unpublished_the_run_line_gives_the_two_commands_and_links_nothing():
    line = reading.how_to_run("02_memory_wall.ipynb", "exercise", published=False)
    text = line.astext()
    assert text == ("To run this exercise: clone the course's repository, run "
                    "bash scripts/build.sh once, then .venv/bin/jupyter lab notebooks/ and "
                    "open 02_memory_wall.ipynb.")
    assert not list(line.findall(nodes.reference))
    assert "course-how-to-run" in line["classes"]
    dutch = reading.how_to_run("nl/kwantisatie.ipynb", "quiz", published=False).astext()
    assert dutch.startswith("Om deze vragen te beantwoorden: kloon de repository")
    assert "nl/kwantisatie.ipynb" in dutch and "bash scripts/build.sh" in dutch
    landing = reading.how_to_run(None, "landing", published=False).astext()
    assert landing.startswith("To run a chapter and do its exercises: clone")
    assert all(c in landing for c in ("bash scripts/build.sh", ".venv/bin/jupyter lab"))


def test_published_the_run_line_links_colab_and_binder():
    line = reading.how_to_run("05_quantization.ipynb", "exercise", published=True)
    links = [r["refuri"] for r in line.findall(nodes.reference)]
    assert links == [reading.TOOLS.colab_url("05_quantization.ipynb"),
                     reading.TOOLS.binder_url("05_quantization.ipynb")]
    assert line.astext() == "To run this exercise: open the chapter in Colab or on Binder."


def test_the_run_line_follows_the_course_switch():
    """The book says "once published" by the same switch as the notebooks' badge cells."""
    line = reading.how_to_run("02_memory_wall.ipynb", "exercise")
    assert bool(list(line.findall(nodes.reference))) == reading.TOOLS.PUBLISHED


def test_a_quiz_answer_is_the_library_s_number_as_the_feedback_writes_it():
    from course_lib.chapters import ch02, nl

    value, hint, language = reading.quiz_answer("ch02", "q1")
    assert (value, hint, language) == ("26 GB", ch02.quiz.q1.hint, "en")
    assert reading.quiz_answer("ch01", "q4")[0].endswith(" FLOPs")
    value, _, language = reading.quiz_answer("nl", "q1")
    assert language == "nl" and value == f"{nl.quiz.q1.solution():.6g}".replace(".", ",")
    node = reading.answer("ch02", "q1")
    assert node["summary"] == "Answer"
    assert node.astext().startswith("26 GB. Parameters x bytes per parameter")


def test_every_chapter_has_learning_goals_to_put_first():
    """The book moves each chapter's goals before its setup cell: each chapter has them."""
    missing = [p.stem for p in NOTEBOOKS if not any(
        c.cell_type == "markdown" and c.source.lstrip().startswith(reading.GOALS)
        for c in nbformat.read(p, as_version=4).cells)]
    assert not missing, f"no '**Learning goals.**' cell in {missing}"


def test_the_landing_page_says_what_the_notes_are_and_never_seed():
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    assert "```{course-how-to-run}" in intro
    assert "The course grows from a set of lecture notes" in intro
    assert "not\npublished with the course" in intro or "not published with the course" in intro
    assert not re.search(r"\bseeds?\b", intro, re.I)


# ---------------------------------------------------------------------------------------
# The whole page, built by Sphinx and myst-nb
# ---------------------------------------------------------------------------------------

def _notebook() -> nbformat.NotebookNode:
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    stream = nbformat.v4.new_output("stream", name="stdout", text="Not done yet.\n")
    cells = [
        md("# 2 · A chapter\n\nWhy it matters."),
        md("*To run this notebook yourself*, clone it.", metadata={"tags": ["course-badges"]}),
        code("setup()", metadata={"tags": ["course-setup", "hide-cell"],
                                  "mystnb": {"code_prompt_show": "Setup: show",
                                             "code_prompt_hide": "Hide"}}),
        md("**Learning goals.** After this chapter you can\n\n* read it;\n* run it."),
        md("## A section"),
        code("x = 2\nassert x == 2\nprint(x)\n\n# and\nassert x > 1", outputs=[stream]),
        code("def f():\n    raise NotImplementedError\n\n\nlab.f(f)",
             metadata={"tags": ["exercise"]}, outputs=[stream]),
        code("def f():\n    return 1\nassert f()",
             metadata={"tags": ["solution", "hide-input", "hide-cell"]}),
        md("## Exercises"),
        code("from course_lib.chapters.ch02 import quiz\n\nanswer = None\nquiz.q1(answer)"),
        code("answer = None\nquiz.q2(answer)"),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    return nb


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A one-chapter book built with myst-nb and this extension, warnings as errors, as
    an unpublished course builds it."""
    from sphinx.application import Sphinx

    src = tmp_path_factory.mktemp("book")
    (src / "notebooks").mkdir()
    nbformat.write(_notebook(), src / "notebooks" / "02_chapter.ipynb")
    (src / "index.md").write_text("# Book\n\n```{course-how-to-run}\n```\n\n"
                                  "```{toctree}\nnotebooks/02_chapter\n```\n")
    static = src / "_static"
    static.mkdir()
    shutil.copy(ROOT / "book" / "_static_course" / "static" / reading.CSS, static)
    (src / "conf.py").write_text(
        "extensions = ['myst_nb', 'course_reading']\n"
        "nb_execution_mode = 'off'\nhtml_static_path = ['_static']\n")
    out = src / "_build"
    app = Sphinx(str(src), str(src), str(out), str(out / ".doctrees"), "html",
                 warningiserror=True, status=None, freshenv=True)
    published, reading.TOOLS.PUBLISHED = reading.TOOLS.PUBLISHED, False  # as today
    try:
        app.build()
    finally:
        reading.TOOLS.PUBLISHED = published
    return (out / "notebooks" / "02_chapter.html").read_text(encoding="utf-8")


def _text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page)))


def test_the_page_opens_with_the_goals_then_the_run_line_and_the_setup(built):
    order = [built.index(s) for s in ("Why it matters", "Learning goals", "run it.",
                                      "To run this notebook yourself", "tag_course-setup",
                                      "A section")]
    assert order == sorted(order), order


def test_the_page_folds_the_checks_of_a_shown_cell_only(built):
    toggles = re.findall(r'<details class="course-checks">\s*<summary>([^<]*)</summary>'
                         r"(.*?)</details>", built, re.S)
    assert [summary for summary, _ in toggles] == [
        "Checked: 2 facts, true when this page was built"]
    assert _text(toggles[0][1]).strip() == "assert x == 2 # and assert x > 1"
    cell = built[built.index("A section"):built.index('class="course-checks"')]
    assert "assert" not in _text(cell) and "print" in _text(cell)
    solution = built[built.index("tag_solution"):]
    assert "assert" in _text(solution)  # a worked solution is shown as written


def test_the_page_says_how_to_run_each_exercise_and_the_quiz(built):
    runs = re.findall(r'<p class="course-how-to-run">(.*?)</p>', built, re.S)
    assert [_text(r).split(":")[0] for r in runs] == ["To run this exercise",
                                                      "To answer these questions"]
    assert "open 02_chapter.ipynb" in _text(runs[0])
    # The exercise's line comes right after its cell, before the worked solution.
    assert (built.index("Not done yet") < built.index("course-how-to-run")
            < built.index("tag_solution"))


def test_the_page_gives_each_quiz_question_its_answer_collapsed(built):
    answers = re.findall(r'<details class="course-answer">\s*<summary>Answer</summary>'
                         r"(.*?)</details>", built, re.S)
    assert [_text(a).strip().split(".")[0] for a in answers] == ["26 GB", "16 bytes/param"]
    assert "<details class=\"course-answer\" open" not in built


def test_the_landing_directive_writes_the_run_line(built, tmp_path_factory):
    index = next(tmp_path_factory.getbasetemp().glob("book*/_build/index.html"))
    text = _text(index.read_text(encoding="utf-8"))
    assert "To run a chapter and do its exercises: clone the course" in text
