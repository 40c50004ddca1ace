"""The one place where every Parquet table's schema is defined (pyarrow).

Stage tables (``data/stages/<task>/``):

* ``SOURCE_DOCUMENTS`` / ``SOURCE_QUERIES``: what a source loader produced (stage 0). Answers are
  in *document* character coordinates (Python ``str`` indices).
* ``CHUNKS``: stage 1, one row per chunk with its span in the document.
* ``PAIRED_QUERIES``: stage 2, one row per query paired with its gold chunk.
* ``QUARANTINE``: rows a stage refused, with the reason and where they came from.

Published tables (``data/conteb/<task>/``, the public ConTEB layout): ``CONTEB_DOCUMENTS`` and
``CONTEB_QUERIES`` (the paired queries plus their context-necessity labels, see
``curation/necessity.py``).

Evaluation tables (``data/reports/runs/<task>/``): :func:`per_query_metrics_schema`, the per-query
metrics of one system (``<system>.metrics.parquet``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

ANSWER = pa.struct([("text", pa.string()), ("char_start", pa.int64())])

SOURCE_DOCUMENTS = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("text", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # file path or dataset name
        pa.field("license", pa.string()),  # null where unknown
        pa.field("metadata", pa.string()),  # JSON object: loader-specific provenance
    ]
)

SOURCE_QUERIES = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("query", pa.string(), nullable=False),
        pa.field("answers", pa.list_(ANSWER), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("source_row", pa.string(), nullable=False),  # e.g. data[3].paragraphs[0].qas[2]
    ]
)

CHUNKS = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("chunk_index", pa.int32(), nullable=False),
        pa.field("char_start", pa.int64(), nullable=False),
        pa.field("char_end", pa.int64(), nullable=False),
        pa.field("og_chunk", pa.string(), nullable=False),
        pa.field("title", pa.string()),
    ]
)

PAIRED_QUERIES = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("query", pa.string(), nullable=False),
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("chunk_ids", pa.list_(pa.string()), nullable=False),
        pa.field("answer", pa.string()),
        pa.field("answer_start", pa.int64()),
        pa.field("answer_end", pa.int64()),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("pairing", pa.string(), nullable=False),  # a conteb.names.Pairing value: span | llm | pseudo
        pa.field("source", pa.string(), nullable=False),
        pa.field("model", pa.string()),  # LLM rows: the model that paired or wrote the query
        pa.field("prompt_version", pa.string()),  # LLM rows: name@vN:<hash> of the prompt
    ]
)

QUARANTINE = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),  # source | chunking | pairing
        pa.field("reason", pa.string(), nullable=False),  # a QuarantineReason value
        pa.field("object_kind", pa.string(), nullable=False),  # document | query | answer
        pa.field("object_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string()),
        pa.field("source", pa.string(), nullable=False),  # file or dataset
        pa.field("row", pa.string(), nullable=False),  # where in the source, e.g. data[3].paragraphs[0]
        pa.field("detail", pa.string(), nullable=False),  # human-readable explanation
    ]
)

CONTEB_DOCUMENTS = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("chunk", pa.string(), nullable=False),  # text to embed (reformulated if enabled)
        pa.field("og_chunk", pa.string(), nullable=False),  # original text of the document span
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("chunk_index", pa.int32(), nullable=False),
        pa.field("char_start", pa.int64(), nullable=False),
        pa.field("char_end", pa.int64(), nullable=False),
        pa.field("title", pa.string()),
    ]
)

NECESSITY_COLUMNS = ("theme_missing", "answerable_alone", "needs_context")
"""The context-necessity labels of a published query (rule in ``curation/necessity.py``)."""

CONTEB_QUERIES = pa.schema(
    [
        *PAIRED_QUERIES,
        # the query names the document's theme, the gold chunk as embedded (``chunk``) does not
        pa.field("theme_missing", pa.bool_(), nullable=False),
        # LLM judgement: the gold chunk alone answers the query; null when no LLM judged it
        pa.field("answerable_alone", pa.bool_()),
        pa.field("needs_context", pa.bool_(), nullable=False),  # theme_missing or answerable_alone is False
    ]
)


def table_from_rows(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build a table of ``schema`` from row dicts (missing nullable keys become null)."""
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


# --- LLM stages -------------------------------------------------------------------------------
# Provenance columns shared by every LLM-produced row: which method produced it ("llm", or a
# clearly-labelled non-LLM fallback such as "mask"), the model, and the prompt tag
# (``name@vN:<hash>``, see llm/prompts.py). Non-LLM rows have null model/prompt.
_PROVENANCE = [
    pa.field("method", pa.string(), nullable=False),
    pa.field("model", pa.string()),
    pa.field("prompt_version", pa.string()),
]

THEMES = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("theme", pa.string(), nullable=False),  # the entity/topic queries name
        pa.field("aliases", pa.list_(pa.string()), nullable=False),  # other explicit names
        *_PROVENANCE,  # method: "llm" | offline (curation.themes.naming.offline_theme): "title" | "head" | "doc_id"
    ]
)

REFORMULATED_CHUNKS = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("chunk_index", pa.int32(), nullable=False),
        pa.field("og_chunk", pa.string(), nullable=False),
        pa.field("chunk", pa.string(), nullable=False),  # rewritten text (= og_chunk when kept)
        pa.field("theme", pa.string(), nullable=False),
        pa.field("leaked_mentions", pa.list_(pa.string()), nullable=False),  # theme names still present
        pa.field("lost_answers", pa.list_(pa.string()), nullable=False),  # answer spans no longer present
        pa.field("flagged", pa.bool_(), nullable=False),  # leaked_mentions or lost_answers non-empty
        # why the LLM's rewrite failed or was refused, in words (curation.llm_results.failure_reason); null otherwise
        pa.field("llm_failure", pa.string()),
        # method: "llm" | "mask" (offline fallback, or an LLM failure) | "unchanged" (first chunk)
        *_PROVENANCE,
    ]
)

REVIEWED_CHUNKS = pa.schema(
    [
        *REFORMULATED_CHUNKS,
        pa.field("review_status", pa.string(), nullable=False),  # accepted | edited | rejected | not_reviewed
        pa.field("reviewer", pa.string()),
    ]
)

SYNTHETIC_QUERIES = PAIRED_QUERIES  # same columns as queries; model and prompt_version filled

# --- pseudo-queries (offline, curation/pseudo_queries.py) ---------------------------------------
PSEUDO_QUERIES = PAIRED_QUERIES  # pairing "pseudo", source "pseudo"; answer = the sentence, offsets in the document

PSEUDO_SENTENCES = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("chunk_id", pa.string()),  # the chunk holding the whole sentence; null when it crosses chunks
        pa.field("char_start", pa.int64(), nullable=False),  # the sentence, in document coordinates
        pa.field("char_end", pa.int64(), nullable=False),
        pa.field("words", pa.int32(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),  # "selected", or why not (curation.pseudo_queries.Outcome)
        pa.field("query_id", pa.string()),  # the pseudo-query it became (selected rows only)
    ]
)

ANSWERABILITY = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("chunk_id", pa.string(), nullable=False),  # the gold chunk judged (text as embedded)
        pa.field("answerable_alone", pa.bool_(), nullable=False),  # the chunk alone answers the query
        pa.field("reason", pa.string(), nullable=False),  # the LLM's one-sentence justification
        *_PROVENANCE,  # method: "llm"
    ]
)

CHUNK_CONTEXTS = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("context", pa.string(), nullable=False),  # short text situating the chunk
        *_PROVENANCE,
    ]
)

REVIEW_ITEMS = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),  # f"{task}:{kind}:{object_id}"
        pa.field("task", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # reformulation | pairing | synthetic_query
        pa.field("object_id", pa.string(), nullable=False),  # chunk_id or query_id
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("original", pa.string()),  # e.g. og_chunk; null for new objects
        pa.field("proposed", pa.string(), nullable=False),  # what the reviewer accepts or edits
        pa.field("context", pa.string()),  # JSON: neighbouring chunks, query, answer, ...
        pa.field("flags", pa.list_(pa.string()), nullable=False),  # e.g. leak:Lyon, lost_answer:1978
        pa.field("flagged", pa.bool_(), nullable=False),
        pa.field("method", pa.string(), nullable=False),
        pa.field("proposed_sha256", pa.string(), nullable=False),  # detects a changed proposal
    ]
)


# --- evaluation -------------------------------------------------------------------------------


def per_query_metrics_schema(metrics: Sequence[str]) -> pa.Schema:
    """The per-query metrics of one system on one task (``runs/<task>/<system>.metrics.parquet``).

    Columns: ``query_id`` (string), then one float64 column per metric, in the order of ``metrics``
    (e.g. ``ndcg@10``, ``map@5``, ``mrr@10``: the names of ``evaluation/metrics/retrieval.py``), the value of
    that metric for the query. Every field is nullable (as pyarrow infers them from the written
    arrays, so files written before this schema existed read back the same), although no value is
    ever null. The metric columns depend on the configured cut-offs, hence a function.
    """
    return pa.schema([pa.field("query_id", pa.string()), *(pa.field(name, pa.float64()) for name in metrics)])
