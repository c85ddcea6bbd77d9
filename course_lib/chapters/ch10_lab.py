"""Chapter 10, *Hardware for LLM training*: the chapter's lab, exercises and a prediction checked against the library.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The references are the library's roofline (:func:`course_lib.hardware.roofline.matmul_operation`)
and utilisation (:class:`course_lib.hardware.mfu.Utilisation`); the prediction times STREAM's
triad with :func:`course_lib.hardware.stream.measure_bandwidth`.
"""

from __future__ import annotations

import torch

from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction
from course_lib.hardware import mfu
from course_lib.hardware import roofline, stream

# --------------------------------------------------------------------------------------------
# Exercise: the arithmetic intensity of a matrix product
# --------------------------------------------------------------------------------------------

_DTYPE_OF_BITS = {32: "fp32", 16: "bf16", 8: "fp8"}


def _matmul_intensity(m: int, k: int, n: int, bits: int) -> float:
    """The reference: the roofline's (m x k) @ (k x n) product in the format of ``bits`` bits, FLOP per byte."""
    return roofline.matmul_operation(m, k, n, _DTYPE_OF_BITS[bits]).intensity


def _intensity_cases() -> list[Case]:
    g = torch.Generator().manual_seed(10)
    sizes = torch.randint(1, 4097, (3, 3), generator=g).tolist()
    cases = [Case((m, k, n, bits), "random") for (m, k, n), bits in zip(sizes, (16, 32, 8))]
    cases += [Case((1, 768, 3072, 16), "one token (m = 1)"),
              Case((4096, 4096, 4096, 16), "a large square product"),
              Case((3, 5, 7, 32), "odd shapes"), Case((1, 1, 1, 8), "one element each")]
    return cases


def _intensity_with(m: int, k: int, n: int, bits: int, flops_per_term: int = 2,
                    element_bytes: float | None = None, weights_only: bool = False) -> float:
    """The intensity with one thing done wrong: FLOPs per term, bytes per element, or the bytes counted."""
    e = bits / 8 if element_bytes is None else element_bytes
    elements = k * n if weights_only else m * k + k * n + m * n
    return flops_per_term * m * k * n / (elements * e)


matmul_intensity = Exercise(
    "matmul_intensity",
    "The arithmetic intensity (FLOP per byte) of an (m x k) @ (k x n) product with elements of `bits` bits.",
    _matmul_intensity, _intensity_cases,
    misconceptions=(
        Misconception("FLOPs for MACs", "count one operation per multiply-add term, m k n, instead of two "
                      "(a multiply and an add), 2 m k n",
                      lambda m, k, n, bits: _intensity_with(m, k, n, bits, flops_per_term=1)),
        Misconception("bits for bytes", "divide by the bits of an element instead of its bytes (bits / 8)",
                      lambda m, k, n, bits: _intensity_with(m, k, n, bits, element_bytes=bits)),
        Misconception("only the weights' bytes", "count only the (k x n) weight matrix's bytes; the input "
                      "(m x k) is read and the output (m x n) written too",
                      lambda m, k, n, bits: _intensity_with(m, k, n, bits, weights_only=True)),
    ),
)

# --------------------------------------------------------------------------------------------
# Exercise: the hardware FLOPs utilisation of a run that recomputes its activations
# --------------------------------------------------------------------------------------------


def _utilisation(tokens_per_second: float, n_params: float, layers: int, hidden: int, seq_len: int,
                 peak_flops: float) -> float:
    """The reference: the library's HFU of a run of ``tokens_per_second`` that recomputes every block's
    forward pass in its backward pass: PaLM's 6 N + 12 L d T per token and one forward more, 2 N + 4 L d T."""
    model = mfu.model_flops_per_token(n_params, layers, hidden, seq_len)
    run = mfu.Utilisation(tokens=1, seconds=1 / tokens_per_second, model_flops_per_token=model,
                          hardware_flops_per_token=model * 4 / 3, peak=peak_flops)
    return run.hfu


#: Megatron-LM's trillion-parameter run (Narayanan et al. 2021, Table 1): 128 layers of width 25,600,
#: 2,048 tokens, 3,072 A100s of 312 TFLOP/s, 502 PFLOP/s counted by the paper's equation 3 (full
#: recomputation, vocabulary 51,200), from which its tokens per second.
_MEGATRON_1T = (128, 25600, 2048, 51200, 3072 * 312e12, 502e15)


def _megatron_case() -> Case:
    layers, h, s, vocab, peak, aggregate = _MEGATRON_1T
    per_token = 96 * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * layers * h))
    return Case((aggregate / per_token, 1008e9, layers, h, s, peak),
                "Megatron-LM's 1T run: 502 PFLOP/s on 3,072 A100s")


def _hfu_cases() -> list[Case]:
    g = torch.Generator().manual_seed(10)
    cases = []
    for _ in range(3):
        layers, heads = (int(v) for v in torch.randint(4, 49, (2,), generator=g))
        hidden, seq_len = heads * 128, 2 ** int(torch.randint(9, 14, (1,), generator=g))
        n_params = 12 * layers * hidden**2  # a decoder's weights, about 12 d**2 per layer
        peak = 8 * 989e12 * float(torch.rand(1, generator=g)) + 1e14
        share = 0.2 + 0.4 * float(torch.rand(1, generator=g))  # the HFU it should come to, about
        cases.append(Case((share * peak / (8 * n_params), n_params, layers, hidden, seq_len, peak), "random"))
    cases.append(_megatron_case())
    cases.append(Case((1.0e5, 125e6, 12, 768, 32768, 989e12), "long sequences: attention > 8N"))
    return cases


def _hfu_with(tokens_per_second: float, n_params: float, layers: int, hidden: int, seq_len: int,
              peak_flops: float, passes: int = 4, flops_per_term: int = 2, attention: bool = True) -> float:
    """HFU with one thing done wrong: the forward passes' worth counted (4 with recomputation), FLOPs per
    term, attention."""
    per_token = flops_per_term * passes * (n_params + (2 * layers * hidden * seq_len if attention else 0))
    return tokens_per_second * per_token / peak_flops


hardware_flops_utilisation = Exercise(
    "hardware_flops_utilisation",
    "The hardware FLOPs utilisation of a run that recomputes every block's forward pass in its backward "
    "pass: tokens/s x the FLOPs executed per token / peak FLOP/s.",
    _utilisation, _hfu_cases,
    misconceptions=(
        Misconception("the model's FLOPs", "count 6 N + 12 L d T, the model FLOPs: that is the MFU; "
                      "recomputation executes each block's forward once more, 2 N + 4 L d T",
                      lambda *run: _hfu_with(*run, passes=3)),
        Misconception("recomputed the backward too", "count the whole step twice: recomputation repeats "
                      "the forward pass (a third of the step), not the backward",
                      lambda *run: _hfu_with(*run, passes=6)),
        Misconception("FLOPs for MACs", "count one operation per multiply-add, 4 N + 8 L d T, instead of "
                      "two (a multiply and an add)", lambda *run: _hfu_with(*run, flops_per_term=1)),
        Misconception("forgot attention", "count only 8 N; the attention products Q K^T and A V add "
                      "16 L d T per token with recomputation, which grows with the sequence length",
                      lambda *run: _hfu_with(*run, attention=False)),
        Misconception("percent for a fraction", "give the HFU in percent (52) where a fraction "
                      "(0.52) is asked", lambda *run: 100 * _utilisation(*run)),
    ),
    rtol=1e-6,
)

# --------------------------------------------------------------------------------------------
# Prediction: the time of one STREAM triad
# --------------------------------------------------------------------------------------------

#: Elements of each of the triad's three float32 arrays: 64 MiB each, far beyond any cache here.
_TRIAD_ELEMENTS = 2**24


def _triad_time() -> dict[str, float]:
    """One triad a = b + s c over three float32 arrays of 2**24 elements, one thread: the fastest of 20 runs, in ms."""
    working_set = 3 * _TRIAD_ELEMENTS * 4
    (result,) = stream.measure_bandwidth("triad", working_sets=[working_set], repeats=20, threads=1)
    return {"triad, one thread": result.seconds * 1e3}


triad_time = Prediction(
    "triad_time",
    "The milliseconds of one STREAM triad over three float32 arrays of 2**24 elements, on one thread.",
    _triad_time, unit="ms", rel_tol=0.5,
    misconceptions=(
        (8.0, "count bits instead of bytes: a float32 element is 4 bytes, not 32"),
        (1 / 3, "count only the array written, a; the triad also reads b and c: 3 arrays"),
        (1e-3, "give seconds where milliseconds were asked"),
    ),
)
