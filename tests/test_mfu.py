"""MFU and HFU of chapter 10 (course_lib.hardware.mfu): PaLM's FLOPs per token by hand, the weights
that multiply counted on a tiny GPT-2, torch's FlopCounterMode against the formula (eager attention
exactly; the CPU's fused attention counted, forward exactly), recomputation seen by the counter,
the utilisation arithmetic, a short real run of the course's training loop, and bad input."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.hardware import mfu
from course_lib.hardware.mfu import Utilisation
from course_lib.text import training

from conftest import tiny_gpt2

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def batch(vocab: int = 50, b: int = 2, t: int = 8) -> dict[str, torch.Tensor]:
    x = torch.randint(0, vocab, (b, t), generator=torch.Generator().manual_seed(0))
    return {"input_ids": x, "labels": x}


def test_model_flops_per_token_by_hand():
    # 6 N + 12 L d T: N = 1000 weights, 2 layers, hidden 8, 4 tokens per sequence.
    assert mfu.model_flops_per_token(1000, 2, 8, 4) == 6 * 1000 + 12 * 2 * 8 * 4 == 6768
    # PaLM 540B (118 layers, 48 heads of 256, 2,048 tokens): attention is a few % of 6 N.
    palm = mfu.model_flops_per_token(540e9, 118, 48 * 256, 2048)
    assert 1.0 < palm / (6 * 540e9) < 1.1


def test_matmul_parameters_of_a_tiny_gpt2():
    m = tiny_gpt2(16, 50, layers=2)
    h = 16
    per_layer = h * 3 * h + h * h + h * 4 * h + 4 * h * h  # QKV, out, MLP up, MLP down
    assert mfu.matmul_parameters(m) == 2 * per_layer + 50 * h  # + the tied output head, once
    assert mfu.matmul_parameters(m) < sum(p.numel() for p in m.parameters())
    assert mfu.model_shape(m) == (2, 16)


def test_flop_counter_matches_the_formula_with_eager_attention():
    m = tiny_gpt2(16, 50, layers=2).train()
    m.set_attn_implementation("eager")
    n, (layers, hidden) = mfu.matmul_parameters(m), mfu.model_shape(m)
    tokens, t = 2 * 8, 8
    assert mfu.count_flops(m, batch(), backward=False) == (2 * n + 4 * layers * hidden * t) * tokens
    assert mfu.count_flops(m, batch()) == mfu.model_flops_per_token(n, layers, hidden, t) * tokens
    assert all(p.grad is None for p in m.parameters())  # cleared afterwards


def test_fused_cpu_attention_is_counted():
    m = tiny_gpt2(16, 50, layers=2).train()  # sdpa: torch's fused kernel on the CPU
    n, (layers, hidden) = mfu.matmul_parameters(m), mfu.model_shape(m)
    forward = mfu.count_flops(m, batch(), backward=False)
    assert forward == (2 * n + 4 * layers * hidden * 8) * 16  # without the CPU mapping: 2 n only
    both = mfu.count_flops(m, batch())
    # the fused backward recomputes the scores: at least the formula, at most one extra forward
    formula = mfu.model_flops_per_token(n, layers, hidden, 8) * 16
    assert formula <= both <= formula + forward


def test_checkpointing_recomputes_forward_flops():
    m = tiny_gpt2(16, 50, layers=2).train()
    plain = mfu.count_flops(m, batch())
    m.activation_checkpointing_enable()
    recomputed = mfu.count_flops(m, batch())
    forward = mfu.count_flops(m, batch(), backward=False)
    assert plain < recomputed <= plain + forward


def test_utilisation_arithmetic():
    u = Utilisation(tokens=1000, seconds=2.0, model_flops_per_token=6e6,
                    hardware_flops_per_token=8e6, peak=1e10)
    assert u.tokens_per_second == 500
    assert u.mfu == pytest.approx(500 * 6e6 / 1e10) and u.hfu == pytest.approx(500 * 8e6 / 1e10)
    with pytest.raises(ValueError, match="seconds"):
        Utilisation(1000, 0.0, 6e6, 8e6, 1e10)
    with pytest.raises(ValueError, match="peak"):
        Utilisation(1000, 1.0, 6e6, 8e6, math.nan)


def test_a_short_run_of_the_course_loop(tokenizer):
    recipe = training.Recipe(steps=3, batch_size=2, seq_len=16, warmup_steps=1)
    m = tiny_gpt2(16, len(tokenizer), layers=2)
    u = mfu.measure_utilisation(m, tokenizer, recipe, peak=1e15)
    assert u.tokens == 2 * 2 * 16 and u.seconds > 0
    n = mfu.matmul_parameters(m)
    assert u.model_flops_per_token == mfu.model_flops_per_token(n, 2, 16, 16)
    assert 0 < u.mfu <= u.hfu < 1
    c = mfu.measure_utilisation(m, tokenizer, recipe, peak=1e15, checkpointing=True)
    assert c.checkpointing and c.hardware_flops_per_token > u.hardware_flops_per_token
    assert not m.is_activation_checkpointing and m.config.use_cache  # as they were


def test_bad_input_is_refused(tokenizer):
    m = tiny_gpt2(16, len(tokenizer), layers=2)
    recipe = training.Recipe(steps=1, batch_size=2, seq_len=16)
    with pytest.raises(ValueError, match="at least one step must be timed"):
        mfu.measure_utilisation(m, tokenizer, recipe, peak=1e12)
    with pytest.raises(ValueError, match="peak"):
        mfu.measure_utilisation(m, tokenizer, recipe, peak=0)
    with pytest.raises(ValueError, match="True or False"):
        mfu.measure_utilisation(m, tokenizer, training.Recipe(steps=2), 1e12, checkpointing="yes")
    with pytest.raises(ValueError, match="torch model"):
        mfu.matmul_parameters("gpt2")
    with pytest.raises(ValueError, match="input_ids"):
        mfu.count_flops(m, {"x": 1})
    with pytest.raises(ValueError, match="layers"):
        mfu.model_flops_per_token(1e6, 0, 8, 4)
    with pytest.raises(ValueError, match="config"):
        mfu.model_shape(torch.nn.Linear(2, 2))
