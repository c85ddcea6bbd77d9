"""Published training runs and benchmarks, as the planner's validation reads them.

Chapters 2, 9, 10, 11 and 12 show the planner against them
(:mod:`course_lib.planner.validation` predicts each run from its setting alone; this
module is the data). :data:`RUNS` holds each run's source (a key of
``book/references.bib``), where in the source its number stands, the planner inputs that
express its setting (model shape, GPUs, layout, batch, sequence length, precision,
ZeRO/FSDP stage, checkpointing, sequence, context and expert parallelism) and the one
figure it reports: whether it fits, memory per GPU, TFLOP/s or tokens/s per GPU, or
days to train. No published figure is an input of its own row. ``verified`` says how each
number was read, and which inputs, if any, the source does not state; ``note`` why the
planner misses it, where that can be told.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CALIBRATION_RUNS", "KINDS", "RUNS", "Run"]

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

    Used by the library's other modules.
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


_NO_SP = ("no sequence parallelism: it came later (Korthikanti et al. 2022), so the "
          "norms' and dropout's activations are whole on every tensor-parallel GPU")
_MEGATRON_TEXT = ("read from Table 1 of the paper's text (a markdown conversion of the "
                  f"arXiv PDF); the abstract's 3,072 GPUs and 52 % agree; {_NO_SP}")
_TABLE2_READ = ("read from Table 2 of the paper's text (a markdown conversion of the "
                "arXiv PDF)")
_TABLE2_TEXT = f"{_TABLE2_READ}; {_NO_SP}"
_PTDP = ("t = 8 inside the node (the paper's rule, as in Table 1) splits the published "
         "model-parallel size")
_FOUNDRY = ("read from scripts/train/benchmarking/README.md (llm-foundry, commit "
            "061f2c7); the shape from scripts/train/yamls/pretrain/mpt-*.yaml")
_TITAN_A100 = ("read from docs/performance.md (torchtitan, commit 0413364, 64 A100 80GB)"
               "; Llama shapes from the models' published configurations")
_TITAN_H100 = ("read from docs/performance.md (torchtitan, commit eaea6f6: H100s with 96GB "
               "of HBM2e at 2.4 TB/s, as it states, and a 500 W power limit); Llama 3.1 "
               "8B's shape from its published configuration")
_LLAMA3_TEXT = ("read from Table 4 of the paper's text (several conversions agree); "
                "FSDP as section 3.3.2 describes it, as ZeRO 2; no checkpointing; "
                "interleaved with a layer per model chunk: section 3.3.2 removes one "
                "layer from the first and the last stage, which leaves their first and "
                "last chunk the embedding and the head alone, so 8 chunks per GPU "
                "(126 + 2 layers over 16 stages)")
_NET_A100 = "the network is not in the table: InfiniBand HDR assumed"
_ZERO3_NOTE = ("in the paper, DeepSpeed's ZeRO 3 took about as long per step on this "
               "many GPUs as on half of them (GPUs x TFLOP/s per GPU stays flat, the "
               "batch is the same): its gathers ran far below the links' bandwidth; "
               "the planner gathers at NCCL's rate, prefetched behind compute")
_WEAK = ("per-GPU throughput rises with model size in the paper; in the planner it "
         "rises less: the HBM traffic of each product (chapter 10's roofline, the "
         "unfused attention scores' the most) and the memory-bound work, shares that "
         "fall as the layers widen, account for part of that rise")
_SELECTIVE = ("its selective op-level activation checkpointing planned as the planner's "
              "checkpointing='selective' (torchtitan's policy at this commit, "
              "course_lib.planner.recomputation)")
_RESERVED = ("torchtitan's memory figure is the allocator's peak reserved memory, the "
             "planner's the tensors it counts: the gap is about the same at 8 and at 128 "
             "GPUs, no share of the sharded states; left out are the logits beyond the "
             "one FP32 copy the planner counts (torchtitan's train.py computes them in "
             "BF16, 3.9 GiB for 2 x 8,192 x 128,256, and the loss on an FP32 copy, with "
             "their gradients), temporaries at the peak and the blocks the allocator "
             "keeps cached")
_ZERO3_FIRST = ("DeepSpeed's ZeRO 3 ran its gathers below the links' bandwidth, as "
                "the paper's larger runs of this model show (with about twice the "
                "GPUs, a step only about a fifth shorter); the planner gathers at "
                "NCCL's rate, prefetched behind compute")
_DEEPSPEED = ("DeepSpeed's ZeRO 3 planned with at most 1e9 parameters gathered at once, "
              "its default stage3_max_live_parameters (deepspeed/runtime/zero/config.py); "
              "the paper gives none of its settings")
_DEEPSPEED_MEMORY = ("the 560-GPU run holds 1.9 GB more of sharded states per GPU than "
                     "the 640-GPU run that fit, less than what the planner's memory "
                     "leaves out (the allocator's fragmentation, temporaries at the "
                     "peak), so the planner cannot separate the two")


def _megatron(params: float, heads: int, hidden: int, layers: int, t: int, p: int,
              gpus: int, batch: int, **more: Any) -> dict[str, Any]:
    """A GPT of Megatron-LM's tables on Selene's A100 80GB (vocabulary 51,200, 2,048
    tokens, mixed precision, full recomputation; Megatron-LM's dropout of 0.1 and its
    fused softmax, which keeps the attention probabilities: FlashAttention came in
    2022; tensor parallelism without sequence parallelism, which Korthikanti et al.
    introduced in 2022)."""
    return dict(model="custom", params=params, layers=layers, hidden=hidden, heads=heads,
                vocab=51200, seq_len=2048, precision="fp16-mixed", gpu="a100-80",
                network_link="ib-hdr", nodes=gpus // 8, tp=t, pp=p, global_batch=batch,
                checkpointing=True, flash_attention=False, dropout=True,
                sequence_parallel=False, **more)


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
                           micro_batches=batch // (gpus * micro), zero3_live=1e9)
        first = gpus in (384, 640)  # the fewest GPUs of each model's rows
        return Run(f"Megatron ZeRO-3 {size}, {gpus} GPUs", "narayanan2021megatron",
                   "Table 2", inputs, "tflops", tflops, f"{_TABLE2_READ}; {_DEEPSPEED}",
                   "megatron", _ZERO3_FIRST if first else _ZERO3_NOTE)
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
    return Run(f"MPT-{size.upper()}, {gpus} {card}", "llmfoundry_benchmarks",
               f"benchmark table '{card}', seq 2048, {gpus} GPUs", inputs,
               "tokens_per_s", tps, f"{_FOUNDRY}; {net}")


#: Korthikanti et al.'s Table 3: parameters, heads, hidden, layers, pipeline stages,
#: virtual stages (three for 175B and 530B, section 6), GPUs (t = 8, no data
#: parallelism), batch and micro-batch; Table 5's iteration seconds, with full
#: recomputation and with theirs.
_T5 = ((22.07e9, 64, 6144, 48, 1, 1, 8, 4, 4, 1.42, 1.10),
       (174.6e9, 96, 12288, 96, 8, 3, 64, 64, 1, 18.13, 13.75),
       (529.6e9, 128, 20480, 105, 35, 3, 280, 280, 1, 49.05, 37.83),
       (1008.0e9, 160, 25600, 128, 64, 1, 512, 512, 1, 94.42, 71.49))
_KORTHIKANTI_READ = ("read from Tables 3 and 5 of the paper's text (a markdown conversion "
                     "of the arXiv PDF); tokens/s per GPU = batch x 2,048 / iteration "
                     "seconds / GPUs; parameters by Narayanan et al.'s formula")


def _korthikanti(row: tuple, present_work: bool, dp: int = 1,
                 seconds: float | None = None, where: str = "Tables 3 and 5") -> Run:
    """One row of Korthikanti et al.'s Table 5: full recomputation without sequence
    parallelism, or their sequence parallelism with attention's core recomputed;
    ``dp`` copies of its layout take ``seconds`` (None: Table 5's)."""
    params, heads, hidden, layers, pp, virtual, gpus, batch, micro, full, theirs = row
    inputs = _megatron(params, heads, hidden, layers, 8, pp, gpus * dp, batch * dp,
                       virtual_stages=virtual, micro_batches=batch // micro)
    if present_work:
        inputs.update(checkpointing="attention", sequence_parallel=True)
    seconds = seconds or (theirs if present_work else full)
    how = ("sequence parallelism, attention recomputed" if present_work
           else "full recomputation")
    return Run(f"{_korthikanti_name(row, dp)}, {how}", "korthikanti2023reducing", where,
               inputs, "tokens_per_s", round(batch * 2048 / seconds / gpus, 1),
               _KORTHIKANTI_READ)


def _korthikanti_name(row: tuple, dp: int = 1) -> str:
    size = "1T" if row[0] > 1e12 else f"{row[0] / 1e9:.0f}B"
    return f"Korthikanti {size}, {row[6] * dp:,} A100"


def _korthikanti_alone(row: tuple, sequence_parallel: bool) -> Run:
    """Section 6.1: without sequence parallelism and selective recomputation together,
    none of Table 3's models fits: one of the two alone, as a fit verdict."""
    inputs = dict(_korthikanti(row, present_work=True).inputs,
                  sequence_parallel=sequence_parallel,
                  checkpointing="none" if sequence_parallel else "attention")
    alone = ("sequence parallelism, no recomputation" if sequence_parallel
             else "attention recomputed, no sequence parallelism")
    return Run(f"{_korthikanti_name(row)}, {alone}: out of memory",
               "korthikanti2023reducing", "section 6.1", inputs, "fits", False,
               "'Without the memory savings provided by sequence parallelism and "
               "selective recompute together, none of the these models will fit into "
               "memory' read from section 6.1 of the paper's text; Table 3's layouts")


#: torchtitan's Llama models: parameters, layers, hidden size, heads, key-value heads,
#: vocabulary, sequence length and the width of the SwiGLU MLP (the released configs).
_LLAMA_SHAPES = {"llama3-8b": (8.03e9, 32, 4096, 32, 8, 128256, 8192, 14336),
                 "llama3-70b": (70.6e9, 80, 8192, 64, 8, 128256, 8192, 28672),
                 "llama2-13b": (13.0e9, 40, 5120, 40, 40, 32000, 4096, 13824),
                 "llama2-70b": (68.98e9, 80, 8192, 64, 8, 32000, 4096, 28672)}


def _llama(key: str, gpu: str, gpus: int, local_batch: int, checkpointing: bool | str,
           **more: Any) -> dict[str, Any]:
    """A Llama model under FSDP (ZeRO 3) with ``local_batch`` sequences per GPU."""
    params, layers, hidden, heads, kv_heads, vocab, seq, mlp = _LLAMA_SHAPES[key]
    tp = more.get("tp", 1)
    inputs = dict(model="custom", params=params, layers=layers, hidden=hidden,
                  heads=heads, kv_heads=kv_heads, mlp=mlp, vocab=vocab, seq_len=seq,
                  precision="bf16-mixed",
                  gpu=gpu, nodes=gpus // 8, zero=3, micro_batches=1,
                  global_batch=local_batch * gpus // tp, checkpointing=checkpointing,
                  network_link="ib-ndr" if gpu == "h100" else "ib-hdr")
    inputs.update(more)
    return inputs


def _titan(name: str, where: str, inputs: dict[str, Any], kind: str,
           value: float | bool, verified: str, note: str = "") -> Run:
    return Run(name, "torchtitan_performance", where, inputs, kind, value, verified,
               note=note)


_LONG_CONTEXT = ("not identified: at 131,072 tokens attention outweighs the dense "
                 "products, and the paper does not say how it counts attention's "
                 "FLOPs; read, as the other two rows, in PaLM's 12 l h s per token "
                 "(the whole square, twice the causal half the planner's fused kernel "
                 "computes), the run made far fewer tokens than the planner's step; the "
                 "planner's context parallelism leaves out the imbalance that document "
                 "masks bring (section 3.3.2)")
_DEEPSEEK = ("DeepSeek-V3 computes its matrix products in FP8 (twice the BF16 peak the "
             "planner takes), its DualPipe schedule shrinks the pipeline bubble, and "
             "node-limited routing sends a token over InfiniBand to at most 4 nodes, "
             "in FP8; the planner sends all 8 copies in 16 bits (hidden behind compute "
             "as DualPipe hides them, but the longer of the two, here the "
             "all-to-alls). Multi-head latent attention, multi-token prediction and "
             "the 20 of 132 SMs that communication takes (section 3.5.1) are not "
             "modelled")
_LLAMA3_405B = dict(model="llama3-405b", gpu="h100", network_link="ib-ndr", tp=8,
                    pp=16, edge_layers=7, virtual_stages=8, zero=2,
                    checkpointing=False, global_batch=2048)

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
    *(_korthikanti(row, present_work=work) for row in _T5 for work in (False, True)),
    # section 6.3: the 530B model 8-way data parallel, a step of 39.15 s
    _korthikanti(_T5[2], present_work=True, dp=8, seconds=39.15, where="section 6.3"),
    *(_korthikanti_alone(row, sp) for row in _T5 for sp in (True, False)),
    Run("Megatron ZeRO-3 530B, 560 GPUs, micro-batch 4", "narayanan2021megatron",
        "Table 2, caption", _megatron(*_GPT530, 1, 1, 560, 2240, zero=3, micro_batches=1,
                                      zero3_live=1e9),
        "fits", False, f"{_TABLE2_READ}: 'did not fit on 560 GPUs'; {_DEEPSPEED}",
        memory_note=_DEEPSPEED_MEMORY, decidable=False),
    Run("Llama 3 405B, 8,192 H100", "dubey2024llama3", "Table 4, row 1",
        dict(_LLAMA3_405B, nodes=1024, micro_batches=32), "tflops", 430, _LLAMA3_TEXT,
        "palm"),
    Run("Llama 3 405B, 16,384 H100", "dubey2024llama3", "Table 4, row 2",
        dict(_LLAMA3_405B, nodes=2048, micro_batches=16), "tflops", 400, _LLAMA3_TEXT,
        "palm"),
    Run("Llama 3 405B, 128K context, 16,384 H100", "dubey2024llama3", "Table 4, row 3",
        dict(_LLAMA3_405B, nodes=2048, cp=16, seq_len=131072, global_batch=128,
             micro_batches=16), "tflops", 380,
        "read from Table 4, row 3 (TP 8, CP 16, PP 16, 131,072 tokens, 16M tokens per "
        "batch, 380 TFLOP/s, 38 % MFU; an SC'24 talk's slide gives the same row); DP 8 "
        "= 16,384 / (8 x 16 x 16), so 16 sequences per data-parallel group; "
        + _LLAMA3_TEXT.split("; ", 1)[1], "palm", _LONG_CONTEXT),
    Run("BLOOM 176B, 384 A100 80GB", "bigscience_bloom_card",
        "model card, 'Training throughput'",
        dict(model="custom", params=176e9, layers=70, hidden=14336, heads=112,
             vocab=250880, seq_len=2048, precision="bf16-mixed", gpu="a100-80",
             network_link="ib-hdr", nodes=48, tp=4, pp=12, zero=1, global_batch=2048,
             micro_batches=128, checkpointing=True, flash_attention=False,
             sequence_parallel=False), "tflops", 150,
        "'About 150 TFLOP per GPU per second' read from the model card; layout, batch "
        "and shape from train/tr11-176B-ml/tr11-176B-ml.slurm (no --sequence-parallel "
        "among its flags); Omni-Path taken as InfiniBand HDR", "megatron",
        "the embedding and head (250,880 x 14,336) counted as pipeline stages of their "
        "own in the run; the planner's stages are equal"),
    Run("DeepSeek-V3, 2,048 H800, per trillion tokens", "deepseek2024v3",
        "section 1 (and Table 1: 180K H800 GPU-hours per trillion tokens)",
        dict(model="deepseek-v3", gpu="h800", network_link="ib-ndr", nodes=256, pp=16,
             ep=64, ep_overlap=1, zero=1, tokens=1e12), "days", 3.7,
        "'3.7 days on our cluster with 2048 H800 GPUs' per trillion tokens, read from "
        "the paper's introduction; PP 16, EP 64 over 8 nodes, ZeRO-1 from section "
        "3.2; DualPipe's all-to-alls 'fully hidden during execution' (section "
        "3.2.1): EP overlap 1; InfiniBand at 50 GB/s per GPU (section 3.2.2); "
        "15,360 sequences of 4K "
        "per batch (section 4.2; the ramp from 3,072 over the first 469B tokens left "
        "out); micro-batches not published: one sequence each", note=_DEEPSEEK),
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
           "numbers', row 2", _llama("llama3-8b", "a100-80", 64, 1, "selective"),
           "tokens_per_s", 2973, f"{_TITAN_A100}; {_NET_A100}; {_SELECTIVE}"),
    _titan("torchtitan Llama 3 70B, 64 A100, full AC", "'Llama 3 performance "
           "numbers', row 3", _llama("llama3-70b", "a100-80", 64, 1, True),
           "tokens_per_s", 331, f"{_TITAN_A100}; {_NET_A100}"),
    _titan("torchtitan Llama 2 13B, 64 A100, no AC", "'Llama 2 performance numbers', "
           "row 1", _llama("llama2-13b", "a100-80", 64, 2, False), "tokens_per_s",
           2162, f"{_TITAN_A100}; {_NET_A100}"),
    _titan("torchtitan Llama 2 70B, 64 A100, full AC", "'Llama 2 performance numbers', "
           "row 5", _llama("llama2-70b", "a100-80", 64, 2, True), "tokens_per_s", 353,
           f"{_TITAN_A100}; {_NET_A100}"),
    _titan("torchtitan Llama 2 70B, 64 A100, selective op AC, batch 1", "'Llama 2 "
           "performance numbers', row 4", _llama("llama2-70b", "a100-80", 64, 1, "selective"),
           "tokens_per_s", 355, f"{_TITAN_A100}; {_NET_A100}; {_SELECTIVE}"),
    _titan("torchtitan Llama 2 70B, 64 A100, selective AC, batch 2: out of memory",
           "'Llama 2 performance numbers', footnote 1",
           _llama("llama2-70b", "a100-80", 64, 2, "selective"), "fits", False,
           f"{_TITAN_A100}; {_NET_A100}; {_SELECTIVE}"),
    _titan("torchtitan Llama 3.1 405B, 128 H100, FSDP + TP 8", "'Llama 3.1 performance "
           "numbers', row 1", dict(model="llama3-405b", gpu="h100", gpu_memory_gb=94,
                                   gpu_hbm_tbs=2.4, network_link="ib-ndr", nodes=16,
                                   tp=8, zero=3,
                                   global_batch=32, micro_batches=1, checkpointing=True),
           "tokens_per_s", 109, "read from docs/performance.md (torchtitan, commit "
           "3faaa1a, 128 H100 94GB); local batch 2, global 32 as it states; "
           "the 8,192-token sequences its 29.0 % MFU implies; its footnote 1: the "
           "lower-TDP H100 with HBM2e of the 8B rows below (2.4 TB/s taken from them)",
           note="the same lower-TDP H100s as the Llama 3.1 8B rows below (the row's "
           "footnote: their peak lies between the H100 SXM's and NVL's, value "
           "unknown); the planner takes the SXM's peak"),
    _titan("torchtitan Llama 3.1 405B, 128 H100, FSDP alone: out of memory",
           "'Llama 3.1 performance numbers', text", dict(
               model="llama3-405b", gpu="h100", gpu_memory_gb=94, network_link="ib-ndr",
               nodes=16, zero=3, global_batch=256, micro_batches=1, checkpointing=True),
           "fits", False, "'We do see OOM for 1D parallelism (FSDP2)' read from "
           "docs/performance.md; local batch 2 (the 2D run's) assumed"),
    _titan("torchtitan Llama 3.1 8B, 8 H100, FSDP", "Table 1, row 1",
           _llama("llama3-8b", "h100", 8, 2, "selective", gpu_memory_gb=96,
                  gpu_hbm_tbs=2.4), "tokens_per_s",
           5762, f"{_TITAN_H100}; {_SELECTIVE}",
           "the GPUs ran with a 500 W power limit, below the datasheet's clocks "
           "(torchtitan: their peak lies between the H100 SXM's and NVL's, value "
           "unknown); the planner takes the SXM's peak"),
    _titan("torchtitan Llama 3.1 8B, 128 H100, FSDP", "Table 3, row 1",
           _llama("llama3-8b", "h100", 128, 2, "selective", gpu_memory_gb=96,
                  gpu_hbm_tbs=2.4), "tokens_per_s",
           5605, f"{_TITAN_H100}; {_SELECTIVE}",
           "the GPUs ran at 500 W, below the datasheet's clocks, as in the 8-GPU row"),
    _titan("torchtitan Llama 3.1 8B, 8 H100, FSDP: memory", "Table 1, row 1",
           _llama("llama3-8b", "h100", 8, 2, "selective", gpu_memory_gb=96,
                  gpu_hbm_tbs=2.4), "memory_gib",
           82.4, f"{_TITAN_H100}; {_SELECTIVE}", _RESERVED),
    _titan("torchtitan Llama 3.1 8B, 128 H100, FSDP: memory", "Table 3, row 1",
           _llama("llama3-8b", "h100", 128, 2, "selective", gpu_memory_gb=96,
                  gpu_hbm_tbs=2.4), "memory_gib",
           67.0, f"{_TITAN_H100}; {_SELECTIVE}", _RESERVED),
)

#: The runs the one calibration (the planner's ``mfu``, the efficiency of the matrix
#: products at the compute roof, one per GPU generation) is fitted on: for the A100s, one
#: run with tensor parallelism and one of plain FSDP on one node; for the H100s, the
#: same FSDP run on H100s.
CALIBRATION_RUNS = ("Megatron GPT 18.4B, 256 GPUs", "MPT-7B, 8 A100 80GB",
                    "MPT-7B, 8 H100 80GB")
