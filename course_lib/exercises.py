"""Exercises with checking functions: each compares a learner's answer with one the library computes.

Every chapter ends with them (``chapter01`` ... ``chapter10``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from course_lib import formats, memory, quant, roofline
from course_lib.distributed import cost_model


@dataclass
class Exercise:
    """A question whose answer is a number, checked within a relative tolerance, with a hint.

    Chapter 1, *Pretraining objectives*.
    """

    question: str
    solution: Callable[[], float]
    unit: str = ""
    rel_tol: float = 0.02
    hint: str = ""

    def feedback(self, answer: float | None) -> tuple[bool, str]:
        """Whether ``answer`` is right, and the feedback to show (None means not answered yet)."""
        if answer is None:
            return False, f"Not answered yet. {self.question}"
        try:
            value = float(answer)
        except (TypeError, ValueError):
            return False, f"Your answer {answer!r} is not a number; give a number in {self.unit or 'the asked unit'}."
        expected = self.solution()
        unit = f" {self.unit}" if self.unit else ""
        if math.isclose(value, expected, rel_tol=self.rel_tol):
            return True, f"Correct: {value:,.6g}{unit}."
        direction = "high" if value > expected else "low"
        return False, f"Not quite: {value:,.6g}{unit} is too {direction}. Hint: {self.hint}"

    def check(self, answer: float | None) -> None:
        """Print the feedback on a learner's answer."""
        print(self.feedback(answer)[1])

    __call__ = check


def _t5_sentinels(length: int) -> int:
    from course_lib.objectives import span_counts

    return span_counts(length)[1]


def _course_vocab_size() -> int:
    from course_lib.data import DEFAULT_VOCAB_SIZE

    return DEFAULT_VOCAB_SIZE


def _course_model_compute() -> float:
    from course_lib.course_model import COURSE_RECIPE, course_model_reference

    return 6.0 * course_model_reference().get("n_params", 0) * COURSE_RECIPE.tokens


#: Chapter 1, "Pretraining objectives".
chapter01 = SimpleNamespace(
    q1=Exercise(
        "A batch holds 2,000 ordinary (non-special) tokens. How many of them does BERT's recipe "
        "expect to replace by <mask>?",
        lambda: 2000 * 0.15 * 0.8,
        unit="tokens",
        hint="15% are selected; of those, 80% become <mask> (10% random, 10% kept).",
    ),
    q2=Exercise(
        "T5 corrupts a sequence of 100 tokens with noise density 0.15 and mean span length 3. How "
        "many sentinel tokens appear in the encoder's input?",
        lambda: float(_t5_sentinels(100)),
        unit="sentinels",
        rel_tol=0,
        hint="noise tokens = round(0.15 x length); spans = round(noise / 3); one sentinel per span.",
    ),
    q3=Exercise(
        "A model that knows nothing spreads its probability evenly over the course tokenizer's "
        "4,096 tokens. What is its perplexity?",
        lambda: float(_course_vocab_size()),
        rel_tol=1e-6,
        hint="perplexity = exp(mean loss); a uniform guess over V tokens has loss ln V.",
    ),
    q4=Exercise(
        "Estimate the training compute of the course model with C = 6·N·D (N = all its parameters, "
        "D = training tokens, both printed in this chapter), in FLOPs.",
        _course_model_compute,
        unit="FLOPs",
        hint="D = steps x batch size x sequence length; multiply 6 x N x D.",
    ),
)


def _min_gpus_zero3_model_states(n_params: float, capacity: float) -> float:
    n = 1
    while memory.training_memory(n_params, "bf16-mixed", "adam", gpus=n, zero_stage=3).model_states > capacity:
        n += 1
    return n


#: Chapter 2, "The memory wall".
chapter02 = SimpleNamespace(
    q1=Exercise(
        "How many GB (10^9 bytes) do the weights of a 13B-parameter model take in bf16?",
        lambda: memory.gb(memory.weight_memory(13e9, "bf16")),
        unit="GB",
        hint="parameters x bytes per parameter; bf16 takes 2 bytes.",
    ),
    q2=Exercise(
        "With mixed-precision Adam (bf16-mixed), how many bytes per parameter do the model states take "
        "(weights, gradients, master weights, optimizer states) on one GPU?",
        lambda: memory.training_memory(1e9, "bf16-mixed", "adam").model_states / 1e9,
        unit="bytes/param",
        rel_tol=1e-9,
        hint="2 (bf16 weights) + 2 (bf16 gradients) + 4 (fp32 master) + 4 + 4 (two fp32 Adam states).",
    ),
    q3=Exercise(
        "Under ZeRO stage 3 with mixed-precision Adam, what is the smallest number of 80 GiB GPUs whose memory "
        "holds the model states of a 70B model (ignore activations and temporaries)?",
        lambda: _min_gpus_zero3_model_states(70e9, 80 * memory.GIB),
        unit="GPUs",
        rel_tol=0,
        hint="stage 3 puts (4 + 12) x parameters / N bytes on each GPU; find the smallest N that fits 80 x 2^30 bytes.",
    ),
    q4=Exercise(
        "How many GB of activations does one layer of a 16-bit transformer with hidden size 4096 and 32 heads "
        "save for backward at batch 1 and sequence length 4096 (Korthikanti et al.'s formula, with dropout)?",
        lambda: memory.gb(memory.activation_bytes_per_layer(4096, 1, 4096, 32, 2, 1)),
        unit="GB",
        hint="s*b*h*(34 + 5*a*s/h) bytes; note the term that grows with the square of the sequence length.",
    ),
)


def _smallest_scale_exponent(gradient: float, fmt: formats.FloatFormat) -> int:
    k = 0
    while gradient * 2.0**k < fmt.min_normal:
        k += 1
    return k


#: Chapter 3, "Number formats".
chapter03 = SimpleNamespace(
    q1=Exercise(
        "What is the smallest positive number FP16 can store (its smallest subnormal)?",
        lambda: formats.FP16.min_subnormal,
        rel_tol=1e-3,
        hint="2**(emin - mantissa_bits): FP16's emin is 1 - 15 = -14 and it stores 10 mantissa bits.",
    ),
    q2=Exercise(
        "What is the gap between 256 and the next larger number BF16 can store?",
        lambda: formats.ulp(256.0, formats.BF16),
        rel_tol=1e-9,
        hint="256 = 2**8 and BF16 keeps 7 mantissa bits, so neighbours in [256, 512) are 2**(8 - 7) apart.",
    ),
    q3=Exercise(
        "What is the largest finite value of the OCP FP8 format E4M3 (E4M3FN: bias 7, no infinity)?",
        lambda: formats.E4M3.max,
        rel_tol=0,
        hint="the all-ones exponent still holds numbers (only S.1111.111 is NaN), so the max is 1.110 x 2**(15 - 7).",
    ),
    q4=Exercise(
        "A gradient of 1e-9 is multiplied by a loss scale of 2**k before it is stored in FP16. What is the "
        "smallest k that makes it a normal FP16 number (at least the smallest normal, 2**-14)?",
        lambda: _smallest_scale_exponent(1e-9, formats.FP16),
        rel_tol=0,
        hint="1e-9 x 2**k >= 2**-14 = 6.1e-5 means 2**k >= 61,035; compare with GradScaler's start scale.",
    ),
)


#: Chapter 4, "Quantizing π".
chapter04 = SimpleNamespace(
    q1=Exercise(
        "What value does FP8 E5M2 store for π (round to nearest, ties to even)?",
        lambda: formats.round_to_format(math.pi, "e5m2"),
        rel_tol=0,
        hint="E5M2 keeps 2 mantissa bits: between 2 and 4 its values are 2, 2.5, 3 and 3.5; pick the nearest to π.",
    ),
    q2=Exercise(
        "How far apart are neighbouring BF16 numbers between 2 and 4 (the ULP of π in BF16)?",
        lambda: formats.ulp(math.pi, "bf16"),
        rel_tol=0,
        hint="between 2 and 4 the exponent is 1, and BF16 has 7 mantissa bits: the spacing is 2**(1 - 7).",
    ),
    q3=Exercise(
        "A block of weights has absolute maximum 5.0. With symmetric INT8 (scale = 5.0 / 127, code = round(x / scale)), "
        "what value does π come back as after dequantizing (code x scale)?",
        lambda: formats.decode(formats.encode(math.pi / (5.0 / 127), "int8"), "int8") * (5.0 / 127),
        rel_tol=1e-4,
        hint="π / (5/127) = 79.8 rounds to the code 80; multiply it back by the scale.",
    ),
    q4=Exercise(
        "How many bits per value does INT4 with one FP16 scale per block of 128 values cost?",
        lambda: formats.INT4.total_bits + formats.FP16.total_bits / 128,
        unit="bits",
        rel_tol=0,
        hint="4 bits per code plus the 16 bits of the block's scale shared by its 128 values.",
    ),
)


def _zeropoint_roundtrip(values: tuple[float, ...], index: int, bits: int) -> float:
    """What ``values[index]`` comes back as under per-tensor zero-point quantization with ``bits`` bits."""
    import torch

    config = quant.QuantConfig(bits, "zeropoint", "tensor", scale_dtype="fp32")
    return float(quant.quantize_dequantize(torch.tensor(values), config)[index])


def _lora_parameters(n_in: int, n_out: int, rank: int) -> float:
    """Trainable parameters of one LoRA adapter, counted on a real LoRALinear (base on the meta device)."""
    from torch import nn

    from course_lib.lora import LoRALinear, count_trainable

    return float(count_trainable(LoRALinear(nn.Linear(n_in, n_out, device="meta"), rank=rank))[0]
                 - n_in * n_out - n_out)


#: Chapter 5, "Quantization".
chapter05 = SimpleNamespace(
    q1=Exercise(
        "INT4 with zero points, groups of 128: each group stores one FP16 scale and one 4-bit zero point. "
        "How many bits does one weight cost, overhead included?",
        lambda: quant.bits_per_value((4096, 4096), "int4-g128"),
        unit="bits",
        rel_tol=1e-9,
        hint="4 bits of code, plus (16 + 4) bits shared by the 128 weights of the group.",
    ),
    q2=Exercise(
        "A tensor holds -1.0, 2.0 and 0.75. Quantized per tensor with 4-bit zero-point quantization "
        "(scale = (max - min) / 15, zero = round(-min / scale)), what value does 0.75 come back as?",
        lambda: _zeropoint_roundtrip((-1.0, 2.0, 0.75), 2, 4),
        rel_tol=1e-6,
        hint="scale = 3 / 15 = 0.2 and zero = 5; 0.75 / 0.2 = 3.75 rounds to 4, so the code is 9; decode (9 - 5) x 0.2.",
    ),
    q3=Exercise(
        "NF4 with double quantization (blocks of 64, their scales stored in 8 bits in blocks of 256, one FP32 "
        "constant per 256-block): bits per weight for a large matrix?",
        lambda: quant.bits_per_value((65536, 4096), "nf4-dq"),
        unit="bits",
        rel_tol=1e-4,
        hint="4 + 8/64 + 32/(64 x 256): the code, the 8-bit block scale, and the FP32 constant of each 256 blocks.",
    ),
    q4=Exercise(
        "How many trainable parameters does a rank-8 LoRA adapter add to one 4096 x 4096 linear layer?",
        lambda: _lora_parameters(4096, 4096, 8),
        unit="parameters",
        rel_tol=0,
        hint="A is rank x in and B is out x rank: 8 x 4096 + 4096 x 8.",
    ),
)




def _csr_bytes(rows: int, cols: int, density: float) -> float:
    """Bytes of a float32 [rows, cols] matrix in CSR with int32 indices, measured on a real matrix."""
    import torch

    from course_lib.sparse_storage import storage_bytes

    n = rows * cols
    flat = torch.zeros(n)
    flat[torch.randperm(n, generator=torch.Generator().manual_seed(0))[:round(density * n)]] = 1.0
    return float(storage_bytes({"w": flat.view(rows, cols)}, "csr") - 2 * 8)  # less the stored shape


def _mlp_unit_parameters(hidden: int, units: int) -> float:
    """Parameters that go with ``units`` MLP units of one GPT-2 block of width ``hidden``, counted on models."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from course_lib.models import count_parameters

    def size(inner: int) -> int:
        config = GPT2Config(vocab_size=8, n_positions=8, n_embd=hidden, n_layer=1, n_head=1, n_inner=inner,
                            bos_token_id=0, eos_token_id=0)
        with torch.device("meta"):
            return count_parameters(GPT2LMHeadModel(config))

    return float(size(4 * hidden) - size(4 * hidden - units))


def _cubic(final: float, stages: int, stage: int) -> float:
    """The sparsity after ``stage`` of ``stages`` on the cubic schedule to ``final``."""
    from course_lib.prune import cubic_schedule

    return cubic_schedule(final, stages)[stage - 1]


#: Chapter 6, "Pruning lab".
chapter06 = SimpleNamespace(
    q1=Exercise(
        "A 1024 x 1024 FP32 matrix is pruned to 90 % sparsity and stored in CSR: 4-byte values, 4-byte "
        "column indices, and 1025 row pointers of 4 bytes. How many bytes, against 4,194,304 dense?",
        lambda: _csr_bytes(1024, 1024, 0.1),
        unit="bytes",
        rel_tol=1e-5,
        hint="104,858 non-zeros (10 % of 1,048,576, rounded) x (4 + 4) bytes, plus 1025 x 4 bytes of row pointers.",
    ),
    q2=Exercise(
        "Gradual pruning to 80 % in 4 stages on the cubic schedule s = s_f (1 - (1 - t/n)^3): what sparsity "
        "(as a fraction) does the model have after stage 2?",
        lambda: _cubic(0.8, 4, 2),
        rel_tol=1e-9,
        hint="t/n = 2/4, so 0.8 x (1 - 0.5^3) = 0.8 x 0.875.",
    ),
    q3=Exercise(
        "GPT-2 small has width 768 and 3072 MLP units per block. How many parameters does one block lose "
        "when half of its MLP units are removed (weights and biases)?",
        lambda: _mlp_unit_parameters(768, 1536),
        unit="parameters",
        rel_tol=0,
        hint="Each unit takes its incoming column (768), its bias (1) and its outgoing row (768).",
    ),
)


def _feedback_update(w: tuple[float, float], step: float, hinv: tuple[tuple[float, float], ...]) -> float:
    """GPTQ's error feedback on a row of two weights: w2 after w1 is rounded, in the library's Cholesky form."""
    import torch

    u = torch.linalg.cholesky(torch.tensor(hinv, dtype=torch.float64), upper=True)  # H^-1 = U^T U
    error = w[0] - round(w[0] / step) * step
    return float(w[1] - error / u[0, 0] * u[0, 1])  # = w2 - error / [H^-1]_11 x [H^-1]_12


def _gpus_for_weights(n_params: float, config: str, capacity: int) -> float:
    """How many devices of ``capacity`` bytes hold ``n_params`` weights stored under ``config``."""
    bits = quant.bits_per_value((4096, 4096), config)
    return float(math.ceil(n_params * bits / 8 / capacity))


#: Chapter 7, "GPTQ lab".
chapter07 = SimpleNamespace(
    q1=Exercise(
        "GPTQ keeps one Hessian H = 2 X X^T per linear layer. For a layer with 4096 inputs and 11008 outputs, "
        "calibrated on 128 x 2048 tokens, how many bytes does H take in FP32?",
        lambda: 4096 * 4096 * 4,
        unit="bytes",
        rel_tol=0,
        hint="H is inputs x inputs: it depends neither on the outputs nor on the number of calibration tokens.",
    ),
    q2=Exercise(
        "A row of two weights w = (0.30, 0.50) is quantized on a grid of step 0.25 (levels ..., 0.25, 0.50, ...). "
        "The inverse Hessian is [[2, 1], [1, 2]]. GPTQ rounds w1 first. What value does w2 hold just before "
        "it is rounded?",
        lambda: _feedback_update((0.30, 0.50), 0.25, ((2.0, 1.0), (1.0, 2.0))),
        rel_tol=1e-9,
        hint="w1 rounds to 0.25, an error of 0.05; w2 moves by -0.05 / [H^-1]_11 x [H^-1]_12 = -0.05 / 2 x 1.",
    ),
    q3=Exercise(
        "A 70B-parameter model is stored with GPTQ at 4 bits in groups of 128 (an FP16 scale and a 4-bit zero "
        "point per group; count every parameter at that rate). How many GPUs of 24 GiB does it take just to "
        "hold the weights?",
        lambda: _gpus_for_weights(70e9, "int4-g128", 24 * memory.GIB),
        unit="GPUs",
        rel_tol=0,
        hint="4.15625 bits per weight: 70e9 x 4.15625 / 8 bytes, about 36.4 GB, against 24 x 2^30 bytes per GPU.",
    ),
)


chapter08 = SimpleNamespace(
    q1=Exercise(
        "A ring all-reduce sums 1 GB (1e9 bytes) of gradients over 8 ranks. How many bytes does each rank "
        "send?",
        lambda: cost_model.ring_allreduce_bytes(1e9, 8),
        unit="bytes",
        rel_tol=1e-9,
        hint="2 (N - 1) chunks of S / N: 7 in the reduce-scatter, 7 in the all-gather, each 1e9 / 8 bytes.",
    ),
    q2=Exercise(
        "A 7B-parameter model is trained with BF16 mixed precision and Adam, with DDP on 8 GPUs. How many GB "
        "(1e9 bytes) of model states (weights, gradients, master weights, optimizer states) does each GPU hold?",
        lambda: memory.training_memory(7e9, "bf16-mixed", "adam", gpus=8).model_states / 1e9,
        unit="GB",
        rel_tol=0.01,
        hint="DDP copies everything to every GPU: 2 + 2 + 4 + 8 = 16 bytes per parameter, whatever the GPU count.",
    ),
    q3=Exercise(
        "By the alpha-beta model (cost_model.ring_allreduce_time), how many seconds does a ring all-reduce of "
        "14 GB (14e9 bytes) of gradients take over 8 GPUs linked by InfiniBand NDR, sent as one piece?",
        lambda: cost_model.ring_allreduce_time(14e9, 8, cost_model.LINKS["InfiniBand NDR"]),
        unit="s",
        rel_tol=0.02,
        hint="2 (N - 1) alpha + 2 (N - 1) / N x S / beta, with beta = 50e9 bytes/s per direction; "
             "the latency term is tiny here.",
    ),
)


def _lowest_zero_stage(n_params: float, gpus: int, capacity: float) -> float:
    """The lowest ZeRO stage whose model states (BF16 mixed, Adam) fit ``capacity`` bytes per GPU."""
    for stage in memory.ZERO_STAGES:
        if memory.training_memory(n_params, "bf16-mixed", gpus=gpus,
                                  zero_stage=stage).model_states <= capacity:
            return float(stage)
    return math.inf


#: Chapter 9, "Sharding with ZeRO and FSDP".
chapter09 = SimpleNamespace(
    q1=Exercise(
        "A 13B-parameter model is trained with BF16 mixed precision and Adam on 8 GPUs of 40 GB (4e10 "
        "bytes). Counting model states only, which is the lowest ZeRO stage (0, 1, 2 or 3) that fits?",
        lambda: _lowest_zero_stage(13e9, 8, 40e9),
        rel_tol=0,
        hint="Stage 1: 4 x 13 + 12 x 13 / 8 GB; stage 2: 2 x 13 + 14 x 13 / 8 GB; stage 3: 16 x 13 / 8 GB.",
    ),
    q2=Exercise(
        "With ZeRO stage 3, how many GB (1e9 bytes) does one training step of a 1B-parameter model move "
        "when parameters and gradients travel in BF16? Use the ZeRO paper's accounting.",
        lambda: 3 * 1e9 * 2 / 1e9,
        unit="GB",
        rel_tol=1e-9,
        hint="An all-gather for forward, another for backward, a reduce-scatter of the gradients: Psi each.",
    ),
    q3=Exercise(
        "64 GPUs train a 7B model (BF16 mixed, Adam) with hybrid sharding, sharding factor 8. How many GB of "
        "model states does each GPU hold?",
        lambda: memory.training_memory(7e9, "bf16-mixed", gpus=8, zero_stage=3).model_states / 1e9,
        unit="GB",
        rel_tol=0.01,
        hint="The states are sharded over the 8 GPUs of a group (16 bytes x 7e9 / 8) and replicated across "
             "the 8 groups, which saves nothing per GPU.",
    ),
)


#: Chapter 10, "Hardware for LLM training".
chapter10 = SimpleNamespace(
    q1=Exercise(
        "At what arithmetic intensity (FLOP per byte) does an A100 SXM 80GB turn from memory-bound to "
        "compute-bound in dense BF16? Use the datasheet's figures (roofline.DATASHEETS).",
        lambda: roofline.roof_of("A100 SXM 80GB", "bf16").ridge,
        unit="FLOP/byte",
        rel_tol=0.01,
        hint="The ridge point is peak / bandwidth: 312e12 FLOP/s over 2,039e9 bytes/s.",
    ),
    q2=Exercise(
        "Decoding at batch 1 reads every weight once per token. At most how many tokens per second can "
        "one H100 SXM generate with a 7B-parameter model in BF16, counting the weights only?",
        lambda: roofline.DATASHEETS["H100 SXM"].bandwidth / (7e9 * 2),
        unit="tokens/s",
        rel_tol=0.02,
        hint="Each token moves 7e9 x 2 bytes; the memory delivers 3.35e12 bytes per second.",
    ),
    q3=Exercise(
        "How many hours does it take to train a 1B-parameter model on 20B tokens on 8 H100 SXM GPUs at 40 % "
        "of their dense BF16 peak? Use C = 6 N D.",
        lambda: roofline.time_to_train(1e9, 20e9, roofline.DATASHEETS["H100 SXM"].dense["bf16"], 0.4, 8) / 3600,
        unit="hours",
        rel_tol=0.02,
        hint="6 x 1e9 x 20e9 FLOPs divided by 8 x 989.5e12 x 0.4 FLOP/s gives seconds.",
    ),
    q4=Exercise(
        "How many seconds does it take to load a 70B-parameter checkpoint stored in BF16 from a disk that "
        "reads 2 GB/s (2e9 bytes per second)?",
        lambda: 70e9 * 2 / 2e9,
        unit="s",
        rel_tol=0.02,
        hint="Bytes of the checkpoint (2 per parameter) divided by the read speed.",
    ),
)
