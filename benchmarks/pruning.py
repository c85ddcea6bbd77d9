"""Pruning the course model: sparsity, perplexity, bytes on disk and matmul latency per method.

Run ``.venv/bin/python benchmarks/pruning.py`` (under a minute on 2 CPU cores once the course model
and chapter 6's fine-tuning runs are cached; ``python -m course_lib prepare`` builds them, and a
missing run is trained here). It prints

* per method (magnitude per matrix and global, Wanda, 2:4, MLP units, heads, a block): the sparsity
  of the block weights counted in the saved file, the parameters left, test perplexity before and
  (where chapter 6 fine-tunes) after fine-tuning, and the bytes of the block weights saved dense, as
  CSR and as a bitmask;
* the latency of a dense matmul against torch.sparse CSR and a structurally smaller dense layer
  (``--size``, ``--tokens``), and of 2:4 sparse tensor cores where the machine has them.

Nothing is hard-coded: every number is measured on this machine.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.compression import finetuning, prune, prune_structured, ptq, sparse_checkpoints  # noqa: E402
from course_lib.text import (
    course_model,
    data,
    models,
    training,  # noqa: E402
)


def file_bytes(model: torch.nn.Module, folder: Path) -> tuple[float, list[int]]:
    """Sparsity counted in the saved block weights, and their file bytes per format."""
    names = set(prune.prunable_weights(model))
    state = {n: p.detach() for n, p in model.named_parameters() if n in names}
    sizes = [sparse_checkpoints.save_checkpoint(state, folder / f"{fmt}.safetensors", fmt)
             for fmt in sparse_checkpoints.FORMATS]
    zeros, total = sparse_checkpoints.count_zeros(sparse_checkpoints.load_checkpoint(folder / "dense.safetensors"))
    return zeros / total, sizes


def main() -> int:
    """Measure every method and print the two tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="matmul layer size (out = in)")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per matmul")
    parser.add_argument("--repeat", type=int, default=7, help="timed rounds (best and median kept)")
    args = parser.parse_args()
    tokenizer = data.course_tokenizer()
    model = course_model.course_model(progress=False)
    recipe = prune.RECOVERY_RECIPE
    norms = prune.input_norms(model, training.training_batches(
        "gpt2", tokenizer, training.Recipe(steps=8, batch_size=8, seq_len=128, seed=11)))

    def pruned(masks: dict[str, torch.Tensor]) -> torch.nn.Module:
        return prune.apply_masks(copy.deepcopy(model), masks)

    cases: list[tuple[str, torch.nn.Module, torch.nn.Module | None]] = [("dense", model, None)]
    for scope in prune.SCOPES:
        for s in (0.5, 0.9):
            masks = prune.magnitude_masks(model, s, scope)
            tuned = prune.prune_and_finetune(model, masks, f"magnitude {scope} {s:.0%}", recipe, tokenizer,
                                             progress=False).model
            cases.append((f"magnitude {scope} {s:.0%}", pruned(masks), tuned))
    cases.append(("Wanda 50%", pruned(prune.wanda_masks(model, 0.5, norms)), None))
    cases.append(("Wanda 2:4", pruned(prune.wanda_masks(model, 0.5, norms, n_m=(2, 4))), None))
    smaller = prune_structured.shrink_mlp(model, prune_structured.neurons_to_keep(model, 0.5))
    tuned = finetuning.finetune(copy.deepcopy(smaller), "neurons 50%", recipe, tokenizer, progress=False).model
    cases.append(("50% of MLP units removed", smaller, tuned))
    heads = prune_structured.weakest_heads(model, 4)
    cases.append(("4 lowest-norm heads removed", prune_structured.remove_heads(model, heads), None))
    cases.append(("last block removed", prune_structured.drop_blocks(model, [model.config.n_layer - 1]), None))

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, m, ft in cases:
            folder = Path(tmp) / label.replace(" ", "_").replace("%", "pct").replace(":", "-")
            folder.mkdir()
            sparsity, sizes = file_bytes(m, folder)
            after = f"{ptq.test_perplexity(ft, tokenizer):.2f}" if ft is not None else "-"
            rows.append([label, f"{sparsity:.1%}", f"{models.count_parameters(m):,}",
                         f"{ptq.test_perplexity(m, tokenizer):.2f}", after] + [f"{b:,}" for b in sizes])
    print(Table(["method", "zeros in file", "parameters", "perplexity", "fine-tuned", "dense (B)", "CSR (B)",
                 "bitmask (B)"], rows,
                title=f"Pruning the course model (block weights saved as safetensors; "
                      f"{torch.get_num_threads()} CPU thread(s))"))
    print()
    latency = sparse_checkpoints.matmul_latency(args.size, args.size, args.tokens, (0.5, 0.9, 0.95, 0.99),
                                            repeats=args.repeat)
    print(sparse_checkpoints.latency_table(latency))
    available, reason = sparse_checkpoints.semi_structured_available("cuda" if torch.cuda.is_available() else "cpu")
    print()
    if available:
        print(sparse_checkpoints.latency_table(sparse_checkpoints.semi_structured_latency(
            4096, 4096, 512, repeats=args.repeat, device="cuda")))
    else:
        print(f"2:4 semi-structured timing skipped: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
