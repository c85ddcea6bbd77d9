"""Tests for ``python -m course_lib plan``: the table it prints and one clear line for
each bad flag."""

from __future__ import annotations

import subprocess
import sys

import pytest

from course_lib.__main__ import main
from course_lib.planner import model, report


def test_plan_prints_memory_verdict_step_and_run(capsys):
    argv = [
        "plan",
        "--preset",
        "llama2-7b",
        "--gpu",
        "h100",
        "--gpus-per-node",
        "8",
        "--nodes",
        "1",
        "--zero",
        "3",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # The same table and sentences as the library's report of the same plan.
    assert (
        out.strip()
        == report.report(model.plan(model="llama2-7b", gpu="h100", zero="3")).strip()
    )
    for words in (
        "Memory per GPU",
        "parameters",
        "gradients",
        "optimizer states",
        "activations",
        "CUDA context",
        # 32.04 before FSDP's root unit (0.52 GB) and FP32 reduce (0.81 GB), 33.37 before
        # Llama's SwiGLU MLP (2.95 GB more activations than GPT's 4h GELU MLP)
        "fits: 36.33 GB",
        "Time per step",
        "pipeline bubble",
        "days on 8 GPUs",
        "GPU-hours",
        "achieved MFU",
    ):
        assert words in out, words


def test_plan_names_the_cheapest_change_when_it_does_not_fit(capsys):
    assert (
        main(["plan", "--preset", "t5-11b", "--gpu", "a100-80", "--global-batch", "64"])
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "does not fit" in out and "cheapest change that fits: ZeRO stage 0 to 1" in out
    )


def test_plan_with_every_kind_of_flag_and_in_dutch(capsys):
    argv = [
        "plan",
        "--preset",
        "custom",
        "--params",
        "13B",
        "--layers",
        "40",
        "--hidden",
        "5120",
        "--heads",
        "40",
        "--vocab",
        "32000",
        "--seq-len",
        "4096",
        "--gpu",
        "custom",
        "--gpu-memory",
        "141",
        "--gpu-tflops",
        "989.5",
        "--gpu-hbm",
        "4.8",
        "--nodes",
        "4",
        "--network-link",
        "custom",
        "--net-alpha-us",
        "10",
        "--net-beta-gbs",
        "25",
        "--zero",
        "3",
        "--shard",
        "8",
        "--tp",
        "2",
        "--tp-overlap",
        "0.5",
        "--pp",
        "2",
        "--virtual-stages",
        "2",
        "--micro-batches",
        "4",
        "--global-batch",
        "64",
        "--tokens",
        "1T",
        "--mfu",
        "0.45",
        "--checkpointing",
        "--offload",
        "--no-flash-attention",
        "--dropout",
        "--no-sequence-parallel",
        "--language",
        "nl",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Geheugen per GPU" in out
    layout = "32 GPU's = tensor 2 (zonder sequentieparallellisme) x pipeline 2 x data 8"
    assert layout in out
    assert "door CPU-offload op de host bewaard" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--tp", "3"],
            "the tensor-parallel degree 3 must divide the 8 GPUs per node; use one of "
            "1, 2, 4, 8",
        ),
        (
            ["--tp", "-2"],
            "tensor-parallel degree must be a whole number from 1 to 1,024, got '-2'",
        ),
        (
            ["--nodes", "0"],
            "number of nodes must be a whole number from 1 to 1,048,576, got '0'",
        ),
        (["--mfu", "nan"], "MFU of the matrix products must be a number, got 'nan'"),
        (
            ["--params", "seven", "--preset", "custom"],
            "number of parameters must be a number, got 'seven'",
        ),
        (
            ["--gpu", "h200"],
            "unknown GPU type 'h200'; valid values: a100-40, a100-80, h100, h800, "
            "l40s, custom",
        ),
        (["--pp", "33"], "33 pipeline stages for 32 layers"),
        (
            ["--preset", "llama3-405b", "--tp", "8", "--pp", "3"],
            "tensor x pipeline degree 8 x 3 = 24 " "does not divide the 8 " "GPUs",
        ),
        (
            ["--preset", "gpt5"],
            "unknown model 'gpt5'; valid values: gpt3-175b, llama2-7b",
        ),
        (
            ["--zero", "1", "--shard", "3"],
            "the sharding factor 3 must divide the 8 data-parallel replicas",
        ),
        (
            ["--global-batch", "12"],
            "a global batch of 12 sequences does not split over the 8 data-parallel",
        ),
        (
            ["--checkpointing", "yes"],
            "activation checkpointing must be one of none, full, selective, attention (false: none, "
            "true: full), got 'yes'",
        ),
    ],
)
def test_bad_flags_get_one_line(capsys, args, message):
    assert main(["plan", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m course_lib plan: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_flags_given_twice_or_unknown_are_refused_by_argparse(capsys):
    for args in (
        ["--nodes", "2", "--nodes", "3"],
        ["--batch", "8"],
        ["--offload", "yes"],
    ):
        with pytest.raises(SystemExit) as done:
            main(["plan", *args])
        assert done.value.code == 2
    err = capsys.readouterr().err
    assert "given twice" in err and "unrecognized arguments" in err


def test_checkpointing_is_full_alone_or_the_setting_named(capsys):
    """``--checkpointing`` alone is full checkpointing, as before; with a value, one of
    the planner's settings: the same plan as the library's."""
    said = {}
    for args, setting in (([], "none"), (["--checkpointing"], "full"),
                          (["--checkpointing", "none"], "none"),
                          (["--checkpointing", "Selective"], "selective"),
                          (["--checkpointing", "--offload"], "full")):
        assert main(["plan", "--zero", "3", *args]) == 0
        out = capsys.readouterr().out
        offload = "--offload" in args
        want = report.report(model.plan(zero=3, checkpointing=setting, offload=offload))
        assert out.strip() == want.strip(), args
        said[setting] = out
    assert "ZeRO 3, selective checkpointing, fused attention" in said["selective"]
    assert "ZeRO 3, checkpointing, offload, fused attention" in said["full"]


def test_the_command_runs_as_a_module():
    done = subprocess.run(
        [sys.executable, "-m", "course_lib", "plan", "--tp", "5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "python -m course_lib plan: error: tensor parallelism stays inside a node: "
        "the tensor-parallel degree 5 must divide the 8 GPUs per node; use one of 1, "
        "2, 4, 8"
    ]


@pytest.mark.parametrize(
    "args, choice, language",
    [
        (["--gpu-memory", "80"], "--gpu", "en"),
        (["--gpu", "h100", "--gpu-tflops", "500"], "--gpu", "en"),
        (["--gpu-hbm", "2"], "--gpu", "nl"),
        (["--node-alpha-us", "3"], "--node-link", "en"),
        (["--node-link", "nvlink4", "--node-beta-gbs", "100"], "--node-link", "nl"),
        (["--net-alpha-us", "5"], "--network-link", "en"),
        (["--network-link", "ib-ndr", "--net-beta-gbs", "20"], "--network-link", "nl"),
    ],
)
def test_a_custom_figure_without_its_custom_choice_is_refused(capsys, args, choice, language):
    """Issue 40: such a flag changed a published GPU or link without a word."""
    flag = next(a for a in args if a.startswith("--") and a != choice)
    assert main(["plan", *args, "--language", language]) == 2
    err = capsys.readouterr().err
    said = {"en": f"{flag} is for {choice} custom only: add {choice} custom",
            "nl": f"{flag} geldt alleen bij {choice} custom: voeg {choice} custom toe"}
    assert err.startswith("python -m course_lib plan: error: ") and said[language] in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_custom_figures_with_their_custom_choice_are_taken(capsys):
    args = ["--gpu", "Custom", "--gpu-memory", "80", "--gpu-tflops", "989", "--gpu-hbm", "3.35",
            "--node-link", "custom", "--node-alpha-us", "3", "--node-beta-gbs", "450"]
    assert main(["plan", *args]) == 0
    assert "custom GPU" in capsys.readouterr().out
