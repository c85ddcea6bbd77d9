"""Chapter 1's lab: wrong answers, written as a learner might, that its checkers must recognise; its
references against the library (objectives.mask_tokens), transformers' collator and a model's own loss."""

import inspect

import pytest
import torch
import torch.nn.functional as F

from course_lib.chapters import ch01_lab
from course_lib.text import data, models, objectives

# --- BERT's masking, as a learner might get it wrong -----------------------------------------


def all_masked(ids, special, select, action, random_ids, mask_id):
    chosen = (select < 0.15) & ~special
    inputs = ids.clone()
    inputs[chosen] = mask_id
    return inputs, torch.where(chosen, ids, -100)


def labels_everywhere(ids, special, select, action, random_ids, mask_id):
    chosen = (select < 0.15) & ~special
    inputs = ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, ids.clone()


def specials_selected(ids, special, select, action, random_ids, mask_id):
    chosen = select < 0.15
    inputs = ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, torch.where(chosen, ids, -100)


def labels_from_inputs(ids, special, select, action, random_ids, mask_id):
    chosen = (select < 0.15) & ~special
    inputs = ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, torch.where(chosen, inputs, -100)


# --- the causal-LM loss, as a learner might get it wrong --------------------------------------


def unshifted(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def backwards(logits, labels):
    v = logits.shape[-1]
    return F.cross_entropy(logits[:, 1:].reshape(-1, v), labels[:, :-1].reshape(-1))


def mean_over_all(logits, labels):
    v = logits.shape[-1]
    targets = labels[:, 1:].reshape(-1)
    losses = F.cross_entropy(logits[:, :-1].reshape(-1, v), targets, reduction="none")
    return losses.sum() / len(targets)


def summed(logits, labels):
    v = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, v), labels[:, 1:].reshape(-1), reduction="sum")


WRONG = {
    "bert_masking": {"no 80/10/10": all_masked, "labels everywhere": labels_everywhere,
                     "special tokens selected": specials_selected,
                     "labels from the corrupted input": labels_from_inputs},
    "causal_lm_loss": {"labels not shifted": unshifted, "shifted the wrong way": backwards,
                       "mean over ignored positions": mean_over_all, "summed instead of averaged": summed},
}


@pytest.fixture(scope="module")
def tokenizer():
    return data.course_tokenizer()


def library_draws(ids, tokenizer, seed):
    """The draws objectives.mask_tokens makes from a generator seeded with ``seed``, in its order."""
    g = torch.Generator().manual_seed(seed)
    select, action = torch.rand(ids.shape, generator=g), torch.rand(ids.shape, generator=g)
    specials = sorted(set(tokenizer.all_special_ids))
    ordinary = torch.tensor(sorted(set(range(len(tokenizer))) - set(specials)))
    random_ids = ordinary[torch.randint(len(ordinary), ids.shape, generator=g)]
    return torch.isin(ids, torch.tensor(specials)), select, action, random_ids


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_the_masking_reference_is_the_librarys_rule(tokenizer, seed):
    ids = data.course_stream(tokenizer, "validation")[: 16 * 64].view(16, 64).clone()
    ids[3, 40:] = tokenizer.pad_token_id
    special, select, action, random_ids = library_draws(ids, tokenizer, seed)
    mine = ch01_lab.bert_masking.reference(ids, special, select, action, random_ids, tokenizer.mask_token_id)
    library = objectives.mask_tokens(ids, tokenizer, generator=seed)
    assert torch.equal(mine[0], library[0]) and torch.equal(mine[1], library[1])
    assert (mine[1] != -100).any() and (mine[0] == tokenizer.mask_token_id).any()


def test_the_masking_reference_agrees_with_transformers_collator_on_the_same_decisions(tokenizer, monkeypatch):
    from transformers import DataCollatorForLanguageModeling

    ids = data.course_stream(tokenizer, "validation")[: 8 * 64].view(8, 64).clone()
    special, select, action, random_ids = library_draws(ids, tokenizer, 5)
    # The collator draws Bernoulli decisions (select, then <mask>, then random among the rest) and
    # random words: hand it the decisions our draws make, and it must build the same batch.
    decisions = iter([((select < 0.15) & ~special).float(), (action < 0.8).float(),
                      ((action >= 0.8) & (action < 0.9)).float()])
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    monkeypatch.setattr(torch, "bernoulli", lambda p, generator=None: next(decisions))
    monkeypatch.setattr(torch, "randint", lambda *args, **kwargs: random_ids.clone())
    theirs = collator.torch_mask_tokens(ids.clone(), special_tokens_mask=special)
    monkeypatch.undo()
    mine = ch01_lab.bert_masking.reference(ids, special, select, action, random_ids, tokenizer.mask_token_id)
    assert next(decisions, None) is None  # the collator drew exactly the three decisions
    assert torch.equal(mine[0], theirs[0]) and torch.equal(mine[1], theirs[1])


def test_the_draws_at_the_boundaries_worked_by_hand():
    case = next(c for c in ch01_lab._masking_cases() if c.label.startswith("draws exactly"))
    inputs, labels = ch01_lab.bert_masking.reference(*case.args)
    # 0.15 is not below 0.15; 0.8 -> random token; 0.9 -> unchanged; 0.7999 -> <mask>; 0.8999 -> random
    assert inputs.tolist() == [[11, 4, 42, 14, 4, 45]]
    assert labels.tolist() == [[-100, 12, 13, 14, 15, 16]]


def test_the_loss_reference_is_the_models_own_loss(tokenizer):
    model = models.build_model(models.tiny_config("gpt2", tokenizer), seed=0)
    texts = ["Mia dropped the cup.", "Leo was hungry, so he ate an apple.", "One day, Mia"]
    batch = objectives.causal_lm_batch(texts, tokenizer)
    with torch.no_grad():
        out = model(**batch)
    assert (batch["labels"] == -100).any()  # padded rows: the -100 edge
    assert torch.allclose(ch01_lab.causal_lm_loss.reference(out.logits, batch["labels"]), out.loss)


def test_a_loss_must_be_one_number():
    logits, labels = torch.randn(2, 4, 5), torch.randint(5, (2, 4))
    assert not ch01_lab.causal_lm_loss.check(lambda x, y: F.cross_entropy(
        x[:, :-1].reshape(-1, 5), y[:, 1:].reshape(-1), reduction="none")).passed
    right = ch01_lab.causal_lm_loss.reference(logits, labels)
    assert ch01_lab._same_loss(right, float(right)) and ch01_lab._same_loss(right, right.double())


def test_the_prediction_measures_the_chapters_tiny_gpt2():
    defaults = inspect.signature(models.tiny_config).parameters
    assert (defaults["hidden"].default, defaults["layers"].default, defaults["context"].default) == (
        ch01_lab.HIDDEN, ch01_lab.LAYERS, ch01_lab.CONTEXT)
    measured = ch01_lab.tiny_gpt2_parameters.measure()
    model = models.build_model(models.tiny_config("gpt2"), seed=0)
    assert sum(measured.values()) == models.count_parameters(model) == 929_280
    assert measured["head"] == 0 and model.lm_head.weight is model.transformer.wte.weight  # tied
    h, L = ch01_lab.HIDDEN, ch01_lab.LAYERS
    assert measured["blocks"] == L * (12 * h * h + 13 * h)
    state = torch.random.get_rng_state()
    ch01_lab.tiny_gpt2_parameters.measure()
    assert torch.equal(state, torch.random.get_rng_state())  # measuring leaves the notebook's RNG alone
