"""What preparing a retrieval system yields (:class:`IndexedSystem`), why it may not run (:class:`NotRunnable`),
and how it logs (:data:`Log`, :func:`no_log`).

Kept apart from :mod:`evaluation.systems.dispatch` so that every system module (and :mod:`evaluation.rechunk`) can raise
:class:`NotRunnable` without importing the dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable
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
