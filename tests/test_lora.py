"""Tests for course_lib.compression.lora: LoRA adapters, QLoRA on an NF4 model, and fine-tuning memory.

What this file proves, on small seeded GPT-2s built here:

* ``LoRALinear`` on ``nn.Linear``, GPT-2's ``Conv1D`` and ``QuantLinear`` starts exactly at the
  base layer (B = 0) and computes ``base(x) + (alpha / r) x A^T B^T`` (checked against a product
  written here), with A (r, in) and B (out, r); bad ranks and alphas are ValueErrors;
* ``add_lora`` (on a float GPT-2 and on its NF4 + DQ copy) freezes everything but the adapters,
  whose count is r (in + out) per wrapped layer, computed here from the layer shapes; it leaves
  ``lm_head`` and the original model alone, is seeded without touching the global RNG, and names
  ``targets=`` when nothing matches;
* in a QLoRA model only the adapters get gradients and an optimizer step changes nothing else;
* ``training.train`` on a LoRA model changes only the adapters and gives optimizer state to them alone;
* ``measure_finetune_memory`` counts gradients, AdamW's states (two moments and a ``step`` tensor
  per parameter) and stored weights as computed here from the parameter list; ``ch05.finetune_memory_table``
  shows trainable parameters as a share of the model.
"""

from __future__ import annotations

import copy
import math

import conftest
import pytest
import torch
from torch import nn
from transformers import GPT2LMHeadModel
from transformers.pytorch_utils import Conv1D

from course_lib.chapters import ch05
from course_lib.compression import lora, quant
from course_lib.compression import quant_layers as L
from course_lib.compression.lora import LoRALinear
from course_lib.text import data, models, training

D, VOCAB, LAYERS, POSITIONS = 64, 128, 2, 32  # D a multiple of 64 so that NF4's blocks fit
RANK, ALPHA = 4, 8.0


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_gpt2(seed: int = 0) -> GPT2LMHeadModel:
    return conftest.tiny_gpt2(D, VOCAB, LAYERS, POSITIONS, seed)


@pytest.fixture(scope="module")
def gpt2() -> GPT2LMHeadModel:
    return tiny_gpt2()


@pytest.fixture(scope="module")
def nf4_gpt2(gpt2) -> nn.Module:
    return L.quantize_model(gpt2, "nf4-dq")


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(3))


def state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def wrapped_shapes(model: nn.Module) -> list[tuple[str, int, int]]:
    """(name, in, out) of GPT-2's c_attn / c_proj / c_fc layers, read from the weights themselves."""
    out = []
    for name, m in model.named_modules():
        if name.rpartition(".")[2] not in ("c_attn", "c_proj", "c_fc"):
            continue
        if isinstance(m, Conv1D):  # weight stored (in, out)
            out.append((name, m.weight.shape[0], m.weight.shape[1]))
        elif isinstance(m, L.QuantLinear):  # stored (out, in)
            out_f, in_f = m.qweight.shape
            out.append((name, in_f, out_f))
    return out


# ---------------------------------------------------------------------------------------------
# LoRALinear
# ---------------------------------------------------------------------------------------------

def make_base(kind: str) -> tuple[nn.Module, int, int]:
    torch.manual_seed(7)
    if kind == "linear":
        return nn.Linear(24, 40), 24, 40
    if kind == "conv1d":
        conv = Conv1D(40, 24)  # nf=40 outputs, nx=24 inputs, weight (24, 40)
        with torch.no_grad():
            conv.weight.normal_(0, 0.2)
            conv.bias.normal_(0, 0.2)
        return conv, 24, 40
    linear = nn.Linear(64, 40)
    packed = L.QuantizedWeight(quant.quantize(linear.weight.detach(), "nf4-dq"))
    return L.QuantLinear(packed, linear.bias), 64, 40


@pytest.mark.parametrize("kind", ["linear", "conv1d", "quant"])
def test_lora_linear_starts_at_the_base_and_adds_the_low_rank_product(kind):
    base, n_in, n_out = make_base(kind)
    layer = LoRALinear(base, rank=RANK, alpha=ALPHA)
    assert layer.base is base
    assert layer.lora_a.shape == (RANK, n_in) and layer.lora_b.shape == (n_out, RANK)
    assert layer.lora_a.requires_grad and layer.lora_b.requires_grad
    assert bool((layer.lora_a != 0).any()) and not bool(layer.lora_b.any())
    x = torch.randn(3, 5, n_in, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        base_out = base(x)
        assert torch.equal(layer(x), base_out)
        layer.lora_b.copy_(torch.randn(n_out, RANK, generator=torch.Generator().manual_seed(2)))
        a, b = layer.lora_a.detach(), layer.lora_b.detach()
        expected = base_out + (ALPHA / RANK) * torch.einsum("bti,ri,or->bto", x, a, b)
        got = layer(x)
    assert got.shape == (3, 5, n_out)
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, base_out, atol=1e-3)


def test_lora_scaling_is_alpha_over_rank():
    base, _, _ = make_base("linear")
    layer = LoRALinear(base, rank=8, alpha=4.0)
    assert layer.scaling == 0.5 and layer.rank == 8


@pytest.mark.parametrize("rank", [0, -2, 2.5, True, "4"])
def test_bad_rank(rank):
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(nn.Linear(4, 4), rank=rank)


@pytest.mark.parametrize("alpha", [0, -1, float("nan"), float("inf")])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        LoRALinear(nn.Linear(4, 4), rank=2, alpha=alpha)


def test_lora_linear_refuses_other_layers():
    with pytest.raises(ValueError, match="Embedding"):
        LoRALinear(nn.Embedding(10, 4))


# ---------------------------------------------------------------------------------------------
# add_lora
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["float", "nf4"])
def test_add_lora_trains_only_the_adapters(gpt2, nf4_gpt2, ids, which):
    base = gpt2 if which == "float" else nf4_gpt2
    before = state(base)
    shapes = wrapped_shapes(base)
    assert len(shapes) == 4 * LAYERS
    model = lora.add_lora(base, rank=RANK, alpha=ALPHA)

    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(n.endswith(("lora_a", "lora_b")) for n in trainable)
    assert len(trainable) == 2 * len(shapes)
    wrapped = {n for n, m in model.named_modules() if isinstance(m, LoRALinear)}
    assert wrapped == {n for n, _, _ in shapes}
    n_adapter = sum(RANK * (i + o) for _, i, o in shapes)
    n_base = sum({id(p): p.numel() for p in base.parameters()}.values())
    assert lora.count_trainable(model) == (n_adapter, n_base + n_adapter)
    if which == "float":
        assert n_adapter == LAYERS * RANK * (4 * D + 2 * D + 5 * D + 5 * D)  # c_attn, attn c_proj, c_fc, mlp c_proj

    # lm_head stays as it was, still tied to the embedding
    assert not isinstance(model.lm_head, LoRALinear)
    assert type(model.lm_head) is type(base.lm_head)
    if which == "float":
        assert model.lm_head.weight is model.transformer.wte.weight
    else:
        assert model.lm_head.qweight is model.transformer.wte.qweight

    # the original is untouched: same layers, same tensors, still trainable where it was
    assert not any(isinstance(m, LoRALinear) for m in base.modules())
    after = state(base)
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    if which == "float":
        assert all(p.requires_grad for p in base.parameters())

    # B = 0: the adapted model starts exactly where the base model is
    with torch.no_grad():
        assert torch.equal(model(ids).logits, base(ids).logits)


def test_add_lora_on_a_bf16_model_runs_and_starts_at_the_base(gpt2, ids):
    base = L.quantize_model(gpt2, "bf16")
    model = lora.add_lora(base, rank=RANK, alpha=ALPHA)
    with torch.no_grad():
        out = model(ids).logits
        assert out.dtype == torch.bfloat16
        assert torch.equal(out, base(ids).logits)


def test_add_lora_is_seeded_and_leaves_the_global_rng_alone(gpt2):
    rng = torch.get_rng_state()
    a = lora.add_lora(gpt2, rank=RANK, seed=0)
    assert torch.equal(torch.get_rng_state(), rng)
    b = lora.add_lora(gpt2, rank=RANK, seed=0)
    c = lora.add_lora(gpt2, rank=RANK, seed=1)
    pa, pb, pc = ({n: p for n, p in m.named_parameters() if p.requires_grad} for m in (a, b, c))
    assert pa.keys() == pb.keys() == pc.keys()
    assert all(torch.equal(pa[n], pb[n]) for n in pa)
    assert not all(torch.equal(pa[n], pc[n]) for n in pa if n.endswith("lora_a"))
    # distinct layers get distinct initial A matrices
    a_mats = [p for n, p in pa.items() if n.endswith("attn.c_proj.lora_a")]
    assert len(a_mats) == LAYERS and not torch.equal(a_mats[0], a_mats[1])


def test_add_lora_targets(gpt2):
    model = lora.add_lora(gpt2, rank=2, targets=["c_fc"])
    wrapped = [n for n, m in model.named_modules() if isinstance(m, LoRALinear)]
    assert wrapped == [f"transformer.h.{i}.mlp.c_fc" for i in range(LAYERS)]
    assert lora.count_trainable(model)[0] == LAYERS * 2 * (D + 4 * D)
    with pytest.raises(ValueError, match="targets="):
        lora.add_lora(gpt2, targets=("q_proj", "v_proj"))
    with pytest.raises(ValueError, match="q_proj"):
        lora.add_lora(gpt2, targets=("q_proj",))


def test_add_lora_bad_rank_is_a_value_error(gpt2):
    with pytest.raises(ValueError, match="rank"):
        lora.add_lora(gpt2, rank=0)


# ---------------------------------------------------------------------------------------------
# QLoRA gradients
# ---------------------------------------------------------------------------------------------

def test_qlora_gradients_reach_only_the_adapters(nf4_gpt2, ids):
    model = lora.add_lora(nf4_gpt2, rank=RANK, alpha=ALPHA).train()
    frozen = state(model)
    for k in list(frozen):
        if k.endswith(("lora_a", "lora_b")):
            del frozen[k]
    assert any(k.endswith("qweight.packed") for k in frozen)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    for name, p in model.named_parameters():
        if name.endswith(("lora_a", "lora_b")):
            assert p.grad is not None, name
        else:
            assert p.grad is None, name
    assert any(bool(p.grad.abs().sum() > 0) for n, p in model.named_parameters() if n.endswith("lora_b"))

    adapters = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    opt.step()
    after = state(model)
    assert all(torch.equal(frozen[k], after[k]) for k in frozen)
    changed = [n for n, p in model.named_parameters() if p.requires_grad and not torch.equal(p, adapters[n])]
    assert any(n.endswith("lora_b") for n in changed)


# ---------------------------------------------------------------------------------------------
# training.train on a LoRA model
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def texts() -> list[str]:
    return data.load_corpus("course", "validation")[:50]


def test_train_changes_only_the_adapters(monkeypatch, tokenizer, texts):
    cfg = models.tiny_config("gpt2", tokenizer, hidden=32, layers=1, heads=2, context=64)
    model = lora.add_lora(models.build_model(cfg), rank=RANK, alpha=ALPHA)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    made = []
    real_adamw = torch.optim.AdamW

    class Recording(real_adamw):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(torch.optim, "AdamW", Recording)
    recipe = training.Recipe(steps=3, batch_size=2, seq_len=32, lr=1e-2, warmup_steps=1, seed=0)
    history = training.train(model, "gpt2", tokenizer, recipe, texts=texts, progress=False)
    assert len(history) == 3 and all(math.isfinite(h) and h > 0 for h in history)

    adapters = {n for n, p in model.named_parameters() if n.endswith(("lora_a", "lora_b"))}
    assert len(adapters) == 2 * 4  # A and B of c_attn, attn.c_proj, c_fc and mlp.c_proj in the one block
    for n, p in model.named_parameters():
        if n in adapters:
            assert not torch.equal(p, before[n]), f"{n} did not train"
        else:
            assert torch.equal(p, before[n]), f"frozen {n} changed"
    assert len(made) == 1
    opt = made[0]
    by_id = {id(p): n for n, p in model.named_parameters()}
    in_groups = {by_id[id(p)] for g in opt.param_groups for p in g["params"]}
    with_state = {by_id[id(p)] for p in opt.state}
    assert in_groups == adapters and with_state == adapters


# ---------------------------------------------------------------------------------------------
# measure_finetune_memory / chapter 5's finetune_memory_table
# ---------------------------------------------------------------------------------------------

def adamw_state_bytes(params: list[torch.Tensor]) -> int:
    """exp_avg and exp_avg_sq like each parameter (FP32), plus a float32 scalar ``step`` per parameter."""
    return sum(2 * p.numel() * p.element_size() + 4 for p in params)


def test_full_finetune_memory_fp32(gpt2, ids):
    before = state(gpt2)
    params = list({id(p): p for p in gpt2.parameters()}.values())  # the tied embedding once
    n = sum(p.numel() for p in params)
    mem = lora.measure_finetune_memory(gpt2, {"input_ids": ids, "labels": ids}, "full")
    assert mem.label == "full" and mem.trainable == n
    assert mem.gradients == 4 * n
    assert mem.optimizer == 8 * n + 4 * len(params) == adamw_state_bytes(params)
    assert mem.weights == L.model_bytes(gpt2) == 4 * n
    assert mem.total_bytes == mem.weights + mem.gradients + mem.optimizer
    after = state(gpt2)
    assert all(torch.equal(before[k], after[k]) for k in before)  # measured on a copy


def test_qlora_finetune_memory(gpt2, nf4_gpt2, ids):
    model = lora.add_lora(nf4_gpt2, rank=RANK, alpha=ALPHA)
    adapters = [p for n, p in model.named_parameters() if n.endswith(("lora_a", "lora_b"))]
    n_adapter = sum(RANK * (i + o) for _, i, o in wrapped_shapes(nf4_gpt2))
    assert sum(p.numel() for p in adapters) == n_adapter
    mem = lora.measure_finetune_memory(model, {"input_ids": ids, "labels": ids}, "QLoRA")
    assert mem.trainable == n_adapter
    assert mem.weights == L.model_bytes(nf4_gpt2) + 4 * n_adapter
    assert mem.gradients == 4 * n_adapter
    assert mem.optimizer == 8 * n_adapter + 4 * len(adapters)
    assert mem.weights < L.model_bytes(gpt2) / 3  # NF4 codes: far fewer bytes than the FP32 model
    assert lora.count_trainable(model)[0] == n_adapter  # the copy was trained, not the model


def test_nothing_trainable_is_a_value_error(gpt2, ids):
    frozen = copy.deepcopy(gpt2)
    for p in frozen.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="add_lora"):
        lora.measure_finetune_memory(frozen, {"input_ids": ids, "labels": ids}, "nothing")


def test_memory_table_shows_shares_of_the_model():
    n_model = 200_000
    rows = [lora.FinetuneMemory("full", 200_000, 800_000, 800_000, 1_600_400),
            lora.FinetuneMemory("QLoRA", 3_000, 150_000, 12_000, 24_024)]
    table = ch05.finetune_memory_table(rows, n_model)
    assert table.headers[0] == "method" and len(table.headers) == 6
    assert table.rows[0] == ["full", "200,000 (100.0%)", "800", "800", "1,600", "3,200"]
    assert table.rows[1] == ["QLoRA", "3,000 (1.5%)", "150", "12", "24", "186"]


def test_a_single_target_name_may_be_a_string(gpt2):
    model = lora.add_lora(gpt2, rank=RANK, targets="c_fc")
    wrapped = [n for n, m in model.named_modules() if isinstance(m, lora.LoRALinear)]
    assert wrapped and all(n.endswith("mlp.c_fc") for n in wrapped)


def test_lora_matches_peft(gpt2, ids):
    """peft's LoRA on the same GPT-2 (same rank, alpha, targets, the same A and B) computes the same logits
    within 1e-6 and counts the same trainable parameters: a cross-check against the reference library."""
    peft = pytest.importorskip("peft")
    ours = lora.add_lora(gpt2, rank=RANK, alpha=ALPHA)
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():  # B starts at zero in both; give it values so that the adapters matter
        for m in ours.modules():
            if isinstance(m, LoRALinear):
                m.lora_b.copy_(0.1 * torch.randn(m.lora_b.shape, generator=generator))
    config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, bias="none",
                             target_modules=list(lora.GPT2_TARGETS), fan_in_fan_out=True)
    theirs = peft.get_peft_model(copy.deepcopy(gpt2), config)
    copied = 0
    with torch.no_grad():
        for name, m in ours.named_modules():
            if isinstance(m, LoRALinear):
                target = theirs.base_model.model.get_submodule(name)
                target.lora_A["default"].weight.copy_(m.lora_a)  # (r, in) in both
                target.lora_B["default"].weight.copy_(m.lora_b)  # (out, r) in both
                copied += 1
    assert copied == LAYERS * len(("c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"))
    ours.eval(), theirs.eval()
    with torch.no_grad():
        expected = theirs(input_ids=ids).logits
        got = ours(input_ids=ids).logits
        base = gpt2(input_ids=ids).logits
    assert (expected - base).abs().max() > 1e-3  # the adapters change the output, so the check means something
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    trainable, total = theirs.get_nb_trainable_parameters()
    assert lora.count_trainable(ours) == (trainable, total)
