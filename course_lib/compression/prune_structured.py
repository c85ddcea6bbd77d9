"""Structured pruning of GPT-2: remove whole MLP units, attention heads or transformer blocks.

Chapter 6 ("Pruning lab") teaches it. Unlike unstructured pruning, which zeroes single weights and
leaves the shapes alone, structured pruning removes whole rows and columns, so the pruned model is
physically smaller and faster on any hardware. Each kind comes as a mask (zero the weights in place,
same shapes) and as a removal (a new, smaller copy) that computes the same logits. The module holds:

* neurons (MLP hidden units): ``neuron_scores``, ``neurons_to_keep``, ``mask_neurons``, ``shrink_mlp``;
* attention heads: ``head_scores``, ``weakest_heads``, ``mask_heads``, ``remove_heads``;
* transformer blocks: ``drop_blocks``.

GPT-2's linear layers are ``Conv1D`` with weight [in, out] and ``y = x @ W + b``. transformers 5
removed ``prune_heads`` and ``head_mask``, so head removal is done here by hand.
"""

from __future__ import annotations

import copy
import numbers
from typing import Iterable, Sequence

import torch
from torch import nn
from transformers import GPT2LMHeadModel, GPT2Model

__all__ = ["neuron_scores", "neurons_to_keep", "mask_neurons", "shrink_mlp",
           "head_scores", "weakest_heads", "mask_heads", "remove_heads", "drop_blocks"]

GPT2 = GPT2LMHeadModel | GPT2Model


def _blocks(model: nn.Module) -> nn.ModuleList:
    """The transformer blocks of a GPT-2, after checking that it is one."""
    name = type(model).__name__
    if name not in ("GPT2LMHeadModel", "GPT2Model"):
        raise ValueError(f"structured pruning here supports GPT-2 (GPT2LMHeadModel); got {name}")
    return model.transformer.h if name == "GPT2LMHeadModel" else model.h


def _slice(layer: nn.Module, index: torch.Tensor, dim: int) -> None:
    """Keep only ``index`` along ``dim`` of a Conv1D's weight (dim 1 = outputs: the bias too)."""
    index = index.to(layer.weight.device)
    with torch.no_grad():
        weight = layer.weight.index_select(dim, index).clone()
        layer.weight = nn.Parameter(weight, requires_grad=layer.weight.requires_grad)
        if dim == 1:
            bias = layer.bias.index_select(0, index).clone()
            layer.bias = nn.Parameter(bias, requires_grad=layer.bias.requires_grad)
            layer.nf = len(index)  # Conv1D.forward shapes its output with nf
        else:
            layer.nx = len(index)


# ---------------------------------------------------------------------------------------- neurons

def neuron_scores(model: GPT2) -> list[torch.Tensor]:
    """Per block, the L2 norm of all weights that touch each MLP hidden unit (float32, one per unit).

    A unit's weights are its incoming column of ``mlp.c_fc.weight``, its ``c_fc`` bias and its
    outgoing row of ``mlp.c_proj.weight``; a NaN or inf in any of them is a ValueError naming it.

    Chapter 6, *Pruning lab*.
    """
    scores = []
    for i, block in enumerate(_blocks(model)):
        fc, proj = block.mlp.c_fc, block.mlp.c_proj
        for name, p in (("c_fc.weight", fc.weight), ("c_fc.bias", fc.bias), ("c_proj.weight", proj.weight)):
            if not torch.isfinite(p).all():
                raise ValueError(f"block {i} mlp.{name} holds NaN or inf; score a model with finite weights")
        with torch.no_grad():
            squares = fc.weight.float().square().sum(0) + fc.bias.float().square()
            scores.append((squares + proj.weight.float().square().sum(1)).sqrt())
    return scores


def neurons_to_keep(model: GPT2, fraction: float) -> list[torch.Tensor]:
    """Per block, the sorted indices of the MLP units kept when ``fraction`` of each block's units go.

    Every block loses ``round(fraction * n_inner)`` units, those of lowest ``neuron_scores``; among
    equal scores the lower index goes first (a stable sort), so the choice is deterministic.

    Chapter 6, *Pruning lab*.
    """
    if (isinstance(fraction, bool) or not isinstance(fraction, numbers.Real)
            or not 0 <= fraction < 1):
        raise ValueError(f"fraction must be in [0, 1): 0.5 removes half the units of every block; "
                         f"got {fraction!r}")
    keep = []
    for scores in neuron_scores(model):
        removed = round(fraction * len(scores))
        if removed == len(scores):
            raise ValueError(f"fraction {fraction} removes all {len(scores)} units of every block; "
                             f"use a smaller fraction")
        order = torch.sort(scores, stable=True).indices
        keep.append(torch.sort(order[removed:]).values)
    return keep


def _check_keep(model: GPT2, keep: Sequence[Sequence[int] | torch.Tensor]) -> list[torch.Tensor]:
    """``keep`` as sorted index tensors, after checking it against the model's blocks."""
    blocks = _blocks(model)
    if len(keep) != len(blocks):
        raise ValueError(f"keep has {len(keep)} lists but the model has {len(blocks)} blocks; "
                         f"give one list of kept units per block")
    out = [torch.as_tensor(k, dtype=torch.long).flatten() for k in keep]
    if len({len(k) for k in out}) > 1:
        raise ValueError(f"keep lists must have the same length in every block (GPT-2 has one n_inner); "
                         f"got lengths {[len(k) for k in out]}")
    for i, (k, block) in enumerate(zip(out, blocks)):
        n = block.mlp.c_fc.weight.shape[1]
        if len(k) == 0 or int(k.min()) < 0 or int(k.max()) >= n or len(k.unique()) != len(k):
            raise ValueError(f"keep[{i}] must hold distinct unit indices in [0, {n}), at least one; "
                             f"got {k.tolist()}")
    return [k.sort().values for k in out]


def mask_neurons(model: GPT2, keep: Sequence[Sequence[int] | torch.Tensor]) -> GPT2:
    """Zero, in place, the incoming column, bias and outgoing row of every MLP unit not in ``keep``.

    ``keep`` holds one list of kept unit indices per block (``neurons_to_keep`` gives them).
    Returns ``model``.

    Chapter 6, *Pruning lab*.
    """
    for k, block in zip(_check_keep(model, keep), _blocks(model)):
        fc, proj = block.mlp.c_fc, block.mlp.c_proj
        removed = torch.ones(fc.weight.shape[1], dtype=torch.bool, device=fc.weight.device)
        removed[k.to(fc.weight.device)] = False
        with torch.no_grad():
            fc.weight[:, removed] = 0
            fc.bias[removed] = 0
            proj.weight[removed, :] = 0
    return model


def shrink_mlp(model: GPT2, keep: Sequence[Sequence[int] | torch.Tensor]) -> GPT2:
    """A new model whose MLPs hold only the units in ``keep``: ``c_fc`` and ``mlp.c_proj`` are sliced.

    The copy's config gets ``n_inner = len(keep[0])``, so it saves and loads as a plain GPT-2; it
    computes the same logits as ``mask_neurons`` (GELU(0) = 0). ``model`` is left untouched.

    Chapter 6, *Pruning lab*.
    """
    keep = _check_keep(model, keep)
    new = copy.deepcopy(model)
    for k, block in zip(keep, _blocks(new)):
        _slice(block.mlp.c_fc, k, dim=1)
        _slice(block.mlp.c_proj, k, dim=0)
    new.config.n_inner = len(keep[0])
    return new


# ------------------------------------------------------------------------------------------ heads

def _attns(model: GPT2) -> list[nn.Module]:
    """The self-attention module of every block."""
    return [block.attn for block in _blocks(model)]


def head_scores(model: GPT2) -> torch.Tensor:
    """The L2 norm of each head's rows of ``attn.c_proj.weight``: a [layers, heads] float32 tensor.

    A simple magnitude score: it ignores the queries, keys and values and how often the head fires.
    Every layer must have the same number of heads (score before ``remove_heads``).

    Chapter 6, *Pruning lab*.
    """
    attns = _attns(model)
    if len({a.num_heads for a in attns}) > 1:
        raise ValueError("head_scores needs the same number of heads in every layer; "
                         "score the model before remove_heads")
    with torch.no_grad():
        return torch.stack([a.c_proj.weight.float().reshape(a.num_heads, -1).norm(dim=1) for a in attns])


def weakest_heads(model: GPT2, count: int) -> dict[int, list[int]]:
    """The ``count`` heads of lowest :func:`head_scores` across all layers, as ``{layer: [head, ...]}``.

    Every layer keeps at least one head (a layer's last head is skipped: removing a whole layer is
    :func:`drop_blocks`' job), so ``count`` can be at most layers x (heads - 1). Ties go to the
    lower flat index (layer-major, a stable sort), so the choice is deterministic. The result can
    be handed to :func:`mask_heads` or :func:`remove_heads`.

    Chapter 6, *Pruning lab*.
    """
    scores = head_scores(model)
    layers, n = scores.shape
    most = layers * (n - 1)
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or not 0 < count <= most:
        raise ValueError(f"count must be a whole number from 1 to {most}: the model has {layers} layers "
                         f"of {n} heads and each keeps one (drop_blocks removes whole blocks); "
                         f"got {count!r}")
    heads: dict[int, list[int]] = {}
    for i in torch.argsort(scores.flatten(), stable=True).tolist():
        layer, head = divmod(i, n)
        if len(heads.get(layer, [])) < n - 1:
            heads.setdefault(layer, []).append(head)
            if sum(map(len, heads.values())) == count:
                break
    return {layer: sorted(hs) for layer, hs in sorted(heads.items())}


def _check_heads(model: GPT2, heads: dict[int, Iterable[int]]) -> dict[int, list[int]]:
    """``heads`` as {layer: sorted heads}, after checking every index against the model."""
    attns = _attns(model)
    out = {}
    for layer, hs in heads.items():
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not 0 <= layer < len(attns):
            raise ValueError(f"layer index {layer!r} out of range: the model has layers 0..{len(attns) - 1}")
        hs, n = list(hs), attns[layer].num_heads
        bad = [h for h in hs if isinstance(h, bool) or not isinstance(h, numbers.Integral) or not 0 <= h < n]
        if bad:
            raise ValueError(f"head index {bad[0]!r} of layer {layer} out of range: it has heads 0..{n - 1}")
        if len(set(hs)) != len(hs):
            raise ValueError(f"layer {layer}: head indices must be distinct; got {hs}")
        out[int(layer)] = sorted(int(h) for h in hs)
    return out


def mask_heads(model: GPT2, heads: dict[int, list[int]]) -> GPT2:
    """Zero, in place, the rows of ``attn.c_proj.weight`` of the heads ``{layer: [head, ...]}``.

    This removes each head's contribution exactly; ``c_proj``'s bias is shared by all heads and stays.
    Returns ``model``.

    Chapter 6, *Pruning lab*.
    """
    attns = _attns(model)
    for layer, hs in _check_heads(model, heads).items():
        rows = attns[layer].c_proj.weight.view(attns[layer].num_heads, attns[layer].head_dim, -1)
        with torch.no_grad():
            rows[hs] = 0
    return model


def remove_heads(model: GPT2, heads: dict[int, list[int]]) -> GPT2:
    """A new model without the attention heads ``{layer: [head, ...]}``; ``model`` is left untouched.

    Slices each removed head's query, key and value columns (and biases) out of ``attn.c_attn`` and
    its rows out of ``attn.c_proj``, and sets the layer's ``split_size`` and ``num_heads``; the
    logits equal those of ``mask_heads``. The remaining heads are renumbered from 0;
    ``config.pruned_heads`` records, for the reader, the original indices removed per layer.
    A layer must keep at least one head (else use ``drop_blocks``). Saving and loading head-pruned
    models is not supported: ``from_pretrained`` of transformers 5 builds every layer with
    ``n_head`` heads and will not rebuild such a model (it stops on the size mismatch).

    Chapter 6, *Pruning lab*.
    """
    heads = _check_heads(model, heads)
    new = copy.deepcopy(model)
    attns = _attns(new)
    pruned = {int(k): list(v) for k, v in getattr(new.config, "pruned_heads", {}).items()}
    for layer, hs in heads.items():
        attn = attns[layer]
        n, d = attn.num_heads, attn.head_dim
        kept = [h for h in range(n) if h not in hs]
        if not kept:
            raise ValueError(f"layer {layer}: keep at least one head, "
                             f"or remove the whole block with drop_blocks")
        per_head = torch.arange(d)
        columns = torch.cat([part * attn.split_size + h * d + per_head for part in range(3) for h in kept])
        _slice(attn.c_attn, columns, dim=1)
        _slice(attn.c_proj, torch.cat([h * d + per_head for h in kept]), dim=0)
        attn.split_size, attn.num_heads = len(kept) * d, len(kept)
        original = [h for h in range(new.config.n_head) if h not in pruned.get(layer, [])]
        pruned[layer] = sorted(pruned.get(layer, []) + [original[h] for h in hs])
    new.config.pruned_heads = pruned
    return new


# ----------------------------------------------------------------------------------------- blocks

def drop_blocks(model: GPT2, blocks: Iterable[int]) -> GPT2:
    """A new model without the transformer blocks ``blocks``; ``model`` is left untouched.

    The copy's config gets the new ``n_layer`` and the remaining attention modules are renumbered
    (their ``layer_idx`` picks the key-value cache slot), so it saves and loads as a plain GPT-2.

    Chapter 6, *Pruning lab*.
    """
    h = _blocks(model)
    drop = list(blocks)
    for b in drop:
        if isinstance(b, bool) or not isinstance(b, numbers.Integral) or not 0 <= b < len(h):
            raise ValueError(f"block index {b!r} out of range: the model has blocks 0..{len(h) - 1}")
    if len(set(drop)) != len(drop):
        raise ValueError(f"block indices must be distinct; got {drop}")
    if len(drop) == len(h):
        raise ValueError("drop_blocks would drop every block; keep at least one")
    if drop and model.config.scale_attn_by_inverse_layer_idx:
        raise ValueError("drop_blocks does not support scale_attn_by_inverse_layer_idx=True: a reloaded "
                         "model would scale attention by its new layer numbers")
    new = copy.deepcopy(model)
    kept = [i for i in range(len(h)) if i not in drop]
    container = new.transformer if hasattr(new, "transformer") else new
    container.h = nn.ModuleList([container.h[i] for i in kept])
    for idx, block in enumerate(container.h):
        for attn in (block.attn, getattr(block, "crossattention", None)):
            if attn is not None:
                attn.layer_idx = idx
    new.config.n_layer = len(kept)
    if getattr(new.config, "pruned_heads", None):
        old = {int(k): v for k, v in new.config.pruned_heads.items()}
        new.config.pruned_heads = {j: old[i] for j, i in enumerate(kept) if i in old}
    return new
