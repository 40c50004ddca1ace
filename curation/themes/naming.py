"""Naming a document's theme (the entity or topic its queries name) without an LLM.

The theme is what stage 3 (reformulation) makes later chunks stop naming, and what the context-necessity labels
(``curation/necessity.py``) look for in a query. Its mentions are found by :mod:`curation.themes.mentions`; the
themes stage (:mod:`curation.themes.stage`) asks an LLM when one is configured and falls back on this module.

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
  counted with :func:`curation.themes.mentions.find_mentions`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from conteb.text import is_blank
from curation.themes.mentions import (
    clean_name,
    find_mentions,
    fold,
    is_specific,
    strip_possessive,
    theme_variants,
    word_set,
)

ORG_AFFIXES = frozenset(
    {
        *("FC", "AFC", "CF", "SC", "AC", "AS", "SS", "SL", "SV", "CD", "RC", "SK", "FK", "BK", "IF"),
        *("Inc", "Ltd", "Co", "Corp", "plc", "PLC", "LLC", "SA", "AG", "GmbH", "NV", "BV", "SpA"),
    }
)
"""Organisation affixes, compared with dots removed and case kept (``"F.C."`` -> ``"FC"``)."""

_PAREN_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")

# --- theme from the title ------------------------------------------------------------------------


def theme_from_title(title: str) -> tuple[str, list[str]]:
    """``(theme, aliases)`` derived from ``title`` without an LLM (rule in the module doc).

    Aliases never repeat the theme and keep their discovery order; an empty title gives ``("", [])``.
    """
    cleaned = clean_name(title)
    theme = _PAREN_QUALIFIER.sub("", cleaned).strip() or cleaned
    candidates = [_comma_head(theme), _without_org_affixes(theme)]
    aliases: list[str] = []
    for alias in candidates:
        if alias and alias != theme and alias not in aliases and is_specific(alias):
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


# --- the offline theme: an informative title, else the document's head -------------------------

GENERIC_TITLE_WORDS = word_set(
    """
    document documents doc docs untitled title unnamed unknown none no null na chapter section part page
    article text file item entry record report paper note notes draft copy version final new old sample
    example test tmp temp sheet passage paragraph story post message letter memo transcript
    """
)
"""Words an uninformative title is made of, with numbers and ids (``"Document 7"``, ``"doc_0042"``, ``"Untitled"``)."""

HEAD_VERBS = word_set(
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
_NOT_IN_NAME = word_set(
    "a an the and or nor but so yet not in on at to for by with from as of into onto upon about above across after "
    "against along among around before behind below beneath beside besides between beyond despite during except "
    "inside near outside over since through throughout toward towards under unlike until via within without "
    "it its he she they them this that these those there here who which what where when why how his her their we "
    "our you your i if while although though however also both either neither each every all some many most few "
    "several such"
)
"""Function words a name drawn from the head may not contain (``"In 1850 the city"`` is no name)."""
_NAME_CONNECTORS = word_set("of on upon for de du des la le von van der den del della da di dos das y")
"""Lower-case words a name may hold between two capitalised words ("Panel on Climate Change"); a
subject may also hold "and" ("Victoria and Albert Museum"), a repeated name may not ("ATP and NADPH")."""
_SUBJECT_CONNECTORS = _NAME_CONNECTORS | {"and"}
_ABBREVIATIONS = word_set("mr mrs ms dr st mt ft jr sr prof gen col capt lt sgt rev hon")
_ARTICLES = word_set("the a an")
_COPULAS = word_set("is was are were")
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
    return strip_possessive(clean_name(head[tokens[0].start : end]))


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
    if not is_specific(name):
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
        if len(run) > 1 and is_specific(name):
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
