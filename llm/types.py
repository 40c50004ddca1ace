"""Requests and results exchanged between the LLM stages and the client."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llm.usage import TokenUsage

Validator = Callable[[dict[str, Any]], str | None]
"""Semantic check of a parsed answer: ``None`` when valid, else a message sent back to the model
(e.g. "chunk index 12 does not exist; valid indices are 0..7") when the client re-asks once."""

Progress = Callable[[int, int], None]
"""Called with ``(answered, total)`` while a run of requests proceeds (online answers, batch polls)."""


@dataclass(frozen=True)
class LLMRequest:
    """One structured-output call.

    ``custom_id`` identifies the item across runs (and in Batch API files); ``schema`` is the JSON
    schema of the answer object (integers carry ``minimum``/``maximum``); ``prompt_tag`` is
    ``name@vN:<hash>`` of the prompt file and part of the cache key.

    ``prefix_group``: requests with the same value start with the same long prompt (system message,
    then one document), so that a provider's prompt cache can serve the later ones; the client sends
    them together, the first alone (``llm.scheduling``). ``None``: no shared prefix. Like
    ``validator``, it does not change the answer and is no part of the cache key or of equality.
    """

    custom_id: str
    messages: tuple[dict[str, str], ...]
    schema_name: str
    schema: dict[str, Any]
    prompt_tag: str
    validator: Validator | None = field(default=None, compare=False)
    prefix_group: str | None = field(default=None, compare=False)


@dataclass
class LLMResult:
    """The outcome of one request: a validated ``value`` or an ``error`` (never both).

    ``remembered``: the error is a failure remembered from an earlier run (its answer failed validation
    with the same prompt, model and settings), returned without asking again. Tokens are those of the
    calls made for it (of the original calls for a cached answer); ``cached_tokens`` counts the prompt
    tokens the provider served from its prompt cache (included in ``prompt_tokens``).
    """

    custom_id: str
    value: dict[str, Any] | None = None
    error: str | None = None
    cached: bool = False
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None
    remembered: bool = False
    cached_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class Completion:
    """What one chat-completions answer says (``choices[0]`` and the envelope), before any parsing.

    ``content``: the message text (None when the server sent null); ``reasoning_content``: the text a
    reasoning model put beside it (vLLM, llama.cpp with a reasoning parser), None when absent;
    ``finish_reason``: why generation stopped (``"stop"``, ``"length"`` when cut off by ``max_tokens``,
    None when the server did not say); ``server``: what identifies the server that answered (its
    ``system_fingerprint`` or ``Server`` header), empty when unknown; ``usage``: tokens as reported.
    """

    content: str | None
    usage: TokenUsage
    finish_reason: str | None = None
    reasoning_content: str | None = None
    server: str = ""
