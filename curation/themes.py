"""A document's theme (the entity or topic its queries name) and the mentions of it in a text.

Used by stage 3 (reformulation): the theme is what later chunks must stop naming.

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
    documents: pa.Table, results: Mapping[str, LLMResult] | None, model: str | None
) -> tuple[pa.Table, list[QuarantineRecord]]:
    """A ``THEMES`` table with one row per document of ``documents``, and the LLM failures.

    ``results is None`` (no LLM configured): every row is method ``"title"``, nothing is recorded.
    Otherwise a document whose result is valid gets method ``"llm"`` (the model is the result's,
    else ``model``; the prompt is the theme prompt's tag); a document whose result is missing,
    failed or invalid falls back to method ``"title"`` *and* gets a quarantine record (reason
    ``llm_failed``, stage ``themes``, row = the request's custom id), so no failure is silent.
    A document with a null title takes its doc id as the title. Pass the documents that were asked
    about (those with chunks).
    """
    rows, failures = [], []
    tag = load_prompt(PROMPT_NAME).tag if results is not None else None
    for doc_id, title in zip(
        documents.column("doc_id").to_pylist(), documents.column("title").to_pylist(), strict=True
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
        rows.append(_title_theme_row(doc_id, title or doc_id))
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


def _title_theme_row(doc_id: str, title: str) -> dict:
    """A ``THEMES`` row derived from ``title`` (method ``"title"``, no model or prompt)."""
    theme, aliases = theme_from_title(title)
    return {"doc_id": doc_id, "theme": theme or doc_id, "aliases": aliases, "method": "title"}
