"""Every page of the built book as a reader meets it, at 1280 px and at 390 px wide.

The pages are read from the built book's own navigation (its landing page and every
page of its table of contents: each chapter, the Dutch edition, the bibliography, a
glossary when there is one), so a new page is checked without editing this file. Each
page is loaded once per width in one chromium, with every request outside this machine
blocked, and measured in one pass; the tests below read those measurements:

- the page does not scroll sideways, and nothing sticks out past its right edge;
- no table is cut off: it fits its column or scrolls in a box of its own, an output
  table that scrolls keeps its first column in view, and a caption stays whole (within
  the box, before and after the table is scrolled);
- the tables of the text and those the cells print share one style;
- at 1280 px a code cell shows 88 characters, the length the notebooks' code is held to,
  without scrolling;
- the console shows no errors;
- every widget (a bit explorer, the training planner) answers its input, and a training
  planner has started (its static text made way for its boxes);
- no page shows an ipywidget: no Python runs behind the book and the book loads no widget
  manager, so one would be dead there (the course's widgets are plain HTML and JavaScript);
- every figure has a caption and its image an alt text that is a sentence.

``COURSE_BOOK_HTML=/path/to/html`` checks a book built elsewhere (for example one built
without executing the notebooks); by default it is ``book/_build/html``.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import BOOK_HTML, _QuietHandler, free_port, is_loopback, offline_only

pytestmark = pytest.mark.browser

BOOK = Path(os.environ.get("COURSE_BOOK_HTML") or BOOK_HTML)
DESKTOP, PHONE = 1280, 390
WIDTHS = (DESKTOP, PHONE)
CODE_LINE = 88  # the longest code line a notebook may have (test_notebooks_meta.py)


class _NavLinks(html.parser.HTMLParser):
    """The targets of the links in a page's book navigation (the sidebar's contents)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # > 0 inside <nav class="bd-docs-nav">
        self.links: list[str] = []
        self.refresh = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "meta" and (attributes.get("http-equiv") or "").lower() == "refresh":
            self.refresh = (attributes.get("content") or "").partition("url=")[2]
        if tag == "nav" and (self.depth or "bd-docs-nav" in classes):
            self.depth += 1
        href = attributes.get("href")
        if tag == "a" and self.depth and "internal" in classes and href:
            self.links.append(href.partition("#")[0])

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav" and self.depth:
            self.depth -= 1


def book_pages(book: Path = BOOK) -> list[str]:
    """The book's pages, from its root: the landing page, then its navigation's."""
    index = book / "index.html"
    if not index.exists():
        return []
    parser = _NavLinks()
    parser.feed(index.read_text(encoding="utf-8"))
    root = parser.refresh.strip() or "index.html"  # index.html redirects to the root
    parser = _NavLinks()
    parser.feed((book / root).read_text(encoding="utf-8"))
    pages = [root]
    for link in parser.links:
        page = link or root
        if page not in pages and (book / page).is_file():
            pages.append(page)
    return pages


PAGES = book_pages() or ["(the book is not built)"]


def page_id(page: str) -> str:
    """A short test id for a page: its path without .html."""
    return page.removesuffix(".html")


@pytest.fixture(scope="module")
def book_url(request: pytest.FixtureRequest) -> str:
    """The book under test's address: $COURSE_BOOK_HTML served here, or book_server."""
    if not os.environ.get("COURSE_BOOK_HTML"):
        return request.getfixturevalue("book_server")
    if not (BOOK / "index.html").exists():
        pytest.fail(f"COURSE_BOOK_HTML={BOOK} holds no built book (no index.html)")
    handler = functools.partial(_QuietHandler, directory=str(BOOK))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    request.addfinalizer(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}"


# Resolves when the page is drawn: web fonts loaded, MathJax done, every training planner
# started by its script (at most 20 s), and one more frame. Returns how many planners did
# not start.
READY_JS = """
async () => {
  if (document.fonts) await document.fonts.ready;
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise) await mj.startup.promise;
  const plans = [...document.querySelectorAll('.course-plan')];
  const started = p => !!p.querySelector('.course-plan-ui[data-fits]');
  for (let t = 0; t < 200 && !plans.every(started); t++) {
    await new Promise(done => setTimeout(done, 100));
  }
  await new Promise(done => requestAnimationFrame(() => setTimeout(done, 300)));
  return plans.filter(p => !started(p)).length;
}
"""

# Everything the layout tests need, measured in one pass.
MEASURE_JS = r"""
(codeLine) => {
  const article = document.querySelector('article.bd-article') ||
    document.querySelector('main') || document.body;
  const vw = document.documentElement.clientWidth;
  const shown = e => e.getClientRects().length > 0 &&
    getComputedStyle(e).visibility !== 'hidden';
  const describe = e => {
    let name = e.tagName.toLowerCase();
    if (e.id) name += '#' + e.id;
    const classes = [...e.classList].filter(c => !c.startsWith('lm-')).slice(0, 3);
    if (classes.length) name += '.' + classes.join('.');
    const section = e.closest('section[id]');
    const where = section ? ` in section #${section.id}` : '';
    const text = (e.innerText || e.getAttribute('alt') || '').trim()
      .replace(/\s+/g, ' ');
    const caption = e.querySelector && e.querySelector('caption');
    const title = caption ? caption.innerText.trim() : text.slice(0, 50);
    return `<${name}>${where}` + (title ? ` ("${title}")` : '');
  };
  const fixed = e => {
    for (let a = e; a && a !== document.body; a = a.parentElement) {
      if (['fixed', 'sticky'].includes(getComputedStyle(a).position) &&
          !article.contains(a)) return true;
    }
    return false;
  };
  const boxOf = e => {  // the nearest ancestor in the article that clips or scrolls
    for (let a = e.parentElement; a && a !== article; a = a.parentElement) {
      const overflow = getComputedStyle(a).overflowX;
      if (overflow !== 'visible') return [a, overflow];
    }
    return [null, 'visible'];
  };
  const right = e => e.getBoundingClientRect().right;
  const articleRight = right(article) -
    parseFloat(getComputedStyle(article).paddingRight);

  // 1. Sideways: the page scrolls, or something reaches past the viewport's right edge
  // (its box, or its text when that overflows the box) with no box of its own that fits
  // and scrolls or clips it. The deepest such elements are named.
  const reach = e => {
    const r = e.getBoundingClientRect();
    const visible = getComputedStyle(e).overflowX === 'visible';
    return visible ? Math.max(r.right, r.left + e.scrollWidth) : r.right;
  };
  const out = [...document.body.querySelectorAll('*')].filter(e => {
    if (!shown(e) || reach(e) <= vw + 1 || fixed(e)) return false;
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      const boxed = getComputedStyle(a).overflowX !== 'visible';
      if (boxed && right(a) <= vw + 1) return false;
    }
    return true;
  });
  const holders = new Set();
  for (const e of out) {
    for (let a = e.parentElement; a && !holders.has(a); a = a.parentElement) {
      holders.add(a);
    }
  }
  const sticking = out.filter(e => !holders.has(e)).slice(0, 5)
    .map(e => `${describe(e)} reaches ${Math.round(reach(e))} px`);

  // 2. Tables: fit the column, or scroll in a box of their own that fits it.
  const tables = [];
  for (const t of article.querySelectorAll('table')) {
    if (!shown(t)) continue;
    const width = Math.round(t.getBoundingClientRect().width);
    const [box, overflow] = boxOf(t);
    if (!box) {
      if (right(t) > articleRight + 1) {
        tables.push(`${describe(t)} is ${width} px wide and sticks out of the ` +
          `${Math.round(articleRight - article.getBoundingClientRect().left)} px ` +
          'column with no scrolling box of its own');
      }
      continue;
    }
    const boxWidth = box.clientWidth;
    if (['hidden', 'clip'].includes(overflow) && box.scrollWidth > boxWidth + 1) {
      tables.push(`${describe(t)} is cut off: ${width} px wide in a ${boxWidth} px ` +
        `box with overflow ${overflow}`);
    } else if (right(box) > articleRight + 1) {
      tables.push(`${describe(t)} scrolls in a box that sticks out of the column`);
    } else if (box.scrollWidth > boxWidth + 1 && t.closest('.cell_output')) {
      const first = t.querySelector('tbody tr > :first-child');
      if (first && getComputedStyle(first).position !== 'sticky') {
        tables.push(`${describe(t)} scrolls (${width} px in ${boxWidth} px) without ` +
          'keeping its first column in view (position: sticky)');
      }
    }
  }

  // 2b. A caption is whole: within the box its table scrolls in, before and after the
  // box is scrolled to its end (it wraps and stays at the box's left, never cut).
  for (const t of article.querySelectorAll('table')) {
    const caption = t.querySelector(':scope > caption');
    if (!shown(t) || !caption || !caption.innerText.trim()) continue;
    const [box] = boxOf(t);
    if (!box || box.scrollWidth <= box.clientWidth + 1) continue;
    const inside = () => {
      const c = caption.getBoundingClientRect(), b = box.getBoundingClientRect();
      return c.left >= b.left - 1 && c.right <= b.left + box.clientWidth + 1;
    };
    const before = inside();
    const left = box.scrollLeft;
    box.scrollLeft = box.scrollWidth;
    const after = inside();
    box.scrollLeft = left;
    if (!before || !after) {
      tables.push(`${describe(t)}: its caption is cut (${Math.round(
        caption.getBoundingClientRect().width)} px wide in a ${box.clientWidth} px box` +
        (before ? ', once the table is scrolled' : '') + ')');
    }
  }

  // 2c. One style for the tables of the text (Markdown) and those the cells print: the
  // same rules, shading, text colour and alignment (and font and padding, but for a
  // format comparison, which sets its bits in a small monospace font).
  const shade = e => {  // the colour a cell is drawn on: its own, or what shows through
    for (let a = e; a; a = a.parentElement) {
      const colour = getComputedStyle(a).backgroundColor;
      if (!/^rgba\(.*, 0\)$|^transparent$/.test(colour)) return colour;
    }
    return 'the canvas';
  };
  const styles = [];
  for (const t of article.querySelectorAll('table.table, table.course-table, table.dataframe')) {
    const head = t.querySelector('thead th, thead td');
    const cell = t.querySelector('tbody td');
    if (!shown(t) || !head || !cell) continue;
    const h = getComputedStyle(head), c = getComputedStyle(cell), s = getComputedStyle(t);
    const container = t.parentElement.getBoundingClientRect().left +
      parseFloat(getComputedStyle(t.parentElement).paddingLeft);
    const style = {
      'heading rule': `${h.borderBottomWidth} ${h.borderBottomStyle} ${h.borderBottomColor}`,
      'heading shade': shade(head),
      'first row shade': shade(cell),
      'row rule': `${c.borderBottomWidth} ${c.borderBottomStyle} ${c.borderBottomColor}`,
      'text colour': c.color,
      'alignment': Math.abs(t.getBoundingClientRect().left - container) <= 1 ? 'left' :
        'not at the left of its column',
      'caption': (t.querySelector(':scope > caption') ?
        getComputedStyle(t.querySelector(':scope > caption')).textAlign : 'left'),
    };
    if (!t.classList.contains('course-compare')) {
      style['font size'] = c.fontSize;
      style['cell padding'] = c.padding;
    }
    styles.push({name: describe(t), style});
  }

  // 3. Code cells: how many characters a code cell shows, and those that scroll.
  const pres = [...article.querySelectorAll('.cell_input pre')].filter(shown);
  let capacity = null;
  if (pres.length) {
    const pre = pres[0], style = getComputedStyle(pre);
    const probe = document.createElement('span');
    probe.textContent = 'x'.repeat(200);
    probe.style.cssText = 'position:absolute;white-space:pre;visibility:hidden';
    pre.appendChild(probe);
    const charWidth = probe.getBoundingClientRect().width / 200;
    probe.remove();
    const inner = pre.clientWidth - parseFloat(style.paddingLeft) -
      parseFloat(style.paddingRight);
    capacity = {chars: Math.floor(inner / charWidth + 0.01), width: Math.round(inner),
                charWidth: +charWidth.toFixed(2), font: style.fontSize,
                column: Math.round(articleRight - article.getBoundingClientRect().left),
    };
  }
  const scrollingCode = pres.filter(p => p.scrollWidth > p.clientWidth + 1).map(p => {
    const longest = Math.max(...p.textContent.split('\n').map(l => l.length));
    return `${describe(p).split(' (')[0]} (longest line ${longest} characters)`;
  });

  // 4. Figures: every image of the article inside a <figure> with a caption, its alt
  // text a sentence. Images inside links (badges, buttons) are links, not figures.
  const figures = [];
  for (const img of article.querySelectorAll('img')) {
    if (img.closest('a')) continue;
    const name = img.getAttribute('src') || '';
    const alt = (img.getAttribute('alt') || '').trim();
    const figure = img.closest('figure');
    const caption = figure && figure.querySelector('figcaption');
    const problems = [];
    if (!caption || !caption.innerText.trim()) problems.push('has no caption');
    const words = alt.split(/\s+/).filter(w => /\w/.test(w));
    const path = /(^|\s)\S*[\\/]\S*\.(png|svg|jpe?g|gif|webp)\b|^\S+\.\w{3,4}$|^</i;
    if (words.length < 3 || path.test(alt)) {
      problems.push(`its alt text ${JSON.stringify(alt)} is not a sentence`);
    }
    if (problems.length) {
      const section = img.closest('section[id]');
      figures.push(`<img src=${name.split('/').pop()}>` +
        (section ? ` in section #${section.id}` : '') + ': ' + problems.join(', '));
    }
  }

  // 5. ipywidgets: a saved view or state (myst-nb writes each as a <script> of the
  // widget MIME type) or anything a widget manager drew (.jupyter-widgets, .widget-*).
  const ipywidgets = [...document.querySelectorAll(
    'script[type^="application/vnd.jupyter.widget-"], .jupyter-widgets, ' +
    '[class^="widget-"], [class*=" widget-"]')]
    .filter(e => !e.parentElement.closest('.jupyter-widgets, [class^="widget-"], ' +
                                         '[class*=" widget-"]'))
    .slice(0, 5)
    .map(e => e.tagName === 'SCRIPT' ? `<script type="${e.type}">` +
      (e.closest('section[id]') ? ` in section #${e.closest('section[id]').id}` : '')
      : describe(e));

  const root = document.documentElement;
  return {scroll: [root.scrollWidth, vw], sticking, tables, capacity, scrollingCode,
          figures, ipywidgets, styles};
}
"""


class Reader:
    """One chromium page reading the book's pages, each measured once per width."""

    def __init__(self, browser: Any, url: str) -> None:
        self.url = url
        self.context = browser.new_context(viewport={"width": DESKTOP, "height": 900})
        self.page = self.context.new_page()
        self.page.route("**/*", offline_only)
        self.errors: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda err: self.errors.append(f"uncaught: {err}"))
        self.results: dict[tuple[str, int], dict] = {}


    def _console(self, message: Any) -> None:
        if message.type != "error":
            return
        where = message.location.get("url", "")
        # Offline on purpose: what the page fetches from elsewhere (badges) is refused.
        refused = message.text.startswith("Failed to load resource")
        if refused and not is_loopback(where):
            return
        where = where.removeprefix(self.url).partition("?")[0]
        self.errors.append(f"{message.text[:300]} ({where})")

    def open(self, page: str, width: int) -> int:
        """Load ``page`` at ``width`` px, wait until drawn; the planners left unstarted."""
        if page.startswith("("):
            pytest.fail(f"the book is not built in {BOOK}: run `bash scripts/build.sh`")
        height = 900 if width >= 800 else 844
        self.page.set_viewport_size({"width": width, "height": height})
        self.errors = []
        self.page.goto(f"{self.url}/{page}")
        return self.page.evaluate(READY_JS)

    def measure(self, page: str, width: int) -> dict:
        """The page's measurements at ``width`` px (loaded the first time only); at
        :data:`DESKTOP`, last, what its widgets do when their inputs change."""
        if (page, width) not in self.results:
            undrawn = self.open(page, width)
            result = self.page.evaluate(MEASURE_JS, CODE_LINE)
            result["console"] = list(self.errors)
            result["undrawn"] = undrawn
            if width == DESKTOP:
                result["widgets"] = widget_problems(self.page)
            self.results[page, width] = result
        return self.results[page, width]


@pytest.fixture(scope="module")
def reader(browser, book_url: str) -> Iterator[Reader]:
    """The module's one page, with the measurements it has taken so far."""
    reader = Reader(browser, book_url)
    yield reader
    reader.context.close()


def listing(problems: list[str]) -> str:
    """Problems, one per line, for an assertion message."""
    return "".join(f"\n  - {p}" for p in problems)


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"{w}px")
@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_page_does_not_scroll_sideways(reader, page, width):
    result = reader.measure(page, width)
    scroll_width, viewport = result["scroll"]
    problems = list(result["sticking"])
    if scroll_width > viewport:
        problems.insert(0, f"the page is {scroll_width} px wide in a {viewport} px "
                           "window")
    assert not problems, f"{page} at {width} px scrolls sideways:{listing(problems)}"


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"{w}px")
@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_tables_fit_or_scroll_in_their_own_box(reader, page, width):
    problems = reader.measure(page, width)["tables"]
    assert not problems, f"{page} at {width} px:{listing(problems)}"


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"{w}px")
@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_tables_share_one_style(reader, page, width):
    """Issue 42: a Markdown table of the text and a table a cell prints look the same."""
    tables = reader.measure(page, width)["styles"]
    if not tables:
        return
    first = next((t for t in tables if "font size" in t["style"]), tables[0])
    problems = []
    for table in tables:
        differ = {key: value for key, value in table["style"].items()
                  if key in first["style"] and first["style"][key] != value}
        if differ:
            problems.append(f"{table['name']}: " + "; ".join(
                f"{key} {value} (not {first['style'][key]} as {first['name']})"
                for key, value in differ.items()))
    aligned = [t["name"] for t in tables if t["style"]["alignment"] != "left"]
    problems += [f"{name} is not at the left of its column" for name in aligned
                 if not any(name in p for p in problems)]
    assert not problems, f"{page} at {width} px, tables in two styles:{listing(problems)}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_code_cells_show_88_characters_without_scrolling(reader, page):
    result = reader.measure(page, DESKTOP)
    capacity = result["capacity"]
    if capacity is None:
        return  # no code cells on this page
    assert capacity["chars"] >= CODE_LINE, (
        f"{page} at {DESKTOP} px: a code cell shows {capacity['chars']} characters "
        f"({capacity['width']} px at {capacity['charWidth']} px per {capacity['font']} "
        f"character, in a {capacity['column']} px column), not {CODE_LINE}"
    )
    assert not result["scrollingCode"], (
        f"{page} at {DESKTOP} px: code cells scroll sideways:"
        f"{listing(result['scrollingCode'])}"
    )


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_console_shows_no_errors(reader, page):
    errors = []
    for width in WIDTHS:
        errors += [e for e in reader.measure(page, width)["console"] if e not in errors]
    assert not errors, f"{page} logs errors in the console:{listing(errors)}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_figures_have_captions_and_alt_sentences(reader, page):
    problems = reader.measure(page, DESKTOP)["figures"]
    assert not problems, f"{page}:{listing(problems)}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_no_page_shows_an_ipywidget(reader, page):
    found = reader.measure(page, DESKTOP)["ipywidgets"]
    assert not found, (
        f"{page} shows an ipywidget, which is dead in the book (no kernel, no widget "
        f"manager): make it a plain HTML and JavaScript view as the planner is:{listing(found)}")


# Marks every widget of the page (a bit explorer or a training planner) with
# data-course-widget=i and describes it: its class, its controls, and for a planner
# whether its script started it.
WIDGETS_JS = r"""
() => {
  const roots = [...document.querySelectorAll('.course-bitx, .course-plan')];
  const controls = 'input:not([type=hidden]), select, textarea, button, [data-bit]';
  return roots.map((root, i) => {
    root.dataset.courseWidget = i;
    const shown = [...root.querySelectorAll(controls)]
      .filter(c => c.getClientRects().length > 0);
    return {
      name: [...root.classList].filter(c => c.startsWith('course-')).join('.'),
      controls: shown.length,
      unstarted: root.classList.contains('course-plan') &&
        !(root.querySelector('.course-plan-ui[data-fits]') &&
          !root.querySelector('.course-plan-static')),
    };
  });
}
"""


def _change(control: Any) -> None:
    """Change one control of a widget as a reader would: pick, tick, type or click."""
    tag = control.evaluate("c => c.tagName.toLowerCase() + ':' + (c.type || '')")
    if tag.startswith("select"):
        values = control.evaluate("s => [...s.options].map(o => o.value)")
        current = control.input_value()
        control.select_option(next(v for v in values if v != current))
    elif tag in ("input:text", "input:number", "input:search", "textarea:textarea"):
        control.fill("7" if control.input_value() != "7" else "8")
        control.press("Enter")
        control.press("Tab")
    else:
        control.click()


def widget_problems(sheet: Any) -> list[str]:
    """What is wrong with the widgets of the page open in ``sheet``, each changed as a reader
    would change it (the page's other measurements are taken before)."""
    problems = []
    widgets = sheet.evaluate(WIDGETS_JS)
    for i, widget in enumerate(widgets):
        name = f"widget {i + 1} ({widget['name']})"
        if widget["unstarted"]:
            problems.append(f"{name} did not start: its script did not replace the "
                            "static text with its boxes")
            continue
        if not widget["controls"]:
            problems.append(f"{name} shows no control to change")
            continue
        root = sheet.locator(f"[data-course-widget='{i}']")
        controls = root.locator("input:not([type=hidden]), select, textarea, button, "
                                "[data-bit]")
        answered = False
        for k in range(min(controls.count(), 3)):  # any of its first three controls
            control = controls.nth(k)
            if not control.is_visible() or not control.is_enabled():
                continue
            root.evaluate("e => { window.courseTextBefore = e.innerText; }")
            _change(control)
            try:
                sheet.wait_for_function("e => e.innerText !== window.courseTextBefore",
                                        arg=root.element_handle(), timeout=2_000)
                answered = True
                break
            except Exception:
                continue
        if not answered:
            problems.append(f"{name} does not change when its inputs change")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_widgets_respond_to_their_inputs(reader, page):
    problems = reader.measure(page, DESKTOP)["widgets"]
    assert not problems, f"{page}:{listing(problems)}"

