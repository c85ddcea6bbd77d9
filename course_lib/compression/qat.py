"""Fine-tuning under quantization: quantization-aware training (QAT), and the fine-tuning runs of QLoRA.

Chapter 5 ("Quantization") fine-tunes the course model with fake-quantized weights (QAT, with
an FP32 control run) and compares LoRA adapters on a frozen NF4 base (QLoRA) with full
fine-tuning; every run goes through :func:`course_lib.text.training.train`.
"""

from __future__ import annotations

from torch import nn
from transformers import PreTrainedTokenizerBase

from course_lib.compression.finetuning import FinetuneResult, finetune
from course_lib.compression.quant import QuantConfig
from course_lib.compression.quant_layers import describe, finish_qat, prepare_qat, quantize_model
from course_lib.text import data, training

#: Fine-tuning recipe of the QAT experiment: 40 short steps at 1/30 of the course model's peak rate (3e-3),
#: gentle enough that the same steps of plain FP32 training (the control) do not disturb the model.
QAT_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=1e-4, warmup_steps=5, seed=1)

#: Recipes of the QLoRA experiment: the same batches (seed 2); the adapters take a 6x larger peak rate than
#: full fine-tuning, as LoRA usually does (B starts at zero and the update is a product of two small
#: matrices, so it needs a larger rate to move as far; full fine-tuning moves every weight at once).
QLORA_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=3e-3, warmup_steps=5, seed=2)
FULL_FT_RECIPE = training.Recipe(steps=40, batch_size=8, seq_len=64, lr=5e-4, warmup_steps=5, seed=2)


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
    from course_lib.compression.lora import add_lora

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
