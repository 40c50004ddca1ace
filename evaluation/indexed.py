"""What preparing a retrieval system yields (:class:`IndexedSystem`), why it may not run (:class:`NotRunnable`),
how it logs (:data:`Log`, :func:`no_log`), and how a failure reads (:class:`ScoresNaN`, :func:`failure_reason`,
:func:`needs_failed`).

Kept apart from :mod:`evaluation.systems.dispatch` so that every system module (and :mod:`evaluation.rechunk`) can raise
:class:`NotRunnable` without importing the dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np


class NotRunnable(Exception):
    """A requirement of the system is missing (no trained model yet, no chunk contexts, ...).

    ``str(e)`` is the reason shown in the report.
    """


Log = Callable[[str], None]
"""Where a system reports its progress (counts, timings): one line per call (``print``, a Dagster logger)."""


def no_log(message: str) -> None:
    """The default :data:`Log` of the system modules: discard ``message``."""


@dataclass
class IndexedSystem:
    """A system with its corpus indexed and its queries encoded, ready to score.

    ``score_block(rows)``: query rows (int64 ``[B]``, indices into ``corpus.queries``) -> float32 ``[B, C]`` scores
    over every corpus chunk, in corpus order (higher = more relevant).
    """

    score_block: Callable[[np.ndarray], np.ndarray]
    index_seconds: float  # time to index/encode the corpus chunks (model loading excluded: see details)
    query_seconds: float  # time to encode/tokenize the queries (done inside prepare)
    description: str  # e.g. "dense · late chunking · offline-minilm (prefixes: none)"
    details: dict = field(default_factory=dict)  # model path, device, prefixes used, truncated chunks, ...


class ScoresNaN(ValueError):
    """A system scored NaN for some queries: ``rows`` (query rows found NaN; every row below ``through`` was checked),
    ``of`` the queries of the run when known, ``component`` the fused system whose scores were NaN (None: the
    system's own). ``str(e)`` is the reason in words: ``scores are NaN for 3 of 120 queries (first: query row 7)``."""

    def __init__(
        self, rows: Sequence[int] | np.ndarray, through: int, *, of: int | None = None, component: str | None = None
    ):
        self.rows = [int(r) for r in rows]
        self.through, self.of, self.component = int(through), of, component
        super().__init__(str(self))

    def __str__(self) -> str:
        first = f"first: query row {self.rows[0]}" if self.rows else "no row named"
        if self.of is not None and self.through >= self.of:
            return f"scores are NaN for {len(self.rows):,} of {self.of:,} queries ({first})"
        return f"scores are NaN for {len(self.rows):,} of the first {self.through:,} queries scored ({first})"


def failure_reason(error: BaseException) -> str:
    """Why a system failed, in one line: a :class:`ScoresNaN`'s own words, else ``<error type>: <message>``."""
    if isinstance(error, ScoresNaN):
        return str(error)
    return f"{type(error).__name__}: {error}"


def needs_failed(component: str, reason: str) -> str:
    """The reason of a system that did not run because ``component``, which it fuses, failed for ``reason``."""
    return f"needs {component}, which failed: {reason}"
