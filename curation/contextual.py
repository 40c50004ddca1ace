"""Contextual chunk descriptions for the Anthropic-style contextual-retrieval baseline.

For each chunk the LLM reads its document's title and text (cut to the same window as the synthetic-query
stage, :func:`curation.windows.document_window`) and writes a short context situating the chunk
in it; the evaluation prepends that context to the chunk before embedding.

Prompt caching: the prompt is the fixed system message, then the document (title and window), then the
passage last, so the requests of chunks that share a window share that prefix; they carry the same
``prefix_group`` (:func:`curation.windows.window_group`) and are listed together, in document order, so the client sends
them together (``llm/scheduling.py``). Results are cached by
the shared LLM client and stored beside the chunks in a ``CHUNK_CONTEXTS`` table (method ``llm``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from conteb.schemas import CHUNK_CONTEXTS, table_from_rows
from conteb.text import is_blank
from curation.llm_results import chunk_results
from curation.lookups import by_document
from curation.windows import document_lookup, document_window, window_group
from llm.prompts import load_prompt
from llm.types import LLMRequest, LLMResult

PROMPT_NAME = "chunk_context"
CUSTOM_ID_PREFIX = "context:"
MAX_CONTEXT_CHARS = 600

CONTEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"context": {"type": "string"}},
    "required": ["context"],
    "additionalProperties": False,
}


def validate_context(value: dict[str, Any]) -> str | None:
    """``None`` when ``value["context"]`` is a non-empty string of at most 600 characters, else why not."""
    context = value.get("context")
    if not isinstance(context, str) or is_blank(context):
        return '"context" must be a non-empty string: one or two sentences situating the passage'
    length = len(context.strip())
    if length > MAX_CONTEXT_CHARS:
        return f'"context" has {length} characters; keep it to at most {MAX_CONTEXT_CHARS} (one or two sentences)'
    return None


def build_context_requests(chunks: pa.Table, documents: pa.Table, max_document_chars: int = 20000) -> list[LLMRequest]:
    """One request per chunk (``context:<chunk_id>``), grouped by document (documents in order of first
    appearance, chunks in table order within one); chunks of unknown documents are skipped.

    The prompt gets the document's ``title`` (its id when null) and ``document`` window, then the
    ``chunk``; ``prefix_group`` is :func:`curation.windows.window_group`.
    """
    prompt = load_prompt(PROMPT_NAME)
    docs = document_lookup(documents)
    requests = []
    for chunk in by_document(chunks.to_pylist()):
        if chunk["doc_id"] not in docs:
            continue
        title, text = docs[chunk["doc_id"]]
        start, end = chunk["char_start"], chunk["char_end"]
        requests.append(
            LLMRequest(
                custom_id=f"{CUSTOM_ID_PREFIX}{chunk['chunk_id']}",
                messages=prompt.messages(
                    title=title, document=document_window(text, start, end, max_document_chars), chunk=chunk["og_chunk"]
                ),
                schema_name="chunk_context",
                schema=CONTEXT_SCHEMA,
                prompt_tag=prompt.tag,
                validator=validate_context,
                prefix_group=window_group(chunk["doc_id"], text, start, end, max_document_chars),
            )
        )
    return requests


def contexts_table(
    chunks: pa.Table, results: dict[str, LLMResult], model: str, prompt_version: str
) -> tuple[pa.Table, list[tuple[str, str]]]:
    """``CHUNK_CONTEXTS`` rows (chunk order, context stripped) and ``(chunk_id, error)`` for chunks without one.

    A chunk fails when its result is missing, is an error, or does not pass :func:`validate_context`.
    """
    failures: list[tuple[str, str]] = []
    rows = [
        {
            "chunk_id": chunk_id,
            "doc_id": doc_id,
            "context": value["context"].strip(),
            "method": "llm",
            "model": model,
            "prompt_version": prompt_version,
        }
        for chunk_id, doc_id, value in chunk_results(results, chunks, CUSTOM_ID_PREFIX, validate_context, failures)
    ]
    return table_from_rows(rows, CHUNK_CONTEXTS), failures
