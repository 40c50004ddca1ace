"""A chunk-first prompt layout rebuilt from a real request, for tests and ``bench/prompt_cache.py``.

The stages' prompts give the per-document part first (title, document or its chunks, theme) and the per-chunk or
per-query part last, so that a provider's prompt cache can serve the shared part. :func:`chunk_first` rebuilds
the same request with its user message's per-item part moved to the front: the same text, in the layout that
defeats prompt caching. The per-item part starts at ``ITEM_MARKERS[schema_name]`` and runs to the end (pairing:
the query, its answer and the closing question).
"""

from __future__ import annotations

import dataclasses

from llm.types import LLMRequest

ITEM_MARKERS = {
    "chunk_context": "<passage>\n",
    "chunk_pairing": "Query: ",
    "reformulation": "Passage:\n",
    "synthetic_queries": "Passage:\n",
}


def chunk_first(request: LLMRequest) -> LLMRequest:
    """``request`` with the per-item part of its last message moved before the rest (``ValueError`` when the
    request's prompt has no known marker or the message does not contain it)."""
    marker = ITEM_MARKERS.get(request.schema_name)
    last = request.messages[-1]
    content = last["content"]
    at = content.rfind(marker) if marker else -1
    if at < 0:
        raise ValueError(f"{request.custom_id}: no per-item marker {marker!r} for schema {request.schema_name!r}")
    shared, item = content[:at].rstrip(), content[at:].rstrip()
    moved = {**last, "content": f"{item}\n\n{shared}"}
    return dataclasses.replace(request, messages=(*request.messages[:-1], moved))
