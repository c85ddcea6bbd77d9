"""Numeric questions, used by every chapter: a learner's number checked within a tolerance against one the library computes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from course_lib.exercises.wrapping import wrap

__all__ = ["PHRASES", "Question"]

#: The feedback's words by language ("en", "nl"); ``{…}`` fields are filled in by ``feedback``.
PHRASES: dict[str, dict[str, str]] = {
    "en": {"unanswered": "Not answered yet. {question}",
           "not_a_number": "Your answer {answer!r} is not a number; give a number in {unit}.",
           "any_unit": "the asked unit", "right": "Correct: {shown}{unit}.",
           "wrong": "Not quite: {shown}{unit} is too {direction}.{because} Hint: {hint}",
           "high": "high", "low": "low", "because": " This is what you get if you {why}."},
    "nl": {"unanswered": "Nog niet beantwoord. {question}",
           "not_a_number": "Je antwoord {answer!r} is geen getal; geef een getal in {unit}.",
           "any_unit": "de gevraagde eenheid", "right": "Goed: {shown}{unit}.",
           "wrong": "Nog niet: {shown}{unit} is {direction}.{because} Tip: {hint}",
           "high": "te hoog", "low": "te laag", "because": " Dat krijg je als je {why}."},
}


@dataclass
class Question:
    """A question whose answer is a number, checked within a relative tolerance, with a hint.

    ``misconceptions`` pairs a recorded wrong answer with the reasoning that produces it; an answer
    within ``rel_tol`` of one is told that reasoning. ``language`` picks the feedback's words.

    Used by the library's other modules.
    """

    question: str
    solution: Callable[[], float]
    unit: str = ""
    rel_tol: float = 0.02
    hint: str = ""
    misconceptions: tuple[tuple[float, str], ...] = ()
    language: str = "en"

    def __post_init__(self) -> None:
        if self.language not in PHRASES:
            raise ValueError(f"language must be one of {sorted(PHRASES)}, got {self.language!r}")

    def misconception(self, answer: float) -> str | None:
        """The reasoning that produces ``answer``, if it is one of the recorded wrong answers."""
        for wrong, why in self.misconceptions:
            if math.isclose(answer, wrong, rel_tol=self.rel_tol):
                return why
        return None

    def shown(self, value: float) -> str:
        """``value`` as the feedback writes it: six significant digits, in the question's language."""
        return f"{value:.6g}".replace(".", ",") if self.language == "nl" else f"{value:,.6g}"

    def feedback(self, answer: float | None) -> tuple[bool, str]:
        """Whether ``answer`` is right, and the feedback to show (None means not answered yet)."""
        say = PHRASES[self.language]
        if answer is None:
            return False, say["unanswered"].format(question=self.question)
        try:
            value = float(answer)
        except (TypeError, ValueError):
            return False, say["not_a_number"].format(answer=answer, unit=self.unit or say["any_unit"])
        expected = self.solution()
        unit = f" {self.unit}" if self.unit else ""
        shown = self.shown(value)
        if math.isclose(value, expected, rel_tol=self.rel_tol):
            return True, say["right"].format(shown=shown, unit=unit)
        why = self.misconception(value)
        because = say["because"].format(why=why) if why is not None else ""
        direction = say["high"] if value > expected else say["low"]
        return False, say["wrong"].format(shown=shown, unit=unit, direction=direction,
                                          because=because, hint=self.hint)

    def check(self, answer: float | None) -> None:
        """Print the feedback on a learner's answer, wrapped at 88 characters."""
        print(wrap(self.feedback(answer)[1]))

    __call__ = check
