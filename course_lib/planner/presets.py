"""The training planner's catalogue: published models and the hardware, by name.

Chapters 2, 9, 10, 11 and 12 plan with it (:mod:`course_lib.planner.inputs` reads and
checks a plan against it). Nothing here is a second table: the decoders' shapes come
from :data:`course_lib.numbers.memory.MODEL_PRESETS` (T5's and DeepSeek-V3's excepted:
an encoder-decoder and a mixture of experts are no GPT-like shape there), the GPUs from
:data:`course_lib.hardware.roofline.DATASHEETS`, the links from
:data:`course_lib.parallel.cost_model.LINKS`; the keys below only name them for the
command line. :data:`PRESETS` adds what the papers published about each training run:
sequence length, batch, tokens, the key-value heads of grouped-query attention, the
width of a gated (SwiGLU) MLP and, for a mixture of experts, the experts, how many each
token takes and the parameters inside them. Two entries are derived rather than read,
each from its neighbour: the A100 40GB (the 80GB card with half the memory and its lower
bandwidth) and the H800 (an H100 SXM whose NVLink is cut to 400 GB/s for both directions
together, 200 GB/s each way).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from course_lib.hardware import roofline
from course_lib.numbers import memory
from course_lib.parallel import cost_model

__all__ = ["CUSTOM_GPU_LINKS", "GENERATIONS", "GPUS", "KEY_OF_LINK", "LINKS",
           "LINK_KEYS", "PEAK_DTYPE", "PRESETS", "Preset"]


@dataclass(frozen=True)
class Preset:
    """A published model: its shape, parameter count, and how it was trained (source:
    bib key).

    ``kv_heads``: the key-value heads of grouped-query attention (None: one per query
    head); ``mlp``: the width of a gated SwiGLU MLP (0: GPT's 4h-wide GELU MLP). A
    mixture of experts (``experts`` above 1) routes each token to ``top_k`` of its
    experts, which hold ``expert_params`` of the ``params``; the rest (attention, the
    embedding, shared experts, dense layers) every token uses.

    Used by the library's other modules.
    """

    name: str
    shape: memory.ModelShape
    params: float
    seq_len: int
    global_batch: int
    tokens: float
    source: str
    note: str
    kv_heads: int | None = None
    experts: int = 1
    top_k: int = 1
    expert_params: float = 0.0
    mlp: int = 0


#: DeepSeek-V3's routed experts: 58 MoE layers (61 less the first 3, dense) of 256
#: SwiGLU experts of intermediate size 2,048 on the hidden size 7,168 (3 matrices each).
DEEPSEEK_V3_EXPERT_PARAMS = 58 * 256 * 3 * 7168 * 2048

#: Published models; ``source``: a key of book/references.bib ("" if the paper is not).
PRESETS: dict[str, Preset] = {
    "gpt3-175b": Preset(
        "GPT-3 175B", memory.MODEL_PRESETS["gpt3-175B"], 175e9, 2048, 1536, 300e9,
        "brown2020gpt3",
        "Table 2.1: 96 layers of 12,288 with 96 heads, batches of 3.2M tokens (1,536 "
        "sequences of 2,048); trained on 300B tokens"),
    "llama2-7b": Preset(
        "Llama 2 7B", memory.MODEL_PRESETS["llama-7B-shape"], 6.74e9, 4096, 1024, 2e12,
        "touvron2023llama2",
        "Table 1 and the released weights: 32 layers of 4,096, "
        "32 heads, a SwiGLU MLP of 11,008, 4K context, 4M-token batches, 2T tokens; "
        "6.74B parameters in the released weights", mlp=11008),
    "llama2-70b": Preset(
        "Llama 2 70B", memory.MODEL_PRESETS["llama2-70B-shape"], 68.98e9, 4096, 1024,
        2e12, "touvron2023llama2",
        "Table 1 and the released weights: 80 layers of 8,192, 64 heads "
        "(8 key-value), a SwiGLU MLP of 28,672, 4M-token batches, 2T tokens; 68.98B "
        "parameters in the released weights", kv_heads=8, mlp=28672),
    "llama3-405b": Preset(
        "Llama 3 405B", memory.MODEL_PRESETS["llama3-405B-shape"], 405e9, 8192, 2048,
        15.6e12, "dubey2024llama3",
        "Table 3: 126 layers of 16,384, 128 heads (8 key-value), a SwiGLU MLP of "
        "53,248, a vocabulary of 128,000; 8K context and 16M-token batches (Table 4); "
        "15.6T tokens", kv_heads=8, mlp=53248),
    "t5-11b": Preset(
        "T5 11B", memory.ModelShape(48, 1024, 128, 32000, 0), 11.3e9, 512, 2048,
        2.0**40,
        "raffel2020t5",
        "24 encoder and 24 decoder layers of width 1,024, 128 heads of 128, a "
        "65,536-wide MLP, 32,000 wordpieces; 2**11 sequences of 512 per batch, about "
        "1T tokens; 11.3B parameters as the FSDP paper (zhao2023fsdp) counts them. "
        "The activation estimate assumes a decoder with a 4h-wide MLP: low for T5"),
    "deepseek-v3": Preset(
        "DeepSeek-V3", memory.ModelShape(61, 7168, 128, 129280, 0), 671e9, 4096, 15360,
        14.8e12, "deepseek2024v3",
        "sections 2 and 4.2: 61 layers of 7,168, 128 heads, a vocabulary of 129,280; "
        "the first 3 layers dense, the other 58 with 256 routed experts (intermediate "
        "size 2,048, 8 per token) and 1 shared expert: 671B parameters, 37B active; "
        "4K sequences, batches of 15,360 (after a ramp from 3,072 over the first 469B "
        "tokens), 14.8T tokens. Not modelled: multi-head latent attention (taken as "
        "ordinary attention with 128 key-value heads) and multi-token prediction; the "
        "activation estimate assumes a 4h-wide MLP",
        kv_heads=128, experts=256, top_k=8, expert_params=DEEPSEEK_V3_EXPERT_PARAMS),
}

#: The links by command-line key: names of :data:`LINKS`.
LINK_KEYS: dict[str, str] = {
    "nvlink3": "NVLink 3 (A100)", "nvlink4": "NVLink 4 (H100)",
    "nvlink-h800": "NVLink (H800)", "pcie4": "PCIe 4.0 x16", "pcie5": "PCIe 5.0 x16",
    "ib-hdr": "InfiniBand HDR", "ib-ndr": "InfiniBand NDR", "eth-100g": "Ethernet 100G",
}
#: Chapter 8's links and the H800's NVLink: NVLink 4's latency, 400 GB/s for both
#: directions together (the vendor's figure, bibliography key nvidia_h800).
LINKS: dict[str, cost_model.Link] = {
    **cost_model.LINKS,
    "NVLink (H800)": dataclasses.replace(
        cost_model.LINKS["NVLink 4 (H100)"], name="NVLink (H800)", bandwidth=200e9,
        source="nvidia_h800",
        note="H800 SXM: NVLink cut to 400 GB/s for both directions together (the "
             "H100's is 900); DeepSeek-V3 measured about 160 GB/s of it "
             "(deepseek2024v3, section 3.2.2)"),
}
KEY_OF_LINK = {name: key for key, name in LINK_KEYS.items()}

#: The GPUs by command-line key: roofline's datasheets. The A100 40GB is the 80GB one
#: with half the memory and its lower bandwidth (nvidia_a100 lists both; the peaks are
#: the same); the H800 is the H100 SXM with its own NVLink (nvidia_h800).
GPUS: dict[str, roofline.Accelerator] = {
    "a100-40": dataclasses.replace(roofline.DATASHEETS["A100 SXM 80GB"],
                                   name="A100 SXM 40GB", memory=40 * memory.GIB,
                                   bandwidth=1555e9),
    "a100-80": roofline.DATASHEETS["A100 SXM 80GB"],
    "h100": roofline.DATASHEETS["H100 SXM"],
    "h800": dataclasses.replace(roofline.DATASHEETS["H100 SXM"], name="H800 SXM",
                                gpu_link="NVLink (H800)", source="nvidia_h800",
                                note="An H100 SXM with NVLink cut to 400 GB/s"),
    "l40s": roofline.DATASHEETS["L40S"],
}
#: Each GPU's generation. The same software reaches a different share of each
#: generation's peak (FlashAttention-2: 50-73 % of an A100's, 35 % of an H100's), so the
#: validation fits the planner's ``mfu`` once per generation
#: (:func:`course_lib.planner.validation.efficiencies`).
GENERATIONS = {"a100-40": "Ampere", "a100-80": "Ampere", "h100": "Hopper",
               "h800": "Hopper", "l40s": "Ada"}
#: The datasheet peak a precision computes at (FP32 training uses no TF32 here:
#: PyTorch's default for matrix products).
PEAK_DTYPE: dict[str, str] = {"fp32": "fp32", "bf16-mixed": "bf16",
                              "fp16-mixed": "fp16", "bf16": "bf16"}
#: A custom GPU's links: NVLink 4 between its GPUs, PCIe 5.0 to the host.
CUSTOM_GPU_LINKS = ("nvlink4", "pcie5")
