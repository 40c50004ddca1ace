"""The real `conteb review serve` deciding over HTTP while `conteb review stats` runs in other processes, then
killed with SIGKILL: every decision the server acknowledged is in the store (issue 19).

Before issue 19 the server's process opened the store twice (the command, then the app) and the second open read
the file's header with a plain ``open()``/``close()``, which dropped the process's SQLite locks; a ``stats``
process closing then took itself for the last user and deleted the ``-wal`` the server still wrote into.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conteb.storage import review_store_path
from curation.review_items import review_item, review_items_table
from review.store import ReviewStore
from tests.conftest import SAMPLE_DIR
from tests.review.test_web import _decide, _set_reviewer
from tests.support.store_workers import CommandLoop, stop_all, wait_for_runs

CONTEB = str(Path(sys.executable).parent / "conteb")
ITEMS = 30
ROUNDS = 3


@pytest.fixture
def registry(tmp_path: Path, isolated_env: Path) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    rows = [
        review_item("demo", "reformulation", f"doc_{i}", "doc", f"rewrite {i}", "llm", original=f"original {i}")
        for i in range(ITEMS)
    ]
    with ReviewStore(review_store_path(isolated_env)) as store:
        store.push(review_items_table(rows))
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_decisions_acknowledged_by_a_killed_server_are_all_kept(registry: Path, isolated_env: Path) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [CONTEB, "--config", str(registry), "review", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ},
    )  # fmt: skip
    loops: list[CommandLoop] = []
    acknowledged: dict[str, str] = {}
    try:
        web = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                if web.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        _set_reviewer(web, "ana")
        stats = [CONTEB, "--config", str(registry), "review", "stats"]
        loops += [CommandLoop(stats, expect="decided") for _ in range(2)]
        per_round = ITEMS // ROUNDS
        for round_ in range(ROUNDS):
            for i in range(round_ * per_round, (round_ + 1) * per_round):
                item_id, action = f"demo:reformulation:doc_{i}", ("accept", "reject")[i % 2]
                response = _decide(web, item_id, action)
                assert response.status_code == 303, response.text
                acknowledged[item_id] = {"accept": "accepted", "reject": "rejected"}[action]
            wait_for_runs(loops, 2)  # stats processes opened and closed the store since these decisions
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
        failures = stop_all(loops)
    assert len(acknowledged) == ROUNDS * (ITEMS // ROUNDS)
    assert not failures, failures[0]
    with ReviewStore(review_store_path(isolated_env)) as store:
        kept = {item.item_id: item.status for item in store.items(task="demo")}
        decisions = [entry for entry in store.audit() if entry.action in ("accept", "reject")]
    lost = {item_id: status for item_id, status in acknowledged.items() if kept[item_id] != status}
    assert not lost, f"{len(lost)} acknowledged decisions lost: {sorted(lost)[:5]}"
    assert len(decisions) == len(acknowledged)
    print(f"{len(acknowledged)} decisions acknowledged and kept; {sum(loop.runs for loop in loops)} stats runs")
