"""Selective activation checkpointing as torchtitan runs it: the ops whose outputs a block keeps.

Full checkpointing keeps a block's input and recomputes all of its forward pass in backward.
torchtitan's op-level policy keeps a few ops' outputs as well, those costly to recompute and
cheap to keep, and recomputes the rest (norms, SiLU, elementwise products). Read in
pytorch/torchtitan, ``torchtitan/parallelisms/parallelize_llama.py`` at commit eaea6f6 (the
version of its published H100 runs: ``_save_list`` and ``_custom_policy``; at 0596be3, in
``torchtitan/models/llama/parallelize_llama.py``, the same list without ``abs``; at 0413364,
its A100 runs of April 2024, ``no_recompute_list`` without ``abs`` and ``max``). It keeps the
outputs of

* ``aten.mm``, but every second one: a counter of the block's products, started afresh for
  each block's forward pass and again for its recomputation, skips the even ones;
* SDPA's fused kernels, flash and memory-efficient (the output and its log-sum-exp);
* ``_c10d_functional.reduce_scatter_tensor`` (sequence parallelism's, after each
  row-parallel product);
* ``aten.abs`` and ``aten.max`` (for FP8's scales; a BF16 block has none).

In a Llama block the products run wq, wk, wv, (attention), wo, w1, w3, w2: wq, wv, w1 and w2
are kept, wk, wo and w3 recomputed. The planner counts these bytes
(:mod:`course_lib.planner.recomputation`); :func:`context_fn` applies the policy to the course's
measurement on fake ranks (:mod:`course_lib.parallel.at_scale`, ``Layout(checkpointing=
"selective")``), which checks that count. Two things differ from torchtitan's list, both
because the measurement runs on this machine's CPU with Hugging Face's models: the CPU's
fused attention (``_scaled_dot_product_flash_attention_for_cpu``) is kept as the CUDA kernels
are, and GPT-2's products, which carry a bias and so run as ``aten.addmm``, count as products
(torchtitan's list names ``aten.mm``, its Llama's bias-free products).

Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*, plans with it
(its training planner); chapter 2 introduces activation checkpointing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

__all__ = ["KEPT_OPS", "PRODUCTS", "context_fn"]

_aten = torch.ops.aten
#: The matrix products the policy counts: torchtitan's ``aten.mm``, and GPT-2's biased ones.
PRODUCTS = frozenset({_aten.mm.default, _aten.addmm.default})
#: The other ops whose outputs the policy keeps: torchtitan's, and the CPU's fused attention.
KEPT_OPS = frozenset({
    _aten._scaled_dot_product_efficient_attention.default,
    _aten._scaled_dot_product_flash_attention.default,
    _aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
    _aten.abs.default,
    _aten.max.default,
})


def context_fn(every_second: bool = True) -> Callable[[], Any]:
    """A ``context_fn`` for ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``
    that applies torchtitan's policy to each checkpointed block.

    Each call (one per block and forward pass) starts its own count of products, as
    torchtitan's does. ``every_second=False`` keeps every product instead: a wrong policy,
    for a test to see that the measurement tells them apart.

    Used by the library's other modules.
    """
    def contexts() -> Any:
        products: Counter[str] = Counter()

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            mode = "recompute" if ctx.is_recompute else "forward"
            if func in PRODUCTS:
                products[mode] += 1
                keep = not every_second or products[mode] % 2 == 1
            else:
                keep = func in KEPT_OPS
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)

    return contexts
