"""``python -m tests.support.ledger_child URL CACHE KILL_AFTER``: one LLM stage, :func:`run_stage`, against the test
server at ``URL`` (answering with :func:`ledger_responder`), its answers and ledger in the answer store ``CACHE``.

``KILL_AFTER`` (N >= 1): the process SIGKILLs itself just after the N-th write transaction of the answer store
commits (:func:`kill_after_commit`), so the store is left as a kill between two writes leaves it; with fewer writes
the stage completes. Every run prints how many write transactions it committed. The fault is injected from outside
the code under test: ``SQLiteStore.write`` is wrapped in this process only, so a write the client gains is a kill
point without any change here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from conteb.sqlite_files import SQLiteStore
from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from llm.types import LLMResult
from tests.llm.conftest import API_KEY, make_request

REQUESTS = 4
"""``item-0`` valid at once, ``item-1`` valid on its re-ask, ``item-2`` never valid, ``item-3`` valid at once."""


def ledger_responder(body: dict[str, Any]) -> dict[str, Any]:
    """The answer to ``question N`` (the request's user message): out of the schema's range (index 9) for ``N = 2``,
    and for ``N = 1`` unless re-asked; else valid."""
    question = str(body["messages"][1]["content"])
    n = int(question.rsplit(" ", 1)[1])
    invalid = n == 2 or (n == 1 and len(body["messages"]) == 2)
    return {"index": 9 if invalid else 0, "echo": question}


def run_stage(url: str, cache_path: Path) -> list[LLMResult]:
    """The stage: :data:`REQUESTS` requests, one at a time, in ``json_schema`` mode, scope ``t/stage``."""
    settings = LLMSettings(base_url=url, max_concurrency=1, structured_output="json_schema", backoff_initial_s=0.01)
    client = LLMClient(settings, AnswerCache(cache_path), API_KEY)
    return client.run([make_request(n) for n in range(REQUESTS)], scope="t/stage")


def kill_after_commit(kill_after: int) -> Callable[[], int]:
    """Wrap ``SQLiteStore.write`` so that this process SIGKILLs itself just after its ``kill_after``-th outermost
    write transaction commits (never when ``kill_after`` is 0); returns how many have committed so far."""
    original = SQLiteStore.write
    commits = 0

    @contextlib.contextmanager
    def write(self: SQLiteStore) -> Iterator[Any]:
        nonlocal commits
        with original(self) as conn:
            yield conn
        if self._depth == 0:  # the outermost block ended without raising: committed
            commits += 1
            if commits == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)

    SQLiteStore.write = write  # type: ignore[method-assign]
    return lambda: commits


if __name__ == "__main__":
    committed = kill_after_commit(int(sys.argv[3]))
    results = run_stage(sys.argv[1], Path(sys.argv[2]))
    print(committed(), sum(result.ok for result in results))
