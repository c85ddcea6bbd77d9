"""The training planner validated: published runs predicted from their settings alone.

Chapters 2, 9, 10 and 11 use the planner (:mod:`course_lib.planner.model`); this module
says how far to trust it. :data:`RUNS` holds published training runs and benchmarks, each
with its source (a key of ``book/references.bib``), where in the source its number
stands, the planner inputs that express its setting (model shape, GPUs, layout, batch,
sequence length, precision, ZeRO/FSDP stage, checkpointing) and the one figure it
reports: whether it fits, memory per GPU, TFLOP/s or tokens/s per GPU.
:func:`validate` runs the planner on each run's inputs and sets its prediction next to
the published figure: their ratio, and whether it lies in the band 0.8-1.25.

No published figure is an input of its own row: the inputs hold the setting only, and
the planner's ``mfu`` (its share of the peak while computing) is the one calibration,
fitted once by :func:`calibrate` on the runs named in :data:`CALIBRATION_RUNS` (which
are then left out of the scored rows) and held fixed for every other run. Rows true by
definition are not here: a published MFU next to the same TFLOP/s over the datasheet
peak, a training time the paper derived from the same row's throughput (Megatron-LM's
Table 2 "days" and its 34- and 84-day estimates), ZeRO's model-state formulas.

``verified`` says how each number was read: from the source's own text (a table of a
repository's documentation, or a text conversion of the paper's PDF), and which inputs,
if any, the source does not state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from course_lib.base.tables import Table, cite
from course_lib.planner.model import PlanResult, plan

__all__ = ["BAND", "CALIBRATION_RUNS", "CLOSE", "KINDS", "RUNS", "Row", "Run", "calibrate",
           "goals", "plot_ratios", "predict", "summary", "validate", "validation_table"]

#: The band a prediction must fall in, as a ratio prediction / published.
BAND = (0.8, 1.25)
#: A fit verdict the planner cannot tell: memory at most this much over the usable.
CLOSE = 1.10
#: What a run reports: its unit as the table prints it.
KINDS = {"fits": "fits", "memory_gib": "GiB per GPU", "tflops": "TFLOP/s per GPU",
         "tokens_per_s": "tokens/s per GPU", "days": "days"}


@dataclass(frozen=True)
class Run:
    """One published run: its name, source (bib key), where the figure stands, the
    planner inputs that express its setting, what it reports and how that was read.

    ``flops`` names how the source counts a TFLOP/s figure: "megatron" (Narayanan et
    al.'s equation 3, recomputation counted), "palm" (6N + 12 l h s per token, no
    recomputation). ``note``: why the planner misses, where that can be told;
    ``memory_note``: why its memory differs, where that is another reason;
    ``decidable`` False: a fit verdict the planner's model cannot tell (not counted).

    Chapter 2, *The memory wall*.
    """

    name: str
    source: str
    where: str
    inputs: Mapping[str, Any]
    kind: str
    value: float | bool
    verified: str
    flops: str = ""
    note: str = ""
    memory_note: str = ""
    decidable: bool = True


@dataclass(frozen=True)
class Row:
    """A run next to the planner's prediction: the ratio, whether it is in the band,
    whether the planner says the run fits, and ``margin``: its memory over the usable
    (above 1: does not fit).

    Chapter 2, *The memory wall*.
    """

    run: Run
    predicted: float | bool
    ratio: float
    within: bool
    fits: bool
    margin: float = math.nan


# --- the runs --------------------------------------------------------------------------

_MEGATRON_TEXT = ("read from Table 1 of the paper's text (a markdown conversion of the "
                  "arXiv PDF); the abstract's 3,072 GPUs and 52 % agree")
_TABLE2_TEXT = ("read from Table 2 of the paper's text (a markdown conversion of the "
                "arXiv PDF)")
_PTDP = ("t = 8 inside the node (the paper's rule, as in Table 1) splits the published "
         "model-parallel size")
_FOUNDRY = ("read from scripts/train/benchmarking/README.md (llm-foundry, commit "
            "061f2c7); the shape from scripts/train/yamls/pretrain/mpt-*.yaml")
_TITAN_A100 = ("read from docs/performance.md (torchtitan, commit 0413364, 64 A100 80GB)"
               "; Llama shapes from the models' published configurations")
_TITAN_H100 = ("read from docs/performance.md (torchtitan, commit eaea6f6, H100 96GB at "
               "500 W); Llama 3.1 8B's shape from its published configuration")
_LLAMA3_TEXT = ("read from Table 4 of the paper's text (several conversions agree); "
                "FSDP as section 3.3.2 describes it, as ZeRO 2; no checkpointing")
_NET_A100 = "the network is not in the table: InfiniBand HDR assumed"
_ZERO3_NOTE = ("in the paper, DeepSpeed's ZeRO 3 took about as long per step on this "
               "many GPUs as on half of them (GPUs x TFLOP/s per GPU stays flat, the "
               "batch is the same): its gathers ran far below the links' bandwidth; "
               "the planner gathers at NCCL's rate, prefetched behind compute")
_WEAK = ("per-GPU throughput rises with model size in the paper; the planner's "
         "memory-bound work (a 1 / h share) accounts for part of that rise")
_SELECTIVE = ("selective activation checkpointing is neither none nor full: the planner "
              "takes none")
_NO_OVERLAP = ("not identified: FSDP's gathers hide behind compute in the planner, "
               "as they should; under-predicted like the A100 runs with "
               "checkpointing above")
_SMALL_H100 = ("small models run further below an H100's peak than their memory-bound "
               "work explains: kernel launches and matrix tiles too small for the "
               "GPU, which the planner does not model")
_FAST_A100 = ("this A100 run computed above the one calibrated efficiency (the table "
              "gives it 71-74 % HFU); the planner has one efficiency for every GPU")
_CLOSE = ("within 10 % of the usable, closer than the planner's memory can tell (it "
          "leaves out the allocator's fragmentation and the gradients of activations "
          "at the peak)")
_DEEPSPEED_MEMORY = ("the planner holds what FSDP holds: a whole layer gathered and its "
                     "gradients reduce-scattered in FP32 (a 530B layer is 5B parameters, "
                     "20 GB); DeepSpeed's ZeRO 3 gathers and reduces in buckets, so the "
                     "planner cannot separate the 640-GPU run that fit from the 560-GPU "
                     "one that did not")


def _megatron(params: float, heads: int, hidden: int, layers: int, t: int, p: int,
              gpus: int, batch: int, **more: Any) -> dict[str, Any]:
    """A GPT of Megatron-LM's tables on Selene's A100 80GB (vocabulary 51,200, 2,048
    tokens, mixed precision, full recomputation; Megatron-LM's dropout of 0.1 and its
    fused softmax, which keeps the attention probabilities: FlashAttention came in
    2022)."""
    return dict(model="custom", params=params, layers=layers, hidden=hidden, heads=heads,
                vocab=51200, seq_len=2048, precision="fp16-mixed", gpu="a100-80",
                network_link="ib-hdr", nodes=gpus // 8, tp=t, pp=p, global_batch=batch,
                checkpointing=True, flash_attention=False, dropout=True, **more)


_T1 = ((1.7e9, 24, 2304, 24, 1, 1, 32, 512, 137),
       (3.6e9, 32, 3072, 30, 2, 1, 64, 512, 138),
       (7.5e9, 32, 4096, 36, 4, 1, 128, 512, 142),
       (18.4e9, 48, 6144, 40, 8, 1, 256, 1024, 135),
       (39.1e9, 64, 8192, 48, 8, 2, 512, 1536, 138),
       (76.1e9, 80, 10240, 60, 8, 4, 1024, 1792, 140),
       (145.6e9, 96, 12288, 80, 8, 8, 1536, 2304, 148),
       (310.1e9, 128, 16384, 96, 8, 16, 1920, 2160, 155),
       (529.6e9, 128, 20480, 105, 8, 35, 2520, 2520, 163),
       (1008.0e9, 160, 25600, 128, 8, 64, 3072, 3072, 163))

_GPT3 = (174.6e9, 96, 12288, 96)
_GPT530 = (529.6e9, 128, 20480, 105)


def _table2(scheme: str, shape: tuple[float, int, int, int], gpus: int, batch: int,
            micro: int, tflops: float) -> Run:
    """One row of Megatron-LM's Table 2 (PTD-P or ZeRO-3 without model parallelism)."""
    params, heads, hidden, layers = shape
    size = f"{params / 1e9:.0f}B"
    if scheme == "ZeRO-3":
        inputs = _megatron(params, heads, hidden, layers, 1, 1, gpus, batch, zero=3,
                           micro_batches=batch // (gpus * micro))
        return Run(f"Megatron ZeRO-3 {size}, {gpus} GPUs", "narayanan2021megatron",
                   "Table 2", inputs, "tflops", tflops, _TABLE2_TEXT, "megatron",
                   _ZERO3_NOTE, _DEEPSPEED_MEMORY)
    pp = 12 if params < 2e11 else 35
    inputs = _megatron(params, heads, hidden, layers, 8, pp, gpus, batch)
    return Run(f"Megatron PTD-P {size}, {gpus} GPUs", "narayanan2021megatron",
               "Table 2", inputs, "tflops", tflops, f"{_TABLE2_TEXT}; {_PTDP}",
               "megatron")


def _mpt(size: str, params: int, gpu: str, gpus: int, micro: int, accum: int,
         batch: int, checkpointing: bool, tps: float) -> Run:
    """One row of llm-foundry's MPT benchmark tables (FSDP FULL_SHARD, 2,048 tokens)."""
    shapes = {"70b": (80, 8192, 64), "30b": (48, 7168, 56), "13b": (40, 5120, 40),
              "7b": (32, 4096, 32), "3b": (32, 2560, 20), "1b": (24, 2048, 16),
              "760m": (24, 1536, 12)}
    layers, hidden, heads = shapes[size]
    network = "ib-ndr" if gpu == "h100" else "ib-hdr"
    inputs = dict(model="custom", params=params, layers=layers, hidden=hidden,
                  heads=heads, vocab=50368, seq_len=2048, precision="bf16-mixed",
                  gpu=gpu, network_link=network, nodes=gpus // 8, zero=3,
                  global_batch=batch, micro_batches=accum, checkpointing=checkpointing)
    card = {"h100": "H100 80GB", "a100-80": "A100 80GB", "a100-40": "A100 40GB"}[gpu]
    if batch != micro * accum * gpus:
        raise ValueError(f"MPT-{size}: {batch} != {micro} x {accum} x {gpus}")
    net = ("the H100 table names no network: InfiniBand NDR assumed" if gpu == "h100"
           else "1,600 Gb/s RoCE per node: InfiniBand HDR's 25 GB/s per GPU")
    note = _NO_OVERLAP if gpus > 8 else ""
    if gpu == "h100" and params < 2e10:
        note = _SMALL_H100
    elif gpu == "a100-80" and checkpointing:
        note = _FAST_A100
    return Run(f"MPT-{size.upper()}, {gpus} {card}", "llmfoundry_benchmarks",
               f"benchmark table '{card}', seq 2048, {gpus} GPUs", inputs,
               "tokens_per_s", tps, f"{_FOUNDRY}; {net}", note=note)


_LLAMA_SHAPES = {"llama3-8b": (8.03e9, 32, 4096, 32, 128256, 8192),
                 "llama3-70b": (70.6e9, 80, 8192, 64, 128256, 8192),
                 "llama2-13b": (13.0e9, 40, 5120, 40, 32000, 4096),
                 "llama2-70b": (68.98e9, 80, 8192, 64, 32000, 4096)}


def _llama(key: str, gpu: str, gpus: int, local_batch: int, checkpointing: bool,
           **more: Any) -> dict[str, Any]:
    """A Llama model under FSDP (ZeRO 3) with ``local_batch`` sequences per GPU."""
    params, layers, hidden, heads, vocab, seq = _LLAMA_SHAPES[key]
    tp = more.get("tp", 1)
    inputs = dict(model="custom", params=params, layers=layers, hidden=hidden,
                  heads=heads, vocab=vocab, seq_len=seq, precision="bf16-mixed",
                  gpu=gpu, nodes=gpus // 8, zero=3, micro_batches=1,
                  global_batch=local_batch * gpus // tp, checkpointing=checkpointing,
                  network_link="ib-ndr" if gpu == "h100" else "ib-hdr")
    inputs.update(more)
    return inputs


def _titan(name: str, where: str, inputs: dict[str, Any], kind: str,
           value: float | bool, verified: str, note: str = "") -> Run:
    return Run(name, "torchtitan_performance", where, inputs, kind, value, verified,
               note=note)


_LLAMA3_405B = dict(model="llama3-405b", gpu="h100", network_link="ib-ndr", tp=8,
                    pp=16, edge_layers=7, zero=2, checkpointing=False,
                    global_batch=2048)

#: Every run of the validation set, in the order the table prints them.
RUNS: tuple[Run, ...] = (
    *(Run(f"Megatron GPT {p / 1e9:g}B, {n} GPUs", "narayanan2021megatron", "Table 1",
          _megatron(p, a, h, l, t, pp, n, b), "tflops", x, _MEGATRON_TEXT, "megatron",
          _WEAK if p < 5e10 else "")
      for p, a, h, l, t, pp, n, b, x in _T1),
    _table2("ZeRO-3", _GPT3, 384, 1536, 4, 144),
    _table2("ZeRO-3", _GPT3, 768, 1536, 2, 88),
    _table2("ZeRO-3", _GPT3, 1536, 1536, 1, 44),
    _table2("ZeRO-3", _GPT530, 640, 2560, 4, 138),
    _table2("ZeRO-3", _GPT530, 1120, 2240, 2, 98),
    _table2("ZeRO-3", _GPT530, 2240, 2240, 1, 48),
    _table2("PTD-P", _GPT3, 384, 1536, 1, 153),
    _table2("PTD-P", _GPT3, 768, 1536, 1, 149),
    _table2("PTD-P", _GPT3, 1536, 1536, 1, 141),
    _table2("PTD-P", _GPT530, 560, 2240, 1, 171),
    _table2("PTD-P", _GPT530, 1120, 2240, 1, 167),
    _table2("PTD-P", _GPT530, 2240, 2240, 1, 159),
    Run("Megatron ZeRO-3 530B, 560 GPUs, micro-batch 4", "narayanan2021megatron",
        "Table 2, caption", _megatron(*_GPT530, 1, 1, 560, 2240, zero=3, micro_batches=1),
        "fits", False, f"{_TABLE2_TEXT}: 'did not fit on 560 GPUs'",
        memory_note=_DEEPSPEED_MEMORY, decidable=False),
    Run("Llama 3 405B, 8,192 H100", "dubey2024llama3", "Table 4, row 1",
        dict(_LLAMA3_405B, nodes=1024, micro_batches=32), "tflops", 430, _LLAMA3_TEXT,
        "palm", "Llama 3 ran an interleaved pipeline (the paper does not give its "
        "virtual stages): planned as plain 1F1B, the bubble is (p - 1) / m of the busy "
        "time; with 2 virtual stages it halves"),
    Run("Llama 3 405B, 16,384 H100", "dubey2024llama3", "Table 4, row 2",
        dict(_LLAMA3_405B, nodes=2048, micro_batches=16), "tflops", 400, _LLAMA3_TEXT,
        "palm", "as above, with 16 micro-batches per pipeline"),
    Run("BLOOM 176B, 384 A100 80GB", "bigscience_bloom_card",
        "model card, 'Training throughput'",
        dict(model="custom", params=176e9, layers=70, hidden=14336, heads=112,
             vocab=250880, seq_len=2048, precision="bf16-mixed", gpu="a100-80",
             network_link="ib-hdr", nodes=48, tp=4, pp=12, zero=1, global_batch=2048,
             micro_batches=128, checkpointing=True, flash_attention=False), "tflops",
        150,
        "'About 150 TFLOP per GPU per second' read from the model card; layout, batch "
        "and shape from train/tr11-176B-ml/tr11-176B-ml.slurm; Omni-Path taken as "
        "InfiniBand HDR", "megatron",
        "the embedding and head (250,880 x 14,336) counted as pipeline stages of their "
        "own in the run; the planner's stages are equal"),
    _mpt("70b", 64862437376, "h100", 64, 8, 4, 2048, True, 1039),
    _mpt("30b", 29975214080, "h100", 32, 14, 3, 1344, True, 2308),
    _mpt("13b", 12853954560, "h100", 64, 2, 1, 128, False, 4800),
    _mpt("13b", 12853954560, "h100", 8, 2, 1, 16, False, 4792),
    _mpt("7b", 6658859008, "h100", 8, 6, 1, 48, False, 10643),
    _mpt("3b", 2651837440, "h100", 64, 6, 3, 1152, False, 22525),
    _mpt("1b", 1315950592, "h100", 64, 20, 1, 1280, False, 44402),
    _mpt("760m", 760470528, "h100", 32, 24, 1, 768, False, 67971),
    _mpt("70b", 64862437376, "a100-80", 64, 8, 4, 2048, True, 410),
    _mpt("30b", 29975214080, "a100-80", 8, 3, 21, 504, True, 916),
    _mpt("13b", 12853954560, "a100-80", 8, 2, 3, 48, False, 2262),
    _mpt("7b", 6658859008, "a100-80", 8, 6, 2, 96, False, 4641),
    _mpt("3b", 2651837440, "a100-80", 8, 10, 2, 160, False, 10811),
    _mpt("1b", 1315950592, "a100-80", 8, 14, 4, 448, False, 20513),
    _mpt("760m", 760470528, "a100-80", 8, 24, 2, 384, False, 32434),
    _mpt("70b", 64862437376, "a100-40", 128, 4, 1, 512, True, 376),
    _mpt("13b", 12853954560, "a100-40", 128, 16, 1, 2048, True, 1972),
    _mpt("7b", 6658859008, "a100-40", 128, 18, 1, 2304, True, 3623),
    _titan("torchtitan Llama 3 8B, 64 A100, selective op AC", "'Llama 3 performance "
           "numbers', row 2", _llama("llama3-8b", "a100-80", 64, 1, False),
           "tokens_per_s", 2973, f"{_TITAN_A100}; {_NET_A100}", _SELECTIVE),
    _titan("torchtitan Llama 3 70B, 64 A100, full AC", "'Llama 3 performance "
           "numbers', row 3", _llama("llama3-70b", "a100-80", 64, 1, True),
           "tokens_per_s", 331, f"{_TITAN_A100}; {_NET_A100}", _NO_OVERLAP),
    _titan("torchtitan Llama 2 13B, 64 A100, no AC", "'Llama 2 performance numbers', "
           "row 1", _llama("llama2-13b", "a100-80", 64, 2, False), "tokens_per_s",
           2162, f"{_TITAN_A100}; {_NET_A100}", _NO_OVERLAP),
    _titan("torchtitan Llama 2 70B, 64 A100, full AC", "'Llama 2 performance numbers', "
           "row 5", _llama("llama2-70b", "a100-80", 64, 2, True), "tokens_per_s", 353,
           f"{_TITAN_A100}; {_NET_A100}", _NO_OVERLAP),
    _titan("torchtitan Llama 2 70B, 64 A100, selective op AC, batch 1", "'Llama 2 "
           "performance numbers', row 4", _llama("llama2-70b", "a100-80", 64, 1, False),
           "tokens_per_s", 355, f"{_TITAN_A100}; {_NET_A100}", _SELECTIVE),
    _titan("torchtitan Llama 2 70B, 64 A100, selective AC, batch 2: out of memory",
           "'Llama 2 performance numbers', footnote 1",
           _llama("llama2-70b", "a100-80", 64, 2, False), "fits", False,
           f"{_TITAN_A100}; {_NET_A100}", _SELECTIVE),
    _titan("torchtitan Llama 3.1 405B, 128 H100, FSDP + TP 8", "'Llama 3.1 performance "
           "numbers', row 1", dict(model="llama3-405b", gpu="h100", gpu_memory_gb=94,
                                   network_link="ib-ndr", nodes=16, tp=8, zero=3,
                                   global_batch=32, micro_batches=1, checkpointing=True),
           "tokens_per_s", 109, "read from docs/performance.md (torchtitan, the "
           "version with 128 H100 94GB); local batch 2, global 32 as it states; "
           "the 8,192-token sequences its 29.0 % MFU implies",
           note="not identified: tensor parallelism's all-reduces and FSDP's "
           "collectives share the links in the run; the planner adds them freely"),
    _titan("torchtitan Llama 3.1 405B, 128 H100, FSDP alone: out of memory",
           "'Llama 3.1 performance numbers', text", dict(
               model="llama3-405b", gpu="h100", gpu_memory_gb=94, network_link="ib-ndr",
               nodes=16, zero=3, global_batch=256, micro_batches=1, checkpointing=True),
           "fits", False, "'We do see OOM for 1D parallelism (FSDP2)' read from "
           "docs/performance.md; local batch 2 (the 2D run's) assumed"),
    _titan("torchtitan Llama 3.1 8B, 8 H100, FSDP", "Table 1, row 1",
           _llama("llama3-8b", "h100", 8, 2, False, gpu_memory_gb=96), "tokens_per_s",
           5762, _TITAN_H100, "the GPUs ran at 500 W, below the datasheet's clocks; "
           + _SELECTIVE),
    _titan("torchtitan Llama 3.1 8B, 128 H100, FSDP", "Table 3, row 1",
           _llama("llama3-8b", "h100", 128, 2, False, gpu_memory_gb=96), "tokens_per_s",
           5605, _TITAN_H100, "500 W GPUs; " + _NO_OVERLAP),
    _titan("torchtitan Llama 3.1 8B, 8 H100, FSDP: memory", "Table 1, row 1",
           _llama("llama3-8b", "h100", 8, 2, False, gpu_memory_gb=96), "memory_gib",
           82.4, _TITAN_H100, _SELECTIVE),
    _titan("torchtitan Llama 3.1 8B, 128 H100, FSDP: memory", "Table 3, row 1",
           _llama("llama3-8b", "h100", 128, 2, False, gpu_memory_gb=96), "memory_gib",
           67.0, _TITAN_H100, _SELECTIVE),
)

#: The runs the one calibration (the planner's ``mfu``) is fitted on: one A100 run with
#: tensor parallelism, one A100 and one H100 run of plain FSDP on one node.
CALIBRATION_RUNS = ("Megatron GPT 18.4B, 256 GPUs", "MPT-7B, 8 A100 80GB",
                    "MPT-7B, 8 H100 80GB")


# --- predictions ------------------------------------------------------------------------

def _flops_per_token(run: Run, r: PlanResult) -> float:
    """FLOPs per token as the run's source counts them."""
    s = r.setup
    if run.flops == "megatron":  # Narayanan et al. (2021), equation 3, per token
        return 96 * s.layers * s.hidden**2 * (
            1 + s.seq_len / (6 * s.hidden) + s.vocab / (16 * s.layers * s.hidden))
    if run.flops == "palm":  # Chowdhery et al. (2022), appendix B
        return 6 * s.params + 12 * s.layers * s.hidden * s.seq_len
    raise ValueError(f"{run.name}: no FLOP convention for a TFLOP/s figure "
                     "(megatron or palm)")


def _read(run: Run, r: PlanResult) -> float | bool:
    """The run's figure, as the planner predicts it."""
    tokens_per_gpu = r.tokens_per_step / (r.time.step * r.setup.gpus)
    readers: dict[str, Callable[[], float | bool]] = {
        "fits": lambda: r.fits,
        "memory_gib": lambda: r.memory.total / 2**30,
        "tokens_per_s": lambda: tokens_per_gpu,
        "tflops": lambda: tokens_per_gpu * _flops_per_token(run, r) / 1e12,
        "days": lambda: r.days,
    }
    if run.kind not in readers:
        raise ValueError(f"{run.name}: unknown kind {run.kind!r}; "
                         f"the kinds are {', '.join(KINDS)}")
    return readers[run.kind]()


def predict(run: Run, mfu: float) -> tuple[float | bool, bool]:
    """The planner's figure for ``run`` at the share of peak ``mfu``, and its verdict
    on whether the run fits.

    Chapter 2, *The memory wall*.
    """
    r = _plan(run, mfu)
    return _read(run, r), r.fits


def _plan(run: Run, mfu: float) -> PlanResult:
    if "mfu" in run.inputs:
        raise ValueError(f"{run.name}: the MFU is the calibration, not an input of a run")
    return plan(**run.inputs, mfu=mfu)


def _geomean_ratio(runs: Sequence[Run], mfu: float) -> float:
    logs = [math.log(predict(run, mfu)[0] / run.value) for run in runs]
    return math.exp(sum(logs) / len(logs))


def calibrate(names: Sequence[str] = CALIBRATION_RUNS, runs: Sequence[Run] = RUNS,
              low: float = 0.05, high: float = 1.0, target: float = 1.0) -> float:
    """The planner's ``mfu`` at which the named runs' predictions meet their published
    figures (geometric mean of the ratios = ``target``), by bisection.

    Raises ValueError when the target lies outside what ``low``..``high`` reach: the
    bisection would stop at a bound and claim a fit it did not find.

    Chapter 10, *Hardware for LLM training*.
    """
    by_name = {run.name: run for run in runs}
    missing = [name for name in names if name not in by_name]
    if missing or not names:
        raise ValueError(f"no calibration runs named {missing or 'at all'}")
    chosen = [by_name[name] for name in names]
    if any(run.kind not in ("tflops", "tokens_per_s") for run in chosen):
        raise ValueError("calibrate on throughput runs (tflops or tokens_per_s) only")
    at_low, at_high = _geomean_ratio(chosen, low), _geomean_ratio(chosen, high)
    if not at_low <= target <= at_high:
        raise ValueError(
            f"the calibration cannot reach its target: between mfu {low:g} and "
            f"{high:g} the runs' geometric-mean ratio goes from {at_low:.3f} to "
            f"{at_high:.3f}, not through {target:g}")
    for _ in range(60):
        mid = (low + high) / 2
        if _geomean_ratio(chosen, mid) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def validate(runs: Sequence[Run] = RUNS, mfu: float | None = None,
             calibration: Sequence[str] = CALIBRATION_RUNS) -> list[Row]:
    """Every run (the calibration runs left out) next to the planner's prediction.

    ``mfu`` None: fitted by :func:`calibrate` on ``calibration`` (among ``RUNS``).

    Chapter 2, *The memory wall*.
    """
    if mfu is None:
        mfu = calibrate(calibration)
    rows = []
    for run in runs:
        if run.name in calibration:
            continue
        r = _plan(run, mfu)
        predicted, fits = _read(run, r), r.fits
        margin = r.memory.total / r.memory.usable
        if run.kind == "fits":
            close = 1 / CLOSE <= margin <= CLOSE or not run.decidable
            rows.append(Row(run, predicted, math.nan,
                            predicted is run.value and not close, fits, margin))
            continue
        ratio = predicted / run.value
        rows.append(Row(run, predicted, ratio, BAND[0] <= ratio <= BAND[1], fits,
                        margin))
    return rows


def summary(rows: Sequence[Row]) -> dict[str, tuple[int, int]]:
    """Per kind of figure (and "all" numeric rows, "ran and fits"): (in the band or
    agreeing, of how many).

    Chapter 10, *Hardware for LLM training*.
    """
    out: dict[str, tuple[int, int]] = {}
    for kind in KINDS:
        mine = [row for row in rows if row.run.kind == kind]
        if mine:
            out[kind] = (sum(row.within for row in mine), len(mine))
    numeric = [row for row in rows if row.run.kind != "fits"]
    out["all"] = (sum(row.within for row in numeric), len(numeric))
    ran = [row for row in rows if row.run.kind != "fits"]
    out["ran and fits"] = (sum(row.fits for row in ran), len(ran))
    return out


def goals(rows: Sequence[Row]) -> Table:
    """Issue 37's goals for the planner against the validation, each with its count and
    whether it is met.

    Chapter 2, *The memory wall*.
    """
    ran = [row for row in rows if row.run.kind != "fits"]
    refused = [row for row in ran if not row.fits]
    no_fit = [row for row in rows if row.run.kind == "fits" and row.run.value is False]
    decided = [row for row in no_fit
               if row.run.decidable and not 1 / CLOSE <= row.margin <= CLOSE]
    speed = [row for row in ran if row.run.kind in ("tflops", "tokens_per_s")]
    fast = sum(row.within for row in speed)
    out = [row for row in ran if not row.within]
    told = sum(bool(row.run.note) for row in out)
    days = [row for row in ran if row.run.kind == "days"]
    body = [
        ["every run that ran fits in the planner", f"{len(ran) - len(refused)} of "
         f"{len(ran)}", "yes" if not refused else "no: " + ", ".join(
             row.run.name for row in refused)],
        ["a run reported out of memory does not fit, where the margin can tell",
         f"{sum(not row.predicted for row in decided)} of {len(decided)} "
         f"({len(no_fit) - len(decided)} too close to tell)",
         "yes" if all(not row.predicted for row in decided) else "no"],
        ["at least 80 % of the throughput figures within 0.8-1.25", f"{fast} of "
         f"{len(speed)} ({fast / max(1, len(speed)):.0%})",
         "yes" if fast >= 0.8 * len(speed) else "no"],
        ["every figure outside the band explained", f"{told} of {len(out)}",
         "yes" if told == len(out) else "no"],
        ["days to train within 0.8-1.25", f"{sum(r.within for r in days)} of "
         f"{len(days)}", "no run in the set publishes its days" if not days else
         "yes" if all(r.within for r in days) else "no"],
    ]
    return Table(["goal", "count", "met"], body,
                 title="The planner's goals against the validation set")


def _shown(x: float | bool, kind: str) -> str:
    if isinstance(x, bool):
        return "fits" if x else "does not fit"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}"


def validation_table(rows: Sequence[Row] | None = None) -> Table:
    """The validation as a table: run, source, figure, published, planner, ratio, in
    the band, the planner's fit verdict, and the reason of a miss where one is known.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    body = []
    for row in rows if rows is not None else validate():
        run = row.run
        if run.kind == "fits" and not run.decidable:
            ratio, verdict = "-", "cannot tell"
        elif run.kind == "fits" and 1 / CLOSE <= row.margin <= CLOSE:
            ratio, verdict = "-", "too close"
            run = replace(run, note=_CLOSE)
        elif run.kind == "fits":
            ratio, verdict = "-", "agrees" if row.within else "differs"
        else:
            ratio = f"{row.ratio:.2f}"
            verdict = "in band" if row.within else "out"
        reasons = [] if row.within else [run.note]
        if run.kind != "fits" and not row.fits:
            reasons.append(f"ran, but the planner's memory is {row.margin:.2f} of the "
                           "usable: " + (_CLOSE if row.margin <= CLOSE
                                         else run.memory_note or run.note))
        elif run.kind == "fits" and run.memory_note:
            reasons.append(run.memory_note)
        body.append([run.name, f"{cite(run.source)}, {run.where}", KINDS[run.kind],
                     _shown(run.value, run.kind), _shown(row.predicted, run.kind),
                     ratio, verdict, "yes" if row.fits else "no",
                     f"{row.margin:.2f}", "; ".join(x for x in reasons if x)])
    headers = ["run", "source", "figure", "published", "planner", "ratio", "verdict",
               "fits", "memory / usable", "why it misses"]
    return Table(headers, body, title="The planner against published runs, predicted "
                 "from their settings alone")


def plot_ratios(rows: Sequence[Row] | None = None, ax: Any = None) -> Any:
    """The ratio prediction / published per run on a log scale, against the band.

    Returns the matplotlib Axes. Verdict rows (fits) are left out: they have no ratio.

    Chapter 10, *Hardware for LLM training*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base.diagrams import COLUMN_INCHES, SMALL, use_course_style

    rows = [row for row in (rows if rows is not None else validate())
            if row.run.kind != "fits"]
    if ax is None:  # the book's column wide, names in its smallest readable font
        use_course_style()
        _, ax = plt.subplots(figsize=(COLUMN_INCHES, max(3.0, 0.25 * len(rows))),
                             layout="constrained")
    y = list(range(len(rows)))
    colours = ["tab:green" if row.within else "tab:red" for row in rows]
    ax.axvspan(*BAND, color="0.9", label=f"band {BAND[0]}-{BAND[1]}")
    ax.axvline(1.0, color="0.5", linewidth=0.8)
    ax.scatter([row.ratio for row in rows], y, c=colours, s=18, zorder=3)
    ax.set_xscale("log")
    ratios = [row.ratio for row in rows] or [1.0]
    ticks = [t for t in (0.05, 0.1, 0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0)
             if min(ratios) / 1.5 <= t <= max(ratios) * 1.5]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(y)
    ax.set_yticklabels([row.run.name for row in rows], fontsize=SMALL)
    ax.invert_yaxis()
    ax.set_xlabel("planner / published (log scale)")
    ax.set_ylabel("published run")
    ax.set_title("Planner against published runs")
    ax.legend(loc="lower right", fontsize=SMALL)
    return ax

