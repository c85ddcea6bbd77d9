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
# Exercise: the model FLOPs utilisation of a run
# --------------------------------------------------------------------------------------------


def _utilisation(tokens_per_second: float, n_params: float, layers: int, hidden: int, seq_len: int,
         peak_flops: float) -> float:
    """The reference: the library's MFU of a run of ``tokens_per_second`` (PaLM's 6 N + 12 L d T per token)."""
    per_token = mfu.model_flops_per_token(n_params, layers, hidden, seq_len)
    run = mfu.Utilisation(tokens=1, seconds=1 / tokens_per_second, model_flops_per_token=per_token,
                                  hardware_flops_per_token=per_token, peak=peak_flops)
    return run.mfu


def _mfu_cases() -> list[Case]:
    g = torch.Generator().manual_seed(10)
    cases = []
    for _ in range(3):
        layers, heads = (int(v) for v in torch.randint(4, 49, (2,), generator=g))
        hidden, seq_len = heads * 128, 2 ** int(torch.randint(9, 14, (1,), generator=g))
        n_params = 12 * layers * hidden**2  # a decoder's weights, about 12 d**2 per layer
        peak = 8 * 989e12 * float(torch.rand(1, generator=g)) + 1e14
        share = 0.2 + 0.4 * float(torch.rand(1, generator=g))  # the MFU it should come to, about
        cases.append(Case((share * peak / (6 * n_params), n_params, layers, hidden, seq_len, peak), "random"))
    # PaLM 540B (Appendix B): 238.3K tokens/s on 6,144 TPU v4 chips of 275 TFLOP/s; H Q = 48 x 256
    cases.append(Case((238.3e3, 540e9, 118, 48 * 256, 2048, 6144 * 275e12), "PaLM 540B"))
    cases.append(Case((1.0e5, 125e6, 12, 768, 32768, 989e12), "long sequences: attention > 6N"))
    return cases


def _mfu_with(tokens_per_second: float, n_params: float, layers: int, hidden: int, seq_len: int,
              peak_flops: float, passes: int = 3, flops_per_term: int = 2, attention: bool = True) -> float:
    """MFU with one thing done wrong: the passes counted (3 with backward), FLOPs per term, attention."""
    per_token = flops_per_term * passes * (n_params + (2 * layers * hidden * seq_len if attention else 0))
    return tokens_per_second * per_token / peak_flops


model_flops_utilisation = Exercise(
    "model_flops_utilisation",
    "The model FLOPs utilisation of a run: tokens/s x (6 N + 12 L d T) / peak FLOP/s.",
    _utilisation, _mfu_cases,
    misconceptions=(
        Misconception("forgot the backward pass", "count the forward pass only, 2 N + 4 L d T per token; "
                      "the backward pass costs twice the forward, so training is 6 N + 12 L d T",
                      lambda *run: _mfu_with(*run, passes=1)),
        Misconception("FLOPs for MACs", "count one operation per multiply-add, 3 N + 6 L d T, instead of "
                      "two (a multiply and an add)", lambda *run: _mfu_with(*run, flops_per_term=1)),
        Misconception("forgot attention", "count only 6 N; the attention products Q K^T and A V add "
                      "12 L d T per token, which grows with the sequence length",
                      lambda *run: _mfu_with(*run, attention=False)),
        Misconception("percent for a fraction", "give the MFU in percent (43) where a fraction "
                      "(0.43) is asked", lambda *run: 100 * _utilisation(*run)),
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
