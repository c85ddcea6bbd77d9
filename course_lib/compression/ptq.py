"""Post-training quantization of a whole model, measured: bytes, file size, perplexity, model size.

Chapter 5 ("Quantization") quantizes the course model with every method of :data:`PTQ_METHODS`
and measures what each stores and how well the model still predicts; it also asks whether larger
models suffer less, and prices a billion-parameter model at every precision from shapes alone.
Tables and plots of these results are in :mod:`course_lib.chapters.ch05`.
"""

from __future__ import annotations

import copy
import functools
import math
import time
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase
from transformers.pytorch_utils import Conv1D

from course_lib.base import env
from course_lib.compression import quant
from course_lib.compression.quant import QuantConfig
from course_lib.compression.quant_layers import (
    FLOAT_DTYPES,
    describe,
    effective_bits,
    model_bytes,
    quantize_model,
    safetensors_bytes,
    weight_matrix,
)
from course_lib.numbers import memory
from course_lib.text import data, evaluation, models, scaling

#: The methods of chapter 5's post-training quantization table, in order.
PTQ_METHODS: tuple[str, ...] = ("fp32", "fp16", "bf16", "int8-channel", "int4-g128", "int4-g64", "int4-g32",
                                "nf4", "nf4-dq", "int3-g128")


#: How chapter 5 measures perplexity: chapter 1's method (:func:`course_lib.text.evaluation.perplexity`)
#: with windows of 128 tokens that do not overlap (half the work of chapter 1's stride of 64, so that
#: dozens of models fit in the chapter's time; every token is still scored once, some with less context).
EVAL_WINDOW = EVAL_STRIDE = 128
#: Windows per forward pass when chapter 5 scores a model (the value does not depend on it; 8 is fastest on a CPU).
EVAL_BATCH = 8


#: How many stories of the test split chapters 5-7 score: the first 75 of 300 (5,635 tokens), so that their
#: dozens of evaluations fit in their time budget: those evaluations were most of the three chapters' time
#: with the 150 stories scored before.
EVAL_STORIES = 75


def test_perplexity(model: nn.Module, tokenizer: PreTrainedTokenizerBase | None = None,
                    texts: Sequence[str] | None = None) -> float:
    """Perplexity on the first :data:`EVAL_STORIES` test stories (or on ``texts``), windows of 128, no overlap.

    Chapter 5, *Quantization*.
    """
    return evaluation.perplexity(model, _tokenizer(tokenizer), split="test",
                                 texts=data.load_corpus("course", "test")[:EVAL_STORIES] if texts is None else texts,
                                 window=EVAL_WINDOW, stride=EVAL_STRIDE, batch_size=EVAL_BATCH).perplexity


def forward_seconds(model: nn.Module, dtype_names: Sequence[str] = ("fp32", "bf16"), batch: int = 8,
                    seq_len: int = 128, repeats: int = 5) -> dict[str, float]:
    """Seconds of one forward pass of ``model`` on a (batch, seq_len) batch of token ids, per dtype.

    Each dtype runs on its own copy of the model (``model.to(dtype)``); the runs are interleaved
    and the fastest of ``repeats`` is kept (:mod:`course_lib.base.timing`). How BF16 compares
    with FP32 depends on the CPU: one with AVX-512 BF16 or AMX instructions runs it fast, others
    convert every product to FP32 and run it slower.

    Chapter 5, *Quantization*.
    """
    from course_lib.base import dtypes
    from course_lib.base.timing import interleaved_times

    for name, value in (("batch", batch), ("seq_len", seq_len), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    device = next(model.parameters()).device
    vocab = int(model.config.vocab_size)
    ids = torch.randint(0, vocab, (batch, seq_len), generator=torch.Generator().manual_seed(0)).to(device)
    copies = [copy.deepcopy(model).to(dtypes.torch_dtype(name)).eval() for name in dtype_names]

    def forward(m: nn.Module):
        with torch.no_grad():
            return m(input_ids=ids)

    calls = [functools.partial(forward, m) for m in copies]
    for call in calls:
        call()  # warm-up
    times = interleaved_times(calls, repeats, device)
    return {name: min(t) for name, t in zip(dtype_names, times)}


def _tokenizer(tokenizer: PreTrainedTokenizerBase | None) -> PreTrainedTokenizerBase:
    return tokenizer if tokenizer is not None else data.course_tokenizer()


@dataclass(frozen=True)
class PTQResult:
    """One row of the PTQ table: what a method stores and how well the model still predicts.

    Chapter 5, *Quantization*.
    """

    method: str
    bits: float
    model_bytes: int
    file_bytes: int
    perplexity: float
    seconds: float


def ptq_study(model: nn.Module, methods: Sequence[str | QuantConfig] = PTQ_METHODS,
              tokenizer: PreTrainedTokenizerBase | None = None, *, progress: bool = True) -> list[PTQResult]:
    """Quantize ``model`` with each method; measure bytes, safetensors file size and perplexity.

    ``seconds`` is the time :func:`quantize_model` takes for the whole model. Perplexity is
    :func:`test_perplexity`: the fixed test split, windows of 128 without overlap. Every row
    computes in FP32 from the stored values, as the quantized layers decode to FP32: an FP16 or
    BF16 model's tensors are rounded to 16 bits and cast back before it is scored (whether a CPU
    computes faster or slower in BF16 depends on the CPU: :func:`forward_seconds` measures it).

    Chapter 5, *Quantization*.
    """
    tokenizer = _tokenizer(tokenizer)
    results = []
    for method in env.progress_bar(methods, len(methods), "quantizing", progress):
        start = time.perf_counter()
        q = quantize_model(model, method)
        seconds = time.perf_counter() - start
        is_cast = isinstance(method, str) and method.strip().lower() in FLOAT_DTYPES
        ppl = test_perplexity(copy.deepcopy(q).float() if is_cast else q, tokenizer)
        results.append(PTQResult(describe(method), effective_bits(q), model_bytes(q), safetensors_bytes(q),
                                 ppl, seconds))
    return results


@dataclass(frozen=True)
class SizeRow:
    """One scaling-study model: size, validation loss in FP32 and after quantization.

    Chapter 5, *Quantization*.
    """

    n_params: int
    fp32_loss: float
    quantized_loss: float

    @property
    def perplexity_change(self) -> float:
        """Relative change of perplexity, exp(quantized loss - FP32 loss) - 1."""
        return math.exp(self.quantized_loss - self.fp32_loss) - 1


def quantization_by_size(configs: Sequence[str | QuantConfig] = ("int4-channel",),
                         tokenizer: PreTrainedTokenizerBase | None = None,
                         progress: bool = True) -> dict[str, list[SizeRow]]:
    """Chapter 1's scaling-study models (cached), each quantized with every config; validation losses.

    Returns the rows per configuration label, smallest model first.

    Chapter 5, *Quantization*.
    """
    tokenizer = _tokenizer(tokenizer)
    window = scaling.SCALING_RECIPE.seq_len
    labels = [describe(c) for c in configs]
    if len(set(labels)) < len(labels):
        raise ValueError(f"two configurations share a label ({', '.join(labels)}); compare configurations that "
                         "differ in bits, scheme or granularity")
    out: dict[str, list[SizeRow]] = {label: [] for label in labels}
    for t in scaling.scaling_models(tokenizer=tokenizer, progress=progress):
        n = models.count_parameters(t.model)
        fp32 = scaling.validation_loss(t.model, tokenizer, window)
        for config in configs:
            loss = scaling.validation_loss(quantize_model(t.model, config), tokenizer, window)
            out[describe(config)].append(SizeRow(n, fp32, loss))
    return out


def _model_matrices(shape: memory.ModelShape) -> list[tuple[int, int]]:
    """The weight matrices (out, in) of a GPT-2-style model: the tied token embedding, then 4 per layer."""
    h = shape.hidden
    per_layer = [(3 * h, h), (h, h), (4 * h, h), (h, 4 * h)]
    return [(shape.vocab, h)] + per_layer * shape.n_layers


def weights_at_precision(shape: memory.ModelShape, method: str | QuantConfig, *,
                         embedding: bool = True, rest: str = "fp32") -> dict[str, float]:
    """Bytes of a model's weights under ``method``: quantized matrices (codes + overhead) and the rest.

    The same split as :func:`quantize_model`: matrices quantized, position embeddings, biases and
    layer norms kept in ``rest`` (FP32 by default). ``embedding=False`` keeps the tied token
    embedding in ``rest`` too, as GPTQ does (chapter 7). Returns codes, overhead (scales, zero
    points), rest and total bytes.

    Chapter 5, *Quantization*.
    """
    matrices = _model_matrices(shape)[0 if embedding else 1:]
    n_matrix = sum(a * b for a, b in matrices)
    if isinstance(method, str) and method.strip().lower() in FLOAT_DTYPES:
        total = memory.weight_memory(shape.n_params, method)
        return {"codes": total, "overhead": 0.0, "rest": 0.0, "total": total}
    codes = overhead = 0.0
    for m in matrices:
        parts = quant.storage_bytes(m, method)
        codes += parts["codes"]
        overhead += sum(parts.values()) - parts["codes"]
    kept = memory.weight_memory(shape.n_params - n_matrix, rest)
    return {"codes": codes, "overhead": overhead, "rest": kept, "total": codes + overhead + kept}


@dataclass(frozen=True)
class TorchCrosscheck:
    """How many of ``total`` weights our quantizers store exactly as torch's reference does.

    ``absmax_tensor`` / ``absmax_channel``: INT8 absmax codes; ``zeropoint_channel``: INT8
    zero-point codes, and ``torch_order`` the same codes redone in torch's order of operations;
    ``zeropoint_g64``: INT4 zero-point values in groups of 64, decoded.

    Chapter 5, *Quantization*.
    """

    total: int
    absmax_tensor: int
    absmax_channel: int
    zeropoint_channel: int
    torch_order: int
    zeropoint_g64: int


def torch_crosscheck(model: nn.Module) -> TorchCrosscheck:
    """Our codes against torch's own quantizers on every linear weight of ``model``.

    INT8 absmax per tensor and per channel against ``torch.quantize_per_tensor`` /
    ``torch.quantize_per_channel`` (qint8, zero point 0) with our scales; INT8 zero-point per
    channel against ``torch.quantize_per_channel`` (quint8) with our scales and zero points; INT4
    zero-point in groups of 64 against ``torch.fake_quantize_per_channel_affine`` with the groups
    laid out as channels. ``torch.quantize_per_channel`` adds the zero point *before* rounding
    (``round(zero + x / scale)``, in float32) where we, like ``fake_quantize``, round first;
    ``torch_order`` redoes our codes in torch's order to show that this is the only difference.

    Chapter 5, *Quantization*.
    """
    import warnings

    configs = {
        "tensor": QuantConfig(8, "absmax", "tensor", scale_dtype="fp32"),
        "channel": QuantConfig(8, "absmax", "channel", scale_dtype="fp32"),
        "zero": QuantConfig(8, "zeropoint", "channel", scale_dtype="fp32"),
        "group": QuantConfig(4, "zeropoint", "group", 64, scale_dtype="fp32"),
    }
    same = dict.fromkeys(configs, 0)
    torch_order = 0
    total = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's quantized tensors are deprecated; still the reference
        for module in model.modules():
            if not isinstance(module, (nn.Linear, Conv1D)):
                continue
            w = weight_matrix(module).detach().float().contiguous()
            total += w.numel()
            c = quant.quantize(w, configs["tensor"]).unpack()
            ref = torch.quantize_per_tensor(w, float(c.scale), 0, torch.qint8).int_repr()
            same["tensor"] += int((c.codes.reshape(w.shape).int() - 128 == ref.int()).sum())
            c = quant.quantize(w, configs["channel"]).unpack()
            zeros = torch.zeros(w.shape[0], dtype=torch.long)
            ref = torch.quantize_per_channel(w, c.scale[:, 0].double(), zeros, 0, torch.qint8).int_repr()
            same["channel"] += int((c.codes.reshape(w.shape).int() - 128 == ref.int()).sum())
            c = quant.quantize(w, configs["zero"]).unpack()
            scale, zero = c.scale[:, 0], c.zero[:, 0].float()
            ref = torch.quantize_per_channel(w, scale.double(), zero.long(), 0, torch.quint8).int_repr()
            same["zero"] += int((c.codes.reshape(w.shape) == ref).sum())
            reordered = torch.clamp(torch.round(zero[:, None] + w * (1.0 / scale)[:, None]), 0, 255)
            torch_order += int((reordered.to(torch.uint8) == ref).sum())
            cfg = configs["group"]
            c = quant.quantize(w, cfg).unpack()
            ours = quant.quantize_dequantize(w, cfg).reshape(-1, cfg.group_size)
            ref = torch.fake_quantize_per_channel_affine(w.reshape(-1, cfg.group_size), c.scale.flatten(),
                                                         c.zero.flatten().int(), 0, 0, 15)
            same["group"] += int((ours == ref).sum())

    return TorchCrosscheck(total, same["tensor"], same["channel"], same["zero"], torch_order,
                           same["group"])
