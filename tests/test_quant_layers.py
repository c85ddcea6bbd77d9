"""Tests for course_lib.compression.quant_layers: quantized linear / embedding layers and whole quantized models.

What this file proves, on small seeded GPT-2s built here:

* ``QuantLinear`` computes ``x @ W_q^T + b`` with W_q the dequantized weight, for ``nn.Linear``
  and for GPT-2's transposed ``Conv1D``; ``act_bits`` rounds activations per token;
* ``quantize_model`` leaves the original alone, replaces every linear layer and the token
  embedding, keeps GPT-2's tied ``wte`` / ``lm_head`` as ONE quantized weight, and its logits equal
  those of the float model with every weight replaced by its dequantized value;
* ``model_bytes`` / ``effective_bits`` match a hand count from the layer shapes; casts halve bytes;
* safetensors round trips are bit-exact and write a tied weight once;
* QAT (``prepare_qat``) computes what ``quantize_model`` stores, trains the float weights through
  the straight-through estimator, and ``finish_qat`` + ``quantize_model`` reproduce it;
* bad input is a ValueError that names the layer or says what to do.
"""

from __future__ import annotations

import copy
import math

import conftest
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from transformers import GPT2LMHeadModel
from transformers.pytorch_utils import Conv1D

from course_lib.compression import quant as Q
from course_lib.compression import quant_layers as L

D, VOCAB, LAYERS, POSITIONS = 128, 256, 2, 32  # D a multiple of 128 so that every g128 preset fits


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_gpt2(seed: int = 0) -> GPT2LMHeadModel:
    return conftest.tiny_gpt2(D, VOCAB, LAYERS, POSITIONS, seed)


@pytest.fixture(scope="module")
def gpt2() -> GPT2LMHeadModel:
    return tiny_gpt2()


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(3))


def logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def dequantized_reference(model: GPT2LMHeadModel, config, embeddings: bool = True) -> GPT2LMHeadModel:
    """A float copy whose linear weights (and token embedding) are replaced by their quantize-dequantize."""
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for module in ref.modules():
            if isinstance(module, Conv1D):
                module.weight.copy_(Q.quantize_dequantize(module.weight.t(), config).t())
            elif isinstance(module, nn.Linear) and module is not ref.lm_head:
                module.weight.copy_(Q.quantize_dequantize(module.weight, config))
        if embeddings:  # lm_head shares it
            ref.transformer.wte.weight.copy_(Q.quantize_dequantize(ref.transformer.wte.weight, config))
    return ref


def layer_shapes() -> list[tuple[int, int]]:
    """The (out, in) weight matrices of the tiny GPT-2, the tied embedding once."""
    per_block = [(3 * D, D), (D, D), (4 * D, D), (D, 4 * D)]
    return [(VOCAB, D)] + per_block * LAYERS


#: float parameters left after quantization: per block 2 layer norms (2D each) and biases 3D+D+4D+D;
#: the final layer norm and the position embedding
FLOAT_LEFT = LAYERS * (4 * D + 9 * D) + 2 * D + POSITIONS * D


# ---------------------------------------------------------------------------------------------
# 1. QuantLinear
# ---------------------------------------------------------------------------------------------
def quant_linear(layer: nn.Module, config: str, act_bits: int | None = None) -> L.QuantLinear:
    """A QuantLinear holding ``layer``'s weight quantized with ``config``, and its bias."""
    q = Q.quantize(L.weight_matrix(layer).detach(), config)
    return L.QuantLinear(L.QuantizedWeight(q), layer.bias, act_bits)


@pytest.mark.parametrize("name", ["int8-channel", "int4-g32", "int3-g128", "nf4-dq"])
def test_quant_linear_from_nn_linear_uses_the_dequantized_weight(name):
    torch.manual_seed(4)
    lin = nn.Linear(256, 96)
    ql = quant_linear(lin, name)
    assert ql.qweight.shape == (96, 256) and (ql.in_features, ql.out_features) == (256, 96)
    w = Q.quantize(lin.weight.detach(), name).dequantize()
    assert torch.equal(ql.weight, w)
    x = torch.randn(3, 5, 256)
    with torch.no_grad():
        assert torch.equal(ql(x), F.linear(x, w, lin.bias))
        lin.bias.add_(1.0)  # the layer copied the bias
        assert not torch.equal(ql(x), F.linear(x, w, lin.bias))


@pytest.mark.parametrize("name", ["int8-channel", "int4-g128", "nf4"])
def test_quant_linear_from_conv1d_transposes_the_weight(name):
    torch.manual_seed(5)
    conv = Conv1D(96, 256)  # nf=96 outputs, nx=256 inputs; weight stored (in, out)
    with torch.no_grad():
        conv.bias.normal_()
    assert conv.weight.shape == (256, 96)
    ql = quant_linear(conv, name)
    assert ql.qweight.shape == (96, 256)
    w = Q.quantize(conv.weight.detach().t(), name).dequantize()
    x = torch.randn(4, 7, 256)
    with torch.no_grad():
        assert torch.equal(ql(x), F.linear(x, w, conv.bias))
        float_conv = copy.deepcopy(conv)
        float_conv.weight.copy_(w.t())
        assert torch.allclose(ql(x), float_conv(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [lambda: nn.Linear(512, 64), lambda: Conv1D(64, 512)])
def test_int8_per_channel_layer_is_close_to_the_float_layer(make):
    torch.manual_seed(6)
    layer = make()
    ql = quant_linear(layer, "int8-channel")
    x = torch.randn(8, 512)
    with torch.no_grad():
        exact, approx = layer(x), ql(x)
    rel = float((approx - exact).norm() / exact.norm())
    assert 0 < rel < 0.01
    rel4 = float((quant_linear(layer, "int4-channel")(x) - exact).norm() / exact.norm())
    assert rel < rel4 < 0.2  # 4 bits: larger error, still an approximation


def test_quant_linear_without_bias():
    lin = nn.Linear(128, 32, bias=False)
    ql = quant_linear(lin, "int4-g128")
    assert ql.bias is None
    x = torch.randn(2, 128)
    assert torch.equal(ql(x), x @ ql.weight.t())


def test_act_bits_rounds_activations_per_token():
    torch.manual_seed(7)
    lin = nn.Linear(128, 64)
    plain = quant_linear(lin, "int8-channel")
    w8a8 = quant_linear(lin, "int8-channel", act_bits=8)
    x = torch.randn(2, 6, 128)
    x[0, 0] *= 1000.0  # one loud token: per-token scales keep the quiet ones precise
    with torch.no_grad():
        y, y8 = plain(x), w8a8(x)
    assert not torch.equal(y, y8)
    flat = x.reshape(-1, 128)
    scale = flat.abs().amax(1, keepdim=True) / 127  # per token, float32
    xq = torch.round(flat * (1.0 / scale)).clamp(-127, 127) * scale
    expected = F.linear(xq.reshape(x.shape), plain.weight, lin.bias)
    assert torch.equal(y8, expected)
    rel = ((y8 - y).norm(dim=-1) / y.norm(dim=-1))
    assert float(rel.max()) < 0.02  # every token, the quiet ones included
    per_tensor_scale = flat.abs().max() / 127  # what one scale for all tokens would do to a quiet token
    assert float(per_tensor_scale) > 100 * float(scale[1])
    assert "activations INT8 per token" in repr(w8a8)


# ---------------------------------------------------------------------------------------------
# 2. quantize_model on a GPT-2, every preset
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(Q.PRESETS))
def test_quantize_model_every_preset(gpt2, ids, name):
    before = state(gpt2)
    qm = L.quantize_model(gpt2, name)
    after = gpt2.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert isinstance(gpt2.lm_head, nn.Linear) and gpt2.lm_head.weight is gpt2.transformer.wte.weight

    assert not any(isinstance(m, (nn.Linear, Conv1D)) for m in qm.modules())
    assert isinstance(qm.get_input_embeddings(), L.QuantEmbedding)
    assert isinstance(qm.transformer.wpe, nn.Embedding)  # positions stay float
    assert qm.transformer.wte.qweight is qm.lm_head.qweight  # tied: one quantized copy
    layers = L.quantized_layers(qm)
    assert len(layers) == 1 + 4 * LAYERS
    assert sorted(q.shape for q in layers) == sorted(layer_shapes())
    assert all(q.config == Q.PRESETS[name] for q in layers)
    assert qm.quantization == Q.PRESETS[name] and not qm.training

    quantized = sum(sum(Q.storage_bytes(s, name).values()) for s in layer_shapes())
    assert sum(q.nbytes for q in layers) == quantized
    assert sum(p.numel() for p in qm.parameters()) == FLOAT_LEFT
    assert all(p.dtype == torch.float32 for p in qm.parameters())
    assert L.model_bytes(qm) == quantized + 4 * FLOAT_LEFT
    values = sum(math.prod(s) for s in layer_shapes())
    assert L.effective_bits(qm) == 8 * quantized / values

    ref = dequantized_reference(gpt2, name)
    out = logits(qm, ids)
    assert torch.allclose(out, logits(ref, ids), rtol=1e-4, atol=1e-4)
    assert not torch.equal(out, logits(gpt2, ids))

    prompt = ids[:1, :5]
    with torch.no_grad():
        generated = qm.generate(prompt, max_new_tokens=3, do_sample=False, min_new_tokens=3)
    assert generated.shape == (1, 8) and torch.equal(generated[:, :5], prompt)
    assert int(generated[0, 5]) == int(logits(qm, prompt)[0, -1].argmax())


def test_int8_channel_logits_are_close_to_float(gpt2, ids):
    exact = logits(gpt2, ids)
    err = {name: float((logits(L.quantize_model(gpt2, name), ids) - exact).norm() / exact.norm())
           for name in ("int8-channel", "int8-tensor", "int4-g32", "int3-g128")}
    assert 0 < err["int8-channel"] < 0.02
    assert err["int8-channel"] < err["int8-tensor"] < err["int4-g32"] < err["int3-g128"] < 0.5


def test_effective_bits_by_hand(gpt2):
    assert L.effective_bits(L.quantize_model(gpt2, "int4-g128")) == 4 + (16 + 4) / 128
    assert L.effective_bits(L.quantize_model(gpt2, "nf4")) == 4.5
    assert L.effective_bits(L.quantize_model(gpt2, "int8-channel")) == pytest.approx(
        8 * sum(r * c + 2 * r for r, c in layer_shapes()) / sum(r * c for r, c in layer_shapes()))
    assert L.effective_bits(gpt2) == 32.0
    assert L.effective_bits(L.quantize_model(gpt2, "bf16")) == 16.0


def test_float_casts_halve_model_bytes_exactly(gpt2, ids):
    full = L.model_bytes(gpt2)
    params = sum(p.numel() for p in gpt2.parameters())  # the tied weight once
    assert full == 4 * params
    assert L.model_bytes(L.quantize_model(gpt2, "fp32")) == full
    for name, dtype in (("fp16", torch.float16), ("BF16", torch.bfloat16)):
        cast = L.quantize_model(gpt2, name)
        assert L.model_bytes(cast) * 2 == full
        assert all(p.dtype == dtype for p in cast.parameters())
        assert cast.lm_head.weight is cast.transformer.wte.weight
    assert next(gpt2.parameters()).dtype == torch.float32
    assert L.describe("fp16") == "FP16" and L.describe("int4-g128") == "INT4 zero-point g128"


def test_embeddings_false_keeps_the_tied_float_embedding(gpt2, ids):
    qm = L.quantize_model(gpt2, "int4-g128", embeddings=False)
    assert type(qm.transformer.wte) is nn.Embedding and qm.transformer.wte.weight.dtype == torch.float32
    assert isinstance(qm.lm_head, nn.Linear) and qm.lm_head.weight is qm.transformer.wte.weight
    assert torch.equal(qm.transformer.wte.weight, gpt2.transformer.wte.weight)
    assert len(L.quantized_layers(qm)) == 4 * LAYERS
    assert not any(isinstance(m, Conv1D) for m in qm.modules())
    quantized = sum(sum(Q.storage_bytes(s, "int4-g128").values()) for s in layer_shapes()[1:])
    assert L.model_bytes(qm) == quantized + 4 * (FLOAT_LEFT + VOCAB * D)
    ref = dequantized_reference(gpt2, "int4-g128", embeddings=False)
    assert torch.allclose(logits(qm, ids), logits(ref, ids), rtol=1e-4, atol=1e-4)


def test_quantize_model_on_a_plain_sequential():
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))
    qm = L.quantize_model(model, "int8-channel", act_bits=8)
    assert all(isinstance(qm[i], L.QuantLinear) for i in (0, 2)) and isinstance(model[0], nn.Linear)
    assert all(m.act_config is not None and m.act_config.bits == 8 for m in (qm[0], qm[2]))
    x = torch.randn(5, 64)
    with torch.no_grad():
        assert torch.allclose(qm(x), model(x), rtol=0.05, atol=0.02)


# ---------------------------------------------------------------------------------------------
# 3. safetensors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["int4-g128", "nf4-dq", "int3-g128", "int8-channel"])
def test_safetensors_round_trip_is_exact(gpt2, ids, tmp_path, name):
    from safetensors import safe_open

    qm = L.quantize_model(gpt2, name)
    path = L.save_quantized(qm, tmp_path)
    assert path == tmp_path / "model.safetensors" and (tmp_path / "config.json").is_file()
    loaded = L.load_quantized(tmp_path)
    assert torch.equal(logits(loaded, ids), logits(qm, ids))
    assert loaded.quantization == Q.PRESETS[name]
    assert loaded.transformer.wte.qweight is loaded.lm_head.qweight
    assert not any(isinstance(m, (nn.Linear, Conv1D)) for m in loaded.modules())

    size = path.stat().st_size
    assert size == L.safetensors_bytes(qm)
    assert 0 < size - L.model_bytes(qm) < 8192  # the JSON header only
    with safe_open(str(path), framework="pt") as f:
        keys = set(f.keys())
    tied = {k for k in keys if k.endswith("qweight.packed") and ("wte" in k or "lm_head" in k)}
    assert len(tied) == 1  # written once
    stored = 0
    with safe_open(str(path), framework="pt") as f:
        for k in keys:
            t = f.get_tensor(k)
            stored += t.numel() * t.element_size()
    assert stored == L.model_bytes(qm)


def test_safetensors_round_trip_float_and_embeddings_false(gpt2, ids, tmp_path):
    qm = L.quantize_model(gpt2, "int4-g64", embeddings=False)
    L.save_quantized(qm, tmp_path / "q")
    loaded = L.load_quantized(tmp_path / "q")
    assert torch.equal(logits(loaded, ids), logits(qm, ids))
    assert type(loaded.transformer.wte) is nn.Embedding and loaded.lm_head.weight is loaded.transformer.wte.weight
    L.save_quantized(gpt2, tmp_path / "f")
    plain = L.load_quantized(tmp_path / "f")
    assert torch.equal(logits(plain, ids), logits(gpt2, ids))
    assert L.quantized_layers(plain) == []


# ---------------------------------------------------------------------------------------------
# 4. Quantization-aware training
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["int4-g128", "int3-g128"])
def test_qat_forward_training_and_finish(gpt2, ids, name):
    before = state(gpt2)
    prepared = L.prepare_qat(gpt2, name)
    assert all(torch.equal(v, gpt2.state_dict()[k]) for k, v in before.items())
    wte, head = prepared.transformer.wte, prepared.lm_head
    assert wte.parametrizations.weight.original is head.parametrizations.weight.original
    prepared.eval()
    assert torch.allclose(logits(prepared, ids), logits(L.quantize_model(gpt2, name), ids), rtol=1e-5, atol=1e-5)

    originals = {n: p for n, p in prepared.named_parameters() if n.endswith("original")}
    assert len(originals) == 1 + 4 * LAYERS  # the tied weight once
    opt = torch.optim.SGD(prepared.parameters(), lr=0.5)
    for _ in range(2):
        opt.zero_grad()
        loss = prepared(ids, labels=ids).loss
        loss.backward()
        for n, p in originals.items():
            assert p.grad is not None and float(p.grad.abs().sum()) > 0, n
        opt.step()
    assert not torch.equal(originals["transformer.wte.parametrizations.weight.original"], gpt2.transformer.wte.weight)
    trained = logits(prepared, ids)

    finished = L.finish_qat(prepared)
    assert finished is prepared
    assert not any(hasattr(m, "parametrizations") for m in finished.modules())
    assert finished.lm_head.weight is finished.transformer.wte.weight
    assert isinstance(finished.lm_head.weight, nn.Parameter)
    requantized = L.quantize_model(finished, name)
    assert requantized.transformer.wte.qweight is requantized.lm_head.qweight
    assert torch.allclose(logits(requantized, ids), trained, rtol=1e-5, atol=1e-5)


def test_qat_embeddings_false_leaves_the_tied_embedding_float(gpt2, ids):
    prepared = L.prepare_qat(gpt2, "int4-g128", embeddings=False).eval()
    assert not hasattr(prepared.transformer.wte, "parametrizations")
    assert not hasattr(prepared.lm_head, "parametrizations")
    ref = L.quantize_model(gpt2, "int4-g128", embeddings=False)
    assert torch.allclose(logits(prepared, ids), logits(ref, ids), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# 5. Bad input
# ---------------------------------------------------------------------------------------------

def test_nothing_to_quantize():
    for fn in (L.quantize_model, L.prepare_qat):
        with pytest.raises(ValueError, match="Sequential has no nn.Linear or Conv1D layer: there is nothing to quantize"):
            fn(nn.Sequential(nn.ReLU()), "int8-channel")
    with pytest.raises(ValueError, match="expected a torch model \\(nn.Module\\), got dict"):
        L.quantize_model({}, "int8-channel")


def test_nan_weight_names_the_parameter(gpt2):
    broken = copy.deepcopy(gpt2)
    with torch.no_grad():
        broken.transformer.h[0].attn.c_attn.weight[3, 5] = float("nan")
    with pytest.raises(ValueError, match=r"cannot quantize transformer\.h\.0\.attn\.c_attn\.weight: "
                                         r"tensor has 1 NaN and 0 infinite.*nan_to_num"):
        L.quantize_model(broken, "int4-g128")


def test_group_size_that_does_not_divide_names_the_layer(gpt2):
    cfg = Q.QuantConfig(4, "zeropoint", "group", 256)
    with pytest.raises(ValueError, match=r"cannot quantize transformer\.wte\.weight: group_size=256 does not "
                                         r"divide the row length 128"):
        L.quantize_model(gpt2, cfg)
    for fn in (L.quantize_model, L.prepare_qat):
        with pytest.raises(ValueError, match=r"cannot quantize transformer\.h\.0\.attn\.c_attn\.weight: "
                                             r"group_size=256 does not divide the row length 128"):
            fn(gpt2, cfg, embeddings=False)


def test_unknown_preset_lists_valid_names(gpt2):
    for fn in (L.quantize_model, L.prepare_qat):
        with pytest.raises(ValueError, match="unknown quantization preset 'int2'; valid values: int8-tensor, "
                                             ".*int4-g128.*nf4-dq"):
            fn(gpt2, "int2")


def test_load_from_an_empty_directory(tmp_path):
    with pytest.raises(ValueError, match="does not hold a saved quantized model .*write one with "
                                         r"course_lib\.compression\.quant_layers\.save_quantized\(model, directory\)"):
        L.load_quantized(tmp_path)
