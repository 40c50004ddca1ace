"""Automatic prompt caching as the OpenAI API reports it, for the local test server (standard library only).

Tokens: the prompt's text (:func:`prompt_text`) cut into pieces of ``CHARS_PER_TOKEN`` (4) characters, the last one
possibly shorter, so ``prompt_tokens = ceil(len(text) / 4)``; deterministic, and close to what an English prompt
costs with a real tokenizer.

The text of a chat-completions body is what a provider's cache is keyed on, in order: the ``response_format`` (as
canonical JSON: sorted keys, no spaces; a structured-output schema is part of the cached prefix), then every
message as ``<|role|>`` followed by its content (string contents and ``text`` parts).

Caching (:class:`PromptCache`), per model: every answered prompt's prefixes of whole 128-token blocks are kept.
A prompt of at least ``MIN_CACHED_TOKENS`` (1024) tokens is reported with ``cached_tokens`` = its longest prefix
of whole 128-token blocks that an earlier prompt of the same model also began with, if that prefix is at least
1024 tokens, else 0; at least one token of a prompt is never cached (so an identical prompt reports
``128 * floor((n - 1) / 128)``). As with a real provider, the cache is looked up when a request arrives
(:meth:`PromptCache.lookup`: the server does it before its ``latency_s``) and a prompt is remembered once it is
answered (:meth:`PromptCache.remember`), so requests in flight together do not see each other's prefix.
Nothing expires (:meth:`PromptCache.clear` forgets everything).
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

CHARS_PER_TOKEN = 4
BLOCK_TOKENS = 128
MIN_CACHED_TOKENS = 1024
BLOCK_CHARS = BLOCK_TOKENS * CHARS_PER_TOKEN


def prompt_text(body: dict[str, Any]) -> str:
    """The text a chat-completions ``body``'s prompt is tokenized from (see the module docstring)."""
    parts: list[str] = []
    if body.get("response_format") is not None:
        parts.append(json.dumps(body["response_format"], sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        parts.append(f"<|{message.get('role', '')}|>")
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "".join(parts)


def count_tokens(text: str) -> int:
    """``ceil(len(text) / CHARS_PER_TOKEN)``, at least 1."""
    return max(1, -(-len(text) // CHARS_PER_TOKEN))


def _block_digests(model: str, text: str) -> list[bytes]:
    """Digest of each prefix of ``text`` made of whole blocks (``BLOCK_CHARS`` characters), shortest first."""
    running = hashlib.sha256(model.encode() + b"\0")
    digests = []
    for start in range(0, len(text) - BLOCK_CHARS + 1, BLOCK_CHARS):
        running.update(text[start : start + BLOCK_CHARS].encode("utf-8", "surrogatepass"))
        digests.append(running.copy().digest())
    return digests


class PromptCache:
    """The prefixes of the prompts answered so far, per model (thread-safe)."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def lookup(self, model: str, text: str) -> tuple[int, int]:
        """``(prompt_tokens, cached_tokens)`` of the prompt ``text`` sent to ``model`` (nothing is remembered)."""
        tokens = count_tokens(text)
        digests = _block_digests(model, text)
        with self._lock:
            blocks = 0
            while blocks < len(digests) and digests[blocks] in self._seen:
                blocks += 1
        cached = min(blocks, (tokens - 1) // BLOCK_TOKENS) * BLOCK_TOKENS
        return tokens, (cached if tokens >= MIN_CACHED_TOKENS and cached >= MIN_CACHED_TOKENS else 0)

    def remember(self, model: str, text: str) -> None:
        """Keep the prefixes of the answered prompt ``text`` of ``model``."""
        digests = _block_digests(model, text)
        with self._lock:
            self._seen.update(digests)

    def answer(self, model: str, text: str) -> tuple[int, int]:
        """:meth:`lookup`, then :meth:`remember` (a prompt answered at once)."""
        result = self.lookup(model, text)
        self.remember(model, text)
        return result

    def clear(self) -> None:
        """Forget every prompt (as if the provider's cache had expired)."""
        with self._lock:
            self._seen.clear()
