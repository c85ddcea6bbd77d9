"""The training planner's inputs: the plan as typed and the checks of every input.

Chapters 2, 9, 10, 11 and 12 use the planner (:mod:`course_lib.planner.model`). A
:class:`Plan` holds what a learner chose, as typed: numbers, or text from the command
line or the view's boxes (``"7B"``, ``"2e12"``, ``"0.4"``); ``None`` stands for the
default. :func:`check` reads and checks every input, in a fixed order, and returns a
:class:`Setup` of plain numbers and the links it runs on, or raises a ValueError whose
one line, in English or Dutch, says what to do. The planner's JavaScript
(``planner.js``) runs the same checks in the same order, with the same texts:
:func:`course_lib.planner.widget.js_tables` hands it the tables. The presets, GPUs and
links a plan names are :mod:`course_lib.planner.presets`'.

The GPUs are laid out as Llama 3's four dimensions (Dubey et al. 2024, section 3.3.2),
innermost first: tensor ``t``, context ``c``, pipeline ``p``, data ``d``, so ``G = t c p
d``. Context parallelism cuts every sequence into ``2 c`` mirrored chunks (chapter 12's
causal load balancing), so ``c > 1`` needs a sequence length that is a multiple of ``2
c``. The context-parallel ranks hold the same weights, so ZeRO shards over the ``d c``
GPUs of the data and context dimensions (as torchtitan and Llama 3 do): ``shard``
defaults to ``d c``. Expert parallelism spreads a mixture's experts over ``ep`` of those
``d c`` GPUs (carved from them, as DeepSeek-V3 and torchtitan do), so ``ep`` divides
both the experts and ``d c``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from dataclasses import dataclass
from typing import Any

from course_lib.numbers import i18n, memory
from course_lib.parallel import cost_model
from course_lib.planner import texts
from course_lib.planner.presets import (CUSTOM_GPU_LINKS, GPUS, KEY_OF_LINK, LINK_KEYS,
                                        LINKS, PEAK_DTYPE, PRESETS, Preset)

__all__ = ["CHECKPOINTING", "CUSTOM", "FIELDS", "GPUS", "LINK_KEYS", "MAX_GPUS",
           "PEAK_DTYPE", "PRESETS", "Field", "Plan", "Preset", "Setup", "check", "divisors",
           "read_number", "shown"]

CUSTOM = "custom"
#: The most GPUs a plan may use (2**20): a larger count is taken for a typing slip.
MAX_GPUS = 2**20
#: The global batch of a custom model when none is given, in sequences.
CUSTOM_GLOBAL_BATCH = 512
#: Tokens per parameter of a custom model when no token count is given: Chinchilla's
#: rule (Hoffmann et al. 2022, bibliography key hoffmann2022chinchilla).
TOKENS_PER_PARAM = 20
#: Activation checkpointing's settings (:mod:`course_lib.planner.recomputation`): none,
#: full, torchtitan's selective op-level policy, or attention's core recomputed alone
#: (Megatron-LM's selective recomputation); false and true stand for the first two.
CHECKPOINTING = ("none", "full", "selective", "attention")


Raw = Any  # a number, a text to read as one, or None for the default


@dataclass(frozen=True)
class Plan:
    """A training plan as a learner chose it: model, hardware, strategy, batch, tokens,
    MFU.

    Numbers may be given as text (``"7B"``, ``"2e12"``); ``None`` is the default: a
    preset's published value (shape, sequence length, global batch, tokens), the GPU's
    datasheet, the link's figures, the whole data-parallel group (``shard``), one
    sequence per micro-batch (``micro_batches``). A custom model needs its parameters,
    layers, hidden size, heads, vocabulary and sequence length; a custom GPU its memory
    (GB), peak (TFLOP/s) and memory bandwidth (TB/s); a custom link its latency (µs) and
    bandwidth (GB/s). ``mfu`` is the share of the peak the GPUs' matrix products reach
    at the compute roof; each product's HBM traffic, the memory-bound work, the bubble
    and exposed communication come on top, so the MFU a paper publishes (end to end) is
    the planner's ``achieved_mfu``, not this input. ``zero3_live``: ZeRO 3 as DeepSpeed
    runs it, at most this many parameters gathered at once on a GPU (its
    ``stage3_max_live_parameters``, 1e9 by default) and no unit held for the whole step;
    0, as FSDP runs it: one whole layer gathered at a time and the next prefetched, the
    root unit (embedding and head) held (no effect below stage 3; the step's gathers are
    timed per layer either way). ``tp_overlap``: the share of tensor
    parallelism's all-reduces hidden behind compute, at most the compute's own time
    (0: none). ``sequence_parallel``:
    Megatron-LM's sequence parallelism (Korthikanti et al. 2022) with tensor
    parallelism; off, the norms' and the projections' inputs and dropout's masks stay
    whole on every tensor-parallel GPU (no effect at ``tp`` 1). ``virtual_stages``: the
    interleaved 1F1B's model chunks per GPU (1: plain 1F1B). ``edge_layers``: the layers
    of the first and of the last pipeline stage, when they hold fewer than the others
    (the embedding and the head sit there); None: equal stages. ``kv_heads``: key-value
    heads (grouped-query attention; None: the preset's, else one per head). ``mlp``: the
    width of a gated SwiGLU MLP, as Llama's (None: the preset's, else 0: GPT's 4h-wide
    GELU MLP); the activations depend on it, and the memory-bound work that moves them
    (the products' shapes come from ``params``). ``experts``, ``top_k``,
    ``expert_params``: a mixture of experts, each token routed to ``top_k`` of
    ``experts`` experts holding ``expert_params`` of the parameters (None: the preset's,
    else 1, 1, 0: dense). ``cp``: context parallelism, each sequence split over ``cp``
    GPUs; ``ep``: expert parallelism, the experts spread over ``ep`` GPUs;
    ``ep_overlap``: the share of its all-to-alls hidden behind compute, at most the
    compute's own time (0: none; DeepSeek-V3's DualPipe hides them all, 1).
    ``checkpointing``: activation checkpointing, one of :data:`CHECKPOINTING` (``False``
    and ``True`` stand for none and full): full keeps each layer's input, selective what
    torchtitan's op-level policy keeps, attention all but attention's scores, which
    backward computes again (Megatron-LM's selective recomputation;
    :mod:`course_lib.planner.recomputation`).

    Used by the library's other modules.
    """

    model: Raw = "llama2-7b"
    params: Raw = None
    layers: Raw = None
    hidden: Raw = None
    heads: Raw = None
    kv_heads: Raw = None
    mlp: Raw = None
    vocab: Raw = None
    experts: Raw = None
    top_k: Raw = None
    expert_params: Raw = None
    seq_len: Raw = None
    precision: Raw = "bf16-mixed"
    optimizer: Raw = "adam"
    gpu: Raw = "h100"
    gpu_memory_gb: Raw = None
    gpu_tflops: Raw = None
    gpu_hbm_tbs: Raw = None
    gpus_per_node: Raw = 8
    nodes: Raw = 1
    node_link: Raw = None
    network_link: Raw = "ib-ndr"
    node_alpha_us: Raw = None
    node_beta_gbs: Raw = None
    net_alpha_us: Raw = None
    net_beta_gbs: Raw = None
    zero: Raw = 0
    shard: Raw = None
    zero3_live: Raw = 0
    offload: Raw = False
    tp: Raw = 1
    tp_overlap: Raw = 0
    sequence_parallel: Raw = True
    cp: Raw = 1
    pp: Raw = 1
    virtual_stages: Raw = 1
    edge_layers: Raw = None
    ep: Raw = 1
    ep_overlap: Raw = 0
    micro_batches: Raw = None
    checkpointing: Raw = "none"
    flash_attention: Raw = True
    dropout: Raw = False
    global_batch: Raw = None
    tokens: Raw = None
    mfu: Raw = 0.4


@dataclass(frozen=True)
class Field:
    """One input: its kind (choice, whole, positive, nonneg, bool, or switch: a choice
    whose first two values may be given as false and true) and its range.

    Used by the library's other modules.
    """

    name: str
    kind: str
    low: float = 0
    high: float = 0


#: Every input in the order it is checked (the JavaScript checks them in this order).
FIELDS: tuple[Field, ...] = (
    Field("model", "choice"), Field("params", "whole", 1, memory.MAX_PARAMS),
    Field("layers", "whole", 1, 100_000), Field("hidden", "whole", 1, 1_000_000),
    Field("heads", "whole", 1, 100_000), Field("kv_heads", "whole", 1, 100_000),
    Field("mlp", "whole", 0, 10_000_000), Field("vocab", "whole", 1, 100_000_000),
    Field("experts", "whole", 1, 100_000), Field("top_k", "whole", 1, 100_000),
    Field("expert_params", "whole", 0, memory.MAX_PARAMS),
    Field("seq_len", "whole", 1, memory.MAX_SEQ_LEN), Field("precision", "choice"),
    Field("optimizer", "choice"), Field("gpu", "choice"),
    Field("gpu_memory_gb", "positive", 0, 100_000),
    Field("gpu_tflops", "positive", 0, 1_000_000),
    Field("gpu_hbm_tbs", "positive", 0, 1_000),
    Field("gpus_per_node", "whole", 1, 1024), Field("nodes", "whole", 1, MAX_GPUS),
    Field("node_link", "choice"), Field("network_link", "choice"),
    Field("node_alpha_us", "nonneg", 0, 1_000_000),
    Field("node_beta_gbs", "positive", 0, 1_000_000),
    Field("net_alpha_us", "nonneg", 0, 1_000_000),
    Field("net_beta_gbs", "positive", 0, 1_000_000),
    Field("zero", "whole", 0, 3), Field("shard", "whole", 1, MAX_GPUS),
    Field("zero3_live", "whole", 0, memory.MAX_PARAMS),
    Field("offload", "bool"), Field("tp", "whole", 1, 1024),
    Field("tp_overlap", "nonneg", 0, 1), Field("sequence_parallel", "bool"),
    Field("cp", "whole", 1, 1024),
    Field("pp", "whole", 1, 100_000), Field("virtual_stages", "whole", 1, 100_000),
    Field("edge_layers", "whole", 1, 100_000), Field("ep", "whole", 1, 100_000),
    Field("ep_overlap", "nonneg", 0, 1),
    Field("micro_batches", "whole", 1, 1_000_000_000), Field("checkpointing", "switch"),
    Field("flash_attention", "bool"), Field("dropout", "bool"),
    Field("global_batch", "whole", 1, 1_000_000_000),
    Field("tokens", "positive", 0, 10**18), Field("mfu", "positive", 0, 1),
)


def choices(name: str) -> list[str]:
    """The values a choice input takes, in the order messages list them.

    Used by the library's other modules.
    """
    return {"model": [*PRESETS, CUSTOM], "precision": list(memory.PRECISIONS),
            "optimizer": list(memory.OPTIMIZERS), "gpu": [*GPUS, CUSTOM],
            "node_link": [*LINK_KEYS, CUSTOM],
            "network_link": [*LINK_KEYS, CUSTOM],
            "checkpointing": list(CHECKPOINTING)}[name]


_NUMBER = re.compile(
    r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?([kKmMbBgGtT]?)")
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_BLANK = " \t\n\r"


def _float(value: numbers.Real) -> float:
    """A real number as a float; an integer too large for one is infinite."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def read_number(value: Raw) -> float | None:
    """The number a value stands for (text: digits, a decimal point, an exponent, an
    optional k, M, B/G or T), or None if it is no number (a bool, a comma, a word).

    Used by the library's other modules.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return _float(value)
    if not isinstance(value, str):
        return None
    match = _NUMBER.fullmatch(value.strip(_BLANK))
    if not match:
        return None
    number = match.group(0)[: len(match.group(0)) - len(match.group(3))]
    return float(number) * _SCALE[match.group(3).lower()]


def shown(value: Raw, language: str = "en") -> str:
    """A value as a message shows it: text quoted, a number as Python writes it, in the
    language.

    Used by the library's other modules.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    if not isinstance(value, numbers.Real):
        return "?"
    x = _float(value)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = str(int(x)) if x.is_integer() and abs(x) < 1e16 else repr(x)
    return i18n.localise_number(text, language)


def _group(n: float, language: str) -> str:
    """A whole number with thousands separators, as the language writes them."""
    return i18n.localise_number(f"{int(n):,}", language)


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending.

    Used by the library's other modules.
    """
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def _read(field: Field, value: Raw, language: str) -> Any:
    """One input read and checked by its kind; a ValueError saying what is wrong."""
    def refuse(key: str, **values: object) -> ValueError:
        what = texts.text(f"plan_what_{field.name}", language)
        return ValueError(texts.text(key, language, what=what,
                                     value=shown(value, language), **values))

    if field.kind in ("choice", "switch"):
        options = choices(field.name)
        if field.kind == "switch" and isinstance(value, bool):
            return options[int(value)]
        key = value.strip(_BLANK).lower() if isinstance(value, str) else None
        if key not in options:
            raise refuse(f"plan_err_{field.kind}", options=", ".join(options),
                         off=options[0], on=options[1])
        return key
    if field.kind == "bool":
        if not isinstance(value, bool):
            raise refuse("plan_err_bool")
        return value
    x = read_number(value)
    if x is None:
        raise refuse("plan_err_number")
    high = _group(field.high, language)
    if field.kind == "whole":
        near = math.floor(x + 0.5) if math.isfinite(x) else x
        if not (math.isfinite(x) and abs(x - near) <= 1e-9 * abs(x)
                and field.low <= near <= field.high):
            raise refuse("plan_err_whole", low=_group(field.low, language), high=high)
        return int(near)
    if field.kind == "nonneg":
        if not 0 <= x <= field.high:
            raise refuse("plan_err_nonneg", high=high)
        return x
    if not 0 < x <= field.high:
        raise refuse("plan_err_positive", high=high)
    return x


@dataclass(frozen=True)
class Setup:
    """A checked plan: plain numbers, names, and the links each kind of traffic takes.

    Used by the library's other modules.
    """

    model: str
    name: str
    params: float
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    precision: str
    optimizer: str
    gpu: str
    gpu_name: str
    capacity: float
    peak: float
    gpus_per_node: int
    nodes: int
    gpus: int
    node_link: cost_model.Link
    network_link: cost_model.Link
    host_link: cost_model.Link
    zero: int
    shard: int
    offload: bool
    tp: int
    pp: int
    dp: int
    micro_batches: int
    micro_batch: int
    checkpointing: str
    flash_attention: bool
    dropout: bool
    global_batch: int
    tokens: float
    mfu: float
    hbm: float
    tp_overlap: float
    virtual_stages: int
    edge_layers: int
    middle_layers: int
    kv_heads: int
    experts: int
    top_k: int
    expert_params: float
    cp: int
    ep: int
    sequence_parallel: bool
    mlp: int
    ep_overlap: float
    zero3_live: float


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Plan)}


def _link(key: str, alpha: float | None, beta: float | None, names: tuple[str, str],
          language: str) -> cost_model.Link:
    """A link by key, its latency (µs) and bandwidth (GB/s) overridden where given."""
    if key == CUSTOM:
        for given, name in zip((alpha, beta), names):
            if given is None:
                what = texts.text(f"plan_what_{name}", language)
                raise ValueError(texts.text("plan_err_missing_link", language,
                                            what=what))
        return cost_model.Link("custom", beta * 1e9, alpha * 1e-6, "")
    base = LINKS[LINK_KEYS[key]]
    if alpha is None and beta is None:
        return base
    return cost_model.Link(base.name, base.bandwidth if beta is None else beta * 1e9,
                           base.latency if alpha is None else alpha * 1e-6, base.source)


def check(plan: Plan, language: str = "en") -> Setup:
    """Read and check every input of ``plan``: a :class:`Setup`, or a ValueError in
    ``language``.

    Used by the library's other modules.
    """
    language = i18n.check_language(language)
    if not isinstance(plan, Plan):
        raise ValueError(f"plan must be a course_lib.planner.model.Plan, got {plan!r}")
    v: dict[str, Any] = {}
    for field in FIELDS:
        raw = getattr(plan, field.name)
        raw = _DEFAULTS[field.name] if raw is None else raw
        v[field.name] = None if raw is None else _read(field, raw, language)

    def missing(key: str, names: tuple[str, ...]) -> None:
        for name in names:
            if v[name] is None:
                what = texts.text(f"plan_what_{name}", language)
                raise ValueError(texts.text(key, language, what=what))

    def fail(key: str, **values: float | str) -> ValueError:
        return ValueError(texts.text(key, language, **{
            k: _group(x, language) if isinstance(x, (int, float)) else x
            for k, x in values.items()}))

    shape_names = ("params", "layers", "hidden", "heads", "vocab", "seq_len")
    if v["model"] == CUSTOM:
        missing("plan_err_missing", shape_names)
        name, preset = "custom", None
    else:
        preset = PRESETS[v["model"]]
        name = preset.name
        published = (preset.params, preset.shape.n_layers, preset.shape.hidden,
                     preset.shape.n_heads, preset.shape.vocab, preset.seq_len)
        for key, value in zip(shape_names, published):
            v[key] = value if v[key] is None else v[key]
    block = (preset.kv_heads, preset.mlp, preset.experts, preset.top_k,
             preset.expert_params) if preset else (None, 0, 1, 1, 0.0)
    for key, value in zip(("kv_heads", "mlp", "experts", "top_k", "expert_params"),
                          block):
        v[key] = value if v[key] is None else v[key]
    if v["gpu"] == CUSTOM:
        missing("plan_err_missing_gpu", ("gpu_memory_gb", "gpu_tflops", "gpu_hbm_tbs"))
        gpu_name = "custom GPU"
        capacity, peak = v["gpu_memory_gb"] * 1e9, v["gpu_tflops"] * 1e12
        hbm = v["gpu_hbm_tbs"] * 1e12
        own_link, host_key = CUSTOM_GPU_LINKS
    else:
        accelerator = GPUS[v["gpu"]]
        gpu_name = accelerator.name
        capacity = (accelerator.memory if v["gpu_memory_gb"] is None
                    else v["gpu_memory_gb"] * 1e9)
        peak = (accelerator.dense[PEAK_DTYPE[v["precision"]]] if v["gpu_tflops"] is None
                else v["gpu_tflops"] * 1e12)
        hbm = (accelerator.bandwidth if v["gpu_hbm_tbs"] is None
               else v["gpu_hbm_tbs"] * 1e12)
        own_link = KEY_OF_LINK[accelerator.gpu_link or accelerator.host_link]
        host_key = KEY_OF_LINK[accelerator.host_link]
    if capacity * (1 - memory.ALLOCATOR_MARGIN) <= memory.CUDA_CONTEXT_BYTES:
        least = math.ceil(memory.CUDA_CONTEXT_BYTES / (1 - memory.ALLOCATOR_MARGIN) / 1e6)
        raise fail("plan_err_gpu_memory", least=least, margin=round(100 * memory.ALLOCATOR_MARGIN),
                   context=round(memory.CUDA_CONTEXT_BYTES / 1e6))
    node_link = _link(v["node_link"] or own_link, v["node_alpha_us"],
                      v["node_beta_gbs"], ("node_alpha_us", "node_beta_gbs"), language)
    network_link = _link(v["network_link"], v["net_alpha_us"], v["net_beta_gbs"],
                         ("net_alpha_us", "net_beta_gbs"), language)

    hidden, heads, layers = v["hidden"], v["heads"], v["layers"]
    per_node, tp, pp = v["gpus_per_node"], v["tp"], v["pp"]
    gpus = per_node * v["nodes"]
    if hidden % heads:
        raise fail("plan_err_heads", hidden=hidden, heads=heads)
    kv_heads = heads if v["kv_heads"] is None else v["kv_heads"]
    experts, top_k, expert_params = v["experts"], v["top_k"], v["expert_params"]
    _check_mixture(heads, kv_heads, experts, top_k, expert_params, v["params"], fail,
                   language)
    if gpus > MAX_GPUS:
        raise fail("plan_err_gpus_max", gpus=gpus, limit=MAX_GPUS)
    if per_node % tp:
        options = ", ".join(_group(d, language) for d in divisors(per_node))
        raise fail("plan_err_tp_node", tp=tp, per_node=per_node, options=options)
    if hidden % tp or heads % tp:
        common = math.gcd(math.gcd(hidden, heads), per_node)
        options = ", ".join(_group(d, language) for d in divisors(common))
        raise fail("plan_err_tp_split", tp=tp, hidden=hidden, heads=heads,
                   options=options)
    if pp > layers:
        raise fail("plan_err_pp_layers", pp=pp, layers=layers)
    edge, middle, virtual = _stages(layers, pp, v["virtual_stages"], v["edge_layers"],
                                    fail)
    if gpus % (tp * pp):
        raise fail("plan_err_mp_gpus", tp=tp, pp=pp, mp=tp * pp, gpus=gpus)
    cp, ep = v["cp"], v["ep"]
    if cp > 1 and v["seq_len"] % (2 * cp):
        allowed = [1] + [c for c in divisors(v["seq_len"] // 2) if 1 < c <= 1024]
        raise fail("plan_err_cp_seq", cp=cp, seq_len=v["seq_len"], chunks=2 * cp,
                   options=", ".join(_group(c, language) for c in allowed))
    if gpus % (tp * cp * pp):
        raise fail("plan_err_cp_gpus", tp=tp, cp=cp, pp=pp, mp=tp * cp * pp, gpus=gpus)
    dp = gpus // (tp * cp * pp)
    if ep > 1 and experts == 1:
        raise fail("plan_err_ep_dense", ep=ep)
    if experts % ep or (dp * cp) % ep:
        options = ", ".join(_group(d, language)
                            for d in divisors(math.gcd(experts, dp * cp)))
        raise fail("plan_err_ep", ep=ep, experts=experts, group=dp * cp,
                   options=options)
    shard = v["shard"]
    if shard is not None and v["zero"] == 0:
        raise fail("plan_err_shard_zero")
    if shard is not None and (dp * cp) % shard:
        options = ", ".join(_group(d, language) for d in divisors(dp * cp))
        raise fail("plan_err_shard", shard=shard, dp=dp * cp, options=options)
    if v["global_batch"] is None:
        v["global_batch"] = preset.global_batch if preset else CUSTOM_GLOBAL_BATCH
    batch, micro = v["global_batch"], v["micro_batches"]
    if micro is None and batch % dp:
        raise fail("plan_err_batch_dp", batch=batch, dp=dp)
    if micro is not None and batch % (dp * micro):
        raise fail("plan_err_batch", batch=batch, dp=dp, micro=micro, unit=dp * micro)
    micro = batch // dp if micro is None else micro
    if v["tokens"] is None:
        v["tokens"] = preset.tokens if preset else TOKENS_PER_PARAM * v["params"]
    return Setup(
        v["model"], name, float(v["params"]), layers, hidden, heads, v["vocab"],
        v["seq_len"], v["precision"], v["optimizer"], v["gpu"], gpu_name,
        float(capacity), float(peak), per_node, v["nodes"], gpus, node_link,
        network_link, LINKS[LINK_KEYS[host_key]], v["zero"],
        dp * cp if shard is None else shard, v["offload"], tp, pp, dp, micro,
        batch // (dp * micro), v["checkpointing"], v["flash_attention"], v["dropout"],
        batch, float(v["tokens"]), v["mfu"], float(hbm), v["tp_overlap"], virtual,
        edge, middle, kv_heads, experts, top_k, float(expert_params), cp, ep,
        v["sequence_parallel"], v["mlp"], v["ep_overlap"], float(v["zero3_live"]))


def _check_mixture(heads: int, kv_heads: int, experts: int, top_k: int,
                   expert_params: float, params: float, fail: Any,
                   language: str) -> None:
    """Grouped-query attention and a mixture of experts, checked: key-value heads that
    divide the heads, a top-k within the experts, expert parameters a part of the whole
    (none in a dense model)."""
    if heads % kv_heads:
        raise fail("plan_err_kv_heads", kv_heads=kv_heads, heads=heads,
                   options=", ".join(_group(d, language) for d in divisors(heads)))
    if top_k > experts:
        raise fail("plan_err_top_k", top_k=top_k, experts=experts)
    if experts == 1 and expert_params > 0:
        raise fail("plan_err_expert_params_dense")
    if experts > 1 and not 0 < expert_params < params:
        raise fail("plan_err_expert_params", experts=experts, params=params)


def _stages(layers: int, pp: int, virtual: int, edge: int | None,
            fail: Any) -> tuple[int, int, int]:
    """The layers of the first (and last) stage and of the busiest middle stage, and the
    virtual stages, checked: interleaving needs a pipeline and a layer per chunk;
    uneven stages need a middle stage with a layer per chunk, and their end stages a
    layer per chunk but one, which may hold the embedding or the head alone (as Llama
    3 405B's did: Dubey et al. 2024, section 3.3.2)."""
    if virtual > 1 and pp == 1:
        raise fail("plan_err_virtual_pp", virtual=virtual)
    even = math.ceil(layers / pp)
    if edge is None:
        if pp * virtual > layers:
            raise fail("plan_err_virtual_layers", virtual=virtual, pp=pp,
                       layers=layers, most=layers // pp)
        return even, even, virtual
    if pp < 3:
        raise fail("plan_err_edge_pp", pp=pp)
    if edge < virtual - 1:
        raise fail("plan_err_edge_virtual", edge=edge, virtual=virtual,
                   least=virtual - 1)
    if 2 * edge + (pp - 2) * virtual > layers:
        raise fail("plan_err_edge_layers", edge=edge, layers=layers, pp=pp,
                   most=(layers - (pp - 2) * virtual) // 2)
    return edge, math.ceil((layers - 2 * edge) / (pp - 2)), virtual
