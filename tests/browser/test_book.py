"""The built book, opened in chromium with every non-loopback request blocked: widgets, plots, maths render."""

import pytest

from course_lib._about import PUBLISHED
from course_lib.numbers import memory
from course_lib.planner import model, report, texts

from .conftest import assert_same_plan

pytestmark = pytest.mark.browser


def chapter_text(page, book_server: str, notebook: str) -> str:
    """Open a chapter of the built book and return the text of its main column."""
    page.goto(f"{book_server}/notebooks/{notebook}.html")
    return page.locator("main").inner_text()


def assert_shows(text: str, snippets) -> None:
    """Every snippet (a check's printed result, a table's title) is on the page."""
    for snippet in snippets:
        if snippet not in text:  # show the page's lines that start the same way, to tell why
            key = snippet.split(":")[0][:30]
            near = [line for line in text.splitlines() if key in line][:5]
            raise AssertionError(f"{snippet!r} is not on the page ({len(text):,} characters); "
                                 f"its lines with {key!r}: {near}")


def assert_chapter_complete(page, nav_label: str, images: int) -> None:
    """Its plots loaded, the navigation lists it, and nothing but badges came from outside."""
    assert_images_loaded(page, images)
    assert nav_label in page.locator("nav").first.inner_text()
    assert all("badge" in url for url in page.blocked), page.blocked


def assert_images_loaded(page, at_least: int) -> None:
    """At least ``at_least`` output images on the page, every one of them loaded and drawn."""
    images = page.locator(".cell_output img")
    assert images.count() >= at_least
    for i in range(images.count()):
        assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 300"), i


def test_chapter_2_renders_offline(offline_page, book_server):
    page = offline_page
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)
    page.goto(f"{book_server}/notebooks/02_memory_wall.html")
    # The planner runs in the page (no kernel): Llama 2 7B without ZeRO does not fit, and
    # the cheapest change is ZeRO 1. Its boxes are live.
    plan = page.locator(".course-plan")
    plan.locator(".course-plan-ui[data-fits]").wait_for(timeout=30_000)
    assert plan.locator("[data-role=verdict]").inner_text().startswith("does not fit: 128.55 GB")
    assert plan.locator("[data-role=change]").inner_text() == "cheapest change that fits: ZeRO stage 0 to 1"
    assert plan.locator("[data-field=zero]").is_enabled()
    # The stacked-bar plot is an image that loaded.
    images = page.locator(".cell_output img")
    assert images.count() >= 1
    assert images.first.evaluate("img => img.complete && img.naturalWidth > 400")
    # MathJax (served from the book itself) typeset the formulas.
    page.locator("mjx-container").first.wait_for(timeout=30_000)
    # Nothing the page needs came from the network: only the badge images were asked for outside.
    assert all("badge" in url for url in page.blocked), page.blocked
    scripts = [u for u in missing if u.endswith(".js")]
    assert not scripts, scripts


def test_landing_page_lists_chapters(offline_page, book_server):
    page = offline_page
    page.goto(f"{book_server}/intro.html")
    link = page.locator("a", has_text="The memory wall").first
    assert link.get_attribute("href").endswith("notebooks/02_memory_wall.html")
    # Colab and Binder badges only once the course is published at its address.
    assert ("Open in Colab" in page.content()) == PUBLISHED
    assert "bash scripts/build.sh" in page.locator("main").inner_text()
    assert "(planned)" not in page.locator("main").inner_text()
    for ready in ("Data parallelism with DDP", "Sharding with ZeRO and FSDP",
                  "Hardware for LLM training"):
        assert page.locator("a", has_text=ready).count() >= 1, ready


def test_chapter_5_renders_its_tables_and_plots_offline(offline_page, book_server):
    page = offline_page
    page.goto(f"{book_server}/notebooks/05_quantization.html")
    text = page.locator("main").inner_text()
    # The executed PTQ table and the goal checks are in the page, computed when the book was built.
    assert "The course model after post-training quantization (test split)" in text
    for method in ("INT8 absmax per channel", "INT4 zero-point g128", "NF4 + DQ", "INT3 zero-point g128"):
        assert method in text
    for goal in ("INT4 g128 takes at most 16% of the FP32 bytes", "NF4 + double quantization costs about 4.13 bits",
                 "16 bits and INT8 per channel stay within 0.1% of the FP32 perplexity", "quantizing the whole model takes seconds, not minutes (under 60 s)"):
        assert f"yes {goal}" in text, goal
    # The NF4 derivation matches the paper on every level, and Part II is in the navigation.
    assert text.count("+0.72295684") >= 2
    assert "Part II: Making models smaller" in page.locator("nav").first.inner_text() or \
        "Making models smaller" in page.content()
    # Every plot is an image that loaded (number line, error vs bits, histograms, NF4 levels, size vs perplexity).
    assert_images_loaded(page, 5)
    assert all("badge" in url for url in page.blocked), page.blocked


def test_chapter_6_renders_its_checks_tables_and_plots_offline(offline_page, book_server):
    page = offline_page
    text = chapter_text(page, book_server, "06_pruning")
    # The cross-checks against torch.nn.utils.prune ran when the book was built, and all passed.
    assert_shows(text, ("same as torch's l1_unstructured: True", "same as torch's global_unstructured: True",
                        "same as torch's ln_structured on the units' weights: True",
                        "smaller model's logits equal the masked model's: True",
                        "gives the same logits as masking them: True"))
    # The sweep, the bytes on disk and the timings are tables with their titles.
    assert_shows(text, ("Test perplexity (dense model:", "The block weight matrices, saved as safetensors",
                        "speed-up = the dense product's best time"))
    assert page.locator("main table").count() >= 6
    # The per-matrix sparsity bars and the sweep plot are images that loaded.
    assert_chapter_complete(page, "Pruning lab", 2)


def test_chapter_7_renders_its_checks_tables_and_plots_offline(offline_page, book_server):
    page = offline_page
    text = chapter_text(page, book_server, "07_gptq")
    # The written-out loop matched the library, and the saved model came back the same.
    assert_shows(text, ("identical to gptq.gptq_quantize_layer's: True",
                        "the same codes as blocks of 128: True", "identical logits after loading: True"))
    # The library's core loop is shown on the page, with the paper's lines as comments.
    assert "for i = 0, B, 2B, ..." in text
    assert_shows(text, ("relative squared errors", "layer error on held-out tokens",
                        "The course model quantized (blocks only; test stories)", "GPTQ paper Table 3",
                        "Calibration text from elsewhere", "Greedy generation of 64 tokens"))
    assert page.locator("main table").count() >= 8
    # The calibration and bit-width plots are images that loaded.
    assert_chapter_complete(page, "GPTQ lab", 2)


def test_chapter_8_renders_its_runs_tables_and_plots_offline(offline_page, book_server):
    page = offline_page
    text = chapter_text(page, book_server, "08_ddp")
    # The DDP runs, the ring and the accumulation checks ran when the book was built.
    assert_shows(text, ("the two ranks hold bit-identical parameters after every step: True",
                        "whole numbers equal: True", "both ranks hold 0 + 1 = 1.0"))
    assert_shows(text, ("After every step: loss and parameter checksum per rank",
                        "Ring all-reduce over 3 ranks", "gradient buckets, in the order they were reduced",
                        "DDP with accumulation against one process on the whole batch",
                        "Training the course GPT-2 on this machine",
                        "Model states in bytes: every rank holds all of them"))
    # The crashing rank's traceback is on the page, with its rank in front and no machine path.
    # A failing rank arrives as one block: the error, no process ids.
    assert "LaunchError: rank 1 failed" in text
    assert "ValueError: rank 1 fails on purpose" in text
    assert "/work/" not in text and "site-packages" not in text
    assert_chapter_complete(page, "Part III", 2)


def test_chapter_9_renders_its_runs_tables_and_plots_offline(offline_page, book_server):
    page = offline_page
    text = chapter_text(page, book_server, "09_zero_fsdp")
    # The sharded runs ran when the book was built, and their checks held.
    assert_shows(text, ("every rank holds what the formulas say",
                        "FP32: every strategy within 1e-4 of the update",
                        "GB per GPU: stage 0 120.0, stage 1 31.4, stage 2 16.6, stage 3 1.9",
                        "zero3, 2 ranks   3.00 Psi"))
    assert_shows(text, ("Model states per GPU: 7.5B parameters, mixed precision Adam, 64 GPUs",
                        "MB per rank between steps",
                        "Final parameters and first gradient against one process",
                        "Communication of rank 0 in step 1", "from replicated (factor 1)",
                        "ZeRO-3 on 8 GPUs with and without FSDP's CPU offload",
                        "Published FSDP results (Zhao et al. 2023), as checked here",
                        "def shard_model("))
    assert "not re-read from its text" in text  # the unverified figures are flagged on the page
    assert "/work/" not in text and "site-packages" not in text
    assert_chapter_complete(page, "Sharding with ZeRO and FSDP", 2)


def test_chapter_11_renders_its_runs_tables_and_plots_offline(offline_page, book_server):
    page = offline_page
    text = chapter_text(page, book_server, "11_beyond_data_parallelism")
    # The tensor, pipeline and mesh runs ran when the book was built, and their checks held.
    assert_shows(text, ("2 all-reduce forward, 2 all-reduce backward",
                        "tensor-parallel groups: ranks 0 and 1; ranks 2 and 3",
                        "The bubble of a 2-stage pipeline",
                        "What each stage holds for backward at its peak",
                        "How two published runs lay out their GPUs",
                        "class f(torch.autograd.Function)"))
    assert "/work/" not in text and "site-packages" not in text
    assert_chapter_complete(page, "Beyond data parallelism", 1)


def test_chapter_10_renders_its_measurements_roofline_and_datasheets_offline(offline_page, book_server):
    page = offline_page
    text = chapter_text(page, book_server, "10_hardware")
    # The measurements ran when the book was built: their tables are on the page.
    assert_shows(text, ("interleaved runs per row", "caches of this CPU", "triad from main memory",
                        "same as written out: True", "disk reads, 3 run(s) each",
                        "Tokenising 1,500 texts on the CPU", "fitted: alpha =",
                        "All-reduce of fp32 over 2 ranks (gloo)"))
    # The published figures, dense and sparse kept apart, and the roofline's verdicts.
    assert_shows(text, ("H100 SXM\t989.5\t1,979\t494.5\t989\t67.0\t80\t3.35\tbf16 dense\t295",
                        "MLP up                  309.238            508.04      608.7                   compute",
                        "H100 SXM: 7B in BF16 at most   239 tokens/s",
                        "C = 6 N D = 5.88e+21 FLOPs at 40% of peak",
                        "AMD Threadripper PRO 7000 WX\t128\t8\t8\tDDR5-5200\t332.8", "70B\t140.0\t980\t14"))
    assert "/work/" not in text and "site-packages" not in text
    assert_chapter_complete(page, "Hardware for LLM training", 3)


def test_dutch_edition_renders_offline_with_its_widgets_in_dutch(offline_page, book_server):
    page = offline_page
    text = chapter_text(page, book_server, "nl/kwantisatie")
    # The live numbers, written with a decimal comma, and the tables under Dutch headers.
    assert_shows(text, ("1 miljard parameters x 4 bytes = 4,00 GB",
                        "vuistregel (24 bytes)\t24,0\t24,0", "totaal\t34,9\t34,9",
                        "π in 4 formaten", "formaat\topgeslagen waarde (exact)\tbits (hex)",
                        "fp16\t3.140625\t0x4248", "FP16: 3.140625", "100 miljard\t1.810\t68\t452\t32",
                        "quantization\tkwantisatie"))
    # The planner runs in the page and speaks Dutch: a 1B model in fp32 on one H100.
    plan = page.locator(".course-plan")
    plan.locator(".course-plan-ui[data-fits]").wait_for(timeout=30_000)
    assert "Geheugen per GPU" in plan.inner_text()
    assert plan.locator("[data-role=verdict]").inner_text().startswith("past: 22,05 GB van de 80,80 GB")
    # The bit explorer: Dutch labels, the stored value as Python writes it; a click moves to the next value.
    explorer = page.locator(".course-bitx").first
    stored = explorer.locator("[data-role=stored]")
    stored.wait_for(timeout=30_000)
    assert stored.inner_text() == "3.140625"
    assert "opgeslagen waarde" in explorer.locator("[data-role=table]").inner_text()
    explorer.locator("[data-bit='15']").click()
    assert stored.inner_text() == "3.142578125"
    assert "= 3,142578125" in explorer.locator("[data-role=anatomy]").inner_text()  # a sentence: decimal comma
    assert "Nederlandstalige editie" in page.locator("nav").first.inner_text()
    assert_chapter_complete(page, "Kwantisatie: minder bits per getal", 1)


# ----------------------------------------------------------------------------------------
# The training planner: on the landing page, chapters 2, 9, 10, 11 and the Dutch edition
# ----------------------------------------------------------------------------------------

_SHAPE = memory.shape_for_params(1e9)  # nl/kwantisatie: a GPT-shaped model of 1 billion
#: page -> (the planner's starting inputs there, its language, its focus), as the page's
#: source writes them: book/intro.md's {course-planner}, the chapters' *-planner cells.
PLANNER_PAGES = {
    "index.html": ({"model": "llama2-7b", "nodes": 4, "zero": 3}, "en", "all"),
    "notebooks/02_memory_wall.html": ({"model": "llama2-7b", "zero": 0}, "en", "memory"),
    "notebooks/09_zero_fsdp.html": (
        {"model": "t5-11b", "gpu": "a100-80", "global_batch": 64, "zero": 0}, "en", "all"),
    "notebooks/10_hardware.html": (
        {"model": "llama3-405b", "nodes": 1024, "tp": 8, "pp": 16, "edge_layers": 7,
         "virtual_stages": 8, "zero": 2},
        "en", "all"),
    "notebooks/11_beyond_data_parallelism.html": (
        {"model": "gpt3-175b", "gpu": "a100-80", "nodes": 128, "tp": 8, "pp": 8, "checkpointing": True,
         "network_link": "ib-hdr"},
        "en", "all"),
    "notebooks/nl/kwantisatie.html": (
        {"model": "custom", "params": 1e9, "layers": _SHAPE.n_layers, "hidden": _SHAPE.hidden,
         "heads": _SHAPE.n_heads, "vocab": _SHAPE.vocab, "seq_len": 2048, "precision": "fp32",
         "gpus_per_node": 1}, "nl", "memory"),
}


def _type(page, box, value: str) -> None:
    """Type into a box as a reader does: click, select what is there, type key by key."""
    box.click()
    page.keyboard.press("Control+A")
    if value:
        box.press_sequentially(value)
    else:
        page.keyboard.press("Backspace")


@pytest.mark.parametrize("path", list(PLANNER_PAGES), ids=lambda p: p.removesuffix(".html"))
def test_the_planner_plans_in_the_book_what_python_plans(offline_page, book_server, path):
    inputs, language, focus = PLANNER_PAGES[path]
    page = offline_page
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{book_server}/{path}")  # index.html sends the reader on to the landing page
    ui = page.locator(".course-plan .course-plan-ui[data-fits]")
    ui.wait_for(timeout=30_000)
    # One planner, drawn by its script: the text shown without JavaScript made way.
    assert page.locator(".course-plan").count() == 1
    assert page.locator(".course-plan-static").count() == 0
    plan = page.locator(".course-plan")
    result = lambda: plan.evaluate("el => el.__coursePlanner.result")  # noqa: E731

    # It starts where Python starts, to the last digit, in the page's language.
    start = model.plan(language=language, **inputs)
    assert_same_plan(start.as_dict(), result())
    sentences = report.sentences(start)
    assert plan.locator("[data-role=verdict]").inner_text() == sentences[0]
    assert result()["memory"]["total"] == pytest.approx(start.memory.total, rel=1e-12)
    assert ui.get_attribute("data-fits") == str(start.fits).lower()
    heading = texts.text("plan_heading_memory", language)
    assert heading in plan.inner_text()
    if language == "nl":
        assert heading == "Geheugen per GPU" and "Memory per GPU" not in plan.inner_text()

    # Chapter 2 and the Dutch edition open on memory: the step time folded until opened.
    section = plan.locator("details[data-role=time-section]")
    if focus == "memory":
        assert section.count() == 1 and not section.evaluate("d => d.open")
        assert not plan.locator("[data-role=time-bar]").is_visible()
        section.locator("summary").click()
        assert section.evaluate("d => d.open")
    else:
        assert section.count() == 0
    assert plan.locator("[data-role=time-bar]").is_visible()
    assert plan.locator("[data-role=train]").inner_text() == sentences[-2]

    # Typing into a box replans at once: twice the nodes.
    nodes = str(2 * int(inputs.get("nodes", 1)))
    box = plan.locator("[data-field=nodes]")
    _type(page, box, nodes)
    bigger = model.plan(language=language, **dict(inputs, nodes=nodes))
    page.wait_for_function("el => el.__coursePlanner.result && el.__coursePlanner.result.setup.nodes == "
                           + nodes, arg=plan.element_handle(), timeout=5_000)
    assert_same_plan(bigger.as_dict(), result())
    assert plan.locator("[data-role=verdict]").inner_text() == report.sentences(bigger)[0]

    # A bad value: the planner's own message, Python's words, the last plan dimmed.
    message = plan.locator("[data-role=message]")
    assert not message.is_visible()
    _type(page, box, "abc")
    message.wait_for(state="visible", timeout=5_000)
    with pytest.raises(ValueError) as err:
        model.plan(language=language, **dict(inputs, nodes="abc"))
    assert message.inner_text() == texts.text("plan_cannot", language) + " " + str(err.value)
    assert ui.get_attribute("data-fits") == "error"
    _type(page, box, str(inputs.get("nodes", "")))  # back as it was: the starting plan
    message.wait_for(state="hidden", timeout=5_000)
    assert_same_plan(start.as_dict(), result())
    assert not errors, errors


# ----------------------------------------------------------------------------------------
# Phones and tablets: the chapter list (☰) and the page's contents open below 960 px
# ----------------------------------------------------------------------------------------

def _visible(locator):
    """The first visible element of ``locator`` (a theme may keep hidden copies of a button)."""
    for i in range(locator.count()):
        if locator.nth(i).is_visible():
            return locator.nth(i)
    raise AssertionError(f"no visible element for {locator}")


@pytest.mark.parametrize("width", [390, 768], ids=lambda w: f"{w}px")
def test_the_menus_open_on_a_phone_and_a_tablet(browser, book_server, width):
    """Issue 42: below 960 px the ☰ button opens the chapter list and the contents button the
    page's outline (pydata-sphinx-theme 0.17 wired hidden copies of both buttons instead)."""
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(book_server) else r.abort())
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    try:
        page.goto(f"{book_server}/notebooks/02_memory_wall.html")
        # The chapter list is closed until the ☰ button is pressed; then it lists the chapters.
        chapters = page.locator("a.reference.internal", has_text="Number formats")
        assert not chapters.first.is_visible()
        _visible(page.locator("button.primary-toggle")).click()
        menu = page.locator("dialog[open]")
        menu.wait_for(state="visible", timeout=5_000)
        assert menu.count() == 1
        link = menu.locator("a.reference.internal", has_text="Number formats").first
        assert link.is_visible()
        box = menu.bounding_box()
        assert box["x"] >= -1 and box["x"] + box["width"] <= width + 1, box  # on the screen
        page.keyboard.press("Escape")
        menu.wait_for(state="detached", timeout=5_000)
        # The contents button opens the page's own outline: its sections, in view.
        _visible(page.locator("button.secondary-toggle")).click()
        outline = page.locator("dialog[open]")
        outline.wait_for(state="visible", timeout=5_000)
        section = outline.locator("a", has_text="Bytes per number").first
        assert section.is_visible()
        box = outline.bounding_box()
        assert box["x"] >= -1 and box["x"] + box["width"] <= width + 1, box
        page.keyboard.press("Escape")
        outline.wait_for(state="detached", timeout=5_000)
        # A chapter in the list takes the reader there.
        _visible(page.locator("button.primary-toggle")).click()
        page.locator("dialog[open] a.reference.internal", has_text="Number formats").first.click()
        page.wait_for_url("**/03_number_formats.html*", timeout=10_000)
        assert not errors, errors
    finally:
        context.close()


# ----------------------------------------------------------------------------------------
# Dark mode: the book stays light (book/_config.yml says why), readable whatever the OS asks
# ----------------------------------------------------------------------------------------

# Every piece of text in the article's tables and in the course's widgets (the training
# planner, the bit explorer): its colour, the colour it is drawn on (the nearest background
# that is not transparent, blended over the ones below), and their contrast ratio (WCAG 2).
CONTRAST_JS = r"""
() => {
  const parse = c => {
    const m = c.match(/rgba?\(([^)]+)\)/);
    if (!m) return [0, 0, 0, 0];
    const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, below) => {  // top drawn over an opaque colour
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + below[i] * (1 - a)).concat([1]);
  };
  const background = e => {
    const layers = [];
    for (let a = e; a; a = a.parentElement) {
      const c = parse(getComputedStyle(a).backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let colour = [255, 255, 255, 1];  // the canvas
    for (const c of layers.reverse()) colour = over(c, colour);
    return colour;
  };
  const luminance = c => {
    const [r, g, b] = c.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const roots = document.querySelectorAll(
    'article table, .course-plan, .course-bitx');
  const seen = new Set(), worst = [];
  let checked = 0;
  for (const root of roots) {
    for (const e of [root, ...root.querySelectorAll('*')]) {
      if (seen.has(e)) continue;
      seen.add(e);
      const text = [...e.childNodes].filter(n => n.nodeType === 3)
        .map(n => n.textContent).join('').trim();
      if (!text || !e.getClientRects().length) continue;
      const style = getComputedStyle(e);
      if (style.visibility === 'hidden' || +style.opacity === 0) continue;
      const bg = background(e);
      const fg = over(parse(style.color), bg);
      const r = ratio(fg, bg);
      checked += 1;
      if (r < 4.5) {
        const where = e.closest('.course-plan') ? 'planner' :
          e.closest('.course-bitx') ? 'bit explorer' : 'table';
        worst.push(`${where} <${e.tagName.toLowerCase()}> "${text.slice(0, 30)}": ` +
          `${style.color} on rgb(${bg.slice(0, 3).map(Math.round)}) = ${r.toFixed(2)}:1`);
      }
    }
  }
  return {checked, worst: worst.slice(0, 12), theme: document.documentElement.dataset.theme};
}
"""

#: Pages with the book's tables (Markdown and printed ones) and both widgets.
DARK_PAGES = ["intro", "notebooks/02_memory_wall", "notebooks/04_quantizing_pi",
              "notebooks/10_hardware", "notebooks/nl/kwantisatie"]

#: Hides (keeping their place) the page's sticky and fixed parts outside the widgets.
HIDE_STICKY_JS = """() => {
  for (const el of document.querySelectorAll('body *')) {
    const where = getComputedStyle(el).position;
    if ((where === 'sticky' || where === 'fixed')
        && !el.closest('article table, .course-plan, .course-bitx')) {
      el.style.visibility = 'hidden';
    }
  }
}"""


@pytest.mark.parametrize("path", DARK_PAGES, ids=lambda p: p.split("/")[-1])
def test_a_dark_os_gets_the_light_book_readable(browser, book_server, path):
    """Issue 42 (item 3): with the reader's OS in dark mode the book stays light, every text
    of its tables and widgets keeps a contrast of at least 4.5:1 (WCAG AA), and the page
    draws as it does for a light OS (screenshots of the tables and widgets compared)."""
    shots = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
        page = context.new_page()
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(book_server) else r.abort())
        try:
            page.goto(f"{book_server}/{path}.html")
            page.wait_for_function("() => [...document.querySelectorAll('.course-plan')]"
                                   ".every(p => p.querySelector('.course-plan-ui[data-fits]'))",
                                   timeout=30_000)
            assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") == (scheme == "dark")
            result = page.evaluate(CONTRAST_JS)
            assert result["theme"] == "light", f"{path} follows a {scheme} OS into {result['theme']} mode"
            assert result["checked"] > 20, result
            assert not result["worst"], (f"{path}, {scheme} OS: text below 4.5:1 contrast:"
                                         + "".join(f"\n  - {w}" for w in result["worst"]))
            # Nothing offers the unreadable dark mode: the theme's switch is not shown.
            switches = page.locator(".theme-switch-button")
            assert all(not switches.nth(i).is_visible() for i in range(switches.count()))
            # A widget taller than the window is shot in slices as the page scrolls; the sticky
            # headers would land on it wherever the scroll stopped, which differs from one shot
            # to the next on a busy machine: what is sticky or fixed is hidden for the shots.
            page.evaluate(HIDE_STICKY_JS)
            page.evaluate("document.fonts.ready.then(() => new Promise(done => "
                          "requestAnimationFrame(() => requestAnimationFrame(done))))")
            widgets = page.locator("article table, .course-plan, .course-bitx")
            shots[scheme] = []
            for i in range(min(widgets.count(), 6)):
                widget = widgets.nth(i)
                if widget.is_visible():
                    widget.scroll_into_view_if_needed()
                    shots[scheme].append(widget.screenshot(animations="disabled", caret="hide"))
        finally:
            context.close()
    assert shots["light"], f"{path} has no table or widget to compare"
    differ = [i for i, (a, b) in enumerate(zip(shots["light"], shots["dark"])) if a != b]
    assert len(shots["light"]) == len(shots["dark"]) and not differ, (
        f"{path}: tables and widgets {differ} draw differently for a dark OS")
