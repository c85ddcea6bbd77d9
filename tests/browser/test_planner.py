"""The training planner's view in chromium: the page computes what Python computes, with
no kernel.

A page holding only the planner's HTML (its inline script carries planner.js and the
tables): the starting plan equals Python's to the last digit; typing into the boxes
replans at once; a bad value shows the planner's own message, the same words Python
raises; the Dutch view speaks Dutch. tests/test_planner.py proves the JavaScript model
equal to Python on hundreds of plans under node; here the view itself is driven.
"""

from __future__ import annotations

import pytest

from course_lib.planner import model, report
from course_lib.planner.widget import planner

from .conftest import jupyterlab, run_first_cell

pytestmark = pytest.mark.browser


def _leaves(data, path=""):
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            out.update(_leaves(value, f"{path}.{key}"))
        return out
    return {path: data}


def _show(page, *views) -> None:
    page.set_content(
        "<!doctype html><html><body>"
        + "".join(v._repr_html_() for v in views)
        + "</body></html>"
    )
    page.wait_for_function(
        f"() => document.querySelectorAll('.course-plan [data-fits]').length "
        f"=== {len(views)}"
    )


def _type(page, name: str, value: str, root: str = ".course-plan") -> None:
    box = page.locator(f"{root} [data-field={name}]").first
    box.fill(value)
    box.dispatch_event("change")


def _error(**inputs) -> str:
    with pytest.raises(ValueError) as err:
        model.plan(**inputs)
    return str(err.value)


def test_the_page_plans_what_python_plans(offline_page):
    page = offline_page
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    view = planner(
        model="llama3-405b", nodes=2048, tp=8, pp=16, zero=1, checkpointing=True
    )
    _show(page, view)
    assert (
        page.locator(".course-plan-static").count() == 0
    )  # the fallback text made way
    js = page.evaluate(
        "() => document.querySelector('.course-plan').__coursePlanner.result"
    )
    want, got = _leaves(view.result.as_dict()), _leaves(js)
    assert want.keys() == got.keys()
    assert all(
        want[k] == got[k] or abs(want[k] - got[k]) <= 1e-12 * abs(want[k]) for k in want
    )
    sentences = report.sentences(view.result)
    assert page.locator("[data-role=verdict]").inner_text() == sentences[0]
    assert page.locator("[data-role=train]").inner_text() == sentences[-2]
    assert page.locator("[data-role=memory-bar] [data-part]").count() == 6
    assert page.locator(".course-plan-ui").get_attribute("data-fits") == "true"

    # Replan as the boxes change: turn checkpointing off, then make it fit again with
    # ZeRO 3.
    page.locator("[data-field=checkpointing]").uncheck()
    assert page.locator(".course-plan-ui").get_attribute("data-fits") == "false"
    assert page.locator("[data-role=change]").inner_text() == (
        "cheapest change that fits: turn activation checkpointing on"
    )
    # A bad value: the planner's own one-line message, and the results dimmed, not gone.
    _type(page, "tp", "3")
    message = page.locator("[data-role=message]")
    assert message.is_visible()
    expected = _error(model="llama3-405b", nodes=2048, tp="3", pp=16, zero=1)
    assert message.inner_text() == "Cannot plan: " + expected
    _type(page, "tp", "8")
    assert not message.is_visible()
    # A new model resets the shape boxes to its published values (shown as
    # placeholders).
    _type(page, "layers", "64")
    page.locator("[data-field=model]").select_option("llama2-7b")
    assert page.locator("[data-field=layers]").input_value() == ""
    assert page.locator("[data-field=layers]").get_attribute("placeholder") == "32"
    assert not page.blocked and not errors, (page.blocked, errors)


def test_the_dutch_view_speaks_dutch(offline_page):
    page = offline_page
    view = planner(model="llama2-70b", nodes=4, language="nl")
    _show(page, view, planner(model="llama2-70b", nodes=4))
    dutch, english = page.locator(".course-plan").nth(0), page.locator(
        ".course-plan"
    ).nth(1)
    sentences = report.sentences(view.result)
    assert (
        dutch.locator("[data-role=verdict]").inner_text() == sentences[0]
    )  # "past niet: 1.190,15 GB ..."
    assert dutch.locator("[data-role=change]").inner_text() == sentences[1]
    assert (
        "Geheugen per GPU" in dutch.inner_text()
        and "Memory per GPU" in english.inner_text()
    )
    box = dutch.locator("[data-field=mfu]")
    box.fill("0,4")
    box.dispatch_event("change")
    assert dutch.locator("[data-role=message]").inner_text() == (
        "Plannen niet mogelijk: "
        + _error(model="llama2-70b", nodes=4, mfu="0,4", language="nl")
    )
    assert "punt als decimaalteken" in dutch.locator("[data-role=message]").inner_text()


# --------------------------------------------------------------------------------------
# JupyterLab: the view a cell shows answers its boxes in the page
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server serving one notebook that shows the planner."""
    source = ("from course_lib.planner.widget import planner\n"
              "planner(model='llama2-7b', zero=3)")
    root = tmp_path_factory.mktemp("lab-plan")
    home = tmp_path_factory.mktemp("lab-plan-home")
    with jupyterlab(root, home, "planner.ipynb", source) as url:
        yield url


@pytest.mark.slow
def test_the_planner_in_jupyterlab(offline_page, lab):
    page = offline_page
    verdict = page.locator(".jp-OutputArea .course-plan [data-role=verdict]")
    run_first_cell(page, lab, "planner.ipynb", verdict)
    assert verdict.inner_text().startswith("fits: 32.04 GB")
    box = page.locator(".jp-OutputArea .course-plan [data-field=nodes]")
    box.fill("0")
    box.dispatch_event("change")
    message = page.locator(".jp-OutputArea .course-plan [data-role=message]")
    message.wait_for(state="visible", timeout=10_000)
    assert "number of nodes must be a whole number from 1" in message.inner_text()
    assert "Traceback" not in page.locator(".jp-OutputArea").first.inner_text()
