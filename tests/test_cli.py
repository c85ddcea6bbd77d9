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
def test_bad_input_gives_a_message_not_a_traceback(capsys, args, message):
    """Run here (an exception would fail the test where the command prints a traceback);
    ``python -m course_lib`` itself is run below, on one bad input."""
    status, _, err = memory_in_process(capsys, *args)
    assert status == 2
    assert message in err
    assert "Traceback" not in err


# ------------------------------------------------------------------------------------------------
# memory at the edges: refused in one line naming the flag, or noted; the library says the same
# ------------------------------------------------------------------------------------------------

from course_lib.numbers import memory


def memory_in_process(capsys, *args):
    """(exit status, stdout, stderr) of ``python -m course_lib memory ARGS``, run here (argparse exits)."""
    try:
        status = main(["memory", *args])
    except SystemExit as stop:
        status = stop.code
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--params", "1e30"], "argument --params: number of parameters must be at most 1,000,000,000,000,000"),
        (["--params", "0.5"], "argument --params: number of parameters must be a whole number >= 1, got 0.5"),
        (["--params", "-7e9"], "argument --params: number of parameters must be a positive number"),
        (["--params", "-7B"], "argument --params: number of parameters must be a positive number"),
        (["--seq-len", "1e11"], "argument --seq-len: sequence length must be at most 100,000,000, got 100000000000"),
        (["--seq-len", "100000000000"], "argument --seq-len: sequence length must be at most 100,000,000"),
        (["--batch", "1.5"], "argument --batch: batch size must be a whole number >= 1, got 1.5"),
        (["--preset", "gpt2-124M", "--seq-len", "4096"],
         ("argument --seq-len: sequence length 4096 is longer than the model's context of 1024 positions; "
          "use 1024 tokens or fewer with --preset gpt2-124M")),
        (["--gpus", "2", "--gpus", "4"], "argument --gpus: given twice; give each flag once"),
        (["--params", "7B", "--params", "7B"], "argument --params: given twice"),
        (["--checkpointing", "--checkpointing"], "argument --checkpointing: given twice"),
    ],
)  # fmt: skip
def test_memory_edges_are_refused_in_one_line_naming_the_flag(capsys, args, message):
    status, out, err = memory_in_process(capsys, *args)
    assert status == 2 and out == ""
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], err
    assert errors[0].startswith("python -m course_lib memory: error: argument --")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args, call",
    [
        (["--params", "0.5"], lambda: memory.training_memory(0.5)),
        (["--params", "1e30"], lambda: memory.shape_for_params(1e30)),
        (["--batch", "1.5"], lambda: memory.training_memory(1e9, batch=1.5)),
        (["--seq-len", "100000000000"], lambda: memory.training_memory(1e9, seq_len=10**11)),
        (["--preset", "gpt2-124M", "--seq-len", "4096"],
         lambda: memory.training_memory(1e9, seq_len=4096, shape=memory.MODEL_PRESETS["gpt2-124M"])),
    ],
)  # fmt: skip
def test_the_command_says_what_the_library_says(capsys, args, call):
    with pytest.raises(ValueError) as library:
        call()
    _, _, err = memory_in_process(capsys, *args)
    assert str(library.value) in err


def test_zero_on_one_gpu_is_noted_not_refused(capsys):
    status, out, _ = memory_in_process(capsys, "--zero", "3")
    assert status == 0
    assert "1 GPU(s), ZeRO stage 3" in out
    assert "Note: ZeRO shards across GPUs: on one GPU it saves nothing, so these are stage 0's figures" in out
    assert "Note: ZeRO" not in memory_in_process(capsys, "--zero", "3", "--gpus", "2")[1]


def test_a_preset_shorter_than_2048_positions_takes_its_own_context_by_default(capsys):
    status, out, _ = memory_in_process(capsys, "--preset", "gpt2-124M")
    assert status == 0 and "batch 1 x 1024 tokens" in out
    assert "batch 1 x 2048 tokens" in memory_in_process(capsys, "--preset", "gpt3-1.3B")[1]
    assert "batch 1 x 2048 tokens" in memory_in_process(capsys, "--params", "7e9")[1]


def test_a_negative_count_is_refused_as_negative_not_as_a_missing_value():
    """argparse alone reads ``-7e9`` as a flag and says 'expected one argument'; the command runs in its own process."""
    out = run("memory", "--params", "-7e9")
    assert out.returncode == 2
    assert "argument --params: number of parameters must be a positive number" in out.stderr
    assert "expected one argument" not in out.stderr and "Traceback" not in out.stderr


def test_grade_and_learner_copies_are_commands(tmp_path, capsys):
    # The instructors' two commands reach course_lib.exercises.grading through the course's CLI.
    assert main(["grade", str(tmp_path / "missing.ipynb")]) == 2
    assert "no notebook" in capsys.readouterr().err
    assert main(["learner-copies", str(tmp_path / "copies"), "--source", str(tmp_path)]) == 2
    assert "holds no notebooks" in capsys.readouterr().err  # an empty folder says so
    out = subprocess.run([sys.executable, "-m", "course_lib", "--help"], capture_output=True,
                         text=True, timeout=60).stdout
    assert "grade" in out and "learner-copies" in out
