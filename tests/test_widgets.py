"""Tests for the memory calculator widget's logic (the browser tests drive it in JupyterLab)."""

import html

import pytest

from course_lib.numbers import i18n, memory
from course_lib.numbers.widgets import MemoryCalculator, memory_calculator


def test_calculator_shows_breakdown_and_verdicts():
    calc = memory_calculator(params="1B", precision="fp32")
    html = calc.result.value
    assert "1B parameters, fp32, adam" in html
    assert html.count("<li class='course-verdict") == len(memory.GPUS)
    expected = memory.training_memory(1e9, "fp32", "adam", batch=1, seq_len=2048)
    assert f"{memory.gb(expected.total):,.1f} GB per GPU" in html


def test_changing_an_input_updates_the_verdict():
    calc = memory_calculator(params="7B", precision="bf16-mixed")
    assert "fits</b> on 80 GiB" not in calc.result.value
    calc.gpus.value = 8
    calc.zero.value = 3
    assert "8 GPU(s), ZeRO stage 3" in calc.result.value
    assert "fits</b> on 80 GiB" in calc.result.value


def test_preset_disables_the_parameter_box():
    calc = memory_calculator()
    calc.model.value = "gpt2-124M"
    assert calc.params.disabled
    assert "0.124B parameters" in calc.result.value


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("params", "7 billion", "write a positive number such as 7e9"),
        ("batch", 0, "batch size must be a whole number >= 1, got 0"),
        ("seq_len", -2, "sequence length must be a whole number >= 1, got -2"),
        ("params", "0.5", "number of parameters must be a whole number >= 1, got 0.5"),
        ("params", "1e30", "number of parameters must be at most 1,000,000,000,000,000, got 1e+30"),
        ("seq_len", 10**11, "sequence length must be at most 100,000,000, got 100000000000"),
        ("gpus", 0, "number of GPUs must be a whole number"),
        ("zero", 7, "ZeRO stage must be one of 0, 1, 2, 3"),
    ],
)
def test_bad_input_shows_a_message_in_the_widget(field, value, message):
    calc = memory_calculator()
    getattr(calc, field).value = value
    assert "course-error" in calc.result.value
    assert html.escape(message) in calc.result.value
    # Correcting the input brings the table back.
    getattr(calc, field).value = {"params": "1B", "batch": 1, "seq_len": 128, "gpus": 1, "zero": 0}[field]
    assert "course-error" not in calc.result.value


# ------------------------------------------------------------------------------------------------
# Language: English by default, Dutch on request (course_lib.numbers.i18n)
# ------------------------------------------------------------------------------------------------

ENGLISH_LABELS = ["Model", "Parameters", "Precision", "Optimizer", "Batch per GPU", "Sequence length", "GPUs",
                  "ZeRO stage (0-3)", "Activation checkpointing"]  # fmt: skip
DUTCH_LABELS = ["Model", "Aantal parameters", "Precisie", "Optimalisatiemethode", "Batchgrootte per GPU",
                "Sequentielengte", "Aantal GPU's", "ZeRO-stage (0-3)", "Activatie-checkpointing"]  # fmt: skip


def _labels(calc) -> list[str]:
    return [child.description for child in calc.children[1:-1]]


def _messages(html: str) -> str:
    return html.replace("&#x27;", "'")


def test_english_is_the_default_and_unchanged():
    calc = memory_calculator(params="1B", precision="fp32")
    assert calc.language == "en"
    assert _labels(calc) == ENGLISH_LABELS
    assert calc.children[0].value == "<b>Will it fit?</b> Training memory per GPU"
    assert calc.model.label == "custom" and calc.model.value == "custom"
    html = calc.result.value
    assert "1B parameters, fp32, adam, batch 1 x 2048 tokens, 1 GPU(s), ZeRO stage 0: 34.9 GB per GPU" in html
    assert "<th>component</th><th>GB per GPU</th><th>bytes/param</th><th>share</th>" in html
    assert "<td>master weights</td><td style='text-align:right'>0.00</td>" in html
    assert "<b style='color:#b00020'>does not fit</b> on 16 GiB (T4, V100-16GB): 203% of its memory" in html
    assert "<b style='color:#1b7f3b'>fits</b> on 80 GiB (A100-80GB, H100): 41% of its memory" in html


def test_dutch_calculator_for_1b_fp32_adam():
    calc = memory_calculator(params="1B", precision="fp32", optimizer="adam", language="nl")
    assert _labels(calc) == DUTCH_LABELS
    assert calc.children[0].value == "<b>Past het?</b> Trainingsgeheugen per GPU"
    assert calc.model.label == "zelf invullen" and calc.model.value == "custom"
    expected = memory.training_memory(1e9, "fp32", "adam", batch=1, seq_len=2048)
    total = i18n.decimal(memory.gb(expected.total), 1, "nl")
    assert total == "34,9"
    html = _messages(calc.result.value)
    assert f"1 mld. parameters, fp32, adam, batch 1 x 2048 tokens, 1 GPU('s), ZeRO-stage 0: {total} GB per GPU" in html
    assert "<th>onderdeel</th><th>GB per GPU</th><th>bytes/parameter</th><th>aandeel</th>" in html
    names = ["gewichten", "gradiënten", "masterkopie van de gewichten", "optimizer-states", "activaties",
             "tijdelijke waarden", "totaal"]  # fmt: skip
    positions = [html.index(f"<td>{name}</td>") for name in names]
    assert positions == sorted(positions)
    # Numbers in the table with a decimal comma: 4 bytes of FP32 weights per parameter.
    assert "<td>gewichten</td><td style='text-align:right'>4,00</td><td style='text-align:right'>4,00</td>" in html
    assert "<b style='color:#b00020'>past niet</b> in 16 GiB (T4, V100-16GB): 203% van het geheugen" in html
    assert "<b style='color:#1b7f3b'>past</b> in 80 GiB (A100-80GB, H100): 41% van het geheugen" in html
    assert html.count("<li class='course-verdict") == len(memory.GPUS)
    shown = html.replace("course-verdict fits", "")  # a CSS class, not a word on the page
    for english in ("fits", "weights", "gradients", "component", "share", "of its memory", "GPU(s)", "4.00"):
        assert english not in shown, english


def test_dutch_notes_and_changes():
    calc = memory_calculator(params="1B", language="nl")
    calc.optimizer.value = "adam-8bit"
    calc.gpus.value = 8
    calc.zero.value = 3
    html = _messages(calc.result.value)
    assert "8 GPU('s), ZeRO-stage 3" in html
    for key in ("calc_note_stage3", "calc_note_buckets", "calc_note_adam8bit"):
        assert i18n.text(key, "nl") in html
    # The English notes are memory's own, word for word, so the Dutch ones replace every one of them.
    notes = memory.training_memory(1e9, "fp32", "adam-8bit", gpus=8, zero_stage=3).notes
    assert notes == [i18n.text(k, "en") for k in ("calc_note_stage3", "calc_note_buckets", "calc_note_adam8bit")]
    calc.model.value = "gpt2-124M"
    assert "0,124 mld. parameters" in calc.result.value


def test_dutch_parameter_box_reads_a_decimal_comma():
    calc = memory_calculator(params="1,3B", language="nl")
    assert "1,3 mld. parameters" in calc.result.value
    calc.params.value = "1.3B"
    assert "1,3 mld. parameters" in calc.result.value
    calc.params.value = "1.000,5"  # a point and a comma: ambiguous, refused rather than guessed
    assert "course-error" in calc.result.value
    assert "&#x27;1.000,5&#x27; is niet te lezen als aantal parameters" in calc.result.value


DUTCH_ERRORS = [
    ("params", "7 miljard", "'7 miljard' is niet te lezen als aantal parameters; schrijf een positief getal zoals 7e9"),
    ("params", "-5", "het aantal parameters moet een positief getal zijn, niet -5,0"),
    ("batch", 0, "de batchgrootte moet een geheel getal van minstens 1 zijn, niet 0"),
    ("seq_len", -2, "de sequentielengte moet een geheel getal van minstens 1 zijn, niet -2"),
    ("params", "0,5", "het aantal parameters moet een geheel getal van minstens 1 zijn, niet 0,5"),
    ("params", "1e30", "het aantal parameters mag hoogstens 1.000.000.000.000.000 zijn, niet 1e+30"),
    ("gpus", 0, "het aantal GPU's moet een geheel getal van minstens 1 zijn, niet 0"),
    ("zero", 7, "de ZeRO-stage moet een van 0, 1, 2, 3 zijn, niet 7"),
]


@pytest.mark.parametrize("field, value, message", DUTCH_ERRORS)
def test_bad_input_shows_a_dutch_message(field, value, message):
    calc = memory_calculator(language="nl")
    getattr(calc, field).value = value
    assert "<b>Berekening niet mogelijk:</b>" in calc.result.value
    assert message in _messages(calc.result.value)
    getattr(calc, field).value = {"params": "1B", "batch": 1, "seq_len": 128, "gpus": 1, "zero": 0}[field]
    assert "course-error" not in calc.result.value


@pytest.mark.parametrize(
    "field, value",
    [("params", "7 billion"), ("params", "-5"), ("params", "nan"), ("params", "0"), ("batch", 0), ("seq_len", -2),
     ("gpus", 0), ("zero", 7), ("zero", -1), ("params", "0.5"), ("params", "1e30"), ("seq_len", 10**11)],
)  # fmt: skip
def test_english_messages_are_memorys_own(field, value):
    """The calculator checks its inputs itself (to say it in Dutch); in English it says what course_lib.numbers.memory says."""
    calc = memory_calculator()
    getattr(calc, field).value = value
    inputs = {"batch": 1, "seq_len": 2048, "gpus": 1, "zero_stage": 0}
    if field != "params":
        inputs["zero_stage" if field == "zero" else field] = value
    with pytest.raises(ValueError) as err:
        n = memory.parse_count(value) if field == "params" else 1e9
        memory.training_memory(n, "fp32", "adam", **inputs)
    assert calc.result.value.endswith(f"<b>Cannot compute:</b> {html.escape(str(err.value))}</div>")


def test_a_bad_language_is_a_clear_value_error():
    with pytest.raises(ValueError, match=r"^unknown language 'fr'; valid values: en, nl$"):
        memory_calculator(language="fr")
    with pytest.raises(TypeError):
        MemoryCalculator("1B", "fp32", "adam", "nl")  # language is a keyword


# ------------------------------------------------------------------------------------------------
# The calculator takes what the command line takes
# ------------------------------------------------------------------------------------------------

def test_precision_and_optimizer_names_in_any_case_as_on_the_command_line():
    calc = memory_calculator(params="7B", precision="BF16-mixed", optimizer=" ADAM-8bit ")
    assert (calc.precision.value, calc.optimizer.value) == ("bf16-mixed", "adam-8bit")
    assert "7B parameters, bf16-mixed, adam-8bit" in calc.result.value


@pytest.mark.parametrize("kwargs, valid", [
    ({"precision": "bf16-mix"}, "valid values: fp32, bf16-mixed, fp16-mixed, bf16"),
    ({"optimizer": "adamw"}, "valid values: adam, adam-8bit, sgd-momentum, sgd"),
])  # fmt: skip
def test_an_unknown_precision_or_optimizer_lists_the_valid_ones(kwargs, valid):
    with pytest.raises(ValueError, match=f"unknown (precision|optimizer) .*; {valid}$"):
        memory_calculator(**kwargs)


def test_a_preset_caps_the_sequence_at_its_context():
    calc = memory_calculator()
    calc.model.value = "gpt2-124M"  # 1024 positions: the 2048 of the box are lowered to them
    assert calc.seq_len.value == 1024
    assert "batch 1 x 1024 tokens" in calc.result.value and "course-error" not in calc.result.value
    calc.seq_len.value = 4096
    assert ("sequence length 4096 is longer than the model&#x27;s context of 1024 positions; use 1024 tokens or fewer"
            in calc.result.value)  # fmt: skip
    calc.model.value = "custom"  # a bare count's shape is a guess: no limit
    assert "course-error" not in calc.result.value and "batch 1 x 4096 tokens" in calc.result.value
    dutch = memory_calculator(language="nl")
    dutch.model.value = "gpt2-124M"
    dutch.seq_len.value = 2048
    assert "de sequentielengte 2048 is langer dan de context van het model (1024 posities)" in dutch.result.value


def test_zero_on_one_gpu_is_noted_in_both_languages():
    for language in ("en", "nl"):
        calc = memory_calculator(language=language)
        calc.zero.value = 3
        assert html.escape(i18n.text("calc_note_zero_one_gpu", language)) in calc.result.value


def test_the_calculator_carries_its_classes_for_the_book():
    """The book's course_widgets.js writes the calculator's note in its language."""
    english = set(memory_calculator()._dom_classes)
    assert english >= {"course-memory-calculator", "course-lang-en"}
    dutch = set(memory_calculator(language="nl")._dom_classes)
    assert dutch >= {"course-memory-calculator", "course-lang-nl"}
