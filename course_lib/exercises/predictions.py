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
        "not_finite": "Your prediction {answer} is not a number a measurement can give: give a "
                      "finite number of 0 or more.",
        "negative": "Your prediction {answer} is negative, and what is measured here never is: "
                    "give a number of 0 or more.",
        "comma": "Your prediction {answer!r} is a tuple of numbers: Python reads a comma as the "
                 "separator between two values. Write the decimal point as a point: 0.5, not 0,5.",
        "components": "Give one number for each of {parts}, as a dict: the prompt asks for each.",
        "part_far": "{part}: your {value}{unit} is {ratio}x the measured {measured}{unit}.",
        "parts_wrong": "Not quite: your total {value}{unit} is within {tol} of the measured "
                       "{measured}{unit}, but not every part is:",
        "in_bytes": "give bytes where {unit} ({size} bytes) were asked",
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
        "not_finite": "Je voorspelling {answer} is geen getal dat een meting kan geven: geef een "
                      "eindig getal van 0 of meer.",
        "negative": "Je voorspelling {answer} is negatief, en wat hier gemeten wordt nooit: geef "
                    "een getal van 0 of meer.",
        "comma": "Je voorspelling {answer!r} is een tuple van getallen: Python leest een komma "
                 "als scheiding tussen twee waarden. Schrijf het decimaalteken als punt: 0.5, "
                 "niet 0,5.",
        "components": "Geef één getal voor elk van {parts}, als dict: de opgave vraagt elk.",
        "part_far": "{part}: je {value}{unit} is {ratio}x de gemeten {measured}{unit}.",
        "parts_wrong": "Nog niet: je totaal {value}{unit} ligt binnen {tol} van de gemeten "
                       "{measured}{unit}, maar niet elk deel:",
        "in_bytes": "bytes geeft waar {unit} ({size} bytes) gevraagd was",
    },
}

#: Units of bytes, each with its size: a prediction in bytes where one was asked is off by it.
_BYTE_UNITS = {"KB": (1e3, "10**3"), "MB": (1e6, "10**6"), "GB": (1e9, "10**9"),
               "KiB": (2.0**10, "2**10"), "MiB": (2.0**20, "2**20"), "GiB": (2.0**30, "2**30")}


@dataclass
class Prediction:
    """Predict, measure, grade: a learner's number (or dict of components) against what ``measure`` returns.

    ``misconceptions`` pairs a factor between prediction and measurement with what the learner
    did: ``(8.0, "count bits instead of bytes")``, ``(2**30 / 1e9, "read GiB as GB")``; bytes
    where a unit of bytes (MB, GiB, ...) was asked are named without being listed. With
    ``components``, the prompt asks for each component: the answer is a dict of them all, and
    each is graded, not only their total.

    Used by the library's other modules.
    """

    name: str
    prompt: str
    measure: Callable[[], dict[str, float]]
    unit: str = ""
    rel_tol: float = 0.1
    misconceptions: tuple[tuple[float, str], ...] = ()
    language: str = "en"
    components: bool = False

    def check(self, answer: float | dict[str, float] | None) -> Feedback:
        """Measure, compare ``answer`` with the measurement, and return feedback with a component table."""
        say = PHRASES[self.language]
        if answer is None:
            return Feedback(self.name, False, say["not_answered"])
        refused = self._refused(answer)
        if refused is not None:
            return Feedback(self.name, False, refused)
        parts = {k: float(v) for k, v in answer.items()} if isinstance(answer, dict) else {}
        value = float(sum(parts.values())) if isinstance(answer, dict) else float(answer)
        measured = self.measure()
        if self.components and set(parts) != set(measured):
            return Feedback(self.name, False, say["components"].format(parts=", ".join(measured)))
        total = float(sum(measured.values()))
        ratio = value / total if total else math.inf
        unit = f" {self.unit}" if self.unit else ""
        right = self._within(value, total)
        far = [k for k in measured if self.components
               and not self._within(parts[k], measured[k])]
        passed = right and not far
        key = "close" if passed else "parts_wrong" if right else "far"
        lines = [say[key].format(value=self._number(value, ",.6g"), unit=unit, measured=self._number(total, ",.6g"),
                                 tol=self._number(self.rel_tol * 100, ".3g") + "%", ratio=self._number(ratio, ".3g"))]
        for k in far:  # each part off, where the prompt asks for each
            off = self._number(parts[k] / measured[k], ".3g") if measured[k] else "inf"
            lines.append("  " + say["part_far"].format(
                part=k, value=self._number(parts[k], ",.6g"), unit=unit,
                measured=self._number(measured[k], ",.6g"), ratio=off))
        why = None if right else self._misconception(ratio)
        for name, mine in parts.items():  # a component off by a known factor, when the total is not
            if why is None and not passed and measured.get(name):
                why = self._misconception(mine / measured[name])
        if why is not None:
            lines.append(say["misconception"].format(name=f"x{why[0]:.4g}", explain=why[1]))
        lines.append(str(self.table(parts, measured, value)))
        return Feedback(self.name, passed, "\n".join(lines), misconception=why and why[1])

    def _within(self, mine: float, real: float) -> bool:
        """Within ``rel_tol`` of the measurement, as the prompt says it: relative to what was
        measured (``math.isclose`` is relative to the larger, and accepts 2x at 50 %)."""
        return abs(mine - real) <= self.rel_tol * abs(real)

    def _number(self, x: float, spec: str) -> str:
        """``x`` formatted with ``spec``, written the way the exercise's language writes numbers."""
        return localise_number(format(x, spec), self.language)

    def _refused(self, answer: object) -> str | None:
        """Why ``answer`` cannot be graded (not a number, NaN, negative, a tuple), or None."""
        say = PHRASES[self.language]
        if isinstance(answer, tuple) and answer and all(isinstance(v, int) for v in answer):
            return say["comma"].format(answer=answer)  # 0,5625 in Python is (0, 5625)
        named = answer.items() if isinstance(answer, dict) else [(None, answer)]
        for part, given in named:
            shown = repr(given) if part is None else f"{part!r}: {given!r}"
            if isinstance(given, tuple) and given and all(isinstance(v, int) for v in given):
                return say["comma"].format(answer=given)
            try:
                number = float(given)
            except (TypeError, ValueError):
                return say["not_a_number"].format(answer=answer)
            if not math.isfinite(number):
                return say["not_finite"].format(answer=shown)
            if number < 0:
                return say["negative"].format(answer=shown)
        return None

    def _misconception(self, ratio: float) -> tuple[float, str] | None:
        for factor, explain in self.misconceptions:
            if math.isclose(ratio, factor, rel_tol=self.rel_tol / 2):
                return factor, explain
        if self.unit in _BYTE_UNITS:  # bytes where MB, GiB, ... were asked
            size, written = _BYTE_UNITS[self.unit]
            if math.isclose(ratio, size, rel_tol=self.rel_tol / 2):
                return size, PHRASES[self.language]["in_bytes"].format(unit=self.unit, size=written)
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
