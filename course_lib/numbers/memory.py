"""How much memory training a transformer takes: estimates, ZeRO/FSDP sharding, and measurements.

Chapter 2 (*The memory wall*) teaches it. The estimate follows the published accounting:

* model states with Adam: 16 bytes per parameter, both in pure FP32 (4 weights + 4 gradients
  + 8 optimizer) and in mixed precision (2 half weights + 2 half gradients + 12 for FP32 master
  weights, momentum and variance) -- ZeRO paper, Rajbhandari et al. 2019, arXiv 1910.02054;
* ZeRO stage 1 shards the optimizer states (with the master weights), stage 2 also the gradients,
  stage 3 also the weights; FSDP's full sharding is stage 3;
* activations per transformer layer: ``s*b*h*(34 + 5*a*s/h)`` bytes for 16-bit activations with
  dropout, no recomputation -- Korthikanti et al. 2022, arXiv 2205.05198, generalised here to any
  element size, grouped-query attention and a gated MLP (:func:`activation_bytes_per_layer`).

Every figure is in bytes; :func:`gb` turns bytes into decimal gigabytes (10**9 bytes), the unit
the lecture notes use ("4 GB for 1B parameters"). :mod:`course_lib.numbers.memory_meter` measures
the same components on a real model, with :func:`tensor_bytes` here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

import torch

from course_lib.base import dtypes
from course_lib.base.checks import choice as _choice
from course_lib.base.checks import number as _number
from course_lib.base.checks import positive as _positive
from course_lib.numbers import i18n

GB = 10**9
GIB = 2**30

#: Bytes one stored value takes, per data type name the estimator accepts (from the one dtype table).
BYTES_PER_DTYPE: dict[str, float] = {name: dtypes.BYTES[name] for name in ("fp32", "fp16", "bf16", "fp8", "int8", "int4")}


@dataclass(frozen=True)
class Precision:
    """How a training regime stores weights, gradients, master weights and optimizer states.

    Chapter 2, *The memory wall*.
    """

    name: str
    weight_bytes: float
    grad_bytes: float
    master_bytes: float
    state_bytes: float
    activation_bytes: float
    description: str


#: Training precisions the estimator knows.
PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("fp32", 4, 4, 0, 4, 4, "everything in FP32"),
    "bf16-mixed": Precision(
        "bf16-mixed", 2, 2, 4, 4, 2, "BF16 weights, gradients and activations; FP32 master weights and optimizer states"
    ),
    "fp16-mixed": Precision(
        "fp16-mixed", 2, 2, 4, 4, 2, "FP16 weights, gradients and activations; FP32 master weights and optimizer states"
    ),
    "bf16": Precision("bf16", 2, 2, 0, 2, 2, "pure BF16: weights, gradients and optimizer states all in BF16"),
}


@dataclass(frozen=True)
class Optimizer:
    """An optimizer by the number of per-parameter states it keeps and their storage size.

    Chapter 2, *The memory wall*.
    """

    name: str
    n_states: int
    bytes_per_state: float | None  # None: the precision's state size
    description: str


#: Optimizers the estimator knows.
OPTIMIZERS: dict[str, Optimizer] = {
    "adam": Optimizer("adam", 2, None, "Adam/AdamW: momentum and variance"),
    "adam-8bit": Optimizer("adam-8bit", 2, 1, "8-bit Adam (bitsandbytes): two states of 1 byte (block scales ignored)"),
    "sgd-momentum": Optimizer("sgd-momentum", 1, None, "SGD with momentum: one state"),
    "sgd": Optimizer("sgd", 0, None, "plain SGD: no state"),
}

ZERO_STAGES = (0, 1, 2, 3)

#: The largest parameter count and sequence length the estimator takes: far beyond any model
#: trained or context used, so a larger one is most likely a digit too many.
MAX_PARAMS = 10**15
MAX_SEQ_LEN = 10**8

#: The lecture notes' rule of thumb: 4 bytes of FP32 weights plus "about 20 extra bytes per parameter".
RULE_OF_THUMB_BYTES_PER_PARAM = 24

#: GPU memory a training process cannot use for tensors: the CUDA context, created by the first CUDA
#: call (about 700-800 MB per process on the PyTorch forums; less with CUDA's lazy module loading).
CUDA_CONTEXT_BYTES = 768 * 2**20
#: Share of the card kept free for the caching allocator's rounding and fragmentation: the course's
#: assumption (a measured peak of ``memory_allocated`` sits below ``memory_reserved``).
ALLOCATOR_MARGIN = 0.05


@dataclass(frozen=True)
class GPU:
    """A GPU by its name and memory capacity in bytes.

    Chapter 10, *Hardware for LLM training*.
    """

    name: str
    capacity: int

    @property
    def usable(self) -> float:
        """Bytes left for tensors: the capacity less the allocator's margin and the CUDA context."""
        return self.capacity * (1 - ALLOCATOR_MARGIN) - CUDA_CONTEXT_BYTES


#: GPUs the verdicts compare against (capacity as the vendor sells it, in GiB).
GPUS: tuple[GPU, ...] = (
    GPU("16 GiB (T4, V100-16GB)", 16 * GIB),
    GPU("24 GiB (RTX 4090, A10)", 24 * GIB),
    GPU("80 GiB (A100-80GB, H100)", 80 * GIB),
)


@dataclass(frozen=True)
class ModelShape:
    """The shape of a GPT-like decoder: layers, hidden size, attention heads, vocabulary, positions.

    Chapter 2, *The memory wall*.
    """

    n_layers: int
    hidden: int
    n_heads: int
    vocab: int = 50257
    positions: int = 2048

    @property
    def n_params(self) -> int:
        """Parameter count of a GPT-2-style model with tied embeddings (HF Ultra-Scale Playbook)."""
        h, L = self.hidden, self.n_layers
        return self.vocab * h + self.positions * h + L * (12 * h * h + 13 * h) + 2 * h


#: Named model shapes (GPT-2 small from its config, LLaMA-7B's shape, GPT-3 175B from
#: Brown et al. 2020); a "-shape" has a Llama's layers, width and heads, not its
#: parameter count (rotary positions, SwiGLU, grouped-query attention).
MODEL_PRESETS: dict[str, ModelShape] = {
    "gpt2-124M": ModelShape(12, 768, 12, 50257, 1024),
    "gpt3-1.3B": ModelShape(24, 2048, 16, 50257, 2048),
    "llama-7B-shape": ModelShape(32, 4096, 32, 32000, 0),
    "gpt3-175B": ModelShape(96, 12288, 96, 50257, 2048),
    "llama2-70B-shape": ModelShape(80, 8192, 64, 32000, 0),
    "llama3-405B-shape": ModelShape(126, 16384, 128, 128000, 0),
}

# (parameters, layers, hidden) of the GPT-3 family, Brown et al. 2020, Table 2.1: the depth a
# model of a given size typically has, used to give a bare parameter count a plausible shape.
_GPT3_FAMILY = ((125e6, 12, 768), (350e6, 24, 1024), (760e6, 24, 1536), (1.3e9, 24, 2048),
                (2.7e9, 32, 2560), (6.7e9, 32, 4096), (13e9, 40, 5140), (175e9, 96, 12288))


def gb(n_bytes: float) -> float:
    """Bytes expressed in decimal gigabytes (10**9 bytes), the unit of the lecture notes.

    Chapter 2, *The memory wall*.
    """
    if _number(n_bytes, "n_bytes") < 0:
        raise ValueError(f"n_bytes must be a number of bytes >= 0, got {n_bytes!r}.")
    return n_bytes / GB


def bytes_per_param(dtype: str) -> float:
    """Bytes one parameter takes when stored in ``dtype`` (fp32, fp16, bf16, fp8, int8, int4).

    Chapter 2, *The memory wall*.
    """
    return BYTES_PER_DTYPE[_choice(dtype, BYTES_PER_DTYPE, "dtype")]


def weight_memory(n_params: float, dtype: str = "fp32") -> float:
    """Bytes the weights of an ``n_params`` model take in ``dtype``: parameters times bytes each.

    Chapter 2, *The memory wall*.
    """
    return check_count(n_params, "mem_what_params", MAX_PARAMS) * bytes_per_param(dtype)


def shape_for_params(n_params: float, vocab: int = 50257) -> ModelShape:
    """A plausible GPT-like shape for a bare parameter count: GPT-3's depth, hidden size solved for.

    Chapter 2, *The memory wall*.
    """
    n = check_count(n_params, "mem_what_params", MAX_PARAMS)
    _, layers, _ = min(_GPT3_FAMILY, key=lambda row: abs(math.log(row[0] / n)))
    # Solve 12*L*h^2 + (vocab + positions)*h ~= n for h, then round to a multiple of 64.
    positions = 2048
    a, b = 12 * layers, vocab + positions
    h = (-b + math.sqrt(b * b + 4 * a * n)) / (2 * a)
    head_dim = 64 if h < 1536 else 128  # GPT-3's small models use 64-wide heads, the large ones 128
    hidden = max(head_dim, int(round(h / head_dim)) * head_dim)
    return ModelShape(layers, hidden, hidden // head_dim, vocab, positions)


def activation_bytes_per_layer(seq_len: int, batch: int, hidden: int, n_heads: int, bytes_per_element: float = 2,
                               mask_bytes: float = 1, dropout: bool = True, attention_scores: bool = True, *,
                               kv_heads: int | None = None, mlp: int = 0) -> float:
    """Bytes one transformer layer saves for backward, after Korthikanti et al. 2022 (arXiv 2205.05198).

    Per token, in ``e``-byte elements: the norms' inputs (``2h``), the projections' inputs (the norms' outputs, ``2h``),
    Q (``h``), K and V (``2hr``; ``r = kv_heads / n_heads``, None: 1), attention's output (``h``) and the MLP's: GELU's
    input and output, 4h wide (GPT, ``8h``), or with ``mlp`` > 0 a gated SwiGLU MLP's gate, up, SiLU and product
    (Llama, ``4 mlp``); for GPT the paper's ``16*e*s*b*h``. Dropout adds two masks (``2*d*s*b*h``; ``d``: 1 for CUDA's
    booleans, ``e`` on a CPU). Unfused attention keeps the softmax output, with dropout its dropped copy and mask too:
    ``a*s^2*b*(2e + d)`` (the paper's ``34*s*b*h + 5*a*s^2*b`` for e=2, d=1), else ``e*a*s^2*b``; fused attention
    (``attention_scores=False``, Dao et al. 2022) recomputes it. Left out: its log-sum-exp (``4*a*s*b``) and Hugging
    Face's FP32 copy of each RMSNorm input (``8*s*b*h``, measured on fake ranks: :mod:`course_lib.parallel.at_scale`).

    Chapter 2, *The memory wall*.
    """
    s = _positive(seq_len, "sequence length")
    b = _positive(batch, "batch size")
    h = _positive(hidden, "hidden size")
    a = _positive(n_heads, "number of heads")
    e = _positive(bytes_per_element, "bytes per element")
    d = _positive(mask_bytes, "bytes per dropout-mask element") if dropout else 0
    r = 1 if kv_heads is None else _positive(kv_heads, "number of key-value heads", integer=True) / a
    width = 6 + 2 * r + (4 * _positive(mlp, "width of the gated MLP", integer=True) / h if mlp else 8)  # x h
    return s * b * h * (width * e + 2 * d) + (a * s * s * b * (e + dropout * (e + d)) if attention_scores else 0)


def activation_bytes_per_tp_rank(seq_len: int, batch: int, hidden: int, n_heads: int, tp: int,
                                 sequence_parallel: bool = True, bytes_per_element: float = 2, mask_bytes: float = 1,
                                 dropout: bool = True, attention_scores: bool = True, *, kv_heads: int | None = None,
                                 mlp: int = 0) -> float:
    """Bytes one layer saves for backward on one of ``tp`` tensor-parallel ranks (Korthikanti et al. 2022, Table 2).

    :func:`activation_bytes_per_layer` split ``tp`` ways by sequence parallelism (Megatron-LM saves the projections'
    inputs split and gathers them again in backward; torch's ``SequenceParallel`` plan keeps them gathered, whole:
    ``2*e*s*b*h*(1 - 1/t)`` more, left out). Without it the norms' and projections' inputs (``4*s*b*h*e``) and the
    masks (``2*s*b*h*d``) stay whole, the rest is split: ``s*b*h*(10 + 24/t + 5*a*s/(h*t))`` for GPT, e=2, d=1.

    Chapter 2, *The memory wall*.
    """
    t = _positive(tp, "tensor-parallel degree", integer=True)
    total = activation_bytes_per_layer(seq_len, batch, hidden, n_heads, bytes_per_element, mask_bytes, dropout,
                                       attention_scores, kv_heads=kv_heads, mlp=mlp)
    if sequence_parallel or t == 1:
        return total / t
    whole = seq_len * batch * hidden * (4 * bytes_per_element + (2 * mask_bytes if dropout else 0))
    return whole + (total - whole) / t


def activation_bytes(
    shape: ModelShape,
    seq_len: int,
    batch: int,
    bytes_per_element: float = 2,
    mask_bytes: float = 1,
    dropout: bool = True,
    checkpointing: bool = False,
    attention_scores: bool = True,
) -> float:
    """Bytes a whole GPT-like model saves for backward: every layer, plus embedding, final norm and loss.

    Beyond the layers: the embedding's dropout mask (``s*b*h*d``), the final layer norm's input and
    output (``2*s*b*h*e``) and the loss's FP32 log-probabilities (``b*s*vocab*4``) -- for a small
    model with a large vocabulary that last term rivals the layers. ``checkpointing``: each layer
    keeps only its input (``s*b*h*e``) and recomputes the rest in backward (Chen et al. 2016);
    ``attention_scores``: see :func:`activation_bytes_per_layer`.

    Chapter 2, *The memory wall*.
    """
    per_layer = seq_len * batch * shape.hidden * bytes_per_element if checkpointing else (
        activation_bytes_per_layer(seq_len, batch, shape.hidden, shape.n_heads, bytes_per_element,
                                   mask_bytes, dropout, attention_scores))
    sbh = seq_len * batch * shape.hidden
    embedding_mask = sbh * mask_bytes if dropout else 0
    return shape.n_layers * per_layer + embedding_mask + 2 * sbh * bytes_per_element + batch * seq_len * shape.vocab * 4


@dataclass
class Breakdown:
    """Per-GPU training memory, in bytes, by component.

    Chapter 2, *The memory wall*.
    """

    weights: float
    gradients: float
    master_weights: float
    optimizer_states: float
    activations: float
    temporaries: float
    n_params: float
    precision: str
    optimizer: str
    gpus: int
    zero_stage: int
    notes: list[str] = field(default_factory=list)

    COMPONENTS = ("weights", "gradients", "master_weights", "optimizer_states", "activations", "temporaries")

    @property
    def model_states(self) -> float:
        """Weights, gradients, master weights and optimizer states: what ZeRO shards."""
        return self.weights + self.gradients + self.master_weights + self.optimizer_states

    @property
    def total(self) -> float:
        """Everything on one GPU."""
        return self.model_states + self.activations + self.temporaries

    def components(self) -> dict[str, float]:
        """The components by name, in bytes."""
        return {name: getattr(self, name) for name in self.COMPONENTS}

    def bytes_per_param(self) -> dict[str, float]:
        """The components divided by the parameter count."""
        return {name: value / self.n_params for name, value in self.components().items()}

    def fits(self, gpu: GPU, headroom: bool = True) -> bool:
        """Whether the total fits in the GPU's usable memory (``headroom=False``: in all of it)."""
        return self.total <= (gpu.usable if headroom else gpu.capacity)

    def verdicts(self) -> list[tuple[GPU, bool, float]]:
        """For each known GPU: does it fit (with headroom), and what fraction of its capacity it uses."""
        return [(g, self.fits(g), self.total / g.capacity) for g in GPUS]

    def as_dict(self) -> dict:
        """Plain-data form, for tables and JSON."""
        out = asdict(self)
        out["model_states"] = self.model_states
        out["total"] = self.total
        return out


def check_count(value: float, what: str, limit: int | None = None, language: str = "en") -> float:
    """``value`` if it is a whole number from 1 to ``limit``; else a ValueError in ``language`` saying why.

    ``what`` is the i18n key of the count's name (``mem_what_params``, ``mem_what_batch``,
    ``mem_what_seq_len``). A float within rounding of a whole number is whole: ``"4.1B"`` reads as
    ``4.1 * 1e9``, which is 4099999999.9999995. A parameter count below 1 is told to be positive
    (it is written as a quantity, ``7e9``); a batch or a sequence length to be a whole number >= 1.

    Chapter 2, *The memory wall*.
    """
    def refuse(key: str, **values: object) -> ValueError:
        shown = i18n.localise_number(repr(value), language)
        return ValueError(i18n.text(key, language, what=i18n.text(what, language), value=shown, **values))

    try:
        _positive(value, what)
    except ValueError:
        raise refuse("mem_err_positive" if what == "mem_what_params" else "mem_err_whole") from None
    if abs(value - round(value)) > 1e-9 * value:
        raise refuse("mem_err_whole")
    if limit is not None and value > limit:
        raise refuse("mem_err_max", limit=i18n.localise_number(f"{limit:,}", language))
    return value


def check_context(shape: ModelShape, seq_len: int, language: str = "en") -> None:
    """A ValueError in ``language`` if ``seq_len`` is longer than the shape's learned positions (0: no limit).

    Chapter 2, *The memory wall*.
    """
    if 0 < shape.positions < seq_len:
        raise ValueError(i18n.text("mem_err_context", language, value=seq_len, positions=shape.positions))


def check_job(batch: int, seq_len: int, gpus: int, zero_stage: int, language: str = "en") -> None:
    """A ValueError in ``language`` unless batch and sequence length are whole numbers >= 1 (a sequence at
    most :data:`MAX_SEQ_LEN`), gpus >= 1, zero_stage 0-3 and ``language`` one the widgets speak.

    :func:`training_memory` checks its job with it (in English); ``language`` gives the same errors in Dutch.

    Chapter 2, *The memory wall*.
    """
    i18n.check_language(language)
    check_count(batch, "mem_what_batch", None, language)
    check_count(seq_len, "mem_what_seq_len", MAX_SEQ_LEN, language)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(i18n.text("mem_err_gpus", language, value=repr(gpus)))
    if zero_stage not in ZERO_STAGES or isinstance(zero_stage, bool):
        stages = ", ".join(map(str, ZERO_STAGES))
        raise ValueError(i18n.text("mem_err_zero", language, stages=stages, value=repr(zero_stage)))


def training_memory(n_params: float, precision: str = "fp32", optimizer: str = "adam", batch: int = 1,
                    seq_len: int = 2048, gpus: int = 1, zero_stage: int = 0, shape: ModelShape | None = None,
                    activation_checkpointing: bool = False) -> Breakdown:
    """Estimate the training memory on each GPU of a data-parallel job, component by component.

    Model states follow the ZeRO paper: with ``N`` GPUs, stage 1 divides optimizer states and
    master weights by ``N``, stage 2 also gradients, stage 3 also weights (FSDP full sharding).
    Activations are per GPU (each GPU holds its own micro-batch of ``batch`` sequences) and are not
    sharded. Temporaries: under stage 3 the gathered weights of the largest layer, twice (one in
    use, one prefetched); with more than one GPU, two 25 MB gradient buckets for all-reduce.

    Chapter 2, *The memory wall*.
    """
    n = check_count(n_params, "mem_what_params", MAX_PARAMS)
    prec = PRECISIONS[_choice(precision, PRECISIONS, "precision")]
    opt = OPTIMIZERS[_choice(optimizer, OPTIMIZERS, "optimizer")]
    check_job(batch, seq_len, gpus, zero_stage)
    if shape is not None:  # a bare count's shape is a guess; a given one says how many positions it has
        check_context(shape, seq_len)

    shape = shape or shape_for_params(n)
    state_bytes = opt.bytes_per_state if opt.bytes_per_state is not None else prec.state_bytes
    weights = n * prec.weight_bytes
    grads = n * prec.grad_bytes
    master = n * prec.master_bytes
    states = n * opt.n_states * state_bytes
    if zero_stage >= 1:
        master /= gpus
        states /= gpus
    if zero_stage >= 2:
        grads /= gpus
    if zero_stage >= 3:
        weights /= gpus

    if activation_checkpointing:
        # Full recomputation keeps only each layer's input (2*s*b*h bytes at 16 bit) plus one layer's worth.
        per_layer_in = seq_len * batch * shape.hidden * prec.activation_bytes
        one_layer = activation_bytes_per_layer(seq_len, batch, shape.hidden, shape.n_heads, prec.activation_bytes)
        acts = shape.n_layers * per_layer_in + one_layer + batch * seq_len * shape.vocab * 4
    else:
        acts = activation_bytes(shape, seq_len, batch, prec.activation_bytes)

    temporaries = 0.0
    notes = []
    if zero_stage == 3 and gpus > 1:
        largest_layer = (12 * shape.hidden**2 + 13 * shape.hidden) * prec.weight_bytes
        temporaries += 2 * largest_layer
        notes.append(i18n.text("mem_note_stage3"))
    if gpus > 1:
        temporaries += 2 * 25e6
        notes.append(i18n.text("mem_note_buckets"))
    if zero_stage > 0 and gpus == 1:  # legal (FSDP runs on one GPU) but shards nothing
        notes.append(i18n.text("mem_note_zero_one_gpu"))
    if opt.name == "adam-8bit":
        notes.append(i18n.text("mem_note_adam8bit"))
    return Breakdown(
        weights, grads, master, states, acts, temporaries, n, prec.name, opt.name, gpus, zero_stage, notes
    )


def rule_of_thumb(n_params: float) -> float:
    """The lecture notes' estimate: 4 bytes of weights + 20 extra bytes = 24 bytes per parameter.

    Chapter 2, *The memory wall*.
    """
    return check_count(n_params, "mem_what_params", MAX_PARAMS) * RULE_OF_THUMB_BYTES_PER_PARAM


def min_gpus_to_fit(breakdown_fn: Callable[[int], Breakdown], gpu: GPU, max_gpus: int = 4096,
                    headroom: bool = True) -> int | None:
    """The smallest power-of-two GPU count whose per-GPU estimate fits ``gpu``, or None up to ``max_gpus``.

    Chapter 2, *The memory wall*.
    """
    _positive(max_gpus, "max_gpus", integer=True)
    n = 1
    while n <= max_gpus:
        if breakdown_fn(n).fits(gpu, headroom):
            return n
        n *= 2
    return None


def gpus_to_train(n_params: float, gpu: GPU, precision: str = "bf16-mixed", optimizer: str = "adam",
                  batch: int = 1, seq_len: int = 2048, activation_checkpointing: bool = False,
                  headroom: bool = True) -> int | None:
    """The fewest GPUs (a power of two) that can train a model with ZeRO stage 3 / FSDP full sharding, or None.

    Chapter 2, *The memory wall*.
    """
    return min_gpus_to_fit(
        lambda g: training_memory(
            n_params, precision, optimizer, batch=batch, seq_len=seq_len, gpus=g,
            zero_stage=3 if g > 1 else 0, activation_checkpointing=activation_checkpointing,
        ),
        gpu, headroom=headroom,
    )


# ----------------------------------------------------------------------------------------------
# Bytes of real tensors and models
# ----------------------------------------------------------------------------------------------


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind some tensors (a view is counted once, with its base).

    A sharded ``DTensor`` (FSDP, chapter 9) counts the shard this process holds.

    Chapter 2, *The memory wall*.
    """
    seen: dict[int, int] = {}
    for t in tensors:
        if t is None:
            continue
        if hasattr(t, "to_local"):  # a DTensor: only its local shard lives here
            t = t.to_local()
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def model_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes this process holds of a model's parameters, gradients and optimizer states.

    Sharded tensors count their local shard; a ``ZeroRedundancyOptimizer`` counts the states of
    the local optimizer it wraps.

    Chapter 2, *The memory wall*.
    """
    inner = getattr(optimizer, "optim", optimizer)
    states = [t for s in inner.state.values() for t in s.values()
              if isinstance(t, torch.Tensor) and t.dim() > 0]
    params = list(model.parameters())
    return {"parameters": tensor_bytes(params), "gradients": tensor_bytes(p.grad for p in params),
            "optimizer states": tensor_bytes(states)}


def dropout_mask_bytes(device: torch.device | str, bytes_per_element: float) -> float:
    """Bytes per element of the masks dropout saves: 1 (bool) on CUDA, the data's own size on a CPU.

    Chapter 2, *The memory wall*.
    """
    return 1 if torch.device(device).type == "cuda" else bytes_per_element


def shape_of(model: torch.nn.Module) -> ModelShape:
    """The :class:`ModelShape` of a transformers GPT-2 model, read from its config.

    Chapter 2, *The memory wall*.
    """
    c = model.config
    return ModelShape(c.n_layer, c.n_embd, c.n_head, c.vocab_size, c.n_positions)


_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_count(text: str | float) -> float:
    """Read a parameter count written as ``7e9``, ``7B``, ``125M``, ``1.3b`` or ``350_000_000``.

    Chapter 2, *The memory wall*.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return check_count(float(text), "mem_what_params", MAX_PARAMS)
    value = read_count(text)
    if value is None:
        raise ValueError(i18n.text("mem_err_count", text=repr(text)))
    return check_count(value, "mem_what_params", MAX_PARAMS)


def read_count(text: str) -> float | None:
    """The number a count's text stands for (not checked to be positive), or None if it is no number.

    Chapter 2, *The memory wall*.
    """
    raw = str(text).strip().lower().replace("_", "").replace(",", "")
    scale = 1.0
    if raw and raw[-1] in _SUFFIXES:
        scale, raw = _SUFFIXES[raw[-1]], raw[:-1]
    try:
        return float(raw) * scale
    except ValueError:
        return None


def breakdown_rows(b: Breakdown) -> list[list[str]]:
    """The breakdown as table rows: component, GB per GPU, bytes per parameter, share of the total.

    Chapter 2, *The memory wall*.
    """
    rows = []
    for name, value in b.components().items():
        rows.append([name.replace("_", " "), f"{gb(value):,.2f}", f"{value / b.n_params:.2f}", f"{value / b.total:.0%}"])
    rows.append(["total", f"{gb(b.total):,.2f}", f"{b.total / b.n_params:.2f}", "100%"])
    return rows


def verdict_rows(b: Breakdown) -> list[list[str]]:
    """For each GPU type: fits or not, and how much of its memory the estimate uses.

    Chapter 2, *The memory wall*.
    """
    return [[g.name, "fits" if ok else "does not fit", f"{share:.0%}"] for g, ok, share in b.verdicts()]
