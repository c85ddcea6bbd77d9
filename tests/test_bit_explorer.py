"""Tests for course_lib.numbers.bit_explorer on the Python side (the browser tests run its JavaScript)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from course_lib.chapters import ch04
from course_lib.chapters.ch04 import quiz as chapter04
from course_lib.numbers import bit_explorer as bx
from course_lib.numbers import formats as F
from course_lib.numbers import i18n


def _ids(html: str) -> list[str]:
    return re.findall(r'id="(course-bitx-\d+)"', html)


def test_html_is_one_div_and_one_inline_script_carrying_the_codec():
    html = bx.bit_explorer("pi", "fp16")._repr_html_()
    assert html.startswith('<div class="course-bitx')
    assert html.count("<script") == 1 and html.count("</script>") == 1 and html.endswith("</script>")
    script = html[html.index("<script>") + len("<script>") : -len("</script>")]
    assert "window.courseBitExplorer.mount(el, cfg)" in script
    assert "root.courseBitCodec = codec" in script  # the codec itself travels with the view
    assert bx.codec_js() in script
    # Nothing is fetched at view time: no external script, stylesheet or import.
    assert not re.search(r"<script[^>]+src=|<link\b|import\(|https?://", html)
    # The static fallback (no JavaScript, GitHub, an untrusted notebook) still says what is stored.
    assert "is stored as 3.140625 (0 10000 1001001000, 0x4248)" in html


def test_the_javascript_cannot_close_its_own_script_tag():
    assert "</script" not in bx.codec_js().lower()
    assert "<!--" not in bx.codec_js()
    html = bx.bit_explorer("0x4248", "fp16")._repr_html_()
    config = re.search(r"cfg = (\{.*?\});", html).group(1)
    assert "<" not in config and ">" not in config


def test_ids_are_unique_per_view():
    a, b = bx.bit_explorer(), bx.bit_explorer("e", "bf16")
    ids = _ids(a._repr_html_()) + _ids(b._repr_html_()) + _ids(a._repr_html_())
    assert len(ids) == 3 and len(set(ids)) == 3


def test_ids_are_the_same_on_every_run():
    code = (
        "import re\nfrom course_lib.numbers.bit_explorer import bit_explorer\n"
        "print([re.search(r'id=\"([^\"]+)\"', bit_explorer(v)._repr_html_()).group(1) for v in ('pi', 'e', '1e-8')])"
    )
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1] == "['course-bitx-1', 'course-bitx-2', 'course-bitx-3']\n"


def test_repr_is_readable():
    text = repr(bx.bit_explorer("pi", "e4m3"))
    assert text == "BitExplorer(value='pi', fmt='e4m3', saturate=False): π in E4M3 is stored as 3.25 (0 1000 101, 0x45)"


@pytest.mark.parametrize("name", ["fp17", "float8", "int1", "e0m3", ""])
def test_bad_format_names_give_a_clear_value_error(name):
    with pytest.raises(ValueError, match="unknown format|must be an integer|bit width|exponent_bits") as err:
        bx.bit_explorer("pi", name)
    assert "explorer" in str(err.value) or "valid" in str(err.value)


def test_formats_wider_than_32_bits_are_refused():
    with pytest.raises(ValueError, match="at most 32 bits; fp64 has 64"):
        bx.bit_explorer("pi", "fp64")


def test_bad_values_give_the_hint():
    hint = r"cannot read 'pie' as a number; try pi, 1e-8, -0, inf, nan or a hex pattern like 0x4248"
    with pytest.raises(ValueError, match=hint):
        bx.bit_explorer("pie")
    with pytest.raises(ValueError, match="does not fit in the 16 bits of FP16"):
        bx.bit_explorer("0x12345", "fp16")
    with pytest.raises(ValueError, match="saturate must be True or False"):
        bx.bit_explorer("pi", saturate="yes")
    with pytest.raises(ValueError, match="NaN has no int8 representation"):
        bx.bit_explorer("nan", "int8")


@pytest.mark.parametrize(
    "text, value, pattern",
    [
        ("pi", math.pi, None), ("π", math.pi, None), ("-pi", -math.pi, None), ("e", math.e, None),
        ("1e-8", 1e-8, None), ("-0", -0.0, None), ("inf", math.inf, None), ("-inf", -math.inf, None),
        (" 3.5 ", 3.5, None), (".5", 0.5, None), ("2^-24", 2.0**-24, None), ("2**10", 1024.0, None),
        ("0x4248", 3.140625, 0x4248), ("0X3C00", 1.0, 0x3C00), ("0b0011110000000000", 1.0, 0x3C00),
        ("0x8000", -0.0, 0x8000), (0.1, 0.1, None),
    ],
)  # fmt: skip
def test_parse_value_reads_what_the_text_box_reads(text, value, pattern):
    typed = bx.parse_value(text, "fp16")
    assert typed.value == value and math.copysign(1, typed.value) == math.copysign(1, value)
    assert typed.pattern == pattern


def test_parse_value_nan_keeps_its_sign():
    assert math.isnan(bx.parse_value("nan").value)
    assert math.copysign(1, bx.parse_value("-nan").value) == -1
    assert bx.bit_explorer("-nan", "fp16").bits == 0xFE00


@pytest.mark.parametrize("fmt", bx.EXPLORER_FORMATS)
def test_explorer_stores_what_the_codec_stores(fmt):
    view = bx.bit_explorer("pi", fmt)
    assert view.bits == F.encode(math.pi, fmt)
    assert view.stored == F.decode(view.bits, fmt)


def test_overflow_mode_is_non_saturating_unless_asked():
    assert math.isinf(bx.bit_explorer("1e6", "fp16").stored)
    assert math.isnan(bx.bit_explorer("1e6", "e4m3").stored)
    assert bx.bit_explorer("1e6", "e4m3", saturate=True).stored == 448.0
    assert bx.bit_explorer("1000", "int8").stored == 127


@pytest.mark.parametrize("value", ["pi", "0.1", "-1e-8", "65520", "1e6", "-0", "2.5"])
def test_compare_table_values_equal_the_codec(value):
    comparison = bx.compare_formats(value)
    x = bx.parse_value(value).value
    assert [r.format.name for r in comparison.rows] == list(bx.EXPLORER_FORMATS)
    text, html = str(comparison), comparison._repr_html_()
    for row in comparison.rows:
        fmt = row.format
        bits = F.encode(x, fmt)
        stored = F.decode(bits, fmt)
        assert row.bits == bits
        assert row.value == stored or (math.isnan(row.value) and math.isnan(stored))
        assert row.exact == F.exact_decimal(float(stored))
        assert row.hex == f"0x{bits:0{(fmt.total_bits + 3) // 4}X}"
        assert row.binary == F.bit_string(bits, fmt)
        assert row.bits_per_value == fmt.total_bits
        if math.isfinite(stored):
            assert row.abs_error == abs(stored - x)
        line = next(line for line in text.splitlines() if line.startswith(fmt.name + " "))
        assert row.exact in line and row.hex in line and row.binary in line
        assert row.hex in html and row.exact in html


def test_compare_table_of_pi_matches_the_lecture_notes():
    rows = {r.format.name: r for r in bx.compare_formats("pi").rows}
    assert rows["fp16"].value == 3.140625 and rows["fp16"].hex == "0x4248"
    assert rows["bf16"].value == 3.140625 and rows["bf16"].hex == "0x4049"
    assert rows["fp32"].exact == "3.1415927410125732421875"
    assert rows["int8"].value == 3 and rows["int4"].value == 3
    assert rows["e4m3"].value == 3.25 and rows["e5m2"].value == 3.0


def test_compare_table_in_dutch_has_dutch_headers_and_the_same_values():
    en, nl = bx.compare_formats("pi", ["fp32", "fp16"]), bx.compare_formats("pi", ["fp32", "fp16"], language="nl")
    assert str(en).splitlines()[0] == "π in 2 formats"
    assert str(nl).splitlines()[0] == "π in 2 formaten"
    assert nl.headers[:2] == ["formaat", "opgeslagen waarde (exact)"] and en.headers[0] == "format"
    assert "<th" in nl._repr_html_() and "opgeslagen waarde (exact)" in nl._repr_html_()
    assert en.table().rows == nl.table().rows  # the values as Python writes them
    assert "3.140625" in str(nl) and "3.1415927410125732421875" in str(nl)


def test_store_with_an_absmax_scale():
    scale = 4.2 / 127
    row = bx.store("pi", "int8", scale=scale, block_size=64)
    code = int(np.rint(math.pi / scale))
    assert row.bits == code and row.code == code
    assert row.value == code * scale
    assert row.bits_per_value == 8 + 32 / 64
    assert row.abs_error == abs(code * scale - math.pi) < scale / 2
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        bx.store("pi", "int8", scale=0.0)
    with pytest.raises(ValueError, match="block_size only makes sense with a scale"):
        bx.store("pi", "int8", block_size=64)


def test_neighbours_are_consecutive_representable_values():
    row = bx.store("pi", "fp16")
    grid = bx.neighbours(row, 3)
    assert len(grid) == 7 and grid[3] == 3.140625
    assert np.all(np.diff(grid) == 2.0**-9)
    assert list(bx.neighbours(bx.store("pi", "int4"), 5)) == [-2, -1, 0, 1, 2, 3, 4, 5, 6, 7]
    top = bx.neighbours(bx.store("448", "e4m3"), 2)  # nothing above E4M3's max
    assert list(top) == [384.0, 416.0, 448.0]


def test_number_lines_draws_one_labelled_line_per_format():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = bx.compare_formats("pi").rows
    fig = ch04.number_lines(rows)
    try:
        assert len(fig.axes) == len(rows)
        assert [ax.get_ylabel() for ax in fig.axes] == [r.label for r in rows]
        assert "π" in fig.axes[0].get_title()
    finally:
        plt.close(fig)


def test_chapter04_exercises_check_answers():
    assert chapter04.q1.feedback(3.0)[0] and not chapter04.q1.feedback(3.25)[0]
    assert chapter04.q2.feedback(2.0**-6)[0]
    assert chapter04.q3.feedback(80 * 5 / 127)[0] and not chapter04.q3.feedback(79 * 5 / 127)[0]
    assert chapter04.q4.feedback(4.125)[0] and not chapter04.q4.feedback(5)[0]


# ------------------------------------------------------------------------------------------------
# Language: English by default, Dutch on request (course_lib.numbers.i18n)
# ------------------------------------------------------------------------------------------------


def _config(html: str) -> dict:
    return json.loads(re.search(r"cfg = (\{.*?\});\n", html).group(1))


def _codec_text(html: str) -> dict:
    return json.loads(re.search(r"window\.courseBitText = (\{.*?\});\n", html).group(1))


def test_english_is_the_default_and_unchanged():
    assert bx.HINT == "try pi, 1e-8, -0, inf, nan or a hex pattern like 0x4248"
    view = bx.bit_explorer("pi", "fp16")
    assert view.language == "en" and bx.bit_explorer("pi", "fp16", language="en").summary() == view.summary()
    assert view.summary() == "π in FP16 is stored as 3.140625 (0 10000 1001001000, 0x4248)"
    html = view._repr_html_()
    assert (
        "Bit explorer: π in FP16 is stored as 3.140625 (0 10000 1001001000, 0x4248). It needs JavaScript: run the "
        "cell (in a trusted notebook) to click the bits." in html
    )
    words = _config(html)["text"]
    assert words == {**i18n.texts("bx_", "en"), "decimal_point": "."}
    assert words["bx_row_stored"] == "stored value" and words["bx_legend_mantissa"] == "mantissa ({m} bits)"


def test_dutch_explorer_config_holds_dutch_texts():
    html = bx.bit_explorer("pi", "fp16", language="nl")._repr_html_()
    config = _config(html)
    assert config["value"] == "pi" and config["format"]["name"] == "fp16"
    words = config["text"]
    assert words == {**i18n.texts("bx_", "nl"), "decimal_point": ","}
    assert words["bx_row_stored"] == "opgeslagen waarde"
    assert words["bx_legend_mantissa"] == "mantisse ({m} bits)"
    assert words["bx_saturate"] == "verzadigen" and words["bx_row_abserr"] == "absolute fout"
    assert words["bx_err_unreadable"].startswith("{text} is niet als getal te lezen")
    # The codec's own messages stay English whatever the view's language; the view translates them by key.
    assert _codec_text(html) == i18n.texts("bx_err_", "en")
    # The fallback without JavaScript speaks Dutch, with a decimal comma in its sentence.
    assert "Bitverkenner: π wordt in FP16 opgeslagen als 3,140625 (0 10000 1001001000, 0x4248)." in html
    assert "It needs JavaScript" not in html and "stored as" not in html
    assert "<" not in json.dumps(config)  # nothing in the Dutch texts can close the script tag


def test_dutch_summary_and_repr():
    view = bx.bit_explorer("pi", "fp16", language="nl")
    assert view.summary() == "π wordt in FP16 opgeslagen als 3,140625 (0 10000 1001001000, 0x4248)"
    assert view.stored == 3.140625  # the value itself is a number, not text
    assert bx.bit_explorer("pi", "int8", language="nl").summary() == "π wordt in INT8 opgeslagen als 3 (00000011, 0x03)"
    assert repr(bx.bit_explorer("0.1", "e4m3", language="NL")) == (
        "BitExplorer(value='0.1', fmt='e4m3', saturate=False, language='nl'): "
        "0.1 wordt in E4M3 opgeslagen als 0,1015625 (0 0011 101, 0x1D)"
    )


def test_dutch_messages_for_bad_values():
    with pytest.raises(ValueError) as err:
        bx.bit_explorer("pie", language="nl")
    assert str(err.value) == (
        "'pie' is niet als getal te lezen; probeer pi, 1e-8, -0, inf, nan of een bitpatroon zoals 0x4248, "
        "en schrijf decimalen met een punt (3.14)"
    )
    with pytest.raises(ValueError, match=r"^'3,14' is niet als getal te lezen; .*met een punt \(3\.14\)$"):
        bx.parse_value("3,14", language="nl")
    with pytest.raises(ValueError, match=r"^typ eerst een waarde; probeer pi"):
        bx.parse_value("  ", language="nl")
    with pytest.raises(ValueError, match=r"^0x12345 past niet in de 16 bits van FP16 \(patronen 0x0\.\.0xFFFF\)$"):
        bx.bit_explorer("0x12345", "fp16", language="nl")
    with pytest.raises(ValueError, match=r"^2\^5000 valt buiten het bereik van float64"):
        bx.parse_value("2^5000", language="nl")
    # The same texts in English are today's messages, word for word.
    with pytest.raises(ValueError, match=r"^2\^5000 is outside float64's range \(2\^-1074 to 2\^1023\)$"):
        bx.parse_value("2^5000")
    with pytest.raises(ValueError, match=r"^type a value first; try pi"):
        bx.parse_value("")


@pytest.mark.parametrize("call", [
    lambda: bx.bit_explorer("pi", "fp16", language="fr"),
    lambda: bx.BitExplorer("pi", "fp16", False, "de"),
    lambda: bx.parse_value("pi", language="english"),
    lambda: bx.bit_explorer("pi", language=None),
    lambda: bx.compare_formats("pi", language="NL-be"),
])  # fmt: skip
def test_a_bad_language_is_a_clear_value_error(call):
    with pytest.raises(ValueError, match=r"^unknown language .+; valid values: en, nl$"):
        call()


@pytest.mark.parametrize("fmt", ["int8", "int4"])
@pytest.mark.parametrize("value", ["-0", "-0.0", -0.0, "-0.4"])
def test_an_integer_format_stores_minus_zero_as_zero(value, fmt):
    """Issue 42 (item 9): an integer has one zero, so -0 in INT8 is 0 (torch: tensor(-0.).to(torch.int8)
    is 0), in the explorer, its summary and the comparison table, never "-0"."""
    view = bx.bit_explorer(value, fmt)
    assert view.bits == 0 and view.stored == 0 and str(view.stored) == "0"
    assert "stored as 0 (" in view.summary()
    row = bx.compare_formats(value, [fmt]).rows[0]
    assert row.bits == 0 and str(row.value) in ("0", "0.0") and math.copysign(1.0, row.value) == 1.0
    assert "-0" not in str(bx.compare_formats(value, [fmt])).splitlines()[-1]
