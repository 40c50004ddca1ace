"""Scripted faults of the local OpenAI-compatible test server (``tests/support/openai_server.py``).

``Fault`` describes one injected failure; ``FaultQueue`` holds the queued faults, each with an optional
``match`` on the request body, and hands each one to the first request that accepts it. Standard library only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

FaultKind = Literal[
    "status", "hang", "malformed_json", "truncated", "content", "trickle", "body", "endless", "stall", "huge"
]
MALFORMED_CONTENT = "Sure! Here is the answer: {chunk: 3"

Match = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True)
class Fault:
    """One injected failure, consumed by one chat request (or one Batch API line).

    - ``status``: HTTP ``status`` with an OpenAI-style error body whose message is ``content`` when given
      (+ ``Retry-After: retry_after``, a number of seconds or any text, sent verbatim);
    - ``hang``: sleep ``seconds`` before answering normally (the client's timeout should fire first);
    - ``malformed_json``: a 200 whose assistant content is not JSON;
    - ``truncated``: a 200 announcing the full ``Content-Length`` but only half the body, then the
      connection is closed;
    - ``content``: a normal 200 whose assistant content is ``content`` verbatim, stopped for ``finish_reason``;
    - ``trickle``: a normal 200 whose body is sent one byte at a time, ``seconds`` apart (each byte
      arrives well within a read timeout, the whole answer does not);
    - ``body``: a 200 whose whole HTTP body is ``content`` with ``Content-Type: content_type`` (an HTML
      error page from a proxy, JSON of the wrong shape, an oversized answer);
    - ``endless``: a 200 (chunked) that starts a chat completion, then sends a space every ``seconds``, forever
      (until the client leaves or the server stops): a stream no per-read timeout ends;
    - ``stall``: a 200 whose headers announce a body that never comes;
    - ``huge``: a 200 (chunked, no length announced) holding a model list of ``size`` bytes, sent as fast as the
      client reads it.

    In a batch, ``hang`` and ``trickle`` answer normally without sleeping; ``truncated`` and ``body``
    become a line with ``"response": null`` and ``"error": {"code": "server_error", ...}``.
    """

    kind: FaultKind
    status: int = 500
    retry_after: float | str | None = None
    seconds: float = 0.0
    content: str = ""
    content_type: str = "application/json"
    finish_reason: str = "stop"
    size: int = 0

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = None) -> Fault:
        """HTTP 429, with ``Retry-After`` when ``retry_after`` is given (a number, or text sent verbatim)."""
        return cls("status", status=429, retry_after=retry_after)

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        """HTTP 5xx (500 unless told)."""
        return cls("status", status=status)

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        """Sleep ``seconds`` before answering."""
        return cls("hang", seconds=seconds)

    @classmethod
    def malformed_json(cls) -> Fault:
        """A 200 whose content is not JSON."""
        return cls("malformed_json")

    @classmethod
    def truncated(cls) -> Fault:
        """A 200 whose body stops half-way, then the connection closes."""
        return cls("truncated")

    @classmethod
    def raw(cls, content: str) -> Fault:
        """A 200 whose assistant content is ``content`` verbatim."""
        return cls("content", content=content)

    @classmethod
    def cut_off(cls, content: str) -> Fault:
        """A 200 whose assistant content is ``content`` verbatim with ``finish_reason: length`` (cut off by
        ``max_tokens``)."""
        return cls("content", content=content, finish_reason="length")

    @classmethod
    def trickle(cls, seconds_per_byte: float) -> Fault:
        """A normal 200 whose body is written one byte every ``seconds_per_byte``."""
        return cls("trickle", seconds=seconds_per_byte)

    @classmethod
    def http_body(cls, body: str, content_type: str = "text/html; charset=utf-8") -> Fault:
        """A 200 whose HTTP body is ``body`` verbatim (UTF-8; a lone surrogate as its 3 bytes, as a broken server
        would send it), sent as ``content_type`` (not a chat completion)."""
        return cls("body", content=body, content_type=content_type)

    @classmethod
    def endless(cls, seconds_per_byte: float = 0.05) -> Fault:
        """A 200 that never ends: a space every ``seconds_per_byte`` after the start of a completion."""
        return cls("endless", seconds=seconds_per_byte)

    @classmethod
    def stall(cls) -> Fault:
        """A 200 whose headers come, and then nothing."""
        return cls("stall")

    @classmethod
    def huge(cls, size: int) -> Fault:
        """A 200 model list of ``size`` bytes, streamed without a ``Content-Length``."""
        return cls("huge", size=size)


class FaultQueue:
    """Queued faults in injection order, guarded by the server's (re-entrant) ``lock``: a ``match`` may call
    back into the server."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._faults: list[tuple[Fault, Match | None]] = []

    def add(self, faults: tuple[Fault, ...], match: Match | None) -> None:
        """Queue ``faults``, each for the first later body that ``match`` accepts (every one when ``None``)."""
        with self._lock:
            self._faults.extend((fault, match) for fault in faults)

    def take(self, body: dict[str, Any]) -> Fault | None:
        """Remove and return the first queued fault whose ``match`` accepts ``body`` (or ``None``)."""
        with self._lock:
            for index, (fault, match) in enumerate(self._faults):
                if match is None or match(body):
                    del self._faults[index]
                    return fault
        return None

    def __len__(self) -> int:
        with self._lock:
            return len(self._faults)
