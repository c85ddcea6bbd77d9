"""A chapter as a reader meets it in the built book, at 1280 and 390 px (issue 42, items 4, 5, 8).

book/_ext/course_reading.py arranges each chapter's page when the book is built; these
tests read the result in chromium, every request outside this machine blocked:

- a chapter starts with its learning goals: no code cell and no setup before them, and
  the setup cell is one closed line (its note) with its code and environment report inside;
- every exercise stub ran in the build ("not done yet") and every worked solution, code and
  output, is closed behind one button;
- every exercise stub (cell tag ``exercise``) is followed by one line that says how to run
  it (the two commands from a clone while the course is unpublished, Colab and Binder
  once it is), and so is a chapter's quiz, once, before its first question;
- every quiz question is followed by a closed "Answer" that holds the number the library
  computes for it;
- no code cell the book shows has a top-level ``assert`` in view: a cell's checks sit under
  one closed toggle, "Checked: N facts", that holds exactly the lines taken from the code
  (the code shown and the toggle's lines together are the cell's lines, N its asserts),
  and it opens without JavaScript;
- the landing page says what the lecture notes are and how to run a chapter, and never
  says "seed".

The notebooks under notebooks/ say what to expect (their tags and sources). The book under
test is $COURSE_BOOK_HTML if set (for example one built without executing the notebooks),
else book/_build/html.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest

from course_lib._about import PUBLISHED

from .conftest import ROOT, offline_only

pytestmark = pytest.mark.browser

DESKTOP, PHONE = 1280, 390
WIDTHS = (DESKTOP, PHONE)
CHAPTERS = ["01_pretraining_objectives", "02_memory_wall", "03_number_formats",
            "04_quantizing_pi", "05_quantization", "06_pruning", "07_gptq", "08_ddp",
            "09_zero_fsdp", "10_hardware", "11_beyond_data_parallelism",
            "12_long_sequences_and_experts", "nl/kwantisatie"]
QUIZ_IMPORT = re.compile(r"^\s*from\s+course_lib\.chapters\.(\w+)\s+import\s+quiz\b", re.M)
QUIZ_CALL = re.compile(r"\bquiz\.(q\d+)\s*\(")
#: The cells the book collapses whole (setup, worked solutions, hidden checks): left as they are.
COLLAPSED = {"hide-input", "hide-cell", "course-setup", "solution"}
#: The two commands that run the course from a clone (the README's quick start).
COMMANDS = ("bash scripts/build.sh", ".venv/bin/jupyter lab notebooks/")


def code_cells(notebook: str) -> list[nbformat.NotebookNode]:
    path = ROOT / "notebooks" / f"{notebook}.ipynb"
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def tags(cell: nbformat.NotebookNode) -> set[str]:
    return set(cell.metadata.get("tags", []))


class Reader:
    """One page of the built book, opened once at one width, in a context of its own."""

    def __init__(self, browser: Any, url: str, width: int, javascript: bool = True) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": 900},
                                           java_script_enabled=javascript)
        self.context.route("**/*", offline_only)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda err: self.errors.append(str(err)))
        self.page.goto(url)
        self.width = width


    def close_toggles(self) -> None:
        """Every toggle of the page shut, as the page opens (a test may have opened some)."""
        self.page.evaluate("() => document.querySelectorAll('details[open]')"
                           ".forEach(d => { d.open = false; })")

    def in_view(self, locator: Any) -> None:
        """``locator`` is shown and its right edge inside the window (no sideways scroll)."""
        assert locator.is_visible(), locator
        box = locator.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= self.width + 1, (box, self.width)


def _ids(param: tuple[str, int]) -> str:
    return f"{param[0]}-{param[1]}px"


@pytest.fixture(scope="module", params=[(n, w) for n in CHAPTERS for w in WIDTHS], ids=_ids)
def chapter(request: pytest.FixtureRequest, browser, book_server: str) -> Iterator[Reader]:
    """A chapter's page at a width, loaded once for every test below (pytest groups them)."""
    notebook, width = request.param
    reader = Reader(browser, f"{book_server}/notebooks/{notebook}.html", width)
    reader.notebook = notebook
    yield reader
    reader.context.close()


@pytest.fixture(scope="module", params=WIDTHS, ids=lambda w: f"{w}px")
def landing(request: pytest.FixtureRequest, browser, book_server: str) -> Iterator[Reader]:
    reader = Reader(browser, f"{book_server}/intro.html", request.param)
    yield reader
    reader.context.close()


# ----------------------------------------------------------------------------------------
# Item 5: goals first, the setup cell one closed line
# ----------------------------------------------------------------------------------------

FIRST_JS = """
() => {
  const article = document.querySelector('article.bd-article');
  const goals = [...article.querySelectorAll('p')].find(p => {
    const strong = p.querySelector('strong');
    return strong && /^(Learning goals|Leerdoelen)\\.?$/.test(strong.innerText.trim()) &&
      p.innerText.trim().startsWith(strong.innerText.trim());
  });
  if (!goals) return {goals: false};
  const before = e => !!e && !!(e.compareDocumentPosition(goals) &
                                 Node.DOCUMENT_POSITION_FOLLOWING);
  const runLine = [...article.querySelectorAll('p')].find(p =>
    /To run this notebook yourself|Om dit notebook zelf uit te voeren|Open in Colab/
      .test(p.innerText + p.innerHTML));
  return {
    goals: true,
    cellsBefore: [...article.querySelectorAll('.cell')].filter(before).length,
    setupBefore: before(article.querySelector('.cell.tag_course-setup')),
    runLineBefore: before(runLine),
    h1Before: before(article.querySelector('h1')),
  };
}
"""


def test_a_chapter_starts_with_its_goals(chapter):
    where = chapter.page.evaluate(FIRST_JS)
    assert where["goals"], f"{chapter.notebook}: no paragraph opens with 'Learning goals.'"
    assert where["h1Before"]
    assert where["cellsBefore"] == 0, f"{where['cellsBefore']} code cells before the goals"
    assert not where["setupBefore"] and not where["runLineBefore"], where


def test_the_setup_cell_is_a_closed_one_line_note(chapter):
    chapter.close_toggles()
    setup = chapter.page.locator(".cell.tag_course-setup")
    assert setup.count() == 1
    code, output = setup.locator(".cell_input"), setup.locator(".cell_output")
    assert not code.is_visible() and not output.is_visible()
    note = setup.locator("summary .collapsed")
    chapter.in_view(note)
    assert note.inner_text().startswith(("Setup:", "Voorbereiding:"))
    assert "\n" not in note.inner_text().strip()
    summary = setup.locator("summary")
    assert "Colab" in summary.inner_text() and "\n" not in summary.inner_text().strip()
    summary.click()
    output.wait_for(state="visible", timeout=5_000)
    assert "setup_notebook(seed=0)" in code.inner_text()
    assert "torch" in output.inner_text()  # the environment report, folded with its cell
    chapter.close_toggles()


def test_every_stub_ran_and_every_worked_solution_is_collapsed(chapter):
    """Each stub ran in the build and its feedback says "not done yet" (or "not answered
    yet"); each worked solution, its code and its output (a prediction's answer, the
    feedback), is behind one button: the reader predicts before seeing."""
    stubs = [c for c in code_cells(chapter.notebook) if "exercise" in tags(c)]
    dutch = chapter.notebook.startswith("nl/")
    chapter.close_toggles()
    waiting = (("Nog niet gedaan", "Nog niet beantwoord") if dutch
               else ("Not done yet", "Not answered yet"))
    feedback = chapter.page.locator(".cell.tag_exercise .cell_output")
    assert feedback.count() == len(stubs) >= 3
    for i in range(feedback.count()):
        assert feedback.nth(i).inner_text().startswith(waiting), feedback.nth(i).inner_text()
    solutions = chapter.page.locator(".cell.tag_solution")
    assert solutions.count() == len(stubs)
    show = "Toon de uitgewerkte oplossing" if dutch else "Show the worked solution"
    passed = ("Geslaagd", "Goed") if dutch else ("Passed", "Right")
    for i in range(solutions.count()):
        cell = solutions.nth(i)
        code, output = cell.locator(".cell_input"), cell.locator(".cell_output")
        assert not code.is_visible() and not output.is_visible()
        assert cell.locator("details").count() == 1
        assert cell.locator("details").evaluate("d => !d.open")
        summary = cell.locator("summary")
        assert show in summary.inner_text()
        summary.click()
        code.wait_for(state="visible", timeout=5_000)
        output.wait_for(state="visible", timeout=5_000)
        assert "must_pass=True" in code.inner_text()
        assert output.inner_text().startswith(passed)
    chapter.close_toggles()


# ----------------------------------------------------------------------------------------
# Item 4: how to run each exercise; the quiz's answers, collapsed
# ----------------------------------------------------------------------------------------

def assert_how_to_run(reader: Reader, line: Any, opening: tuple[str, ...]) -> None:
    """``line`` is the one-line note on how to run ``reader``'s chapter."""
    reader.in_view(line)
    text = line.inner_text()
    assert text.startswith(opening), text
    if PUBLISHED:
        hrefs = line.locator("a").evaluate_all("links => links.map(a => a.href)")
        assert any("colab.research.google.com" in h for h in hrefs), hrefs
        assert any("mybinder.org" in h for h in hrefs), hrefs
    else:
        assert all(command in text for command in COMMANDS), text
        assert f"{reader.notebook}.ipynb" in text, text
        assert line.locator("a").count() == 0  # nothing links what does not exist yet
    assert "\n" not in text.strip()


def test_every_exercise_says_how_to_run_it(chapter):
    stubs = [c for c in code_cells(chapter.notebook) if "exercise" in tags(c)]
    cells = chapter.page.locator(".cell.tag_exercise")
    assert cells.count() == len(stubs) >= 2
    for i in range(cells.count()):
        line = cells.nth(i).locator("xpath=following-sibling::*[1]")
        assert line.get_attribute("class") == "course-how-to-run", i
        assert_how_to_run(chapter, line, ("To run this exercise", "Om deze oefening te doen"))


def expected_answers(notebook: str) -> list[tuple[int, str]]:
    """(index among the code cells, the answer as the feedback writes it) per quiz question."""
    answers, chapter = [], None
    for i, cell in enumerate(code_cells(notebook)):
        if found := QUIZ_IMPORT.search(cell.source):
            chapter = found.group(1)
        if (call := QUIZ_CALL.search(cell.source)) and chapter and "exercise" not in tags(cell):
            quiz = importlib.import_module(f"course_lib.chapters.{chapter}").quiz
            question = getattr(quiz, call.group(1))
            value = float(question.solution())
            shown = (f"{value:.6g}".replace(".", ",") if question.language == "nl"
                     else f"{value:,.6g}")
            answers.append((i, shown + (f" {question.unit}" if question.unit else "")))
    return answers


def test_every_quiz_question_has_its_answer_collapsed(chapter):
    answers = expected_answers(chapter.notebook)
    if not answers:
        pytest.skip(f"{chapter.notebook} has no quiz")
    chapter.close_toggles()
    cells = chapter.page.locator("article .cell")
    assert cells.count() == len(code_cells(chapter.notebook))
    first = cells.nth(answers[0][0]).locator("xpath=preceding-sibling::*[1]")
    assert first.get_attribute("class") == "course-how-to-run"
    assert_how_to_run(chapter, first, ("To answer these questions",
                                       "Om deze vragen te beantwoorden"))
    for index, value in answers:
        toggle = cells.nth(index).locator("xpath=following-sibling::*[1]")
        assert toggle.evaluate("e => e.matches('details.course-answer') && !e.open"), index
        summary = toggle.locator("summary")
        chapter.in_view(summary)
        assert summary.inner_text().strip() in ("Answer", "Antwoord")
        body = toggle.locator("p")
        assert not body.is_visible()
        summary.click()
        body.wait_for(state="visible", timeout=5_000)
        chapter.in_view(body)
        assert body.inner_text().startswith(value + "."), (body.inner_text(), value)
    chapter.close_toggles()


# ----------------------------------------------------------------------------------------
# Item 5: checks folded under "Checked: N facts"
# ----------------------------------------------------------------------------------------

CELLS_JS = """
() => [...document.querySelectorAll('article .cell')].map(cell => {
  const input = cell.querySelector(':scope > .cell_input');
  const code = input && input.querySelector(':scope > div[class^="highlight"] pre');
  const checks = input ? [...input.querySelectorAll(':scope > details.course-checks')] : [];
  return {
    shown: code ? code.textContent : null,
    checks: checks.map(d => ({
      summary: d.querySelector('summary').innerText.trim(),
      code: d.querySelector('pre').textContent,
      open: d.open,
    })),
  };
})
"""


def _lines(text: str) -> Counter:
    return Counter(line.rstrip() for line in text.splitlines() if line.strip())


def _asserts(code: str) -> list[str]:
    """The asserts of ``code``, at any depth."""
    try:
        tree = ast.parse("\n".join("pass" if line.lstrip().startswith(("!", "%")) else line
                                   for line in code.splitlines()))
    except SyntaxError:
        return []
    return [ast.get_source_segment(code, s) or "" for s in ast.walk(tree)
            if isinstance(s, ast.Assert)]


def test_no_check_is_in_view_and_none_is_lost(chapter):
    cells = code_cells(chapter.notebook)
    page = chapter.page.evaluate(CELLS_JS)
    assert len(page) == len(cells)
    folded = 0
    for i, (cell, shown) in enumerate(zip(cells, page)):
        if tags(cell) & COLLAPSED or "exercise" in tags(cell):
            assert not shown["checks"], f"cell {i} is collapsed whole already"
            continue
        code = shown["shown"] or ""
        # No assert is left in the code the page shows, at any depth...
        assert not _asserts(code), (i, _asserts(code))
        # ...and the shown code and its checks are the cell's own lines, none lost; the
        # checks add only the headers of the blocks they sat in, and "..." for code skipped.
        checks = "\n".join(c["code"] for c in shown["checks"])
        taken = _lines(cell.source) - _lines(code)
        assert _lines(code) + taken == _lines(cell.source), i
        added = _lines(checks) - taken
        assert all(line.strip() == "..." or line in _lines(code) for line in added), (
            i, added)
        assert not taken - _lines(checks), i
        if not shown["checks"]:
            assert not _asserts(cell.source), i
            continue
        assert len(shown["checks"]) == 1, i
        toggle = shown["checks"][0]
        count = sum(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(toggle["code"])))
        facts = "fact" if count == 1 else "facts"
        feiten = "feit" if count == 1 else "feiten"
        assert toggle["summary"].startswith((f"Checked: {count} {facts}",
                                             f"Gecontroleerd: {count} {feiten}")), toggle
        assert not toggle["open"], i
        folded += 1
    if has_checks(chapter.notebook):
        assert folded, f"{chapter.notebook}: no cell's checks are folded"


def has_checks(notebook: str) -> bool:
    """Whether a cell the book shows has an assert (then the page folds some)."""
    return any(_asserts(c.source) for c in code_cells(notebook)
               if not tags(c) & COLLAPSED and "exercise" not in tags(c))


def test_a_checks_toggle_opens_to_the_asserts_it_counts(chapter):
    chapter.close_toggles()
    toggles = chapter.page.locator("details.course-checks")
    if not has_checks(chapter.notebook):
        pytest.skip(f"{chapter.notebook} has no checks to fold")
    assert toggles.count(), f"{chapter.notebook}: no checks toggle"
    for i in sorted({0, toggles.count() - 1}):  # the first and the last
        toggle = toggles.nth(i)
        summary, code = toggle.locator("summary"), toggle.locator("pre")
        chapter.in_view(summary)
        assert not code.is_visible()
        summary.click()
        code.wait_for(state="visible", timeout=5_000)
        assert "assert" in code.inner_text()
        box = toggle.bounding_box()
        assert box["x"] + box["width"] <= chapter.width + 1  # long lines scroll inside it
    chapter.close_toggles()


def test_the_toggles_open_without_javascript(browser, book_server):
    reader = Reader(browser, f"{book_server}/notebooks/05_quantization.html", PHONE,
                    javascript=False)
    try:
        for selector in ("details.course-checks", "details.course-answer"):
            toggle = reader.page.locator(selector).first
            inside = toggle.locator("pre, p").first
            assert not inside.is_visible()
            toggle.locator("summary").click()
            inside.wait_for(state="visible", timeout=5_000)
        line = reader.page.locator("p.course-how-to-run").first
        assert line.is_visible()
    finally:
        reader.context.close()


# ----------------------------------------------------------------------------------------
# Items 4 and 8: the landing page
# ----------------------------------------------------------------------------------------

def test_the_landing_page_says_whose_lecture_notes(landing):
    text = landing.page.locator("article").inner_text()
    paragraph = landing.page.locator("article p", has_text="lecture notes").first
    landing.in_view(paragraph)
    said = paragraph.inner_text()
    for words in ("The course grows from a set of lecture notes", "not published with the course",
                  "quotes the claims it checks", "What the lecture notes claim"):
        assert words in said, (words, said)
    # What the notes cover, as the chapters that quote them do.
    for topic in ("memory", "quantization", "DDP", "FSDP", "ZeRO", "hardware", "pruning",
                  "GPTQ", "Dutch"):
        assert topic in said, topic
    assert not re.search(r"\bseeds?\b", text, re.I), "the landing page says 'seed'"


def test_the_landing_page_says_how_to_run_a_chapter(landing):
    lines = landing.page.locator("p.course-how-to-run")
    assert lines.count() == 1
    line = lines.first
    landing.in_view(line)
    text = line.inner_text()
    assert text.startswith("To run a chapter and do its exercises"), text
    if PUBLISHED:
        assert "Open in Colab" in text
    else:
        assert all(command in text for command in COMMANDS), text
        assert line.locator("a").count() == 0
    # It comes before the chapter list it speaks of.
    assert line.evaluate("(p, list) => !!(p.compareDocumentPosition(list) & "
                         "Node.DOCUMENT_POSITION_FOLLOWING)",
                         landing.page.locator("article a", has_text="The memory wall")
                         .first.element_handle())
