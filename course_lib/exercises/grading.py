"""Instructors' tools for every chapter's exercises: grade a learner's notebook headless, write learner copies.

A notebook's exercises are cells tagged ``exercise`` (the stub the learner fills in) and
``solution`` (the worked answer). Grading removes the solution cells, runs the rest in a fresh
kernel and reads the result each checker displays (:data:`checker.MIME`); learner copies are the
notebooks without their solution cells and with the exercise cells' outputs cleared.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import nbformat
from nbformat.reader import NotJSONError

from course_lib.base.checks import positive
from course_lib.exercises.checker import MIME

__all__ = ["GradeRow", "grade_notebook", "grade_table", "learner_copies", "learner_copy", "main",
           "read_notebook"]

PROG = "python -m course_lib"


@dataclass
class GradeRow:
    """One exercise of a graded notebook: its name, "pass" or "not yet", and the feedback's first line.

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


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _error_line(cell: nbformat.NotebookNode) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"the cell raised {output['ename']}: {output['evalue']}"
    return None


def read_results(nb: nbformat.NotebookNode) -> list[GradeRow]:
    """The rows of an executed notebook: each checker's last result, and each exercise cell no checker followed.

    Used by the library's other modules.
    """
    rows: dict[str, GradeRow] = {}
    pending: tuple[int, str | None] | None = None  # the exercise cell not yet followed by a result

    def close_pending() -> None:
        if pending is not None:
            number, error = pending
            defined = re.search(r"^def (\w+)", nb.cells[number - 1].source, re.M)
            name = f"{defined.group(1) if defined else 'exercise'} (cell {number})"
            rows[name] = GradeRow(name, "not yet", error or "its checker did not run")

    for number, cell in enumerate(nb.cells, start=1):
        if "exercise" in _tags(cell):
            close_pending()
            pending = (number, _error_line(cell))
        for output in cell.get("outputs", []):
            result = output.get("data", {}).get(MIME)
            if result is None:
                continue
            name = result["exercise"]
            feedback = _first_line(result["message"])
            if result.get("misconception"):  # the line that names it is not the first
                feedback += f" [misconception: {result['misconception']}]"
            rows[name] = GradeRow(name, "pass" if result["passed"] else "not yet", feedback)
            pending = None
        if pending is not None and pending[0] != number and pending[1] is None:
            pending = (pending[0], _error_line(cell))  # the checker's own cell raised
    close_pending()
    return list(rows.values())


def grade_notebook(path: str | Path, timeout_s: float = 120.0) -> list[GradeRow]:
    """Run a learner's notebook headless, without its solution cells, and return one row per exercise.

    The notebook runs in a fresh ``python3`` kernel whose working directory is a new temporary
    folder holding only a copy of the notebook, removed afterwards: a learner's cell that
    writes or deletes files by relative path touches that folder, never the files beside the
    notebook. (It is no sandbox: code that names an absolute path still reaches it.) The
    learner's file itself is never written. ``timeout_s`` bounds each cell; a cell stopped
    there says "stopped after N s" in the table.

    Used by the library's other modules.
    """
    try:
        from nbclient import NotebookClient
        from nbclient.exceptions import DeadKernelError
    except ImportError as err:  # a plain install of the course, without the book's extras
        raise ImportError("grading runs notebooks with nbclient and ipykernel: pip install "
                          "nbclient ipykernel, then grade again") from err

    timeout_s = positive(timeout_s, "the timeout (seconds per cell, e.g. 120)")
    path = Path(path)
    nb = without_solutions(read_notebook(path))
    with tempfile.TemporaryDirectory(prefix="course-grade-") as folder:
        shutil.copy2(path, Path(folder) / path.name)
        client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3", allow_errors=True,
                                interrupt_on_timeout=True, resources={"metadata": {"path": folder}})
        try:
            client.execute()
        except DeadKernelError as err:  # grade what ran; the rest shows as "did not run"
            print(f"{path.name}: the kernel died: {err}", file=sys.stderr)
    return [_timed_out(row, timeout_s) for row in read_results(nb)]


def _timed_out(row: GradeRow, timeout_s: float) -> GradeRow:
    """A row whose cell the time limit interrupted says so, not "KeyboardInterrupt"."""
    if "raised KeyboardInterrupt" in row.feedback:
        return GradeRow(row.exercise, row.result, f"stopped after {timeout_s:g} s (the time "
                        "limit per cell, --timeout): does it loop forever?")
    return row


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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - not a notebook we wrote: never overwritten
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
    copies = sub.add_parser("learner-copies", help="write the notebooks without their solutions",
                            allow_abbrev=False)
    copies.add_argument("dest", metavar="DEST", help="the folder to write the learner copies into")
    copies.add_argument("--source", default="notebooks", help="the folder of notebooks (default: notebooks)")
    copies.add_argument("--force", action="store_true",
                        help="overwrite notebooks in DEST that a learner changed")
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
        except (ValueError, FileExistsError) as err:
            print(f"{PROG} learner-copies: error: {err}.", file=sys.stderr)
            return 2
        except Exception as err:  # a folder we may not write, or a file that is not a notebook
            print(f"{PROG} learner-copies: error: {type(err).__name__}: {err}", file=sys.stderr)
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
    status = 0
    for name in args.notebooks:
        try:
            rows = grade_notebook(name, args.timeout)
        except ImportError as err:
            print(f"{PROG} grade: error: {err}", file=sys.stderr)
            return 2
        if not rows:
            print(f"{PROG} grade: error: {name} has no exercises (no cell tagged 'exercise'): "
                  "is it a notebook of this course?", file=sys.stderr)
            status = 2
            continue
        print(f"{name}\n{grade_table(rows)}\n")
    return status
