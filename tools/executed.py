"""The notebooks the book build executed, and whether they are still what nbval would execute.

A fresh build executes every notebook (``jupyter-book build``, into
``book/_build/jupyter_execute/``); nbval would then execute every one again. ``scripts/build.sh``
stamps the executed copies with a fingerprint of everything that decides their outputs (the
notebooks, the library, the installed packages, the Python); ``scripts/test.sh`` asks ``--fresh``
and, when the stamp still matches, has ``tests/test_executed.py`` check those copies the way nbval
checks a run (no cell raised, every ``nbval-check-output`` cell equal to the committed output after
the same sanitizers, compared by nbval's own code) instead of executing the notebooks a second
time. Any change to a notebook or to the library makes the stamp stale, and nbval executes again.

    python tools/executed.py --stamp    # after a successful book build
    python tools/executed.py --fresh    # exit 0 when the stamp matches, else 1 and why
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "book" / "_build" / "jupyter_execute" / "notebooks"
STAMP = ROOT / "book" / "_build" / "executed.json"
#: What decides a notebook's outputs besides the notebooks: the library and how it is installed.
INPUTS = ("course_lib", "pyproject.toml", "constraints.txt", "book/_config.yml")


def notebooks() -> list[Path]:
    """Every notebook of the course, relative to ``notebooks/`` (the Dutch edition included)."""
    return sorted(p.relative_to(NOTEBOOKS) for p in NOTEBOOKS.rglob("*.ipynb")
                  if ".ipynb_checkpoints" not in p.parts)


def fingerprint() -> str:
    """SHA-256 over the notebooks, the library's files, the installed packages and the Python."""
    digest = hashlib.sha256()
    files = [NOTEBOOKS / p for p in notebooks()]
    for name in INPUTS:
        path = ROOT / name
        files += sorted(f for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts
                        ) if path.is_dir() else [path] if path.exists() else []
    for f in files:
        digest.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    packages = sorted({f"{d.metadata['Name']}=={d.version}".lower()
                       for d in importlib.metadata.distributions()})  # a set: one per path
    digest.update("\n".join([sys.version, *packages]).encode())
    return digest.hexdigest()


def stamp() -> Path:
    """Record that the executed copies in ``book/_build/jupyter_execute`` match the inputs now."""
    missing = [str(p) for p in notebooks() if not (EXECUTED / p).is_file()]
    if missing:
        raise SystemExit(f"error: the book build left no executed copy of {', '.join(missing)}; "
                         "run `bash scripts/build.sh` again.")
    STAMP.write_text(json.dumps({"fingerprint": fingerprint(),
                                 "notebooks": [str(p) for p in notebooks()],
                                 "written": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                          time.gmtime())}, indent=1) + "\n")
    return STAMP


def stale() -> str:
    """Why the executed copies cannot stand for an nbval run now; "" when they can."""
    try:
        recorded = json.loads(STAMP.read_text())
    except FileNotFoundError:
        return "no book build has stamped its executed notebooks"
    except (OSError, ValueError) as err:
        return f"the stamp {STAMP} cannot be read ({err})"
    if recorded.get("notebooks") != [str(p) for p in notebooks()]:
        return "the course's notebooks are not the ones the book build executed"
    if any(not (EXECUTED / p).is_file() for p in notebooks()):
        return "an executed copy is missing"
    if recorded.get("fingerprint") != fingerprint():
        return ("a notebook, the library or an installed package changed since the book build "
                "executed the notebooks")
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--stamp", action="store_true", help="stamp the executed copies")
    action.add_argument("--fresh", action="store_true",
                        help="exit 0 when the stamp matches the notebooks and library now")
    args = parser.parse_args(argv)
    if args.stamp:
        print(f"stamped the executed notebooks: {stamp().relative_to(ROOT)}")
        return 0
    reason = stale()
    print(f"executed notebooks: {reason or 'fresh, the book build executed these notebooks'}")
    return 1 if reason else 0


if __name__ == "__main__":
    sys.exit(main())
