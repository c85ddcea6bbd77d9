"""Chapter 1, *Pretraining objectives*: the chapter's lab, code exercises and a prediction checked against the library.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The masking exercise takes its random numbers as arguments (the draws ``objectives.mask_tokens``
makes from its generator), so that the learner's lines decide the result, not the order of draws.
"""

from __future__ import annotations

import numbers

import torch

from course_lib.exercises.checker import Case, Exercise, Misconception, same
from course_lib.exercises.predictions import Prediction
from course_lib.text import data, models, objectives

IGNORE = objectives.IGNORE_INDEX

# ---------------------------------------------------------------------------------------------
# BERT's 80/10/10 masking, from given draws
# ---------------------------------------------------------------------------------------------


def _masking_case(label: str, ids: list[list[int]], select: list[list[float]],
                  action: list[list[float]], random_ids: list[list[int]]) -> Case:
    ids_t = torch.tensor(ids)
    special = ids_t < 5  # ids 0-4: padding, </s>, <unk>, <s>, <mask>
    return Case((ids_t, special, torch.tensor(select), torch.tensor(action), torch.tensor(random_ids), 4),
                label)


def _masking_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 60, (6, 24), generator=g)
    ids[:, 0], ids[2, 18:], ids[4, 12:] = 3, 0, 0  # <s> first; two rows padded
    random = Case((ids, ids < 5, torch.rand(ids.shape, generator=g), torch.rand(ids.shape, generator=g),
                   torch.randint(5, 60, ids.shape, generator=g), 4), "random")
    return [
        random,
        _masking_case("draws exactly at 0.15, 0.8 and 0.9",
                      [[11, 12, 13, 14, 15, 16]], [[0.15, 0.1499, 0.0, 0.0, 0.0, 0.0]],
                      [[0.0, 0.0, 0.8, 0.9, 0.7999, 0.8999]], [[40, 41, 42, 43, 44, 45]]),
        _masking_case("special tokens with low draws",
                      [[3, 20, 21, 1, 0, 0]], [[0.0, 0.01, 0.99, 0.0, 0.0, 0.0]],
                      [[0.5, 0.5, 0.5, 0.85, 0.95, 0.1]], [[30, 31, 32, 33, 34, 35]]),
        _masking_case("a random token equal to the original",
                      [[25, 26, 27]], [[0.05, 0.05, 0.5]], [[0.85, 0.85, 0.85]], [[25, 50, 27]]),
        _masking_case("nothing selected", [[7, 8, 9, 10]], [[0.2, 0.5, 0.9, 0.15]],
                      [[0.1, 0.1, 0.1, 0.1]], [[5, 6, 7, 8]]),
        _masking_case("one token", [[42]], [[0.0]], [[0.95]], [[17]]),
    ]


def _all_masked(ids, special, select, action, random_ids, mask_id):
    selected = (select < 0.15) & ~special
    return ids.masked_fill(selected, mask_id), ids.masked_fill(~selected, IGNORE)


def _labels_everywhere(ids, special, select, action, random_ids, mask_id):
    return objectives.mask_with_draws(ids, special, select, action, random_ids, mask_id)[0], ids.clone()


def _specials_selected(ids, special, select, action, random_ids, mask_id):
    return objectives.mask_with_draws(ids, torch.zeros_like(special), select, action, random_ids, mask_id)


def _labels_from_inputs(ids, special, select, action, random_ids, mask_id):
    inputs, labels = objectives.mask_with_draws(ids, special, select, action, random_ids, mask_id)
    return inputs, torch.where(labels != IGNORE, inputs, labels)


bert_masking = Exercise(
    "bert_masking",
    "BERT's masking from given draws: return (inputs, labels), labels -100 where nothing is predicted.",
    objectives.mask_with_draws, _masking_cases,
    misconceptions=(
        Misconception("no 80/10/10", "replace every selected token by <mask>, with no random or kept ones",
                      _all_masked),
        Misconception("labels everywhere", "keep the original token as the label at every position, "
                      "so the loss would score the unselected ones too (they need -100)", _labels_everywhere),
        Misconception("special tokens selected", "forget that special tokens (padding, <s>, </s>) are never "
                      "selected", _specials_selected),
        Misconception("labels from the corrupted input", "take the labels from the corrupted inputs, so the "
                      "model is asked to predict <mask> instead of the original token", _labels_from_inputs),
    ),
    unchanged=(0,),  # "leave ids itself unchanged"
)

# ---------------------------------------------------------------------------------------------
# The causal-LM loss: shift by one, mean cross-entropy over the predicted positions
# ---------------------------------------------------------------------------------------------


def _causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The reference: transformers' own causal-LM loss, the one ``model(**batch).loss`` computes."""
    from transformers.loss.loss_utils import ForCausalLMLoss

    return ForCausalLMLoss(logits, labels, vocab_size=logits.shape[-1])


def _same_loss(expected: torch.Tensor, got: object) -> bool:
    """A loss counts when it is one number (a 0-d tensor or a float) equal to the reference's."""
    if isinstance(got, torch.Tensor):
        if got.numel() != 1:
            return False
        got = float(got.detach())
    return isinstance(got, numbers.Real) and same(float(expected), float(got), rtol=1e-5, atol=1e-6)


def _loss_case(label: str, seed: int, batch: int, length: int, vocab: int,
               ignored: list[tuple[int, int]] = ()) -> Case:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, length, vocab, generator=g) * 3
    labels = torch.randint(vocab, (batch, length), generator=g)
    for row, col in ignored:
        labels[row, col] = IGNORE
    return Case((logits, labels), label)


def _loss_cases() -> list[Case]:
    return [
        _loss_case("random", 0, 3, 7, 11, [(1, 5), (1, 6), (2, 6)]),
        _loss_case("padding (-100) at the end", 1, 2, 6, 13, [(0, 3), (0, 4), (0, 5)]),
        _loss_case("a -100 at the start (a masked prompt)", 2, 2, 5, 9, [(0, 0), (0, 1), (1, 0)]),
        _loss_case("two tokens: one prediction", 3, 1, 2, 7),
    ]


def _unshifted(logits, labels):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)


def _shifted_backwards(logits, labels):
    return torch.nn.functional.cross_entropy(logits[:, 1:].flatten(0, 1), labels[:, :-1].flatten(),
                                             ignore_index=IGNORE)


def _mean_over_all(logits, labels):
    logits, labels = logits[:, :-1], labels[:, 1:]
    nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE,
                                            reduction="sum")
    return nll / labels.numel()


def _summed(logits, labels):
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(),
                                             ignore_index=IGNORE, reduction="sum")


causal_lm_loss = Exercise(
    "causal_lm_loss",
    "The causal-LM loss: logits at position t against the label at t + 1, mean over labels that are not -100.",
    _causal_lm_loss, _loss_cases, compare=_same_loss,
    misconceptions=(
        Misconception("labels not shifted", "compare the logits at position t with the label at t itself, "
                      "so the model is asked to copy the token it already sees", _unshifted),
        Misconception("shifted the wrong way", "compare the logits at t + 1 with the label at t: predicting "
                      "the previous token", _shifted_backwards),
        Misconception("mean over ignored positions", "divide by every predicted position, the -100 ones "
                      "included, instead of by the positions that have a label", _mean_over_all),
        Misconception("summed instead of averaged", "add the losses up instead of taking their mean",
                      _summed),
    ),
)

# ---------------------------------------------------------------------------------------------
# Predict, then measure: the parameters of the chapter's tiny GPT-2
# ---------------------------------------------------------------------------------------------

#: The tiny GPT-2 of the chapter: ``models.tiny_config("gpt2")``'s width, depth and context, and the course vocabulary.
HIDDEN, LAYERS, CONTEXT, VOCAB = 128, 2, 64, data.DEFAULT_VOCAB_SIZE


def _tiny_gpt2_parameters() -> dict[str, float]:
    """Count the tiny GPT-2's parameters by component, each tensor once (the head shares the embedding's)."""
    config = models.tiny_config("gpt2", hidden=HIDDEN, layers=LAYERS, context=CONTEXT)
    with torch.random.fork_rng():  # building seeds torch: leave the notebook's generator as it was
        model = models.build_model(config)
    parts = {"token embeddings": 0, "position embeddings": 0, "blocks": 0, "final layer norm": 0, "head": 0}
    where = {"transformer.wte.": "token embeddings", "transformer.wpe.": "position embeddings",
             "transformer.h.": "blocks", "transformer.ln_f.": "final layer norm", "lm_head.": "head"}
    for name, p in model.named_parameters():  # a tied weight is listed once, under its first name
        parts[next(part for prefix, part in where.items() if name.startswith(prefix))] += p.numel()
    return {k: float(v) for k, v in parts.items()}


def _share(wrong: int) -> float:
    """Prediction / measurement for a count that is off by ``wrong`` parameters."""
    h, L = HIDDEN, LAYERS
    total = VOCAB * h + CONTEXT * h + L * (12 * h * h + 13 * h) + 2 * h
    return (total + wrong) / total


tiny_gpt2_parameters = Prediction(
    "tiny_gpt2_parameters",
    "How many parameters has the chapter's tiny GPT-2 (width 128, 2 blocks, 64 positions, 4,096 tokens)?",
    _tiny_gpt2_parameters, unit="parameters", rel_tol=0.01,
    misconceptions=(
        (_share(VOCAB * HIDDEN), "count the output head's matrix, although it is the token embedding's "
                                 "(tied weights are stored once)"),
        (_share(-(VOCAB + CONTEXT) * HIDDEN - LAYERS * 13 * HIDDEN - 2 * HIDDEN),
         "count only the blocks' weight matrices, 12·L·h² (Kaplan's non-embedding N without its biases "
         "and norms), leaving out the embeddings"),
        (_share(-LAYERS * 6 * HIDDEN * HIDDEN), "give the feed-forward layer the width h instead of 4h"),
        (_share(-LAYERS * 2 * HIDDEN * HIDDEN), "give queries, keys and values one h x h matrix together "
                                                "instead of one each (h x 3h)"),
    ),
)
