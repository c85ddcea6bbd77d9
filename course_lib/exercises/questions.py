"""Numeric questions, used by every chapter: a learner's number checked within a tolerance against one the library computes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

__all__ = ["Question"]


@dataclass
class Question:
    """A question whose answer is a number, checked within a relative tolerance, with a hint.

    Used by the library's other modules.
    """

    question: str
    solution: Callable[[], float]
    unit: str = ""
    rel_tol: float = 0.02
    hint: str = ""
    misconceptions: tuple[tuple[float, str], ...] = ()

    def misconception(self, answer: float) -> str | None:
        """The reasoning that produces ``answer``, if it is one of the recorded wrong answers."""
        for wrong, why in self.misconceptions:
            if math.isclose(answer, wrong, rel_tol=self.rel_tol):
                return why
        return None

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
        why = self.misconception(value)
        because = f" This is what you get if you {why}." if why is not None else ""
        return False, f"Not quite: {value:,.6g}{unit} is too {direction}.{because} Hint: {self.hint}"

    def check(self, answer: float | None) -> None:
        """Print the feedback on a learner's answer."""
        print(self.feedback(answer)[1])

    __call__ = check
