"""Chapter 3, *Number formats*: the chapter's exercises."""

from __future__ import annotations

from types import SimpleNamespace

from course_lib.exercises.questions import Question
from course_lib.numbers import formats


def _smallest_scale_exponent(gradient: float, fmt: formats.FloatFormat) -> int:
    k = 0
    while gradient * 2.0**k < fmt.min_normal:
        k += 1
    return k


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "What is the smallest positive number FP16 can store (its smallest subnormal)?",
        lambda: formats.FP16.min_subnormal,
        rel_tol=1e-3,
        hint="2**(emin - mantissa_bits): FP16's emin is 1 - 15 = -14 and it stores 10 mantissa bits.",
    ),
    q2=Question(
        "What is the gap between 256 and the next larger number BF16 can store?",
        lambda: formats.ulp(256.0, formats.BF16),
        rel_tol=1e-9,
        hint="256 = 2**8 and BF16 keeps 7 mantissa bits, so neighbours in [256, 512) are 2**(8 - 7) apart.",
    ),
    q3=Question(
        "What is the largest finite value of the OCP FP8 format E4M3 (E4M3FN: bias 7, no infinity)?",
        lambda: formats.E4M3.max,
        rel_tol=0,
        hint="the all-ones exponent still holds numbers (only S.1111.111 is NaN), so the max is 1.110 x 2**(15 - 7).",
    ),
    q4=Question(
        "A gradient of 1e-9 is multiplied by a loss scale of 2**k before it is stored in FP16. What is the "
        "smallest k that makes it a normal FP16 number (at least the smallest normal, 2**-14)?",
        lambda: _smallest_scale_exponent(1e-9, formats.FP16),
        rel_tol=0,
        hint="1e-9 x 2**k >= 2**-14 = 6.1e-5 means 2**k >= 61,035; compare with GradScaler's start scale.",
    ),
)
