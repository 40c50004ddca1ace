"""A torchrun worker that only watches its launcher: ``python -m tests.support.watched_rank <folder>``.

Test code (tests/training/test_supervision.py). Sets up :func:`training.supervision.watch_parent` as a training rank
does (``pipelines.pipes_train``, ``python -m training`` under torchrun), writes its pid to ``<folder>/rank-<RANK>.pid``
and sleeps: it stops only if the watch stops it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from training.supervision import watch_parent

if __name__ == "__main__":
    watch_parent(poll_s=0.2)
    target = Path(sys.argv[1]) / f"rank-{os.environ['RANK']}.pid"
    tmp = target.with_suffix(".tmp")
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, target)
    time.sleep(600)
