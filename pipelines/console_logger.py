"""The console logger of every job: Dagster's ``colored_console_logger``, with the steps skipped behind a review gate
printed at DEBUG.

A run that stops at a review gate succeeds (``assets/review.py``): the reviewed table's step logs one ``WAITING FOR
REVIEW (not a failure)`` line, with the count and the command that decides the items, and yields no output; Dagster
then skips every step downstream of it and logs each one at INFO ("Skipping step sample__conteb_dataset due to
skipped dependencies: [...]"), after that line. Those lines say again, in Dagster's words, what the waiting line
already said ("nothing downstream of the queue runs until then"), and would end the run's output; this logger
prints them at DEBUG, so that at the jobs' INFO level the run ends with what waits and the command. The event log
(the Dagster UI) keeps them, and each step's ``STEP_SKIPPED`` event, as Dagster logged them.
"""

from __future__ import annotations

import logging

import dagster as dg
from dagster._core.log_manager import LOG_RECORD_METADATA_ATTR

SKIPPING = "Skipping step "
SKIPPED_DEPENDENCIES = " due to skipped dependencies"


def is_skipped_step_line(record: logging.LogRecord) -> bool:
    """Whether ``record`` is Dagster's INFO line for a step it skips because an output it uses was not produced."""
    meta = getattr(record, LOG_RECORD_METADATA_ATTR, None) or {}
    message = meta.get("orig_message") or ""
    return record.levelno == logging.INFO and message.startswith(SKIPPING) and SKIPPED_DEPENDENCIES in message


class SkippedStepsAtDebug(logging.Filter):
    """A logger filter: :func:`is_skipped_step_line` records go on at DEBUG (handlers below DEBUG drop them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if is_skipped_step_line(record):
            record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True


@dg.logger(
    # Dagster's default console logger logs at DEBUG (step starts and ends included): kept.
    config_schema={
        "log_level": dg.Field(str, is_required=False, default_value="DEBUG"),
        "name": dg.Field(str, is_required=False, default_value="dagster"),
    },
    description="Dagster's colored console logger; the steps skipped behind a review gate are printed at DEBUG.",
)
def console_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    """Dagster's console logger (same name, level, handlers and colours) with :class:`SkippedStepsAtDebug`."""
    logger = dg.colored_console_logger.logger_fn(init_context)
    if not any(isinstance(f, SkippedStepsAtDebug) for f in logger.filters):
        logger.addFilter(SkippedStepsAtDebug())
    return logger
