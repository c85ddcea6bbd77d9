"""An exercise in a real JupyterLab: the stub says "not done yet", a wrong edit names its misconception, the fix passes."""

import pytest

from .conftest import jupyterlab, run_first_cell

pytestmark = pytest.mark.browser

HEAD = '''import torch
from course_lib.chapters import ch04_lab as lab


def absmax_int8(block):
    scale = block.abs().max() / 127
'''
STUB = HEAD + "    raise NotImplementedError\n\n\nlab.absmax_int8(absmax_int8)"
TRUNCATED = HEAD + "    return (block / scale).to(torch.int8), scale\n\n\nlab.absmax_int8(absmax_int8)"
RIGHT = HEAD.replace("    scale = block.abs().max() / 127\n", """    absmax = block.abs().max()
    scale = absmax / 127 if absmax > 0 else torch.ones((), dtype=block.dtype)
""") + "    return torch.round(block / scale).to(torch.int8), scale\n\n\nlab.absmax_int8(absmax_int8)"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server serving one notebook holding chapter 4's first exercise, unsolved."""
    with jupyterlab(tmp_path_factory.mktemp("lab"), tmp_path_factory.mktemp("lab-home"), "exercise.ipynb", STUB) as url:
        yield url


def _rerun_with(page, source: str, expect: str) -> str:
    """Replace the cell's code as a learner would, run it again, and return its output once ``expect`` shows."""
    editor = page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(source)
    page.keyboard.press("Control+Enter")
    output = page.locator(".jp-OutputArea-output", has_text=expect)
    output.wait_for(timeout=30_000)
    return output.inner_text()


def test_a_learner_runs_the_stub_edits_it_and_reruns(offline_page, lab):
    page = offline_page
    run_first_cell(page, lab, "exercise.ipynb", page.locator(".jp-OutputArea-output", has_text="Not done yet"))
    text = _rerun_with(page, TRUNCATED, "Not quite")
    assert "Known misconception, truncation" in text and "expected" in text and "got" in text
    assert "Traceback" not in page.locator(".jp-OutputArea").first.inner_text()
    text = _rerun_with(page, RIGHT, "Passed")
    assert text.startswith("Passed: absmax_int8 is right on all")
