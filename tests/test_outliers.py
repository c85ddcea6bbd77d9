"""Tests for course_lib.compression.outliers: simulated 8-bit matrix products, LLM.int8() and SmoothQuant.

What this file proves:

* ``int8_matmul`` equals an independent fake quantization written here (absmax, one scale per
  tensor / per token row of X / per output-channel row of W, ``round(x * (1/scale))`` clamped to
  +-127) followed by the product, for all four granularity combinations; bad names, mismatched
  shapes and NaN inputs are ValueErrors;
* ``with_outlier_feature`` keeps ``X W^T`` and leaves its inputs alone;
* with one x50 outlier feature, one scale per tensor is far worse than LLM.int8() and SmoothQuant;
  ``outlier_features`` finds exactly that feature; ``llm_int8_matmul`` reduces to pure INT8 when no
  feature is an outlier, to the bfloat16 product when every feature is, and in between is INT8 on
  the tame features plus bfloat16 on the outliers;
* ``smooth`` keeps the product and balances max|X_j / s_j| against max|W_j s_j| as the formula
  ``s_j = max|X_j|^alpha / max|W_j|^(1-alpha)`` says (derived per alpha below);
* ``layer_inputs`` returns exactly the input of the named layer of a small seeded GPT-2, flattened
  to (tokens, features), and removes its hook even when the forward pass raises;
* ``compare_methods`` / ``ch05.outlier_table`` report the five recipes with the errors of the functions
  above, printed as percentages.
"""

from __future__ import annotations

import math

import conftest
import pytest
import torch
from transformers import GPT2LMHeadModel

from course_lib.chapters import ch05
from course_lib.compression import outliers as O

D, VOCAB, LAYERS, POSITIONS = 64, 128, 2, 32
OUTLIER, FACTOR = 17, 50.0


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------------------------------
# An independent reference
# ---------------------------------------------------------------------------------------------

def ref_fake(m: torch.Tensor, per_row: bool) -> torch.Tensor:
    """Absmax INT8 fake quantization of a 2-D matrix: one scale for all of it, or one per row."""
    amax = m.abs().amax(dim=1, keepdim=True) if per_row else m.abs().max()
    scale = amax / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    code = torch.clamp(torch.round(m * (1.0 / scale)), -127, 127)
    return code * scale


def ref_int8(x: torch.Tensor, w: torch.Tensor, act: str, weight: str) -> torch.Tensor:
    return ref_fake(x, act == "token") @ ref_fake(w, weight == "channel").t()


def seeded(seed: int, rows: int, cols: int, scale: float = 1.0) -> torch.Tensor:
    return scale * torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def xw() -> tuple[torch.Tensor, torch.Tensor]:
    """A tame X (64 tokens x 128 features) and a weight W (96 x 128)."""
    return seeded(0, 64, 128), seeded(1, 96, 128, 0.05)


@pytest.fixture(scope="module")
def outlier_xw(xw) -> tuple[torch.Tensor, torch.Tensor]:
    return O.with_outlier_feature(*xw, feature=OUTLIER, factor=FACTOR)


# ---------------------------------------------------------------------------------------------
# int8_matmul
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("act", ["tensor", "token"])
@pytest.mark.parametrize("weight", ["tensor", "channel"])
@pytest.mark.parametrize("with_outlier", [False, True])
def test_int8_matmul_equals_independent_fake_quantization(xw, outlier_xw, act, weight, with_outlier):
    x, w = outlier_xw if with_outlier else xw
    got = O.int8_matmul(x, w, act, weight)
    assert got.shape == (x.shape[0], w.shape[0])
    assert torch.allclose(got, ref_int8(x, w, act, weight), rtol=1e-6, atol=1e-6)


def test_int8_matmul_granularities_really_differ(outlier_xw):
    """The four combinations are four different computations (so the test above can tell them apart)."""
    x, w = outlier_xw
    outs = [O.int8_matmul(x, w, a, b) for a in ("tensor", "token") for b in ("tensor", "channel")]
    for i in range(len(outs)):
        for j in range(i + 1, len(outs)):
            assert not torch.allclose(outs[i], outs[j], rtol=1e-6, atol=1e-6)


def test_int8_matmul_per_token_scale_is_per_row_of_x():
    """Scaling one token row of X by 1000 must not change the quantized product of the other rows."""
    x, w = seeded(2, 8, 32), seeded(3, 12, 32)
    big = x.clone()
    big[0] *= 1000.0
    a, b = O.int8_matmul(x, w, "token", "channel"), O.int8_matmul(big, w, "token", "channel")
    assert torch.equal(a[1:], b[1:])
    a, b = O.int8_matmul(x, w, "tensor", "channel"), O.int8_matmul(big, w, "tensor", "channel")
    assert not torch.equal(a[1:], b[1:])


def test_int8_matmul_lands_on_the_grid(xw):
    """Per tensor, every quantized X entry is an integer multiple of max|X| / 127 (at most 255 levels)."""
    x = xw[0]
    eye = torch.eye(x.shape[1])
    xq = O.int8_matmul(x, eye, "tensor", "tensor")  # identity: exactly representable, the result is Xq
    step = x.abs().max() / 127
    codes = xq / step
    assert torch.allclose(codes, codes.round(), atol=1e-3)
    assert codes.abs().max() <= 127 + 1e-3
    assert codes.round().unique().numel() <= 255


@pytest.mark.parametrize("act, weight", [("channel", "channel"), ("token", "token"), ("row", "tensor"),
                                         ("tensor", "group")])
def test_int8_matmul_bad_granularity_names(xw, act, weight):
    x, w = xw
    with pytest.raises(ValueError, match="act must be"):
        O.int8_matmul(x, w, act, weight)


def test_shape_mismatch_names_both_shapes():
    x, w = seeded(0, 4, 8), seeded(1, 3, 7)
    for fn in (O.int8_matmul, O.llm_int8_matmul, O.smooth, O.compare_methods):
        with pytest.raises(ValueError) as err:
            fn(x, w)
        assert "(4, 8)" in str(err.value) and "(3, 7)" in str(err.value)
    with pytest.raises(ValueError, match=r"\(8,\)"):
        O.int8_matmul(torch.randn(8), w)


def test_nan_and_inf_are_value_errors(xw):
    x, w = xw
    bad = x.clone()
    bad[3, 5] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        O.int8_matmul(bad, w)
    with pytest.raises(ValueError, match="NaN"):
        O.llm_int8_matmul(bad, w)
    bad_w = w.clone()
    bad_w[0, 0] = float("inf")
    with pytest.raises(ValueError, match="infinite"):
        O.int8_matmul(x, bad_w)


# ---------------------------------------------------------------------------------------------
# with_outlier_feature
# ---------------------------------------------------------------------------------------------

def test_with_outlier_feature_keeps_the_product_and_its_inputs(xw):
    x, w = xw
    x0, w0 = x.clone(), w.clone()
    xo, wo = O.with_outlier_feature(x, w, OUTLIER, FACTOR)
    assert torch.equal(x, x0) and torch.equal(w, w0)
    assert torch.allclose(xo @ wo.t(), x @ w.t(), rtol=1e-5, atol=1e-5)
    assert torch.equal(xo[:, OUTLIER], x[:, OUTLIER] * FACTOR)
    assert torch.equal(wo[:, OUTLIER], w[:, OUTLIER] / FACTOR)
    others = [j for j in range(x.shape[1]) if j != OUTLIER]
    assert torch.equal(xo[:, others], x[:, others]) and torch.equal(wo[:, others], w[:, others])


# ---------------------------------------------------------------------------------------------
# Outliers, LLM.int8()
# ---------------------------------------------------------------------------------------------

def test_outlier_features_finds_exactly_the_outlier(xw, outlier_xw):
    assert O.outlier_features(outlier_xw[0], 6.0).tolist() == [OUTLIER]
    assert O.outlier_features(xw[0], 6.0).numel() == 0
    x = torch.zeros(3, 5)
    x[1, 2], x[0, 4] = -6.0, 5.999  # |x| >= threshold counts, negative values too
    assert O.outlier_features(x, 6.0).tolist() == [2]


def test_one_scale_per_tensor_suffers_from_the_outlier(xw, outlier_xw):
    x, w = outlier_xw
    ref = x @ w.t()
    per_tensor = O.relative_error(O.int8_matmul(x, w, "tensor", "tensor"), ref)
    llm, cols = O.llm_int8_matmul(x, w, 6.0)
    llm_err = O.relative_error(llm, ref)
    xs, ws, _ = O.smooth(x, w, 0.5)
    sq_err = O.relative_error(O.int8_matmul(xs, ws, "tensor", "tensor"), ref)
    assert cols.tolist() == [OUTLIER]
    assert per_tensor > 5 * llm_err
    assert per_tensor > 5 * sq_err
    # and without the outlier, per tensor is fine: the outlier is what hurts
    tame = O.relative_error(O.int8_matmul(*xw, "tensor", "tensor"), xw[0] @ xw[1].t())
    assert per_tensor > 5 * tame


def test_llm_int8_without_outliers_is_int8_per_token_per_channel(outlier_xw):
    x, w = outlier_xw
    y, cols = O.llm_int8_matmul(x, w, threshold=float(x.abs().max()) + 1.0)
    assert cols.numel() == 0
    assert torch.equal(y, O.int8_matmul(x, w, "token", "channel"))
    assert torch.allclose(y, ref_int8(x, w, "token", "channel"), rtol=1e-6, atol=1e-6)


def test_llm_int8_with_every_feature_an_outlier_is_the_bf16_product(outlier_xw):
    x, w = outlier_xw
    y, cols = O.llm_int8_matmul(x, w, threshold=0.0)
    assert cols.tolist() == list(range(x.shape[1]))
    assert torch.equal(y, (x.bfloat16() @ w.bfloat16().t()).float())


def test_llm_int8_decomposition(outlier_xw):
    """Threshold 6: INT8 (per token x per channel) on the tame features + bfloat16 on the outlier."""
    x, w = outlier_xw
    keep = [j for j in range(x.shape[1]) if j != OUTLIER]
    expected = ref_int8(x[:, keep], w[:, keep], "token", "channel")
    expected = expected + (x[:, [OUTLIER]].bfloat16() @ w[:, [OUTLIER]].bfloat16().t()).float()
    y, _ = O.llm_int8_matmul(x, w, 6.0)
    assert torch.allclose(y, expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# SmoothQuant
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_smooth_keeps_the_product_and_follows_the_formula(outlier_xw, alpha):
    x, w = outlier_xw
    xs, ws, s = O.smooth(x, w, alpha)
    ax, aw = x.abs().amax(0), w.abs().amax(0)
    assert torch.allclose(s, ax.pow(alpha) / aw.pow(1 - alpha), rtol=1e-5)
    assert torch.allclose(xs, x / s, rtol=1e-6) and torch.allclose(ws, w * s, rtol=1e-6)
    assert torch.allclose(xs @ ws.t(), x @ w.t(), rtol=1e-4, atol=1e-4)
    # max|X_j| / s_j = max|X_j|^(1-alpha) max|W_j|^(1-alpha);  max|W_j| s_j = max|X_j|^alpha max|W_j|^alpha
    assert torch.allclose(xs.abs().amax(0), (ax * aw).pow(1 - alpha), rtol=1e-4)
    assert torch.allclose(ws.abs().amax(0), (ax * aw).pow(alpha), rtol=1e-4)


def test_smooth_balance_points(outlier_xw):
    x, w = outlier_xw
    ax, aw = x.abs().amax(0), w.abs().amax(0)
    xs, ws, _ = O.smooth(x, w, 0.5)  # alpha 0.5: activations and weights share the range per feature
    assert torch.allclose(xs.abs().amax(0), ws.abs().amax(0), rtol=1e-5)
    assert torch.allclose(xs.abs().amax(0), (ax * aw).sqrt(), rtol=1e-5)
    xs, ws, _ = O.smooth(x, w, 1.0)  # alpha 1: every activation feature peaks at exactly 1
    assert torch.allclose(xs.abs().amax(0), torch.ones(x.shape[1]), rtol=1e-6)
    assert torch.allclose(ws.abs().amax(0), ax * aw, rtol=1e-5)
    xs, ws, _ = O.smooth(x, w, 0.0)  # alpha 0: every weight column peaks at 1
    assert torch.allclose(ws.abs().amax(0), torch.ones(x.shape[1]), rtol=1e-6)
    # the outlier feature no longer stands out in X / s at alpha 0.5
    xs, _, _ = O.smooth(x, w, 0.5)
    ratio_before = float(ax[OUTLIER] / ax.median())
    ratio_after = float(xs.abs().amax(0)[OUTLIER] / xs.abs().amax(0).median())
    assert ratio_after < ratio_before / 4


@pytest.mark.parametrize("alpha", [-0.1, 1.01, 2.0, float("nan")])
def test_smooth_alpha_outside_0_1(outlier_xw, alpha):
    with pytest.raises(ValueError, match="alpha"):
        O.smooth(*outlier_xw, alpha=alpha)


def test_relative_error_is_the_frobenius_ratio():
    ref = torch.tensor([[3.0, 4.0]])
    assert O.relative_error(torch.tensor([[3.0, 4.5]]), ref) == pytest.approx(0.1)
    assert O.relative_error(ref.clone(), ref) == 0.0


# ---------------------------------------------------------------------------------------------
# layer_inputs on a small GPT-2
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpt2() -> GPT2LMHeadModel:
    # Non-trivial layer norms, so that "the embedding" and "ln_1 of it" differ.
    return conftest.tiny_gpt2(D, VOCAB, LAYERS, POSITIONS, seed=0, perturb=0.3, norms_only=True)


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(5))


def test_layer_inputs_is_the_layer_norm_output(gpt2, ids):
    x = O.layer_inputs(gpt2, "transformer.h.0.attn.c_attn", ids)
    with torch.no_grad():
        pos = torch.arange(ids.shape[1])
        h = gpt2.transformer.wte(ids) + gpt2.transformer.wpe(pos)[None]
        expected = gpt2.transformer.h[0].ln_1(h)
    assert x.shape == (ids.numel(), D)
    assert torch.allclose(x, expected.reshape(-1, D), rtol=1e-5, atol=1e-6)
    assert not x.requires_grad


@pytest.mark.parametrize("layer, features", [("transformer.h.1.mlp.c_proj", 4 * D),
                                             ("transformer.h.0.mlp.c_fc", D), ("lm_head", D)])
def test_layer_inputs_equals_a_manual_hook(gpt2, ids, layer, features):
    module = gpt2.get_submodule(layer)
    seen = []
    handle = module.register_forward_pre_hook(lambda m, args: seen.append(args[0].detach().clone()))
    try:
        with torch.no_grad():
            gpt2(input_ids=ids)
    finally:
        handle.remove()
    x = O.layer_inputs(gpt2, layer, ids)
    assert x.shape == (ids.numel(), features)
    assert torch.equal(x, seen[0].reshape(-1, features))
    assert len(module._forward_hooks) == 0


def test_layer_inputs_removes_its_hook_when_the_forward_raises(gpt2, ids):
    module = gpt2.get_submodule("transformer.h.0.attn.c_attn")
    before = len(module._forward_hooks)

    def fail(*_):
        raise RuntimeError("a layer after the hooked one fails")

    failing = gpt2.transformer.h[1].register_forward_pre_hook(fail)
    try:
        with pytest.raises(RuntimeError, match="fails"):
            O.layer_inputs(gpt2, "transformer.h.0.attn.c_attn", ids)
    finally:
        failing.remove()
    assert len(module._forward_hooks) == before == 0


@pytest.mark.parametrize("bad, message", [
    (torch.full((1, 4), VOCAB + 5), (f"token ids hold the id {VOCAB + 5}, outside the model's vocabulary of {VOCAB} "
                                     f"tokens (ids 0 to {VOCAB - 1}); tokenize with the model's own tokenizer")),
    (torch.full((1, 4), -1), "token ids hold the id -1, outside the model's vocabulary"),
    (torch.zeros(1, POSITIONS + 1, dtype=torch.long), (f"token ids hold sequences of {POSITIONS + 1} tokens, "
                                                       f"longer than the model's context of {POSITIONS} positions")),
    (torch.rand(1, 4), "token ids must be an integer tensor [batch, seq]"),
    ([[1, 2, 3]], ("token ids must be an integer tensor [batch, seq] (as a tokenizer returns with "
                   "return_tensors='pt'), got list")),
    (torch.zeros(1, 0, dtype=torch.long), "token ids are empty (shape (1, 0)): pass at least one token"),
])  # fmt: skip
def test_layer_inputs_names_the_limit_instead_of_an_index_error(gpt2, bad, message):
    module = gpt2.get_submodule("transformer.h.0.attn.c_attn")
    with pytest.raises(ValueError) as err:
        O.layer_inputs(gpt2, "transformer.h.0.attn.c_attn", bad)
    assert str(err.value).startswith(message)
    assert len(module._forward_hooks) == 0


def test_layer_inputs_reads_one_sequence_as_a_batch_of_one(gpt2, ids):
    layer = "transformer.h.0.mlp.c_fc"
    assert torch.equal(O.layer_inputs(gpt2, layer, ids[0]), O.layer_inputs(gpt2, layer, ids[:1]))


# ---------------------------------------------------------------------------------------------
# compare_methods / chapter 5's outlier_table
# ---------------------------------------------------------------------------------------------

def test_compare_methods_rows_and_table(outlier_xw):
    x, w = outlier_xw
    rows = O.compare_methods(x, w, threshold=6.0, alpha=0.5)
    assert len(rows) == 5
    assert all(math.isfinite(r.error) and r.error >= 0 for r in rows)
    ref = x @ w.t()
    expected = [ref_int8(x, w, "tensor", "tensor"), ref_int8(x, w, "tensor", "channel"),
                ref_int8(x, w, "token", "channel")]
    for row, y in zip(rows[:3], expected):
        assert row.error == pytest.approx(float((y - ref).norm() / ref.norm()), rel=1e-4)
    # the share of non-zero X entries that one per-tensor scale rounds to zero
    zeroed = float(((ref_fake(x, False) == 0) & (x != 0)).float().mean())
    assert rows[0].zeroed == pytest.approx(zeroed)
    assert rows[0].zeroed > 0.3  # the outlier's scale wipes out a large part of X
    assert rows[2].zeroed < rows[0].zeroed
    assert "1 feature(s)" in rows[3].method and math.isnan(rows[3].zeroed)
    assert rows[3].error == pytest.approx(O.relative_error(O.llm_int8_matmul(x, w, 6.0)[0], ref))
    assert rows[0].error > 5 * rows[3].error and rows[0].error > 5 * rows[4].error

    table = ch05.outlier_table(rows, title="outliers")
    text = str(table)
    assert text.startswith("outliers")
    assert len(table.rows) == 5
    for r, cells in zip(rows, table.rows):
        assert cells[0] == r.method
        assert cells[1] == f"{100 * r.error:.2f}%"
        assert cells[2] == ("-" if math.isnan(r.zeroed) else f"{100 * r.zeroed:.1f}%")
        assert cells[1] in text


# ---------------------------------------------------------------------------------------------
# with_token_outliers
# ---------------------------------------------------------------------------------------------

def test_with_token_outliers_scales_one_feature_per_token(xw):
    x, w = xw
    xo, wo, factors = O.with_token_outliers(x, w, OUTLIER, low=10.0, high=60.0, seed=3)
    assert factors.shape == (x.shape[0],) and 10.0 <= float(factors.min()) and float(factors.max()) <= 60.0
    assert float(factors.max() / factors.min()) > 2  # the size really differs from token to token
    torch.testing.assert_close(xo[:, OUTLIER], x[:, OUTLIER] * factors)
    torch.testing.assert_close(wo[:, OUTLIER], w[:, OUTLIER] / factors.mean())
    others = [j for j in range(x.shape[1]) if j != OUTLIER]
    assert torch.equal(xo[:, others], x[:, others]) and torch.equal(wo[:, others], w[:, others])
    again = O.with_token_outliers(x, w, OUTLIER, low=10.0, high=60.0, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(again, (xo, wo, factors)))  # seeded
    assert not torch.equal(O.with_token_outliers(x, w, OUTLIER, seed=4)[2], O.with_token_outliers(x, w, OUTLIER)[2])


def test_smoothquant_undoes_a_constant_outlier_exactly_but_not_a_per_token_one(xw):
    """A x50 feature with its column /50 is undone by SmoothQuant's s_j (the same error as without it);
    a feature whose size differs per token is not: SmoothQuant helps a lot, but not back to the tame error."""
    x, w = xw
    tame = O.compare_methods(x, w)[-1].error
    constant = O.compare_methods(*O.with_outlier_feature(x, w, OUTLIER, FACTOR))[-1].error
    assert constant == pytest.approx(tame, rel=1e-3)
    xo, wo, _ = O.with_token_outliers(x, w, OUTLIER, low=2.0, high=400.0)  # a wide spread across tokens
    rows = O.compare_methods(xo, wo)
    per_tensor, smooth = rows[0].error, rows[-1].error
    assert smooth < 0.25 * per_tensor
    assert smooth > 1.05 * tame


@pytest.mark.parametrize("kwargs, message", [
    ({"feature": 128}, "feature must be a column"),
    ({"feature": -1}, "feature must be a column"),
    ({"feature": 0, "low": 0.0}, "0 < low <= high"),
    ({"feature": 0, "low": 5.0, "high": 2.0}, "0 < low <= high"),
])
def test_with_token_outliers_bad_input(xw, kwargs, message):
    with pytest.raises(ValueError, match=message):
        O.with_token_outliers(*xw, **kwargs)


def test_an_unknown_layer_gets_one_line_naming_real_ones(gpt2, ids):
    with pytest.raises(ValueError, match=r"no layer 'transformer.h.9.mlp'.*e\.g\. "
                                         r"'transformer\.h\.0\.attn\.c_attn'"):
        O.layer_inputs(gpt2, "transformer.h.9.mlp", ids)
