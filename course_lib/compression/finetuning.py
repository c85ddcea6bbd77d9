"""Fine-tuning a model with a cache: the runs of chapters 5 and 6 train once and load afterwards.

Chapter 5 ("Quantization") fine-tunes the course model under quantization (QAT, QLoRA, LoRA, full
fine-tuning); chapter 6 ("Pruning lab") fine-tunes pruned copies of it with their masks held fixed.
Every run goes through :func:`course_lib.text.training.train`; :func:`finetune` saves the trained
parameters as safetensors under ``cache_dir()/finetunes``, keyed by the run's label, its recipe,
the model's state before training and the data, so that a second identical call only loads.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import PreTrainedTokenizerBase

from course_lib.base import env
from course_lib.text import data, training

__all__ = ["FinetuneResult", "finetune"]

#: Where :func:`finetune` caches trained parameters, under :func:`course_lib.base.env.cache_dir`.
_CACHE_FOLDER = "finetunes"


@dataclass
class FinetuneResult:
    """A fine-tuned model, its loss history and the seconds training took.

    Chapter 5, *Quantization*.
    """

    label: str
    model: nn.Module
    history: list[float]
    seconds: float


def _state_fingerprint(model: nn.Module) -> str:
    """A hash of every tensor in ``model``'s state (names, dtypes, shapes, bytes)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict(keep_vars=False).items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _finetune_cache_path(model: nn.Module, label: str, recipe: training.Recipe,
                        tokenizer: PreTrainedTokenizerBase, texts: Sequence[str] | None = None) -> Path:
    """The safetensors file that caches a fine-tune: keyed by method, recipe, model state and data."""
    blob = {"method": label, "recipe": asdict(recipe), "model": _state_fingerprint(model),
            "tokenizer": data.tokenizer_fingerprint(tokenizer),
            "corpus": data.CORPUS_VERSION if texts is None else data.texts_fingerprint(texts)}
    key = hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:20]
    slug = "".join(c if c.isalnum() else "-" for c in label.lower()).strip("-")
    return env.cache_dir() / _CACHE_FOLDER / f"{slug}-{key}.safetensors"


def _trainable(model: nn.Module) -> dict[str, nn.Parameter]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def _load_finetune(model: nn.Module, path: Path) -> tuple[list[float], float] | None:
    """Copy cached trained parameters into ``model``; (history, seconds), or None if absent or damaged."""
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        state = load_file(str(path))
        params = _trainable(model)
        if set(state) != set(params) or any(state[n].shape != p.shape for n, p in params.items()):
            return None
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(state[n].to(p.device, p.dtype))
        return [float(v) for v in json.loads(meta["history"])], float(meta["seconds"])
    except Exception:  # noqa: BLE001 - any damage means: train again
        return None


def finetune(model: nn.Module, label: str, recipe: training.Recipe, tokenizer: PreTrainedTokenizerBase | None = None,
             texts: Sequence[str] | None = None, progress: bool = True, cache: bool = True) -> FinetuneResult:
    """Train ``model`` in place with :func:`course_lib.text.training.train` (its trainable parameters only).

    With ``cache=True`` the trained parameters are saved as safetensors under
    ``cache_dir()/finetunes``, keyed by ``label``, the recipe, the model's state before training
    (base checkpoint and adapter initialisation) and the data; a later identical call loads them
    instead of training (``seconds`` is then the original run's). A cache that cannot be written
    raises :class:`course_lib.base.env.CacheError` with the fix (``cache=False`` trains without it).

    Chapter 5, *Quantization*.
    """
    tokenizer = data.course_tokenizer() if tokenizer is None else tokenizer
    path = _finetune_cache_path(model, label, recipe, tokenizer, texts) if cache else None
    if path is not None and path.is_file():
        loaded = _load_finetune(model, path)
        if loaded is not None:
            model.eval()
            return FinetuneResult(label, model, *loaded)
    if path is not None:
        env.check_cache()  # before training, not after
    start = time.perf_counter()
    history = training.train(model, "gpt2", tokenizer, recipe, texts=texts, progress=progress, desc=label)
    seconds = time.perf_counter() - start
    if path is not None:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            state = {n: p.detach().cpu().contiguous().clone() for n, p in _trainable(model).items()}
            save_file(state, str(tmp), metadata={"history": json.dumps(history), "seconds": repr(seconds)})
            tmp.replace(path)
        except (OSError, SafetensorError) as err:
            raise env.cache_write_error(path, err) from None
        finally:
            if tmp.is_file():
                tmp.unlink()
    return FinetuneResult(label, model, history, seconds)
