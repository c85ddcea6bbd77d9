"""Re-check one exercise of a learner's notebook in a fresh process, on the lab's own cases.

:func:`course_lib.exercises.grading.grade_notebook` starts one ``python -m
course_lib.exercises.recheck JOB`` per exercise of every chapter's lab. This module imports what a
re-check needs and no more: not nbformat, whose schema checker alone takes seconds to import, in
every one of those processes."""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import dataclasses
import importlib
import inspect
import json
import os
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, Sequence

from course_lib.exercises.checker import Exercise
from course_lib.exercises.predictions import Prediction

__all__ = ["TIMED_OUT", "python_source", "recheck"]

TIMED_OUT = ("timed out after {seconds:g} s (the time limit per cell, --timeout): look for a loop "
             "that never ends or work that grows too fast, then grade again")
_UNKNOWN = object()


def python_source(source: str) -> str:
    """A cell's source as Python, IPython's ``!pip`` and ``%time`` lines as the calls they make.

    Used by the library's other modules.
    """
    with contextlib.suppress(Exception):  # no IPython, or a cell it cannot read: Python says why
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(source)
    return source


def _named(nodes: Sequence[ast.AST], namespace: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every name, attribute chain (``lab._absmax_int8``) and ``from course_lib... import`` in
    ``nodes``, with the object it is in ``namespace``."""
    found = []
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib"):
            module = sys.modules.get(node.module or "")  # in a function: what it would import
            found += [(f"{node.module}.{a.name}", getattr(module, a.name, _UNKNOWN))
                      for a in node.names]
        parts = []
        while isinstance(node, ast.Attribute):
            parts.insert(0, node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            thing = namespace.get(node.id, getattr(builtins, node.id, _UNKNOWN))
            for part in parts:
                try:
                    thing = _UNKNOWN if thing is _UNKNOWN else getattr(thing, part)
                except Exception:  # noqa: BLE001 - an attribute that fails to read names nothing
                    thing = _UNKNOWN
            found.append((".".join([node.id, *parts]), thing))
    return [(text, thing) for text, thing in found if thing is not _UNKNOWN]


def _taught(item: Exercise | Prediction) -> dict[int, tuple[Any, bool]]:
    """What an answer may not call, by id: the lab's reference (or measurement) and lab helpers it
    calls (True); for a code exercise also the library's functions and classes they call, which the
    chapter teaches (False), but not those holding settings (dataclasses, ``*config*``).

    An answer's cell is read for the names it uses, resolved in the namespace the cell ran in
    (:func:`_named`): ``lab._absmax_int8``, ``lab.absmax_int8.reference`` and an alias made by an
    import or an assignment all resolve to the same object. Chosen over running the function with
    the reference replaced by a sentinel that raises: the checker needs the reference for the
    expected values, a learner's ``try``/``except`` would swallow the sentinel, and chapters 8 and
    9 run the function on ranks no sentinel reaches. A name built at run time (``getattr``) escapes
    it: grading is no sandbox. A prediction may use the library (chapter 10's worked answer
    measures a bandwidth), not the lab's measurement.
    """
    root = item.reference if isinstance(item, Exercise) else item.measure
    found: dict[int, tuple[Any, bool]] = {}
    todo = [root]
    while todo and len(found) < 64:
        fn = todo.pop()
        own = (getattr(fn, "__module__", None) or "").endswith("_lab")
        if id(fn) in found:
            continue
        found[id(fn)] = (fn, own or fn is root)
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(fn))).body if own else []
        except (OSError, TypeError, SyntaxError):
            body = []
        for _, thing in _named(body, getattr(fn, "__globals__", {})):
            thing = getattr(thing, "reference", None) or getattr(thing, "measure", None) or thing \
                if isinstance(thing, (Exercise, Prediction)) else thing
            kind = inspect.isfunction(thing) or (inspect.isclass(thing)
                                                 and not dataclasses.is_dataclass(thing))
            module = getattr(thing, "__module__", None) or ""
            if (kind and module.startswith("course_lib.") and "config" not in thing.__name__.lower()
                    and (isinstance(item, Exercise) or module.endswith("_lab"))):
                todo.append(thing)
    return found


def _uses(nodes: Sequence[ast.AST], namespace: dict[str, Any],
          item: Exercise | Prediction) -> str | None:
    """Why an answer is not the learner's own: it calls the lab's reference or what the chapter
    teaches (:func:`_taught`)."""
    taught = _taught(item)
    for text, thing in _named(nodes, namespace):
        thing = getattr(thing, "__func__", thing)  # a bound method: its function
        if taught.get(id(thing), (_UNKNOWN,))[0] is not thing:
            continue
        if isinstance(item, Prediction):
            return (f"takes its number from the lab's measurement `{text}` instead of predicting "
                    "it: work it out from the text, then grade again")
        what = ("the lab's reference `{}`" if taught[id(thing)][1] else
                "`{}`, the library function the chapter teaches,").format(text)
        return (f"calls {what} instead of computing it: write the computation yourself, "
                "then grade again")
    return None


def _kept(node: ast.stmt) -> bool:
    """Whether a re-check runs a top-level statement of an exercise's cell: not one setting an
    attribute or item (``lab.x.cases = []``), nor an expression using the lab or ``setattr``."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        plain = (ast.Name, ast.Tuple, ast.List, ast.Starred, ast.expr_context)
        return all(isinstance(n, plain) for t in targets for n in ast.walk(t))
    return not (isinstance(node, ast.Expr) and any(
        isinstance(n, ast.Name) and n.id in ("lab", "setattr", "delattr") for n in ast.walk(node)))


def _imports_used(statements: Sequence[str], code: Sequence[str]) -> list[str]:
    """The notebook's import statements that bind a name ``code`` reads (a star import always):
    a re-check imports what the cell uses, not all that the notebook imports."""
    read = set()
    for text in code:
        with contextlib.suppress(SyntaxError):
            read |= {n.id for n in ast.walk(ast.parse(text.strip())) if isinstance(n, ast.Name)}
    used = []
    for statement in statements:
        with contextlib.suppress(SyntaxError):
            names = [a.asname or a.name.partition(".")[0] for node in ast.parse(statement).body
                     if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names]
            if "*" in names or read.intersection(names):
                used.append(statement)
    return used


def recheck(job_file: str) -> int:
    """A re-check, in a fresh process: one exercise's cell against the lab's own cases, copied
    before any of the learner's code runs (the notebook's imports that the cell uses, then the
    cell as :func:`_kept` keeps it), stopped by the time limit per cell; the verdict goes to
    the result file as JSON.

    Used by the library's other modules.
    """
    job = json.loads(Path(job_file).read_text(encoding="utf-8"))

    def report(result: str, message: str) -> int:
        Path(job["result"]).write_text(json.dumps({"result": result, "message": message}))
        return 0

    source = python_source(job["source"])
    Path(job["file"]).write_text(source, encoding="utf-8")  # the lines the feedback quotes
    try:
        kept = [node for node in ast.parse(source, job["file"]).body if _kept(node)]
    except SyntaxError as err:
        return report("not yet", f"its cell has a syntax error at line {err.lineno} ({err.msg}): "
                      "fix it, then grade again")
    lab = importlib.import_module(f"course_lib.chapters.{job['lab']}")
    item = copy.copy(getattr(lab, job["exercise"]))
    if isinstance(item, Exercise):
        item.cases = list(item.cases() if callable(item.cases) else item.cases)
    namespace: dict[str, Any] = {"__name__": "__learner__"}
    for statement in _imports_used(job["imports"], [source, job["argument"] or ""]):
        with contextlib.suppress(Exception):
            exec(statement, namespace)  # the notebook's own imports
    namespace["lab"] = lab
    stop = threading.Timer(job["timeout"], lambda: (report(
        "not yet", TIMED_OUT.format(seconds=job["timeout"])), os._exit(0)))
    stop.daemon = True
    stop.start()
    try:
        exec(compile(ast.Module(kept, []), job["file"], "exec"), namespace)
        used, argument = _uses(kept, namespace, item), job["argument"]  # the learner's expression
        feedback = None if used or not argument else item.check(eval(argument, namespace))
    except Exception as err:  # noqa: BLE001 - the cell itself raised
        feedback, used = None, f"its cell raised {type(err).__name__}: {err}: fix it, grade again"
    stop.cancel()
    if feedback is None:
        return report("not yet", used or f"its cell hands no answer to its checker (lab."
                      f"{job['exercise']}(...)): put the call back, then grade again")
    text = feedback.message.strip().splitlines()[0]
    if "NameError" in text:  # a name of another cell
        text += " (a re-check runs the exercise's cell alone: define what it uses there)"
    if feedback.misconception:
        text += f" [misconception: {feedback.misconception}]"
    return report("pass" if feedback.passed else "not yet", text)


if __name__ == "__main__":  # a re-check's fresh process
    sys.exit(recheck(sys.argv[1]))
