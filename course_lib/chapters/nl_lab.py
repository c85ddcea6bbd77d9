"""The Dutch edition (*Kwantisatie: minder bits per getal*): its lab, chapter 4's exercises and prediction in Dutch.

The notebook imports this module as ``lab``. Each item is chapter 4's (:mod:`course_lib.chapters.ch04_lab`)
with the same reference, hidden cases, wrong implementations and measurement; only the words differ:
the prompt, the names of the cases and misconceptions, and the feedback, all in Dutch.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from course_lib.chapters import ch04_lab
from course_lib.exercises.checker import Case, Exercise, Misconception


def _dutch_cases(exercise: Exercise, labels: dict[str, str]) -> Callable[[], list[Case]]:
    """The exercise's hidden cases with their labels in Dutch."""
    def cases() -> list[Case]:
        found = exercise.cases() if callable(exercise.cases) else list(exercise.cases)
        return [dataclasses.replace(case, label=labels[case.label]) for case in found]
    return cases


def _in_dutch(exercise: Exercise, prompt: str, labels: dict[str, str],
              misconceptions: dict[str, tuple[str, str]]) -> Exercise:
    """``exercise`` with a Dutch prompt, case labels and misconceptions (name: (Dutch name, explain))."""
    known = tuple(Misconception(*misconceptions[m.name], m.wrong) for m in exercise.misconceptions)
    return dataclasses.replace(exercise, prompt=prompt, cases=_dutch_cases(exercise, labels),
                               misconceptions=known, language="nl")


absmax_int8 = _in_dutch(
    ch04_lab.absmax_int8,
    "Kwantiseer een blok naar INT8 met één absmax-schaal: geef (codes als int8, schaal) terug.",
    {"random": "willekeurig", "π in a block": "π in een blok", "ties at .5": "precies op ,5",
     "all zeros": "alleen nullen"},
    {"round half away": ("weg van nul afronden", "bij precies ,5 van nul af rondt in plaats van naar "
                         "het even getal"),
     "truncation": ("afkappen", "omzet met .to(torch.int8), dat naar nul toe afkapt in plaats van "
                    "afrondt")},
)

bf16_bits = _in_dutch(
    ch04_lab.bf16_bits,
    "Rond FP32-waarden af naar BF16, naar het dichtstbijzijnde getal en bij gelijke afstand naar even, "
    "op hun bits: geef de 16-bits patronen terug als gehele getallen 0..65535, een NaN als NaN.",
    {"random": "willekeurig", "a 3 x 5 matrix": "een matrix van 3 x 5",
     "ties: the low 16 bits exactly 0x8000": "gelijke afstand: de lage 16 bits precies 0x8000",
     "the largest FP32 values": "de grootste FP32-waarden",
     "zeros and subnormals": "nullen en subnormale getallen",
     "NaN (one with its payload in the low bits), infinities and a tie":
         "NaN (één met zijn inhoud in de lage bits), oneindig en een gelijke afstand"},
    {"truncation": ("afkappen", "de bovenste 16 bits van FP32 houdt (bits >> 16): afkappen in plaats "
                    "van afronden"),
     "round half away": ("weg van nul afronden", "0x8000 optelt voor de verschuiving, zodat gelijke "
                         "afstanden van nul af gaan in plaats van naar de even buur"),
     "NaN rounded like a number": ("NaN afgerond als een getal", "de bits van een NaN afrondt als die "
                                   "van een getal: een NaN met zijn inhoud in de lage 16 bits loopt "
                                   "over naar oneindig (of verder)")},
)

_PARTS = {"codes": "codes", "scales": "schalen", "header": "kop (header)"}


def _int4_file() -> dict[str, float]:
    """Chapter 4's measurement of the file, its parts named in Dutch."""
    return {_PARTS[name]: mb for name, mb in ch04_lab.int4_on_disk.measure().items()}


_EXPLAIN = (
    "bits telt in plaats van bytes (4,5 bits per waarde is 0,5625 byte)",
    "door 2**20 deelt (MiB) waar MB, 10**6 bytes, gevraagd was",
    "de 4-bits codes telt en de FP32-schalen vergeet, één per blok van 64 waarden",
    "elke 4-bits code een hele byte geeft in plaats van twee codes per byte in te pakken",
)

int4_op_schijf = dataclasses.replace(
    ch04_lab.int4_on_disk,
    name="int4_op_schijf",
    prompt="Een miljoen waarden als INT4-codes (twee per byte) met één FP32-schaal per blok van 64, "
           "opgeslagen met safetensors: hoeveel MB (10**6 bytes) is het bestand?",
    measure=_int4_file,
    misconceptions=tuple((factor, dutch) for (factor, _), dutch
                         in zip(ch04_lab.int4_on_disk.misconceptions, _EXPLAIN, strict=True)),
    language="nl",
)
