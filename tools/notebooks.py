"""Maintainers' tool for the course's notebooks: badges, setup cell, chapter list, runs.

Not part of the installed library (learners never need it). Every notebook opens with a
badge cell and a setup cell stamped from :mod:`course_lib._about`, so the repository
address, the pinned ref and whether the course is published are written in one place.
Run from the repository root:

    .venv/bin/python tools/notebooks.py            # stamp notebooks, book pages, README
    .venv/bin/python tools/notebooks.py --check    # report drift (exit 1)
    .venv/bin/python tools/notebooks.py --execute  # stamp, then run every notebook
    .venv/bin/python tools/notebooks.py --execute 05_quantization.ipynb   # one
    .venv/bin/python tools/notebooks.py --execute nl/kwantisatie.ipynb    # Dutch
"""

from __future__ import annotations

import importlib
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import NamedTuple

import nbformat

from course_lib._about import COLAB_REF, PUBLISHED, REPOSITORY

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
INTRO = ROOT / "book" / "intro.md"
TOC = ROOT / "book" / "_toc.yml"
README = ROOT / "README.md"
BADGE_TAG = "course-badges"
SETUP_TAG = "course-setup"


class Chapter(NamedTuple):
    """A chapter: number, title, notebook, one-line summary, time and prerequisites."""

    number: int
    title: str
    notebook: str
    #: What the chapter does, in one line (no full stop).
    summary: str
    #: An estimate in minutes, low and high: reading, running the cells, the exercises.
    minutes: tuple[int, int]
    #: The earlier chapters it builds on directly, by number.
    needs: tuple[int, ...] = ()


class Edition(NamedTuple):
    """A lesson in another language: its part of the book, title, notebook, summary."""

    part: str
    title: str
    #: The notebook's path under notebooks/.
    notebook: str
    #: What it covers, in English, in one line (no full stop).
    summary: str
    #: An estimate in minutes, low and high, as for a chapter.
    minutes: tuple[int, int]
    #: A sentence to the edition's readers in their language, for the landing page.
    welcome: str


#: The one list of the book's parts and chapters, in order: (caption, (Chapter, ...)).
#: The book's _toc.yml, the landing page's chapter list and the README's chapter table
#: are written from it (``--check`` reports drift, and a test runs it). The times are
#: estimates for a reader who reads the text, runs every cell and does the exercises;
#: the code alone runs in about a minute per chapter (measured in the README).
PARTS: tuple[tuple[str, tuple[Chapter, ...]], ...] = (
    ("Part I: Why training LLMs is hard", (
        Chapter(1, "Pretraining objectives", "01_pretraining_objectives.ipynb",
                "Masked LM, causal LM and span corruption built token by token; "
                "three tiny models trained and compared, perplexity, a small scaling "
                "study, and the course model that every later lab uses",
                (60, 90)),
        Chapter(2, "The memory wall", "02_memory_wall.ipynb",
                "Where training memory goes (weights, gradients, optimizer states, "
                "activations), measured byte by byte on a real GPT-2; checkpointing, "
                "ZeRO's arithmetic, and which GPUs a model fits on",
                (45, 90)),
        Chapter(3, "Number formats", "03_number_formats.ipynb",
                "FP32, FP16, BF16 and FP8 opened bit by bit: range, precision, "
                "subnormals, overflow and underflow in training, loss scaling, pure "
                "BF16 weights, FP8 recipes, and matrix products timed per dtype",
                (60, 120), (2,)),
        Chapter(4, "Quantizing π", "04_quantizing_pi.ipynb",
                "One number in every format from FP32 to INT4: its bits and error, "
                "an absmax scale factor for integers, the memory of a billion "
                "values, and a bit explorer to click",
                (45, 75), (3,)),
    )),
    ("Part II: Making models smaller", (
        Chapter(5, "Quantization", "05_quantization.ipynb",
                "The course model in 8, 4 and 3 bits: absmax and zero-point scales "
                "per tensor, channel or group, NF4, bit packing, outliers, AWQ, "
                "quantization-aware training and QLoRA, measured",
                (60, 120), (1, 4)),
        Chapter(6, "Pruning lab", "06_pruning.ipynb",
                "Magnitude, gradual and Wanda pruning, the 2:4 pattern, removing "
                "neurons, heads and blocks, and when a pruned model really gets "
                "smaller on disk and faster",
                (45, 90), (5,)),
        Chapter(7, "GPTQ lab", "07_gptq.ipynb",
                "GPTQ built on one layer and run on the whole course model against "
                "round-to-nearest: what each ingredient buys, how much calibration "
                "text it needs, and SparseGPT",
                (60, 105), (5, 6)),
    )),
    ("Part III: Beyond one GPU", (
        Chapter(8, "Data parallelism with DDP", "08_ddp.ipynb",
                "Real DDP training on CPU processes: the same result as one process, "
                "the ring all-reduce, buckets overlapping the backward pass, gradient "
                "accumulation, and scaling predicted for GPU clusters",
                (60, 120), (1, 2)),
        Chapter(9, "Sharding with ZeRO and FSDP", "09_zero_fsdp.ipynb",
                "ZeRO stages 1 to 3 and FSDP2: what each rank holds and sends, "
                "measured; ZeRO-1 and ZeRO-2 written by hand; prefetching, hybrid "
                "sharding and CPU offload",
                (60, 120), (2, 8)),
        Chapter(10, "Hardware for LLM training", "10_hardware.ipynb",
                "This machine measured (matrix throughput, memory bandwidth, disk, "
                "tokenisation, all-reduce) and set next to data-centre GPUs: the "
                "roofline, MFU and the time to train a model",
                (60, 105), (3, 8)),
        Chapter(11, "Beyond data parallelism: tensor and pipeline parallelism",
                "11_beyond_data_parallelism.ipynb",
                "Megatron's column- and row-parallel layers written out and run on two "
                "ranks, sequence parallelism, GPipe and 1F1B pipelines and their bubble "
                "measured, checkpointing, a 2-D mesh, and how real runs lay out their GPUs",
                (60, 120), (2, 8, 9)),
        Chapter(12, "Long sequences and many experts", "12_long_sequences_and_experts.ipynb",
                "Context parallelism (all-gather of K and V, the pass-KV ring, causal "
                "balance, memory against 1/cp) and expert parallelism (router, capacity, "
                "all-to-all, a mesh with DP) on real ranks; Llama 3's 128K stage and "
                "DeepSeek-V3 planned",
                (60, 105), (8, 11)),
    )),
)  # fmt: skip
#: Terms the book's search ranks a chapter first for, by number: index entries that
#: book/_ext/course_reading.py puts at the chapter's title (tests/browser/test_book_search.py).
KEYWORDS: dict[int, tuple[str, ...]] = {
    1: ("pretraining objectives", "perplexity", "span corruption"),
    2: ("memory wall", "optimizer states", "activation memory"),
    3: ("number formats", "BF16", "FP8", "loss scaling"),
    4: ("INT4", "absmax"),
    5: ("quantization", "NF4", "AWQ", "QLoRA"),
    6: ("pruning", "Wanda", "2:4 sparsity"),
    7: ("GPTQ", "SparseGPT"),
    8: ("DDP", "data parallelism", "ring all-reduce"),
    9: ("ZeRO", "FSDP", "sharding"),
    10: ("roofline", "MFU", "hardware"),
    11: ("tensor parallelism", "pipeline parallelism", "1F1B"),
    12: ("context parallelism", "expert parallelism", "mixture of experts"),
}
#: Every chapter, in order.
CHAPTERS: tuple[Chapter, ...] = tuple(c for _, chapters in PARTS for c in chapters)
#: Editions in other languages: each its own part of the book, after the chapters.
EDITIONS: tuple[Edition, ...] = (
    Edition("Nederlandstalige editie", "Kwantisatie: minder bits per getal",
            "nl/kwantisatie.ipynb",
            "Dutch edition of the quantization lesson: chapters 2–5's numbers, INT8 "
            "on π, the bit explorer, the training planner and exercises in Dutch",
            (45, 90),
            "De les over kwantisatie bestaat ook in het Nederlands, met dezelfde "
            "bibliotheek en dezelfde live berekende getallen."),
)  # fmt: skip
#: What the landing page says about the times, once, under the chapter list.
TIMES_NOTE = (
    "Times are estimates, not measurements: reading a chapter, running its cells and "
    "doing its exercises. The code alone runs in about a minute per chapter on a "
    "laptop CPU; readers differ far more than machines."
)
#: The MIT licence's text, for readers of the book (the repository holds it as LICENSE).
MIT_LICENSE_URL = "https://opensource.org/license/mit"

_MARKERS = {
    name: (f"<!-- {name}:start -->", f"<!-- {name}:end -->")
    for name in ("chapter-list", "how-to-use", "source", "chapter-table",
                 "exercise-list")
}


def _repo_path() -> str:
    """The repository as GitHub's owner/name."""
    return REPOSITORY.removeprefix("https://github.com/").rstrip("/")


def colab_url(notebook: str) -> str:
    """Address that opens ``notebooks/<notebook>`` of the pinned ref in Google Colab."""
    return (f"https://colab.research.google.com/github/{_repo_path()}/blob/{COLAB_REF}"
            f"/notebooks/{notebook}")


def binder_url(notebook: str) -> str:
    """Address that opens ``notebooks/<notebook>`` of the pinned ref on Binder."""
    return (f"https://mybinder.org/v2/gh/{_repo_path()}/{COLAB_REF}"
            f"?labpath=notebooks/{notebook}")


def badges_markdown(notebook: str) -> str:
    """The Colab and Binder badges for a notebook, as Markdown."""
    colab = "https://colab.research.google.com/assets/colab-badge.svg"
    binder = "https://mybinder.org/badge_logo.svg"
    return (f"[![Open in Colab]({colab})]({colab_url(notebook)}) "
            f"[![Launch Binder]({binder})]({binder_url(notebook)})")


def notebook_language(notebook: str) -> str:
    """The language of a notebook: ``nl`` under notebooks/nl/, else ``en``."""
    return "nl" if notebook.startswith("nl/") else "en"


#: The two commands that run the course from a clone: build it once, then open JupyterLab.
BUILD, LAB = "bash scripts/build.sh", ".venv/bin/jupyter lab notebooks/"
#: How to run a notebook from a clone, per language: the badge cell while unpublished.
RUN_LOCALLY = {
    "en": ("*To run this notebook yourself*, clone the course's repository, run "
           f"`{BUILD}` once, then `{LAB}`."),
    "nl": ("*Om dit notebook zelf uit te voeren* kloon je de repository van de cursus, "
           f"voer je één keer `{BUILD}` uit en start je daarna `{LAB}`."),
}


def badge_cell_source(notebook: str) -> str:
    """A notebook's badge cell: Colab and Binder if published, else how to run it."""
    if PUBLISHED:
        return badges_markdown(notebook)
    return RUN_LOCALLY[notebook_language(notebook)]


def setup_source() -> str:
    """The setup cell: install the pinned course on Colab only, then seed and check.

    pip keeps Colab's torch (it satisfies the course's floor and pip upgrades nothing
    that does); a failed install stops the cell with what to do, rather than at the
    import below it.
    """
    return _SETUP.substitute(repository=REPOSITORY, ref=COLAB_REF).strip()


_SETUP = Template("""
# Setup: installs the course on Colab only (pinned); seeds, checks the environment.
import sys

if "google.colab" in sys.modules:
    REPOSITORY = "$repository"
    # pip keeps Colab's own torch, which is new enough for the course.
    !pip install -q "course-lib @ git+{REPOSITORY}@$ref"
    if _exit_code:  # set by the ! line: pip failed
        raise RuntimeError(
            "The course could not be installed (see pip above). It needs the internet "
            f"and Python 3.10+ (this is {sys.version.split()[0]}): reconnect, or pick "
            "a newer runtime (Runtime > Change runtime type); rerun this cell."
        )

from course_lib.base.env import setup_notebook

setup_notebook(seed=0);
""")


#: A worked solution (cell tag ``solution``) is collapsed in the book under a button,
#: its code and its output together: a prediction's answer is in its output.
SOLUTION_PROMPTS = {
    "en": {"code_prompt_show": "Show the worked solution",
           "code_prompt_hide": "Hide the worked solution"},
    "nl": {"code_prompt_show": "Toon de uitgewerkte oplossing",
           "code_prompt_hide": "Verberg de uitgewerkte oplossing"},
}
#: The setup cell is collapsed in the book, code and environment report, under one line
#: that says what it does; it still runs (nbval, Colab, the book's build).
SETUP_PROMPTS = {
    "en": {"code_prompt_show": "Setup: installs the course on Colab, checks the "
                               "environment (show the cell)",
           "code_prompt_hide": "Hide the setup cell"},
    "nl": {"code_prompt_show": "Voorbereiding: installeert de cursus op Colab, controleert "
                               "de omgeving (toon de cel)",
           "code_prompt_hide": "Verberg de voorbereidende cel"},
}
#: myst-nb's tag that collapses a cell's code and output under one button (it takes
#: precedence over ``hide-input``, which a solution keeps for the lab tests and readers
#: of the tags).
HIDE_CELL = "hide-cell"


def _tagged(nb: nbformat.NotebookNode, tag: str) -> list[nbformat.NotebookNode]:
    """The cells of a notebook that carry ``tag``."""
    return [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]


def _collapse(cell: nbformat.NotebookNode, prompts: dict[str, str], *tags: str) -> None:
    """Collapse a code cell in the book: its code and output behind one ``prompts`` button."""
    cell.metadata.setdefault("tags", [])
    for tag in (*tags, HIDE_CELL):
        if tag not in cell.metadata.tags:
            cell.metadata.tags.append(tag)
    cell.metadata["mystnb"] = dict(prompts)


def stamp(path: Path, write: bool = True) -> bool:
    """Rewrite a notebook's badge and setup cells (added if missing); True on change."""
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
    name = notebook_name(path)
    language = notebook_language(name)
    badge_cells[0].source = badge_cell_source(name)
    setup_cells[0].source = setup_source()
    _collapse(setup_cells[0], SETUP_PROMPTS[language])  # in the book only
    for cell in _tagged(nb, "solution"):  # code and output collapsed, in book and Lab
        _collapse(cell, SOLUTION_PROMPTS[language], "hide-input")
        cell.metadata.setdefault("jupyter", {}).update(source_hidden=True,
                                                        outputs_hidden=True)
        cell.metadata["collapsed"] = True  # what JupyterLab writes with outputs_hidden
    after = nbformat.writes(nb)
    if write and after != before:
        nbformat.write(nb, path)
    return after != before


def _minutes(chapter: Chapter | Edition) -> str:
    """A chapter's estimated time as the page writes it: "45–90 min"."""
    low, high = chapter.minutes
    return f"{low}–{high} min"


def _chapter_link(number: int) -> str:
    """A chapter's number, linked to its notebook."""
    chapter = next(c for c in CHAPTERS if c.number == number)
    return f"[{number}](notebooks/{chapter.notebook})"


def _needs_markdown(chapter: Chapter) -> str:
    """What a chapter builds on, as a phrase: "builds on chapter [3](...)"."""
    if not chapter.needs:
        return "no earlier chapter needed"
    links = [_chapter_link(n) for n in chapter.needs]
    joined = " and ".join([", ".join(links[:-1]), links[-1]] if links[:-1] else links)
    return f"builds on chapter{'s' if len(links) > 1 else ''} {joined}"


def chapter_list_markdown() -> str:
    """The landing page's chapter list: each chapter's summary, time and needs."""
    lines = []
    for caption, chapters in PARTS:
        lines += [f"### {caption}", ""]
        for chapter in chapters:
            number, title, name = chapter.number, chapter.title, chapter.notebook
            if not (NOTEBOOK_DIR / name).exists():
                lines += [f"{number}. {title} (*planned*)"]
                continue
            facts = f"*About {_minutes(chapter)}; {_needs_markdown(chapter)}.*"
            if PUBLISHED:
                facts += f" {badges_markdown(name)}"
            link = f"**[{title}](notebooks/{name})**"
            lines += [f"{number}. {link}: {chapter.summary}.\\", f"   {facts}"]
        lines.append("")
    for edition in EDITIONS:
        facts = f"*About {_minutes(edition)}; no earlier chapter needed.*"
        if PUBLISHED:
            facts += f" {badges_markdown(edition.notebook)}"
        lines += [f"### {edition.part}", "",
                  f"{edition.welcome}\\",
                  f"**[{edition.title}](notebooks/{edition.notebook})**: "
                  f"{edition.summary}.\\",
                  facts, ""]
    lines.append(TIMES_NOTE)
    return "\n".join(lines)


def how_to_use_markdown() -> str:
    """The landing page's ways to use the course: Colab and Binder only if published."""
    repository = "the course's repository"
    if PUBLISHED:
        repository = f"[the repository]({REPOSITORY})"
    items = []
    if PUBLISHED:
        items += [
            "- **In Google Colab**: press *Open in Colab* next to a chapter below or "
            "at the top of it. The first cell installs the course (only on Colab) and "
            "prints an environment check.",
            "- **On Binder**: press *Launch Binder* to open the chapter in JupyterLab "
            "in the browser, with nothing to install.",
        ]
    items += [
        f"- **In JupyterLab on your machine**: clone {repository} and run "
        f"`{BUILD}` once (it creates `.venv` with everything), then `{LAB}`.",
        "- **In this book**: read the executed chapters; plots and tables are the "
        "outputs of a real run, and the bit explorer and the training planner compute "
        "in the page.",
        "- **As an instructor**: `bash scripts/test.sh` runs the unit tests, every "
        "notebook under nbval and the browser tests; the same command runs in CI.",
    ]
    return "\n".join(items)


def source_markdown() -> str:
    """The landing page's paragraph on the source and the licence."""
    if PUBLISHED:
        where = (f"The course's notebooks, its library `course_lib` and this book are "
                 f"developed in the repository [{_repo_path()}]({REPOSITORY}).")
        licence = f"[LICENSE]({REPOSITORY}/blob/{COLAB_REF}/LICENSE)"
    else:
        where = ("The course's notebooks, its library `course_lib` and this book come "
                 "from one git repository; its `README.md` says how to build and test "
                 "them.")
        licence = "`LICENSE`"
    return (f"{where} The code is licensed under the [MIT License]({MIT_LICENSE_URL}) "
            f"(copyright 2026 The course authors): the full text is in {licence} at "
            "the root of the repository.")


def _between(text: str, name: str, body: str) -> str:
    """``text`` with ``body`` between the start and end markers called ``name``."""
    start, end = _MARKERS[name]
    i, j = text.index(start) + len(start), text.index(end)
    return text[:i] + "\n" + body + "\n" + text[j:]


def intro_markdown(text: str) -> str:
    """The landing page ``text`` with its generated blocks rewritten."""
    text = _between(text, "how-to-use", how_to_use_markdown())
    text = _between(text, "chapter-list", chapter_list_markdown())
    return _between(text, "source", source_markdown())


def stamp_intro(path: Path = INTRO, write: bool = True) -> bool:
    """Rewrite the generated blocks of the book's landing page; True if changed."""
    text = path.read_text(encoding="utf-8")
    new = intro_markdown(text)
    if write and new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def toc_yaml() -> str:
    """The book's _toc.yml: the landing page, parts, editions and references."""
    lines = ["# Written by tools/notebooks.py from its PARTS and EDITIONS: edit those, "
             "not this file.",
             "format: jb-book", "root: intro", "parts:"]
    parts = [(caption, [c.notebook for c in chapters]) for caption, chapters in PARTS]
    parts += [(e.part, [e.notebook]) for e in EDITIONS]
    for caption, names in parts:
        lines += [f'  - caption: "{caption}"', "    chapters:"]
        lines += [f"      - file: notebooks/{name.removesuffix('.ipynb')}"
                  for name in names if (NOTEBOOK_DIR / name).exists()]
    lines += ['  - caption: "References"', "    chapters:",
              "      - file: glossary", "      - file: bibliography"]
    return "\n".join(lines) + "\n"


def readme_table() -> str:
    """The README's chapter table: number, title, summary, time, prerequisites."""
    rows = ["| # | chapter | what it covers | time (estimate) | builds on |",
            "|---|---|---|---|---|"]
    for c in CHAPTERS:
        ready = (NOTEBOOK_DIR / c.notebook).exists()
        link = f"[{c.title}](notebooks/{c.notebook})"
        link = link if ready else f"{c.title} (planned)"
        needs = ", ".join(str(n) for n in c.needs) or "–"
        rows.append(f"| {c.number} | {link} | {c.summary} | {_minutes(c)} | {needs} |")
    for e in EDITIONS:
        link = f"[{e.title}](notebooks/{e.notebook})"
        rows.append(f"| {e.notebook.split('/')[0]} | {link} | {e.summary} "
                    f"| {_minutes(e)} | – |")
    return "\n".join(rows)


def exercise_list() -> str:
    """The README's list of every chapter's exercises, read from the lab modules."""
    from course_lib.exercises.checker import Exercise
    from course_lib.exercises.predictions import Prediction

    rows = ["| # | code exercises (the misconceptions their checkers name) "
            "| predict, then measure (tolerance) |",
            "|---|---|---|"]
    labs = [(c.number, f"ch{c.number:02d}_lab") for c in CHAPTERS
            if (NOTEBOOK_DIR / c.notebook).exists()]
    labs += [(e.notebook.split("/")[0], f"{e.notebook.split('/')[0]}_lab")
             for e in EDITIONS]
    for number, module in labs:
        items = vars(importlib.import_module(f"course_lib.chapters.{module}")).values()
        code = [f"`{e.name}` ({', '.join(m.name for m in e.misconceptions)})"
                for e in items if isinstance(e, Exercise)]
        guess = [f"`{p.name}` (±{p.rel_tol:.0%})" for p in items
                 if isinstance(p, Prediction)]
        rows.append(f"| {number} | {'; '.join(code)} | {'; '.join(guess)} |")
    return "\n".join(rows)


def stamp_lists(write: bool = True) -> list[str]:
    """Write _toc.yml, the README's chapter and exercise tables; the files changed."""
    changed = []
    readme = README.read_text(encoding="utf-8")
    readme = _between(readme, "chapter-table", readme_table())
    readme = _between(readme, "exercise-list", exercise_list())
    for path, new in ((TOC, toc_yaml()), (README, readme)):
        if path.read_text(encoding="utf-8") != new:
            changed.append(path.relative_to(ROOT).as_posix())
            if write:
                path.write_text(new, encoding="utf-8")
    return changed


def notebook_paths() -> list[Path]:
    """Every chapter notebook, in course order, then the editions in other languages."""
    editions = [NOTEBOOK_DIR / e.notebook for e in EDITIONS]
    return sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb")) + editions


def output_texts(cell: dict) -> list[str]:
    """The text a code cell printed or displayed (streams and every text/* output)."""
    texts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            text = out["text"]
            texts.append(text if isinstance(text, str) else "".join(text))
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/"):
                texts.append(value if isinstance(value, str) else "".join(value))
    return texts


def notebook_name(path: Path) -> str:
    """A notebook's path under notebooks/, as badges and the command line name it."""
    return path.relative_to(NOTEBOOK_DIR).as_posix()


@dataclass
class ExecutionResult:
    """How long executing a notebook took, the kernel's peak resident memory, and its
    slowest code cells: (seconds, cell index, first line), slowest first."""

    path: Path
    seconds: float
    peak_rss_mib: float
    slowest: tuple[tuple[float, int, str], ...] = ()


def cell_seconds(nb: nbformat.NotebookNode) -> list[tuple[float, int, str]]:
    """Each executed code cell's seconds (nbclient's timing metadata: input sent to reply),
    its index and its first line, slowest first."""
    from datetime import datetime

    out = []
    for index, cell in enumerate(nb.cells):
        timing = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            start, end = (datetime.fromisoformat(timing[key].replace("Z", "+00:00"))
                          for key in ("iopub.execute_input", "shell.execute_reply"))
            first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
            out.append(((end - start).total_seconds(), index, first))
    return sorted(out, reverse=True)


def execute(path: Path, timeout: int = 600, write: bool = False) -> ExecutionResult:
    """Execute a notebook top to bottom in a fresh kernel; optionally write the outputs.

    Run this in a process of its own when measuring memory: the peak comes from the
    kernel, a child process, through ``getrusage(RUSAGE_CHILDREN)``.
    """
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("widgets", None)  # a widget state stored by an earlier run goes stale
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    if write:
        nbformat.write(nb, path)
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return ExecutionResult(path, seconds, rss_kib / 1024, tuple(cell_seconds(nb)[:3]))


def main(argv: list[str] | None = None) -> int:
    """Stamp the book and the notebooks; ``--check`` reports drift, ``--execute`` runs.

    Notebook file names among the arguments limit stamping and execution to those.
    """
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    names = [a for a in argv if not a.startswith("--")]
    verb = "stamped"
    if check:
        verb = "out of date (run: .venv/bin/python tools/notebooks.py)"
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
