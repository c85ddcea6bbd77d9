"""Fine-tuning under quantization: quantization-aware training (QAT), and the fine-tuning runs of QLoRA.

Chapter 5 ("Quantization") fine-tunes the course model with fake-quantized weights (QAT, with
an FP32 control run) and compares LoRA adapters on a frozen NF4 base (QLoRA) with full
fine-tuning; every run goes through :func:`course_lib.training.train`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from torch import nn
from transformers import PreTrainedTokenizerBase

from course_lib import data, training
from course_lib.quant import QuantConfig
from course_lib.quant_layers import describe, finish_qat, prepare_qat, quantize_model

#: Fine-tuning recipe of the QAT experiment: 40 short steps at 1/30 of the course model's peak rate (3e-3),
#: gentle enough that the same steps of plain FP32 training (the control) do not disturb the model.
QAT_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=1e-4, warmup_steps=5, seed=1)

#: Recipes of the QLoRA experiment (adapters take a larger rate than full fine-tuning, as usual).
QLORA_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=3e-3, warmup_steps=5, seed=2)
FULL_FT_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=5e-4, warmup_steps=5, seed=2)


@dataclass
class FinetuneResult:
    """A fine-tuned model, its loss history and the seconds training took."""

    label: str
    model: nn.Module
    history: list[float]
    seconds: float


def finetune(model: nn.Module, label: str, recipe: training.Recipe, tokenizer: PreTrainedTokenizerBase | None = None,
             texts: Sequence[str] | None = None, progress: bool = True) -> FinetuneResult:
    """Train ``model`` in place with :func:`course_lib.models.train` (its trainable parameters only)."""
    tokenizer = data.course_tokenizer() if tokenizer is None else tokenizer
    start = time.perf_counter()
    history = training.train(model, "gpt2", tokenizer, recipe, texts=texts, progress=progress, desc=label)
    return FinetuneResult(label, model, history, time.perf_counter() - start)


def qat(model: nn.Module, config: str | QuantConfig, recipe: training.Recipe = QAT_RECIPE,
        tokenizer: PreTrainedTokenizerBase | None = None, progress: bool = True) -> FinetuneResult:
    """Quantization-aware fine-tuning: train with fake-quantized weights, then store them quantized.

    Returns the really quantized model (:func:`quantize_model` of the trained float weights), whose
    forward pass equals the one the fake-quantized model trained with.
    """
    fake = prepare_qat(model, config)
    result = finetune(fake, f"QAT {describe(config)}", recipe, tokenizer, progress=progress)
    result.model = quantize_model(finish_qat(fake), config)
    return result


def lowercase_split(split: str) -> list[str]:
    """The course corpus's ``split`` in lower case: a style the course model has never read."""
    return [t.lower() for t in data.load_corpus("course", split)]
