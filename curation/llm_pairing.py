"""Stage 2, second method: LLM pairing, for queries with no usable answer span.

Some sources have free-form answers, or queries about a whole document, so the span method
(:mod:`curation.pairing`) cannot place them. Here the LLM sees the document's chunks, numbered in
order, and the query (and its answer when there is one), and names the chunk(s) that answer it,
most relevant first, or none (an empty list).

Rules (documented in the dataset card):

* ``chunk_id`` is the first index returned, ``chunk_ids`` all of them in the returned order.
* ``answer`` is the query's first answer text when it has one; ``answer_start``/``answer_end``
  are its span when that span matches the document (:func:`curation.pairing.check_answer`),
  else null (counted as ``answer_without_span``).
* Quarantined (``object_kind="query"``, stage ``llm_pairing``): an empty list (``llm_no_chunk``); a missing, failed or
  invalid call (``llm_failed``, detail = the client's error); a document that is unknown
  (``unknown_document``) or has no chunks (``document_quarantined``) — those are never requested.
* ``pairing: both`` runs the span and LLM methods: :func:`combine_pairings` keeps the span row
  where there is one (it is exact), else the LLM row; :func:`pairing_agreement` measures how
  often the two agree on the queries both paired.

Prompt caching: the prompt is the fixed system message, then the document (title and numbered chunks), then
the query last, so every query of a document shares that prefix; the requests carry ``prefix_group`` =
``doc_id`` and are listed by document, so the client sends them together (``llm/scheduling.py``).

Not registered in ``PAIRING_METHODS`` (that takes tables only; this method needs an LLM client).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conteb.names import Pairing, Stage
from conteb.perf import gc_paused
from conteb.schemas import PAIRED_QUERIES
from conteb.text import is_blank
from curation.lookups import by_document, chunk_texts, document_titles
from curation.pairing import DocumentChunks, PairingResult, check_answer, index_chunks
from curation.quarantine import QuarantineReason, QuarantineRecord
from llm.prompts import load_prompt
from llm.types import LLMRequest, LLMResult, Validator

STAGE = Stage.LLM_PAIRING
PROMPT_NAME = "pairing"
CUSTOM_ID_PREFIX = "pair:"
MAX_DISAGREEMENTS = 20


# --- requests ---------------------------------------------------------------------------------


def pairing_schema(n_chunks: int) -> dict[str, Any]:
    """Strict JSON schema ``{"chunk_indices": [int in 0..n_chunks-1]}``; an empty list means none."""
    if n_chunks < 1:
        raise ValueError(f"n_chunks must be at least 1, got {n_chunks}")
    indices = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": n_chunks - 1}}
    return {
        "type": "object",
        "properties": {"chunk_indices": indices},
        "required": ["chunk_indices"],
        "additionalProperties": False,
    }


def pairing_validator(n_chunks: int) -> Validator:
    """Validator: a list of distinct integer indices in ``0..n_chunks-1`` (message names the range)."""

    def validate(value: dict[str, Any]) -> str | None:
        indices = value.get("chunk_indices")
        valid_range = f"valid indices are 0..{n_chunks - 1}"
        if not isinstance(indices, list):
            return f'"chunk_indices" must be a list of chunk indices ({valid_range}; [] when none answers)'
        seen: set[int] = set()
        for index in indices:
            if not isinstance(index, int) or isinstance(index, bool):
                return f"chunk index {index!r} is not an integer; {valid_range}"
            if not 0 <= index < n_chunks:
                return f"chunk index {index} does not exist; {valid_range}"
            if index in seen:
                return f"chunk index {index} is listed twice; list each chunk once ({valid_range})"
            seen.add(index)
        return None

    return validate


def build_pairing_requests(queries: pa.Table, documents: pa.Table, chunks: pa.Table) -> list[LLMRequest]:
    """One request per query (``pair:<query_id>``) whose document has chunks, grouped by document
    (documents in order of first appearance, queries in table order within one).

    The prompt lists the document's chunks in order (numbered from 0), then the query and its first
    answer text when it has one; ``prefix_group`` is the ``doc_id``. Other queries are reported by
    :func:`apply_llm_pairing`.
    """
    prompt = load_prompt(PROMPT_NAME)
    titles = document_titles(documents)
    by_doc, texts = index_chunks(chunks), chunk_texts(chunks)
    requests = []
    for query in by_document(queries.to_pylist()):
        doc_chunks = by_doc.get(query["doc_id"])
        if query["doc_id"] not in titles or doc_chunks is None:
            continue
        n_chunks = len(doc_chunks.ids)
        messages = prompt.messages(
            title=titles[query["doc_id"]] or query["doc_id"],
            chunks=[texts[cid] for cid in doc_chunks.ids],
            query=query["query"],
            answer=_first_answer_text(query) or "",
        )
        requests.append(
            LLMRequest(
                custom_id=f"{CUSTOM_ID_PREFIX}{query['query_id']}",
                messages=messages,
                schema_name="chunk_pairing",
                schema=pairing_schema(n_chunks),
                prompt_tag=prompt.tag,
                validator=pairing_validator(n_chunks),
                prefix_group=query["doc_id"],
            )
        )
    return requests


def _first_answer_text(query: dict) -> str | None:
    """The query's first answer text, or ``None`` when it has no answer or an empty one."""
    answers = query["answers"]
    if not answers or is_blank(answers[0]["text"]):
        return None
    return answers[0]["text"]


# --- results ----------------------------------------------------------------------------------


def apply_llm_pairing(
    queries: pa.Table,
    documents: pa.Table,
    chunks: pa.Table,
    results: dict[str, LLMResult],
    model: str,
    prompt_version: str,
) -> PairingResult:
    """``PAIRED_QUERIES`` rows (``pairing="llm"``) and quarantine from the LLM's answers (rules in the module doc).

    Stats: ``queries``, ``paired``, ``none``, ``failed`` (always present), plus ``missing_document``,
    ``multi_chunk`` and ``answer_without_span`` when non-zero. Rows also carry ``model`` and
    ``prompt_version`` (dropped by ``PairingResult.table()`` until ``PAIRED_QUERIES`` has them).
    """
    texts = dict(zip(documents.column("doc_id").to_pylist(), documents.column("text").to_pylist(), strict=True))
    by_doc = index_chunks(chunks)
    result = PairingResult(stats={"queries": queries.num_rows, "paired": 0, "none": 0, "failed": 0})
    provenance = {"model": model, "prompt_version": prompt_version}
    with gc_paused():
        for query in queries.to_pylist():
            _apply_one(query, texts, by_doc, results, provenance, result)
    result.stats["paired"] = len(result.rows)
    return result


def _apply_one(
    query: dict,
    texts: dict[str, str],
    by_doc: dict[str, DocumentChunks],
    results: dict[str, LLMResult],
    provenance: dict[str, str],
    result: PairingResult,
) -> None:
    """Pair one query from its LLM result, or quarantine it."""
    doc_id = query["doc_id"]

    def refuse(reason: QuarantineReason, detail: str, counter: str) -> None:
        record = QuarantineRecord(
            STAGE, reason, "query", query["query_id"], doc_id, query["source"], query["source_row"], detail
        )
        result.quarantine.append(record)
        result.count(counter)

    doc_chunks = by_doc.get(doc_id)
    if doc_id not in texts:
        refuse(
            QuarantineReason.UNKNOWN_DOCUMENT, f"document {doc_id!r} is not in the source documents", "missing_document"
        )
        return
    if doc_chunks is None:
        refuse(QuarantineReason.DOCUMENT_QUARANTINED, f"document {doc_id!r} has no chunks", "missing_document")
        return
    indices, problem = _read_indices(results.get(f"{CUSTOM_ID_PREFIX}{query['query_id']}"), query, doc_chunks)
    if indices is None:
        refuse(QuarantineReason.LLM_FAILED, problem, "failed")
    elif not indices:
        n_chunks = len(doc_chunks.ids)
        detail = f"the LLM ({provenance['model']}) found none of the document's {n_chunks} chunks to answer the query"
        refuse(QuarantineReason.LLM_NO_CHUNK, detail, "none")
    else:
        result.rows.append(_paired_row(query, texts[doc_id], [doc_chunks.ids[i] for i in indices], provenance, result))


def _read_indices(
    llm_result: LLMResult | None, query: dict, doc_chunks: DocumentChunks
) -> tuple[list[int] | None, str]:
    """``(indices, "")`` from a usable result, else ``(None, why)``; the answer is validated again here."""
    if llm_result is None:
        return None, f"no LLM result for {CUSTOM_ID_PREFIX}{query['query_id']}"
    value = llm_result.value
    if not llm_result.ok or value is None:
        return None, llm_result.error or "LLM call failed without an error message"
    problem = pairing_validator(len(doc_chunks.ids))(value)
    if problem is not None:
        return None, f"invalid answer {value!r}: {problem}"
    return list(value["chunk_indices"]), ""


def _paired_row(
    query: dict, text: str, chunk_ids: list[str], provenance: dict[str, str], result: PairingResult
) -> dict:
    """The ``PAIRED_QUERIES`` row of an LLM-paired query (answer span only when it matches ``text``)."""
    answer = _first_answer_text(query)
    start = end = None
    if answer is not None:
        char_start = query["answers"][0]["char_start"]
        if char_start is not None and check_answer(text, answer, char_start) is None:
            start, end = char_start, char_start + len(answer)
        else:
            result.count("answer_without_span")
    if len(chunk_ids) > 1:
        result.count("multi_chunk")
    return {
        "query_id": query["query_id"],
        "query": query["query"],
        "chunk_id": chunk_ids[0],
        "chunk_ids": chunk_ids,
        "answer": answer,
        "answer_start": start,
        "answer_end": end,
        "doc_id": query["doc_id"],
        "pairing": Pairing.LLM,
        "source": query["source"],
        **provenance,
    }


# --- span vs LLM --------------------------------------------------------------------------------


def pairing_agreement(span: pa.Table, llm: pa.Table) -> dict[str, float | int | list[str]]:
    """Agreement of two ``PAIRED_QUERIES`` tables over the queries both paired.

    ``count`` (queries in both), ``exact`` / ``exact_rate`` (same ``chunk_id``), ``contained`` /
    ``contained_rate`` (LLM ``chunk_id`` among the span ``chunk_ids``), ``span_only``, ``llm_only``,
    and ``disagreements``: up to 20 query ids whose ``chunk_id`` differs, those outside the span's
    ``chunk_ids`` first, then by id. Rates are 0.0 when ``count`` is 0.
    """
    span_ids = dict(zip(span.column("query_id").to_pylist(), span.column("chunk_ids").to_pylist(), strict=True))
    span_gold = dict(zip(span.column("query_id").to_pylist(), span.column("chunk_id").to_pylist(), strict=True))
    llm_gold = dict(zip(llm.column("query_id").to_pylist(), llm.column("chunk_id").to_pylist(), strict=True))
    common = span_gold.keys() & llm_gold.keys()
    exact = {qid for qid in common if llm_gold[qid] == span_gold[qid]}
    contained = {qid for qid in common if llm_gold[qid] in span_ids[qid]}
    differing = sorted(common - exact, key=lambda qid: (qid in contained, qid))
    count = len(common)
    return {
        "count": count,
        "exact": len(exact),
        "exact_rate": len(exact) / count if count else 0.0,
        "contained": len(contained),
        "contained_rate": len(contained) / count if count else 0.0,
        "span_only": len(span_gold.keys() - llm_gold.keys()),
        "llm_only": len(llm_gold.keys() - span_gold.keys()),
        "disagreements": differing[:MAX_DISAGREEMENTS],
    }


def combine_pairings(span: pa.Table, llm: pa.Table) -> pa.Table:
    """``pairing: both``: every span row (it is exact), then the LLM rows of queries the span left unpaired.

    Both inputs are ``PAIRED_QUERIES`` tables (extra columns are dropped); each row's ``pairing``
    says which method produced it.
    """
    span_rows, llm_rows = _as_paired(span), _as_paired(llm)
    llm_only = llm_rows.filter(pc.invert(pc.is_in(llm_rows.column("query_id"), value_set=span_rows.column("query_id"))))
    return pa.concat_tables([span_rows, llm_only])


def _as_paired(table: pa.Table) -> pa.Table:
    """``table`` restricted to the ``PAIRED_QUERIES`` columns, with that schema."""
    return table.select(PAIRED_QUERIES.names).cast(PAIRED_QUERIES)
