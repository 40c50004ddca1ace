"""The themes stage: one ``THEMES`` row per document, from an LLM when one is configured, else offline.

The LLM is asked for ``{theme, aliases}`` (:data:`THEME_SCHEMA`, prompt :data:`PROMPT_NAME`, one request per
document with a first chunk: :func:`build_theme_requests`); an answer is usable when :func:`validate_theme` accepts
it. :func:`themes_table` turns the results into the table: method ``"llm"`` for a valid answer, else the offline
theme (:func:`curation.themes.naming.offline_theme`) and, when an LLM was asked, a quarantine record, so no failure is
silent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from conteb.names import Stage
from conteb.schemas import THEMES, table_from_rows
from conteb.text import is_blank
from curation.llm_results import llm_failure, result_problem
from curation.quarantine import QuarantineRecord
from curation.themes.mentions import clean_name, fold
from curation.themes.naming import HEAD_CHARACTERS, offline_theme
from llm.prompts import load_prompt
from llm.types import LLMRequest, LLMResult

STAGE = Stage.THEMES
PROMPT_NAME = "theme"
MAX_THEME_LENGTH = 150

THEME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "theme": {"type": "string", "description": "The main entity or topic, as queries would name it."},
        "aliases": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Other names or short forms the document uses for it.",
        },
    },
    "required": ["theme", "aliases"],
    "additionalProperties": False,
}


def theme_custom_id(doc_id: str) -> str:
    """``theme:<doc_id>``: the request id of a document's theme extraction."""
    return f"theme:{doc_id}"


def validate_theme(value: Mapping[str, Any]) -> str | None:
    """``None`` when ``value`` names a usable theme, else the message sent back to the model."""
    theme = value.get("theme")
    if not isinstance(theme, str) or is_blank(theme):
        return "the theme is empty: name the main entity or topic of the document"
    if len(theme.strip()) > MAX_THEME_LENGTH:
        return f"the theme has {len(theme.strip())} characters: give the short name of the entity or topic only"
    aliases = value.get("aliases")
    if not isinstance(aliases, list) or not all(isinstance(alias, str) for alias in aliases):
        return "aliases must be a list of strings (an empty list when there are none)"
    return None


def build_theme_requests(documents: pa.Table, first_chunks: Mapping[str, str]) -> list[LLMRequest]:
    """One request per document of ``documents`` (``SOURCE_DOCUMENTS``) that has a first chunk.

    The prompt gets the title (``"(untitled)"`` when null) and, as the opening, the document's
    first chunk from ``first_chunks`` (``doc_id -> og_chunk``). Documents without a first chunk
    (quarantined at chunking) have nothing to reformulate and get no request.
    """
    prompt = load_prompt(PROMPT_NAME)
    requests = []
    for doc_id, title in zip(
        documents.column("doc_id").to_pylist(), documents.column("title").to_pylist(), strict=True
    ):
        if doc_id not in first_chunks:
            continue
        messages = prompt.messages(title=title or "(untitled)", opening=first_chunks[doc_id])
        requests.append(
            LLMRequest(theme_custom_id(doc_id), messages, "theme", THEME_SCHEMA, prompt.tag, validator=validate_theme)
        )
    return requests


def themes_table(
    documents: pa.Table,
    results: Mapping[str, LLMResult] | None,
    model: str | None,
    heads: Mapping[str, str] | None = None,
    prompt_version: str | None = None,
) -> tuple[pa.Table, list[QuarantineRecord]]:
    """A ``THEMES`` table with one row per document of ``documents``, and the LLM failures.

    ``results is None`` (no LLM configured): every row is the offline theme (:func:`offline_theme`:
    method ``"title"``, ``"head"`` or ``"doc_id"``), nothing is recorded. Otherwise a document whose
    result is valid gets method ``"llm"`` (the model is the result's, else ``model``; the prompt is
    the theme prompt's tag); a document whose result is missing, failed or invalid falls back to the
    offline theme *and* gets a quarantine record (reason ``llm_failed``, stage ``themes``, row = the
    request's custom id), so no failure is silent. ``heads``: ``doc_id -> first chunk`` (what the
    theme prompt reads as the opening); a document missing there uses the first ``HEAD_CHARACTERS``
    characters of its text. Pass the documents that were asked about (those with chunks). ``prompt_version``: the tag
    the requests were sent with (:func:`llm.prompts.sent_prompt_tag`); default: the theme prompt's current tag.
    """
    rows, failures = [], []
    tag = (prompt_version or load_prompt(PROMPT_NAME).tag) if results is not None else None
    for doc_id, title, text in zip(
        *(documents.column(name).to_pylist() for name in ("doc_id", "title", "text")), strict=True
    ):
        if results is not None:
            result = results.get(theme_custom_id(doc_id))
            problem = result_problem(result, validate_theme)
            if not problem and result is not None and result.value is not None:
                rows.append(_llm_theme_row(doc_id, result.value, result.model or model, tag))
                continue
            used_model = (result.model if result else None) or model
            failures.append(
                llm_failure(STAGE, "document", doc_id, doc_id, theme_custom_id(doc_id), used_model, problem)
            )
        head = heads.get(doc_id) if heads is not None else None
        rows.append(_offline_theme_row(doc_id, title, text[:HEAD_CHARACTERS] if head is None else head))
    return table_from_rows(rows, THEMES), failures


def _llm_theme_row(doc_id: str, value: Mapping[str, Any], model: str | None, tag: str | None) -> dict:
    """A ``THEMES`` row from a validated LLM answer (aliases cleaned, deduplicated, theme removed)."""
    theme = clean_name(value["theme"])
    aliases: list[str] = []
    seen = {fold(theme)}
    for alias in map(clean_name, value.get("aliases") or []):
        if alias and fold(alias) not in seen:
            seen.add(fold(alias))
            aliases.append(alias)
    return {
        "doc_id": doc_id,
        "theme": theme,
        "aliases": aliases,
        "method": "llm",
        "model": model,
        "prompt_version": tag,
    }


def _offline_theme_row(doc_id: str, title: str | None, head: str) -> dict:
    """A ``THEMES`` row of :func:`offline_theme` (no model or prompt)."""
    theme, aliases, method = offline_theme(title, head, doc_id)
    return {"doc_id": doc_id, "theme": theme or doc_id, "aliases": aliases, "method": method}
