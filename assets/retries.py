"""Steps that Dagster retries on failure, and that Ctrl-C or SIGTERM stops instead of retrying.

Dagster 1.13 treats an interrupt raised inside an op that has a ``RetryPolicy`` as a reason to retry it
(``dagster/_core/execution/plan/utils.py``, ``op_execution_error_boundary``: "respect retry policy when interrupts
occur" turns ``DagsterExecutionInterruptedError`` and ``KeyboardInterrupt`` into ``RetryRequested``). A
pre-emptible pod may want that; a person pressing Ctrl-C does not: with the in-process executor the interrupted
shard started again, a second Ctrl-C started it a third time, and the run went on to SUCCESS and rewrote the
reports.

:func:`retried_op` is the one way this project declares a retried step (the encode shards of the evaluation, the
shards of the LLM stages): ``dg.op`` with :data:`SHARD_RETRY_POLICY`, whose compute function turns an interrupt
into :class:`RunInterrupted`. That error is a ``DagsterError`` -- so the op boundary re-raises it untouched instead
of requesting a retry -- and a ``DagsterExecutionInterruptedError`` -- so the step and then the run end as
interrupted, on every executor (in process, the multiprocess child, a Celery worker). Exceptions keep the retry
policy: a crashed shard is still retried.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import dagster as dg

SHARD_RETRIES = 2
"""How many times a failed shard step is retried (an exception, not an interrupt)."""

SHARD_RETRY_POLICY = dg.RetryPolicy(max_retries=SHARD_RETRIES)

INTERRUPTED = "interrupted (Ctrl-C or SIGTERM): the run stops, the step is not retried"

F = TypeVar("F", bound=Callable[..., Any])


class RunInterrupted(dg.DagsterError, dg.DagsterExecutionInterruptedError):  # type: ignore[misc]
    """Ctrl-C or SIGTERM reached a retried step: the run stops, the step is not retried."""


def stops_on_interrupt(compute: F) -> F:
    """``compute`` (a function or a generator function) with interrupts re-raised as :class:`RunInterrupted`.

    The wrapper keeps ``compute``'s signature (``functools.wraps``), which Dagster reads for the context,
    resources and inputs of the op.
    """
    interrupts = (KeyboardInterrupt, dg.DagsterExecutionInterruptedError)

    if inspect.isgeneratorfunction(compute):

        @functools.wraps(compute)
        def generator(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from compute(*args, **kwargs)
            except RunInterrupted:
                raise
            except interrupts as interrupt:
                raise RunInterrupted(INTERRUPTED) from interrupt

        return generator  # type: ignore[return-value]

    @functools.wraps(compute)
    def function(*args: Any, **kwargs: Any) -> Any:
        try:
            return compute(*args, **kwargs)
        except RunInterrupted:
            raise
        except interrupts as interrupt:
            raise RunInterrupted(INTERRUPTED) from interrupt

    return function  # type: ignore[return-value]


def retried_op(**op_kwargs: Any) -> Callable[[F], dg.OpDefinition]:
    """``dg.op(**op_kwargs)`` with :data:`SHARD_RETRY_POLICY`, whose compute stops the run on an interrupt."""
    if "retry_policy" in op_kwargs:
        raise TypeError("retried_op sets the retry policy itself (SHARD_RETRY_POLICY)")

    def decorate(compute: F) -> dg.OpDefinition:
        return dg.op(retry_policy=SHARD_RETRY_POLICY, **op_kwargs)(stops_on_interrupt(compute))

    return decorate
