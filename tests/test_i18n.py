"""Tests for course_lib.numbers.i18n: the language tables, text(), the number helpers and the Dutch glossary."""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest

from course_lib.numbers import i18n
from course_lib.numbers.i18n import EN, GLOSSARY, LANGUAGES, NL, check_language, decimal, localise_number, text
from course_lib.planner.texts import PLAN_NL

ROOT = Path(__file__).resolve().parents[1]
#: Keys whose Dutch text is rightly the same as the English one (the words are Dutch too).
SAME_IN_DUTCH = {
    "bx_title_int",  # "bit 7 (2^7)"
    "bx_legend_exponent",  # "exponent (5 bits, bias 15)"
    "bx_exponent_normal",  # "exponent 10000 = 16 − bias 15 → 2^1"
    "bx_row_bits",  # "bits"
    "cmp_hex",  # "bits (hex)"
    "cmp_bits",  # "bits"
}
BAD_LANGUAGE = "unknown language 'fr'; valid values: en, nl"


def _fields(template: str) -> list[tuple[str, str | None, str | None]]:
    """(name, format spec, conversion) of each placeholder, as str.format reads them."""
    return [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template) if name is not None]


def test_languages_and_tables():
    assert LANGUAGES == ("en", "nl")
    assert set(EN) == set(NL)
    assert list(EN) == list(NL)  # the same order too, so the two tables read side by side


@pytest.mark.parametrize("key", sorted(EN))
def test_dutch_texts_are_written_and_translated(key):
    assert isinstance(NL[key], str) and NL[key].strip(), key
    assert NL[key] == NL[key].strip() and "  " not in NL[key], key
    if key in SAME_IN_DUTCH:
        assert NL[key] == EN[key], f"{key} is listed as the same in Dutch but differs: drop it from SAME_IN_DUTCH"
    else:
        assert NL[key] != EN[key], f"{key} is not translated: {NL[key]!r}"


@pytest.mark.parametrize("key", sorted(EN))
def test_placeholders_are_the_same_in_every_language(key):
    names = {language: sorted(name for name, _, _ in _fields(table[key])) for language, table in (("en", EN), ("nl", NL))}
    assert names["en"] == names["nl"], key
    for table in (EN, NL):
        for name, spec, conversion in _fields(table[key]):
            # Plain {name} only: the JavaScript fills them too, and knows no format specs or conversions.
            assert re.fullmatch(r"[a-z_]+", name) and not spec and conversion is None, (key, name)
            if name in table:  # a placeholder naming another entry is filled with it: one level only
                assert not _fields(table[name]), (key, name)


def test_text_fills_values_and_shared_entries():
    assert text("mem_what_batch", "nl") == "de batchgrootte" and text("mem_what_batch") == "batch size"
    assert text("mem_err_gpus", "nl", value="0") == "het aantal GPU's moet een geheel getal van minstens 1 zijn, niet 0"
    assert text("bx_err_empty") == "type a value first; try pi, 1e-8, -0, inf, nan or a hex pattern like 0x4248"
    assert text("bx_err_empty", "nl") == "typ eerst een waarde; " + NL["bx_err_hint"]
    assert text("bx_err_unreadable", "nl", text="'pie'").startswith("'pie' is niet als getal te lezen; probeer pi")
    assert text("mem_err_max", "nl", what="de batchgrootte", limit="1.000", value="2000") == (
        "de batchgrootte mag hoogstens 1.000 zijn, niet 2000; staat er een cijfer te veel?"
    )
    with pytest.raises(KeyError, match="text needs a value for {limit}"):
        text("mem_err_max", "nl", what="de batchgrootte", value="2000")
    with pytest.raises(KeyError, match="no text 'mem_nonsense'"):
        text("mem_nonsense")
    assert i18n.texts("mem_what_seq", "nl") == {"mem_what_seq_len": "de sequentielengte"}


def test_decimal_by_hand():
    assert decimal(24.5, 1, "nl") == "24,5"
    assert decimal(24.5, 1, "en") == decimal(24.5, 1) == "24.5"
    assert decimal(1234567.891, 2, "nl") == "1.234.567,89"
    assert decimal(1234567.891, 2, "en") == "1,234,567.89"
    assert decimal(1e6, 0, "nl") == "1.000.000"
    assert decimal(-0.125, 3, "nl") == "-0,125"
    assert decimal(2.5, 0, "nl") == "2"  # Python's rounding: half to even
    assert localise_number("3.140625", "nl") == "3,140625"
    assert localise_number("1,234.5", "nl") == "1.234,5"
    assert localise_number("1,234.5", "en") == "1,234.5"
    for digits in (-1, 1.5, True):
        with pytest.raises(ValueError, match="digits must be a whole number >= 0"):
            decimal(1.0, digits, "nl")


def test_a_bad_language_names_the_valid_ones():
    assert check_language("nl") == "nl" and check_language(" NL ") == "nl"
    for call in (lambda: check_language("fr"), lambda: text("mem_what_batch", "fr"), lambda: decimal(1.0, 1, "fr"),
                 lambda: localise_number("1.5", "fr"), lambda: i18n.texts("bx_", "fr")):  # fmt: skip
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == BAD_LANGUAGE
    with pytest.raises(ValueError, match="valid values: en, nl"):
        check_language(None)


REQUIRED_TERMS = {
    "quantization": "kwantisatie", "exponent": "exponent", "mantissa / fraction": "mantisse / fractie", "bit": "bit",
    "byte": "byte", "memory": "geheugen", "weights": "gewichten", "gradients": "gradi\u00ebnten",
    "optimizer states": "optimizer-states", "master weights": "masterkopie", "activations": "activaties", "precision": "precisie",
    "range": "bereik", "rounding": "afronden", "scale factor": "schaalfactor", "sign": "teken",
    "subnormal": "subnormaal", "overflow": "overflow", "quantize to INT8": "kwantiseren naar INT8", "BF16": "BF16",
    "FP16": "FP16", "FP32": "FP32", "distributed training": "gedistribueerd trainen",
    "floating-point number": "drijvendekommagetal", "quantization-aware training": "kwantisatiebewuste training",
    "CUDA": "CUDA", "mixed precision": "mixed precision",
}  # fmt: skip
#: Dutch words the edition does not use, and the word it uses instead (one word per idea).
NOT_DUTCH_TERMS = {
    "floating-point": "drijvendekommagetal", "floating point": "drijvendekommagetal",
    "zwevendekomma": "drijvendekommagetal", "optimalisatie-state": "optimizer-states",
    "consumentenkaart": "videokaart voor consumenten",
}  # fmt: skip


def test_glossary_is_complete_and_well_formed():
    assert len(GLOSSARY) >= len(REQUIRED_TERMS)
    for english, dutch in REQUIRED_TERMS.items():
        assert GLOSSARY[english][0] == dutch, english
    dutch_terms = [term for term, _ in GLOSSARY.values()]
    assert len(set(dutch_terms)) == len(dutch_terms)
    for english, entry in GLOSSARY.items():
        assert isinstance(entry, tuple) and len(entry) == 2, english
        term, meaning = entry
        assert english.strip() == english and term.strip() == term and term, english
        # One sentence on one line, starting with a capital and ending with a full stop.
        assert "\n" not in meaning and meaning[0].isupper() and meaning.endswith("."), english
        assert meaning.count(". ") == 0 and len(meaning) < 220, english
    for name in ("BF16", "FP16", "FP32"):  # says what the format is: its bits
        assert "bits" in GLOSSARY[name][1] and "mantissebits" in GLOSSARY[name][1], name


def test_the_texts_use_the_glossary_terms():
    """The Dutch texts of i18n and of the training planner (course_lib.planner.texts) use the glossary's terms."""
    assert GLOSSARY["weights"][0] in NL["mem_note_stage3"]
    assert PLAN_NL["plan_mem_parameters"] == f"parameters ({GLOSSARY['weights'][0]})"
    assert PLAN_NL["plan_mem_gradients"] == GLOSSARY["gradients"][0]
    assert PLAN_NL["plan_mem_optimizer"] == f"{GLOSSARY['optimizer states'][0]} en {GLOSSARY['master weights'][0]}"
    assert PLAN_NL["plan_mem_activations"] == GLOSSARY["activations"][0]
    assert PLAN_NL["plan_label_precision"].lower() == GLOSSARY["precision"][0]
    assert NL["bx_legend_sign"] == GLOSSARY["sign"][0]
    assert NL["bx_legend_mantissa"].startswith("mantisse ")
    assert NL["bx_row_range"] == GLOSSARY["range"][0]
    assert NL["bx_saturate"] == GLOSSARY["saturate"][0]
    assert NL["bx_subnormal"].startswith(GLOSSARY["subnormal"][0])


def test_every_key_is_used_and_every_used_key_exists():
    numbers = ROOT / "course_lib" / "numbers"
    js = (numbers / "assets" / "bit_explorer.js").read_text()
    code = "".join((numbers / name).read_text() for name in ("bit_explorer.py", "memory.py"))
    code += (ROOT / "course_lib" / "__main__.py").read_text()  # the memory command names its inputs with mem_what_
    i18n_code = (numbers / "i18n.py").read_text().partition("def check_language")[2]  # not the tables
    sources = js + code + i18n_code
    # Quoted keys; a prefix such as "bx_err_" (ending in "_") selects a group and is no key.
    used = set(re.findall(r"[\"']((?:bx|mem|cmp)_\w*[a-z0-9]|decimal_point|thousands_separator)[\"']", sources))
    assert used <= set(EN), sorted(used - set(EN))
    assert set(re.findall(r'fail\("(\w+)"', js)) <= {k for k in EN if k.startswith("bx_err_")}
    placeholders = {name for template in EN.values() for name, _, _ in _fields(template)}
    by_prefix = {k for k in EN if k.startswith("bx_err_")}  # sent whole to the JavaScript
    unused = set(EN) - used - placeholders - by_prefix
    assert not unused, f"texts nothing uses: {sorted(unused)}"


def test_dutch_texts_use_one_word_per_idea():
    """The Dutch tables and glossary say 'drijvendekommagetal' and 'optimizer-states', never a variant."""
    dutch = [*NL.values(), *(f"{term} {meaning}" for term, meaning in GLOSSARY.values())]
    for text_ in dutch:
        for avoided, used in NOT_DUTCH_TERMS.items():
            lowered = text_.lower().replace("brain floating point", "")  # BF16's name stays English
            assert avoided not in lowered, f"{text_!r}: write {used!r}, not {avoided!r}"
    assert "drijvendekommagetal" in GLOSSARY["exponent"][1]
