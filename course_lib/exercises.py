"""Exercises with checking functions: each compares a learner's answer with one the library computes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from course_lib import memory


@dataclass
class Exercise:
    """A question whose answer is a number, checked within a relative tolerance, with a hint."""

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


def _min_gpus_zero3_model_states(n_params: float, capacity: float) -> float:
    n = 1
    while memory.zero_model_state_bytes(n_params, n, 3) > capacity:
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
