"""Tests for the memory calculator widget's logic (the browser tests drive it in JupyterLab)."""

import pytest

from course_lib import memory
from course_lib.widgets import memory_calculator


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
        ("batch", 0, "batch size must be a positive number"),
        ("seq_len", -2, "sequence length must be a positive number"),
        ("gpus", 0, "number of GPUs must be a whole number"),
        ("zero", 7, "ZeRO stage must be one of 0, 1, 2, 3"),
    ],
)
def test_bad_input_shows_a_message_in_the_widget(field, value, message):
    calc = memory_calculator()
    getattr(calc, field).value = value
    assert "course-error" in calc.result.value
    assert message in calc.result.value
    # Correcting the input brings the table back.
    getattr(calc, field).value = {"params": "1B", "batch": 1, "seq_len": 128, "gpus": 1, "zero": 0}[field]
    assert "course-error" not in calc.result.value
