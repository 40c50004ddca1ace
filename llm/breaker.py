"""The circuit breaker of the online calls: a broken endpoint stops the stage instead of failing every item.

:class:`CircuitBreaker` counts the calls that failed since the last answer, by kind (``"the server answers
text/html, not a chat completion"``, ``"connection refused: the server is gone"``, ``"HTTP 503"``): a kind that
reaches the limit opens it, and :meth:`CircuitBreaker.check` then raises :class:`EndpointBroken` (one line) before
any further call is sent. The limit is ``llm.breaker_failures`` before the endpoint ever answered (nothing shows it
works), and ``llm.breaker_failures * llm.max_attempts`` once it answered (a server that died mid-stage: about as
many failed calls as ``llm.breaker_failures`` requests would make before failing, so that a brief outage the
retries ride out never stops a stage). Any answer (a chat completion, valid or not) starts the count again. A
rate limit (HTTP 429 but ``insufficient_quota``) is not counted: the server works and asks to wait. No I/O.
"""

from __future__ import annotations

import collections


class EndpointBroken(RuntimeError):
    """The endpoint failed too many calls in a row (one line naming it and the failure); the run stopped before
    sending more. Nothing of it is remembered: a rerun asks the requests not answered."""


class CircuitBreaker:
    """Failed calls in a row at ``endpoint``, by kind; opens at ``limit`` of one kind (``limit_after_answers`` once
    a call was answered). ``limit`` None: never opens."""

    def __init__(self, endpoint: str, limit: int | None, limit_after_answers: int | None = None) -> None:
        self.endpoint = endpoint
        self.limit = limit
        self.limit_after_answers = limit_after_answers if limit_after_answers is not None else limit
        self.answered = 0  # calls answered so far (by this client)
        self._failures: collections.Counter[str] = collections.Counter()
        self._opened: str | None = None

    @property
    def open(self) -> bool:
        """Whether the breaker has opened (no call may be sent)."""
        return self._opened is not None

    @property
    def reason(self) -> str | None:
        """The one line saying why it opened (None while closed)."""
        return self._opened

    def check(self) -> None:
        """Raise :class:`EndpointBroken` when open (called before each call is sent)."""
        if self._opened is not None:
            raise EndpointBroken(self._opened)

    def answer(self) -> None:
        """A call was answered: the count of failures starts again."""
        self.answered += 1
        self._failures.clear()

    def failure(self, kind: str | None) -> None:
        """A call failed with ``kind`` (None: not counted, e.g. a rate limit); opens the breaker at the limit."""
        if kind is None or self._opened is not None:
            return
        self._failures[kind] += 1
        limit = self.limit_after_answers if self.answered else self.limit
        if limit is None or self._failures[kind] < limit:
            return
        failed = sum(self._failures.values())
        of_them = f", {self._failures[kind]} of them" if failed != self._failures[kind] else ""
        after = f" after {self.answered} answered" if self.answered else ""
        self._opened = (
            f"{self.endpoint}: {failed} calls in a row failed{after}{of_them}: {kind}; stopped, nothing more sent "
            "(the requests not answered are asked again by the next run) — check the endpoint with `conteb llm check`"
        )

    def reset(self) -> None:
        """Close the breaker and forget the failures (a new run of the same client starts afresh)."""
        self._failures.clear()
        self._opened = None
