"""The Dutch edition stays in step with the English chapter cells it follows (tools/dutch_sync.py).

Each Dutch cell that tells what an English cell tells records a hash of that English cell's source.
When an English cell changes, the first test fails and names the Dutch cell that must follow; after
updating it, ``.venv/bin/python tools/dutch_sync.py --accept`` records the new hashes. The other
tests prove on copies that the check fails when it should and that accepting makes it pass again.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import dutch_sync  # noqa: E402  (tools/dutch_sync.py, the maintainers' tool)

#: The English chapters the Dutch edition follows: 2's memory, 3's formats, 4's π, 5's QAT.
FOLLOWED = {"02_memory_wall.ipynb", "03_number_formats.ipynb", "04_quantizing_pi.ipynb", "05_quantization.ipynb"}
#: A Dutch cell and an English cell it follows, used to break the copies below.
DUTCH_CELL, NOTEBOOK, ENGLISH_CELL = "nl-int8-code", "04_quantizing_pi.ipynb", "f030124b"


def test_the_dutch_edition_is_in_step_with_the_english_chapters():
    found = dutch_sync.drift()
    assert not found, "\n".join([d.message() for d in found] + [f"update those Dutch cells, then run: {dutch_sync.ACCEPT}"])


def test_the_dutch_edition_follows_each_chapter_it_translates():
    links = dutch_sync.links()
    assert {link["notebook"] for _, _, link in links} == FOLLOWED
    assert len(links) >= 30
    for cell_id, _, link in links:
        assert set(link) == {"notebook", "cell", "sha"} and len(link["sha"]) == 16, cell_id
    assert (DUTCH_CELL, NOTEBOOK, ENGLISH_CELL) in {(c, link["notebook"], link["cell"]) for c, _, link in links}


@pytest.fixture
def copies(tmp_path: Path) -> tuple[Path, Path]:
    """The Dutch notebook and the English notebooks it follows, copied: (Dutch copy, notebooks copy)."""
    (tmp_path / "nl").mkdir()
    shutil.copy(dutch_sync.DUTCH, tmp_path / "nl" / dutch_sync.DUTCH.name)
    for name in FOLLOWED:
        shutil.copy(dutch_sync.NOTEBOOKS / name, tmp_path / name)
    dutch = tmp_path / "nl" / dutch_sync.DUTCH.name
    dutch_sync.accept(dutch, tmp_path)  # the copies start in step, whatever the live notebooks say
    return dutch, tmp_path


def _edit_english(notebooks: Path, name: str, cell_id: str, change) -> None:
    path = notebooks / name
    nb = nbformat.read(path, as_version=4)
    change(nb, next(c for c in nb.cells if c.id == cell_id))
    nbformat.write(nb, path)


def test_a_changed_english_cell_names_the_dutch_cell_that_must_follow(copies):
    dutch, notebooks = copies
    assert dutch_sync.drift(dutch, notebooks) == []
    _edit_english(notebooks, NOTEBOOK, ENGLISH_CELL, lambda nb, cell: setattr(cell, "source", cell.source + "\n# new"))
    found = dutch_sync.drift(dutch, notebooks)
    assert [(d.dutch_cell, d.notebook, d.english_cell, d.reason) for d in found] == [
        (DUTCH_CELL, NOTEBOOK, ENGLISH_CELL, "changed")
    ]
    message = found[0].message()
    assert message.startswith(f"Dutch cell {DUTCH_CELL} ('blok = torch.tensor(")
    assert f"must follow {NOTEBOOK} cell {ENGLISH_CELL}" in message
    assert message.endswith("changed")
    assert dutch_sync.main(["--dutch", str(dutch), "--notebooks", str(notebooks)]) == 1
    # After the Dutch cell is updated, --accept records the new hash and the check passes again.
    assert dutch_sync.main(["--accept", "--dutch", str(dutch), "--notebooks", str(notebooks)]) == 0
    assert dutch_sync.drift(dutch, notebooks) == []
    assert dutch_sync.main(["--dutch", str(dutch), "--notebooks", str(notebooks)]) == 0
    assert dutch_sync.links() != dutch_sync.links(dutch)  # the real Dutch notebook was not touched


def test_accepting_one_dutch_cell_leaves_the_others_drifting(copies):
    dutch, notebooks = copies
    edited = [(link["notebook"], link["cell"]) for c, _, link in dutch_sync.links(dutch) if c == "nl-qat-code"]
    for name, cell_id in edited + [(NOTEBOOK, ENGLISH_CELL)]:
        _edit_english(notebooks, name, cell_id, lambda nb, cell: setattr(cell, "source", cell.source + " "))
    assert {d.dutch_cell for d in dutch_sync.drift(dutch, notebooks)} == {DUTCH_CELL, "nl-qat-code"}
    assert dutch_sync.accept(dutch, notebooks, {"nl-qat-code"}) == ["nl-qat-code"]
    assert {d.dutch_cell for d in dutch_sync.drift(dutch, notebooks)} == {DUTCH_CELL}
    with pytest.raises(ValueError, match="no Dutch cell nl-99"):
        dutch_sync.accept(dutch, notebooks, {"nl-99"})


def test_a_removed_english_cell_is_named_and_cannot_be_accepted(copies):
    dutch, notebooks = copies
    _edit_english(notebooks, NOTEBOOK, ENGLISH_CELL, lambda nb, cell: nb.cells.remove(cell))
    (missing,) = dutch_sync.drift(dutch, notebooks)
    assert (missing.dutch_cell, missing.reason) == (DUTCH_CELL, "cell missing")
    assert "must follow 04_quantizing_pi.ipynb cell f030124b: cell missing" in missing.message()
    with pytest.raises(ValueError, match="which is gone: link it to the cell that replaced it"):
        dutch_sync.accept(dutch, notebooks)
    assert dutch_sync.main(["--accept", "--dutch", str(dutch), "--notebooks", str(notebooks)]) == 2
    (notebooks / NOTEBOOK).unlink()
    assert {d.reason for d in dutch_sync.drift(dutch, notebooks) if d.notebook == NOTEBOOK} == {"notebook missing"}


def test_link_records_the_current_hash_and_refuses_unknown_cells(copies):
    dutch, notebooks = copies
    dutch_sync.link("nl-oefening-1", "04_quantizing_pi.ipynb:84b9d1b6", dutch, notebooks)
    (added,) = [link for c, _, link in dutch_sync.links(dutch) if c == "nl-oefening-1"]
    english = {c.id: c for c in nbformat.read(notebooks / NOTEBOOK, as_version=4).cells}
    assert added["sha"] == dutch_sync.source_hash(english["84b9d1b6"].source)
    assert dutch_sync.drift(dutch, notebooks) == []
    with pytest.raises(ValueError, match="no English cell"):
        dutch_sync.link("nl-24", "04_quantizing_pi.ipynb:nope", dutch, notebooks)
    with pytest.raises(ValueError, match="no Dutch cell 'nl-99'"):
        dutch_sync.link("nl-99", f"{NOTEBOOK}:{ENGLISH_CELL}", dutch, notebooks)


def test_hash_and_first_line():
    assert dutch_sync.source_hash("a") == "ca978112ca1bbdca" and dutch_sync.source_hash("a ") != dutch_sync.source_hash("a")
    assert dutch_sync.first_line("\n\n## Titel\nmeer") == "## Titel"
    assert dutch_sync.first_line("") == "(empty cell)" and dutch_sync.first_line("x" * 100).endswith("…")
