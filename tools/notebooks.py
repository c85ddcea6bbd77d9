"""Maintainers' tool for the course's notebooks: badges, setup cell, chapter list, execution.

Not part of the installed library (learners never need it). Every notebook opens with a badge
cell and a setup cell stamped from :mod:`course_lib._about`, so the repository address and the
pinned ref are written in one place. Run from the repository root:

    .venv/bin/python tools/notebooks.py            # stamp badges, setup cells and book/intro.md
    .venv/bin/python tools/notebooks.py --check    # report drift (exit 1), change nothing
    .venv/bin/python tools/notebooks.py --execute  # stamp, then execute every notebook in place
    .venv/bin/python tools/notebooks.py --execute 05_quantization.ipynb   # one notebook
    .venv/bin/python tools/notebooks.py --execute nl/kwantisatie.ipynb    # the Dutch edition
"""

from __future__ import annotations

import importlib
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_lib._about import COLAB_REF, REPOSITORY

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
INTRO = ROOT / "book" / "intro.md"
BADGE_TAG = "course-badges"

#: The one list of the book's parts and chapters, in order: (caption, ((number, title, notebook), ...)).
#: The book's _toc.yml, the landing page's chapter list and the README's chapter table are written
#: from it (``tools/notebooks.py``; ``--check`` reports drift, and a test runs it).
PARTS: tuple[tuple[str, tuple[tuple[int, str, str], ...]], ...] = (
    ("Part I: Why training LLMs is hard", (
        (1, "Pretraining objectives", "01_pretraining_objectives.ipynb"),
        (2, "The memory wall", "02_memory_wall.ipynb"),
        (3, "Number formats", "03_number_formats.ipynb"),
        (4, "Quantizing π", "04_quantizing_pi.ipynb"),
    )),
    ("Part II: Making models smaller", (
        (5, "Quantization", "05_quantization.ipynb"),
        (6, "Pruning lab", "06_pruning.ipynb"),
        (7, "GPTQ lab", "07_gptq.ipynb"),
    )),
    ("Part III: Beyond one GPU", (
        (8, "Data parallelism with DDP", "08_ddp.ipynb"),
        (9, "Sharding with ZeRO and FSDP", "09_zero_fsdp.ipynb"),
        (10, "Hardware for LLM training", "10_hardware.ipynb"),
    )),
)  # fmt: skip
#: Every chapter, in order: (number, title, notebook file name).
CHAPTERS: tuple[tuple[int, str, str], ...] = tuple(c for _, chapters in PARTS for c in chapters)
#: Editions in other languages: (part of the book, title, notebook path under notebooks/, summary).
EDITIONS: tuple[tuple[str, str, str, str], ...] = (
    ("Nederlandstalige editie", "Kwantisatie: minder bits per getal", "nl/kwantisatie.ipynb",
     "Dutch edition of the quantization lesson: chapters 2–5's numbers, INT8 on π, the bit "
     "explorer, the memory calculator and exercises in Dutch"),
)
TOC = ROOT / "book" / "_toc.yml"
README = ROOT / "README.md"
_TABLE_START, _TABLE_END = "<!-- chapter-table:start -->", "<!-- chapter-table:end -->"
_LIST_START, _LIST_END = "<!-- chapter-list:start -->", "<!-- chapter-list:end -->"
SETUP_TAG = "course-setup"


def _repo_path() -> str:
    return REPOSITORY.removeprefix("https://github.com/").rstrip("/")


def colab_url(notebook: str) -> str:
    """Address that opens ``notebooks/<notebook>`` of the pinned ref in Google Colab."""
    return f"https://colab.research.google.com/github/{_repo_path()}/blob/{COLAB_REF}/notebooks/{notebook}"


def binder_url(notebook: str) -> str:
    """Address that opens ``notebooks/<notebook>`` of the pinned ref in JupyterLab on Binder."""
    return f"https://mybinder.org/v2/gh/{_repo_path()}/{COLAB_REF}?labpath=notebooks/{notebook}"


def badges_markdown(notebook: str) -> str:
    """The Colab and Binder badges for a notebook, as Markdown."""
    return (
        f"[![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(notebook)}) "
        f"[![Launch Binder](https://mybinder.org/badge_logo.svg)]({binder_url(notebook)})"
    )


def setup_source() -> str:
    """The setup cell: install the pinned course on Colab only, then seed and print the environment check.

    pip keeps Colab's torch (it satisfies the course's floor and pip upgrades nothing that does); a
    failed install stops the cell with what to do, rather than at the import below it.
    """
    return (
        "# Setup: installs the course on Colab only (pinned); seeds, checks the environment.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    REPOSITORY = "{REPOSITORY}"\n'
        "    # pip keeps Colab's own torch, which is new enough for the course.\n"
        f'    !pip install -q "course-lib @ git+{{REPOSITORY}}@{COLAB_REF}"\n'
        "    if _exit_code:  # set by the ! line: pip failed\n"
        "        raise RuntimeError(\n"
        '            "The course could not be installed (see pip above). It needs the internet "\n'
        '            f"and Python 3.10+ (this is {sys.version.split()[0]}): reconnect, or pick "\n'
        '            "a newer runtime (Runtime > Change runtime type); rerun this cell."\n'
        "        )\n"
        "\n"
        "from course_lib.base.env import setup_notebook\n"
        "\n"
        "setup_notebook(seed=0);"
    )


#: A worked solution (cell tag ``solution``) is collapsed in the book under a button saying so.
SOLUTION_PROMPTS = {
    "en": {"code_prompt_show": "Show the worked solution", "code_prompt_hide": "Hide the worked solution"},
    "nl": {"code_prompt_show": "Toon de uitgewerkte oplossing", "code_prompt_hide": "Verberg de uitgewerkte oplossing"},
}


def _tagged(nb, tag: str):
    return [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]


def stamp(path: Path, write: bool = True) -> bool:
    """Rewrite a notebook's badge and setup cells (inserting them after the title if missing); True if changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    badge_cells, setup_cells = _tagged(nb, BADGE_TAG), _tagged(nb, SETUP_TAG)
    if not badge_cells:
        cell = nbformat.v4.new_markdown_cell(metadata={"tags": [BADGE_TAG]})
        nb.cells.insert(1, cell)
        badge_cells = [cell]
    if not setup_cells:
        cell = nbformat.v4.new_code_cell(metadata={"tags": [SETUP_TAG]})
        nb.cells.insert(nb.cells.index(badge_cells[0]) + 1, cell)
        setup_cells = [cell]
    badge_cells[0].source = badges_markdown(notebook_name(path))
    setup_cells[0].source = setup_source()
    language = "nl" if path.parent.name == "nl" else "en"
    for cell in _tagged(nb, "solution"):  # collapsed in the book: code hidden, its "Passed" shown
        if "hide-input" not in cell.metadata.tags:
            cell.metadata.tags.append("hide-input")
        cell.metadata["mystnb"] = dict(SOLUTION_PROMPTS[language])
        cell.metadata.setdefault("jupyter", {})["source_hidden"] = True  # collapsed in JupyterLab too
    after = nbformat.writes(nb)
    if write and after != before:
        nbformat.write(nb, path)
    return after != before


def chapter_list_markdown() -> str:
    """The landing page's chapter list: a link and badges for each written chapter, 'planned' for the rest."""
    lines = []
    for number, title, name in CHAPTERS:
        if (NOTEBOOK_DIR / name).exists():
            lines.append(f"{number}. [{title}](notebooks/{name}) {badges_markdown(name)}")
        else:
            lines.append(f"{number}. {title} (*planned*)")
    return "\n".join(lines)


def stamp_intro(path: Path = INTRO, write: bool = True) -> bool:
    """Rewrite the chapter list between the markers of the book's landing page; True if changed."""
    text = path.read_text(encoding="utf-8")
    start, end = text.index(_LIST_START) + len(_LIST_START), text.index(_LIST_END)
    new = text[:start] + "\n" + chapter_list_markdown() + "\n" + text[end:]
    if write and new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def toc_yaml() -> str:
    """The book's _toc.yml: the landing page, each part with its chapters, the editions, the references."""
    lines = ["# Written by tools/notebooks.py from its PARTS and EDITIONS: edit those, not this file.",
             "format: jb-book", "root: intro", "parts:"]
    parts = [(caption, [name for _, _, name in chapters]) for caption, chapters in PARTS]
    parts += [(caption, [name]) for caption, _, name, _ in EDITIONS]
    for caption, names in parts:
        lines += [f'  - caption: "{caption}"', "    chapters:"]
        lines += [f"      - file: notebooks/{name.removesuffix('.ipynb')}" for name in names
                  if (NOTEBOOK_DIR / name).exists()]
    lines += ['  - caption: "References"', "    chapters:", "      - file: bibliography"]
    return "\n".join(lines) + "\n"


def readme_table() -> str:
    """The README's chapter table: number, linked title, and whether the chapter is written."""
    rows = ["| # | chapter | status |", "|---|---|---|"]
    for number, title, name in CHAPTERS:
        ready = (NOTEBOOK_DIR / name).exists()
        link = f"[{title}](notebooks/{name})" if ready else title
        rows.append(f"| {number} | {link} | {'ready' if ready else 'planned'} |")
    for _, title, name, summary in EDITIONS:
        rows.append(f"| {name.split('/')[0]} | [{title}](notebooks/{name}) ({summary}) | ready |")
    return "\n".join(rows)


_EXERCISES_START, _EXERCISES_END = "<!-- exercise-list:start -->", "<!-- exercise-list:end -->"


def exercise_list() -> str:
    """The README's list of every chapter's exercises, read from the lab modules: names and misconceptions."""
    from course_lib.exercises.checker import Exercise
    from course_lib.exercises.predictions import Prediction

    rows = ["| # | code exercises (the misconceptions their checkers name) | predict, then measure (tolerance) |",
            "|---|---|---|"]
    labs = [(number, f"ch{number:02d}_lab") for number, _, name in CHAPTERS if (NOTEBOOK_DIR / name).exists()]
    labs += [(name.split("/")[0], f"{name.split('/')[0]}_lab") for _, _, name, _ in EDITIONS]
    for number, module in labs:
        items = vars(importlib.import_module(f"course_lib.chapters.{module}")).values()
        code = [f"`{e.name}` ({', '.join(m.name for m in e.misconceptions)})" for e in items if isinstance(e, Exercise)]
        guess = [f"`{p.name}` (±{p.rel_tol:.0%})" for p in items if isinstance(p, Prediction)]
        rows.append(f"| {number} | {'; '.join(code)} | {'; '.join(guess)} |")
    return "\n".join(rows)


def _between(text: str, start: str, end: str, body: str) -> str:
    i, j = text.index(start) + len(start), text.index(end)
    return text[:i] + "\n" + body + "\n" + text[j:]


def stamp_lists(write: bool = True) -> list[str]:
    """Write _toc.yml, the README's chapter table (from PARTS) and exercise list (from the labs); the files that changed."""
    changed = []
    readme = _between(README.read_text(encoding="utf-8"), _TABLE_START, _TABLE_END, readme_table())
    readme = _between(readme, _EXERCISES_START, _EXERCISES_END, exercise_list())
    for path, new in ((TOC, toc_yaml()), (README, readme)):
        if path.read_text(encoding="utf-8") != new:
            changed.append(path.relative_to(ROOT).as_posix())
            if write:
                path.write_text(new, encoding="utf-8")
    return changed


def notebook_paths() -> list[Path]:
    """Every chapter notebook, in course order, then the editions in other languages."""
    editions = [NOTEBOOK_DIR / name for _, _, name, _ in EDITIONS]
    return sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb")) + editions


def output_texts(cell: dict) -> list[str]:
    """The text a code cell printed or displayed (streams and every text/* representation)."""
    texts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            texts.append(out["text"] if isinstance(out["text"], str) else "".join(out["text"]))
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/"):
                texts.append(value if isinstance(value, str) else "".join(value))
    return texts


def notebook_name(path: Path) -> str:
    """A notebook's path under notebooks/, as the badges and the command line name it."""
    return path.relative_to(NOTEBOOK_DIR).as_posix()


@dataclass
class ExecutionResult:
    """How long executing a notebook took and the kernel's peak resident memory."""

    path: Path
    seconds: float
    peak_rss_mib: float


def execute(path: Path, timeout: int = 600, write: bool = False) -> ExecutionResult:
    """Execute a notebook top to bottom in a fresh kernel; optionally write the outputs back.

    Run this in a process of its own when measuring memory: the peak comes from the kernel,
    a child process, through ``getrusage(RUSAGE_CHILDREN)``.
    """
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    if write:
        nbformat.write(nb, path)
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return ExecutionResult(path, seconds, rss_kib / 1024)


def main(argv: list[str] | None = None) -> int:
    """Stamp the landing page and the notebooks; ``--check`` reports drift, ``--execute`` runs them.

    Notebook file names among the arguments limit stamping and execution to those notebooks.
    """
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    names = [a for a in argv if not a.startswith("--")]
    verb = "out of date (run: .venv/bin/python tools/notebooks.py)" if check else "stamped"
    drift = stamp_intro(write=not check)
    print(f"book/intro.md: {verb if drift else 'up to date'}")
    for name in stamp_lists(write=not check):
        drift = True
        print(f"{name}: {verb}")
    for path in notebook_paths():
        name = notebook_name(path)
        if names and name not in names:
            continue
        changed = stamp(path, write=not check)
        drift |= changed
        print(f"{name}: {verb if changed else 'up to date'}")
        if "--execute" in argv and not check:
            result = execute(path, write=True)
            print(f"{name}: executed in {result.seconds:.1f} s")
    return 1 if check and drift else 0


if __name__ == "__main__":
    sys.exit(main())
