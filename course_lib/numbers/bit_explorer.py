"""The bit explorer: one number in one format, its bits, and what each bit does, live in the page.

Chapters 3 (*Number formats*) and 4 (*Quantizing π*) use it.

:func:`bit_explorer` returns a self-contained HTML + JavaScript view (one ``<div>`` and one inline
``<script>``, no ipywidgets comm, nothing fetched at view time), so it responds to clicks in
JupyterLab, in Colab and in the static book with no kernel. The script carries an exact codec
(``course_lib/numbers/assets/bit_explorer.js``) that follows the same rules as :mod:`course_lib.numbers.formats`:
round to nearest even straight from the float64 value, OCP E4M3FN with no infinity, integers
rounded half to even then clamped. The browser tests compare it with the Python codec on every
bit pattern of FP16, BF16, E4M3 and E5M2. The page can call it as ``window.courseBitCodec``.

Overflow mode: the explorer starts **non-saturating**, like :func:`course_lib.numbers.formats.encode` --
values beyond max become +-inf in IEEE formats (FP32, FP16, BF16, E5M2) and NaN in E4M3, which has
no infinity; its *saturate* box (or ``saturate=True``) clamps to +-max instead, as torch's
``float8_e4m3fn`` cast does. Integer formats always clamp.

Language: ``bit_explorer(..., language="nl")`` speaks Dutch. Every word the explorer shows comes
from :mod:`course_lib.numbers.i18n` (keys ``bx_...``): Python passes the chosen language's texts to the
JavaScript in the view's configuration (``cfg.text``), and the codec's own error messages (English,
``bx_err_...``) in ``window.courseBitText``; the JavaScript holds no words a learner reads (only
errors a programmer alone can meet, such as a bad format spec, stay English in it). Localised: the
controls, tooltips, legend, the anatomy line, the table's row names and the words around its values,
the "what happened" row, the messages for a bad typed value or custom format, the no-JavaScript
fallback text, :meth:`BitExplorer.summary` and :func:`parse_value`'s messages. A number inside a
sentence (the anatomy line, the "what happened" row, the legend, the summary) follows the language
(``3,140625`` in Dutch); the table's values (stored value, exact decimal, errors, ULP, neighbours,
range) keep their decimal point in every language, because they are meant to be copied into code and
into the text box, which reads a decimal point only, as Python does. Not localised: format names,
bit patterns, ``inf``/``NaN``, the input grammar (``pi``, ``2^-24``, ``0x4248``) and the errors of
Python arguments (an unknown format, ``saturate`` not a bool), which are the library's own English.

:func:`compare_formats` puts one number in every format side by side (a table computed in Python
with :mod:`course_lib.numbers.formats`); :func:`store` is one row of it, optionally with a scale factor
(block quantization); :func:`neighbours` lists the representable numbers around the value
(chapter 4 draws them on number lines, :func:`course_lib.chapters.ch04.number_lines`).
"""

from __future__ import annotations

import html
import itertools
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from course_lib.base.tables import Table
from course_lib.numbers import format_specs, formats, i18n

__all__ = [
    "EXPLORER_FORMATS", "HINT", "TypedValue", "parse_value", "BitExplorer", "bit_explorer",
    "Stored", "store", "FormatComparison", "compare_formats", "neighbours", "codec_js",
]  # fmt: skip

ASSETS = Path(__file__).resolve().parent / "assets"
#: The formats the explorer's selector offers (plus a custom ExMy) and the compare view shows.
EXPLORER_FORMATS = ("fp32", "fp16", "bf16", "e4m3", "e5m2", "int8", "int4")
#: What a bad typed value's message suggests instead (in English; ``i18n.text("bx_err_hint", language)``).
HINT = i18n.text("bx_err_hint")
MAX_BITS = 32

_ids = itertools.count(1)  # per-process counter: ids are unique per view and the same on every run
_NUMBER = re.compile(r"(\d+\.?\d*|\.\d+)(e[+-]?\d+)?")
_POWER = re.compile(r"2(\^|\*\*)([+-]?\d+)")
_NAMED_VALUES = {"pi": math.pi, "\u03c0": math.pi, "e": math.e, "inf": math.inf, "infinity": math.inf,
                 "\u221e": math.inf, "nan": math.nan}  # fmt: skip


@lru_cache(maxsize=None)
def codec_js() -> str:
    """The explorer's JavaScript (codec and view), as inlined into every explorer.

    Chapter 3, *Number formats*.
    """
    return (ASSETS / "bit_explorer.js").read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _css() -> str:
    return (ASSETS / "bit_explorer.css").read_text(encoding="utf-8")


def _explorer_format(fmt: str | format_specs.FloatFormat | format_specs.IntFormat) -> format_specs.FloatFormat | format_specs.IntFormat:
    """Look a format up and check that the explorer can show it (at most 32 bits)."""
    try:
        f = format_specs.get_format(fmt)
    except ValueError as err:
        offered = ", ".join(EXPLORER_FORMATS)
        raise ValueError(f"{err}. The explorer's selector offers {offered} and custom eXmY.") from None
    if f.total_bits > MAX_BITS:
        raise ValueError(
            f"the bit explorer shows formats of at most {MAX_BITS} bits; {f.name} has {f.total_bits}: "
            f"use one of {', '.join(EXPLORER_FORMATS)} or a custom eXmY"
        )
    return f


# --------------------------------------------------------------------------------------------
# Reading a typed value (the same grammar as the JavaScript explorer's text box)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TypedValue:
    """A value as the learner typed it: the text, the float64 it reads as, and the bit pattern if bits were typed.

    Chapter 3, *Number formats*.
    """

    text: str
    value: float
    pattern: int | None = None

    @property
    def label(self) -> str:
        """How to name it in a table or a plot: 'π' for pi, else the text."""
        return re.sub(r"(?i)\bpi\b", "\u03c0", self.text.strip())


def parse_value(
    text: str | float, fmt: str | format_specs.FloatFormat | format_specs.IntFormat = "fp16", *, language: str = "en"
) -> TypedValue:
    """Read a typed value the way the explorer's text box does: numbers, pi, e, inf, nan, 2^k, or bits.

    Accepts decimal numbers (``3.14``, ``1e-8``, ``-0``), ``pi``/``π`` and ``e`` (with a sign),
    ``inf``, ``nan``, powers of two (``2^-24`` or ``2**-24``), and a bit pattern of ``fmt`` in hex
    (``0x4248``) or binary (``0b...``). Python numbers are taken as they are. ``language``
    ('en' or 'nl') is the language of the message when the text cannot be read.

    Chapter 3, *Number formats*.
    """
    language = i18n.check_language(language)
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return TypedValue(repr(text), float(text))
    if not isinstance(text, str):
        raise ValueError(f"a value must be a string such as 'pi' or '0x4248', or a number; got {text!r}")
    raw = text.strip()
    s = re.sub(r"\s+", "", raw.lower())
    if not s:
        raise ValueError(i18n.text("bx_err_empty", language))
    pattern = re.fullmatch(r"0x([0-9a-f]+)|0b([01]+)", s)
    if pattern:
        fmt = _explorer_format(fmt)
        bits = int(pattern.group(1), 16) if pattern.group(1) is not None else int(pattern.group(2), 2)
        limit = (1 << fmt.total_bits) - 1
        if bits > limit:
            raise ValueError(
                i18n.text("bx_err_too_wide", language, text=raw, n=fmt.total_bits, format=fmt.name.upper(),
                          limit=f"{limit:X}")
            )  # fmt: skip
        return TypedValue(raw, float(formats.decode(bits, fmt)), bits)
    sign, body = 1.0, s
    if body[:1] in "+-":
        sign, body = (-1.0 if body[0] == "-" else 1.0), body[1:]
    if body in _NAMED_VALUES:
        value = _NAMED_VALUES[body]
    elif _NUMBER.fullmatch(body):
        value = float(body)
    elif _POWER.fullmatch(body):
        k = int(_POWER.fullmatch(body).group(2))
        if not -1074 <= k <= 1023:
            raise ValueError(i18n.text("bx_err_power_range", language, k=k))
        value = math.ldexp(1.0, k)
    else:
        raise ValueError(i18n.text("bx_err_unreadable", language, text=repr(raw)))
    return TypedValue(raw, math.copysign(value, sign) if math.isnan(value) else sign * value)


def _encode_typed(typed: TypedValue, fmt: format_specs.FloatFormat | format_specs.IntFormat, saturate: bool) -> int:
    if typed.pattern is not None:
        return typed.pattern
    return int(formats.encode(typed.value, fmt, saturate=saturate))


# --------------------------------------------------------------------------------------------
# The explorer
# --------------------------------------------------------------------------------------------


def _script_json(value: object) -> str:
    """JSON to write inside <script>: '<', '>' and '&' escaped, so no text can close the tag."""
    out = json.dumps(value, ensure_ascii=True)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        out = out.replace(char, escape)
    return out


def _hex(bits: int, n_bits: int) -> str:
    return f"0x{bits:0{(n_bits + 3) // 4}X}"


class BitExplorer:
    """One value in one format as a live, clickable view (HTML + inline JavaScript, no kernel needed).

    ``language`` ('en', the default, or 'nl') is the language of everything the view says.

    Chapter 3, *Number formats*.
    """

    def __init__(self, value: str | float = "pi", fmt: str | format_specs.FloatFormat | format_specs.IntFormat = "fp16",
                 saturate: bool = False, language: str = "en") -> None:  # fmt: skip
        self.language = i18n.check_language(language)
        if not isinstance(saturate, bool):
            raise ValueError(f"saturate must be True or False, got {saturate!r}")
        self.format = _explorer_format(fmt)
        self.typed = parse_value(value, self.format, language=self.language)
        self.saturate = saturate
        self.bits = _encode_typed(self.typed, self.format, saturate)
        self.stored = formats.decode(self.bits, self.format)

    def _spec(self) -> dict:
        f = self.format
        if isinstance(f, format_specs.IntFormat):
            return {"kind": "int", "name": f.name, "bits": f.bits, "signed": f.signed}
        return {"kind": "float", "name": f.name, "e": f.exponent_bits, "m": f.mantissa_bits, "bias": f.bias,
                "nan": f.nan_encoding}  # fmt: skip

    def summary(self) -> str:
        """One line in the explorer's language: the typed value, the format, the stored value and its bits."""
        return i18n.text(
            "bx_summary", self.language, value=self.typed.label, format=self.format.name.upper(),
            stored=i18n.localise_number(repr(self.stored), self.language),
            bits=formats.bit_string(self.bits, self.format), hex=_hex(self.bits, self.format.total_bits),
        )  # fmt: skip

    def __repr__(self) -> str:
        language = "" if self.language == "en" else f", language={self.language!r}"
        return (
            f"BitExplorer(value={self.typed.text!r}, fmt={self.format.name!r}, saturate={self.saturate}{language}): "
            f"{self.summary()}"
        )

    def _repr_html_(self) -> str:
        element_id = f"course-bitx-{next(_ids)}"
        # Every word of the view, in its language; the decimal point of the numbers inside its sentences.
        words = {**i18n.texts("bx_", self.language), "decimal_point": i18n.text("decimal_point", self.language)}
        config = {"value": self.typed.text, "format": self._spec(), "saturate": self.saturate, "text": words}
        config_js = _script_json(config)
        codec_text = _script_json(i18n.texts("bx_err_", "en"))  # the codec's own messages are English
        static = html.escape(i18n.text("bx_fallback", self.language, summary=self.summary()))
        start = (
            "(function () {\n"
            f"  var id = {json.dumps(element_id)}, cfg = {config_js};\n"
            "  var script = document.currentScript;\n"
            "  function start(tries) {\n"
            "    var el = script && script.previousElementSibling;\n"
            "    if (!el || el.id !== id) el = document.getElementById(id);\n"
            "    if (el) { window.courseBitExplorer.mount(el, cfg); return; }\n"
            "    if (tries < 200) setTimeout(function () { start(tries + 1); }, 50);\n"
            "  }\n"
            "  start(0);\n"
            "})();\n"
        )
        return (
            f'<div class="course-bitx tex2jax_ignore mathjax_ignore" id="{element_id}">'
            f"<style>{_css()}</style>"
            f'<div class="course-bitx-static">{static}</div></div>'
            f"<script>\nwindow.courseBitText = {codec_text};\n{codec_js()}\n{start}</script>"
        )


def bit_explorer(value: str | float = "pi", fmt: str = "fp16", *, saturate: bool = False,
                 language: str = "en") -> BitExplorer:  # fmt: skip
    """An interactive view of one value in one format: clickable bits, stored value, errors, ULP, neighbours, range.

    ``value`` takes what the explorer's text box takes (``'pi'``, ``'1e-8'``, ``'-0'``, ``'inf'``,
    ``'nan'``, ``'0x4248'``, ...); ``fmt`` is a format name (``'fp32'``, ``'fp16'``, ``'bf16'``,
    ``'e4m3'``, ``'e5m2'``, ``'int8'``, ``'int4'``, ``'e3m2'``, ...) of at most 32 bits.
    Non-saturating by default (see the module docstring). ``language="nl"`` shows it in Dutch
    (the module docstring says which texts follow the language).

    Chapter 3, *Number formats*.
    """
    return BitExplorer(value, fmt, saturate, language)


# --------------------------------------------------------------------------------------------
# The compare view: one number in every format
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """One value stored in one format (optionally as an integer code times a scale factor).

    Chapter 3, *Number formats*.
    """

    label: str
    format: format_specs.FloatFormat | format_specs.IntFormat
    typed: TypedValue
    bits: int
    value: float
    scale: float | None = None
    bits_per_value: float = 0.0

    @property
    def code(self) -> float:
        """What the bits decode to before the scale factor is applied."""
        return formats.decode(self.bits, self.format)

    @property
    def hex(self) -> str:
        """The bit pattern in hex, e.g. '0x4248'."""
        return _hex(self.bits, self.format.total_bits)

    @property
    def binary(self) -> str:
        """The bit pattern in binary, fields split by spaces."""
        return formats.bit_string(self.bits, self.format)

    @property
    def exact(self) -> str:
        """The exact decimal expansion of the stored value."""
        return formats.exact_decimal(float(self.value))

    @property
    def abs_error(self) -> float:
        """|stored - typed| (NaN when either is NaN)."""
        if math.isinf(self.value) and self.value == self.typed.value:
            return 0.0
        return abs(float(self.value) - self.typed.value)

    @property
    def rel_error(self) -> float:
        """|stored - typed| / |typed| (NaN for a typed zero or NaN)."""
        x = self.typed.value
        if x == 0 or math.isnan(x):
            return 0.0 if x == 0 and self.value == 0 else math.nan
        return self.abs_error / abs(x)


def store(
    value: str | float,
    fmt: str | format_specs.FloatFormat | format_specs.IntFormat,
    *,
    scale: float | None = None,
    block_size: int | None = None,
    saturate: bool = False,
    label: str | None = None,
) -> Stored:
    """Store one value in one format: its bits, the value they hold, the error, and the bits it costs.

    With ``scale`` the format holds ``value / scale`` and the stored value is ``code * scale``
    (symmetric block quantization: ``scale = absmax / 127`` for INT8); ``block_size`` values share
    one FP32 scale, so each pays ``32 / block_size`` extra bits.

    Chapter 4, *Quantizing π*.
    """
    fmt = _explorer_format(fmt)
    typed = parse_value(value, fmt)
    if scale is None:
        if block_size is not None:
            raise ValueError("block_size only makes sense with a scale; pass scale= too")
        bits = _encode_typed(typed, fmt, saturate)
        stored = float(formats.decode(bits, fmt))
        return Stored(label or fmt.name, fmt, typed, bits, stored, None, float(fmt.total_bits))
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number such as absmax / 127, got {scale!r}")
    if block_size is not None and (not isinstance(block_size, int) or block_size < 1):
        raise ValueError(f"block_size must be a positive whole number of values sharing one scale, got {block_size!r}")
    if typed.pattern is not None:
        raise ValueError("with a scale, give a number to quantize, not a bit pattern")
    bits = int(formats.encode(typed.value / scale, fmt, saturate=saturate))
    stored = float(formats.decode(bits, fmt)) * scale
    overhead = 32 / block_size if block_size else 0.0
    name = label or f"{fmt.name} x scale"
    return Stored(name, fmt, typed, bits, stored, float(scale), fmt.total_bits + overhead)


def _g(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.3g}"


class FormatComparison:
    """One value in several formats side by side; prints as a text table and renders as HTML.

    Chapter 4, *Quantizing π*.
    """

    #: The columns, as keys of :mod:`course_lib.numbers.i18n`'s tables.
    COLUMNS = ("cmp_format", "cmp_stored", "cmp_hex", "cmp_bits", "cmp_abs_error", "cmp_rel_error",
               "cmp_bits_per_value")  # fmt: skip

    def __init__(self, rows: Sequence[Stored], language: str = "en") -> None:
        if not rows:
            raise ValueError("a comparison needs at least one stored value; use store(value, fmt)")
        self.rows = list(rows)
        self.language = i18n.check_language(language)

    @property
    def headers(self) -> list[str]:
        """The column headers in the comparison's language."""
        return [i18n.text(key, self.language) for key in self.COLUMNS]

    def table(self) -> Table:
        """The comparison as a :class:`course_lib.base.tables.Table`."""
        body = [
            [r.label, r.exact, r.hex, r.binary, _g(r.abs_error), _g(r.rel_error), f"{r.bits_per_value:g}"]
            for r in self.rows
        ]
        labels = " / ".join(sorted({r.typed.label for r in self.rows}))
        title = i18n.text("cmp_title", self.language, values=labels, n=len(self.rows))
        return Table(self.headers, body, title=title)

    def __str__(self) -> str:
        return str(self.table())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colours = {"sign": "#c0392b", "exponent": "#1f6fb2", "mantissa": "#1e8449", "int": "#7d3c98"}
        cell = "white-space:nowrap;padding:2px 8px;text-align:right"
        rows = []
        for r in self.rows:
            parts = r.binary.split(" ")
            if isinstance(r.format, format_specs.IntFormat):
                coloured = f'<span style="color:{colours["int"]}">{parts[0]}</span>'
            else:
                coloured = " ".join(
                    f'<span style="color:{c}">{p}</span>'
                    for p, c in zip(parts, (colours["sign"], colours["exponent"], colours["mantissa"]))
                )
            cells = [html.escape(r.label), html.escape(r.exact), r.hex, coloured, _g(r.abs_error), _g(r.rel_error),
                     f"{r.bits_per_value:g}"]  # fmt: skip
            rows.append("<tr>" + "".join(f'<td style="{cell}">{c}</td>' for c in cells) + "</tr>")
        head = "".join(f'<th style="{cell}">{html.escape(h)}</th>' for h in self.headers)
        title = html.escape(self.table().title or "")
        return (
            '<div style="overflow-x:auto;max-width:100%">'
            '<table class="course-table course-compare" style="font-family:monospace;font-size:12px">'
            f"<caption>{title}</caption><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        )


def compare_formats(
    value: str | float = "pi",
    fmts: Sequence[str] = EXPLORER_FORMATS,
    *,
    saturate: bool = False,
    language: str = "en",
) -> FormatComparison:
    """One number in every format side by side: stored value, bits, absolute and relative error, bits per value.

    ``language="nl"`` gives the headers and title in Dutch; the values stay as Python writes them.

    Chapter 4, *Quantizing π*.
    """
    if isinstance(fmts, str):
        raise ValueError(
            f"fmts must be a list of format names such as {list(EXPLORER_FORMATS)}, got the string {fmts!r}"
        )
    language = i18n.check_language(language)
    return FormatComparison([store(value, f, saturate=saturate) for f in fmts], language)


# --------------------------------------------------------------------------------------------
# The representable values around a number
# --------------------------------------------------------------------------------------------


def neighbours(row: Stored, count: int = 4) -> np.ndarray:
    """The stored value and the ``count`` representable values on each side of it, ascending.

    Chapter 3, *Number formats*.
    """
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a whole number >= 0, got {count!r}")
    fmt, scale = row.format, row.scale or 1.0
    code = float(row.code)
    if not math.isfinite(code):
        return np.array([])
    if isinstance(fmt, format_specs.IntFormat):
        codes = np.arange(max(fmt.min, code - count), min(fmt.max, code + count) + 1, dtype=np.float64)
        return codes * scale
    below, above, v = [], [], code
    for _ in range(count):
        v = formats.next_down(v, fmt)
        if not math.isfinite(v):
            break
        below.append(v)
    v = code
    for _ in range(count):
        v = formats.next_up(v, fmt)
        if not math.isfinite(v):
            break
        above.append(v)
    return np.array(below[::-1] + [code] + above) * scale
