"""Predict, measure, grade, in every chapter: the learner's number against what the cell measures on this machine.

A :class:`Prediction` measures the real thing (bytes per rank, peak memory, a step's time), grades
the learner's prediction within a stated tolerance, breaks the difference down by component, and
names a known misconception when prediction and measurement differ by its factor: bits for bytes
(x8), GB for GiB (x1.0737), FLOPs for MACs (x2).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from course_lib.base.tables import Table
from course_lib.exercises.checker import Feedback, show
from course_lib.exercises.wrapping import wrap
from course_lib.numbers.i18n import localise_number

__all__ = ["Prediction", "saved_bytes"]

PHRASES = {
    "en": {
        "predicted": "predicted", "measured": "measured", "ratio": "ratio", "total": "total",
        "close": "Right: your prediction {value}{unit} is within {tol} of the measured "
                 "{measured}{unit}.",
        "far": "Not quite: your prediction {value}{unit} is {ratio}x the measured "
               "{measured}{unit} (allowed: within {tol}).",
        "not_answered": "Not answered yet: write your prediction, then run this cell again.",
        "not_a_number": "Your prediction {answer!r} is not a number; give a number, or a dict of numbers.",
        "misconception": "Known misconception, {name}: this is what you get if you {explain}.",
    },
    "nl": {
        "predicted": "voorspeld", "measured": "gemeten", "ratio": "verhouding", "total": "totaal",
        "close": "Goed: je voorspelling {value}{unit} ligt binnen {tol} van de gemeten "
                 "{measured}{unit}.",
        "far": "Nog niet: je voorspelling {value}{unit} is {ratio}x de gemeten "
               "{measured}{unit} (toegestaan: binnen {tol}).",
        "not_answered": "Nog niet beantwoord: schrijf je voorspelling op en voer deze cel opnieuw uit.",
        "not_a_number": "Je voorspelling {answer!r} is geen getal; geef een getal, of een dict van getallen.",
        "misconception": "Bekende misvatting, {name}: dat krijg je als je {explain}.",
    },
}


@dataclass
class Prediction:
    """Predict, measure, grade: a learner's number (or dict of components) against what ``measure`` returns.

    ``misconceptions`` pairs a factor between prediction and measurement with what the learner
    did: ``(8.0, "count bits instead of bytes")``, ``(2**30 / 1e9, "read GiB as GB")``.

    Used by the library's other modules.
    """

    name: str
    prompt: str
    measure: Callable[[], dict[str, float]]
    unit: str = ""
    rel_tol: float = 0.1
    misconceptions: tuple[tuple[float, str], ...] = ()
    language: str = "en"

    def check(self, answer: float | dict[str, float] | None) -> Feedback:
        """Measure, compare ``answer`` with the measurement, and return feedback with a component table."""
        say = PHRASES[self.language]
        if answer is None:
            return Feedback(self.name, False, say["not_answered"])
        parts = answer if isinstance(answer, dict) else {}
        try:
            value = float(sum(parts.values())) if parts else float(answer)
        except (TypeError, ValueError):
            return Feedback(self.name, False, say["not_a_number"].format(answer=answer))
        measured = self.measure()
        total = float(sum(measured.values()))
        ratio = value / total if total else math.inf
        unit = f" {self.unit}" if self.unit else ""
        passed = math.isclose(value, total, rel_tol=self.rel_tol)
        key = "close" if passed else "far"
        lines = [say[key].format(value=self._number(value, ",.6g"), unit=unit, measured=self._number(total, ",.6g"),
                                 tol=self._number(self.rel_tol * 100, ".3g") + "%", ratio=self._number(ratio, ".3g"))]
        why = None if passed else self._misconception(ratio)
        for name, mine in parts.items():  # a component off by a known factor, when the total is not
            if why is None and not passed and measured.get(name):
                why = self._misconception(mine / measured[name])
        if why is not None:
            lines.append(say["misconception"].format(name=f"x{why[0]:.4g}", explain=why[1]))
        lines.append(str(self.table(parts, measured, value)))
        return Feedback(self.name, passed, "\n".join(lines), misconception=why and why[1])

    def _number(self, x: float, spec: str) -> str:
        """``x`` formatted with ``spec``, written the way the exercise's language writes numbers."""
        return localise_number(format(x, spec), self.language)

    def _misconception(self, ratio: float) -> tuple[float, str] | None:
        for factor, explain in self.misconceptions:
            if math.isclose(ratio, factor, rel_tol=self.rel_tol / 2):
                return factor, explain
        return None

    def table(self, parts: dict[str, float], measured: dict[str, float], value: float) -> Table:
        """The breakdown: each component's prediction (if given), measurement and their ratio."""
        say = PHRASES[self.language]

        def row(name: str, mine: float | None, real: float) -> list[str]:
            ratio = self._number(mine / real, ".3g") if mine is not None and real else "-"
            return [name, "-" if mine is None else self._number(mine, ",.6g"), self._number(real, ",.6g"), ratio]

        rows = [row(k, parts.get(k), v) for k, v in measured.items()]
        rows += [row(k, v, 0.0) for k, v in parts.items() if k not in measured]
        rows.append(row(say["total"], value, float(sum(measured.values()))))
        unit = f" ({self.unit})" if self.unit else ""
        headers = ["", say["predicted"] + unit, say["measured"] + unit, say["ratio"]]
        return Table(headers, rows)

    def __call__(self, answer: float | dict[str, float] | None, must_pass: bool = False) -> None:
        """Grade ``answer`` and display the feedback; ``must_pass`` (a worked solution's cell) raises if it fails."""
        feedback = self.check(answer)
        show(feedback)
        if must_pass and not feedback.passed:
            raise AssertionError(f"the worked prediction of {self.name} fails its "
                                 "grade:\n" + wrap(feedback.message))


def saved_bytes(tensors: dict[str, torch.Tensor]) -> dict[str, int]:
    """Save ``tensors`` with safetensors to a temporary file; its bytes by tensor, and the JSON header's.

    The parts add up to the file's size on disk, which is what is measured.

    Used by the library's other modules.
    """
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "measured.safetensors"
        save_file({name: t.contiguous() for name, t in tensors.items()}, str(path))
        size = path.stat().st_size
    parts = {name: t.numel() * t.element_size() for name, t in tensors.items()}
    parts["header"] = size - sum(parts.values())  # names, dtypes, shapes and offsets, as JSON
    return parts
