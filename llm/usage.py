"""Token counts of one paid call, read from a chat-completions answer's ``usage`` object.

Shape (the same in online answers and in a Batch API output line's ``response.body``)::

    "usage": {"prompt_tokens": 2306, "completion_tokens": 41, "total_tokens": 2347,
              "prompt_tokens_details": {"cached_tokens": 2176}}

``prompt_tokens`` counts every input token, the cached ones included; ``cached_tokens`` is how many of the
prompt's leading tokens the provider served from its prompt cache (billed at the cached-input price, see
``llm.settings.Price``). A missing or malformed count reads as 0, and ``cached_tokens`` is capped at
``prompt_tokens``. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenUsage:
    """Tokens of one call: ``prompt_tokens`` (cached included), ``completion_tokens``, ``cached_tokens`` (<= prompt)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
        )


def parse_usage(usage: Any) -> TokenUsage:
    """The :class:`TokenUsage` of an answer's ``usage`` value (anything that is not an object counts as no usage)."""
    if not isinstance(usage, dict):
        return TokenUsage()
    prompt = _count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return TokenUsage(prompt, _count(usage.get("completion_tokens")), min(cached, prompt))


def _count(value: Any) -> int:
    """A token count (0 when missing or not a non-negative integer)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
