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

from .conftest import assert_same_plan, jupyterlab, run_first_cell

pytestmark = pytest.mark.browser


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
    assert_same_plan(view.result.as_dict(), js)
    sentences = report.sentences(view.result)
    assert page.locator("[data-role=verdict]").inner_text() == sentences[0]
    assert page.locator("[data-role=train]").inner_text() == sentences[-2]
    assert page.locator("[data-role=memory-bar] [data-part]").count() == 6
    assert page.locator(".course-plan-ui").get_attribute("data-fits") == "true"

    # Replan as the boxes change: turn checkpointing off; the cheapest change that makes
    # it fit again is Python's (full checkpointing again: with Llama's SwiGLU activations
    # neither a ZeRO stage nor selective checkpointing fits an 80 GiB card without it).
    page.locator("[data-field=checkpointing]").select_option("none")
    assert page.locator(".course-plan-ui").get_attribute("data-fits") == "false"
    off = model.plan(model="llama3-405b", nodes=2048, tp=8, pp=16, zero=1)
    change = next(s for s in report.sentences(off) if s.startswith("cheapest change"))
    assert page.locator("[data-role=change]").inner_text() == change
    assert change == "cheapest change that fits: turn activation checkpointing on"
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
# JupyterLab: a learner runs chapter 2's cell and works the view in the page
# --------------------------------------------------------------------------------------

#: Chapter 2's planner cell (notebooks/02_memory_wall.ipynb, ch02-planner): opens on
#: memory, does not fit, the cheapest change is ZeRO 0 to 1.
LAB_INPUTS = {"model": "llama2-7b", "zero": 0}
LAB_SOURCE = ("from course_lib.planner.widget import planner\n\n"
              "view = planner(model=\"llama2-7b\", zero=0, focus=\"memory\")\n"
              "view")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server serving one notebook that shows chapter 2's planner."""
    root = tmp_path_factory.mktemp("lab-plan")
    home = tmp_path_factory.mktemp("lab-plan-home")
    with jupyterlab(root, home, "planner.ipynb", LAB_SOURCE) as url:
        yield url


def _keyboard(page, box, value: str) -> None:
    """Type into a box as a learner does: click, select what is there, type key by key.

    Real key presses, so a notebook shortcut that took them (``a``, ``b``, ``d d``, ``-``
    in command mode) would show.
    """
    box.click()
    page.keyboard.press("Control+A")
    box.press_sequentially(value)


def _widths(page, root: str) -> dict[str, float]:
    """The memory bar's segments, each as its share of the bar's inner width."""
    return page.evaluate(
        """(root) => {
          const bar = document.querySelector(root + ' [data-role=memory-bar]');
          const out = {};
          for (const seg of bar.querySelectorAll('[data-part]')) {
            out[seg.dataset.part] = seg.getBoundingClientRect().width / bar.clientWidth;
          }
          return out;
        }""",
        root,
    )


def _bar_shares(result) -> dict[str, float]:
    """What Python says each memory segment's share of the bar is."""
    m = result.memory
    scale = max(m.capacity, m.total + m.cuda_context)
    return {part: getattr(m, part) / scale for part in model.COMPONENTS}


@pytest.mark.slow
def test_the_planner_in_jupyterlab(offline_page, lab):
    page = offline_page
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    root = ".jp-OutputArea .course-plan"
    verdict = page.locator(f"{root} [data-role=verdict]")
    run_first_cell(page, lab, "planner.ipynb", verdict)
    ui = page.locator(f"{root} .course-plan-ui")
    message = page.locator(f"{root} [data-role=message]")
    assert page.locator(f"{root} .course-plan-static").count() == 0

    # It opens as Python plans it: does not fit, the cheapest change is ZeRO 0 to 1.
    start = model.plan(**LAB_INPUTS)
    sentences = report.sentences(start)
    assert verdict.inner_text() == sentences[0]
    assert verdict.inner_text().startswith("does not fit: 128.55 GB")
    assert page.locator(f"{root} [data-role=change]").inner_text() == sentences[1]
    assert ui.get_attribute("data-fits") == "false"

    # Chapter 2 is about memory: the step time is folded away until the learner opens it.
    section = page.locator(f"{root} details[data-role=time-section]")
    assert section.count() == 1 and not section.evaluate("d => d.open")
    assert not page.locator(f"{root} [data-role=time-bar]").is_visible()
    assert not page.locator(f"{root} [data-role=train]").is_visible()
    section.locator("summary").click()
    assert section.evaluate("d => d.open")
    train = page.locator(f"{root} [data-role=train]")
    train.wait_for(state="visible", timeout=5_000)
    assert train.inner_text() == sentences[-2]
    assert page.locator(f"{root} [data-role=time-table] tr").count() >= 2

    # The bar's segments are the shares Python computes; ZeRO 1 shards the optimizer
    # states over the 8 GPUs: the verdict turns to fits and the optimizer's segment
    # shrinks to what Python says.
    widths = _widths(page, root)
    for part, share in _bar_shares(start).items():
        assert widths[part] == pytest.approx(share, abs=0.01), part
    page.locator(f"{root} [data-field=zero]").select_option("1")
    assert ui.get_attribute("data-fits") == "true"
    sharded = model.plan(**dict(LAB_INPUTS, zero=1))
    assert verdict.inner_text() == report.sentences(sharded)[0]
    assert verdict.inner_text().startswith("fits: ")
    assert page.locator(f"{root} [data-role=change]").inner_text() == ""
    after = _widths(page, root)
    assert after["optimizer"] < widths["optimizer"] / 4
    for part, share in _bar_shares(sharded).items():
        assert after[part] == pytest.approx(share, abs=0.01), part

    # Bad input: the planner's own one-line message (Python's words), no traceback.
    cases = [  # (box, what the learner types, words the message must hold)
        ("nodes", "four", "number of nodes must be a number, got 'four'"),
        ("nodes", "-2", "must be a whole number from 1"),
        ("tp", "3", "must divide the 8 GPUs per node; use one of 1, 2, 4, 8"),
        ("pp", "3", "1 x 3 = 3 does not divide the 8 GPUs"),
    ]
    for field, typed, words in cases:
        box = page.locator(f"{root} [data-field={field}]")
        _keyboard(page, box, typed)
        assert box.input_value() == typed  # every key reached the box
        message.wait_for(state="visible", timeout=10_000)
        expected = _error(**dict(LAB_INPUTS, zero=1, **{field: typed}))
        assert message.inner_text() == "Cannot plan: " + expected, field
        assert words in expected, (field, expected)
        assert ui.get_attribute("data-fits") == "error"
        assert verdict.is_visible()  # the last plan stays, dimmed
        _keyboard(page, box, "")  # an empty box: the default again
        box.press("Backspace")
        message.wait_for(state="hidden", timeout=10_000)
        assert ui.get_attribute("data-fits") == "true"

    # The notebook is as it was: one cell, no stderr, no traceback, no page error.
    assert page.locator(".jp-Notebook .jp-Cell").count() == 1
    stderr = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    assert page.locator(stderr).count() == 0
    assert "Traceback" not in page.locator(".jp-OutputArea").first.inner_text()
    assert not errors, errors
