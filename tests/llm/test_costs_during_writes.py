"""A process paying for LLM answers (the product's ``LLMClient`` + ``AnswerCache``, against the local
OpenAI-compatible server) while `conteb costs` runs in a loop in other processes, killed with SIGKILL: every answer
it acknowledged is in the store, and the next run asks the server for none of them (issue 19).

The writer holds two answer stores on the file, as a Dagster step process does when two LLM stages (or a stage and
its ledger read) each open one; before issue 19 the second open dropped the process's SQLite locks, and a `costs`
process closing the file then deleted the ``-wal`` the writer still wrote into.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import sys
import time
from pathlib import Path

from conteb.storage import llm_cache_path
from tests.conftest import SAMPLE_DIR
from tests.llm.conftest import answers, make_request
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.store_workers import Acknowledged, CommandLoop, stop_all, wait_for_runs, worker

CONTEB = str(Path(sys.executable).parent / "conteb")
ROUNDS = 3


def _asked(server: OpenAICompatibleServer, start: int = 0) -> list[int]:
    """The request numbers (``question <n>``) of the chat requests the server received, from the ``start``-th on."""
    return [
        int(re.search(r"question (\d+)", body["messages"][-1]["content"]).group(1)) for body in answers(server)[start:]
    ]


def test_answers_acknowledged_by_a_killed_writer_survive_costs_in_a_loop(
    tmp_path: Path, isolated_env: Path, server: OpenAICompatibleServer, make_client
) -> None:
    registry = tmp_path / "conteb.yaml"
    registry.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    path = llm_cache_path(isolated_env)
    writer = worker("llm-writer", path, server.url, 5_000)
    acknowledged = Acknowledged(writer)
    loops: list[CommandLoop] = []
    try:
        deadline = time.monotonic() + 60
        while not acknowledged.keys:
            assert writer.poll() is None and time.monotonic() < deadline, "the writer did not start"
            time.sleep(0.05)
        loops += [CommandLoop([CONTEB, "--config", str(registry), "costs"], expect="task/stage") for _ in range(2)]
        for _ in range(ROUNDS):
            wait_for_runs(loops, 2)  # costs processes opened and closed the store while the writer wrote
        assert writer.poll() is None, f"the writer finished before the kill: {acknowledged.last}"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=10)
        failures = stop_all(loops)
        acknowledged.join(timeout=10)
    assert not failures, failures[0]
    kept = acknowledged.keys
    assert len(kept) >= 10, kept
    with sqlite3.connect(path) as raw:
        stored = {row[0] for row in raw.execute("SELECT custom_id FROM answers")}
        ledger = raw.execute("SELECT COUNT(*) FROM usage").fetchone()[0]
    raw.close()
    lost = [custom_id for custom_id in kept if custom_id not in stored]
    assert not lost, f"{len(lost)} of {len(kept)} acknowledged answers lost, e.g. {lost[:3]}"
    assert ledger >= len(kept)

    first_run = len(server.chat_requests())
    sent = max(_asked(server)) + 1
    client = make_client(cache_path=path)
    results = client.run([make_request(n) for n in range(sent)], scope="demo/reformulation")
    assert all(result.value is not None for result in results)
    asked_again = {f"item-{n}" for n in _asked(server, first_run)}
    assert not asked_again & set(kept), "the rerun paid again for acknowledged answers"
    assert len(asked_again) <= 2  # at most the requests in flight at the kill
    client.cache.close()
    print(f"{len(kept)} answers acknowledged and kept; {sum(loop.runs for loop in loops)} costs runs")
