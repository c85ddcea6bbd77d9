"""The Dutch edition shows the same numbers as the English chapters 2 and 4 for what they share.

Both editions compute with the same ``course_lib`` calls; this test reads the tables each committed
notebook printed (nbval checks that they are what a fresh run prints), recomputes every shared
figure with the library and asserts that each edition shows it, written the way its language
writes numbers: ``4.00`` and ``1,810`` in English, ``4,00`` and ``1.810`` in Dutch. A change on one
side only fails here, so the editions cannot drift apart.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.numbers import formats, memory
from course_lib.numbers.bit_explorer import compare_formats
from course_lib.numbers.i18n import decimal

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import notebooks  # noqa: E402  (tools/notebooks.py, the maintainers' tool)

MEMORY = notebooks.NOTEBOOK_DIR / "02_memory_wall.ipynb"
PI = notebooks.NOTEBOOK_DIR / "04_quantizing_pi.ipynb"
DUTCH = notebooks.NOTEBOOK_DIR / "nl" / "kwantisatie.ipynb"
N = 1e9


def _printed(path: Path) -> list[str]:
    """Every line a notebook printed as plain text (streams and text/plain), in cell order."""
    lines = []
    for cell in nbformat.read(path, as_version=4).cells:
        for out in cell.get("outputs", []):
            texts = [out.get("text", ""), out.get("data", {}).get("text/plain", "")]
            lines += [line for text in texts for line in (text if isinstance(text, str) else "".join(text)).splitlines()]
    return lines


def _cells(line: str) -> list[str]:
    """A printed table row split into its cells (columns are two or more spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


def _tables(path: Path) -> list[tuple[str, list[str], list[list[str]]]]:
    """Each course_lib.base.tables.Table a notebook printed: (title, headers, rows)."""
    lines, found = _printed(path), []
    for i, line in enumerate(lines):
        if i and re.fullmatch(r"-+(  -+)*", line):
            title = lines[i - 2] if i >= 2 and not re.fullmatch(r"-+(  -+)*", lines[i - 2]) else ""
            rows = []
            for row in lines[i + 1:]:
                if not row.strip() or re.fullmatch(r"-+(  -+)*", row):
                    break
                rows.append(_cells(row))
            found.append((title, _cells(lines[i - 1]), rows))
    return found


def cell(path: Path, table: str, row: tuple[str, ...], column: str) -> str:
    """The value in ``column`` of the row starting with ``row`` in the table whose title or a header contains ``table``."""
    for title, headers, rows in _tables(path):
        if table in title or any(table in h for h in headers):
            assert column in headers, f"{path.name}: table {table!r} has no column {column!r}: {headers}"
            for r in rows:
                if tuple(r[: len(row)]) == row:
                    return r[headers.index(column)]
            raise AssertionError(f"{path.name}: table {table!r} has no row {row}: {[r[0] for r in rows]}")
    raise AssertionError(f"{path.name}: no table {table!r} among {[t or h for t, h, _ in _tables(path)]}")


def english(x: float, digits: int) -> str:
    """How the English chapters write a number in a table."""
    return decimal(x, digits, "en")


def dutch(x: float, digits: int) -> str:
    """How the Dutch edition writes a number in a table."""
    return decimal(x, digits, "nl")


# -- The helpers find what they should, and notice what is not there ----------------------------


def test_the_table_reader_finds_cells_and_names_what_is_missing():
    assert cell(MEMORY, "GB for 1B params", ("fp32",), "bytes (torch)") == "4"
    with pytest.raises(AssertionError, match="no row"):
        cell(MEMORY, "GB for 1B params", ("fp33",), "bytes (torch)")
    with pytest.raises(AssertionError, match="no column"):
        cell(MEMORY, "GB for 1B params", ("fp32",), "bytes (jax)")
    with pytest.raises(AssertionError, match="no table"):
        cell(DUTCH, "GB for 1B params", ("fp32",), "bytes (torch)")
    assert english(1810.4, 0) == "1,810" and dutch(1810.4, 0) == "1.810" and dutch(34.94, 1) == "34,9"


# -- 1B parameters: weights, the training breakdown, 16 and 8 bits ------------------------------


def test_one_billion_fp32_weights():
    gb = memory.gb(memory.weight_memory(N, "fp32"))
    assert f"1B parameters x 4 bytes = {english(gb, 2)} GB  (lecture notes: 4 GB)" in _printed(MEMORY)
    assert f"1 miljard parameters x 4 bytes = {dutch(gb, 2)} GB" in _printed(DUTCH)


@pytest.mark.parametrize("part, english_column, dutch_row", [
    ("activations", "activations GB", "activaties"),
    ("total", "total GB", "totaal"),
])  # fmt: skip
def test_training_one_billion_in_fp32_next_to_the_rule_of_thumb(part, english_column, dutch_row):
    b = memory.training_memory(N, "fp32", "adam", batch=1, seq_len=2048)
    gb = memory.gb(getattr(b, part))
    assert cell(MEMORY, english_column, ("1 x 2048", "no"), english_column) == english(gb, 1)
    assert cell(DUTCH, "onderdeel", (dutch_row,), "GB") == dutch(gb, 1)
    rule = memory.gb(memory.rule_of_thumb(N))
    assert cell(DUTCH, "onderdeel", ("vuistregel (24 bytes)",), "GB") == dutch(rule, 1)


@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16", "int8"])
def test_one_billion_weights_in_each_format(name):
    gb = memory.gb(memory.weight_memory(N, name))
    assert cell(MEMORY, "GB for 1B params", (name,), "GB for 1B params") == english(gb, 2)
    assert cell(PI, "GB for 1e9 values", (name,), "GB for 1e9 values") == english(gb, 3)
    assert cell(DUTCH, "GB voor 1 miljard gewichten", (name.upper(),), "GB voor 1 miljard gewichten") == dutch(gb, 1)
    assert cell(DUTCH, "bytes per gewicht", (name.upper(),), "bytes per gewicht") == f"{memory.BYTES_PER_DTYPE[name]:g}"


def test_mixed_precision_keeps_16_bytes_of_model_states():
    for precision in ("fp32", "bf16-mixed"):
        b = memory.training_memory(N, precision, "adam", batch=1, seq_len=2048)
        shown = cell(DUTCH, "modeltoestand: bytes per parameter", (precision,), "modeltoestand: bytes per parameter")
        assert shown == dutch(b.model_states / N, 0) == "16"
        assert cell(DUTCH, "activaties (GB)", (precision,), "activaties (GB)") == dutch(memory.gb(b.activations), 1)
    mixed = memory.training_memory(N, "bf16-mixed", "adam", batch=1, seq_len=2048)
    assert cell(MEMORY, "rule of thumb GB", ("1B",), "activations GB") == english(memory.gb(mixed.activations), 1)


# -- Beyond one GPU -----------------------------------------------------------------------------


@pytest.mark.parametrize("billions", [1, 7, 50, 100, 175])
def test_models_beyond_one_gpu(billions):
    n, english_label, dutch_label = billions * 1e9, f"{billions}B", f"{billions} miljard"
    need = memory.training_memory(n, "bf16-mixed", "adam", batch=1, seq_len=2048).total
    total = memory.gb(need)
    gpus = memory.gpus_to_train(n, memory.GPUS[-1], activation_checkpointing=True)
    dutch_table = "geheugen op één GPU (GB)"
    assert cell(DUTCH, dutch_table, (dutch_label,), dutch_table) == dutch(total, 0)
    assert cell(DUTCH, dutch_table, (dutch_label,), "GPU's van 80 GiB (ZeRO-3, checkpointing)") == str(gpus)
    if billions in (50, 100):  # the notes' "500 times": against training 1B, and against 1B's FP32 weights
        one = memory.training_memory(N, "bf16-mixed", "adam", batch=1, seq_len=2048).total
        times = [need / one, need / memory.weight_memory(N, "fp32")]
        shown = [cell(MEMORY, "GB to train", (english_label, "course"), c)
                 for c in ("x training 1B", "x 1B's fp32 weights")]
        assert shown == [f"{english(t, 0)}x" for t in times]
        shown = [cell(DUTCH, dutch_table, (dutch_label,), c)
                 for c in ("x training 1 miljard", "x FP32-gewichten 1 miljard")]
        assert shown == [dutch(t, 0) for t in times]
    if billions == 100:  # the English chapter shows 100B in its table of the notes' claims
        assert cell(MEMORY, "GB to train", ("100B", "course"), "GB to train") == english(total, 0)
    else:
        assert cell(MEMORY, "rule of thumb GB", (english_label,), "total GB") == english(total, 0)
        shown = cell(MEMORY, "activation checkpointing on", (english_label,), "GPUs of 80 GiB")
        assert shown == ("1 (fits)" if gpus == 1 else str(gpus))


# -- π in each format ---------------------------------------------------------------------------


def test_pi_in_each_format_is_the_same_table_in_both_editions():
    names = ["fp32", "fp16", "bf16", "int8"]
    library = {r[0]: r for r in compare_formats("pi", names).table().rows}
    for name in names:
        columns = [("stored value (exact)", "opgeslagen waarde (exact)"), ("bits (hex)", "bits (hex)"),
                   ("bits", "bits"), ("abs error", "abs. fout"), ("rel error", "rel. fout")]
        for position, (english_column, dutch_column) in enumerate(columns, start=1):
            value = library[name][position]
            assert cell(PI, "π in 7 formats", (name,), english_column) == value, (name, english_column)
            assert cell(DUTCH, "π in 4 formaten", (name,), dutch_column) == value, (name, dutch_column)
    assert library["fp16"][1] == "3.140625" and library["int8"][1] == "3"  # the lecture notes' values


@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16"])
def test_pi_as_python_prints_it(name):
    stored = formats.round_to_format(math.pi, name)
    assert cell(PI, "course_lib against torch's casts", (name,), "course_lib") == repr(stored)
    line = next(line for line in _printed(DUTCH) if line.startswith(f"{name.upper()}: "))
    assert line.split()[1] == repr(stored)
    assert repr(formats.round_to_format(math.pi, "fp32")) == "3.1415927410125732"


# -- What the Dutch edition adds: mixed precision's 6 bytes of weights, INT8 with a scale, exercises ---


def test_mixed_precision_keeps_a_bf16_copy_and_an_fp32_master_copy():
    fp32, mixed = (memory.training_memory(N, p, "adam", batch=1, seq_len=2048) for p in ("fp32", "bf16-mixed"))
    column = "gewichten + masterkopie"
    assert cell(DUTCH, column, ("fp32",), column) == "4 + 0"
    assert cell(DUTCH, column, ("bf16-mixed",), column) == "2 + 4"  # 6 bytes of weights, not 4
    assert (mixed.weights + mixed.master_weights) / N == 6
    shrink = 1 - mixed.activations / fp32.activations
    line = (f"activaties: {dutch(memory.gb(fp32.activations), 1)} GB -> {dutch(memory.gb(mixed.activations), 1)} GB, "
            f"{dutch(-100 * shrink, 1)} %")
    assert any(printed.startswith(line) for printed in _printed(DUTCH)), line
    assert 0.40 < shrink < 0.5  # not the half the edition once claimed


def test_pi_in_int8_with_an_absmax_scale_is_what_the_library_computes():
    import torch

    from course_lib.compression import quant

    block = torch.tensor([0.8, -4.5, math.pi, 1.5, -0.3])
    expected = {
        "afronden (cast)": formats.round_to_format(math.pi, "int8"),
        "absmax, π alleen": quant.quantize_dequantize(torch.tensor([math.pi]), "int8-tensor")[0].item(),
        "absmax, in het blok": quant.quantize_dequantize(block, "int8-tensor")[2].item(),
    }
    for label, value in expected.items():
        assert cell(DUTCH, "π komt terug als", (label,), "π komt terug als") == f"{value:.6f}", label
        assert cell(DUTCH, "π komt terug als", (label,), "fout") == f"{abs(value - math.pi):.2e}", label


def test_pi_to_19_decimals():
    assert "π   : 3.1415926535897932384 (19 decimalen)" in _printed(DUTCH)
    assert "3.1415926535897932384".startswith(f"{math.pi:.15f}")


@pytest.mark.parametrize("name, right, wrong", [
    ("q1", 40 * 10.0 / 127, {3.0: "zonder schaalfactor", 39 * 10.0 / 127: "afkapt tot 39",
                             40.0: "vergeet die met de schaal", 40 * 10.0 / 128: "door 128 deelt"}),
    ("q2", 7e9 * (2 + 4) / 1e9, {14.0: "vergeet", 28.0: "alleen de FP32-masterkopie", 112.0: "de hele modeltoestand"}),
    ("q3", 7e9 * (2 + 4 + 2 + 8) / 1e9, {56.0: "alles halveert", 84.0: "masterkopie vergeet", 42.0: "alleen de gewichten"}),
])  # fmt: skip
def test_dutch_exercises_accept_the_answer_and_name_the_misconception(name, right, wrong):
    from course_lib.chapters.nl import quiz

    question = getattr(quiz, name)
    ok, text = question.feedback(right)
    assert ok and text.startswith("Goed: "), text
    for answer, misconception in wrong.items():
        ok, text = question.feedback(answer)
        assert not ok and "Dat krijg je als je" in text and misconception in text and "Tip: " in text, (answer, text)
    ok, text = question.feedback(right * 1.3)  # wrong for no recorded reason: the hint only
    assert not ok and "te hoog" in text and "Dat krijg je" not in text
    assert question.feedback(None) == (False, f"Nog niet beantwoord. {question.question}")
    assert "geen getal" in question.feedback("drie")[1]


def test_the_dutch_edition_uses_one_word_per_idea():
    avoided = {"floating point": "drijvendekommagetal", "floating-point": "drijvendekommagetal",
               "optimalisatie-states": "optimizer-states", "consumentenkaart": "videokaart voor consumenten",
               "alleen elk getal is": "alleen is elk getal", "houdt de acht": "behoudt de acht",
               "dat vergelijkt twee": "zo vergelijk je"}  # fmt: skip
    for c in nbformat.read(DUTCH, as_version=4).cells:
        text = " ".join(c.source.lower().split())  # one line: phrases that wrap are found too
        for word, instead in avoided.items():
            assert not re.search(rf"\b{re.escape(word)}", text), f"Dutch cell {c.id}: write {instead!r}, not {word!r}"
    assert "drijvendekommagetal" in " ".join(c.source for c in nbformat.read(DUTCH, as_version=4).cells)
