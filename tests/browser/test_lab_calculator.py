"""The memory calculator in a real JupyterLab: run it, change inputs, read the new verdict, type a typo."""

import pytest

from .conftest import jupyterlab, run_first_cell

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server serving one notebook that shows the calculator."""
    source = 'from course_lib.numbers.widgets import memory_calculator\nmemory_calculator(params="7B", precision="bf16-mixed")'
    with jupyterlab(tmp_path_factory.mktemp("lab"), tmp_path_factory.mktemp("lab-home"), "calculator.ipynb", source) as url:
        yield url


def _set(page, css_class: str, value: str) -> None:
    box = page.locator(f".{css_class} input")
    box.fill(value)
    box.press("Enter")


def test_calculator_updates_in_jupyterlab(offline_page, lab):
    page = offline_page
    result = page.locator(".course-memory-result")
    run_first_cell(page, lab, "calculator.ipynb", result)
    assert "1 GPU(s), ZeRO stage 0" in result.inner_text()
    assert "does not fit on 80 GiB" in result.inner_text()

    _set(page, "course-gpus", "8")
    _set(page, "course-zero", "3")
    page.wait_for_function(
        "() => document.querySelector('.course-memory-result').innerText.includes('8 GPU(s), ZeRO stage 3')",
        timeout=30_000,
    )
    text = result.inner_text()
    assert "fits on 80 GiB" in text and "does not fit on 80 GiB" not in text

    # A typo shows a message inside the widget, not a traceback.
    _set(page, "course-params", "7 billion")
    page.wait_for_function(
        "() => document.querySelector('.course-memory-result').innerText.includes('Cannot compute')", timeout=30_000
    )
    assert "write a positive number such as 7e9" in result.inner_text()
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert "Traceback" not in page.locator(".jp-OutputArea").first.inner_text()
