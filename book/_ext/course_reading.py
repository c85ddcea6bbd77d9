"""Sphinx extension of the course book: a chapter as a reader meets it (issue 42).

The notebooks stay as JupyterLab shows them; in the built book only, each chapter's page
is rearranged when its notebook is read (``doctree-read``):

- **Goals first.** A notebook opens with its title and motivation, the line that says
  how to run it (cell tag ``course-badges``), the setup cell (``course-setup``) and then
  its learning goals. In the book the goals come straight after the motivation; the run
  line and the setup cell (collapsed to one line by tools/notebooks.py) follow them.
- **How to run an exercise.** The book has no kernel, and an exercise's printed
  feedback says "run this cell again". After each cell tagged ``exercise``, and before a
  chapter's first quiz question, one line says how to run it: the chapter's Colab and
  Binder links once the course is published (``course_lib._about.PUBLISHED``), until
  then the two commands that run it from a clone. The ``{course-how-to-run}`` directive
  writes the same line on a Markdown page (the landing page).
- **Quiz answers, collapsed.** After each cell that calls a chapter's quiz
  (``quiz.q1(answer)``, the quiz imported by ``from course_lib.chapters.ch02 import
  quiz``), an "Answer" toggle holds the number the library computes for it, with its
  unit and the question's hint.
- **Checks folded.** In a code cell that the book shows, every ``assert`` (and every
  loop, ``if`` or ``with`` that holds nothing but asserts), with the comment lines right
  above it, leaves the code shown and goes under one toggle below it, "Checked: N
  facts", which lists those lines as they stand in the notebook; one inside a loop, ``if``
  or ``with`` that does more is listed under that block's header, with ``...`` for the
  code it skips. The rest of the code reads as before: Python runs a program the same
  without its asserts (``python -O`` drops them). Asserts in an ``else`` or a function
  stay where they are, and so do the cells the book collapses already (setup, worked
  solutions, hidden checks) and the exercise stubs.

Everything is plain HTML (``<details>``), readable without JavaScript. Styles:
``_static_course/static/course_reading.css``. Tests: tests/test_book_layout_ext.py (the
rules, and a small book built with them) and tests/browser/test_book_reading.py (the
course's built book, in chromium).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
#: The stylesheet of what this extension adds, in book/_static_course/static/.
CSS = "course_reading.css"

#: The words of the page, per language of the notebook.
WORDS = {
    "en": {
        "exercise": "To run this exercise",
        "quiz": "To answer these questions",
        "landing": "To run a chapter and do its exercises",
        "clone": "clone the course's repository, run {build} once, then {lab} and "
                 "open {notebook}",
        "clone_landing": "clone the course's repository, run {build} once, then {lab} "
                         "and open the chapter's notebook",
        "published": "open the chapter in {colab} or on {binder}",
        "published_landing": "press Open in Colab or Launch Binder next to it below, "
                             "or from a clone run {build} once, then {lab}",
        "answer": "Answer",
        "checked": "Checked: {count} {facts}, true when this page was built",
        "fact": "fact", "facts": "facts",
    },
    "nl": {
        "exercise": "Om deze oefening te doen",
        "quiz": "Om deze vragen te beantwoorden",
        "landing": "Om een hoofdstuk en zijn oefeningen te doen",
        "clone": "kloon de repository van de cursus, voer één keer {build} uit, "
                 "start dan {lab} en open {notebook}",
        "clone_landing": "kloon de repository van de cursus, voer één keer {build} "
                         "uit, start dan {lab} en open het notebook van het hoofdstuk",
        "published": "open het hoofdstuk in {colab} of op {binder}",
        "published_landing": "klik hieronder op Open in Colab of Launch Binder, of "
                             "voer in een kloon één keer {build} uit en start dan {lab}",
        "answer": "Antwoord",
        "checked": "Gecontroleerd: {count} {facts}, waar toen deze pagina werd gebouwd",
        "fact": "feit", "facts": "feiten",
    },
}
#: The two commands that run the course from a clone (the README's quick start).
#: How a chapter's learning goals open, per language ("**Learning goals.** After ...").
GOALS = ("**Learning goals", "**Leerdoelen")
#: Cells the book shows collapsed already, or that the learner writes: no checks folded.
UNFOLDED_TAGS = {"exercise", "solution", "course-setup", "hide-input", "hide-cell",
                 "remove-input", "remove_input"}
QUIZ_IMPORT = re.compile(r"^\s*from\s+course_lib\.chapters\.(\w+)\s+import\s+quiz\b",
                         re.M)
QUIZ_CALL = re.compile(r"\bquiz\.(q\d+)\s*\(")


def _tools() -> ModuleType:
    """tools/notebooks.py: the course's address, its Colab and Binder links, a
    notebook's language (the notebooks' badge and setup cells are written from it)."""
    spec = importlib.util.spec_from_file_location("course_tools_notebooks",
                                                  ROOT / "tools" / "notebooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


TOOLS = _tools()
BUILD, LAB = TOOLS.BUILD, TOOLS.LAB  # the two commands from a clone


# ------------------------------------------------------------------------------------
# The line that says how to run an exercise
# ------------------------------------------------------------------------------------

def _inline(template: str, **parts: nodes.Node) -> list[nodes.Node]:
    """``template`` as inline nodes, each ``{name}`` replaced by ``parts[name]``."""
    out: list[nodes.Node] = []
    for i, piece in enumerate(re.split(r"\{(\w+)\}", template)):
        if i % 2:
            out.append(parts[piece].deepcopy())
        elif piece:
            out.append(nodes.Text(piece))
    return out


def how_to_run(notebook: str | None, kind: str,
               published: bool | None = None) -> nodes.paragraph:
    """One line on how to run ``notebook`` (under notebooks/; None on the landing page).

    ``kind`` is ``exercise``, ``quiz`` or ``landing``: it picks the opening words.
    Published, it links the chapter's Colab and Binder; until then it gives the two
    commands that run it from a clone.
    """
    published = TOOLS.PUBLISHED if published is None else published
    language = TOOLS.notebook_language(notebook) if notebook else "en"
    say = WORDS[language]
    code = {"build": nodes.literal(BUILD, BUILD), "lab": nodes.literal(LAB, LAB)}
    if notebook is None:
        landing = "published_landing" if published else "clone_landing"
        rest = _inline(say[landing], **code)
    elif published:
        colab = nodes.reference("", "Colab", refuri=TOOLS.colab_url(notebook))
        binder = nodes.reference("", "Binder", refuri=TOOLS.binder_url(notebook))
        rest = _inline(say["published"], colab=colab, binder=binder)
    else:
        rest = _inline(say["clone"], notebook=nodes.literal(notebook, notebook), **code)
    opening = nodes.emphasis(say[kind], say[kind])
    return nodes.paragraph("", "", opening, nodes.Text(": "), *rest, nodes.Text("."),
                           classes=["course-how-to-run"])


class HowToRun(Directive):
    """``{course-how-to-run}``: the landing page's line on how to run the chapters."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        """The line, as the chapters' exercises write it."""
        return [how_to_run(None, "landing")]


# ------------------------------------------------------------------------------------
# Checks: the asserts of a cell, folded under one toggle
# ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Folded:
    """A code cell with its checks taken out: the code to show, the checks, how many."""

    shown: str
    checks: str
    count: int


def _parse(source: str) -> ast.Module | None:
    """The cell's code as Python (IPython's ``!`` and ``%`` lines read as ``pass``)."""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        lines.append(line[: len(line) - len(stripped)] + "pass"
                     if stripped.startswith(("!", "%")) else line)
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _filler(statement: ast.stmt) -> bool:
    """``pass`` or ``...``: a statement that stands for nothing (or for code left out)."""
    return isinstance(statement, ast.Pass) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        and statement.value.value is Ellipsis)


def is_check(statement: ast.stmt) -> bool:
    """An ``assert``, or a loop, ``if`` or ``with`` that holds nothing but checks."""
    if isinstance(statement, ast.Assert):
        return True
    if isinstance(statement, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With,
                              ast.AsyncWith)):
        inside = [*statement.body, *getattr(statement, "orelse", [])]
        return all(_filler(s) or is_check(s) for s in inside) and any(
            is_check(s) for s in inside)
    return False


#: Statements whose body :func:`fold_checks` looks into for checks (not their ``else``).
_BLOCKS = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith)


def _squeeze(lines: list[str], removed: set[int]) -> list[str]:
    """``lines`` without the ``removed`` ones (0-based), with no blank line doubled
    where lines went, and none at the start or the end."""
    out: list[str] = []
    after_gap = False
    for i, line in enumerate(lines):
        if i in removed:
            after_gap = True
            continue
        blank = not line.strip()
        if blank and after_gap and (not out or not out[-1].strip()):
            continue  # the blank line before the removed lines stands for both
        if not blank:
            after_gap = False
        out.append(line)
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def _code(line: str) -> bool:
    """Whether a line holds code: neither blank nor a comment."""
    return bool(line.strip()) and not line.lstrip().startswith("#")


@dataclass(frozen=True)
class _Piece:
    """A check taken out: its lines (0-based, the comments above it included), the
    blocks around it (outermost first), its asserts."""

    first: int
    last: int
    around: tuple[ast.stmt, ...]
    count: int


def _pieces(body: list[ast.stmt], lines: list[str], around: tuple[ast.stmt, ...],
            taken: set[int]) -> list[_Piece]:
    """The checks of ``body`` that can leave it, and those of the blocks in it."""
    found: list[_Piece] = []
    mine: list[_Piece] = []
    for k, statement in enumerate(body):
        if not is_check(statement):
            if isinstance(statement, _BLOCKS):
                found += _pieces(statement.body, lines, (*around, statement), taken)
            continue
        first, last = statement.lineno - 1, statement.end_lineno - 1  # 0-based
        if (k and body[k - 1].end_lineno - 1 >= first) or (
                k + 1 < len(body) and body[k + 1].lineno - 1 <= last):
            continue  # on a line with another statement (``x = f(); assert x``)
        while first > 0 and lines[first - 1].lstrip().startswith("#") and (
                first - 1 not in taken):
            first -= 1
        count = sum(isinstance(node, ast.Assert) for node in ast.walk(statement))
        mine.append(_Piece(first, last, around, count))
        taken.update(range(first, last + 1))
    if around and len(mine) == len(body):  # a block keeps a statement of its own
        for piece in mine:
            taken.difference_update(range(piece.first, piece.last + 1))
        mine = []
    return sorted(found + mine, key=lambda piece: piece.first)


def _header(block: ast.stmt, lines: list[str]) -> list[int]:
    """The lines of a block's header (``for ...:``), without comments below it."""
    end = block.body[0].lineno - 1
    while end > block.lineno and not _code(lines[end - 1]):
        end -= 1
    return list(range(block.lineno - 1, end))


def fold_checks(source: str) -> Folded | None:
    """The cell ``source`` with its checks taken out, or None if it has none.

    A check is a statement that :func:`is_check` accepts and that shares no line with
    another statement, at the top level or in the body of a loop, ``if`` or ``with``
    that keeps a statement of its own; the comment lines right above it (no blank line
    between) go with it. The checks keep their order and their text; one inside a
    block is listed under the block's header, with ``...`` for the code it skips.
    """
    tree = _parse(source)
    if tree is None:
        return None
    lines = source.splitlines()
    removed: set[int] = set()
    pieces = _pieces(tree.body, lines, (), removed)
    if not pieces:
        return None
    out: list[str] = []
    printed: tuple[ast.stmt, ...] = ()
    done = -1  # the last source line written out
    for piece in pieces:
        shared = 0
        while (shared < min(len(printed), len(piece.around))
               and printed[shared] is piece.around[shared]):
            shared += 1
        items = [_header(block, lines) for block in piece.around[shared:]]
        for span in [*items, list(range(piece.first, piece.last + 1))]:
            indent = len(lines[span[0]]) - len(lines[span[0]].lstrip())
            skipped = [line for line in lines[done + 1: span[0]] if _code(line)
                       and len(line) - len(line.lstrip()) >= indent]
            if indent and skipped:
                out.append(" " * indent + "...")
            out += [lines[i] for i in span]
            done = span[-1]
        printed = piece.around
    return Folded("\n".join(_squeeze(lines, removed)), "\n".join(out),
                  sum(piece.count for piece in pieces))


class checks_node(nodes.General, nodes.Element):
    """A toggle that holds a cell's checks: ``<details>`` with its summary line."""


class answer_node(nodes.General, nodes.Element):
    """A toggle that holds a quiz question's answer: ``<details>``, "Answer"."""


def _visit_details(self: Any, node: nodes.Element) -> None:
    classes = " ".join(node["classes"])
    summary = self.encode(node["summary"])
    self.body.append(f'<details class="{classes}">\n<summary>{summary}</summary>\n')


def _depart_details(self: Any, node: nodes.Element) -> None:
    self.body.append("</details>\n")


def _visit_plain(self: Any, node: nodes.Element) -> None:
    """Other builders: the toggle's contents, as they are."""


def checked(folded: Folded, language: str) -> checks_node:
    """The toggle of a cell's checks: "Checked: 3 facts", then the lines as code."""
    say = WORDS[language]
    facts = say["fact" if folded.count == 1 else "facts"]
    node = checks_node(summary=say["checked"].format(count=folded.count, facts=facts),
                       classes=["course-checks"])
    node += nodes.literal_block(folded.checks, folded.checks, language="ipython3")
    return node


# ------------------------------------------------------------------------------------
# Quiz answers
# ------------------------------------------------------------------------------------

def quiz_answer(chapter: str, name: str) -> tuple[str, str, str]:
    """The answer to ``quiz.<name>`` of ``course_lib.chapters.<chapter>``, written as
    its feedback writes a number: (value with unit, hint, language)."""
    module = importlib.import_module(f"course_lib.chapters.{chapter}")
    question = getattr(module.quiz, name)
    unit = f" {question.unit}" if question.unit else ""
    return question.shown(float(question.solution())) + unit, question.hint, question.language


def answer(chapter: str, name: str) -> answer_node:
    """The collapsed answer to one quiz question: the number, then the hint."""
    value, hint, language = quiz_answer(chapter, name)
    node = answer_node(summary=WORDS[language]["answer"], classes=["course-answer"])
    text = nodes.paragraph("", "", nodes.strong(value, value))
    if hint:  # the hint says how to get there
        hint = hint[0].upper() + hint[1:]
        stop = "" if hint.endswith((".", "?", "!")) else "."
        text += nodes.Text(f". {hint}{stop}")
    node += text
    return node


# ------------------------------------------------------------------------------------
# The page
# ------------------------------------------------------------------------------------

def _cells(doctree: nodes.document) -> list[nodes.container]:
    """The code cells of a notebook's page, in order (myst-nb's ``cell_code``)."""
    return [node for node in doctree.findall(nodes.container)
            if node.get("nb_element") == "cell_code"]


def _tags(cell: nodes.container) -> set[str]:
    return set((cell.get("cell_metadata") or {}).get("tags", []))


def _source(cell: nodes.container) -> tuple[nodes.literal_block | None, str]:
    """A code cell's code block in the page, and its text."""
    for child in cell.children:
        if child.get("nb_element") == "cell_code_source":
            for block in child.findall(nodes.literal_block):
                return block, block.astext()
    return None, ""


def _insert_after(node: nodes.Node, new: nodes.Node) -> None:
    node.parent.insert(node.parent.index(node) + 1, new)


def _cell_index(node: nodes.Node) -> int | None:
    """The notebook cell a top-level node of the page came from: myst-nb numbers the
    lines of cell i from (i + 1) × 10000."""
    for candidate in (node, *node.findall(include_self=False)):
        line = getattr(candidate, "line", None)
        if isinstance(line, int) and line >= 10000:
            return line // 10000 - 1
    return None


def goals_first(doctree: nodes.document, cells: list[nbformat.NotebookNode]) -> bool:
    """Move the run line and the setup cell after the learning goals; True if moved."""
    def tagged(tag: str) -> int | None:
        return next((i for i, c in enumerate(cells)
                     if tag in c.get("metadata", {}).get("tags", [])), None)

    setup = tagged("course-setup")
    goals = next((i for i, c in enumerate(cells) if c.cell_type == "markdown"
                  and c.source.lstrip().startswith(GOALS)), None)
    if setup is None or goals is None or goals < setup:
        return False
    moved = {setup, tagged("course-badges")} - {None}
    setup_node = next((c for c in _cells(doctree) if "course-setup" in _tags(c)), None)
    if setup_node is None:
        return False
    parent = setup_node.parent
    children = list(parent.children)
    owners = [_cell_index(child) for child in children]
    goal_nodes = [i for i, owner in enumerate(owners) if owner == goals]
    if not goal_nodes:
        return False
    move = [child for child, owner in zip(children, owners)
            if owner in moved and children.index(child) < goal_nodes[0]]
    for child in move:
        parent.remove(child)
    at = parent.index(children[goal_nodes[-1]]) + 1
    parent[at:at] = move
    return True


def arrange(doctree: nodes.document, docname: str,
            cells: list[nbformat.NotebookNode] | None = None) -> None:
    """Rearrange one notebook's page (see the module's docstring)."""
    notebook = docname.removeprefix("notebooks/") + ".ipynb"
    language = TOOLS.notebook_language(notebook)
    if cells is not None:
        goals_first(doctree, cells)
    chapter = None
    quiz_seen = False
    for cell in _cells(doctree):
        tags = _tags(cell)
        block, source = _source(cell)
        if found := QUIZ_IMPORT.search(source):
            chapter = found.group(1)
        if "exercise" in tags:
            _insert_after(cell, how_to_run(notebook, "exercise"))
        elif (call := QUIZ_CALL.search(source)) and chapter:
            if not quiz_seen:
                line = how_to_run(notebook, "quiz")
                cell.parent.insert(cell.parent.index(cell), line)
                quiz_seen = True
            try:
                _insert_after(cell, answer(chapter, call.group(1)))
            except (ImportError, AttributeError) as err:
                logger.warning(f"course_reading: no answer for quiz.{call.group(1)} of "
                               f"course_lib.chapters.{chapter}: {err}", location=cell)
        if block is None or tags & UNFOLDED_TAGS or cell.get("hide_mode"):
            continue
        folded = fold_checks(source)
        if folded is None:
            continue
        holder = block.parent
        if folded.shown:
            block.children = [nodes.Text(folded.shown)]
            block.rawsource = folded.shown
            _insert_after(block, checked(folded, language))
        else:  # nothing but checks: the toggle alone
            holder.replace(block, checked(folded, language))


#: A chapter's key terms (tools/notebooks.py's KEYWORDS), by its page's name.
KEYWORDS = {f"notebooks/{Path(c.notebook).stem}": TOOLS.KEYWORDS.get(c.number, ())
            for c in TOOLS.CHAPTERS}


def index_keywords(doctree: nodes.document, docname: str) -> None:
    """Put the chapter's key terms in the index at its title: the search then ranks the
    chapter first for them, as it ranks the glossary for its terms."""
    terms = KEYWORDS.get(docname)
    section = next(iter(doctree.findall(nodes.section)), None)
    if not terms or section is None:
        return
    entries = [("single", term, "course-keywords", "main", None) for term in terms]
    target = nodes.target("", "", ids=["course-keywords"])
    section.insert(1, [addnodes.index(entries=entries), target])  # after the title


def on_doctree_read(app: Sphinx, doctree: nodes.document) -> None:
    """Arrange each notebook's page as it is read."""
    docname = app.env.docname
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    cells = nbformat.read(path, as_version=4).cells
    arrange(doctree, docname, cells)
    index_keywords(doctree, docname)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the page arrangement, the toggles, the directive and the stylesheet."""
    for node in (checks_node, answer_node):
        plain = (_visit_plain, _visit_plain)
        html = (_visit_details, _depart_details)
        app.add_node(node, html=html, latex=plain, text=plain)
    app.add_directive("course-how-to-run", HowToRun)
    app.connect("doctree-read", on_doctree_read)
    app.add_css_file(CSS)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
