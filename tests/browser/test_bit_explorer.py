"""The bit explorer's JavaScript in chromium: exact agreement with course_lib.numbers.formats, JupyterLab, the built book.

(a) In a page holding only the explorer's HTML, the JavaScript codec decodes every bit pattern of
FP16, BF16, E4M3 and E5M2 and re-encodes the values; both must equal the Python codec exactly
(NaN = NaN, -0 distinct from +0). Thousands of seeded random float64 values, rounding ties,
subnormals and overflows must encode to the same bits in every explorer format.
(b) In a real JupyterLab: run a cell with the explorer, click a bit, type a good and a bad value.
(c) In the built book, offline: the chapter 4 page's explorer answers a click with no kernel.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from course_lib.numbers import bit_explorer as bx
from course_lib.numbers import formats as F

from .conftest import jupyterlab, run_first_cell

pytestmark = pytest.mark.browser
EXHAUSTIVE = ["fp16", "bf16", "e4m3", "e5m2"]
ENCODE_FORMATS = ["fp32", "fp16", "bf16", "e4m3", "e5m2", "int8", "int4", "e3m2", "e4m3fnuz", "fp4_e2m1"]


@pytest.fixture
def codec_page(offline_page):
    """A page that holds one explorer's HTML (and so its codec) and nothing else."""
    offline_page.set_content(f"<!doctype html><html><body>{bx.bit_explorer('pi', 'fp16')._repr_html_()}</body></html>")
    offline_page.wait_for_function("() => window.courseBitCodec && document.querySelector('[data-role=stored]')")
    return offline_page


def _same_values(js: list, py: np.ndarray) -> list[int]:
    """Indices where two value lists differ: NaN equals NaN, -0 differs from +0."""
    bad = []
    for i, (a, b) in enumerate(zip(js, py.tolist())):
        a = float(a)  # integral values may arrive as Python ints, rounded to 17 digits: float() restores them
        if math.isnan(b):
            ok = math.isnan(a)
        else:
            ok = a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
        if not ok:
            bad.append(i)
    return bad


@pytest.mark.parametrize("name", EXHAUSTIVE)
def test_js_codec_agrees_on_every_bit_pattern(codec_page, name):
    fmt = F.get_format(name)
    n = 1 << fmt.total_bits
    patterns = np.arange(n, dtype=np.uint32)
    # One call: decode every pattern, re-encode every value (both overflow modes), step and ULP.
    js = codec_page.evaluate(
        """([name, n]) => {
            const C = window.courseBitCodec, fmt = C.getFormat(name);
            const dec = [], enc = [], sat = [], up = [], down = [], ulp = [];
            for (let p = 0; p < n; p++) {
                const v = C.decode(p, fmt);
                dec.push(v);
                enc.push(v !== v && fmt.nan === 'none' ? -1 : C.encode(v, fmt, false));
                sat.push(v !== v && fmt.nan === 'none' ? -1 : C.encode(v, fmt, true));
                up.push(C.nextUp(v, fmt)); down.push(C.nextDown(v, fmt)); ulp.push(C.ulp(v, fmt));
            }
            return {dec, enc, sat, up, down, ulp};
        }""",
        [name, n],
    )
    values = F.decode(patterns, fmt)
    assert len(js["dec"]) == n
    assert _same_values(js["dec"], values) == []
    nan = np.isnan(values)
    for mode, saturate in (("enc", False), ("sat", True)):
        expected = np.full(n, -1, dtype=np.int64)
        expected[~nan] = F.encode(values[~nan], fmt, saturate=saturate)
        # NaN patterns re-encode to the canonical NaN of their sign (JavaScript cannot carry a NaN's sign).
        got = np.array(js[mode], dtype=np.int64)
        assert np.array_equal(got[~nan], expected[~nan]), f"{name} re-encode ({mode}) differs"
        assert set(got[nan]) <= {fmt.nan_pattern, fmt.nan_pattern | (1 << (fmt.total_bits - 1))}
    # Every non-NaN pattern is its own encoding: decode then encode is the identity.
    assert np.array_equal(np.array(js["enc"])[~nan], patterns[~nan])
    assert _same_values(js["up"], F.next_up(values, fmt)) == []
    assert _same_values(js["down"], F.next_down(values, fmt)) == []
    assert _same_values(js["ulp"], F.ulp(values, fmt)) == []


@pytest.mark.parametrize("name", ["e4m3", "e5m2", "fp16"])
def test_js_exact_decimals_agree(codec_page, name):
    fmt = F.get_format(name)
    patterns = list(range(0, 1 << fmt.total_bits, 1 if fmt.total_bits <= 8 else 3))
    js = codec_page.evaluate(
        "([name, ps]) => ps.map(p => window.courseBitCodec.exactDecimal(window.courseBitCodec.decode(p, name)))",
        [name, patterns],
    )
    expected = [F.exact_decimal(float(v)) for v in F.decode(np.array(patterns, dtype=np.uint32), fmt)]
    assert js == expected


def _random_values(fmt: F.FloatFormat | F.IntFormat, rng: np.random.Generator) -> np.ndarray:
    """Seeded float64 values that exercise the rounding: across the range, ties, subnormals, overflow."""
    if isinstance(fmt, F.IntFormat):
        lo, hi = fmt.min, fmt.max
        ties = np.arange(lo - 3, hi + 3) + 0.5
        wide = rng.uniform(lo - 20, hi + 20, 2000)
        specials = [0.0, -0.0, math.inf, -math.inf, 1e300, -1e300, 2.5, 3.5, -2.5, 0.49999999999999994]
        return np.concatenate([wide, ties, rng.normal(0, 3, 500), specials])
    finite = F.finite_values(fmt) if fmt.total_bits <= 16 else None
    lo, hi = fmt.emin - fmt.mantissa_bits - 3, fmt.emax + 3
    wide = rng.uniform(1, 2, 2500) * np.exp2(rng.integers(lo, hi, 2500).astype(np.float64))
    wide *= rng.choice([-1.0, 1.0], wide.size)
    if finite is not None:
        mids = (finite[:-1] + finite[1:]) / 2  # exact ties between neighbours
        ties = rng.choice(mids, 1000)
        near = ties + rng.choice([-1, 1], ties.size) * np.abs(ties) * 2.0**-40  # just off the tie
    else:  # FP32: halfway between a random float32 and its neighbour away from zero
        base = rng.standard_normal(1000).astype(np.float32).astype(np.float64)
        ties = base + np.sign(base) * F.ulp(base, fmt) / 2
        near = ties * (1 + 2.0**-45)
    top = fmt.max
    overflow = [top, -top, top * (1 + fmt.epsilon / 2), top * (1 + fmt.epsilon / 4), top * 2, 1e300, -1e300]
    tiny = [fmt.min_subnormal / 2, fmt.min_subnormal * 0.75, -fmt.min_subnormal / 2, fmt.min_subnormal * 1.5, 5e-324]
    specials = [0.0, -0.0, math.inf, -math.inf, 1 + 2.0**-11 + 2.0**-40, math.pi, -math.e]
    parts = [wide, ties, near, overflow, tiny, specials]
    if fmt.has_nan:
        parts.append([math.nan])
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])


@pytest.mark.parametrize("name", ENCODE_FORMATS)
def test_js_codec_encodes_random_values_like_python(codec_page, name):
    fmt = F.get_format(name)
    values = _random_values(fmt, np.random.default_rng(sum(map(ord, name))))
    modes = [False] if isinstance(fmt, F.IntFormat) else [False, True]
    js = codec_page.evaluate(
        "([xs, name, modes]) => modes.map(s => window.courseBitCodec.encodeMany(xs, name, s))",
        [values.tolist(), name, modes],
    )
    for saturate, got in zip(modes, js):
        expected = F.encode(values, fmt, saturate=saturate)
        bad = np.flatnonzero(np.array(got, dtype=np.int64) != expected.astype(np.int64))
        assert bad.size == 0, [(values[i], got[i], int(expected[i])) for i in bad[:5]]
    assert values.size >= 2500


def test_js_reads_typed_values_like_python(codec_page):
    texts = ["pi", "-pi", "e", "1e-8", "-0", "inf", "-inf", "nan", "3.5", ".5", "2^-24", "2**10", "0x4248",
             "0b0011110000000000", "pie", "", "0x12345", "1,5", "2^5000"]  # fmt: skip
    js = codec_page.evaluate(
        """(texts) => texts.map(t => {
            try { const r = window.courseBitCodec.parseValue(t, 'fp16'); return {value: r.value, pattern: r.pattern}; }
            catch (err) { return {error: err.message}; }
        })""",
        texts,
    )
    for text, got in zip(texts, js):
        try:
            typed = bx.parse_value(text, "fp16")
        except ValueError as err:
            assert got.get("error") == str(err), text
            continue
        assert _same_values([got["value"]], np.array([typed.value])) == [], text
        assert got["pattern"] == typed.pattern, text


def _stored(page, root: str = ".course-bitx") -> str:
    return page.locator(f"{root} [data-role=stored]").first.inner_text()


def test_explorer_page_clicks_types_and_switches_formats(codec_page):
    page = codec_page
    assert _stored(page) == "3.140625"
    page.locator(".course-bitx [data-bit='15']").click()  # the last mantissa bit
    assert _stored(page) == "3.142578125"
    assert page.locator("[data-role=hex]").inner_text().startswith("0x4249")
    page.locator("[data-role=format]").select_option("e4m3")
    assert _stored(page) == "3.25"
    box = page.locator("[data-role=value]")
    box.fill("1000")
    box.press("Enter")
    assert _stored(page) == "NaN" and "no infinity" in page.locator("[data-role=outcome]").inner_text()
    page.locator("[data-role=saturate]").check()
    assert _stored(page) == "448"
    page.locator("[data-role=format]").select_option("custom")
    page.locator("[data-role=ebits]").fill("3")
    page.locator("[data-role=mbits]").fill("2")
    page.locator("[data-role=mbits]").dispatch_event("change")
    assert _stored(page) == "14"  # IEEE-style E3M2 max, saturated
    box.fill("pie")
    box.press("Enter")
    message = page.locator("[data-role=message]")
    assert message.is_visible()
    assert message.inner_text() == "cannot read 'pie' as a number; try pi, 1e-8, -0, inf, nan or a hex pattern like 0x4248"
    box.fill("-0")
    box.press("Enter")
    assert not message.is_visible() and _stored(page) == "-0"


# ------------------------------------------------------------------------------------------------
# JupyterLab
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server serving one notebook that shows the explorer."""
    source = 'from course_lib.numbers.bit_explorer import bit_explorer\nbit_explorer("pi", "fp16")'
    with jupyterlab(tmp_path_factory.mktemp("lab-bitx"), tmp_path_factory.mktemp("lab-bitx-home"), "explorer.ipynb", source) as url:
        yield url


def test_explorer_in_jupyterlab(offline_page, lab):
    page = offline_page
    stored = page.locator(".jp-OutputArea .course-bitx [data-role=stored]")
    run_first_cell(page, lab, "explorer.ipynb", stored)
    assert stored.inner_text() == "3.140625"
    # Click the last mantissa bit: the stored value moves to the next FP16 number, no kernel involved.
    page.locator(".jp-OutputArea .course-bitx [data-bit='15']").click()
    page.wait_for_function(
        "() => document.querySelector('.jp-OutputArea .course-bitx [data-role=stored]').innerText === '3.142578125'",
        timeout=10_000,
    )
    box = page.locator(".jp-OutputArea .course-bitx [data-role=value]")
    box.fill("0.1")
    box.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('.jp-OutputArea .course-bitx [data-role=stored]').innerText === '0.0999755859375'",
        timeout=10_000,
    )
    # A bad value: a message inside the explorer, no traceback, nothing on stderr.
    box.fill("pie")
    box.press("Enter")
    message = page.locator(".jp-OutputArea .course-bitx [data-role=message]")
    message.wait_for(state="visible", timeout=10_000)
    assert "cannot read 'pie' as a number" in message.inner_text()
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert "Traceback" not in page.locator(".jp-OutputArea").first.inner_text()


# ------------------------------------------------------------------------------------------------
# The built book
# ------------------------------------------------------------------------------------------------


def test_explorer_in_the_built_book(offline_page, book_server):
    page = offline_page
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{book_server}/notebooks/04_quantizing_pi.html")
    explorer = page.locator(".course-bitx").first
    stored = explorer.locator("[data-role=stored]")
    stored.wait_for(timeout=30_000)
    before = stored.inner_text()
    assert before == "3.140625"
    explorer.locator("[data-bit='15']").click()
    assert stored.inner_text() == "3.142578125"
    explorer.locator("[data-bit='0']").click()  # the sign bit
    assert stored.inner_text() == "-3.142578125"
    assert explorer.locator("[data-role=prev]").inner_text() == "-3.14453125"
    # The compare table and the number lines are there too; nothing came from the network but badges.
    assert page.locator("table.course-compare").count() >= 1
    assert page.locator(".cell_output img").first.evaluate("img => img.complete && img.naturalWidth > 400")
    assert all("badge" in url for url in page.blocked), page.blocked
    # The book theme's own scripts redeclare THEBE_JS_URL on every page; nothing else may fail.
    assert not [e for e in errors if "THEBE_JS_URL" not in e], errors


@pytest.mark.parametrize("value, name", [("pi", "e3m2"), ("200", "uint8"), ("-pi", "e4m3fnuz"), ("5", "fp4_e2m1"), ("-0", "fp32")])
def test_explorer_starts_on_the_bits_python_computes(offline_page, value, name):
    view = bx.bit_explorer(value, name)
    offline_page.set_content(f"<!doctype html><html><body>{view._repr_html_()}</body></html>")
    ui = offline_page.locator(".course-bitx-ui")
    ui.wait_for()
    assert int(ui.get_attribute("data-bits")) == view.bits
    assert offline_page.locator(".course-bitx-static").count() == 0  # the fallback text made way
    assert offline_page.locator("[data-role=message]").is_hidden()


# ------------------------------------------------------------------------------------------------
# In Dutch (course_lib.numbers.i18n): every word from the configuration, the stored values unchanged
# ------------------------------------------------------------------------------------------------

#: English words the Dutch explorer must not show (in its text, its tooltips or its options).
ENGLISH_ONLY = ("stored", "value", "error", "saturate", "mantissa", "sign bit", "previous", "next", "range",
                "special values", "Click", "typed", "happened", "infinity", "none", "undefined", "cannot", "exactly")  # fmt: skip


def _page_with(page, *views) -> None:
    page.set_content("<!doctype html><html><body>" + "".join(v._repr_html_() for v in views) + "</body></html>")
    page.wait_for_function(f"() => document.querySelectorAll('.course-bitx [data-role=stored]').length === {len(views)}")


def _shown(page, root: str = ".course-bitx") -> str:
    """Everything one explorer shows: its text, its tooltips and its options."""
    return page.locator(root).first.evaluate(
        "el => el.innerText + ' ' + [...el.querySelectorAll('[title]')].map(e => e.title).join(' ') + ' ' + "
        "[...el.querySelectorAll('option')].map(o => o.textContent).join(' ')"
    )


def _type(page, text: str) -> None:
    box = page.locator("[data-role=value]")
    box.fill(text)
    box.press("Enter")


def _dutch_error(text: str) -> str:
    with pytest.raises(ValueError) as err:
        bx.parse_value(text, "fp16", language="nl")
    return str(err.value)


def test_dutch_explorer_shows_dutch_and_keeps_the_stored_values(offline_page):
    page = offline_page
    _page_with(page, bx.bit_explorer("pi", "fp16", language="nl"))
    assert offline_page.locator(".course-bitx-static").count() == 0
    # The number fields keep the exact value, decimal point and all, to be copied into code.
    assert _stored(page) == "3.140625"
    table = page.locator("[data-role=table]").inner_text()
    assert "opgeslagen waarde" in table and "exacte decimale waarde" in table and "vorige waarde" in table
    assert "absolute fout" in table and "(opgeslagen waarde is kleiner)" in table
    legend = page.locator(".course-bitx-legend").inner_text()
    assert "teken" in legend and "mantisse (10 bits)" in legend and "2 bytes per waarde" in legend
    # The anatomy line is a sentence: its decimal numbers take a comma.
    anatomy = page.locator("[data-role=anatomy]").inner_text()
    assert "significand 1,1001001000 (binair) = 1,5703125" in anatomy
    assert "waarde = +1,5703125 × 2^1 = 3,140625" in anatomy
    assert page.locator("label", has_text="verzadigen").count() == 1
    assert page.locator("[data-role=format] option[value=custom]").inner_text() == "eigen ExMy"
    shown = _shown(page)
    assert "mantissebit (2^-10 van de significand)" in shown and "Klik op een bit" in shown
    assert [word for word in ENGLISH_ONLY if word in shown] == []

    # Click the last mantissa bit: the next FP16 number, stored value still with a decimal point.
    page.locator(".course-bitx [data-bit='15']").click()
    assert _stored(page) == "3.142578125"
    assert "= 3,142578125" in page.locator("[data-role=anatomy]").inner_text()

    # A bad value: the Dutch message, word for word what Python says in Dutch.
    message = page.locator("[data-role=message]")
    for text in ("pie", "", "0x12345", "2^5000", "3,14"):
        _type(page, text)
        assert message.is_visible(), text
        assert message.inner_text() == _dutch_error(text), text
    assert "schrijf decimalen met een punt (3.14)" in message.inner_text()
    _type(page, "0.1")
    assert not message.is_visible() and _stored(page) == "0.0999755859375"

    # "What happened" is a sentence too.
    _type(page, "1e-6")
    assert page.locator("[data-role=outcome]").inner_text() == (
        "subnormaal: kleiner dan het kleinste normale getal 0,00006103515625, dus minder significante bits"
    )
    page.locator("[data-role=format]").select_option("int8")
    _type(page, "130")
    assert page.locator("[data-role=outcome]").inner_text() == "afgekapt: 130 ligt buiten -128 .. 127"
    _type(page, "nan")
    assert message.inner_text() == "NaN is niet weer te geven in INT8"
    page.locator("[data-role=format]").select_option("custom")
    page.locator("[data-role=ebits]").fill("12")
    page.locator("[data-role=ebits]").dispatch_event("change")
    assert message.inner_text() == "het aantal exponentbits moet een geheel getal van 1 tot en met 11 zijn, niet 12"
    assert [word for word in ENGLISH_ONLY if word in _shown(page)] == []


def test_english_and_dutch_explorers_side_by_side(offline_page):
    """Two explorers on one page share the codec; each still speaks its own language."""
    page = offline_page
    _page_with(page, bx.bit_explorer("pi", "fp16"), bx.bit_explorer("pi", "fp16", language="nl"))
    english, dutch = page.locator(".course-bitx").nth(0), page.locator(".course-bitx").nth(1)
    assert "stored value" in english.inner_text() and "opgeslagen waarde" in dutch.inner_text()
    for explorer, expected in ((english, "cannot read 'pie' as a number; " + bx.HINT), (dutch, _dutch_error("pie"))):
        box = explorer.locator("[data-role=value]")
        box.fill("pie")
        box.press("Enter")
        assert explorer.locator("[data-role=message]").inner_text() == expected
    # The codec itself (window.courseBitCodec) keeps its English messages, whatever the views' languages.
    assert page.evaluate("() => { try { courseBitCodec.parseValue('pie', 'fp16'); } catch (e) { return e.message; } }") == (
        "cannot read 'pie' as a number; " + bx.HINT
    )


@pytest.mark.parametrize("name", ["int8", "int4", "uint8"])
def test_an_integer_format_stores_minus_zero_as_zero(codec_page, name):
    """Issue 42 (item 9): an integer has one zero; "-0" in INT8 is 0, as torch and Python say,
    not "-0" (JavaScript's Math.floor(-0) is -0, which the codec used to keep)."""
    got = codec_page.evaluate(
        """(name) => { const c = window.courseBitCodec;
             const p = c.encode(-0, name);
             return {positive: Object.is(p, 0), value: c.decode(p, name),
                     typed: c.encode(c.parseValue('-0', name).value, name)}; }""", name)
    assert got["positive"] and got["typed"] == 0 == F.encode(-0.0, name)
    assert got["value"] == 0 and math.copysign(1.0, float(got["value"])) == 1.0
    # In the explorer: type -0 into an integer format and read what it stores.
    page = codec_page
    if name in ("int8", "int4"):
        page.locator("[data-role=format]").select_option(name)
        box = page.locator("[data-role=value]")
        box.fill("-0")
        box.press("Enter")
        assert _stored(page) == "0"
        assert page.locator("[data-role=hex]").inner_text().startswith("0x0")
        assert str(bx.bit_explorer("-0", name).stored) == "0"
