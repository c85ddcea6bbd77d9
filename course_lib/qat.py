"""Fine-tuning under quantization: quantization-aware training (QAT), and the fine-tuning runs of QLoRA.

Chapter 5 ("Quantization") fine-tunes the course model with fake-quantized weights (QAT, with
an FP32 control run) and compares LoRA adapters on a frozen NF4 base (QLoRA) with full
fine-tuning; every run goes through :func:`course_lib.training.train`.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import PreTrainedTokenizerBase

from course_lib import data, env, training
from course_lib.quant import QuantConfig
from course_lib.quant_layers import describe, finish_qat, prepare_qat, quantize_model

#: Fine-tuning recipe of the QAT experiment: 40 short steps at 1/30 of the course model's peak rate (3e-3),
#: gentle enough that the same steps of plain FP32 training (the control) do not disturb the model.
QAT_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=1e-4, warmup_steps=5, seed=1)

#: Recipes of the QLoRA experiment: the same batches (seed 2); the adapters take a 6x larger peak rate than
#: full fine-tuning, as LoRA usually does (B starts at zero and the update is a product of two small
#: matrices, so it needs a larger rate to move as far; full fine-tuning moves every weight at once).
QLORA_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=3e-3, warmup_steps=5, seed=2)
FULL_FT_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=5e-4, warmup_steps=5, seed=2)

#: Where :func:`finetune` caches trained parameters, under :func:`course_lib.env.cache_dir`.
CACHE_FOLDER = "finetunes"


@dataclass
class FinetuneResult:
    """A fine-tuned model, its loss history and the seconds training took.

    Chapter 5, *Quantization*.
    """

    label: str
    model: nn.Module
    history: list[float]
    seconds: float


def state_fingerprint(model: nn.Module) -> str:
    """A hash of every tensor in ``model``'s state (names, dtypes, shapes, bytes).

    Chapter 5, *Quantization*.
    """
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict(keep_vars=False).items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def finetune_cache_path(model: nn.Module, label: str, recipe: training.Recipe,
                        tokenizer: PreTrainedTokenizerBase, texts: Sequence[str] | None = None) -> Path:
    """The safetensors file that caches a fine-tune: keyed by method, recipe, model state and data.

    Chapter 5, *Quantization*.
    """
    blob = {"method": label, "recipe": asdict(recipe), "model": state_fingerprint(model),
            "tokenizer": data.tokenizer_fingerprint(tokenizer),
            "corpus": data.CORPUS_VERSION if texts is None else data.texts_fingerprint(texts)}
    key = hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:20]
    slug = "".join(c if c.isalnum() else "-" for c in label.lower()).strip("-")
    return env.cache_dir() / CACHE_FOLDER / f"{slug}-{key}.safetensors"


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
    """Train ``model`` in place with :func:`course_lib.training.train` (its trainable parameters only).

    With ``cache=True`` the trained parameters are saved as safetensors under
    ``cache_dir()/finetunes``, keyed by ``label``, the recipe, the model's state before training
    (base checkpoint and adapter initialisation) and the data; a later identical call loads them
    instead of training (``seconds`` is then the original run's).

    Chapter 5, *Quantization*.
    """
    tokenizer = data.course_tokenizer() if tokenizer is None else tokenizer
    path = finetune_cache_path(model, label, recipe, tokenizer, texts) if cache else None
    if path is not None and path.is_file():
        loaded = _load_finetune(model, path)
        if loaded is not None:
            model.eval()
            return FinetuneResult(label, model, *loaded)
    start = time.perf_counter()
    history = training.train(model, "gpt2", tokenizer, recipe, texts=texts, progress=progress, desc=label)
    seconds = time.perf_counter() - start
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            state = {n: p.detach().cpu().contiguous().clone() for n, p in _trainable(model).items()}
            tmp = path.with_suffix(".tmp")
            save_file(state, str(tmp), metadata={"history": json.dumps(history), "seconds": repr(seconds)})
            tmp.replace(path)
        except OSError:
            pass  # an unwritable cache only costs a retrain next time
    return FinetuneResult(label, model, history, seconds)


def qat(model: nn.Module, config: str | QuantConfig, recipe: training.Recipe = QAT_RECIPE,
        tokenizer: PreTrainedTokenizerBase | None = None, progress: bool = True,
        cache: bool = True) -> FinetuneResult:
    """Quantization-aware fine-tuning: train with fake-quantized weights, then store them quantized.

    Returns the really quantized model (:func:`quantize_model` of the trained float weights), whose
    forward pass equals the one the fake-quantized model trained with.

    Chapter 5, *Quantization*.
    """
    fake = prepare_qat(model, config)
    result = finetune(fake, f"QAT {describe(config)}", recipe, tokenizer, progress=progress, cache=cache)
    result.model = quantize_model(finish_qat(fake), config)
    return result


def lowercase_split(split: str) -> list[str]:
    """The course corpus's ``split`` in lower case: a style the course model has never read.

    Chapter 5, *Quantization*.
    """
    return [t.lower() for t in data.load_corpus("course", split)]


def chapter_finetunes(model: nn.Module, tokenizer: PreTrainedTokenizerBase | None = None,
                      progress: bool = True) -> dict[str, FinetuneResult]:
    """Every fine-tuning run of the chapter, as its notebook calls them (cached: a second call loads).

    The FP32 control and QAT at INT4/INT3 g128 on the course corpus; QLoRA (rank 8, alpha 16 on NF4 + DQ),
    LoRA on the FP32 model and full fine-tuning on lower-case stories.

    Chapter 5, *Quantization*.
    """
    from course_lib.lora import add_lora

    tokenizer = data.course_tokenizer() if tokenizer is None else tokenizer
    lower = lowercase_split("train")
    runs = {"control": finetune(quantize_model(model, "fp32"), "FP32 fine-tuning", QAT_RECIPE, tokenizer,
                                progress=progress)}
    for method in ("int4-g128", "int3-g128"):
        runs[method] = qat(model, method, tokenizer=tokenizer, progress=progress)
    runs["qlora"] = finetune(add_lora(quantize_model(model, "nf4-dq"), rank=8, alpha=16), "QLoRA",
                             QLORA_RECIPE, tokenizer, texts=lower, progress=progress)
    runs["lora"] = finetune(add_lora(model, rank=8, alpha=16), "LoRA on FP32", QLORA_RECIPE, tokenizer,
                            texts=lower, progress=progress)
    runs["full"] = finetune(quantize_model(model, "fp32"), "full fine-tuning", FULL_FT_RECIPE, tokenizer,
                            texts=lower, progress=progress)
    return runs
