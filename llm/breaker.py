"""The circuit breaker of the online calls: a broken endpoint stops the stage instead of failing every item.

:class:`CircuitBreaker` counts the calls that failed since the last answer, by kind (``"the server answers
text/html, not a chat completion"``, ``"connection refused: the server is gone"``, ``"HTTP 503"``), and the failed
tries of each request. It opens when a kind reaches ``llm.breaker_failures``, and :meth:`CircuitBreaker.check` then
raises :class:`EndpointBroken` (one line) before any further call is sent:

- before the endpoint ever answered (nothing shows it works): at once;
- once it answered (a server that died mid-stage): only when, besides, one request has failed every one of its
  ``llm.max_attempts`` tries since the last answer, so that a brief outage the retries ride out never stops a stage
  (many requests may each fail a first try within a second). Meanwhile the endpoint is :attr:`CircuitBreaker.suspect`:
  the client starts no new request until an answer comes (the count starts again) or the breaker opens, as long as
  a request is being tried again (else nothing could settle it: new requests go).

Any answer (a chat completion, valid or not) starts the count again. A rate limit (HTTP 429 but
``insufficient_quota``) and a refused structured-output mode are not counted (the caller passes no kind). No I/O.
"""

from __future__ import annotations

import collections
from collections.abc import Hashable


class EndpointBroken(RuntimeError):
    """The endpoint failed too many calls in a row (one line naming it and the failure); the run stopped before
    sending more. Nothing of it is remembered: a rerun asks the requests not answered."""


class CircuitBreaker:
    """Failed calls in a row at ``endpoint``, by kind, and failed tries by request; opens at ``limit`` of one kind
    (once a call was answered: and a request that failed its ``attempts`` tries). ``limit`` None: never opens."""

    def __init__(self, endpoint: str, limit: int | None, attempts: int = 1) -> None:
        self.endpoint = endpoint
        self.limit = limit
        self.attempts = attempts
        self.answered = 0  # calls answered so far (by this client)
        self._failures: collections.Counter[str] = collections.Counter()
        self._tries: collections.Counter[Hashable] = collections.Counter()
        self._opened: str | None = None

    @property
    def open(self) -> bool:
        """Whether the breaker has opened (no call may be sent)."""
        return self._opened is not None

    @property
    def reason(self) -> str | None:
        """The one line saying why it opened (None while closed)."""
        return self._opened

    @property
    def suspect(self) -> bool:
        """Whether a kind has reached the limit after the endpoint answered, and no request has failed every try yet
        (no new request should start)."""
        return (
            self._opened is None
            and self.limit is not None
            and bool(self.answered)
            and bool(self._failures)
            and max(self._failures.values()) >= self.limit
        )

    def check(self) -> None:
        """Raise :class:`EndpointBroken` when open (called before each call is sent)."""
        if self._opened is not None:
            raise EndpointBroken(self._opened)

    def answer(self) -> None:
        """A call was answered: the counts start again."""
        self.answered += 1
        self._failures.clear()
        self._tries.clear()

    def failure(self, kind: str | None, request: Hashable = None, rejected: bool = False) -> None:
        """A try of ``request`` (what identifies it while it is tried) failed with ``kind`` (None: not counted);
        ``rejected``: the server refused the request itself (not retried): counted only before the endpoint answered
        (a wrong key or model), after that an item's own fault. Opens the breaker by the rule of the module doc."""
        if kind is None or self._opened is not None or (rejected and self.answered):
            return
        self._failures[kind] += 1
        self._tries[request] += 1
        kind, count = self._failures.most_common(1)[0]
        if self.limit is None or count < self.limit:
            return
        if self.answered and max(self._tries.values()) < self.attempts:
            return  # the endpoint worked: wait until a request has failed all its tries
        failed = sum(self._failures.values())
        of_them = f", {self._failures[kind]} of them" if failed != self._failures[kind] else ""
        after = f" after {self.answered} answered, every try of a request among them" if self.answered else ""
        self._opened = (
            f"{self.endpoint}: {failed} calls in a row failed{after}{of_them}: {kind}; stopped, nothing more sent "
            "(the requests not answered are asked again by the next run) — check the endpoint with `conteb llm check`"
        )

    def reset(self) -> None:
        """Close the breaker and forget the failures (a new run of the same client starts afresh)."""
        self._failures.clear()
        self._tries.clear()
        self._opened = None
