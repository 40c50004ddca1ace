"""Identifier rules shared by every stage.

* Document ids are slugs: lowercase ASCII letters, digits and ``-`` (never ``_``), derived
  deterministically from the source (title, file name or source id), so reruns give the same ids.
* Chunk ids are ``f"{doc_id}_{chunk_index}"``; the single ``_`` makes them reversible.
* Chunk ids read from datasets we did not build follow the looser public ConTEB form
  ``<doc part>_<digits>`` (the document part may hold anything, ``_`` included): the *last* ``_``
  separates the index (:func:`split_chunk_id`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

DOC_ID_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
CHUNK_ID_PATTERN = re.compile(r"^(?P<doc_id>[a-z0-9]+(?:-[a-z0-9]+)*)_(?P<index>0|[1-9][0-9]*)$")
PUBLIC_CHUNK_ID_PATTERN = re.compile(r"(?P<doc_id>.*)_(?P<index>[0-9]+)", re.DOTALL)  # whole id: fullmatch
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """Lowercase ASCII slug of ``text``: accents folded, every other run of symbols -> ``-``.

    Returns ``""`` when nothing alphanumeric is left (callers decide on a fallback).
    """
    decomposed = unicodedata.normalize("NFKD", text)
    folded = "".join(char for char in decomposed if not unicodedata.combining(char))  # é -> e
    return _NON_ALNUM.sub("-", folded.lower()).strip("-")


def short_hash(text: str, length: int = 8) -> str:
    """First ``length`` hex digits of the SHA-1 of ``text`` (stable across runs and machines).

    A lone surrogate (a JSON ``"\\ud800"`` escape) is hashed as its code point, never an encoding error.
    """
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def doc_id_from(name: str) -> str:
    """Document id for a source-given name (title, file stem, source id).

    A name with no usable character gets ``doc-<hash>`` so that it still has a stable id.
    """
    slug = slugify(name)
    return slug if slug else f"doc-{short_hash(name)}"


def disambiguate(doc_id: str, name: str) -> str:
    """Stable variant of ``doc_id`` used when two different names slugify to the same id."""
    return f"{doc_id}-{short_hash(name, 6)}"


def chunk_id(doc_id: str, chunk_index: int) -> str:
    """``"{doc_id}_{chunk_index}"`` — the public ConTEB chunk id format."""
    return f"{doc_id}_{chunk_index}"


def parse_chunk_id(value: str) -> tuple[str, int]:
    """Inverse of :func:`chunk_id`; raises ``ValueError`` on a malformed id."""
    match = CHUNK_ID_PATTERN.match(value)
    if match is None:
        raise ValueError(f"malformed chunk id {value!r}: expected '<doc-id>_<index>'")
    return match["doc_id"], int(match["index"])


def split_chunk_id(value: str) -> tuple[str, int]:
    """``(document part, chunk index)`` of a chunk id in the public form ``<doc part>_<digits>``, split at the last
    ``_`` (``"Doc_Title_3"`` -> ``("Doc_Title", 3)``); raises ``ValueError`` on any other id.

    For ids read from published datasets, whose document ids need not be ours; :func:`parse_chunk_id` is the strict
    inverse of :func:`chunk_id`.
    """
    match = PUBLIC_CHUNK_ID_PATTERN.fullmatch(value)
    if match is None:
        raise ValueError(f"malformed chunk id {value!r}: expected '<doc part>_<digits>'")
    return match["doc_id"], int(match["index"])


def is_valid_doc_id(value: str) -> bool:
    """True when ``value`` is a well-formed document id (slug, no ``_``)."""
    return DOC_ID_PATTERN.match(value) is not None
