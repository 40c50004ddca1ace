"""A paid call and what it left, committed together (online and Batch API alike).

Each function writes one transaction of the :class:`llm.cache.AnswerCache`: the call's ``usage`` row and its answer
(:func:`record_answer`) or its refused answer (:func:`record_refusal`: a failure, or a first answer awaiting its
re-ask). So a process killed at any point leaves no ledger row without its answer or failure, and no answer without
its row; a rerun pays for nothing stored again and sends only the re-ask of an answer awaiting it
(:meth:`llm.cache.AnswerCache.awaiting_reask`, :func:`reask_messages`). No network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conteb.text import escape_surrogates
from llm.cache import AnswerCache
from llm.types import LLMRequest
from llm.usage import TokenUsage


@dataclass(frozen=True)
class PaidCall:
    """One paid call as the ledger records it: scope (``<task>/<stage>``), model, mode (``online`` or ``batch``),
    its checked tokens and estimated dollars."""

    scope: str
    model: str
    mode: str
    usage: TokenUsage
    cost_usd: float


def record_answer(
    cache: AnswerCache,
    call: PaidCall,
    key: str,
    request: LLMRequest,
    value: dict[str, Any],
    paid: TokenUsage,
    server: str | None,
) -> None:
    """``call`` in the ledger and the valid answer ``value`` it gave (``paid``: the tokens of every call made for it;
    ``server``: who answered), in one transaction."""
    with cache.writes():
        cache.record_usage(call.scope, request.custom_id, call.model, call.usage, call.cost_usd, call.mode)
        cache.put(key, request.custom_id, call.model, request.prompt_tag, value, paid, server)


def record_refusal(
    cache: AnswerCache,
    call: PaidCall,
    key: str,
    request: LLMRequest,
    error: str,
    content: str | None,
    paid: tuple[int, int],
    reask: bool,
) -> None:
    """``call`` in the ledger and its refused answer ``content`` (lone surrogates as JSON escapes, so it reads back as
    the same answer) with why, in one transaction: a failure, or with ``reask`` a first answer awaiting its re-ask.
    ``paid``: the prompt and completion tokens of every call made for it."""
    kept = None if content is None else escape_surrogates(content)
    with cache.writes():
        cache.record_usage(call.scope, request.custom_id, call.model, call.usage, call.cost_usd, call.mode)
        cache.remember_failure(key, call.scope, request.custom_id, call.model, request.prompt_tag, error, kept, paid,
                               reask)  # fmt: skip


def reask_messages(content: str | None, problem: str) -> list[dict[str, str]]:
    """The messages that re-ask after the refused answer ``content`` (its lone surrogates as escapes)."""
    return [
        {"role": "assistant", "content": escape_surrogates(content or "")},
        {
            "role": "user",
            "content": f"That answer is not valid: {problem}. Answer again with one JSON object "
            "that matches the schema.",
        },
    ]
