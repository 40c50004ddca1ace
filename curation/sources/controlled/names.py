"""Invented names for the controlled documents: syllable words, deterministic, unique across a corpus.

A word is 2 or 3 syllables (onset + vowel, an optional coda on the last one), capitalised: ``Velmora``,
``Drakeno``, ``Tirsk``. :class:`NameBook` hands out words so that within one generated corpus

* no word is handed out twice, nor a part of another one ("Zeja" and "Zejatou"), compared accent- and case-folded
  (:func:`curation.themes.mentions.fold`), so an invented name occurs in a document only where it was placed;
* no word is a word of the templates' own text (:func:`vocabulary` of the fixed prose, choices and first names),
  nor a part of one ("Kilo" of "kilometres"), so an entity word can never be mistaken for ordinary prose, nor prose
  for an entity;
* no word is one of :data:`RESERVED_NAMES` (the entities of ``data/sample``; a test keeps the list complete);
* no word begins like an entity word (:data:`STEM_LETTERS` letters): an invented landmark such as "Velmoran
  Bridge" next to the city "Velmora" would be a demonym-like leak for a subword tokenizer.

Which words come out depends only on the ``random.Random`` handed in (seeded from a string, which Python hashes
with SHA-512: the same on every machine and run) and the order of the requests.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

from curation.themes.mentions import fold

ONSETS = (
    "b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "r", "s", "t", "tr", "v", "z",
    "st", "sk", "th", "c", "j",
)  # fmt: skip
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou")
CODAS = ("", "", "", "n", "r", "l", "s", "k", "th", "nd", "rk", "sk", "m")
ENDINGS = ("a", "o", "en", "ia", "ek", "is", "an", "ov", "ette", "au", "ine", "ar")
STEM_LETTERS = 4
MAX_LETTERS = 9  # longer inventions read badly ("Kradrouskou")
MAX_ATTEMPTS = 10_000

RESERVED_NAMES = frozenset(
    {
        *("Arlenmouth", "Corvessa", "Drevnik", "Pellbridge", "Salvenne", "Torrisk"),
        *("Brackwater", "Rovers", "Dynamo", "Korvel", "Eisenau", "Olimpia", "Vescara", "Redcliffe", "Albion"),
        *("Sporting", "Almadra"),
        *("Caldrany", "Holmsvar", "Istrena", "Ostherm", "Pordane", "Quenlow", "Ruvenga", "Tarnwick", "Velmora"),
        *("Vaurenne", "Deportivo", "Sarrena", "Ethnikos", "Kalydra", "Gorsefield", "Harriers", "Inverallan"),
        *("Thistle", "Metalist", "Drasnov", "Radnik", "Velebor", "Drechtwijk", "Vestvik"),
    }
)
"""The entity names of ``data/sample`` word by word (``tests/sources/test_controlled.py`` checks it covers every
title of the sample, so a grown sample fails the test until its names are added)."""

_WORD = re.compile(r"[^\W\d_]+")


def name_words(text: str) -> list[str]:
    """The words (runs of letters) of ``text``."""
    return _WORD.findall(text)


def vocabulary(texts: Iterable[str]) -> frozenset[str]:
    """The folded words of ``texts``: what an invented word must not be."""
    return frozenset(fold(word) for text in texts for word in name_words(text))


class NameBook:
    """Hands out invented words for one corpus (rules in the module docstring)."""

    def __init__(self, forbidden: Iterable[str] = ()) -> None:
        self._used: set[str] = set()
        self._parts: set[str] = set()  # every substring of a word handed out
        self._forbidden = {fold(word) for word in forbidden} | {fold(word) for word in RESERVED_NAMES}
        self._forbidden_text = "\0".join(sorted(self._forbidden))
        self._entity_stems = {self._stem(word) for word in RESERVED_NAMES}
        self._stems_used: set[str] = set()

    @staticmethod
    def _stem(word: str) -> str:
        return fold(word)[:STEM_LETTERS]

    def word(self, rng: random.Random, entity: bool = False) -> str:
        """A new word; ``entity``: a word of an entity's name (its stem is then reserved too)."""
        for _ in range(MAX_ATTEMPTS):
            candidate = invent_word(rng)
            key, stem = fold(candidate), self._stem(candidate)
            if (
                len(key) > MAX_LETTERS
                or key in self._parts
                or key in self._forbidden_text
                or stem in self._entity_stems
            ):
                continue
            parts = _substrings(key)
            if parts & self._used:
                continue
            if entity and stem in self._stems_used:
                continue
            self._used.add(key)
            self._parts |= parts
            self._stems_used.add(stem)
            if entity:
                self._entity_stems.add(stem)
            return candidate
        raise RuntimeError(f"no new invented word after {MAX_ATTEMPTS} attempts ({len(self._used)} words in use)")


def _substrings(word: str) -> set[str]:
    """Every substring of ``word`` (``word`` included)."""
    return {word[start:end] for start in range(len(word)) for end in range(start + 1, len(word) + 1)}


def invent_word(rng: random.Random) -> str:
    """One capitalised word of 2 or 3 syllables, sometimes with an ending (``Velmora``, ``Tirsken``)."""
    syllables = rng.choice((2, 2, 3))
    parts = [rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(syllables)]
    if rng.random() < 0.5:
        parts[-1] += rng.choice(CODAS)
    else:
        parts[-1] = parts[-1].rstrip("aeiou") + rng.choice(ENDINGS) if syllables == 2 else parts[-1]
    word = "".join(parts)
    return word[:1].upper() + word[1:]
