"""Whether a query can be answered from its gold chunk alone: a cached, structured LLM judgement.

One request per published query (custom id ``answerable:<query_id>``, prompt
``llm/prompts/answerable_alone.yaml``, strict JSON ``{"answerable": boolean, "reason": string}``):
the model sees the query and the gold ``chunk_id`` chunk *as embedded* (the ``chunk`` column of
``CONTEB_DOCUMENTS``, after reformulation and review), nothing else. The answers become the
``ANSWERABILITY`` stage table that :func:`curation.necessity.label_queries` reads
(``answerable_alone``); queries whose call failed get no row (their label stays null) and a
quarantine record (stage ``answerability``, reason ``llm_failed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from conteb.names import Stage
from conteb.schemas import ANSWERABILITY, table_from_rows
from conteb.text import is_blank
from curation.llm_results import llm_failure, result_problem
from curation.quarantine import QuarantineRecord
from llm.prompts import load_prompt
from llm.types import LLMRequest, LLMResult

STAGE = Stage.ANSWERABILITY
PROMPT_NAME = "answerable_alone"
CUSTOM_ID_PREFIX = "answerable:"
MAX_REASON_CHARS = 400

ANSWERABLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answerable": {"type": "boolean", "description": "The passage alone answers the query."},
        "reason": {"type": "string", "description": "One sentence: why."},
    },
    "required": ["answerable", "reason"],
    "additionalProperties": False,
}


def custom_id(query_id: str) -> str:
    """``answerable:<query_id>``: the request id of a query's judgement."""
    return f"{CUSTOM_ID_PREFIX}{query_id}"


def validate_answerable(value: Mapping[str, Any]) -> str | None:
    """``None`` when ``answerable`` is a boolean and ``reason`` a non-empty string of at most 400
    characters, else the message sent back to the model."""
    if not isinstance(value.get("answerable"), bool):
        return '"answerable" must be true or false'
    reason = value.get("reason")
    if not isinstance(reason, str) or is_blank(reason):
        return '"reason" must be a non-empty sentence saying why'
    if len(reason.strip()) > MAX_REASON_CHARS:
        return f'"reason" has {len(reason.strip())} characters: one sentence of at most {MAX_REASON_CHARS}'
    return None


def _texts(documents: pa.Table) -> dict[str, str]:
    return dict(zip(documents.column("chunk_id").to_pylist(), documents.column("chunk").to_pylist(), strict=True))


def build_answerability_requests(queries: pa.Table, documents: pa.Table) -> list[LLMRequest]:
    """One request per query of ``queries`` (query order) on its gold chunk's text in ``documents``
    (``CONTEB_DOCUMENTS``); raises ``ValueError`` naming the row when the gold chunk is absent."""
    prompt = load_prompt(PROMPT_NAME)
    texts = _texts(documents)
    requests = []
    for row, (qid, text, chunk_id) in enumerate(
        zip(*(queries.column(name).to_pylist() for name in ("query_id", "query", "chunk_id")), strict=True)
    ):
        if chunk_id not in texts:
            raise ValueError(f"queries: row {row}: query {qid!r}: gold chunk_id {chunk_id!r} is not in the documents")
        requests.append(
            LLMRequest(
                custom_id=custom_id(qid),
                messages=prompt.messages(query=text, chunk=texts[chunk_id]),
                schema_name=PROMPT_NAME,
                schema=ANSWERABLE_SCHEMA,
                prompt_tag=prompt.tag,
                validator=validate_answerable,
            )
        )
    return requests


def answerability_table(
    queries: pa.Table, results: Mapping[str, LLMResult], model: str | None, prompt_version: str | None = None
) -> tuple[pa.Table, list[QuarantineRecord]]:
    """``ANSWERABILITY`` rows (query order) for the queries with a valid result, and a quarantine
    record for each of the others (missing, failed or invalid answer). ``model``: the configured
    model, used where a result does not name one; ``prompt_version``: the tag the requests were sent with
    (:func:`llm.prompts.sent_prompt_tag`), default the prompt's current tag."""
    tag = prompt_version or load_prompt(PROMPT_NAME).tag
    rows, failures = [], []
    for qid, chunk_id, doc_id in zip(
        *(queries.column(name).to_pylist() for name in ("query_id", "chunk_id", "doc_id")), strict=True
    ):
        result = results.get(custom_id(qid))
        problem = result_problem(result, validate_answerable)
        if problem or result is None or result.value is None:
            used = (result.model if result else None) or model
            failures.append(llm_failure(STAGE, "query", qid, doc_id, custom_id(qid), used, problem))
            continue
        rows.append(
            {
                "query_id": qid,
                "chunk_id": chunk_id,
                "answerable_alone": result.value["answerable"],
                "reason": result.value["reason"].strip(),
                "method": "llm",
                "model": result.model or model,
                "prompt_version": tag,
            }
        )
    return table_from_rows(rows, ANSWERABILITY), failures
