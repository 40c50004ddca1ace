"""The console logger of every job: Dagster's ``colored_console_logger``, less the stack trace of the review gate.

A run that stops at the review gate fails in Dagster's terms: the blocking ``review_complete`` checks of its queue
assets fail, and Dagster prints the step's and the run's ``DagsterAssetCheckFailedError`` with a Python stack
trace that says nothing to a reviewer (the ``WAITING FOR REVIEW (not a failure)`` line above it and
``conteb status`` below say what to do). This logger prints those two errors without their stack trace. Any other
error, a check other than ``review_complete`` among the failed ones included, keeps its stack trace; the event log
(the Dagster UI) keeps every error whole.
"""

from __future__ import annotations

import logging

import dagster as dg

from assets.review import REVIEW_CHECK

STACK_TRACE = "\n\nStack Trace:\n"
CHECK_FAILED = "DagsterAssetCheckFailedError: "


def without_gate_stack_trace(text: str) -> str:
    """``text`` (one formatted console line of Dagster) without its stack trace when its error is a
    ``DagsterAssetCheckFailedError`` whose failed checks (the ``<asset>: <check>`` lines after the error's first
    line) are all ``review_complete``; otherwise ``text`` unchanged."""
    head, found, _stack = text.partition(STACK_TRACE)
    if not found or CHECK_FAILED not in head:
        return text
    failed = [line.strip() for line in head.split(CHECK_FAILED, 1)[1].splitlines()[1:] if line.strip()]
    if not failed or not all(line.endswith(f": {REVIEW_CHECK}") for line in failed):
        return text
    return head.rstrip()


class GateFormatter(logging.Formatter):
    """Formats with the handler's own formatter, then drops the review gate's stack trace
    (:func:`without_gate_stack_trace`)."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return without_gate_stack_trace(self.inner.format(record))


@dg.logger(
    # Dagster's default console logger logs at DEBUG (step starts and ends included): kept.
    config_schema={
        "log_level": dg.Field(str, is_required=False, default_value="DEBUG"),
        "name": dg.Field(str, is_required=False, default_value="dagster"),
    },
    description="Dagster's colored console logger; a run stopped at the review gate is printed without a stack trace.",
)
def console_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    """Dagster's console logger (same name, level and colours), each handler's formatter wrapped in
    :class:`GateFormatter`."""
    logger = dg.colored_console_logger.logger_fn(init_context)
    for handler in logger.handlers:
        if not isinstance(handler.formatter, GateFormatter):
            handler.setFormatter(GateFormatter(handler.formatter))
    return logger
