"""A document's theme (the entity or topic its queries name) and the mentions of it in a text.

Used by stage 3 (reformulation): the theme is what later chunks must stop naming; and by the
context-necessity labels (``curation/necessity.py``): a query that names it needs its document.

Theme from the title (no LLM), :func:`theme_from_title` — a conservative rule, because a wrong
alias masks or flags unrelated words, while a missed one stays visible in the review queue:

* wiki-style underscores become spaces and whitespace is collapsed;
* a trailing parenthesised qualifier is dropped: ``"Mercury (planet)"`` -> ``"Mercury"``;
* a comma qualifier gives the head as an alias: ``"Fresno, California"`` -> alias ``"Fresno"``;
* organisation affixes (``F.C.``, ``AFC``, ``S.L.``, ``Inc.``, ... see ``ORG_AFFIXES``) at the
  start or end give the rest as an alias: ``"Liverpool F.C."`` -> ``"Liverpool"``;
* nothing else: a personal name's parts are *not* aliases (``"Napoleon Bonaparte"`` has none),
  nor are acronyms — a title cannot tell a person from a place (``"New York"``), and the LLM
  method extracts such names when it is available.

The offline theme, :func:`offline_theme` (no LLM; the themes stage and the context-necessity labels
both use it) — the title when it is informative, else the most salient name of the document's head
(its first chunk), else the title as it is or the doc id:

* a title is uninformative, :func:`is_informative_title`, when it is missing, blank, or made only of
  ``GENERIC_TITLE_WORDS``, numbers, id-like tokens, single letters and Roman numerals
  (``"Document 7"``, ``"doc_0042"``, ``"Untitled"``, ``"Part II"``);
* the head's name, :func:`theme_from_head`: the grammatical subject of the first sentence (the words
  before the first ``HEAD_VERBS`` word or before a parenthesis, comma or dash, a leading article
  dropped, at most ``SUBJECT_MAX_WORDS`` words and no function word) when it is a name — it has a
  capitalised word that does not start the sentence, or the head names it at least twice
  (``"Velmora is a river port ... Velmora's old town"``); else the capitalised name (a run of
  capitalised words, numbers and connectors such as "of") the head names most often, at least twice,
  that is more than a sentence's first word. Leading heading lines are skipped. A sentence's first
  capital alone is never evidence (``"Scientists are studying ..."`` gives no theme). Mentions are
  counted with the matcher below.

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
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa

from conteb.names import Stage
from conteb.schemas import THEMES, table_from_rows
from conteb.text import is_blank
from curation.llm_results import llm_failure, result_problem
from curation.quarantine import QuarantineRecord
from llm.prompts import load_prompt
from llm.types import LLMRequest, LLMResult

STAGE = Stage.THEMES
PROMPT_NAME = "theme"
MIN_VARIANT_LENGTH = 3
MAX_THEME_LENGTH = 150

ORG_AFFIXES = frozenset(
    {
        *("FC", "AFC", "CF", "SC", "AC", "AS", "SS", "SL", "SV", "CD", "RC", "SK", "FK", "BK", "IF"),
        *("Inc", "Ltd", "Co", "Corp", "plc", "PLC", "LLC", "SA", "AG", "GmbH", "NV", "BV", "SpA"),
    }
)
"""Organisation affixes, compared with dots removed and case kept (``"F.C."`` -> ``"FC"``)."""


def _words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text``."""
    return frozenset(text.split())


STOP_WORDS = _words(
    """
    a an the and or of in on at to for by with from as is was be it its it's he she him her his hers
    they them their theirs this that these those there here who whom which what where when
    one ones city town village capital country state region province island river lake sea mountain
    mountains range club team side company firm group band organisation organization university
    school party church government person man woman people subject document article place area
    """
)
"""Words a variant may not consist of only (compared accent-folded and lower-cased)."""

_PAREN_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")
_WHITESPACE = re.compile(r"\s+")
_APOSTROPHES = ("'", "’")


# --- theme from the title ------------------------------------------------------------------------


def clean_name(name: str) -> str:
    """``name`` with underscores as spaces and whitespace collapsed and stripped."""
    return _WHITESPACE.sub(" ", name.replace("_", " ")).strip()


def theme_from_title(title: str) -> tuple[str, list[str]]:
    """``(theme, aliases)`` derived from ``title`` without an LLM (rule in the module doc).

    Aliases never repeat the theme and keep their discovery order; an empty title gives ``("", [])``.
    """
    cleaned = clean_name(title)
    theme = _PAREN_QUALIFIER.sub("", cleaned).strip() or cleaned
    candidates = [_comma_head(theme), _without_org_affixes(theme)]
    aliases: list[str] = []
    for alias in candidates:
        if alias and alias != theme and alias not in aliases and _is_specific(alias):
            aliases.append(alias)
    return theme, aliases


def _comma_head(name: str) -> str | None:
    """The part before the first comma (``"Fresno, California"`` -> ``"Fresno"``), else ``None``."""
    head = name.split(",", 1)[0].strip()
    return head if "," in name and head else None


def _without_org_affixes(name: str) -> str | None:
    """``name`` without leading/trailing ``ORG_AFFIXES`` tokens, or ``None`` when none is present."""
    tokens = name.replace(",", " ").split()
    start, end = 0, len(tokens)
    while start < end and tokens[start].replace(".", "") in ORG_AFFIXES:
        start += 1
    while end > start and tokens[end - 1].replace(".", "") in ORG_AFFIXES:
        end -= 1
    if (start, end) == (0, len(tokens)) or start == end:
        return None
    return " ".join(tokens[start:end])


# --- variants and matching -----------------------------------------------------------------------


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


def _is_specific(name: str) -> bool:
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
            if not _is_specific(form):
                continue
            for inflected in (form, *inflections(form)):
                if _is_specific(inflected):
                    variants.update([inflected, *_possessives(inflected)])
    return sorted(variants, key=lambda variant: (-len(variant), variant))


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int  # includes a possessive ending
    name_end: int  # end of the name itself


def _strip_possessive(folded: str) -> str:
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
        name for name in folded if name and not (_strip_possessive(name) != name and _strip_possessive(name) in folded)
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


# --- the offline theme: an informative title, else the document's head -------------------------

GENERIC_TITLE_WORDS = _words(
    """
    document documents doc docs untitled title unnamed unknown none no null na chapter section part page
    article text file item entry record report paper note notes draft copy version final new old sample
    example test tmp temp sheet passage paragraph story post message letter memo transcript
    """
)
"""Words an uninformative title is made of, with numbers and ids (``"Document 7"``, ``"doc_0042"``, ``"Untitled"``)."""

HEAD_VERBS = _words(
    """
    is was are were has had have became becomes remains remained refers refer comprises comprise consists
    consist means lies lay stands serves served
    """
)
"""Verbs that end the subject of a head's first sentence (``"Velmora is a port ..."``)."""

SUBJECT_MAX_WORDS = 6
MIN_HEAD_MENTIONS = 2
HEAD_CHARACTERS = 1000
"""A document's head when its first chunk is not given: its first characters (the default chunk size)."""
_NOT_IN_NAME = _words(
    "a an the and or nor but so yet not in on at to for by with from as of into onto upon about above across after "
    "against along among around before behind below beneath beside besides between beyond despite during except "
    "inside near outside over since through throughout toward towards under unlike until via within without "
    "it its he she they them this that these those there here who which what where when why how his her their we "
    "our you your i if while although though however also both either neither each every all some many most few "
    "several such"
)
"""Function words a name drawn from the head may not contain (``"In 1850 the city"`` is no name)."""
_NAME_CONNECTORS = _words("of on upon for de du des la le von van der den del della da di dos das y")
"""Lower-case words a name may hold between two capitalised words ("Panel on Climate Change"); a
subject may also hold "and" ("Victoria and Albert Museum"), a repeated name may not ("ATP and NADPH")."""
_SUBJECT_CONNECTORS = _NAME_CONNECTORS | {"and"}
_ABBREVIATIONS = _words("mr mrs ms dr st mt ft jr sr prof gen col capt lt sgt rev hon")
_ARTICLES = _words("the a an")
_COPULAS = _words("is was are were")
_HEAD_WORD = re.compile(r"\w+(?:['’-]\w+)*")
_TITLE_TOKEN = re.compile(r"[^\W_]+")
_ROMAN_NUMERAL = re.compile(r"[ivx]+")
_SUBJECT_BREAKS = "(),;:—–"


def is_informative_title(title: str | None) -> bool:
    """False for a missing or blank title and for one made only of ``GENERIC_TITLE_WORDS``, numbers,
    id-like tokens (any with a digit), single letters and Roman numerals (``"Document 7"``, ``"Part II"``)."""
    if title is None:
        return False
    return any(not _uninformative_token(token) for token in _TITLE_TOKEN.findall(fold(title)))


def _uninformative_token(token: str) -> bool:
    """True for a folded title token that names nothing: a generic word, a number or id, a letter, a numeral."""
    return (
        token in GENERIC_TITLE_WORDS
        or len(token) == 1
        or any(char.isdigit() for char in token)
        or bool(_ROMAN_NUMERAL.fullmatch(token))
    )


@dataclass(frozen=True)
class _Token:
    start: int
    end: int
    text: str
    sentence_start: bool  # the first word of a sentence (its capital is no evidence of a name)
    joined: bool  # follows the previous word inside one name (only whitespace, or an abbreviation's ".")

    @property
    def capitalised(self) -> bool:
        return self.text[0].isupper()

    @property
    def acronym(self) -> bool:
        """All capitals, two letters or more (``"AS"``, ``"FC"``): a name word even where a sentence starts."""
        return len(self.text) > 1 and self.text.isupper()

    @property
    def folded(self) -> str:
        return fold(self.text)


def _head_tokens(head: str) -> list[_Token]:
    """The words of ``head`` with sentence starts: a line break, or ``.``/``!``/``?`` not after an
    abbreviation (``_ABBREVIATIONS``) or a single-letter initial, starts a sentence."""
    tokens: list[_Token] = []
    previous: re.Match[str] | None = None
    for match in _HEAD_WORD.finditer(head):
        gap = head[previous.end() : match.start()] if previous else ""
        after_abbreviation = previous is not None and (
            fold(previous.group()) in _ABBREVIATIONS or len(previous.group()) == 1
        )
        ends_sentence = "\n" in gap or (
            any(mark in gap for mark in ".!?") and not (after_abbreviation and gap.strip() == ".")
        )
        joined = (
            previous is not None
            and not ends_sentence
            and (gap.isspace() or (after_abbreviation and gap.strip() == "."))
        )
        tokens.append(_Token(match.start(), match.end(), match.group(), previous is None or ends_sentence, joined))
        previous = match
    return tokens


def _name_text(head: str, tokens: Sequence[_Token]) -> str:
    """The words ``tokens`` as written in ``head`` (whitespace collapsed), without a possessive ending;
    a last word that is an initial or an abbreviation keeps its period (``"Brackwater Rovers F.C."``)."""
    end = tokens[-1].end
    last = tokens[-1].text
    if head[end : end + 1] == "." and (len(last) == 1 or fold(last) in _ABBREVIATIONS):
        end += 1
    return _strip_possessive(clean_name(head[tokens[0].start : end]))


def _head_mentions(head: str, name: str) -> int:
    """How often ``head`` names ``name`` (the matcher of :func:`find_mentions`, inflections included)."""
    return len(find_mentions(head, theme_variants(name, [])))


def _first_sentence(tokens: Sequence[_Token], head: str) -> list[_Token]:
    """The words of the head's first sentence; leading heading lines (no ``HEAD_VERBS`` word and no
    sentence-final ``.``/``!``/``?``) are skipped."""
    sentences: list[list[_Token]] = []
    for token in tokens:
        if token.sentence_start:
            sentences.append([])
        sentences[-1].append(token)
    for sentence in sentences:
        after = head[sentence[-1].end : sentence[-1].end + 2]
        is_heading = not any(t.folded in HEAD_VERBS for t in sentence) and not any(m in after for m in ".!?")
        if not is_heading:
            return sentence
    return []


def subject_of_first_sentence(head: str) -> str | None:
    """The grammatical subject of the head's first sentence when it is a name, else ``None``.

    The sentence must have a ``HEAD_VERBS`` word. The words before the first one are cut at every
    parenthesis, comma, semicolon, colon or dash; the subject is the first piece (``"Warsaw (Polish:
    Warszawa) is ..."``), or the last one when the first is not a name (a fronted phrase: ``"In
    physics, a force is ..."``). A piece is a name when, a leading article and leading lower-case
    words before a capitalised one dropped (``"The economy of Victoria"`` -> ``"Victoria"``), it has
    at most ``SUBJECT_MAX_WORDS`` words and no function word (``_NOT_IN_NAME``; a capitalised one
    inside a name is a name word: ``"Doctor Who"``; ``_NAME_CONNECTORS`` between two capitalised
    words are kept: ``"Panel on Climate Change"``, ``"Victoria and Albert Museum"``), its words are
    separated by spaces only, and there is evidence for it: a capitalised word that does not start
    the sentence (``"The Amazon rainforest"``, ``"Super Bowl 50"``), the head naming it
    ``MIN_HEAD_MENTIONS`` times (``"Velmora is ... Velmora's harbour"``), or a capitalised name the
    sentence defines: its verb is a form of "to be" followed by an article (``"Arlenmouth is a port
    city"``). A sentence's first capital alone is no evidence (``"Scientists are studying"``).
    """
    sentence = _first_sentence(_head_tokens(head), head)
    verb = next((index for index, token in enumerate(sentence) if token.folded in HEAD_VERBS), None)
    if verb is None:
        return None
    pieces: list[list[_Token]] = [[]]
    for index, token in enumerate(sentence[:verb]):
        if index and any(mark in head[sentence[index - 1].end : token.start] for mark in _SUBJECT_BREAKS):
            pieces.append([])
        pieces[-1].append(token)
    defines = sentence[verb].folded in _COPULAS and verb + 1 < len(sentence) and sentence[verb + 1].folded in _ARTICLES
    for piece in dict.fromkeys((0, len(pieces) - 1)):
        name = _subject_name(head, pieces[piece], defines)
        if name is not None:
            return name
    return None


def _subject_name(head: str, piece: list[_Token], defined: bool) -> str | None:
    """``piece`` as a name (:func:`subject_of_first_sentence`), or ``None``; ``defined``: the piece is
    followed by "is a"/"was the"/... ."""
    if piece and piece[0].folded in _ARTICLES:
        piece = piece[1:]
    if any(t.capitalised for t in piece):
        while not piece[0].capitalised:
            piece = piece[1:]
    if not piece or len(piece) > SUBJECT_MAX_WORDS or not all(t.joined for t in piece[1:]):
        return None  # too long, or words not separated by spaces alone ("V&A", a quoted word)
    for index, token in enumerate(piece):
        inside = 0 < index < len(piece) - 1 and piece[index - 1].capitalised and piece[index + 1].capitalised
        name_word = token.capitalised and (not token.sentence_start or token.acronym)
        if token.folded in _NOT_IN_NAME and not name_word and not (inside and token.folded in _SUBJECT_CONNECTORS):
            return None
    name = _name_text(head, piece)
    if not _is_specific(name):
        return None
    proper = any(t.capitalised and not t.sentence_start for t in piece)
    if proper or (defined and piece[0].capitalised) or _head_mentions(head, name) >= MIN_HEAD_MENTIONS:
        return name
    return None


def _capitalised_runs(tokens: Sequence[_Token]) -> list[list[_Token]]:
    """Maximal runs of joined capitalised words (numbers and ``_NAME_CONNECTORS`` inside a run are
    kept: ``"Super Bowl 50"``, ``"Bank of England"``), leading function words dropped."""
    runs: list[list[_Token]] = []
    current: list[_Token] = []

    def close() -> None:
        while current and not current[-1].capitalised and not current[-1].text.isdigit():
            current.pop()  # a trailing connector
        while current and current[0].folded in _NOT_IN_NAME:
            current.pop(0)  # "In Velmora", "The Huguenots"
        if current:
            runs.append(list(current))
        current.clear()

    for token in tokens:
        connects = token.capitalised or token.text.isdigit() or token.folded in _NAME_CONNECTORS
        if current and token.joined and connects:
            current.append(token)
            continue
        close()
        if token.capitalised:
            current.append(token)
    close()
    return runs


def repeated_name(head: str) -> str | None:
    """The capitalised multi-word name the head names most often, at least ``MIN_HEAD_MENTIONS``
    times, else ``None``.

    Candidates are the maximal capitalised runs of two words or more (:func:`_capitalised_runs`:
    ``"Velmora Bay"``, ``"Bank of England"``) that are specific; mentions are counted with
    :func:`find_mentions`. A single capitalised word is no candidate: repeated ones are as often a
    generic word of the text (``"Revolution"``, ``"Parliament"``) as its theme. Ties: more words, then
    the earliest.
    """
    candidates: dict[str, tuple[int, int, str]] = {}  # folded name -> (words, -start, name)
    for run in _capitalised_runs(_head_tokens(head)):
        name = _name_text(head, run)
        if len(run) > 1 and _is_specific(name):
            candidates.setdefault(fold(name), (len(run), -run[0].start, name))
    scored = [(_head_mentions(head, name), words, start, name) for words, start, name in candidates.values()]
    best = max(scored, default=None)
    return best[3] if best is not None and best[0] >= MIN_HEAD_MENTIONS else None


def theme_from_head(head: str) -> str | None:
    """The most salient name of a document's head (its first chunk), or ``None``: the subject of the
    first sentence when it is a name (:func:`subject_of_first_sentence`), else the name repeated most
    often (:func:`repeated_name`). Deterministic, no model."""
    return subject_of_first_sentence(head) or repeated_name(head)


OFFLINE_METHODS = ("title", "head", "doc_id")
"""``THEMES.method`` of an offline theme (:func:`offline_theme`)."""


def numbered_description(title: str) -> bool:
    """True for a title that describes a kind and numbers it, naming no entity: a number or id token, and no
    capitalised word but the first (``"Company profile 3"``, ``"Case study 12"``; not ``"Harvard University"``,
    ``"Apollo 11"`` is one, which the head's mention of it keeps)."""
    words = _TITLE_TOKEN.findall(title)
    numbered = any(any(char.isdigit() for char in word) for word in words)
    return numbered and not any(word[:1].isupper() for word in words[1:])


def offline_theme(title: str | None, head: str | None, doc_id: str) -> tuple[str, list[str], str]:
    """``(theme, aliases, method)`` of a document without an LLM — the one rule the themes stage and the
    context-necessity labels share:

    1. an informative title (:func:`is_informative_title`): :func:`theme_from_title`, method ``"title"``,
       unless it is a :func:`numbered_description` that the head does not name (then as 2);
    2. else the head's name (:func:`theme_from_head` of ``head``, the first chunk), with the title rule's
       aliases of that name, method ``"head"``;
    3. else the title as it is (``"Document 7"``), method ``"title"``; with no title, the doc id, method
       ``"doc_id"``.
    """
    if is_informative_title(title):
        theme, aliases = theme_from_title(title or "")
        # the cheap test first: this runs for every document of a task
        if not head or not numbered_description(title or "") or find_mentions(head, theme_variants(theme, aliases)):
            return theme, aliases, "title"
        named = theme_from_head(head)
        return (*theme_from_title(named), "head") if named else (theme, aliases, "title")
    name = theme_from_head(head) if head else None
    if name:
        return (*theme_from_title(name), "head")
    if title is not None and not is_blank(title):
        return (*theme_from_title(title), "title")
    return doc_id, [], "doc_id"


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


# --- LLM theme extraction -----------------------------------------------------------------------

THEME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "theme": {"type": "string", "description": "The main entity or topic, as queries would name it."},
        "aliases": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Other names or short forms the document uses for it.",
        },
    },
    "required": ["theme", "aliases"],
    "additionalProperties": False,
}


def theme_custom_id(doc_id: str) -> str:
    """``theme:<doc_id>``: the request id of a document's theme extraction."""
    return f"theme:{doc_id}"


def validate_theme(value: Mapping[str, Any]) -> str | None:
    """``None`` when ``value`` names a usable theme, else the message sent back to the model."""
    theme = value.get("theme")
    if not isinstance(theme, str) or is_blank(theme):
        return "the theme is empty: name the main entity or topic of the document"
    if len(theme.strip()) > MAX_THEME_LENGTH:
        return f"the theme has {len(theme.strip())} characters: give the short name of the entity or topic only"
    aliases = value.get("aliases")
    if not isinstance(aliases, list) or not all(isinstance(alias, str) for alias in aliases):
        return "aliases must be a list of strings (an empty list when there are none)"
    return None


def build_theme_requests(documents: pa.Table, first_chunks: Mapping[str, str]) -> list[LLMRequest]:
    """One request per document of ``documents`` (``SOURCE_DOCUMENTS``) that has a first chunk.

    The prompt gets the title (``"(untitled)"`` when null) and, as the opening, the document's
    first chunk from ``first_chunks`` (``doc_id -> og_chunk``). Documents without a first chunk
    (quarantined at chunking) have nothing to reformulate and get no request.
    """
    prompt = load_prompt(PROMPT_NAME)
    requests = []
    for doc_id, title in zip(
        documents.column("doc_id").to_pylist(), documents.column("title").to_pylist(), strict=True
    ):
        if doc_id not in first_chunks:
            continue
        messages = prompt.messages(title=title or "(untitled)", opening=first_chunks[doc_id])
        requests.append(
            LLMRequest(theme_custom_id(doc_id), messages, "theme", THEME_SCHEMA, prompt.tag, validator=validate_theme)
        )
    return requests


def themes_table(
    documents: pa.Table,
    results: Mapping[str, LLMResult] | None,
    model: str | None,
    heads: Mapping[str, str] | None = None,
    prompt_version: str | None = None,
) -> tuple[pa.Table, list[QuarantineRecord]]:
    """A ``THEMES`` table with one row per document of ``documents``, and the LLM failures.

    ``results is None`` (no LLM configured): every row is the offline theme (:func:`offline_theme`:
    method ``"title"``, ``"head"`` or ``"doc_id"``), nothing is recorded. Otherwise a document whose
    result is valid gets method ``"llm"`` (the model is the result's, else ``model``; the prompt is
    the theme prompt's tag); a document whose result is missing, failed or invalid falls back to the
    offline theme *and* gets a quarantine record (reason ``llm_failed``, stage ``themes``, row = the
    request's custom id), so no failure is silent. ``heads``: ``doc_id -> first chunk`` (what the
    theme prompt reads as the opening); a document missing there uses the first ``HEAD_CHARACTERS``
    characters of its text. Pass the documents that were asked about (those with chunks). ``prompt_version``: the tag
    the requests were sent with (:func:`llm.prompts.sent_prompt_tag`); default: the theme prompt's current tag.
    """
    rows, failures = [], []
    tag = (prompt_version or load_prompt(PROMPT_NAME).tag) if results is not None else None
    for doc_id, title, text in zip(
        *(documents.column(name).to_pylist() for name in ("doc_id", "title", "text")), strict=True
    ):
        if results is not None:
            result = results.get(theme_custom_id(doc_id))
            problem = result_problem(result, validate_theme)
            if not problem and result is not None and result.value is not None:
                rows.append(_llm_theme_row(doc_id, result.value, result.model or model, tag))
                continue
            used_model = (result.model if result else None) or model
            failures.append(
                llm_failure(STAGE, "document", doc_id, doc_id, theme_custom_id(doc_id), used_model, problem)
            )
        head = heads.get(doc_id) if heads is not None else None
        rows.append(_offline_theme_row(doc_id, title, text[:HEAD_CHARACTERS] if head is None else head))
    return table_from_rows(rows, THEMES), failures


def _llm_theme_row(doc_id: str, value: Mapping[str, Any], model: str | None, tag: str | None) -> dict:
    """A ``THEMES`` row from a validated LLM answer (aliases cleaned, deduplicated, theme removed)."""
    theme = clean_name(value["theme"])
    aliases: list[str] = []
    seen = {fold(theme)}
    for alias in map(clean_name, value.get("aliases") or []):
        if alias and fold(alias) not in seen:
            seen.add(fold(alias))
            aliases.append(alias)
    return {
        "doc_id": doc_id,
        "theme": theme,
        "aliases": aliases,
        "method": "llm",
        "model": model,
        "prompt_version": tag,
    }


def _offline_theme_row(doc_id: str, title: str | None, head: str) -> dict:
    """A ``THEMES`` row of :func:`offline_theme` (no model or prompt)."""
    theme, aliases, method = offline_theme(title, head, doc_id)
    return {"doc_id": doc_id, "theme": theme or doc_id, "aliases": aliases, "method": method}
