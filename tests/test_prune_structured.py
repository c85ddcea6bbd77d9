"""Tests for course_lib.compression.prune_structured: removing MLP units, attention heads and blocks of a GPT-2.

What this file proves, on small seeded GPT-2s built here (4 heads of 8 dims, MLP width 128):

* ``neuron_scores`` is the norm of each unit's c_fc column, c_fc bias and c_proj row (a loop here);
  ``neurons_to_keep`` removes the lowest scores, ties by lower index, and fraction 0 masks nothing;
  ``mask_neurons`` zeroes exactly each removed unit's c_fc column, c_fc bias and c_proj row;
* ``shrink_mlp`` computes the masked model's logits, removes layers * removed * (2 hidden + 1)
  parameters, keeps dtype, leaves the original alone and round-trips save/from_pretrained;
* ``remove_heads`` computes the masked model's logits and those of a reference written here with
  ``scaled_dot_product_attention`` over the kept heads; removing head 0 or head 1 differs;
  the config records the original head indices, also over two removals, and from_pretrained
  refuses a head-pruned model (its docstring says so);
* ``drop_blocks`` equals a forward written here that skips the blocks, renumbers ``layer_idx`` so
  that the key-value cache still works, and round-trips save/from_pretrained;
* bad input is a ValueError that names the fix.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_gpt2
from transformers import GPT2LMHeadModel

from course_lib.compression import prune_structured as P
from course_lib.text.models import count_parameters

HIDDEN, VOCAB, LAYERS, POSITIONS, HEADS = 32, 64, 3, 16, 4
INNER = 4 * HIDDEN

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def gpt2(heads: int = HEADS, seed: int = 0) -> GPT2LMHeadModel:
    """conftest's seeded tiny GPT-2, with ``heads`` heads (the head count changes no weight shape)."""
    base = tiny_gpt2(HIDDEN, VOCAB, LAYERS, POSITIONS, seed)
    config = copy.deepcopy(base.config)
    config.n_head = heads
    model = GPT2LMHeadModel(config)
    model.load_state_dict(base.state_dict())
    return model.eval()


@pytest.fixture(scope="module")
def model() -> GPT2LMHeadModel:
    return gpt2()


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(3))


def logits(model: GPT2LMHeadModel, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def state(model: GPT2LMHeadModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------------------------- neurons

def test_neuron_scores_are_the_norm_of_each_units_weights(model):
    scores = P.neuron_scores(model)
    assert len(scores) == LAYERS and all(s.shape == (INNER,) for s in scores)
    for i, block in enumerate(model.transformer.h):
        for unit in (0, 17, INNER - 1):
            weights = torch.cat([block.mlp.c_fc.weight[:, unit], block.mlp.c_fc.bias[unit:unit + 1],
                                 block.mlp.c_proj.weight[unit, :]])
            assert torch.allclose(scores[i][unit], weights.norm())


def test_neurons_to_keep_removes_the_lowest_scores_ties_by_lower_index():
    model = gpt2()
    with torch.no_grad():  # units 9, 2, 5 get score 0 in every block: a three-way tie
        for block in model.transformer.h:
            for unit in (9, 2, 5):
                block.mlp.c_fc.weight[:, unit] = 0
                block.mlp.c_fc.bias[unit] = 0
                block.mlp.c_proj.weight[unit, :] = 0
    keep = P.neurons_to_keep(model, 2 / INNER)
    for k in keep:
        assert sorted(set(range(INNER)) - set(k.tolist())) == [2, 5]
    fraction = 0.3
    removed = round(fraction * INNER)
    for k, scores in zip(P.neurons_to_keep(model, fraction), P.neuron_scores(model)):
        assert k.tolist() == sorted(k.tolist()) and len(k) == INNER - removed
        gone = sorted(set(range(INNER)) - set(k.tolist()))
        assert scores[gone].max() <= scores[k].min()
        assert sorted(gone) == sorted(torch.argsort(scores, stable=True)[:removed].tolist())


def test_masking_with_fraction_zero_changes_nothing(model):
    copied = copy.deepcopy(model)
    before = state(copied)
    assert P.mask_neurons(copied, P.neurons_to_keep(copied, 0.0)) is copied
    assert same_state(before, state(copied))


def test_mask_neurons_zeroes_each_removed_units_column_bias_and_row_and_nothing_else(model):
    keep = [[0, 3, 7], [1, 2, 3], [INNER - 3, INNER - 2, INNER - 1]]
    masked = P.mask_neurons(copy.deepcopy(model), keep)
    for k, block, original in zip(keep, masked.transformer.h, model.transformer.h):
        gone = [u for u in range(INNER) if u not in k]
        fc, proj = block.mlp.c_fc, block.mlp.c_proj
        assert not fc.weight[:, gone].any() and not fc.bias[gone].any() and not proj.weight[gone].any()
        assert torch.equal(fc.weight[:, k], original.mlp.c_fc.weight[:, k])
        assert torch.equal(fc.bias[k], original.mlp.c_fc.bias[k])
        assert torch.equal(proj.weight[k], original.mlp.c_proj.weight[k])
    changed = [n for n, v in state(masked).items() if not torch.equal(v, state(model)[n])]
    assert all(".mlp.c_fc." in n or ".mlp.c_proj.weight" in n for n in changed) and changed


def test_shrink_mlp_equals_the_masked_model_and_removes_exact_parameters(model, ids):
    before = state(model)
    keep = P.neurons_to_keep(model, 0.25)
    removed = INNER - len(keep[0])
    small = P.shrink_mlp(model, keep)
    assert same_state(before, state(model))  # the original is untouched
    assert type(small) is GPT2LMHeadModel and small.config.n_inner == INNER - removed
    assert small.transformer.h[0].mlp.c_fc.weight.shape == (HIDDEN, INNER - removed)
    assert count_parameters(model) - count_parameters(small) == LAYERS * removed * (2 * HIDDEN + 1)
    masked = P.mask_neurons(copy.deepcopy(model), keep)
    torch.testing.assert_close(logits(small, ids), logits(masked, ids))
    assert not torch.allclose(logits(small, ids), logits(model, ids), atol=1e-4)
    double = P.shrink_mlp(copy.deepcopy(model).double(), keep)
    assert all(p.dtype == torch.float64 for p in double.parameters())


def test_shrunk_model_round_trips_save_and_from_pretrained(model, ids, tmp_path):
    small = P.shrink_mlp(model, P.neurons_to_keep(model, 0.5))
    small.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    loaded = GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    assert loaded.config.n_inner == INNER // 2
    torch.testing.assert_close(logits(loaded, ids), logits(small, ids))


# ------------------------------------------------------------------------------------------ heads

def test_head_scores_are_the_norms_of_each_heads_output_rows(model):
    scores = P.head_scores(model)
    assert scores.shape == (LAYERS, HEADS)
    d = HIDDEN // HEADS
    w = model.transformer.h[1].attn.c_proj.weight
    assert torch.allclose(scores[1, 2], w[2 * d:3 * d].norm())


def test_weakest_heads_are_the_lowest_scores_across_layers(model):
    scores = P.head_scores(model)
    picked = P.weakest_heads(model, 5)
    flat = [layer * HEADS + h for layer, hs in picked.items() for h in hs]
    assert sorted(flat) == sorted(torch.argsort(scores.flatten())[:5].tolist())
    chosen = torch.tensor([scores[layer, h] for layer, hs in picked.items() for h in hs])
    others = [float(scores[layer, h]) for layer in range(LAYERS) for h in range(HEADS)
              if h not in picked.get(layer, [])]
    assert float(chosen.max()) <= min(others)
    assert all(hs == sorted(hs) for hs in picked.values()) and list(picked) == sorted(picked)


def test_weakest_heads_breaks_ties_by_the_lower_index():
    model = gpt2()
    with torch.no_grad():
        for block in model.transformer.h:
            block.attn.c_proj.weight.fill_(1.0)  # every head the same score
    assert P.weakest_heads(model, 3) == {0: [0, 1, 2]}


def test_weakest_heads_leaves_every_layer_one_head():
    model = gpt2()
    with torch.no_grad():
        model.transformer.h[0].attn.c_proj.weight.mul_(1e-3)  # layer 0's heads are the weakest
    picked = P.weakest_heads(model, HEADS + 1)
    assert len(picked[0]) == HEADS - 1 and sum(map(len, picked.values())) == HEADS + 1
    most = P.weakest_heads(model, LAYERS * (HEADS - 1))
    assert all(len(hs) == HEADS - 1 for hs in most.values())
    P.remove_heads(model, most)  # every layer is left one head: removal works


@pytest.mark.parametrize("count", [0, LAYERS * (HEADS - 1) + 1, -1, 1.5, True])
def test_weakest_heads_refuses_a_count_outside_the_model(model, count):
    with pytest.raises(ValueError, match=f"from 1 to {LAYERS * (HEADS - 1)}"):
        P.weakest_heads(model, count)


def reference_logits(model: GPT2LMHeadModel, ids: torch.Tensor,
                     removed: dict[int, list[int]]) -> torch.Tensor:
    """GPT-2 written out here, its attention over the kept heads only, with PyTorch's own SDPA."""
    t, d = model.transformer, HIDDEN // HEADS
    with torch.no_grad():
        x = t.wte(ids) + t.wpe(torch.arange(ids.shape[1]))[None]
        for i, block in enumerate(t.h):
            attn, a = block.attn, block.ln_1(x)
            q, k, v = (a @ attn.c_attn.weight + attn.c_attn.bias).split(HIDDEN, dim=-1)
            out = torch.zeros_like(x) + attn.c_proj.bias
            for h in [h for h in range(HEADS) if h not in removed.get(i, [])]:
                part = slice(h * d, (h + 1) * d)
                y = F.scaled_dot_product_attention(q[..., part], k[..., part], v[..., part], is_causal=True)
                out = out + y @ attn.c_proj.weight[part]
            x = x + out
            x = x + block.mlp(block.ln_2(x))
        return model.lm_head(t.ln_f(x))


def test_remove_heads_equals_masking_and_a_reference_over_the_kept_heads(model, ids):
    removed = {0: [1, 3], 2: [0]}
    before = state(model)
    small = P.remove_heads(model, removed)
    assert same_state(before, state(model))
    assert [a.attn.num_heads for a in small.transformer.h] == [2, 4, 3]
    assert small.transformer.h[0].attn.c_attn.weight.shape == (HIDDEN, 3 * 2 * HIDDEN // HEADS)
    assert count_parameters(model) - count_parameters(small) == 3 * (HIDDEN // HEADS) * (4 * HIDDEN + 3)
    masked = P.mask_heads(copy.deepcopy(model), removed)
    got = logits(small, ids)
    torch.testing.assert_close(got, logits(masked, ids))
    torch.testing.assert_close(got, reference_logits(model, ids, removed))
    torch.testing.assert_close(logits(model, ids), reference_logits(model, ids, {}))


def test_removing_head_0_or_head_1_gives_different_models_each_equal_to_its_mask(model, ids):
    results = []
    for head in (0, 1):
        small = P.remove_heads(model, {1: [head]})
        masked = P.mask_heads(copy.deepcopy(model), {1: [head]})
        torch.testing.assert_close(logits(small, ids), logits(masked, ids))
        results.append(logits(small, ids))
    assert not torch.allclose(results[0], results[1], atol=1e-4)


def test_remove_heads_records_original_indices_over_two_removals(model, ids):
    once = P.remove_heads(model, {0: [2]})
    twice = P.remove_heads(once, {0: [2], 1: [0]})  # head 2 of once's layer 0 was head 3
    assert once.config.pruned_heads == {0: [2]} and not hasattr(model.config, "pruned_heads")
    assert twice.config.pruned_heads == {0: [2, 3], 1: [0]}
    torch.testing.assert_close(logits(twice, ids), reference_logits(model, ids, {0: [2, 3], 1: [0]}))


def test_from_pretrained_does_not_rebuild_a_head_pruned_model(model, tmp_path):
    P.remove_heads(model, {0: [1]}).save_pretrained(tmp_path)  # as remove_heads' docstring says
    with pytest.raises(RuntimeError, match="mismatch"):
        GPT2LMHeadModel.from_pretrained(tmp_path)


# ----------------------------------------------------------------------------------------- blocks

def skipping_logits(model: GPT2LMHeadModel, ids: torch.Tensor, kept: list[int]) -> torch.Tensor:
    """Embeddings, the blocks ``kept`` called one by one with a causal mask, ln_f and lm_head."""
    t, n = model.transformer, ids.shape[1]
    mask = torch.full((n, n), float("-inf")).triu(1)[None, None]  # additive: eager and SDPA alike
    with torch.no_grad():
        x = t.wte(ids) + t.wpe(torch.arange(n))[None]
        for i in kept:
            x = t.h[i](x, attention_mask=mask)
        return model.lm_head(t.ln_f(x))


def test_drop_blocks_equals_a_forward_that_skips_them_and_keeps_the_cache_working(model, ids):
    torch.testing.assert_close(skipping_logits(model, ids, [0, 1, 2]), logits(model, ids))
    small = P.drop_blocks(model, [1])
    assert small.config.n_layer == 2 and len(model.transformer.h) == LAYERS
    assert [b.attn.layer_idx for b in small.transformer.h] == [0, 1]
    full = logits(small, ids)
    torch.testing.assert_close(full, skipping_logits(model, ids, [0, 2]))
    with torch.no_grad():  # the last token through the cache: layer_idx picks each layer's slot
        past = small(ids[:, :-1], use_cache=True).past_key_values
        step = small(ids[:, -1:], past_key_values=past).logits
    torch.testing.assert_close(step[:, -1], full[:, -1])


def test_dropped_model_round_trips_save_and_from_pretrained(model, ids, tmp_path):
    small = P.drop_blocks(model, (0, 2))
    small.save_pretrained(tmp_path)
    loaded = GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    assert loaded.config.n_layer == 1
    torch.testing.assert_close(logits(loaded, ids), logits(small, ids))


# ----------------------------------------------------------------------------------------- errors

@pytest.mark.parametrize("call, match", [
    (lambda m: P.neurons_to_keep(m, 1.0), r"fraction must be in \[0, 1\): 0.5 removes half"),
    (lambda m: P.neurons_to_keep(m, -0.1), r"fraction must be in \[0, 1\)"),
    (lambda m: P.neurons_to_keep(m, 0.999), "removes all"),
    (lambda m: P.mask_neurons(m, [[0, 1]] * 2), "keep has 2 lists but the model has 3 blocks"),
    (lambda m: P.shrink_mlp(m, [[0, 1], [0, 1], [0]]), "same length in every block"),
    (lambda m: P.shrink_mlp(m, [[0, INNER]] * 3), r"distinct unit indices in \[0, 128\)"),
    (lambda m: P.mask_heads(m, {LAYERS: [0]}), "layer index 3 out of range"),
    (lambda m: P.mask_heads(m, {0: [HEADS]}), "head index 4 of layer 0 out of range"),
    (lambda m: P.remove_heads(m, {0: [1, 1]}), "distinct"),
    (lambda m: P.remove_heads(m, {0: list(range(HEADS))}), "keep at least one head, or remove the whole"),
    (lambda m: P.drop_blocks(m, [0, 1, 2]), "every block"),
    (lambda m: P.drop_blocks(m, [5]), "block index 5 out of range"),
])
def test_bad_input_is_a_value_error_naming_the_fix(model, call, match):
    before = state(model)
    with pytest.raises(ValueError, match=match):
        call(model)
    assert same_state(before, state(model))


def test_other_models_and_nan_weights_are_refused(model):
    with pytest.raises(ValueError, match="supports GPT-2 .GPT2LMHeadModel.; got Linear"):
        P.neuron_scores(torch.nn.Linear(2, 2))
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.transformer.h[1].mlp.c_proj.weight[3, 0] = float("nan")
    with pytest.raises(ValueError, match=r"block 1 mlp.c_proj.weight holds NaN"):
        P.neuron_scores(broken)
