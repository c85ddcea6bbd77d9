"""Unit and property tests for course_lib.numbers.memory and memory_meter: the estimator against the papers and a
real model."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.base import dtypes
from course_lib.numbers import i18n, memory, memory_meter
from course_lib.text import models


def tiny_gpt2(**shape):
    """Chapter 2's measurement model: the course's tiny GPT-2, exact GELU, eager attention."""
    config = models.tiny_config("gpt2", activation="gelu", attention="eager", **shape)
    return models.build_model(config, seed=0)


def test_bytes_per_dtype_match_torch_element_size():
    for name in ("fp32", "fp16", "bf16", "fp8", "int8"):
        dtype = dtypes.torch_dtype(name)
        assert memory.bytes_per_param(name) == torch.empty(0, dtype=dtype).element_size()
    assert memory.bytes_per_param("int4") == 0.5


def test_weight_memory_of_1b_fp32_is_4_gb():
    assert memory.gb(memory.weight_memory(1e9, "fp32")) == 4.0
    assert memory.gb(memory.weight_memory(1e9, "BF16")) == 2.0


def test_model_states_are_16_bytes_per_param_for_adam_fp32_and_mixed():
    # ZeRO paper: 2+2+12 for mixed precision; 4+4+8 in pure fp32.
    for precision in ("fp32", "bf16-mixed", "fp16-mixed"):
        b = memory.training_memory(1e9, precision, "adam")
        assert b.model_states == pytest.approx(16e9)
    assert memory.training_memory(1e9, "bf16-mixed", "adam").master_weights == pytest.approx(4e9)
    assert memory.training_memory(1e9, "fp32", "sgd").model_states == pytest.approx(8e9)
    assert memory.training_memory(1e9, "fp32", "adam-8bit").optimizer_states == pytest.approx(2e9)


@pytest.mark.parametrize("stage", memory.ZERO_STAGES)
@pytest.mark.parametrize("gpus", [1, 2, 8, 64])
def test_zero_stages_match_the_papers_closed_forms(stage, gpus):
    # Rajbhandari et al.: (2+2+K)Ψ; 4Ψ + KΨ/N; 2Ψ + (2+K)Ψ/N; (4+K)Ψ/N with K = 12.
    psi, k, n = 7.5e9, 12, gpus
    paper = [(4 + k) * psi, 4 * psi + k * psi / n, 2 * psi + (2 + k) * psi / n, (4 + k) * psi / n][stage]
    b = memory.training_memory(psi, "bf16-mixed", "adam", gpus=gpus, zero_stage=stage)
    assert b.model_states == pytest.approx(paper, rel=1e-12)


def test_zero_paper_example_7_5b_on_64_gpus():
    # The ZeRO paper's Figure 1 example: 7.5B parameters, 64 GPUs: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
    expected = [120.0, 31.4, 16.6, 1.9]
    for stage, gbs in zip(memory.ZERO_STAGES, expected):
        b = memory.training_memory(7.5e9, "bf16-mixed", "adam", gpus=64, zero_stage=stage)
        assert round(memory.gb(b.model_states), 1) == gbs


def test_activation_formula_reduces_to_korthikanti_for_16_bit():
    s, b, h, a = 2048, 4, 4096, 32
    assert memory.activation_bytes_per_layer(s, b, h, a, 2, 1) == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    # Without dropout: 16 tensors of sbh and the attention probabilities once.
    assert memory.activation_bytes_per_layer(s, b, h, a, 2, dropout=False) == 16 * 2 * s * b * h + 2 * a * s * s * b


def test_tensor_parallel_activations_follow_korthikanti_with_and_without_sequence_parallelism():
    """Korthikanti et al. 2022, Table 2: ``sbh(10 + 24/t + 5as/(ht))`` per rank without sequence
    parallelism (e=2, d=1), ``sbh(34 + 5as/h) / t`` with it; one rank is chapter 2's layer."""
    s, b, h, a = 2048, 4, 4096, 32
    layer = memory.activation_bytes_per_layer(s, b, h, a, 2, 1)
    for sp in (True, False):
        assert memory.activation_bytes_per_tp_rank(s, b, h, a, 1, sp, 2, 1) == layer
    for t in (2, 4, 8):
        assert memory.activation_bytes_per_tp_rank(s, b, h, a, t) == layer / t
        no_sp = memory.activation_bytes_per_tp_rank(s, b, h, a, t, False, 2, 1)
        assert no_sp == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), rel=1e-12)
        # What stays whole is exactly s b h (4e + 2d): 10 sbh at e=2, d=1; 4e without dropout.
        for e, d, dropout in ((2, 1, True), (4, 4, True), (2, 1, False)):
            whole = s * b * h * (4 * e + (2 * d if dropout else 0))
            total = memory.activation_bytes_per_layer(s, b, h, a, e, d, dropout, False)
            got = memory.activation_bytes_per_tp_rank(s, b, h, a, t, False, e, d, dropout, False)
            assert got == whole + (total - whole) / t
            # Splitting everything would be the smaller, sequence-parallel figure.
            assert got > total / t and got - total / t == pytest.approx(whole * (1 - 1 / t))
    with pytest.raises(ValueError, match="tensor-parallel degree"):
        memory.activation_bytes_per_tp_rank(s, b, h, a, 0)


def test_a_llama_block_adds_its_key_value_heads_and_its_gated_mlp():
    """Per token, in e-byte elements: norms' inputs 2h, projections' inputs 2h, Q h, K and V 2hr,
    attention's output h, and the MLP: GELU's 4h input and output (8h) or a SwiGLU MLP's gate, up,
    SiLU and product (4 I). GPT's block (r = 1, GELU) is Korthikanti's 16 e s b h."""
    s, b, e = 4096, 2, 2
    for h, a, kv, mlp in ((4096, 32, 32, 11008), (8192, 64, 8, 28672), (16384, 128, 8, 53248)):
        r = kv / a
        want = s * b * e * (h * (6 + 2 * r) + 4 * mlp)
        got = memory.activation_bytes_per_layer(s, b, h, a, e, dropout=False, attention_scores=False,
                                                kv_heads=kv, mlp=mlp)
        assert got == pytest.approx(want, rel=1e-12)
        # Dropout's masks and the unfused scores are the GPT block's, whatever the block.
        full = memory.activation_bytes_per_layer(s, b, h, a, e, 1, kv_heads=kv, mlp=mlp)
        assert full - got == pytest.approx(2 * s * b * h + a * s * s * b * (2 * e + 1), rel=1e-12)
        # Without sequence parallelism the norms' and projections' inputs (4 e s b h) stay whole.
        for t in (2, 8):
            whole = 4 * e * s * b * h
            no_sp = memory.activation_bytes_per_tp_rank(s, b, h, a, t, False, e, dropout=False,
                                                        attention_scores=False, kv_heads=kv, mlp=mlp)
            assert no_sp == pytest.approx(whole + (want - whole) / t, rel=1e-12)
            assert memory.activation_bytes_per_tp_rank(s, b, h, a, t, True, e, dropout=False,
                                                       attention_scores=False, kv_heads=kv,
                                                       mlp=mlp) == pytest.approx(want / t, rel=1e-12)
    # Llama 2 7B and 70B per s b h: 37.5 and 40.5 (the measured 45.5 and 48.5 less the FP32 norm copies).
    assert memory.activation_bytes_per_layer(1, 1, 4096, 32, 2, dropout=False, attention_scores=False,
                                             mlp=11008) / 4096 == 37.5
    assert memory.activation_bytes_per_layer(1, 1, 8192, 64, 2, dropout=False, attention_scores=False,
                                             kv_heads=8, mlp=28672) / 8192 == 40.5


@pytest.mark.parametrize("dropout", [True, False])
@pytest.mark.parametrize("scores", [True, False])
def test_the_defaults_are_gpt_s_block_to_the_byte(dropout, scores):
    """kv_heads None and mlp 0 are the count every existing call made: Korthikanti's, the same
    value of the same type (an int for int inputs)."""
    for s, b, h, a, e, d in ((2048, 4, 4096, 32, 2, 1), (1024, 3, 768, 12, 4, 4), (7, 1, 64, 1, 0.5, 1)):
        got = memory.activation_bytes_per_layer(s, b, h, a, e, d, dropout, scores)
        want = s * b * h * (16 * e + 2 * (d if dropout else 0)) + (
            a * s * s * b * (e + dropout * (e + d)) if scores else 0)
        assert got == want and type(got) is type(want)
        assert memory.activation_bytes_per_layer(s, b, h, a, e, d, dropout, scores, kv_heads=a, mlp=0) == want


@pytest.mark.parametrize("kwargs, message", [
    ({"kv_heads": 0}, "number of key-value heads must be a whole number >= 1"),
    ({"kv_heads": 2.5}, "number of key-value heads must be a whole number >= 1"),
    ({"mlp": -1}, "width of the gated MLP must be a whole number >= 1"),
    ({"mlp": 1.5}, "width of the gated MLP must be a whole number >= 1"),
])
def test_bad_key_value_heads_or_mlp_width_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        memory.activation_bytes_per_layer(1024, 1, 4096, 32, **kwargs)


def test_activations_grow_with_batch_and_sequence_not_params():
    shape = memory.shape_for_params(1e9)
    base = memory.activation_bytes(shape, 1024, 2)
    assert memory.activation_bytes(shape, 1024, 4) == pytest.approx(2 * base)
    assert memory.activation_bytes(shape, 2048, 2) > 2 * base  # the s^2 attention term
    a = memory.training_memory(1e9, batch=2, seq_len=1024, shape=shape).activations
    b = memory.training_memory(2e9, batch=2, seq_len=1024, shape=shape).activations
    assert a == b


def test_parameter_formula_is_exact_for_gpt2():
    model = tiny_gpt2(layers=2, hidden=64, heads=2, vocab=500, context=32)
    assert memory.shape_of(model).n_params == sum(p.numel() for p in model.parameters())


def test_gpt2_small_preset_has_124m_parameters():
    assert memory.MODEL_PRESETS["gpt2-124M"].n_params == 124_439_808


def test_shape_for_params_is_close_to_the_count():
    for n in (1e8, 1e9, 7e9, 50e9, 175e9):
        shape = memory.shape_for_params(n)
        assert abs(shape.n_params / n - 1) < 0.1
        assert shape.hidden % shape.n_heads == 0


@pytest.mark.parametrize("dropout", [0.1, 0.0])
def test_measurement_matches_estimate_on_a_real_model(dropout):
    torch.manual_seed(0)
    model = tiny_gpt2(layers=2, hidden=64, heads=2, vocab=512, context=64, dropout=dropout)
    shape = memory.shape_of(model)
    batch, seq = 4, 32
    m = memory_meter.measure_training_step(model, batch, seq)
    n = m.n_params
    assert m.weights == 4 * n
    assert m.gradients == 4 * n
    n_tensors = len(list(model.parameters()))
    assert m.optimizer_states == 8 * n + 4 * n_tensors  # exp_avg, exp_avg_sq, and a 4-byte step per tensor
    est = memory.activation_bytes(shape, seq, batch, 4, memory.dropout_mask_bytes("cpu", 4), dropout=dropout > 0)
    # What the formula leaves out: ids, labels, positions (int64) and per-token layer-norm statistics (fp32).
    small = 8 * batch * seq * 2 + 8 * seq + 4 * batch * seq * 2 * (2 * shape.n_layers + 1) + 4
    assert m.activations - est == small


def test_saved_tensor_meter_counts_a_storage_once():
    x = torch.randn(100, requires_grad=True)
    with memory_meter.SavedTensorMeter() as meter:
        y = x.exp()  # saves its output
        (y * y).sum()  # saves y twice: one storage
    assert meter.total == y.untyped_storage().nbytes()


def test_rule_of_thumb_and_verdicts():
    assert memory.gb(memory.rule_of_thumb(1e9)) == 24
    b = memory.training_memory(1e9, "bf16-mixed", "adam", batch=1, seq_len=512)
    verdicts = {g.name: ok for g, ok, _ in b.verdicts()}
    assert verdicts[memory.GPUS[-1].name] and not verdicts[memory.GPUS[0].name]


def test_min_gpus_to_fit():
    gpu = memory.GPUS[-1]
    fn = lambda g: memory.training_memory(7e9, "bf16-mixed", batch=1, seq_len=2048, gpus=g, zero_stage=3)  # noqa: E731
    n = memory.min_gpus_to_fit(fn, gpu)
    assert n is not None and fn(n).total <= gpu.capacity and fn(n // 2).total > gpu.capacity


def test_gpus_to_train_uses_zero3_and_checkpointing():
    big = memory.GPUS[-1]
    assert memory.gpus_to_train(1e9, big) == 1
    n = memory.gpus_to_train(7e9, big)
    per_gpu = memory.training_memory(7e9, "bf16-mixed", gpus=n, zero_stage=3).total
    assert per_gpu <= big.capacity
    # The 7B model's activations at 2048 tokens overflow a 16 GiB card whatever the sharding, not with checkpointing.
    assert memory.gpus_to_train(7e9, memory.GPUS[0]) is None
    assert memory.gpus_to_train(7e9, memory.GPUS[0], activation_checkpointing=True) is not None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_params": 0}, "number of parameters must be a positive number"),
        ({"n_params": -5}, "number of parameters must be a positive number"),
        ({"n_params": float("nan")}, "number of parameters must be a positive number"),
        ({"n_params": 1e9, "precision": "fp64"}, "valid values: fp32, bf16-mixed, fp16-mixed, bf16"),
        ({"n_params": 1e9, "optimizer": "adamw2"}, "valid values: adam, adam-8bit, sgd-momentum, sgd"),
        ({"n_params": 1e9, "batch": 0}, "batch size must be a whole number >= 1, got 0"),
        ({"n_params": 1e9, "seq_len": -1}, "sequence length must be a whole number >= 1, got -1"),
        ({"n_params": 1e9, "gpus": 0}, "number of GPUs must be a whole number >= 1"),
        ({"n_params": 1e9, "zero_stage": 4}, "ZeRO stage must be one of 0, 1, 2, 3"),
    ],
)
def test_bad_input_names_the_valid_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        memory.training_memory(**kwargs)


def test_unknown_dtype_lists_valid_dtypes():
    with pytest.raises(ValueError, match="valid values: fp32, fp16, bf16, fp8, int8, int4"):
        memory.bytes_per_param("float128")


@pytest.mark.parametrize(
    "text, value", [("7e9", 7e9), ("7B", 7e9), ("125M", 125e6), ("1.3b", 1.3e9), ("350_000_000", 3.5e8), (5, 5.0)]
)
def test_parse_count(text, value):
    assert memory.parse_count(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["seven", "7X", "", "-1B", "0"])
def test_parse_count_rejects_typos(text):
    with pytest.raises(ValueError, match="parameter"):
        memory.parse_count(text)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(10**6, 10**12),
    gpus=st.integers(1, 1024),
    precision=st.sampled_from(list(memory.PRECISIONS)),
    optimizer=st.sampled_from(list(memory.OPTIMIZERS)),
)
def test_more_sharding_never_costs_more_model_states(n, gpus, precision, optimizer):
    states = [
        memory.training_memory(n, precision, optimizer, gpus=gpus, zero_stage=s).model_states
        for s in memory.ZERO_STAGES
    ]
    assert all(a >= b - 1e-6 * a for a, b in zip(states, states[1:]))
    one_gpu = memory.training_memory(n, precision, optimizer, gpus=1, zero_stage=3).model_states
    assert math.isclose(one_gpu, states[0])
    assert states[3] == pytest.approx(states[0] / gpus)


def test_model_state_bytes_counts_parameters_gradients_and_adam_states():
    model = torch.nn.Linear(10, 4)  # 44 parameters
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(2, 10)).sum().backward()
    optimizer.step()
    assert memory.model_state_bytes(model, optimizer) == {
        "parameters": 44 * 4, "gradients": 44 * 4, "optimizer states": 2 * 44 * 4}


# ------------------------------------------------------------------------------------------------
# The edges: the same limits and messages as `python -m course_lib memory` (tests/test_cli.py)
# ------------------------------------------------------------------------------------------------

GPT2 = memory.MODEL_PRESETS["gpt2-124M"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_params": 0.5}, "number of parameters must be a whole number >= 1, got 0.5"),
        ({"n_params": 1500.5}, "number of parameters must be a whole number >= 1, got 1500.5"),
        ({"n_params": 1e30}, "number of parameters must be at most 1,000,000,000,000,000, got 1e+30; is there a digit"),
        ({"n_params": 1e9, "batch": 1.5}, "batch size must be a whole number >= 1, got 1.5"),
        ({"n_params": 1e9, "seq_len": 10**11}, "sequence length must be at most 100,000,000, got 100000000000"),
        ({"n_params": 1e9, "seq_len": 2048.5}, "sequence length must be a whole number >= 1, got 2048.5"),
        ({"n_params": GPT2.n_params, "seq_len": 4096, "shape": GPT2},
         "sequence length 4096 is longer than the model's context of 1024 positions; use 1024 tokens or fewer"),
    ],
)  # fmt: skip
def test_absurd_fractional_and_too_long_jobs_are_refused(kwargs, message):
    with pytest.raises(ValueError) as err:
        memory.training_memory(**kwargs)
    assert str(err.value).startswith(message)


def test_counts_within_rounding_of_a_whole_number_are_whole():
    assert memory.parse_count("4.1B") == 4.1 * 1e9 != 4_100_000_000  # 4099999999.9999995, a whole count
    assert memory.training_memory(memory.parse_count("4.1B")).n_params == pytest.approx(4.1e9)
    assert memory.training_memory(memory.MAX_PARAMS).total > 0
    assert memory.training_memory(1e9, seq_len=memory.MAX_SEQ_LEN).total > 0


def test_the_context_limits_a_given_shape_only():
    """A preset's positions are its context; a bare count's shape is a guess, so its 2048 are no limit."""
    assert memory.training_memory(GPT2.n_params, seq_len=1024, shape=GPT2).total > 0
    assert memory.training_memory(7e9, seq_len=4096).total > 0
    llama = memory.MODEL_PRESETS["llama-7B-shape"]  # rotary positions: no table, no limit
    assert memory.training_memory(llama.n_params, seq_len=8192, shape=llama).total > 0
    with pytest.raises(ValueError, match="de sequentielengte 4096 is langer dan de context van het model"):
        memory.check_context(GPT2, 4096, "nl")


@pytest.mark.parametrize("call", [
    lambda: memory.shape_for_params(1e30), lambda: memory.shape_for_params(0.5), lambda: memory.parse_count("1e30"),
    lambda: memory.parse_count("0.5"), lambda: memory.rule_of_thumb(0.5), lambda: memory.weight_memory(2e15),
])  # fmt: skip
def test_every_function_taking_a_count_has_the_same_limits(call):
    with pytest.raises(ValueError, match="number of parameters must be (a whole number >= 1|at most)"):
        call()


@pytest.mark.parametrize("max_gpus", [-1, 0, 2.5])
def test_min_gpus_to_fit_refuses_a_bad_maximum(max_gpus):
    with pytest.raises(ValueError, match=f"max_gpus must be a whole number >= 1, got {max_gpus}"):
        memory.min_gpus_to_fit(lambda g: memory.training_memory(1e9, gpus=g), memory.GPUS[0], max_gpus=max_gpus)


def test_check_job_names_the_valid_languages_even_for_a_good_job():
    with pytest.raises(ValueError, match=r"^unknown language 'fr'; valid values: en, nl$"):
        memory.check_job(1, 2048, 1, 0, language="fr")
    memory.check_job(1, 2048, 1, 0, language="NL")  # a language code in any case, as everywhere
    with pytest.raises(ValueError, match="de batchgrootte moet een geheel getal van minstens 1 zijn, niet 1,5"):
        memory.check_job(1.5, 2048, 1, 0, language="nl")


@pytest.mark.parametrize("n_bytes", ["5e9", None, b"5"])
def test_gb_names_the_type_it_takes(n_bytes):
    with pytest.raises(TypeError, match=r"n_bytes must be a number \(int or float\), got .* of type"):
        memory.gb(n_bytes)


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_on_one_gpu_is_noted_and_costs_what_stage_0_costs(stage):
    b = memory.training_memory(1e9, "bf16-mixed", zero_stage=stage)
    assert b.notes == [i18n.text("mem_note_zero_one_gpu")]
    assert b.total == memory.training_memory(1e9, "bf16-mixed").total
    assert memory.training_memory(1e9, "bf16-mixed").notes == []
    assert i18n.text("mem_note_zero_one_gpu") not in memory.training_memory(1e9, gpus=2, zero_stage=stage).notes


# --- headroom: the CUDA context and the allocator's margin ---------------------------------------------

def test_usable_memory_leaves_the_cuda_context_and_the_allocator_margin():
    gpu = memory.GPUS[0]  # 16 GiB
    assert gpu.usable == 16 * 2**30 * (1 - memory.ALLOCATOR_MARGIN) - memory.CUDA_CONTEXT_BYTES
    assert 0.85 * gpu.capacity < gpu.usable < 0.95 * gpu.capacity
    assert 2**28 <= memory.CUDA_CONTEXT_BYTES <= 2**30  # a few hundred MiB to 1 GiB


def test_a_1b_model_at_99_percent_of_a_card_does_not_fit():
    b = memory.training_memory(1e9, "bf16-mixed", "adam", activation_checkpointing=True)
    gpu = memory.GPUS[0]
    assert 0.95 < b.total / gpu.capacity < 1  # within the card's capacity ...
    assert b.fits(gpu, headroom=False) and not b.fits(gpu)  # ... but not with room to run
    assert [ok for g, ok, _ in b.verdicts() if g is gpu] == [False]
    assert memory.gpus_to_train(1e9, gpu, activation_checkpointing=True, headroom=False) == 1
    assert memory.gpus_to_train(1e9, gpu, activation_checkpointing=True) == 2


# --- activations with checkpointing and with fused attention --------------------------------------------

def test_fused_attention_drops_exactly_the_score_term():
    s, b, h, a = 2048, 1, 4096, 32
    full = memory.activation_bytes_per_layer(s, b, h, a)
    fused = memory.activation_bytes_per_layer(s, b, h, a, attention_scores=False)
    assert fused == 34 * s * b * h  # Korthikanti et al.'s sbh(34 + 5as/h) without 5as/h
    assert full - fused == 5 * a * s * s * b
    no_dropout = memory.activation_bytes_per_layer(s, b, h, a, 4, dropout=False, attention_scores=False)
    assert no_dropout == 16 * 4 * s * b * h


def test_checkpointing_keeps_each_layer_s_input_only():
    shape = memory.ModelShape(4, 256, 4, 8192, 256)
    s, b, e = 128, 8, 4
    outside = 2 * s * b * shape.hidden * e + b * s * shape.vocab * 4  # final norm, loss
    got = memory.activation_bytes(shape, s, b, e, dropout=False, checkpointing=True)
    assert got == shape.n_layers * s * b * shape.hidden * e + outside
    full = memory.activation_bytes(shape, s, b, e, dropout=False)
    per_layer = memory.activation_bytes_per_layer(s, b, shape.hidden, shape.n_heads, e, dropout=False)
    assert full == shape.n_layers * per_layer + outside


@pytest.fixture(scope="module")
def lean():
    """A tiny GPT-2 without dropout, eager and fused (SDPA) attention, the same weights."""
    shape = dict(hidden=64, layers=2, heads=2, context=128, vocab=512, dropout=0.0)
    return {att: models.build_model(models.tiny_config("gpt2", activation="gelu", attention=att, **shape),
                                    seed=0) for att in ("eager", "sdpa")}


def test_checkpointing_measured_saves_layer_inputs_and_runs_each_block_twice(lean):
    model = lean["eager"]
    ids = torch.randint(0, 512, (4, 64), generator=torch.Generator().manual_seed(0))
    shape = memory.shape_of(model)
    full = memory_meter.saved_activations(model, ids)
    model.zero_grad(set_to_none=True)
    ckpt = memory_meter.saved_activations(model, ids, checkpointing=True)
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    assert (full.block_forwards, ckpt.block_forwards) == (2, 4)  # one extra forward per block
    predicted = memory.activation_bytes(shape, 64, 4, 4, dropout=False)
    assert abs(full.bytes / predicted - 1) < 0.02
    kept = memory.activation_bytes(shape, 64, 4, 4, dropout=False, checkpointing=True)
    mask = 4 * 64 * 64 * 4  # transformers' float attention mask, an input of every block
    assert abs(ckpt.bytes / (kept + mask) - 1) < 0.02 and ckpt.bytes < full.bytes / 2
    flag = "is_activation_checkpointing"  # transformers 5.x; older: is_gradient_checkpointing
    assert not getattr(model, flag if hasattr(model, flag) else "is_gradient_checkpointing")
    memory_meter.saved_activations(model, ids)
    for g, p in zip(grads, model.parameters()):  # the same gradients, recomputed
        torch.testing.assert_close(p.grad, g)
    model.zero_grad(set_to_none=True)


def test_accumulation_keeps_one_micro_batch_of_activations_and_the_same_gradients(lean):
    model = lean["eager"]
    ids = torch.randint(0, 512, (8, 32), generator=torch.Generator().manual_seed(1))
    whole = memory_meter.saved_activations(model, ids)
    big = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    saved = memory_meter.accumulate_gradients(model, ids, 4)
    assert len(saved) == 4 and len(set(saved)) == 1
    shape = memory.shape_of(model)
    assert abs(saved[0] / memory.activation_bytes(shape, 32, 2, 4, dropout=False) - 1) < 0.02
    assert saved[0] < whole.bytes / 3
    for g, p in zip(big, model.parameters()):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)
    model.zero_grad(set_to_none=True)
    with pytest.raises(ValueError, match="equal micro-batches"):
        memory_meter.accumulate_gradients(model, ids, 3)


def test_fused_attention_saves_no_score_matrix(lean):
    s, b = 64, 2
    ids = torch.randint(0, 512, (b, s), generator=torch.Generator().manual_seed(2))
    runs = {att: memory_meter.saved_activations(m, ids) for att, m in lean.items()}
    for m in lean.values():
        m.zero_grad(set_to_none=True)
    scores = (b, 2, s, s)
    assert runs["eager"].shapes.count(scores) == 2  # one per layer
    assert scores not in runs["sdpa"].shapes


def test_saved_activations_needs_transformer_blocks():
    with pytest.raises(ValueError, match="no transformer blocks"):
        memory_meter.saved_activations(torch.nn.Linear(2, 2), torch.zeros(1, 2, dtype=torch.long))


def test_gb_refuses_a_negative_number_of_bytes():
    assert memory.gb(0) == 0 and memory.gb(2.5e9) == 2.5
    with pytest.raises(ValueError, match="n_bytes must be a number of bytes >= 0, got -1"):
        memory.gb(-1)
