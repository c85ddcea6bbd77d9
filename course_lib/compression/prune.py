"""Weight pruning: magnitude (per layer and global), Wanda, the N:M pattern, and masks held through fine-tuning.

Chapter 6 ("Pruning lab") teaches it on the course model. A *mask* is a boolean tensor of a weight's
shape, True where the weight is kept; ``masks`` map parameter names (``model.named_parameters()``)
to masks. Pruning acts on the weight matrices inside the transformer blocks
(:func:`prunable_weights`): not on embeddings, layer norms or biases. Structured pruning (whole
neurons, heads and blocks) lives in :mod:`course_lib.compression.prune_structured`; what pruning saves on disk
and in time, in :mod:`course_lib.compression.sparse_checkpoints`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from course_lib.base.checks import token_ids
from course_lib.compression import finetuning
from course_lib.compression.quant_layers import weight_matrix
from course_lib.text import training

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "CHAPTER_PARTS",
    "GRADUAL_SEEDS",
    "RECOVERY_RECIPE",
    "SCOPES",
    "SWEEP",
    "apply_masks",
    "chapter_finetunes",
    "check_sparsity",
    "cubic_schedule",
    "gradual_prune",
    "input_norms",
    "magnitude_mask",
    "magnitude_masks",
    "masks_held",
    "n_m_mask",
    "prunable_modules",
    "prune_and_finetune",
    "prunable_weights",
    "row_mask",
    "sparsity_of",
    "wanda_masks",
]

#: How the magnitude threshold is chosen: one per weight matrix ("layer") or one across all ("global").
SCOPES = ("layer", "global")


def check_sparsity(sparsity: float) -> float:
    """``sparsity`` as a float, or a ValueError that says what a sparsity is.

    Chapter 6, *Pruning lab*.
    """
    if isinstance(sparsity, bool) or not isinstance(sparsity, (int, float)) or not 0 <= sparsity < 1:
        raise ValueError(f"sparsity must be a fraction in [0, 1), got {sparsity!r}: 0.5 prunes half of "
                         "the weights, 0.9 nine in ten (1.0 would remove every weight).")
    return float(sparsity)


def prunable_modules(model: nn.Module) -> dict[str, nn.Module]:
    """The linear layers that pruning acts on, by module name: every one inside the transformer blocks.

    GPT-2's are transformers' ``Conv1D`` (``attn.c_attn``, ``attn.c_proj``, ``mlp.c_fc``,
    ``mlp.c_proj`` of every block); for other models, every ``nn.Linear`` but the output head.

    Chapter 6, *Pruning lab*.
    """
    found = {name: m for name, m in model.named_modules()
             if isinstance(m, (nn.Linear, Conv1D)) and "lm_head" not in name}
    if not found:
        raise ValueError(f"{type(model).__name__} has no linear layers to prune (it needs nn.Linear or "
                         "transformers' Conv1D layers, as GPT-2 and most transformers have).")
    return found


def prunable_weights(model: nn.Module) -> dict[str, nn.Parameter]:
    """The weight matrices that pruning acts on, by parameter name (see :func:`prunable_modules`).

    Chapter 6, *Pruning lab*.
    """
    return {f"{name}.weight": m.weight for name, m in prunable_modules(model).items()}


def _check_finite(name: str, w: torch.Tensor) -> None:
    if not torch.isfinite(w).all():
        raise ValueError(f"{name} holds NaN or inf values: pruning by magnitude needs finite weights "
                         "(reload the model, or check the training run that produced it).")


def magnitude_mask(weight: torch.Tensor, sparsity: float) -> torch.Tensor:
    """Keep-mask that prunes the ``round(sparsity * n)`` weights of smallest magnitude.

    The same rule as ``torch.nn.utils.prune.l1_unstructured``, and the same call (``torch.topk``
    with ``largest=False``), so equal magnitudes are broken the same way.

    Chapter 6, *Pruning lab*.
    """
    sparsity = check_sparsity(sparsity)
    if weight.numel() == 0:
        raise ValueError("magnitude_mask got an empty tensor: there is nothing to prune.")
    _check_finite("the weight", weight)
    k = round(sparsity * weight.numel())
    keep = torch.ones(weight.numel(), dtype=torch.bool, device=weight.device)
    if k:
        keep[torch.topk(weight.detach().abs().flatten(), k, largest=False).indices] = False
    return keep.view_as(weight)


def magnitude_masks(model: nn.Module, sparsity: float, scope: str = "layer") -> dict[str, torch.Tensor]:
    """Magnitude-pruning masks of every prunable weight: one threshold per matrix or one for all.

    ``scope="layer"`` prunes ``sparsity`` of each matrix; ``scope="global"`` ranks all prunable
    weights together (``torch.nn.utils.prune.global_unstructured``'s rule), so matrices with small
    weights lose more.

    Chapter 6, *Pruning lab*.
    """
    sparsity = check_sparsity(sparsity)
    weights = prunable_weights(model)
    if scope == "layer":
        return {name: magnitude_mask(w, sparsity) for name, w in weights.items()}
    if scope != "global":
        raise ValueError(f"unknown scope {scope!r}: use one of {SCOPES}.")
    for name, w in weights.items():
        _check_finite(name, w)
    flat = magnitude_mask(torch.cat([w.detach().flatten() for w in weights.values()]), sparsity)
    sizes = [w.numel() for w in weights.values()]
    return {name: part.view_as(w) for (name, w), part in zip(weights.items(), flat.split(sizes))}


def row_mask(scores: torch.Tensor, sparsity: float) -> torch.Tensor:
    """Keep-mask of [out, in] ``scores`` that prunes ``sparsity`` of every row (each output) separately.

    Chapter 6, *Pruning lab*.
    """
    sparsity = check_sparsity(sparsity)
    if scores.dim() != 2 or scores.numel() == 0:
        raise ValueError(f"row_mask needs a non-empty [out, in] matrix, got shape {tuple(scores.shape)}.")
    k = round(sparsity * scores.shape[1])
    keep = torch.ones_like(scores, dtype=torch.bool)
    if k:
        keep.scatter_(1, torch.topk(scores, k, dim=1, largest=False).indices, False)
    return keep


def n_m_mask(scores: torch.Tensor, n: int = 2, m: int = 4) -> torch.Tensor:
    """Keep-mask of [out, in] ``scores`` that keeps the ``n`` largest of every ``m`` consecutive inputs.

    2:4 (the default) is the pattern NVIDIA's sparse tensor cores run at twice the dense rate.

    Chapter 6, *Pruning lab*.
    """
    if not (isinstance(n, int) and isinstance(m, int) and 0 < n < m):
        raise ValueError(f"N:M needs whole numbers 0 < n < m, got {n}:{m} (the hardware pattern is 2:4).")
    if scores.dim() != 2 or scores.shape[1] % m:
        raise ValueError(f"N:M needs an [out, in] matrix whose {m}-wide groups fill each row; got shape "
                         f"{tuple(scores.shape)}.")
    groups = scores.reshape(scores.shape[0], -1, m)
    keep = torch.zeros_like(groups, dtype=torch.bool)
    keep.scatter_(2, torch.topk(groups, n, dim=2).indices, True)
    return keep.reshape(scores.shape)


@torch.no_grad()
def input_norms(model: nn.Module, batches: Iterable[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """‖X_j‖₂ of every input feature j of every prunable layer, over all tokens of ``batches``.

    Forward hooks record each layer's inputs while the model reads the calibration batches (only
    ``input_ids`` is used); the result is keyed by weight name, one value per input feature.

    Chapter 6, *Pruning lab*.
    """
    modules = prunable_modules(model)
    sums: dict[str, torch.Tensor] = {}

    def record(name: str):  # noqa: ANN202 - a hook factory
        def hook(module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            x = args[0].detach().float()
            sq = x.reshape(-1, x.shape[-1]).pow(2).sum(0)
            sums[name] = sums[name] + sq if name in sums else sq
        return hook

    handles = [m.register_forward_pre_hook(record(f"{n}.weight")) for n, m in modules.items()]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        n_batches = 0
        for batch in batches:
            ids = token_ids(batch["input_ids"], model, f"calibration batch {n_batches + 1}: token ids")
            model(input_ids=ids.to(device))
            n_batches += 1
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    if not n_batches:
        raise ValueError("input_norms got no calibration batches: pass at least one batch of input_ids.")
    return {name: s.sqrt() for name, s in sums.items()}


def wanda_masks(model: nn.Module, sparsity: float, norms: Mapping[str, torch.Tensor],
                n_m: tuple[int, int] | None = None) -> dict[str, torch.Tensor]:
    """Wanda's masks: score |W_ij| · ‖X_j‖₂, pruned per output row (or N:M within each row).

    ``norms`` come from :func:`input_norms`. With ``n_m=(2, 4)`` the scores choose a 2:4 pattern
    and ``sparsity`` is ignored (it is then n/m).

    Chapter 6, *Pruning lab*.
    """
    masks = {}
    for module_name, module in prunable_modules(model).items():
        name, w = f"{module_name}.weight", weight_matrix(module).detach()  # [out, in]
        if name not in norms:
            raise ValueError(f"no input norms for {name}: compute them with input_norms(model, batches).")
        _check_finite(name, w)
        scores = w.abs() * norms[name].to(w.device)[None, :]
        keep = row_mask(scores, sparsity) if n_m is None else n_m_mask(scores, *n_m)
        masks[name] = keep.t() if isinstance(module, Conv1D) else keep  # the weight's own layout
    return masks


def _check_masks(model: nn.Module, masks: Mapping[str, torch.Tensor]) -> dict[str, nn.Parameter]:
    params = dict(model.named_parameters())
    for name, mask in masks.items():
        if name not in params:
            raise ValueError(f"the masks name {name!r}, which is not a parameter of this model "
                             "(make the masks from the same model, e.g. magnitude_masks(model, 0.5)).")
        if mask.shape != params[name].shape or mask.dtype != torch.bool:
            raise ValueError(f"the mask of {name} must be a bool tensor of shape {tuple(params[name].shape)}.")
    return {name: params[name] for name in masks}


@torch.no_grad()
def apply_masks(model: nn.Module, masks: Mapping[str, torch.Tensor]) -> nn.Module:
    """Zero, in place, every weight whose mask is False; returns the model.

    Chapter 6, *Pruning lab*.
    """
    for name, p in _check_masks(model, masks).items():
        p.mul_(masks[name].to(p.device))
    return model


@contextlib.contextmanager
def masks_held(model: nn.Module, masks: Mapping[str, torch.Tensor]) -> Iterator[nn.Module]:
    """Apply ``masks`` and keep pruned weights at exactly zero while the model trains inside the block.

    Each masked parameter gets a gradient hook that multiplies its gradient by the mask: a pruned
    weight starts at zero and gets a zero gradient, so AdamW's moments stay zero, its update is
    zero, and weight decay of a zero is zero. The hooks are removed when the block ends.

    Chapter 6, *Pruning lab*.
    """
    params = _check_masks(model, masks)
    apply_masks(model, masks)
    handles = [p.register_hook(lambda g, m=masks[n].to(p.device): g * m) for n, p in params.items()]
    try:
        yield model
    finally:
        for h in handles:
            h.remove()


def cubic_schedule(final: float, stages: int, initial: float = 0.0) -> list[float]:
    """Sparsity after each of ``stages`` pruning steps: Zhu & Gupta's s_t = s_f + (s_i − s_f)(1 − t/n)³.

    Pruning fast at first, while many redundant weights remain, and slowly near the end.

    Chapter 6, *Pruning lab*.
    """
    final, initial = check_sparsity(final), check_sparsity(initial)
    if not isinstance(stages, int) or stages < 1 or initial > final:
        raise ValueError(f"cubic_schedule needs stages >= 1 and initial <= final, got stages={stages!r}, "
                         f"initial={initial}, final={final}.")
    return [final + (initial - final) * (1 - t / stages) ** 3 for t in range(1, stages + 1)]


def sparsity_of(model: nn.Module) -> float:
    """The share of exact zeros among the prunable weights of ``model``.

    Chapter 6, *Pruning lab*.
    """
    weights = prunable_weights(model).values()
    zeros = sum(int((w == 0).sum()) for w in weights)
    return zeros / sum(w.numel() for w in weights)


# ---------------------------------------------------------------------------------------------
# Pruning then fine-tuning, as chapter 6 runs it (every run cached by course_lib.compression.finetuning)
# ---------------------------------------------------------------------------------------------

#: Fine-tuning after pruning: 40 steps of 16 x 128 tokens (the course model's batch) at a peak
#: rate of 3e-4, a tenth of the course model's, the same batches for every run (seed 3). Smaller
#: batches or a higher rate make the unpruned control worse than the model it starts from.
RECOVERY_RECIPE = training.Recipe(steps=40, batch_size=16, seq_len=128, lr=3e-4, warmup_steps=5, seed=3)
#: The sparsities of the chapter's sweep.
SWEEP = (0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
#: Seeds of the fine-tuning batches on which chapter 6 compares gradual and one-shot pruning to 90 %.
GRADUAL_SEEDS = (RECOVERY_RECIPE.seed, 103, 203)


def prune_and_finetune(model: nn.Module, masks: Mapping[str, torch.Tensor], label: str,
                       recipe: training.Recipe = RECOVERY_RECIPE,
                       tokenizer: PreTrainedTokenizerBase | None = None,
                       progress: bool = True) -> finetuning.FinetuneResult:
    """Fine-tune a pruned copy of ``model`` with its masks held (the original is left as it is).

    Cached by :func:`course_lib.compression.finetuning.finetune`: the key includes the pruned weights, so a
    different mask is a different run.

    Chapter 6, *Pruning lab*.
    """
    pruned = copy.deepcopy(model)
    with masks_held(pruned, masks):
        return finetuning.finetune(pruned, label, recipe, tokenizer, progress=progress)


def gradual_prune(model: nn.Module, final: float, stages: int, scope: str = "global",
                  recipe: training.Recipe = RECOVERY_RECIPE,
                  tokenizer: PreTrainedTokenizerBase | None = None,
                  progress: bool = True) -> list[finetuning.FinetuneResult]:
    """Prune to :func:`cubic_schedule`'s next sparsity, fine-tune, repeat: ``stages`` rounds.

    The rounds share ``recipe.steps`` between them (the same budget as one-shot pruning with
    ``recipe``), each with its own batches (seed ``recipe.seed + stage``). Weights pruned in one
    round stay pruned: they are zeros, the smallest magnitudes of the next round.

    Chapter 6, *Pruning lab*.
    """
    steps = recipe.steps // stages
    if steps < 1:
        raise ValueError(f"{recipe.steps} steps cannot be shared by {stages} stages: use fewer stages.")
    results, current = [], model
    for stage, sparsity in enumerate(cubic_schedule(final, stages), start=1):
        stage_recipe = dataclasses.replace(recipe, steps=steps, seed=recipe.seed + stage,
                                           warmup_steps=min(recipe.warmup_steps, steps))
        masks = magnitude_masks(current, sparsity, scope)
        label = f"gradual {scope} {final:.0%} stage {stage} of {stages}"
        results.append(prune_and_finetune(current, masks, label, stage_recipe, tokenizer, progress))
        current = results[-1].model
    return results


#: The parts of chapter 6's fine-tuning runs (:func:`chapter_finetunes`), which need nothing of
#: each other: ``python -m course_lib prepare`` runs them side by side.
CHAPTER_PARTS = ("magnitude layer", "magnitude global", "gradual", "neurons")


def chapter_finetunes(model: nn.Module, tokenizer: PreTrainedTokenizerBase | None = None,
                      progress: bool = True, parts: Iterable[str] = CHAPTER_PARTS) -> None:
    """Every fine-tuning run of chapter 6, as its notebook makes them (cached: a second call loads).

    The parts (:data:`CHAPTER_PARTS`): the magnitude sweep per layer and global (every sparsity
    of :data:`SWEEP`; the unpruned control once, with the per-layer part), one-shot and gradual
    pruning to 90 % (four stages) on every seed of :data:`GRADUAL_SEEDS` (the one-shot run on
    the recipe's own seed is the global sweep's run at 90 %), and the model with half of its
    MLP units removed.

    Chapter 6, *Pruning lab*.
    """
    from course_lib.compression import prune_structured
    from course_lib.text import data

    parts = tuple(parts)
    unknown = set(parts) - set(CHAPTER_PARTS)
    if unknown:
        raise ValueError(f"chapter 6's fine-tuning parts are {', '.join(CHAPTER_PARTS)}; "
                         f"got {', '.join(sorted(unknown))}.")
    tokenizer = data.course_tokenizer() if tokenizer is None else tokenizer
    for scope in SCOPES:
        if f"magnitude {scope}" not in parts:
            continue
        for s in SWEEP:
            if s == 0 and scope != SCOPES[0]:
                continue  # nothing pruned: one control run serves both scopes, as in ch06
            prune_and_finetune(model, magnitude_masks(model, s, scope), f"magnitude {scope} {s:.0%}",
                               RECOVERY_RECIPE, tokenizer, progress)
    if "gradual" in parts:
        for seed in GRADUAL_SEEDS:  # one shot against gradual, on several seeds of the batches
            recipe = dataclasses.replace(RECOVERY_RECIPE, seed=seed)
            gradual_prune(model, 0.9, 4, "global", recipe, tokenizer, progress)
            if seed != RECOVERY_RECIPE.seed:  # that one is the global sweep's
                prune_and_finetune(model, magnitude_masks(model, 0.9, "global"),
                                   "magnitude global 90%", recipe, tokenizer, progress)
    if "neurons" in parts:
        smaller = prune_structured.shrink_mlp(model, prune_structured.neurons_to_keep(model, 0.5))
        finetuning.finetune(smaller, "neurons 50%", RECOVERY_RECIPE, tokenizer, progress=progress)
