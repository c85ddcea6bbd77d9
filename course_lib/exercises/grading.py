"""Instructors' tools for every chapter's exercises: grade a learner's notebook headless, write learner copies.

A notebook's exercises are cells tagged ``exercise`` (the stub the learner fills in) and
``solution`` (the worked answer). Grading runs a notebook without its solution cells in a fresh
kernel, then re-checks each exercise of the chapter's lab in a fresh process on the lab's own
cases. Learner copies are the notebooks without solutions, exercise cells' outputs cleared."""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import hashlib
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import nbformat
from nbformat.reader import NotJSONError

from course_lib.base.checks import positive
from course_lib.exercises import recheck
from course_lib.exercises.checker import Exercise
from course_lib.exercises.predictions import Prediction

__all__ = ["GradeRow", "grade_notebook", "grade_table", "learner_copies", "learner_copy", "main",
           "read_notebook"]

PROG = "python -m course_lib"


@dataclass
class GradeRow:
    """One exercise of a graded notebook: its lab's name, "pass", "not yet" or "missing", a line.

    Used by the library's other modules.
    """

    exercise: str
    result: str
    feedback: str


def _tags(cell: nbformat.NotebookNode) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _where(err: nbformat.ValidationError) -> str:
    """Where a notebook breaks the format, and how, in a few words: "cell 3: 'outputs' is a required property"."""
    path = list(err.absolute_path)
    where = ""
    if path[:1] == ["cells"] and len(path) > 1 and isinstance(path[1], int):
        where = f"cell {path[1] + 1}" + "".join(f".{part}" for part in path[2:]) + ": "
    elif path:
        where = ".".join(map(str, path)) + ": "
    what = err.message
    if err.validator in ("oneOf", "anyOf"):  # jsonschema's message repeats the whole cell
        kind = err.instance.get("cell_type") if isinstance(err.instance, dict) else None
        what = ("is not a markdown, code or raw cell as the format defines them"
                + (f" (cell_type {kind!r})" if kind is not None else ""))
    return where + (what if len(what) <= 120 else what[:117] + "...")


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """The notebook at ``path``, read and checked against the notebook format (nbformat's schema).

    A file that is not JSON, or not a notebook, or that breaks the format (a cell without its
    outputs, an unknown cell type) raises a ValueError that names the file and, for the format,
    the cell and the fault; a missing file raises FileNotFoundError. nbformat's notes about
    missing cell ids (it adds them) are not shown.

    Used by the library's other modules.
    """
    path = Path(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.read(path, as_version=4)
            nbformat.validate(nb)
    except FileNotFoundError:
        raise
    except nbformat.ValidationError as err:
        raise ValueError(f"{path} is not a valid notebook: {_where(err)}") from None
    except Exception as err:  # noqa: BLE001 - not JSON, not a notebook, not a file
        why = "not JSON" if isinstance(err, NotJSONError) else type(err).__name__
        raise ValueError(f"{path} is not a readable notebook ({why})") from None
    return nb


def without_solutions(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` without its cells tagged ``solution``.

    Used by the library's other modules.
    """
    copy = nbformat.from_dict(nb)
    copy.cells = [cell for cell in copy.cells if "solution" not in _tags(cell)]
    return copy


#: The course's notebooks (in a checkout of the course): they give the order of a lab's exercises.
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: How a notebook imports its chapter's lab: ``from course_lib.chapters import ch04_lab as lab``.
_LAB_IMPORT = re.compile(r"^\s*(?:from\s+course_lib\.chapters\s+import\s+(\w+)\s+as\s+lab"
                         r"|import\s+course_lib\.chapters\.(\w+)\s+as\s+lab)\s*(?:#.*)?$", re.M)
def _lab_calls(cell: nbformat.NotebookNode, names: Sequence[str]) -> list[tuple[str, str | None]]:
    """The exercises a cell hands an answer to, ``lab.<name>(answer)``, with the answer's source."""
    code = recheck.python_source(cell.source) if cell.cell_type == "code" else ""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # still the exercise's cell: its re-check says where the error is
        return [(m[1], None) for m in re.finditer(r"\blab\.(\w+)\(", code) if m[1] in names]
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)  # the cell's own first
             and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
             and node.func.value.id == "lab" and node.func.attr in names]
    return [(c.func.attr, ast.get_source_segment(code, c.args[0]) if c.args else None)
            for c in calls]


def _answers(nb: nbformat.NotebookNode, names: Sequence[str],
             ids: dict[str, str]) -> dict[str, tuple[int, str, str | None]]:
    """Each exercise's cell in ``nb`` (number, source, what it hands the lab): the one tagged
    ``exercise`` that calls ``lab.<name>`` (or whose next untagged cells do), else by ``ids`` or
    ``def <name>``."""
    found = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "exercise" not in _tags(cell):
            continue
        calls, after = _lab_calls(cell, names), index + 1
        while not calls and after < len(nb.cells) and "exercise" not in _tags(nb.cells[after]):
            calls, after = _lab_calls(nb.cells[after], names), after + 1  # its checker's cell
        defined = [n for n in names if re.search(rf"^def {n}\b", cell.source, re.M)]
        name = calls[0][0] if calls else ids.get(cell.get("id")) or next(iter(defined), None)
        if name is not None:  # what it hands its checker: the call's argument, or its function
            found[name] = (index + 1, cell.source, calls[0][1] if calls else
                           name if name in defined else None)
    return found


@functools.lru_cache(maxsize=None)
def _exercises(lab: str) -> tuple[tuple[str, str | None], ...]:
    """The exercises of a chapter's lab (``ch04_lab``; none if it is not one), in the order of the
    course's notebook that imports it, with their cells' ids there."""
    try:
        module = importlib.import_module(f"course_lib.chapters.{lab}")
    except ImportError:
        return ()
    names = [n for n, v in vars(module).items() if isinstance(v, (Exercise, Prediction))]
    for path in sorted(NOTEBOOKS.rglob("*.ipynb")) if NOTEBOOKS.is_dir() else []:
        if f"import {lab} as lab" in path.read_text(encoding="utf-8", errors="replace") and not (
                {".ipynb_checkpoints", "_build"} & set(path.parts)):
            nb = read_notebook(path)
            order = [(n, nb.cells[a[0] - 1].get("id")) for n, a in
                     sorted(_answers(nb, names, {}).items(), key=lambda item: item[1][0])]
            return tuple(order + [(n, None) for n in names if n not in dict(order)])
    return tuple((n, None) for n in names)


def _imports(nb: nbformat.NotebookNode) -> list[str]:
    """The top-level imports of the notebook's code cells, which a re-check runs before the cell."""
    found: list[str] = []
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        with contextlib.suppress(SyntaxError):
            code = recheck.python_source(cell.source)
            found += [ast.get_source_segment(code, node) or "" for node in ast.parse(code).body
                      if isinstance(node, (ast.Import, ast.ImportFrom))]
    return list(dict.fromkeys(found))


def _recheck_all(nb: nbformat.NotebookNode, lab: str, folder: Path,
                 timeout_s: float) -> list[GradeRow]:
    """One row per exercise of the lab: each answer re-checked in its own fresh process, at once."""
    order, running = _exercises(lab), {}
    answers = _answers(nb, [n for n, _ in order], {i: n for n, i in order if i})
    for name, (cell, source, argument) in answers.items():
        job = {"lab": lab, "exercise": name, "source": source, "argument": argument, "timeout":
               timeout_s, "imports": _imports(nb), "result": str(folder / f"{name}.json"),
               "file": str(folder / f"{name}_cell{cell}.py")}
        (folder / f"{name}.job").write_text(json.dumps(job), encoding="utf-8")
        with open(folder / f"{name}.err", "wb") as err:
            running[name] = subprocess.Popen(
                [sys.executable, "-m", recheck.__name__, str(folder / f"{name}.job")],
                cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err, start_new_session=True)
    rows = []
    for name, _ in order:
        if name not in running:
            rows.append(GradeRow(name, "missing", "its exercise cell (tagged 'exercise') is gone: "
                                 "copy it back from the learner copy, answer it, grade again"))
            continue
        try:
            running[name].wait(timeout_s + 180)  # its start: Python, torch, the imports
        except subprocess.TimeoutExpired:  # stopped with the ranks it started, if any
            with contextlib.suppress(OSError, AttributeError):
                os.killpg(running[name].pid, signal.SIGKILL)
            running[name].wait()
        try:
            found = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):  # killed, or it died: its last words, if any
            lines = (folder / f"{name}.err").read_text(errors="replace").strip().splitlines()
            timed_out = recheck.TIMED_OUT.format(seconds=timeout_s)
            found = {"result": "not yet", "message": f"its re-check stopped ({lines[-1][:160]}): "
                     "run its cell to see why" if lines else timed_out}
        rows.append(GradeRow(name, found["result"], found["message"]))
    return rows


def grade_notebook(path: str | Path, timeout_s: float = 120.0) -> list[GradeRow]:
    """Run a learner's notebook headless, without its solution cells, then re-check each exercise.

    The notebook runs in a fresh ``python3`` kernel (its warnings not shown) whose working
    directory is a new temporary folder holding only a copy of the notebook, removed afterwards:
    a cell that writes or deletes files by relative path touches that folder, never the files
    beside the notebook, which is never written. (It is no sandbox: an absolute path still
    reaches the files.) What the notebook displays is not trusted: each exercise of the chapter's
    lab is re-checked in a fresh process on the lab's own cases
    (:func:`~course_lib.exercises.recheck.recheck`); its row, named as the lab names it, says
    "missing" when its cell is gone, names an answer that calls the lab's reference or the
    library function the chapter teaches, and says "timed out after N s" past ``timeout_s``
    (per cell, and per re-check; a cell past it is interrupted and the run goes on, even when
    the cell catches the interrupt). Exercises without a chapter's lab imported
    raise ValueError; a notebook without any gives no rows.

    Used by the library's other modules.
    """
    try:
        from nbclient import NotebookClient, exceptions
    except ImportError as err:  # a plain install of the course, without the book's extras
        raise ImportError("grading runs notebooks with nbclient and ipykernel: pip install "
                          "nbclient ipykernel, then grade again") from err

    timeout_s = positive(timeout_s, "the timeout (seconds per cell, e.g. 120)")
    path = Path(path)
    nb = without_solutions(read_notebook(path))
    lab = next((m[1] or m[2] for c in nb.cells if c.cell_type == "code"
                for m in _LAB_IMPORT.finditer(c.source)), "")
    if not _exercises(lab):
        if any("exercise" in _tags(cell) for cell in nb.cells):
            raise ValueError(f"{path} imports no chapter's lab (from course_lib.chapters import "
                             "chNN_lab as lab), whose cases each exercise is checked on: is it a "
                             "notebook of this course?")
        return []
    with tempfile.TemporaryDirectory(prefix="course-grade-") as folder:
        shutil.copy2(path, Path(folder) / path.name)
        # error_on_timeout: past it, go on; a cell deaf to the interrupt (a bare ``except:``
        # in a loop) never replies, and nbclient would interrupt it forever. Late outputs: 1 s.
        stopped = {"ename": "TimeoutError", "evalue": f"past {timeout_s:g} s", "traceback": []}
        client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3", allow_errors=True,
                                interrupt_on_timeout=True, error_on_timeout=stopped,
                                iopub_timeout=1, shutdown_kernel="immediate",
                                resources={"metadata": {"path": folder}})
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                client.execute(stderr=subprocess.DEVNULL)  # the kernel's "[IPKernelApp] WARNING"
        except exceptions.DeadKernelError as err:  # re-check what is there all the same
            print(f"{path.name}: the kernel died: {err}", file=sys.stderr)
        return _recheck_all(nb, lab, Path(folder), timeout_s)


def grade_table(rows: Sequence[GradeRow]) -> str:
    """The rows as a plain-text table: exercise, pass / not yet, feedback.

    Used by the library's other modules.
    """
    lines = [["exercise", "result", "feedback"]] + [[r.exercise, r.result, r.feedback] for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    lines.insert(1, ["-" * w for w in widths])
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


#: The notebook metadata key of a learner copy: the SHA-256 of its cells as written.
COPY_KEY = "course_learner_copy"


def _cells_hash(nb: nbformat.NotebookNode) -> str:
    cells = [{k: c.get(k) for k in ("cell_type", "source", "outputs")} for c in nb.cells]
    return hashlib.sha256(json.dumps(cells, sort_keys=True).encode()).hexdigest()


def _is_untouched_copy(path: Path) -> bool:
    """Whether ``path`` is a learner copy exactly as :func:`learner_copy` wrote it."""
    try:
        nb = read_notebook(path)
    except (OSError, ValueError):  # not a notebook we wrote: never overwritten
        return False
    mark = nb.metadata.get(COPY_KEY, {})
    return isinstance(mark, dict) and mark.get("sha256") == _cells_hash(nb)


def learner_copy(src: str | Path, dst: str | Path, force: bool = False) -> Path:
    """Write ``src`` to ``dst`` without its solution cells and with its exercise cells' outputs cleared.

    A notebook already at ``dst`` is replaced only if it is a learner copy no one has changed
    since it was written (its cells' hash is in its metadata); a learner's worked copy, or
    any other notebook, raises :class:`FileExistsError` unless ``force``.

    Used by the library's other modules.
    """
    return _write_copy(read_notebook(src), Path(dst), force)


def _write_copy(nb: nbformat.NotebookNode, dst: Path, force: bool) -> Path:
    """Write the learner copy of the notebook ``nb`` (with solutions) to ``dst``."""
    nb = without_solutions(nb)
    for cell in nb.cells:
        if "exercise" in _tags(cell) and cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata[COPY_KEY] = {"sha256": _cells_hash(nb)}
    if dst.exists() and not force and not _is_untouched_copy(dst):
        raise FileExistsError(f"{dst} differs from the learner copy written there (a learner's "
                              "work?); it was left as it is")
    dst.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dst)
    return dst


def learner_copies(src_dir: str | Path, dst_dir: str | Path, force: bool = False) -> list[Path]:
    """Write a learner copy of every notebook under ``src_dir`` to the same relative path under ``dst_dir``.

    Nothing is written unless every copy can be: a notebook in ``dst_dir`` that a learner
    changed (or that no learner copy wrote) is named in one :class:`FileExistsError`, unless
    ``force``. A source folder without notebooks, or a ``dst_dir`` that holds ``src_dir``,
    is a :class:`ValueError`, and so is a source notebook that is not a valid notebook (every
    one is read and checked before anything is written).

    Used by the library's other modules.
    """
    src_dir, dst_dir = Path(src_dir).resolve(), Path(dst_dir).resolve()
    if src_dir.is_relative_to(dst_dir):
        raise ValueError(f"{dst_dir} {'is' if src_dir == dst_dir else 'holds'} the source "
                         f"folder {src_dir}: the learner copies would overwrite or mix with "
                         "the notebooks with solutions. Choose a folder outside it")
    sources = [p for p in sorted(src_dir.rglob("*.ipynb"))
               if not {".ipynb_checkpoints", "_build"} & set(p.relative_to(src_dir).parts)
               and not p.is_relative_to(dst_dir)]
    if not sources:
        raise ValueError(f"{src_dir} holds no notebooks (*.ipynb): give the course's notebooks "
                         "folder with --source")
    try:
        notebooks = {p: read_notebook(p) for p in sources}
    except ValueError as err:
        raise ValueError(f"{err}. Nothing was written; fix that notebook or move it out of "
                         f"{src_dir}") from None
    changed = [dst_dir / p.relative_to(src_dir) for p in sources]
    changed = [d for d in changed if d.exists() and not _is_untouched_copy(d)]
    if changed and not force:
        names = ", ".join(str(d.relative_to(dst_dir)) for d in changed)
        raise FileExistsError(f"{len(changed)} notebook(s) in {dst_dir} differ from the learner "
                              f"copies written there, a learner's work perhaps: {names}. Nothing "
                              "was written; move them away, or add --force to overwrite them")
    return [_write_copy(nb, dst_dir / p.relative_to(src_dir), True) for p, nb in notebooks.items()]


def build_parser() -> argparse.ArgumentParser:
    """The parser of the two instructors' commands, ``grade`` and ``learner-copies``.

    Used by the library's other modules.
    """
    parser = argparse.ArgumentParser(prog=PROG, description="Grade learners' notebooks; write learner copies.",
                                     allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True)
    grade = sub.add_parser("grade", help="run learners' notebooks headless and print a table of their exercises",
                           allow_abbrev=False)
    grade.add_argument("notebooks", nargs="+", metavar="NOTEBOOK", help="the learners' .ipynb files")
    grade.add_argument("--timeout", type=float, default=120.0, help="seconds per cell (default 120)")
    grade.add_argument("--json", action="store_true", help="print a JSON list instead of tables: "
                       "notebook, exercise, status, message per exercise (for an LMS)")
    copies = sub.add_parser("learner-copies", help="write the notebooks without solutions", allow_abbrev=False)
    copies.add_argument("dest", metavar="DEST", help="the folder to write the learner copies into")
    copies.add_argument("--source", default="notebooks", help="the folder of notebooks (default: notebooks)")
    copies.add_argument("--force", action="store_true", help="overwrite notebooks in DEST a learner changed")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``grade`` or ``learner-copies``; a missing file or a bad notebook exits with status 2 and a message.

    Used by the library's other modules.
    """
    args = build_parser().parse_args(argv)
    if args.command == "learner-copies":
        if not Path(args.source).is_dir():
            print(f"{PROG} learner-copies: error: no folder {args.source}", file=sys.stderr)
            return 2
        try:
            written = learner_copies(args.source, args.dest, force=args.force)
        except Exception as err:  # noqa: BLE001 - also a folder we may not write
            why = f"{err}." if isinstance(err, (ValueError, FileExistsError)) else \
                f"{type(err).__name__}: {err}"
            print(f"{PROG} learner-copies: error: {why}", file=sys.stderr)
            return 2
        print(f"wrote {len(written)} learner copies into {args.dest}")
        return 0
    try:
        positive(args.timeout, "the timeout (seconds per cell, e.g. 120)")
    except ValueError as err:
        print(f"{PROG} grade: error: --timeout: {err}.", file=sys.stderr)
        return 2
    for name in args.notebooks:
        try:
            read_notebook(name)
        except FileNotFoundError:
            print(f"{PROG} grade: error: no notebook {name}", file=sys.stderr)
            return 2
        except ValueError as err:  # not JSON, not a notebook, or not the notebook format
            print(f"{PROG} grade: error: {err}; nothing was graded", file=sys.stderr)
            return 2
    status, records = 0, []
    for name in args.notebooks:
        try:
            rows, error = grade_notebook(name, args.timeout), None
        except ImportError as err:
            print(f"{PROG} grade: error: {err}", file=sys.stderr)
            return 2
        except ValueError as err:  # exercises, but no chapter's lab to check them on
            rows, error = [], str(err)
        if not rows:
            status, error = 2, error or (f"{name} has no exercises (no cell tagged 'exercise'): "
                                         "is it a notebook of this course?")
            print(f"{PROG} grade: error: {error}", file=sys.stderr)
        records += [{"notebook": name, "exercise": r.exercise, "status": r.result, "message":
                     r.feedback} for r in rows] or [{"notebook": name, "exercise": None,
                                                     "status": "error", "message": error}]
        if rows and not args.json:
            print(f"{name}\n{grade_table(rows)}\n")
    if args.json:
        print(json.dumps(records, indent=2, ensure_ascii=False))
    return status


