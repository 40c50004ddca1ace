"""Small performance helpers for bulk, allocation-heavy stage work."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Suspend the cyclic garbage collector while building many acyclic objects.

    Parsing a corpus's questions creates many small objects, which trigger collections that find nothing to free
    (bench/BENCHMARKS.md, "Curation overhead", "What was changed after the first measurement"). Reference
    counting still frees memory; the collector resumes (without a forced pass) on exit.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
