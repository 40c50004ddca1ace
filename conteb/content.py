"""What "the same text" means for train/test overlap: one normalisation and the fingerprints built on it.

Training records these fingerprints for every document it saw (``training_data.json``, :mod:`training.card`) and
the evaluation computes them for every corpus it evaluates (:mod:`evaluation.leakage`); both call
:func:`document_prints` on a document's published chunks, so both sides hash the same thing.

**Normalisation** (:func:`normalise`), rule :data:`CONTENT_RULE`: Unicode NFKC (full-width forms, ligatures,
non-breaking spaces, composed vs decomposed accents), format characters removed (Unicode category ``Cf``: zero-width
spaces and joiners, soft hyphens, byte-order marks), typographic quotes and dashes folded to ``'`` ``"`` ``-``,
case folded (``str.casefold``), NFKC again, every run of whitespace (line breaks included) collapsed to one space,
ends stripped. So re-encoding, re-wrapping, CRLF line ends, smart quotes and case do not make a text new, while any
change of a word, a digit or a punctuation mark does.

**Words** (:func:`words`): the runs of word characters (``\\w+``) of the normalised text.

**Fingerprints** (16 hex digits: the first 64 bits of SHA-256 over UTF-8):

* a **text print** (:func:`text_print`): of the whole normalised text of a document or of a chunk; texts of fewer
  than :data:`MIN_WORDS` words get none (headings, salutations and sign-offs repeat across unrelated documents:
  ``bench/BENCHMARKS.md``, "Train/test overlap by content", "Why the thresholds");
* **passage prints** (:func:`passage_prints`): every run of :data:`PASSAGE_WORDS` consecutive words is hashed
  (its words joined by one space) and winnowed (Schleimer, Wilkerson and Aiken, 2003): of every
  :data:`PASSAGE_WINDOW` consecutive run hashes the smallest is kept. Two texts that share a run of at least
  ``PASSAGE_WORDS + PASSAGE_WINDOW - 1`` = 60 words share a passage print, whatever surrounds it; texts that share no
  run of :data:`PASSAGE_WORDS` words share none (a 64-bit hash collision aside). About one run in six is kept.
  :data:`PASSAGE_WORDS` is above the longest quotation found between two State of the Union addresses (same
  section).

**A document's text** (:func:`rebuild_text`): its chunks' original texts (``og_chunk``) placed at their
``char_start``, the gaps (whitespace the splitter stripped) filled with whitespace; without offsets, the chunks in
order joined by a line break. Normalisation collapses the gaps, so the document's text print does not depend on how
it was chunked.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

CONTENT_RULE = "conteb-content-v1"
"""The name of the rule above; recorded with the fingerprints, which are only compared under the same rule."""

MIN_WORDS = 20
PASSAGE_WORDS = 50
PASSAGE_WINDOW = 11
PRINT_HEX_DIGITS = 16
RULE_SETTINGS = {
    "rule": CONTENT_RULE,
    "min_words": MIN_WORDS,
    "passage_words": PASSAGE_WORDS,
    "passage_window": PASSAGE_WINDOW,
}
"""What identifies the rule: fingerprints recorded under other settings are never compared with these."""

_FOLD = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    }
)
_WORD = re.compile(r"\w+")


def normalise(text: str) -> str:
    """``text`` normalised by the rule of the module docstring."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(char for char in text if unicodedata.category(char) != "Cf")
    text = unicodedata.normalize("NFKC", text.translate(_FOLD).casefold())
    return " ".join(text.split())


def words(text: str) -> list[str]:
    """The words of ``text`` after normalisation (module docstring)."""
    return _WORD.findall(normalise(text))


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[: PRINT_HEX_DIGITS // 2]


def text_print(text: str) -> str | None:
    """The fingerprint of the whole normalised ``text``; None below :data:`MIN_WORDS` words."""
    normalised = normalise(text)
    if len(_WORD.findall(normalised)) < MIN_WORDS:
        return None
    return _digest(normalised).hex()


@lru_cache(maxsize=2048)
def passage_prints(text: str) -> tuple[str, ...]:
    """The winnowed passage fingerprints of ``text`` (module docstring), sorted."""
    found = words(text)
    hashes = [
        int.from_bytes(_digest(" ".join(found[start : start + PASSAGE_WORDS])), "big")
        for start in range(len(found) - PASSAGE_WORDS + 1)
    ]
    if not hashes:
        return ()
    if len(hashes) <= PASSAGE_WINDOW:
        kept = {min(hashes)}
    else:
        kept = {min(hashes[start : start + PASSAGE_WINDOW]) for start in range(len(hashes) - PASSAGE_WINDOW + 1)}
    return tuple(sorted(f"{value:0{PRINT_HEX_DIGITS}x}" for value in kept))


def rebuild_text(pieces: Sequence[tuple[int, str]]) -> str:
    """A document text from ``(char_start, text)`` pieces: each placed at its start, gaps filled with whitespace.

    A one-character gap becomes a space, a longer one that many line breaks (most boundaries of a recursive split
    with gaps of two or more characters are paragraph breaks, ``\\n\\n``, the splitter's first separator); where
    pieces overlap, the earlier piece's characters are kept.
    """
    parts: list[str] = []
    cursor = 0
    for start, text in sorted(pieces, key=lambda piece: piece[0]):
        if start >= cursor:
            gap = start - cursor
            parts.append(" " if gap == 1 else "\n" * gap)
            parts.append(text)
            cursor = start + len(text)
        elif start + len(text) > cursor:
            parts.append(text[cursor - start :])
            cursor = start + len(text)
    return "".join(parts)


@dataclass(frozen=True)
class DocumentPrints:
    """The fingerprints of one document: its whole text, each chunk's texts, its passages."""

    text: str | None  # text print of the document (None: under MIN_WORDS words)
    chunks: dict[str, tuple[str, ...]]  # chunk id -> text prints of its original and (when different) embedded text
    passages: tuple[str, ...]


def document_prints(
    chunk_ids: Sequence[str],
    originals: Sequence[str],
    embedded: Sequence[str] | None = None,
    char_starts: Sequence[int | None] | None = None,
) -> DocumentPrints:
    """The fingerprints of a document from its chunks in order (module docstring).

    ``originals``: each chunk's original text (``og_chunk``); ``embedded``: the text embedded (``chunk``, reformulated
    where the task reformulates; None: the originals); ``char_starts``: each chunk's offset in the document (None, or
    any None in it: the chunks are joined in order).
    """
    embedded = originals if embedded is None else embedded
    if char_starts is not None and all(start is not None for start in char_starts):
        text = rebuild_text([(int(start), og) for start, og in zip(char_starts, originals, strict=True)])  # type: ignore[arg-type]
    else:
        text = "\n".join(originals)
    chunks: dict[str, tuple[str, ...]] = {}
    for chunk_id, og, shown in zip(chunk_ids, originals, embedded, strict=True):
        prints = dict.fromkeys(p for p in (text_print(og), text_print(shown) if shown != og else None) if p)
        chunks[chunk_id] = tuple(prints)
    return DocumentPrints(text=text_print(text), chunks=chunks, passages=passage_prints(text))
