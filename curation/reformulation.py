"""Stage 3: rewriting chunks so that they no longer name their document's theme.

Every chunk except the first of each document (``chunk_index > 0``) is rewritten to drop explicit
mentions of the theme, keeping every other fact; the first chunk is kept (method ``"unchanged"``)
so the document still introduces its subject. ``og_chunk`` always keeps the original text.

Methods (the ``method`` column of ``REFORMULATED_CHUNKS``):

* ``"llm"``: the model's validated rewrite (``model`` and ``prompt_version`` set);
* ``"mask"``: the deterministic non-LLM fallback, :func:`curation.themes.mentions.mask_mentions` (every
  mention replaced by "the subject"; ``model``/``prompt_version`` null). Used for every chunk when
  no LLM is configured (``results is None``), and for a chunk whose LLM call failed or whose rewrite was refused
  (after the client's retries and re-ask, by the schema or by :func:`rewrite_validator`) — that chunk
  is also reported in ``failures`` (a quarantine record, reason ``llm_failed``), counted in
  ``stats["failed"]`` and carries the reason in words in ``llm_failure``
  (:func:`curation.llm_results.failure_reason`): it never looks like an LLM rewrite, and its review item waits
  for a person, flagged, with the mask as its proposal (:mod:`curation.review_items`);
* ``"unchanged"``: first chunks (``chunk == og_chunk``).

Leak detection (:func:`detect_leaks`) runs on every rewritten chunk: theme mentions still present
(``leaked_mentions``) and answers of the chunk's queries that occurred verbatim in ``og_chunk`` but
no longer occur in the rewrite (``lost_answers``); either makes the row ``flagged``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from conteb.names import Stage
from conteb.schemas import REFORMULATED_CHUNKS, table_from_rows
from conteb.text import is_blank
from curation.llm_results import failure_reason, llm_failure, result_problem
from curation.quarantine import QuarantineRecord
from curation.themes.mentions import find_mentions, mask_mentions, theme_variants
from llm.prompts import load_prompt
from llm.types import LLMRequest, LLMResult, Validator

STAGE = Stage.REFORMULATION
PROMPT_NAME = "reformulation"
MIN_LENGTH_RATIO = 0.5
MAX_LENGTH_RATIO = 1.5
OUTCOMES: dict[str, str] = {
    "kept_first": "first chunks left unchanged (each document's first chunk introduces its subject)",
    "rewritten": "chunks rewritten by the LLM",
    "rewrite_unchanged": "chunks the LLM returned unchanged",
    "masked": "chunks masked (theme mentions replaced by 'the subject')",
    "mask_unchanged": "chunks left unchanged by masking (no theme mention to mask)",
}
"""What happened to each chunk (the key, one per row of ``REFORMULATED_CHUNKS``: :func:`chunk_outcome`) and the words
a reader is told: the stage's log and metadata (``count/<key>``) and the dataset card count these."""
STAT_KEYS = (*OUTCOMES, "failed", "flagged", "leaks", "lost_answers")

REFORMULATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"rewritten": {"type": "string", "description": "The whole passage, rewritten."}},
    "required": ["rewritten"],
    "additionalProperties": False,
}


@dataclass
class ReformulationOutput:
    """``table``: ``REFORMULATED_CHUNKS``, one row per input chunk, in input order.

    ``stats`` (every key of ``STAT_KEYS`` present): one count per :data:`OUTCOMES` key (they add up to the rows:
    ``kept_first`` first chunks, ``rewritten`` / ``rewrite_unchanged`` method llm with / without a change,
    ``masked`` / ``mask_unchanged`` method mask with / without a mention replaced, LLM failures included), then
    ``failed`` (LLM failures, masked instead, also in ``failures``), ``flagged``, ``leaks`` (chunks still mentioning
    the theme) and ``lost_answers`` (chunks that lost at least one answer).
    """

    table: pa.Table
    stats: dict[str, int] = field(default_factory=dict)
    failures: list[QuarantineRecord] = field(default_factory=list)


def chunk_outcome(method: str, chunk: str, og_chunk: str) -> str:
    """The :data:`OUTCOMES` key of a reformulated row: its ``method`` and whether ``chunk`` differs from
    ``og_chunk``."""
    if method == "unchanged":
        return "kept_first"
    changed = chunk != og_chunk
    if method == "llm":
        return "rewritten" if changed else "rewrite_unchanged"
    if method == "mask":
        return "masked" if changed else "mask_unchanged"
    raise ValueError(f"unknown reformulation method {method!r}")


def outcome_counts(reformulated: pa.Table) -> dict[str, int]:
    """``{OUTCOMES words: rows}`` of a ``REFORMULATED_CHUNKS`` table, in :data:`OUTCOMES` order, outcomes that
    happened only (what the dataset card lists)."""
    columns = (reformulated.column(name).to_pylist() for name in ("method", "chunk", "og_chunk"))
    outcomes = [chunk_outcome(*row) for row in zip(*columns, strict=True)]
    return {words: outcomes.count(key) for key, words in OUTCOMES.items() if key in outcomes}


def describe_stats(stats: Mapping[str, int]) -> str:
    """``stats`` (:class:`ReformulationOutput`) in words for the stage's log: ``<outcome>: <count>`` for each outcome
    that happened (:data:`OUTCOMES`), then the LLM failures (when any) and the flags, e.g. ``chunks left unchanged
    by masking (no theme mention to mask): 38, ...; flagged for review: 0 (still name the theme: 0, lost an answer:
    0)``."""
    done = [f"{words}: {stats[key]}" for key, words in OUTCOMES.items() if stats.get(key)]
    failed = f"; LLM calls failed (masked instead): {stats['failed']}" if stats.get("failed") else ""
    return (
        f"{', '.join(done) or 'no chunks'}{failed}; flagged for review: {stats.get('flagged', 0)} "
        f"(still name the theme: {stats.get('leaks', 0)}, lost an answer: {stats.get('lost_answers', 0)})"
    )


def reformulation_custom_id(chunk_id: str) -> str:
    """``reformulate:<chunk_id>``: the request id of a chunk's rewrite."""
    return f"reformulate:{chunk_id}"


def rewrite_validator(original: str) -> Validator:
    """A validator refusing an empty rewrite, or one outside 50%–150% of ``original``'s length."""

    def validate(value: dict[str, Any]) -> str | None:
        rewritten = value.get("rewritten")
        if not isinstance(rewritten, str) or is_blank(rewritten):
            return "the rewrite is empty: return the whole passage with only the mentions of the subject replaced"
        size, limit_low, limit_high = len(rewritten), MIN_LENGTH_RATIO * len(original), MAX_LENGTH_RATIO * len(original)
        if size < limit_low:
            return (
                f"the rewrite has {size} characters, less than half of the original's {len(original)}: "
                "keep every fact and sentence, only replace the mentions of the subject"
            )
        if size > limit_high:
            return (
                f"the rewrite has {size} characters, more than 150% of the original's {len(original)}: "
                "do not add information, only replace the mentions of the subject"
            )
        return None

    return validate


def _themes_by_doc(themes: pa.Table, doc_ids: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
    """``doc_id -> (theme, aliases)``; raises ``ValueError`` when a document of ``doc_ids`` has none."""
    by_doc = {
        doc_id: (theme, aliases or [])
        for doc_id, theme, aliases in zip(
            *(themes.column(name).to_pylist() for name in ("doc_id", "theme", "aliases")), strict=True
        )
    }
    missing = sorted(set(doc_ids) - set(by_doc))
    if missing:
        raise ValueError(f"no theme for documents {missing[:10]} ({len(missing)} in all): build the themes first")
    return by_doc


def build_reformulation_requests(chunks: pa.Table, themes: pa.Table) -> list[LLMRequest]:
    """One request per chunk of ``chunks`` (``CHUNKS``) with ``chunk_index > 0``, in input order.

    The prompt gets the document's ``theme``, ``aliases`` (from ``themes``, ``THEMES``) and the
    ``chunk`` text; the validator is :func:`rewrite_validator` of that chunk. Raises
    ``ValueError`` when a chunk's document has no theme.
    """
    prompt = load_prompt(PROMPT_NAME)
    by_doc = _themes_by_doc(themes, chunks.column("doc_id").to_pylist())
    requests = []
    for row in chunks.select(["chunk_id", "doc_id", "chunk_index", "og_chunk"]).to_pylist():
        if row["chunk_index"] == 0:
            continue
        theme, aliases = by_doc[row["doc_id"]]
        messages = prompt.messages(theme=theme, aliases=aliases, chunk=row["og_chunk"])
        requests.append(
            LLMRequest(
                reformulation_custom_id(row["chunk_id"]),
                messages,
                "reformulation",
                REFORMULATION_SCHEMA,
                prompt.tag,
                validator=rewrite_validator(row["og_chunk"]),
            )
        )
    return requests


def detect_leaks(rewritten: str, variants: Sequence[str], answers: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(mentions, lost)``: theme mentions still in ``rewritten`` (distinct matched texts, in order
    of first appearance) and the ``answers`` (distinct, non-blank, in order) that no longer occur
    verbatim (case-sensitive substring) in ``rewritten``."""
    mentions = list(dict.fromkeys(text for _, _, text in find_mentions(rewritten, variants)))
    lost = [answer for answer in dict.fromkeys(answers) if answer.strip() and answer not in rewritten]
    return mentions, lost


def apply_reformulations(
    chunks: pa.Table,
    themes: pa.Table,
    answers_by_chunk: Mapping[str, Sequence[str]],
    results: Mapping[str, LLMResult] | None,
    model: str | None,
    prompt_version: str | None,
    theme_failures: Mapping[str, str] | None = None,
) -> ReformulationOutput:
    """Reformulate ``chunks`` (``CHUNKS``) with the LLM ``results`` (``custom_id -> LLMResult``),
    or by masking when ``results is None`` (rules in the module doc).

    ``theme_failures`` (``doc_id -> why``: the documents whose LLM theme failed, so ``themes`` holds their offline
    theme): every rewritten chunk of such a document carries that in ``llm_failure`` too (after its own failure,
    if any): it was rewritten against a fallback theme, so it waits for a person like a failed rewrite.

    ``answers_by_chunk`` maps ``chunk_id`` to the answers of the queries paired with it; only those
    present verbatim in ``og_chunk`` can be lost. ``model`` is used when a result names none;
    ``prompt_version`` defaults to the reformulation prompt's current tag. Raises ``ValueError``
    when a chunk's document has no theme.
    """
    by_doc = _themes_by_doc(themes, chunks.column("doc_id").to_pylist())
    variants = {doc_id: theme_variants(theme, aliases) for doc_id, (theme, aliases) in by_doc.items()}
    if results is not None and prompt_version is None:
        prompt_version = load_prompt(PROMPT_NAME).tag
    output = ReformulationOutput(REFORMULATED_CHUNKS.empty_table(), dict.fromkeys(STAT_KEYS, 0))
    rows = []
    for chunk in chunks.select(["chunk_id", "doc_id", "chunk_index", "og_chunk"]).to_pylist():
        row = {
            **chunk,
            "theme": by_doc[chunk["doc_id"]][0],
            "leaked_mentions": [],
            "lost_answers": [],
            "llm_failure": None,
        }
        if chunk["chunk_index"] == 0:
            row.update(chunk=chunk["og_chunk"], flagged=False, method="unchanged")
        else:
            _rewrite(row, variants[chunk["doc_id"]], results, model, prompt_version, output)
            theme_failed = (theme_failures or {}).get(chunk["doc_id"])
            if theme_failed:
                theme = f"the LLM's theme of this document failed ({theme_failed}); the rewrite used the offline theme"
                row["llm_failure"] = "; ".join(filter(None, (row["llm_failure"], f"{theme} {row['theme']!r}")))
            og_answers = [a for a in answers_by_chunk.get(chunk["chunk_id"], ()) if a and a in chunk["og_chunk"]]
            _flag(row, variants[chunk["doc_id"]], og_answers, output.stats)
        output.stats[chunk_outcome(row["method"], row["chunk"], row["og_chunk"])] += 1
        rows.append(row)
    output.table = table_from_rows(rows, REFORMULATED_CHUNKS)
    return output


def _rewrite(
    row: dict,
    variants: Sequence[str],
    results: Mapping[str, LLMResult] | None,
    model: str | None,
    prompt_version: str | None,
    output: ReformulationOutput,
) -> None:
    """Fill ``chunk``, ``method``, ``model``, ``prompt_version`` of ``row`` (LLM, else mask)."""
    if results is not None:
        custom_id = reformulation_custom_id(row["chunk_id"])
        result = results.get(custom_id)
        validator = rewrite_validator(row["og_chunk"])
        problem = result_problem(result, validator)
        if not problem and result is not None and result.value is not None:
            row.update(chunk=result.value["rewritten"], method="llm", model=result.model or model)
            row["prompt_version"] = prompt_version
            return
        row["llm_failure"] = failure_reason(result, validator, "rewrite")
        detail = f"{problem}; the chunk was masked instead (method 'mask')"
        used_model = (result.model if result else None) or model
        output.failures.append(
            llm_failure(STAGE, "chunk", row["chunk_id"], row["doc_id"], custom_id, used_model, detail)
        )
        output.stats["failed"] += 1
    row.update(chunk=mask_mentions(row["og_chunk"], variants), method="mask", model=None, prompt_version=None)


def _flag(row: dict, variants: Sequence[str], answers: Sequence[str], stats: dict[str, int]) -> None:
    """Run :func:`detect_leaks` on ``row["chunk"]`` and set the leak columns and counts."""
    mentions, lost = detect_leaks(row["chunk"], variants, answers)
    row.update(leaked_mentions=mentions, lost_answers=lost, flagged=bool(mentions or lost))
    stats["leaks"] += bool(mentions)
    stats["lost_answers"] += bool(lost)
    stats["flagged"] += bool(mentions or lost)
