"""Weight pruning (course_lib.compression.prune): masks equal torch.nn.utils.prune's, Wanda and N:M follow their
definitions, held masks keep pruned weights at exactly zero through AdamW steps, and bad input is refused."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.utils.prune as torch_prune
from conftest import tiny_gpt2
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from course_lib.compression import finetuning, prune
from course_lib.text import data, training

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model():
    return tiny_gpt2(hidden=16, vocab=40, layers=2, positions=32, seed=3)


def test_prunable_weights_are_the_block_matrices(model):
    names = list(prune.prunable_weights(model))
    assert len(names) == 2 * 4
    assert names[:4] == [f"transformer.h.0.{m}.weight" for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc",
                                                               "mlp.c_proj")]
    with pytest.raises(ValueError, match="no linear layers"):
        prune.prunable_weights(nn.Sequential(nn.ReLU()))


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 12), cols=st.integers(1, 12), sparsity=st.floats(0, 0.99), seed=st.integers(0, 99))
def test_magnitude_mask_equals_torch_l1_unstructured(rows, cols, sparsity, seed):
    layer = nn.Linear(cols, rows)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)))
    ours = prune.magnitude_mask(layer.weight, sparsity)
    torch_prune.l1_unstructured(layer, "weight", amount=sparsity)
    assert torch.equal(ours, layer.weight_mask.bool())
    assert int((~ours).sum()) == round(sparsity * rows * cols)


def test_ties_are_broken_as_torch_does():
    layer = nn.Linear(4, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, -1.0, 1.0, 2.0], [1.0, 3.0, -1.0, 1.0]]))
    ours = prune.magnitude_mask(layer.weight, 0.5)
    torch_prune.l1_unstructured(layer, "weight", amount=0.5)
    assert torch.equal(ours, layer.weight_mask.bool())


@pytest.mark.parametrize("sparsity", [0.0, 0.3, 0.9])
def test_global_and_layer_masks_equal_torch(model, sparsity):
    ours = prune.magnitude_masks(model, sparsity, "global")
    per_layer = prune.magnitude_masks(model, sparsity, "layer")
    theirs = copy.deepcopy(model)
    modules = prune.prunable_modules(theirs)
    torch_prune.global_unstructured([(m, "weight") for m in modules.values()],
                                    pruning_method=torch_prune.L1Unstructured, amount=sparsity)
    for name, m in modules.items():
        assert torch.equal(ours[f"{name}.weight"], m.weight_mask.bool()), name
    total = sum(m.numel() for m in ours.values())
    assert sum(int((~m).sum()) for m in ours.values()) == round(sparsity * total)
    for name, mask in per_layer.items():
        assert int((~mask).sum()) == round(sparsity * mask.numel()), name


def test_global_threshold_is_one_number(model):
    masks = prune.magnitude_masks(model, 0.6, "global")
    weights = prune.prunable_weights(model)
    kept = torch.cat([w.detach().abs()[m] for w, m in zip(weights.values(), masks.values())])
    dropped = torch.cat([w.detach().abs()[~m] for w, m in zip(weights.values(), masks.values())])
    assert dropped.max() <= kept.min()
    shares = [float((~m).float().mean()) for m in masks.values()]
    assert max(shares) - min(shares) > 0.05  # one threshold: the matrices lose different shares


def test_row_mask_and_n_m_mask():
    scores = torch.tensor([[4.0, 1.0, 3.0, 2.0, 8.0, 5.0, 6.0, 7.0]])
    assert prune.row_mask(scores, 0.25).tolist() == [[True, False, True, False, True, True, True, True]]
    assert prune.n_m_mask(scores).tolist() == [[True, False, True, False, True, False, False, True]]
    assert int(prune.n_m_mask(torch.randn(6, 16), 1, 4).sum()) == 6 * 4
    with pytest.raises(ValueError, match="2:4"):
        prune.n_m_mask(scores, 4, 4)
    with pytest.raises(ValueError, match="groups"):
        prune.n_m_mask(torch.randn(2, 6))


def test_wanda_scores_weight_times_input_norm(model):
    tok_batches = [{"input_ids": torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(i))}
                   for i in range(3)]
    norms = prune.input_norms(model, tok_batches)
    name = "transformer.h.1.mlp.c_fc.weight"
    # the norm by hand: the inputs of the layer, recorded with a hook of the test's own
    seen = []
    layer = model.get_submodule("transformer.h.1.mlp.c_fc")
    handle = layer.register_forward_pre_hook(lambda mod, args: seen.append(args[0].reshape(-1, 16)))
    with torch.no_grad():
        for b in tok_batches:
            model(input_ids=b["input_ids"])
    handle.remove()
    torch.testing.assert_close(norms[name], torch.cat(seen).norm(dim=0))
    masks = prune.wanda_masks(model, 0.5, norms)
    w_out_in = layer.weight.detach().t()  # Conv1D stores [in, out]
    scores = w_out_in.abs() * norms[name]
    expect = prune.row_mask(scores, 0.5).t()
    assert torch.equal(masks[name], expect)
    assert (masks[name].sum(0) == 8).all()  # every output keeps half of its 16 inputs
    two_four = prune.wanda_masks(model, 0.5, norms, n_m=(2, 4))[name]
    assert torch.equal(two_four, prune.n_m_mask(scores).t())
    # a large input norm protects small weights: Wanda and magnitude choose differently
    assert not torch.equal(masks[name], prune.row_mask(w_out_in.abs(), 0.5).t())


def test_masks_held_through_adamw_steps():
    tok = data.course_tokenizer()
    model = tiny_gpt2(hidden=16, vocab=len(tok), layers=1, positions=32, seed=5)
    masks = prune.magnitude_masks(model, 0.7, "global")
    texts = data.load_corpus("course", "train")[:20]
    recipe = training.Recipe(steps=4, batch_size=2, seq_len=16, lr=1e-2, warmup_steps=1, seed=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with prune.masks_held(model, masks):
        training.train(model, "gpt2", tok, recipe, texts=texts, progress=False)
    params = dict(model.named_parameters())
    for name, mask in masks.items():
        assert (params[name][~mask] == 0).all(), name  # exactly zero, not merely small
        assert not torch.equal(params[name][mask], before[name][mask]), name  # the kept ones trained
    assert prune.sparsity_of(model) == pytest.approx(0.7, abs=1e-3)
    # without the hooks, the same training revives pruned weights: the test above can fail
    free = tiny_gpt2(hidden=16, vocab=len(tok), layers=1, positions=32, seed=5)
    prune.apply_masks(free, masks)
    training.train(free, "gpt2", tok, recipe, texts=texts, progress=False)
    assert prune.sparsity_of(free) < 0.1


def test_prune_and_finetune_is_cached_and_keeps_the_original(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_LIB_CACHE", str(tmp_path))
    tok = data.course_tokenizer()
    model = tiny_gpt2(hidden=16, vocab=len(tok), layers=1, positions=32, seed=6)
    original = copy.deepcopy(model.state_dict())
    recipe = training.Recipe(steps=3, batch_size=2, seq_len=16, lr=1e-2, warmup_steps=1, seed=0)
    masks = prune.magnitude_masks(model, 0.5)
    first = prune.prune_and_finetune(model, masks, "magnitude 50%", recipe, tok, progress=False)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in original.items())
    assert prune.sparsity_of(first.model) == pytest.approx(0.5, abs=1e-3)
    assert len(list((tmp_path / finetuning._CACHE_FOLDER).iterdir())) == 1
    second = prune.prune_and_finetune(model, masks, "magnitude 50%", recipe, tok, progress=False)
    assert second.history == first.history
    for (n, a), b in zip(first.model.named_parameters(), second.model.parameters()):
        assert torch.equal(a, b), n


def test_gradual_prune_reaches_the_schedule(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_LIB_CACHE", str(tmp_path))
    tok = data.course_tokenizer()
    model = tiny_gpt2(hidden=16, vocab=len(tok), layers=1, positions=32, seed=7)
    recipe = training.Recipe(steps=6, batch_size=2, seq_len=16, lr=1e-2, warmup_steps=1, seed=0)
    runs = prune.gradual_prune(model, 0.8, 3, "layer", recipe, tok, progress=False)
    schedule = prune.cubic_schedule(0.8, 3)
    assert [len(r.history) for r in runs] == [2, 2, 2]
    for run, target in zip(runs, schedule):
        assert prune.sparsity_of(run.model) == pytest.approx(target, abs=2e-3)
    with pytest.raises(ValueError, match="fewer stages"):
        prune.gradual_prune(model, 0.8, 7, "layer", recipe, tok, progress=False)


def test_cubic_schedule_matches_zhu_and_gupta():
    s = prune.cubic_schedule(0.9, 4)
    assert s[-1] == pytest.approx(0.9)
    assert s[0] == pytest.approx(0.9 * (1 - 0.75 ** 3))
    steps = [b - a for a, b in zip([0.0, *s], s)]
    assert steps == sorted(steps, reverse=True)  # fast first, slow at the end


@pytest.mark.parametrize("bad", [1.0, -0.1, float("nan"), "half", True])
def test_bad_sparsity_is_refused(model, bad):
    with pytest.raises(ValueError, match=r"sparsity must be a fraction in \[0, 1\)"):
        prune.magnitude_masks(model, bad)


def test_other_bad_input(model):
    with pytest.raises(ValueError, match="unknown scope 'everywhere'"):
        prune.magnitude_masks(model, 0.5, "everywhere")
    with pytest.raises(ValueError, match="empty tensor"):
        prune.magnitude_mask(torch.empty(0), 0.5)
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.transformer.h[0].mlp.c_fc.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="c_fc.weight holds NaN"):
        prune.magnitude_masks(broken, 0.5, "global")
    with pytest.raises(ValueError, match="not a parameter"):
        prune.apply_masks(model, {"nope.weight": torch.ones(2, dtype=torch.bool)})
    with pytest.raises(ValueError, match="bool tensor of shape"):
        prune.apply_masks(model, {"transformer.h.0.mlp.c_fc.weight": torch.ones(2, 2, dtype=torch.bool)})
    with pytest.raises(ValueError, match="input_norms"):
        prune.wanda_masks(model, 0.5, {})
    with pytest.raises(ValueError, match="no calibration batches"):
        prune.input_norms(model, [])


@pytest.mark.parametrize(("ids", "limit"), [(torch.tensor([[3, 64]]), "vocabulary of 64 tokens"),
                                           (torch.zeros(1, 40, dtype=torch.long), "context of 32 positions")])
def test_wanda_calibration_names_the_limit_instead_of_an_index_error(ids, limit):
    model = tiny_gpt2(hidden=16, vocab=64)
    with pytest.raises(ValueError, match=f"calibration batch 1: .*{limit}"):
        prune.input_norms(model, [{"input_ids": ids}])


def test_gradual_seeds_are_distinct_and_start_with_section_3s_run():
    """Chapter 6 compares gradual and one-shot pruning on these seeds; the first is section 3's fine-tuning."""
    assert prune.GRADUAL_SEEDS[0] == prune.RECOVERY_RECIPE.seed
    assert len(set(prune.GRADUAL_SEEDS)) == len(prune.GRADUAL_SEEDS) >= 3
    stage_seeds = {s + k for s in prune.GRADUAL_SEEDS for k in range(1, 5)}  # gradual_prune's 4 stages
    assert len(stage_seeds) == 4 * len(prune.GRADUAL_SEEDS)  # no two runs share batches
