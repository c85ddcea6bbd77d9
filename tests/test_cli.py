"""Tests for ``python -m course_lib memory``: the table it prints and its messages on bad input."""

import subprocess
import sys

import pytest

from course_lib.__main__ import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "course_lib", *args], capture_output=True, text=True)


def test_memory_command_prints_the_breakdown(capsys):
    argv = ["memory", "--params", "7e9", "--precision", "bf16-mixed", "--optimizer", "adam", "--gpus", "8", "--zero", "3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "8 GPU(s), ZeRO stage 3" in out
    lines = {line.split()[0] + (" " + line.split()[1] if line.startswith(("master", "optimizer")) else ""): line
             for line in out.splitlines() if line.strip()}
    # 7e9 params, stage 3 over 8 GPUs: 2 bytes of bf16 weights / 8 = 1.75 GB; Adam states 8 bytes / 8 = 7 GB.
    assert "1.75" in lines["weights"] and "0.25" in lines["weights"]
    assert "7.00" in lines["optimizer states"]
    assert "80 GiB" in out and "Rule of thumb" in out


def test_memory_command_with_a_preset(capsys):
    assert main(["memory", "--preset", "gpt2-124M", "--seq-len", "1024"]) == 0
    assert "0.124B parameters (12 layers, hidden 768, 12 heads)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--params=-7e9"], "number of parameters must be a positive number"),
        (["--params", "seven"], "write a positive number such as 7e9"),
        (["--precision", "fp64"], "valid values: fp32, bf16-mixed, fp16-mixed, bf16"),
        (["--optimizer", "adamm"], "valid values: adam, adam-8bit, sgd-momentum, sgd"),
        (["--zero", "4"], "ZeRO stage must be one of 0, 1, 2, 3"),
        (["--gpus", "0"], "number of GPUs must be a whole number >= 1"),
        (["--batch", "-1"], "batch size must be a whole number >= 1"),
        (["--seq-len", "abc"], "sequence length must be a whole number >= 1"),
        (["--preset", "gpt5"], "valid values: gpt2-124M"),
    ],
)
def test_bad_input_gives_a_message_not_a_traceback(args, message):
    out = run("memory", *args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
