"""nbval's checks on the notebooks the book build executed, when they are still fresh.

``scripts/test.sh`` runs these instead of nbval's second execution of every notebook when
``tools/executed.py --fresh`` says the book build's executed copies match the notebooks, the library
and the installed packages now (see that tool); otherwise they skip and nbval executes the notebooks.
Each check is nbval's: no cell raised (unless tagged ``raises-exception``), and every cell tagged
``nbval-check-output`` equals the committed output after ``tests/sanitize.cfg``'s sanitizers, by
nbval's own comparison (``IPyNbCell.compare_outputs``). The book build merged each cell's streams
as myst-nb does (``nb_merge_streams``: trailing white space of each stream becomes one newline),
so the committed streams are merged the same way before they are compared.
"""

from __future__ import annotations

import copy
import sys
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from myst_nb.core.utils import coalesce_streams as merge_streams
from nbval.plugin import IPyNbCell, coalesce_streams, get_sanitize_patterns, nocolors

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import executed  # noqa: E402  (tools/ is not a package)

#: nbval 0.11's IPyNbFile.skip_compare (images skipped: no --nbdime), the keys it never compares.
SKIP_COMPARE = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg")
PATTERNS = OrderedDict(get_sanitize_patterns((ROOT / "tests" / "sanitize.cfg").read_text()))
#: myst-nb's nb_merge_streams (book/_config.yml) merges a cell's streams into the first of each
#: name in place while it renders, and the executed copy it saves keeps the later ones too.
MERGED = "nb_merge_streams: true" in (ROOT / "book" / "_config.yml").read_text()


class _Comparison:
    """What ``IPyNbCell.compare_outputs`` reads of its cell: the file's settings, colours, a report."""

    compare_outputs = IPyNbCell.compare_outputs
    sanitize = IPyNbCell.sanitize

    def __init__(self) -> None:
        self.parent = SimpleNamespace(skip_compare=SKIP_COMPARE, sanitize_patterns=PATTERNS)
        self.colors = nocolors
        self.comparison_traceback: list[str] = []

    def format_output_compare(self, key: str, left, right) -> None:
        self.comparison_traceback += [f"mismatch '{key}'", "committed:", str(left),
                                      "executed by the book build:", str(right)]


def executed_outputs(outputs: list, merged: bool = MERGED) -> list:
    """The outputs of a cell of the book's executed copy as nbval sees a run: streams coalesced.

    With ``merged`` the first stream of each name already holds all of that name's text (myst-nb
    merged them into it), so the later ones are dropped instead of being added a second time.
    """
    if not merged:
        return coalesce_streams(copy.deepcopy(outputs))
    seen, kept = set(), []
    for output in outputs:
        if output.output_type == "stream":
            if output.name in seen:
                continue
            seen.add(output.name)
        kept.append(copy.deepcopy(output))
    return kept


#: What may have ended the first piece of a stream, which myst-nb's merge replaced by one newline.
ENDINGS = ("", "\n", "\n\n")


def unmerged_outputs(outputs: list) -> list[list]:
    """The outputs the kernel may have sent, rebuilt from myst-nb's merged copy of a cell.

    The kernel sends a stream in pieces, cut wherever its 0.2 s flush timer falls, even between
    ``print``'s text and its newline. myst-nb's merge strips each piece's trailing white space and
    ends it with one newline, so ``"a"`` + ``"\\nb\\n"`` becomes ``"a\\n\\nb\\n"``: a blank
    line that was never printed. The later pieces are kept as sent, so the first piece is the merged
    text less theirs, up to the white space that ended it, which is one of ``ENDINGS``. Returns one
    list of outputs per way it may have ended, each stream's text whole, as nbval joins them; []
    where the merged text is not the pieces' (myst-nb also resolved ``\\r`` or ``\\b`` in it).
    """
    texts: dict[str, list[str]] = {}
    for output in outputs:
        if output.output_type == "stream":
            texts.setdefault(output.name, []).append(output.text)
    heads = {}
    for name, (merged, *later) in texts.items():
        rest = "".join(piece.rstrip() + "\n" for piece in later if piece.rstrip())
        if not merged.endswith("\n" + rest):
            return []
        heads[name] = merged[:len(merged) - len(rest) - 1]
    candidates = []
    for ending in ENDINGS:
        whole = {name: heads[name] + ending + "".join(later)
                 for name, (_, *later) in texts.items()}
        kept = executed_outputs(outputs)
        for output in kept:
            if output.output_type == "stream":
                output.text = whole[output.name]
        candidates.append(coalesce_streams(kept))
    return candidates


def committed_outputs(outputs: list, merged: bool = MERGED) -> list:
    """The committed outputs of a cell, streams coalesced as the executed copy's are.

    With ``merged``, by myst-nb's own merge (each stream's trailing white space becomes one
    newline), which is how the book build wrote the executed copy's streams; else by nbval's.
    """
    return (merge_streams if merged else coalesce_streams)(copy.deepcopy(outputs))


def _sent_as_committed(merged: list, committed: list) -> bool:
    """Whether a way the kernel may have sent ``merged`` equals ``committed``, as nbval joins
    both (a stream cut inside a line, which myst-nb's merge turned into a blank line)."""
    printed = coalesce_streams(copy.deepcopy(committed))
    return any(_Comparison().compare_outputs(sent, printed) for sent in unmerged_outputs(merged))


def problems(committed: nbformat.NotebookNode, ran: nbformat.NotebookNode) -> list[str]:
    """Each way ``ran`` fails nbval against ``committed`` (``--nbval-lax``): [] when it passes."""
    found = []
    sources = [(c.cell_type, c.source) for c in committed.cells]
    if sources != [(c.cell_type, c.source) for c in ran.cells]:
        return ["the executed copy is of other cells than the committed notebook"]
    for i, (mine, theirs) in enumerate(zip(committed.cells, ran.cells)):
        if mine.cell_type != "code":
            continue
        tags = mine.metadata.get("tags", [])
        errors = [o for o in theirs.outputs if o.output_type == "error"]
        if errors and "raises-exception" not in tags:
            found.append(f"cell {i} raised {errors[0].ename}: {errors[0].evalue}")
        if "nbval-check-output" in tags:
            comparison = _Comparison()
            if not (comparison.compare_outputs(executed_outputs(theirs.outputs),
                                               committed_outputs(mine.outputs))
                    or MERGED and _sent_as_committed(theirs.outputs, mine.outputs)):
                found.append(f"cell {i}'s output differs from the committed one:\n"
                             + "\n".join(comparison.comparison_traceback))
    return found


REASON = executed.stale()


@pytest.mark.skipif(bool(REASON), reason=f"nbval executes the notebooks instead: {REASON}")
@pytest.mark.parametrize("notebook", [str(p) for p in executed.notebooks()])
def test_the_book_builds_execution_passes_nbval(notebook):
    committed = nbformat.read(executed.NOTEBOOKS / notebook, as_version=4)
    ran = nbformat.read(executed.EXECUTED / notebook, as_version=4)
    found = problems(committed, ran)
    assert not found, "\n".join(found)


def _notebook(outputs: list[dict], tags: list[str]) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("print(x)", metadata={"tags": tags})
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return nbformat.v4.new_notebook(cells=[cell])


def test_the_check_fails_where_nbval_fails():
    """Raised cells, changed checked outputs and other cells fail; sanitized differences pass."""
    def out(text: str, name: str = "stdout") -> dict:
        return {"output_type": "stream", "name": name, "text": text}

    checked = ["nbval-check-output"]
    same = _notebook([out("took 1.5 s\n")], checked)
    assert problems(same, _notebook([out("took 2 s\n")], checked)) == []  # a timing
    assert problems(same, _notebook([out("took 1.5 s\n"), out("")], checked)) == []  # coalesced
    assert "differs" in problems(same, _notebook([out("took 1.5 s, 3 steps\n")], checked))[0]
    assert problems(_notebook([out("a\n")], []), _notebook([out("b\n")], [])) == []  # lax
    error = {"output_type": "error", "ename": "AssertionError", "evalue": "", "traceback": []}
    assert "raised AssertionError" in problems(_notebook([], []), _notebook([error], []))[0]
    assert problems(_notebook([], ["raises-exception"]),
                    _notebook([error], ["raises-exception"])) == []
    # myst-nb's merged copy: the first stream holds both texts, the second is still there
    split = _notebook([out("a\n"), {"output_type": "display_data", "data": {}, "metadata": {}},
                       out("b\n")], checked)
    merged = _notebook([out("a\nb\n"), {"output_type": "display_data", "data": {},
                                          "metadata": {}}, out("b\n")], checked)
    assert problems(split, merged) == []
    assert "differs" in problems(split, _notebook([out("a\nc\n"), out("b\n")], checked))[0]
    other = _notebook([], [])
    other.cells[0].source = "print(y)"
    assert "other cells" in problems(_notebook([], []), other)[0]


def test_a_stream_cut_inside_a_line_passes_and_other_blank_lines_fail():
    """The kernel cut ``print``'s text from its newline; myst-nb's merge then added a blank line.

    Chapter 4's cell 9 in CI: the book build's copy read ``fp32 ...\\n\\nfp16 ...`` with a second
    piece ``\\nfp16 ...``, where the committed run printed no blank line.
    """
    def out(text: str) -> dict:
        return {"output_type": "stream", "name": "stdout", "text": text}

    checked = ["nbval-check-output"]
    printed = _notebook([out("fp32\nfp16\nbf16\n")], checked)
    cut = _notebook([out("fp32\n\nfp16\nbf16\n"), out("\nfp16\nbf16\n")], checked)
    assert problems(printed, cut) == []
    assert problems(_notebook([out("fp32\n"), out("fp16\nbf16\n")], checked), cut) == []
    # a blank line the run printed, cut after it or not, is still a difference
    assert "differs" in problems(printed, _notebook([out("fp32\n\nfp16\nbf16\n")], checked))[0]
    assert "differs" in problems(printed, _notebook([out("fp32\n\n\nfp16\nbf16\n"),
                                                     out("\n\nfp16\nbf16\n")], checked))[0]
    # other text around the cut, or a first piece that is not the merged text's, fails
    assert "differs" in problems(printed, _notebook([out("fp32\n\nfp8\nbf16\n"),
                                                     out("\nfp8\nbf16\n")], checked))[0]
    assert "differs" in problems(printed, _notebook([out("fp64\n\nfp16\nbf16\n"),
                                                     out("\nfp16\nbf16\n")], checked))[0]
    assert "differs" in problems(printed, _notebook([out("fp32\n\nfp16\nbf16\n"),
                                                     out("\nfp16\n")], checked))[0]
