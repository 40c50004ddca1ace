"""Review flags: how curation writes them and how a person reads them.

A flag is a short code stored with a review item (``REVIEW_ITEMS.flags``). The codes curation writes:

* ``leak:<mention>``: a reformulated chunk still names its theme (:func:`leak_flag`);
* ``lost_answer:<answer>``: a reformulated chunk no longer holds the answer of a query paired with it
  (:func:`lost_answer_flag`); the item's context key :data:`LOST_ANSWERS` lists the queries that lose it
  (``[{"query_id", "query", "answer"}]``, :func:`lost_answer_queries`). Items pushed before that key existed have
  the flag alone: they still read in words, without the query;
* ``llm_failed: <reason>``: the LLM's answer failed or was refused (:func:`review.model.llm_failure_flag`);
* ``answer_not_in_chunk``: a synthetic query whose answer is not a span of its chunk;
* ``disagrees_with_span``: an LLM pairing whose gold chunk is not the span method's.

:func:`flag_notes` is the one place that turns flags into words (the item page and the queue list use it): a
sentence saying what is wrong, the questions concerned, and what to do about it. An unknown code reads as itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from review.model import LLM_FAILED_FLAG, ReviewItem

LEAK = "leak"
LOST_ANSWER = "lost_answer"
ANSWER_NOT_IN_CHUNK = "answer_not_in_chunk"
DISAGREES_WITH_SPAN = "disagrees_with_span"
LOST_ANSWERS = "lost_answers"
"""The context key of a reformulation item listing the queries whose answer its proposal loses."""


def leak_flag(mention: str) -> str:
    """``leak:<mention>``: the proposal still names the theme as ``mention``."""
    return f"{LEAK}:{mention}"


def lost_answer_flag(answer: str) -> str:
    """``lost_answer:<answer>``: the proposal no longer holds ``answer`` (verbatim)."""
    return f"{LOST_ANSWER}:{answer}"


def lost_answer_queries(lost: Sequence[str], queries: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The :data:`LOST_ANSWERS` context value: ``{"query_id", "query", "answer"}`` of each of ``queries`` (rows with
    those keys, e.g. the chunk's paired queries) whose answer is in ``lost``, in ``queries`` order."""
    wanted = set(lost)
    return [
        {"query_id": row["query_id"], "query": row["query"], "answer": row["answer"]}
        for row in queries
        if row.get("answer") in wanted
    ]


@dataclass(frozen=True)
class Question:
    """A query a flag concerns: its id and its text."""

    query_id: str
    text: str


@dataclass(frozen=True)
class FlagNote:
    """One flag in words: ``kind`` (the code's name), ``sentence`` (what is wrong), ``questions`` (the queries it
    concerns, may be empty), ``action`` (what a reviewer does about it; empty for an unknown code)."""

    kind: str
    sentence: str
    questions: tuple[Question, ...]
    action: str
    code: str


def _quoted(text: str) -> str:
    return f"\u2018{text}\u2019"


def _ids(questions: Sequence[Question]) -> str:
    ids = [question.query_id for question in questions]
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + " and " + ids[-1]


def _lost_answer(answer: str, context: Mapping[str, Any], subject: str) -> FlagNote:
    listed = context.get(LOST_ANSWERS) or []
    questions = tuple(
        Question(str(row["query_id"]), str(row["query"]))
        for row in listed
        if isinstance(row, Mapping) and row.get("answer") == answer and row.get("query_id")
    )
    whose = f"the answer of {_ids(questions)}" if questions else "the answer of a query paired with this chunk"
    sentence = f"{subject} removes {whose}: {_quoted(answer)}."
    action = "Edit to keep the answer word for word, or reject (the chunk stays as it was)."
    return FlagNote(LOST_ANSWER, sentence, questions, action, f"{LOST_ANSWER}:{answer}")


def _note(code: str, context: Mapping[str, Any], original: str | None, subject: str) -> FlagNote:
    name, colon, value = code.partition(":")
    value = value.strip()
    if name == LOST_ANSWER and colon:
        return _lost_answer(value, context, subject)
    if name == LEAK and colon:
        theme = context.get("theme")
        of = f" ({_quoted(str(theme))})" if theme and theme != value else ""
        sentence = f"{subject} still names the theme{of}: {_quoted(value)}."
        action = "Edit to refer to it without its name (e.g. \u2018the city\u2019), or reject."
        return FlagNote(LEAK, sentence, (), action, code)
    if name == LLM_FAILED_FLAG and colon:
        sentence = f"The LLM's answer failed or was refused: {value}."
        action = "No automatic decision applies: check the proposal, then accept, edit or reject it."
        return FlagNote(LLM_FAILED_FLAG, sentence, (), action, code)
    if code == ANSWER_NOT_IN_CHUNK:
        answer = context.get("answer")
        said = f" ({_quoted(str(answer))})" if answer else ""
        sentence = f"The LLM's answer{said} is not a passage of the chunk, word for word."
        action = "Check that the chunk answers the query; edit the query, or reject it."
        return FlagNote(ANSWER_NOT_IN_CHUNK, sentence, (), action, code)
    if code == DISAGREES_WITH_SPAN:
        span = f" ({original})" if original else ""
        sentence = f"The LLM chose another gold chunk than the answer span's{span}."
        action = "Check which chunk holds the answer; edit the chunk ids, or reject."
        return FlagNote(DISAGREES_WITH_SPAN, sentence, (), action, code)
    return FlagNote(name or code, code, (), "", code)


def flag_notes(
    flags: Sequence[str], context: Mapping[str, Any] | None = None, method: str = "", original: str | None = None
) -> list[FlagNote]:
    """Each of ``flags`` in words, in order (rules in the module doc). ``context``: the item's context (the lost
    answers' queries, the theme, the LLM's answer); ``method``: the item's method (``mask`` reads "The mask ...",
    anything else "The proposal ..."); ``original``: the item's original (the span method's chunk ids)."""
    subject = "The mask" if method == "mask" else "The rewrite" if method == "llm" else "The proposal"
    return [_note(flag, context or {}, original, subject) for flag in flags]


def item_flag_notes(item: ReviewItem) -> list[FlagNote]:
    """The flags of review item ``item`` in words (:func:`flag_notes` with its context, method and original)."""
    return flag_notes(item.flags, item.context, item.method, item.original)
