"""What an LLM sees of a chunk's document: its title and text, cut to a window around the chunk.

Shared by the synthetic-query stage (:mod:`curation.synthetic_queries`) and the contextual-description
stage (:mod:`curation.contextual`), so both show the model the same window (rule documented in the
dataset card):

A document longer than ``max_chars`` is cut to a window of that many characters around the chunk:
the chunk whole, the spare budget split evenly before and after it, and whatever one side cannot use
(document edge) given to the other. Cut ends are marked ``[...]`` (markers not counted). A chunk
longer than the budget is cut to its first ``max_chars`` characters.
"""

from __future__ import annotations

import pyarrow as pa

ELLIPSIS = "[...]"


def window_bounds(length: int, char_start: int, char_end: int, max_chars: int) -> tuple[int, int]:
    """``[lo, hi)`` of at most ``max_chars`` characters of a ``length``-long document around a chunk.

    The whole document when it fits; else the chunk with the spare budget split evenly on both
    sides, the share one side cannot use going to the other. A chunk longer than ``max_chars``
    gives ``[char_start, char_start + max_chars)``.
    """
    if max_chars <= 0:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    if length <= max_chars:
        return 0, length
    if char_end - char_start >= max_chars:
        return char_start, char_start + max_chars
    before = (max_chars - (char_end - char_start)) // 2
    lo = max(0, char_start - before)
    hi = min(length, lo + max_chars)
    return max(0, hi - max_chars), hi


def document_window(text: str, char_start: int, char_end: int, max_chars: int) -> str:
    """``text`` cut to :func:`window_bounds`, each cut end marked with ``[...]``."""
    lo, hi = window_bounds(len(text), char_start, char_end, max_chars)
    prefix = f"{ELLIPSIS} " if lo > 0 else ""
    suffix = f" {ELLIPSIS}" if hi < len(text) else ""
    return f"{prefix}{text[lo:hi]}{suffix}"


def document_lookup(documents: pa.Table) -> dict[str, tuple[str, str]]:
    """``{doc_id: (title, text)}`` of a ``SOURCE_DOCUMENTS`` table; a null title becomes the doc id."""
    columns = (documents.column(name).to_pylist() for name in ("doc_id", "title", "text"))
    return {doc_id: (title or doc_id, text) for doc_id, title, text in zip(*columns, strict=True)}


def window_group(doc_id: str, text: str, char_start: int, char_end: int, max_document_chars: int) -> str:
    """``<doc_id>@<lo>:<hi>``: the ``prefix_group`` of a chunk whose prompt shows ``text[lo:hi]``
    (:func:`curation.windows.window_bounds`); every chunk of a document that fits the window shares one."""
    lo, hi = window_bounds(len(text), char_start, char_end, max_document_chars)
    return f"{doc_id}@{lo}:{hi}"
