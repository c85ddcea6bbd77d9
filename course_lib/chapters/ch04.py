"""Chapter 4, *Quantizing π*: the chapter's exercises."""

from __future__ import annotations

import math
from types import SimpleNamespace

from course_lib.exercises.questions import Question
from course_lib.numbers import formats

#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "What value does FP8 E5M2 store for π (round to nearest, ties to even)?",
        lambda: formats.round_to_format(math.pi, "e5m2"),
        rel_tol=0,
        hint="E5M2 keeps 2 mantissa bits: between 2 and 4 its values are 2, 2.5, 3 and 3.5; pick the nearest to π.",
    ),
    q2=Question(
        "How far apart are neighbouring BF16 numbers between 2 and 4 (the ULP of π in BF16)?",
        lambda: formats.ulp(math.pi, "bf16"),
        rel_tol=0,
        hint="between 2 and 4 the exponent is 1, and BF16 has 7 mantissa bits: the spacing is 2**(1 - 7).",
    ),
    q3=Question(
        "A block of weights has absolute maximum 5.0. With symmetric INT8 (scale = 5.0 / 127, code = round(x / scale)), "
        "what value does π come back as after dequantizing (code x scale)?",
        lambda: formats.decode(formats.encode(math.pi / (5.0 / 127), "int8"), "int8") * (5.0 / 127),
        rel_tol=1e-4,
        hint="π / (5/127) = 79.8 rounds to the code 80; multiply it back by the scale.",
    ),
    q4=Question(
        "How many bits per value does INT4 with one FP16 scale per block of 128 values cost?",
        lambda: formats.INT4.total_bits + formats.FP16.total_bits / 128,
        unit="bits",
        rel_tol=0,
        hint="4 bits per code plus the 16 bits of the block's scale shared by its 128 values.",
    ),
)
