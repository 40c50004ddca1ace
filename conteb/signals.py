"""Short critical sections that Ctrl-C (SIGINT) and SIGTERM cannot cut in half.

:func:`deferred_interrupts` holds back the two signals for the duration of a block that must run to its end once
started (moving a set of finished files into place), then delivers what arrived to the handler that was in place
before (Python's ``KeyboardInterrupt``, or Dagster's handler inside a run), so the interrupt is late by the length
of the block, never lost. Python runs signal handlers in the main thread only, so only there can a signal interrupt
the block, and only there can handlers be replaced (``signal.signal``); in any other thread the block simply runs.
A handler that Python did not install (``signal.getsignal`` returns None) cannot be put back, so that signal is not
deferred.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

INTERRUPTS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def deferred_interrupts(signals: Sequence[signal.Signals] = INTERRUPTS) -> Iterator[None]:
    """Run the block with ``signals`` held back; re-raise each one that arrived (once) when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[signal.Signals] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        received.append(signal.Signals(signum))

    previous = {number: signal.getsignal(number) for number in signals}
    previous = {number: handler for number, handler in previous.items() if handler is not None}
    for number in previous:
        signal.signal(number, hold)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(received):
            signal.raise_signal(number)
