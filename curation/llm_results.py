"""Reading LLM results back per chunk: which are usable, and why the others are not."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from llm.types import LLMResult, Validator


def result_problem(result: LLMResult | None, validator: Validator | None = None) -> str:
    """Why ``result`` is unusable (``""`` when usable): missing, failed, or refused by ``validator``."""
    if result is None:
        return "no result for this request"
    if result.value is None:
        return f"the LLM call failed: {result.error or 'no value and no error'}"
    problem = validator(result.value) if validator else None
    return f"invalid answer: {problem}" if problem else ""


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
        if problem:
            failures.append((chunk_id, problem))
        else:
            yield chunk_id, doc_id, result.value
