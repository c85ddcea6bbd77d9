"""Keep the Dutch edition in step with the English chapter cells it follows.

A Dutch cell that tells what an English cell tells carries, in its metadata, one link per English
cell it follows, with a hash of that English cell's source as the Dutch cell last followed it::

    "follows": [{"notebook": "04_quantizing_pi.ipynb", "cell": "e1a5a492", "sha": "3f2a..."}]

When an English cell changes, its hash no longer matches and the check names the Dutch cell (id and
first line) that must follow, and the English cell that changed. Update the Dutch cell, then record
the new hashes::

    python tools/dutch_sync.py                    # report drift; exit 1 if any Dutch cell must follow
    python tools/dutch_sync.py --accept           # record every followed English cell's current hash
    python tools/dutch_sync.py --accept nl-24     # only for these Dutch cells
    python tools/dutch_sync.py --link nl-24 02_memory_wall.ipynb:fa0967d1   # a new link

tests/test_dutch_in_step.py runs the check. A maintainers' tool, not installed with the package.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
DUTCH = NOTEBOOKS / "nl" / "kwantisatie.ipynb"
KEY = "follows"
ACCEPT = ".venv/bin/python tools/dutch_sync.py --accept"


def source_hash(source: str) -> str:
    """The first 16 hex digits of the SHA-256 of a cell's source: what a Dutch cell records."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def first_line(source: str, width: int = 80) -> str:
    """A cell's first non-empty line, cut to ``width`` characters: how a report names the cell."""
    line = next((line.strip() for line in source.splitlines() if line.strip()), "(empty cell)")
    return line if len(line) <= width else line[: width - 1] + "…"


@dataclass(frozen=True)
class Drift:
    """A Dutch cell that must follow an English cell which changed (or is gone)."""

    dutch_cell: str
    dutch_line: str
    notebook: str
    english_cell: str
    english_line: str
    reason: str  # "changed", "cell missing" or "notebook missing"

    def message(self) -> str:
        """One line for a person: which Dutch cell, which English cell, what happened."""
        english = f"{self.notebook} cell {self.english_cell}"
        if self.reason == "changed":
            english += f" ({self.english_line!r}) changed"
        else:
            english += f": {self.reason}"
        return f"Dutch cell {self.dutch_cell} ({self.dutch_line!r}) must follow {english}"


def _english_cells(notebooks: Path, name: str, cache: dict) -> dict | None:
    if name not in cache:
        path = notebooks / name
        cache[name] = {c.id: c for c in nbformat.read(path, as_version=4).cells} if path.exists() else None
    return cache[name]


def links(dutch: Path = DUTCH) -> list[tuple[str, str, dict]]:
    """Every (Dutch cell id, its first line, link) of the Dutch notebook, in cell order."""
    out = []
    for cell in nbformat.read(dutch, as_version=4).cells:
        for link in cell.metadata.get(KEY, []):
            out.append((cell.id, first_line(cell.source), dict(link)))
    return out


def drift(dutch: Path = DUTCH, notebooks: Path = NOTEBOOKS) -> list[Drift]:
    """The Dutch cells whose followed English cell changed since its hash was recorded, or is gone."""
    found, cache = [], {}
    for cell_id, line, link in links(dutch):
        english = _english_cells(notebooks, link["notebook"], cache)
        if english is None:
            found.append(Drift(cell_id, line, link["notebook"], link["cell"], "", "notebook missing"))
        elif link["cell"] not in english:
            found.append(Drift(cell_id, line, link["notebook"], link["cell"], "", "cell missing"))
        elif source_hash(english[link["cell"]].source) != link["sha"]:
            source = english[link["cell"]].source
            found.append(Drift(cell_id, line, link["notebook"], link["cell"], first_line(source), "changed"))
    return found


def accept(dutch: Path = DUTCH, notebooks: Path = NOTEBOOKS, cells: set[str] | None = None) -> list[str]:
    """Record the current hash of every English cell that the Dutch cells (all, or ``cells``) follow.

    Returns the ids of the Dutch cells whose record changed. An English cell that is gone cannot be
    accepted: the link must be moved to the cell that replaced it (``--link``) or dropped by hand.
    """
    nb = nbformat.read(dutch, as_version=4)
    ids = {c.id for c in nb.cells}
    unknown = sorted((cells or set()) - ids)
    if unknown:
        raise ValueError(f"no Dutch cell {', '.join(unknown)} in {dutch.name}; its cells are {sorted(ids)}")
    changed, cache = [], {}
    for cell in nb.cells:
        if cells is not None and cell.id not in cells:
            continue
        for link in cell.metadata.get(KEY, []):
            english = _english_cells(notebooks, link["notebook"], cache)
            if english is None or link["cell"] not in english:
                raise ValueError(f"Dutch cell {cell.id} follows {link['notebook']} cell {link['cell']}, which is "
                                 f"gone: link it to the cell that replaced it with --link, or remove the link")
            sha = source_hash(english[link["cell"]].source)
            if link["sha"] != sha:
                link["sha"] = sha
                if cell.id not in changed:
                    changed.append(cell.id)
    if changed:
        nbformat.write(nb, dutch)
    return changed


def link(dutch_cell: str, target: str, dutch: Path = DUTCH, notebooks: Path = NOTEBOOKS) -> None:
    """Make ``dutch_cell`` follow the English cell ``target`` ('NOTEBOOK.ipynb:CELL_ID') from now on."""
    name, _, cell_id = target.partition(":")
    english = _english_cells(notebooks, name, {})
    if english is None or cell_id not in english:
        raise ValueError(f"no English cell {target!r}; write NOTEBOOK.ipynb:CELL_ID, e.g. 04_quantizing_pi.ipynb:e1a5a492")
    nb = nbformat.read(dutch, as_version=4)
    cell = next((c for c in nb.cells if c.id == dutch_cell), None)
    if cell is None:
        raise ValueError(f"no Dutch cell {dutch_cell!r} in {dutch.name}")
    follows = [f for f in cell.metadata.get(KEY, []) if (f["notebook"], f["cell"]) != (name, cell_id)]
    follows.append({"notebook": name, "cell": cell_id, "sha": source_hash(english[cell_id].source)})
    cell.metadata[KEY] = follows
    nbformat.write(nb, dutch)


def main(argv: list[str] | None = None) -> int:
    """Report drift (exit 1 if any), or record hashes with --accept, or add a link with --link."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accept", nargs="*", metavar="DUTCH_CELL",
                        help="record the current English hashes (for all Dutch cells, or only these)")
    parser.add_argument("--link", nargs=2, metavar=("DUTCH_CELL", "NOTEBOOK:CELL"),
                        help="make a Dutch cell follow an English cell")
    parser.add_argument("--dutch", type=Path, default=DUTCH, help=argparse.SUPPRESS)
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        if args.link:
            link(*args.link, dutch=args.dutch, notebooks=args.notebooks)
            print(f"{args.link[0]} now follows {args.link[1]}")
            return 0
        if args.accept is not None:
            changed = accept(args.dutch, args.notebooks, set(args.accept) or None)
            print(f"recorded new hashes for: {', '.join(changed)}" if changed else "nothing to record: in step")
            return 0
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    found = drift(args.dutch, args.notebooks)
    for d in found:
        print(d.message())
    if found:
        print(f"update those Dutch cells, then run: {ACCEPT}")
        return 1
    print(f"in step: {len(links(args.dutch))} links from the Dutch edition to the English chapters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
