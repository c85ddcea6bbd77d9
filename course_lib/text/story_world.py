"""The world of the course's stories: its word tables, its characters, its dice and its dialogue.

Part of the story corpus that chapter 1 (*Pretraining objectives*) trains on.

The plots of :mod:`course_lib.text.story_troubles` and :mod:`course_lib.text.story_discoveries`
take every name, place and thing from the word tables in ``story_words.json`` (:data:`WORDS`),
their people from :func:`children` and :func:`adult`, and every random choice from a
:class:`Dice`, built only on ``Random.random()``, whose sequence Python keeps the same across
versions: the same seed writes the same stories on every machine.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random
from types import SimpleNamespace
from typing import Any

__all__ = [
    "WORDS",
    "Dice",
    "Person",
    "adult",
    "article",
    "children",
    "number_word",
    "opening",
    "say",
]

#: The data file of the word tables; its "rows" entry names the fields of each table's rows.
_WORDS_FILE = Path(__file__).with_name("story_words.json")


def _frozen(value: Any) -> Any:
    """JSON lists as tuples, all the way down: the tables cannot be changed by accident."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    return value


#: The word tables of ``story_words.json`` as attributes (``WORDS.girls``, ``WORDS.places``,
#: ...), their rows as tuples.
WORDS = SimpleNamespace(**_frozen(json.loads(_WORDS_FILE.read_text(encoding="utf-8"))["tables"]))


@dataclass(frozen=True)
class Person:
    """One character of a story: a name and the pronouns that agree with it.

    Chapter 1, *Pretraining objectives*.
    """

    name: str
    subj: str
    obj: str
    poss: str
    refl: str

    @property
    def Subj(self) -> str:  # noqa: N802 - capitalised form for the start of a sentence
        """Capitalised subject pronoun."""
        return self.subj.capitalize()

    @property
    def Poss(self) -> str:  # noqa: N802
        """Capitalised possessive pronoun."""
        return self.poss.capitalize()


class Dice:
    """Random choices built only on ``Random.random()``, whose sequence Python keeps stable.

    Chapter 1, *Pretraining objectives*.
    """

    def __init__(self, seed: int) -> None:
        self._rng = Random(seed)

    def uniform(self) -> float:
        return self._rng.random()

    def pick(self, seq: Sequence[Any]) -> Any:
        return seq[int(self._rng.random() * len(seq))]

    def chance(self, p: float) -> bool:
        return self._rng.random() < p

    def between(self, lo: int, hi: int) -> int:
        return lo + int(self._rng.random() * (hi - lo + 1))

    def distinct(self, seq: Sequence[Any], k: int) -> list[Any]:
        pool = list(seq)
        return [pool.pop(int(self._rng.random() * len(pool))) for _ in range(k)]


def _person(name: str, gender: str) -> Person:
    return Person(name, *WORDS.pronouns[gender])


def children(d: Dice, k: int) -> list[Person]:
    """Pick ``k`` children with distinct names.

    Chapter 1, *Pretraining objectives*.
    """
    people: list[Person] = []
    names: set[str] = set()
    while len(people) < k:
        if d.chance(0.5):
            name, gender = d.pick(WORDS.girls), "she"
        else:
            name, gender = d.pick(WORDS.boys), "he"
        if name not in names:
            names.add(name)
            people.append(_person(name, gender))
    return people


def adult(d: Dice, pool: Sequence[tuple[str, str]] = WORDS.adults) -> Person:
    """Pick a grown-up from ``pool`` (name, pronoun): family and neighbours unless told otherwise.

    Chapter 1, *Pretraining objectives*.
    """
    name, gender = d.pick(pool)
    return _person(name, gender)


def opening(d: Dice) -> str:
    """The words a story opens with: "One day", "Last summer", "On Tuesday", ...

    Chapter 1, *Pretraining objectives*.
    """
    if d.chance(0.2):
        return f"{d.pick(WORDS.day_openings)} {d.pick(WORDS.ordinal_days)}"
    return d.pick(WORDS.openings)


def number_word(n: int) -> str:
    """``n`` (0 to 12) written as a word.

    Chapter 1, *Pretraining objectives*.
    """
    return WORDS.numbers[n]


def article(word: str) -> str:
    """The indefinite article for ``word``: "an" before a vowel, else "a".

    Chapter 1, *Pretraining objectives*.
    """
    return "an" if word[0] in "aeiou" else "a"


def say(d: Dice, who: Person, line: str) -> str:
    """A line of dialogue in one of three shapes; ``line`` ends with punctuation.

    Chapter 1, *Pretraining objectives*.
    """
    verb = "asked" if line.endswith("?") else d.pick(("said", "said", "shouted", "whispered",
                                                      "called", "replied"))
    shape = d.uniform()
    if shape < 0.5:
        return f'{who.name} {verb}, "{line}"'
    if shape < 0.9:
        inner = line[:-1] + ("," if line.endswith(".") else line[-1])
        return f'"{inner}" {verb} {who.name}.'
    return f'"{line}"'
