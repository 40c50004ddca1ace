"""Token counts of one paid call, read from a chat-completions answer's ``usage`` object.

Shape (the same in online answers and in a Batch API output line's ``response.body``)::

    "usage": {"prompt_tokens": 2306, "completion_tokens": 41, "total_tokens": 2347,
              "prompt_tokens_details": {"cached_tokens": 2176}}

``prompt_tokens`` counts every input token, the cached ones included; ``cached_tokens`` is how many of the
prompt's leading tokens the provider served from its prompt cache (billed at the cached-input price, see
``llm.settings.Price``). A missing or malformed count reads as 0, and ``cached_tokens`` is capped at
``prompt_tokens``.

An *implausible* usage (a server fault: the answer itself is kept) is recorded as 0 tokens and $0 with
``implausible=True``, and counted in the ledger (``conteb costs``, the stages' ``llm/implausible_usage``):

* any count above :data:`MAX_PLAUSIBLE_TOKENS` (10 million: more than any model's context window, the largest
  being 1 to 2 million; it also keeps every count inside SQLite's 64-bit INTEGER), always (:func:`parse_usage`);
* for a call whose request body is known, more prompt tokens than :func:`request_token_limits` allows: twice the
  request body's UTF-8 bytes plus :data:`TEMPLATE_TOKENS` (a byte-level tokenizer makes at most one token per
  byte, and the body holds every message, the schema and the framing; the slack covers a server's chat template),
  or more completion tokens than twice ``max_tokens`` plus :data:`TEMPLATE_TOKENS` (:func:`checked_usage`).

No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_PLAUSIBLE_TOKENS = 10_000_000
"""More tokens than one call can involve with any model today; a larger count is a server fault."""

TEMPLATE_TOKENS = 4096
"""Slack for what a server adds to a request (its chat template, a default system prompt) or to an answer."""


@dataclass(frozen=True)
class TokenUsage:
    """Tokens of one call: ``prompt_tokens`` (cached included), ``completion_tokens``, ``cached_tokens`` (<= prompt);
    ``implausible``: the answer reported impossible counts, recorded as 0 (module doc)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    implausible: bool = False

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
            self.implausible or other.implausible,
        )

    def describe(self) -> str:
        """``prompt_tokens=..., completion_tokens=..., cached_tokens=...`` (for a log line)."""
        return (
            f"prompt_tokens={self.prompt_tokens:,}, completion_tokens={self.completion_tokens:,}, "
            f"cached_tokens={self.cached_tokens:,}"
        )


IMPLAUSIBLE = TokenUsage(implausible=True)
"""What an implausible usage is recorded as."""


def parse_usage(usage: Any) -> TokenUsage:
    """The :class:`TokenUsage` of an answer's ``usage`` value (anything that is not an object counts as no usage);
    :data:`IMPLAUSIBLE` when a count exceeds :data:`MAX_PLAUSIBLE_TOKENS`."""
    return storable_usage(read_usage(usage))


def read_usage(usage: Any) -> TokenUsage:
    """The counts an answer's ``usage`` value reports, unchecked (for a log line saying what came back)."""
    if not isinstance(usage, dict):
        return TokenUsage()
    prompt = _count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return TokenUsage(prompt, _count(usage.get("completion_tokens")), min(cached, prompt))


def storable_usage(usage: TokenUsage) -> TokenUsage:
    """``usage``, or :data:`IMPLAUSIBLE` when one of its counts exceeds :data:`MAX_PLAUSIBLE_TOKENS`."""
    counts = (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
    return IMPLAUSIBLE if usage.implausible or max(counts) > MAX_PLAUSIBLE_TOKENS else usage


def request_token_limits(body: Mapping[str, Any]) -> tuple[int, int]:
    """The most prompt and completion tokens a call with this chat-completions request ``body`` can be billed
    for (module doc)."""
    size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    max_tokens = _count(body.get("max_tokens")) or _count(body.get("max_completion_tokens")) or MAX_PLAUSIBLE_TOKENS
    return 2 * size + TEMPLATE_TOKENS, min(2 * max_tokens + TEMPLATE_TOKENS, MAX_PLAUSIBLE_TOKENS)


def checked_usage(usage: TokenUsage, body: Mapping[str, Any], log: Callable[[str], None], where: str) -> TokenUsage:
    """``usage`` of a call with request ``body``, or :data:`IMPLAUSIBLE` beyond :func:`request_token_limits`
    or :data:`MAX_PLAUSIBLE_TOKENS`, said on ``log`` with what was reported (``where``: scope and request)."""
    prompt_limit, completion_limit = request_token_limits(body)
    checked = storable_usage(usage)
    if usage.prompt_tokens > prompt_limit or usage.completion_tokens > completion_limit:
        checked = IMPLAUSIBLE
    if checked.implausible:
        log(
            f"{where}: implausible usage in the answer ({usage.describe()}; at most {prompt_limit:,} prompt and "
            f"{completion_limit:,} completion tokens for this request): answer kept, recorded as 0 tokens and $0, "
            "counted as implausible in `conteb costs`"
        )
    return checked


def _count(value: Any) -> int:
    """A token count (0 when missing or not a non-negative integer)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
