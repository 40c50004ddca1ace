"""Warnings that repeat per document, printed once with their count (pure: the standard ``logging`` module only).

The encoder warns once per document with an over-long chunk ("1 chunk(s) longer than 510 tokens truncated to fit
the context"): a chunk-size study of whole documents would print it once per document and system. Inside
:func:`summarized_warnings` those warnings are held back and, on leaving, each distinct one goes to the caller's
``log`` once, with how many times it was logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from evaluation.indexed import Log

TALLIED_LOGGERS = ("embedding.encoder",)
"""Loggers whose warnings repeat per document (the encoder's truncation warning): during an evaluation each
distinct warning is printed once, with its count (:func:`summarized_warnings`)."""


class _WarningTally(logging.Filter):
    """Holds back WARNING-and-above records, counted by message template; lets the others through."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, tuple[str, int]] = {}  # template -> (first formatted message, count)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        first, count = self.seen.get(str(record.msg), (record.getMessage(), 0))
        self.seen[str(record.msg)] = (first, count + 1)
        return False


@contextmanager
def summarized_warnings(log: Log, names: Sequence[str] = TALLIED_LOGGERS) -> Iterator[None]:
    """While inside, warnings of the loggers ``names`` are not printed one by one; on leaving, each distinct one
    (by message template) goes to ``log`` once: ``warning: <first message> (logged N times, shown once)``."""
    tally = _WarningTally()
    loggers = [logging.getLogger(name) for name in names]
    for each in loggers:
        each.addFilter(tally)
    try:
        yield
    finally:
        for each in loggers:
            each.removeFilter(tally)
        for first, count in tally.seen.values():
            log(f"warning: {first}" + (f" (logged {count} times, shown once)" if count > 1 else ""))
