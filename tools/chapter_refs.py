"""Point every public function and class of course_lib back to the chapter that teaches it.

As d2l's saved helpers name their section, each public docstring of the library ends with a line
such as ``Chapter 3, *Number formats*.``: the first notebook whose code uses the name (as
``module.name`` or imported from its module), else the first chapter that uses its module.

    python tools/chapter_refs.py          # add or update the lines
    python tools/chapter_refs.py --check  # exit 1 if any is missing or stale (tests run this)

A maintainers' tool, not installed with the package.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_lib"
NOTEBOOKS = ROOT / "notebooks"
SKIP = {"__init__", "__main__", "_about"}
LINE = re.compile(r"^(Chapters?|Used by) .*\.$")
#: Modules that the notebooks use only through another module, and the chapter that teaches them
#: (i18n: the texts of chapter 3's bit explorer, the first widget that speaks Dutch).
TAUGHT_IN = {"stories": 1, "story_world": 1, "story_troubles": 1, "story_discoveries": 1, "traffic": 8,
             "i18n": 3, "ch09_diagrams": 9}


def chapters() -> dict[int, tuple[str, str]]:
    """Chapter number -> (title, all code of its notebook), from the notebooks' first headings."""
    out = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(path.read_text())
        heading = "".join(nb["cells"][0]["source"]).splitlines()[0]
        number, title = re.match(r"# (\d+) · (.+)", heading).groups()
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        out[int(number)] = (title, code)
    return out


def users(module: str, name: str, book: dict[int, tuple[str, str]]) -> list[int]:
    """The chapters whose notebook code uses ``module.name`` or imports ``name`` from ``module``."""
    found = []
    for number, (_, code) in book.items():
        if name not in code:  # both patterns need it: skip their slow searches (seconds)
            continue
        dotted = f"{module}.{name}" in code and re.search(rf"\b{module}\.{name}\b", code)
        imported = f".{module} import" in code and re.search(
            rf"from course_lib(\.\w+)*\.{module} import (\([^)]*|[^\n]*)\b{name}\b", code)
        if dotted or imported:
            found.append(number)
    return found


def module_users(module: str, book: dict[int, tuple[str, str]]) -> list[int]:
    """The chapters whose notebook code imports ``module`` at all."""
    pattern = rf"(from course_lib(\.\w+)* import [^\n]*\b{module}\b|course_lib\.(\w+\.)*{module}\b)"
    return [n for n, (_, code) in book.items() if module in code and re.search(pattern, code)]


def reference(module: str, name: str, book: dict[int, tuple[str, str]]) -> str:
    """The line that names the chapter teaching ``module.name``."""
    direct = users(module, name, book)
    found = direct or module_users(module, book) or [TAUGHT_IN.get(module)] * (module in TAUGHT_IN)
    if not found:
        return "Used by the library's other modules."
    first = min(found)
    return f"Chapter {first}, *{book[first][0]}*."


def public_definitions(tree: ast.Module) -> list[ast.FunctionDef | ast.ClassDef]:
    """Top-level public functions and classes that have a docstring."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [node for node in tree.body if isinstance(node, kinds) and not node.name.startswith("_")
            and ast.get_docstring(node) is not None]


def rewrite(path: Path, book: dict[int, tuple[str, str]]) -> tuple[str, list[str]]:
    """The module's text with every public docstring's chapter line added or updated."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    stale = []
    for node in reversed(public_definitions(tree)):
        doc = node.body[0].value
        want = reference(path.stem, node.name, book)
        first, last = doc.lineno - 1, doc.end_lineno - 1
        indent = re.match(r"\s*", lines[first]).group(0)
        body = "".join(lines[first:last + 1])
        quote = '"""' if body.lstrip().lstrip("rb").startswith('"""') else "'''"
        inner = body.strip()[body.strip().index(quote) + 3: -3]
        paragraphs = inner.rstrip().split("\n")
        if paragraphs and LINE.match(paragraphs[-1].strip()):
            if paragraphs[-1].strip() == want:
                continue
            paragraphs = paragraphs[:-1]
            while paragraphs and not paragraphs[-1].strip():
                paragraphs.pop()
        stale.append(f"{path.stem}.{node.name}")
        prefix = body.strip()[: body.strip().index(quote) + 3]
        new = [f"{indent}{prefix}{paragraphs[0]}\n"]
        new += [f"{p}\n" if p.strip() else "\n" for p in paragraphs[1:]]
        new += ["\n", f"{indent}{want}\n", f"{indent}{quote}\n"]
        lines[first:last + 1] = new
    return "".join(lines), stale


def main(argv: list[str] | None = None) -> int:
    """Add or check the chapter lines of every module."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if anything is stale")
    parser.add_argument("modules", nargs="*", help="module names (default: all)")
    args = parser.parse_args(argv)
    book = chapters()
    stale_all = []
    for path in sorted(PACKAGE.rglob("*.py")):  # subpackages too (course_lib/parallel/)
        if path.stem in SKIP or (args.modules and path.stem not in args.modules):
            continue
        text, stale = rewrite(path, book)
        stale_all += stale
        if stale and not args.check:
            path.write_text(text)
    for name in stale_all:
        print(f"{'stale' if args.check else 'updated'}: {name}")
    if args.check and stale_all:
        print("run: .venv/bin/python tools/chapter_refs.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
