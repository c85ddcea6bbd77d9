"""The course's story generator: short generated English stories, the same bytes everywhere.

Chapter 1 ("Pretraining objectives") trains on them. Each story has consistent characters,
objects and places and simple cause and effect ("Mia dropped the cup, so the cup broke."), in the
spirit of TinyStories (Eldan & Li 2023). A story is one of eighteen plots
(:mod:`course_lib.text.story_troubles`, :mod:`course_lib.text.story_discoveries`) told with the
words, characters and dice of :mod:`course_lib.text.story_world`. The generator is pure Python
and uses only ``random.Random(seed).random()``, whose sequence Python guarantees across versions,
so the same seed gives the same stories on every machine. :mod:`course_lib.text.data` splits them
into the course corpus.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from course_lib.text import story_discoveries as discover
from course_lib.text import story_troubles as trouble
from course_lib.text import story_world
from course_lib.text.story_world import WORDS, Dice

__all__ = [
    "CORPUS_VERSION",
    "DEFAULT_SEED",
    "N_STORIES",
    "corpus_sha256",
    "generate_stories",
    "generator_vocabulary",
]

#: Bump this whenever the generator changes its output; caches are keyed by it.
CORPUS_VERSION = "course-stories-v1"
#: Seed of the built-in corpus.
DEFAULT_SEED = 2024
#: Number of stories in the built-in corpus (about 2 MB of text).
N_STORIES = 6000

#: The plots in the order the dice index them: reordering them changes every story.
_PLOTS: tuple[Callable[[Dice], list[str]], ...] = (
    trouble.accident_story, trouble.lost_story, trouble.weather_story, discover.share_story,
    trouble.need_story, trouble.pet_story, discover.trip_story, discover.garden_story,
    trouble.bake_story, trouble.balloon_story, trouble.ball_story, trouble.turns_story,
    discover.job_story, discover.lesson_story, discover.season_story, discover.shop_story,
    discover.practice_story, discover.wild_story,
)


def _one_story(d: Dice) -> str:
    plot = d.pick(_PLOTS)
    sentences = plot(d)
    if d.chance(0.15) and sentences[-1] not in WORDS.endings:
        sentences.append(d.pick(WORDS.endings))
    return " ".join(sentences)


def generate_stories(n: int = N_STORIES, seed: int = DEFAULT_SEED) -> list[str]:
    """Generate ``n`` distinct short stories from ``seed``; same arguments, same stories, anywhere.

    Only ``random.Random(seed).random()`` is used (Python guarantees its sequence across
    versions), and duplicate stories are skipped, so the splits made from the list are disjoint.

    Chapter 1, *Pretraining objectives*.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}.")
    d = Dice(seed)
    seen: set[str] = set()
    stories: list[str] = []
    while len(stories) < n:
        story = _one_story(d)
        if story not in seen:
            seen.add(story)
            stories.append(story)
    return stories


def corpus_sha256(seed: int = DEFAULT_SEED, n: int = N_STORIES) -> str:
    """The SHA-256 of the generated corpus (stories joined by blank lines), to pin its bytes.

    Chapter 1, *Pretraining objectives*.
    """
    text = "\n\n".join(generate_stories(n, seed))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _literals(module: ModuleType, names: Callable[[str], bool]) -> list[str]:
    """The string literals (docstrings excluded) of the module's functions that ``names`` picks."""
    strings: list[str] = []
    for node in ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and names(node.name):
            doc = ast.get_docstring(node, clean=False)
            strings += [c.value for c in ast.walk(node) if isinstance(c, ast.Constant)
                        and isinstance(c.value, str) and c.value != doc]
    return strings


def _strings(value: object) -> list[str]:
    """Every string inside nested tuples and dicts (the prices of the shops are numbers)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = tuple(value.values())
    return [s for v in value for s in _strings(v)] if isinstance(value, tuple) else []


def generator_vocabulary() -> frozenset[str]:
    """Every lower-cased word the story generator can write, read from its tables and its code.

    The words are collected from the word tables (``story_words.json``) and from the string
    literals of the plot functions and of ``say`` (docstrings excluded), not from generated
    text, so a test can use it to check that the corpus is made of words the generator was given.

    Chapter 1, *Pretraining objectives*.
    """
    strings = _strings(vars(WORDS))
    for module in (trouble, discover):
        strings += _literals(module, lambda name: name.endswith("_story"))
    strings += _literals(story_world, lambda name: name == "say")
    words: set[str] = set()
    for s in strings:
        s = re.sub(r"\{[^}]*\}", " ", s)
        words.update(w.lower() for w in _WORD_RE.findall(s))
    return frozenset(words)


_WORD_RE = re.compile(r"[A-Za-z]+")
