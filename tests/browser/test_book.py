"""The built book, opened in chromium with every non-loopback request blocked: widgets, plots, maths render."""

import nbformat
import pytest

from course_lib._about import PUBLISHED

from .conftest import ROOT

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


def assert_snapshot(page, lead: str, words: str) -> None:
    """The calculator says on itself that it is a snapshot, links to how to run the chapter,
    and its inputs are switched off: no Python runs behind the book (course_widgets.js)."""
    calculator = page.locator(".course-memory-calculator")
    note = calculator.locator(".course-snapshot-note")
    note.wait_for(timeout=10_000)
    assert note.inner_text().startswith(lead) and words in note.inner_text()
    assert note.locator("a").get_attribute("href").endswith("intro.html#how-to-use-it")
    inputs = calculator.locator("input, select")
    assert inputs.count() >= 5
    assert all(inputs.nth(i).is_disabled() for i in range(inputs.count()))


def test_chapter_2_renders_offline(offline_page, book_server):
    page = offline_page
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)
    page.goto(f"{book_server}/notebooks/02_memory_wall.html")
    # The calculator is drawn by the widget manager from the saved widget state (no kernel).
    result = page.locator(".course-memory-calculator .course-memory-result")
    result.wait_for(timeout=30_000)
    text = result.inner_text()
    assert "7B parameters, bf16-mixed, adam" in text
    assert text.count("does not fit") == 3
    assert_snapshot(page, "Snapshot.", "computed for the inputs shown when the page was built")
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
                        "{0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9} GB per GPU",
                        "zero3, 2 ranks   3.00 Psi"))
    assert_shows(text, ("Model states per GPU: 7.5B parameters, mixed precision Adam, 64 GPUs",
                        "MB per rank between steps", "Final parameters against one process",
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
    assert_shows(text, ("forward: {'all-reduce': 2} backward: {'all-reduce': 2}",
                        "tp groups: [(0, 1), (2, 3)] dp groups: [(0, 2), (1, 3)]",
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
                        "Tokenising 3,000 texts on the CPU", "fitted: alpha =",
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
    # The memory calculator, drawn from the saved widget state, speaks Dutch.
    result = page.locator(".course-memory-calculator .course-memory-result")
    result.wait_for(timeout=30_000)
    assert "1 mld. parameters, fp32, adam" in result.inner_text()
    assert "34,9 GB per GPU" in result.inner_text() and "past niet" in result.inner_text()
    assert_snapshot(page, "Momentopname.", "berekend voor de getoonde invoer")
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


LAB_PAGES = ["01_pretraining_objectives", "02_memory_wall", "03_number_formats", "04_quantizing_pi",
             "05_quantization", "06_pruning", "07_gptq", "08_ddp", "09_zero_fsdp", "10_hardware",
             "11_beyond_data_parallelism", "nl/kwantisatie"]


@pytest.mark.parametrize("notebook", LAB_PAGES)
def test_every_exercise_shows_its_stub_and_a_collapsed_worked_solution(offline_page, book_server, notebook):
    cells = nbformat.read(ROOT / "notebooks" / f"{notebook}.ipynb", as_version=4).cells
    stubs = [c for c in cells if "exercise" in c.metadata.get("tags", [])]
    dutch = notebook.startswith("nl/")
    page = offline_page
    chapter_text(page, book_server, notebook)
    # Each stub ran in the build: its feedback says "not done yet" (or "not answered yet").
    waiting = ("Nog niet gedaan", "Nog niet beantwoord") if dutch else ("Not done yet", "Not answered yet")
    feedback = page.locator(".cell.tag_exercise .cell_output")
    assert feedback.count() == len(stubs) >= 3
    for i in range(feedback.count()):
        assert feedback.nth(i).inner_text().startswith(waiting), feedback.nth(i).inner_text()
    # Each worked solution is collapsed: its code hidden until a click, its passing feedback shown.
    solutions = page.locator(".cell.tag_solution")
    assert solutions.count() == len(stubs)
    show = "Toon de uitgewerkte oplossing" if dutch else "Show the worked solution"
    for i in range(solutions.count()):
        cell = solutions.nth(i)
        code = cell.locator(".cell_input")
        assert not code.is_visible()
        assert cell.locator("details").evaluate("d => !d.open")
        summary = cell.locator("summary")
        assert show in summary.inner_text()
        summary.click()
        code.wait_for(state="visible", timeout=5_000)
        assert "must_pass=True" in code.inner_text()
        passed = ("Geslaagd", "Goed") if dutch else ("Passed", "Right")
        assert cell.locator(".cell_output").inner_text().startswith(passed)
