"""Reading LLM results back: which are usable, why the others are not, and their quarantine records.

Every LLM stage reports an unusable result the same way: :func:`llm_failure` (reason ``llm_failed``,
source ``llm:<model>``, row = the request's custom id, detail = why).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from conteb.names import Stage
from curation.quarantine import QuarantineReason, QuarantineRecord
from llm.types import LLMResult, Validator


def result_problem(result: LLMResult | None, validator: Validator | None = None) -> str:
    """Why ``result`` is unusable (``""`` when usable): missing, failed, or refused by ``validator``."""
    if result is None:
        return "no result for this request"
    if result.value is None:
        return f"the LLM call failed: {result.error or 'no value and no error'}"
    problem = validator(result.value) if validator else None
    return f"invalid answer: {problem}" if problem else ""


INVALID_ANSWER = "invalid answer: "
"""How the client's error of an answer refused by the schema or the validator (after its re-ask) begins."""


def failure_reason(result: LLMResult | None, validator: Validator | None = None, answer: str = "answer") -> str:
    """Why ``result`` gives no usable ``answer`` (e.g. "rewrite"), in the words a reviewer reads on the item's
    ``llm_failed`` flag (``""`` when usable): "the LLM's rewrite was refused: <why>" (by the schema or a detector,
    after the client's re-ask, or remembered from an earlier run), "the LLM call failed after 5 tries: <error>"
    (transport or HTTP errors after the client's retries), or "the LLM gave no answer for this item"."""
    if result is None:
        return f"the LLM gave no {answer} for this item (no result for its request)"
    if result.value is None:
        error = result.error or "no value and no error"
        if error.startswith(INVALID_ANSWER):
            return f"the LLM's {answer} was refused: {error.removeprefix(INVALID_ANSWER)}"
        tries = f" after {result.attempts} tr{'y' if result.attempts == 1 else 'ies'}" if result.attempts else ""
        return f"the LLM call failed{tries}: {error}"
    problem = validator(result.value) if validator else None
    return f"the LLM's {answer} was refused: {problem}" if problem else ""


def chunk_results(
    results: Mapping[str, LLMResult],
    chunks: pa.Table,
    custom_id_prefix: str,
    validator: Validator | None,
    failures: list[tuple[str, str]],
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(chunk_id, doc_id, value)`` for each chunk with a usable result (custom id
    ``<prefix><chunk_id>``), in chunk order; ``(chunk_id, problem)`` of the others go to ``failures``."""
    for chunk_id, doc_id in zip(
        chunks.column("chunk_id").to_pylist(), chunks.column("doc_id").to_pylist(), strict=True
    ):
        result = results.get(f"{custom_id_prefix}{chunk_id}")
        problem = result_problem(result, validator)
        # ``problem`` is "" only for a result with a value; the explicit checks say so to the type checker.
        if not problem and result is not None and result.value is not None:
            yield chunk_id, doc_id, result.value
        else:
            failures.append((chunk_id, problem))


def llm_failure(
    stage: Stage, kind: str, object_id: str, doc_id: str, custom_id: str, model: str | None, problem: str
) -> QuarantineRecord:
    """A quarantine record for a failed LLM item (source ``llm:<model>``, row = the custom id)."""
    source = f"llm:{model or 'unknown'}"
    return QuarantineRecord(stage, QuarantineReason.LLM_FAILED, kind, object_id, doc_id, source, custom_id, problem)


def chunk_failures(
    stage: Stage, custom_id_prefix: str, failures: Iterable[tuple[str, str]], chunks: pa.Table, model: str
) -> list[QuarantineRecord]:
    """The records of the ``(chunk_id, problem)`` failures of a per-chunk stage (custom id ``<prefix><chunk_id>``,
    as :func:`chunk_results` reads them); ``chunks`` gives each chunk's document."""
    doc_of = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("doc_id").to_pylist(), strict=True))
    return [
        llm_failure(stage, "chunk", cid, doc_of[cid], f"{custom_id_prefix}{cid}", model, problem)
        for cid, problem in failures
    ]
