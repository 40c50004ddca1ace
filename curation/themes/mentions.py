"""The mentions of a theme in a text: its names' simple variants, finding them, and masking them.

Used by stage 3 (reformulation: the leak detector and the offline masking fallback), by the context-necessity labels
(``curation/necessity.py``: a query that names the theme needs its document), by the offline theme
(:mod:`curation.themes.naming`, which counts a head's mentions) and by the sources that must not leak a name.

Variants, :func:`theme_variants`: each name (theme and aliases), its article-less form
(``"The Beatles"`` -> ``"Beatles"``), its accent-folded form (``"São Paulo"`` -> ``"Sao Paulo"``),
the English inflections of each (:func:`inflections`) and the possessives of all of them (``X's``,
``X’s``, and ``X'``/``X’`` for names ending in ``s``: ``"Huguenots'"``). A name is dropped when it is
shorter than 3 characters or made only of ``STOP_WORDS`` (articles, pronouns and the generic
references a rewrite uses, such as ``"the city"``), so the detector never flags ``"the"`` or the
neutral reference that replaced the name.

Inflections, :func:`inflections` — the regular English plural of a name's last word, or its singular
when it looks plural, and nothing else (no stemming, no irregular plurals, no derived forms such as
``"Lyonnais"``), so that no two different words are merged. Only a last word made of letters and at
least 3 long is inflected (``"Super Bowl 50"``, ``"F.C."``, ``"McDonald's"`` are not):

* plural of a word that does not look plural: ``-s``, ``-x``, ``-z``, ``-ch``, ``-sh`` take ``-es``
  (``"Church"`` -> ``"Churches"``, ``"Bus"`` -> ``"Buses"``); a consonant + ``y`` takes ``-ies``
  (``"dynasty"`` -> ``"dynasties"``), and also ``-ys`` when capitalised, as proper names keep their
  spelling (``"Kennedy"`` -> ``"Kennedys"``); any other word takes ``-s`` (``"Huguenot"`` ->
  ``"Huguenots"``, ``"NFL"`` -> ``"NFLs"``);
* a word "looks plural" when it ends in ``s`` but not in ``ss``, ``us``, ``is``, ``as`` or ``os``
  (``"Glass"``, ``"Venus"``, ``"Paris"``, ``"Texas"``, ``"Carlos"`` are singular); its singular drops
  the ``s`` (``"Huguenots"`` -> ``"Huguenot"``), and also ``-es`` after ``ch``/``sh``/``x``/``z``/``ss``
  (``"Churches"`` -> ``"Church"``) and ``-ies`` becomes ``-y`` and ``-ie`` (``"Dynasties"`` ->
  ``"Dynasty"``, ``"Zombies"`` -> ``"Zombie"``) — but only a singular of at least 4 letters
  (``"Mars"``, ``"Ares"``, ``"Alps"``, ``"Days"`` get none: ``"Mar"``, ``"are"`` would match other
  words), and never for an all-capitals word (an acronym such as ``"ABS"``).

Known limit: a singular name ending in ``s`` that passes these tests gets a singular that is another
name (the surname ``"Williams"`` -> ``"William"``); the LLM theme names its own aliases, and a flagged
mention stays visible in the review queue.

Matching, :func:`find_mentions`: case- and accent-insensitive (both sides are NFKD-folded and
lower-cased; ``"Rhone"`` matches ``"Rhône"``), whole words only (no letter or digit may touch the
match: ``"Lyon"`` does not match inside ``"Lyonnais"``; derived forms are not simple variants),
whitespace inside a name matches any whitespace run, longest variant first, non-overlapping. A
possessive ending is part of the mention (``"Lyon's"``).

Masking, :func:`mask_mentions`: the deterministic non-LLM rewrite; every mention becomes a neutral reference
(``"the subject"``), possessives kept.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

MIN_VARIANT_LENGTH = 3


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (the word lists here and in :mod:`curation.themes.naming`)."""
    return frozenset(text.split())


STOP_WORDS = word_set(
    """
    a an the and or of in on at to for by with from as is was be it its it's he she him her his hers
    they them their theirs this that these those there here who whom which what where when
    one ones city town village capital country state region province island river lake sea mountain
    mountains range club team side company firm group band organisation organization university
    school party church government person man woman people subject document article place area
    """
)
"""Words a variant may not consist of only (compared accent-folded and lower-cased)."""

_WHITESPACE = re.compile(r"\s+")
_APOSTROPHES = ("'", "’")

# --- names and their variants ------------------------------------------------------------------


def clean_name(name: str) -> str:
    """``name`` with underscores as spaces and whitespace collapsed and stripped."""
    return _WHITESPACE.sub(" ", name.replace("_", " ")).strip()


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    """Lower-cased NFKD form of one character without combining marks (``"Ô"`` -> ``"o"``)."""
    decomposed = unicodedata.normalize("NFKD", char.lower())
    return "".join(part for part in decomposed if not unicodedata.combining(part))


def fold(text: str) -> str:
    """Accent-folded, lower-cased ``text`` (the matching key; may differ in length)."""
    return text.lower() if text.isascii() else "".join(_fold_char(char) for char in text)


def _fold_with_offsets(text: str) -> tuple[str, list[int]]:
    """``(folded, origin)``: ``origin[i]`` is the index in ``text`` of folded character ``i``.

    ``origin`` has one extra entry, ``len(text)``, so that ``origin[end]`` is valid.
    """
    if text.isascii():
        return text.lower(), list(range(len(text) + 1))
    pieces: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        folded = _fold_char(char)
        pieces.append(folded)
        origin.extend([index] * len(folded))
    origin.append(len(text))
    return "".join(pieces), origin


def is_specific(name: str) -> bool:
    """True when ``name`` is long enough and not made only of stop words."""
    folded = fold(name).strip()
    words = re.findall(r"\w+", folded)
    return len(folded) >= MIN_VARIANT_LENGTH and bool(words) and not all(word in STOP_WORDS for word in words)


def _name_forms(name: str) -> list[str]:
    """``name``, its article-less form and the accent-folded forms of both (case kept)."""
    forms = [name]
    if name.lower().startswith("the "):
        forms.append(name[4:].strip())
    for form in list(forms):
        folded = "".join(c for c in unicodedata.normalize("NFKD", form) if not unicodedata.combining(c))
        forms.append(folded)
    return forms


def _possessives(name: str) -> list[str]:
    """``X's`` and ``X’s``, plus ``X'`` and ``X’`` when ``name`` ends in ``s``."""
    forms = [f"{name}{mark}s" for mark in _APOSTROPHES]
    if name.lower().endswith("s"):
        forms += [f"{name}{mark}" for mark in _APOSTROPHES]
    return forms


_NOT_PLURAL_ENDINGS = ("ss", "us", "is", "as", "os")
_SIBILANT_ENDINGS = ("s", "x", "z", "ch", "sh")
_VOWELS = frozenset("aeiou")
MIN_SINGULAR_LETTERS = 4
"""The shortest singular derived from a plural-looking word (module doc)."""


def _looks_plural(word: str) -> bool:
    """True when ``word`` ends in ``s`` but not in ``ss``, ``us``, ``is``, ``as`` or ``os``."""
    lower = word.lower()
    return lower.endswith("s") and not lower.endswith(_NOT_PLURAL_ENDINGS)


def _plurals(word: str) -> list[str]:
    """The regular plural(s) of ``word`` (module doc)."""
    lower = word.lower()
    if lower.endswith(_SIBILANT_ENDINGS):
        return [f"{word}es"]
    if lower.endswith("y") and lower[-2] not in _VOWELS:
        return [f"{word[:-1]}ies", *([f"{word}s"] if word[0].isupper() else [])]
    return [f"{word}s"]


def _singulars(word: str) -> list[str]:
    """The singular(s) of a plural-looking ``word`` (module doc), each with at least ``MIN_SINGULAR_LETTERS``."""
    lower = word.lower()
    forms = [word[:-1]]
    if lower.endswith("ies"):
        forms = [f"{word[:-3]}y", word[:-1]]  # "Dynasties" -> "Dynasty"; "Zombies" -> "Zombie"
    elif lower.endswith(tuple(f"{ending}es" for ending in ("ch", "sh", "x", "z", "ss"))):
        forms = [word[:-2], word[:-1]]  # "Churches" -> "Church"; "Niches" -> "Niche"
    return [form for form in forms if len(form) >= MIN_SINGULAR_LETTERS]


def inflections(name: str) -> list[str]:
    """``name`` with its last word inflected: its plural, or its singular when it looks plural (module doc).

    ``[]`` when the last word is not made of letters, is shorter than 3, or (for a singular) is an
    all-capitals acronym or would keep fewer than ``MIN_SINGULAR_LETTERS`` letters.
    """
    head, _, word = name.rpartition(" ")
    if len(word) < MIN_VARIANT_LENGTH or not word.isalpha():
        return []
    prefix = f"{head} " if head else ""
    if not _looks_plural(word):
        return [prefix + form for form in _plurals(word)]
    if word.isupper():
        return []
    return [prefix + form for form in _singulars(word)]


def theme_variants(theme: str, aliases: Sequence[str]) -> list[str]:
    """The names and simple variants to look for (rule in the module doc), longest first.

    Deduplicated exactly (case and accents kept, since the matcher ignores them anyway); order is
    by length descending, then alphabetical, so the result is deterministic.
    """
    variants: set[str] = set()
    for name in (clean_name(theme), *(clean_name(alias) for alias in aliases)):
        for form in _name_forms(name):
            if not is_specific(form):
                continue
            for inflected in (form, *inflections(form)):
                if is_specific(inflected):
                    variants.update([inflected, *_possessives(inflected)])
    return sorted(variants, key=lambda variant: (-len(variant), variant))


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int  # includes a possessive ending
    name_end: int  # end of the name itself


def strip_possessive(folded: str) -> str:
    """``folded`` without a trailing possessive ending (``"lyon's"`` -> ``"lyon"``)."""
    for suffix in ("'s", "’s", "'", "’"):
        if folded.endswith(suffix):
            return folded[: -len(suffix)]
    return folded


@lru_cache(maxsize=1024)
def _pattern(variants: tuple[str, ...]) -> re.Pattern[str] | None:
    """One compiled matcher for ``variants`` over folded text, or ``None`` when nothing is left.

    Possessive variants of another variant are dropped: the pattern's optional ``poss`` group
    matches any possessive ending generically, so masking can keep it.
    """
    folded = {fold(clean_name(variant)) for variant in variants}
    names = {
        name for name in folded if name and not (strip_possessive(name) != name and strip_possessive(name) in folded)
    }
    if not names:
        return None
    ordered = sorted(names, key=lambda name: (-len(name), name))
    alternatives = "|".join(r"\s+".join(re.escape(word) for word in name.split(" ")) for name in ordered)
    return re.compile(rf"(?<!\w)(?P<name>{alternatives})(?P<poss>['’]s(?!\w)|['’](?!\w))?(?!\w)")


def _iter_mentions(text: str, variants: Sequence[str]) -> Iterator[_Mention]:
    """Mentions of ``variants`` in ``text`` in order, in original-text coordinates."""
    pattern = _pattern(tuple(variants))
    if pattern is None or not text:
        return
    folded, origin = _fold_with_offsets(text)
    for match in pattern.finditer(folded):
        start, name_end = origin[match.start()], origin[match.end("name")]
        end = origin[match.end()]
        possessive = match.group("poss")
        if possessive in _APOSTROPHES and not _bare_possessive(text, start, match.group("name")):
            end = name_end  # a closing quote, not a possessive
        yield _Mention(start, end, name_end)


def _bare_possessive(text: str, start: int, folded_name: str) -> bool:
    """A lone apostrophe after a name is possessive when the name ends in ``s`` and is not quoted."""
    opened_quote = start > 0 and text[start - 1] in "'‘"
    return folded_name.endswith("s") and not opened_quote


def find_mentions(text: str, variants: Sequence[str]) -> list[tuple[int, int, str]]:
    """Non-overlapping ``(start, end, matched text)`` of ``variants`` in ``text`` (rule in the module doc).

    ``text[start:end]`` is the matched text, possessive ending included.
    """
    return [(m.start, m.end, text[m.start : m.end]) for m in _iter_mentions(text, variants)]


# --- the offline fallback: masking --------------------------------------------------------------

_ARTICLE_BEFORE = re.compile(r"(?<![\w'’])(the)\s+\Z", re.IGNORECASE)
_OPENERS = "\"'“‘([«"


def mask_mentions(text: str, variants: Sequence[str], replacement: str = "the subject") -> str:
    """``text`` with every mention of ``variants`` replaced by ``replacement`` (deterministic).

    A possessive is kept (``"Lyon's"`` -> ``"the subject's"``; ``"Alps'"`` -> ``"the subject's"``);
    when ``replacement`` starts with "the", a "the" just before the mention is absorbed
    (``"the Rhône"`` -> ``"the subject"``, not ``"the the subject"``); the replacement is
    capitalised where the absorbed article was, and at the start of the text, a sentence or a line.
    """
    absorbs_article = replacement.lower().startswith("the ")
    pieces: list[str] = []
    cursor = 0
    for mention in _iter_mentions(text, variants):
        start, capital = mention.start, False
        article = _ARTICLE_BEFORE.search(text, max(cursor, start - 20), start) if absorbs_article else None
        if article is not None:
            start, capital = article.start(), article.group(1)[0].isupper()
        capital = capital or _at_sentence_start(text, start)
        word = replacement[:1].upper() + replacement[1:] if capital else replacement
        pieces += [text[cursor:start], word, _possessive_ending(text[mention.name_end : mention.end])]
        cursor = mention.end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _at_sentence_start(text: str, index: int) -> bool:
    """True when only whitespace and opening quotes/brackets separate ``index`` from the start of
    ``text``, a line break, or a sentence end (``.``, ``!``, ``?``)."""
    position = index - 1
    while position >= 0 and (text[position].isspace() or text[position] in _OPENERS):
        if text[position] == "\n":
            return True
        position -= 1
    return position < 0 or text[position] in ".!?"


def _possessive_ending(ending: str) -> str:
    """The possessive to append after the replacement: ``"'s"`` for any of ``'s ’s ' ’`` (mark kept)."""
    return f"{ending[0]}s" if ending else ""
