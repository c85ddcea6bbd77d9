"""The package's layout keeps its promises: one folder per part, imports running one way, no
circles, no reaching into another module's private names, files readable in one sitting, and the
README's annotated tree equal to the package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "course_lib"
#: The floors of the package, lowest first: a module may import from its own floor or a lower one.
FLOORS = ("base", "text", "numbers", "compression", "parallel", "hardware", "planner",
          "exercises", "chapters")
#: Modules at the top of the package: the command line and what it runs; they may import anything.
TOP = {"__init__", "__main__", "_about", "prepare"}
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) for every ``from course_lib... import name`` and ``import course_lib...`` in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("course_lib"):
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.startswith("course_lib")]
    return found


def _target(module: str, name: str, modules: dict[str, Path]) -> str:
    """The module an import reaches: ``from course_lib.text import data`` reaches course_lib.text.data."""
    return f"{module}.{name}" if f"{module}.{name}" in modules else module


def _floor(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in FLOORS else None


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: {_target(mod, name, modules) for mod, name in _imports(p)} for m, p in modules.items()}


def test_every_module_lives_in_a_part_folder():
    loose = [m for m in _modules() if len(m.split(".")) == 2 and m.split(".")[1] not in TOP]
    assert not loose, f"modules outside a part folder: {loose}"
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(FLOORS), f"part folders {sorted(folders)} != the floors {sorted(FLOORS)}"


def test_imports_run_one_way():
    wrong = []
    for module, targets in _graph().items():
        floor = _floor(module)
        if floor is None:
            continue
        for target in targets:
            other = _floor(target)
            if other is not None and FLOORS.index(other) > FLOORS.index(floor):
                wrong.append(f"{module} -> {target}")
            if other is None and target.split(".")[-1] in TOP - {"_about"}:
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports that run back up the floors:\n" + "\n".join(wrong)


def test_no_import_circles():
    graph = _graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import circles:\n" + "\n".join(cycles)


def test_no_module_imports_another_modules_private_names():
    private = [f"{m}: {mod}.{name}" for m, p in _modules().items() for mod, name in _imports(p)
               if name.startswith("_") and name != "__version__"]
    assert not private, "private names imported across modules:\n" + "\n".join(private)


def test_files_are_readable_in_one_sitting():
    long = {m: n for m, p in _modules().items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def _readme_tree() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- package-tree:start -->\n```\n(.*?)```\n<!-- package-tree:end -->", text, re.S)
    assert block, "README.md has no package tree between <!-- package-tree:start --> and <!-- package-tree:end -->"
    entries, folder = [], ""
    for line in block.group(1).splitlines():
        m = re.match(r"^( *)([\w.]+/?)(\s+\S.*)?$", line)
        if not m or m.group(2) == "course_lib/":
            continue
        name, indent = m.group(2), len(m.group(1))
        if name.endswith("/"):
            folder = name.rstrip("/")
            entries.append((folder, (m.group(3) or "").strip()))
        else:
            entries.append((f"{folder}/{name}" if indent > 2 else name, (m.group(3) or "").strip()))
    return entries


def test_readme_tree_is_the_package():
    tree = _readme_tree()
    described = {path for path, _ in tree}
    actual = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    actual |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert described == actual, (f"README tree lists {sorted(described - actual)} that the package lacks, and "
                                 f"misses {sorted(actual - described)}")
    assert all(note for _, note in tree), "every line of the README's tree says what the module is for"
