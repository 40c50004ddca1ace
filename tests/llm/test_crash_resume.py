"""A stage killed mid-way (SIGKILL) and rerun repeats no finished request and loses no answer; a kill between any
two writes of the answer store leaves every paid call in the ledger with its answer or failure (issue 33)."""

import collections
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.llm.conftest import API_KEY
from tests.support.ledger_child import REQUESTS, ledger_responder, run_stage

CHILD = """
import sys
from pathlib import Path
from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from tests.llm.conftest import make_request

url, cache_path, key = sys.argv[1:4]
client = LLMClient(LLMSettings(base_url=url, max_concurrency=4), AnswerCache(Path(cache_path)), key)
results = client.run([make_request(n) for n in range(40)], scope="t/stage")
print("ok", sum(r.ok for r in results))
"""


def cached_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    try:
        with sqlite3.connect(path, timeout=5) as db:
            return {row[0] for row in db.execute("SELECT custom_id FROM answers")}
    except sqlite3.OperationalError:  # the child is still creating the file's tables
        return set()


def test_sigkill_mid_stage_then_rerun(server, tmp_path: Path) -> None:
    server.latency_s = 0.1
    cache = tmp_path / "llm.sqlite"
    command = [sys.executable, "-c", CHILD, server.url, str(cache), API_KEY]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(cached_ids(cache)) < 12 and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    saved = cached_ids(cache)
    assert 12 <= len(saved) < 40, "the kill should land mid-stage"

    rerun = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert rerun.stdout.strip() == "ok 40"
    assert len(cached_ids(cache)) == 40

    asked = collections.Counter(json.loads(r.body)["messages"][-1]["content"] for r in server.chat_requests())
    for custom_id in saved:  # answers saved before the kill were never asked again
        assert asked[f"question {custom_id.removeprefix('item-')}"] == 1
    assert sum(asked.values()) <= 40 + 4  # at most the requests in flight at the kill are repeated


def ledger(path: Path) -> tuple[collections.Counter[str], set[str], dict[str, int]]:
    """The answer store at ``path``: usage rows per custom id, the custom ids answered, and each failure's custom id
    with its ``reask`` flag (1: awaiting its re-ask)."""
    with sqlite3.connect(path, timeout=5) as db:
        usage = collections.Counter(row[0] for row in db.execute("SELECT custom_id FROM usage"))
        answered = {row[0] for row in db.execute("SELECT custom_id FROM answers")}
        failed = dict(db.execute("SELECT custom_id, reask FROM failures").fetchall())
    return usage, answered, failed


def sent_since(server, start: int) -> list[tuple[str, bool]]:
    """``(custom id, whether a re-ask)`` of each chat request after the first ``start``."""
    bodies = [json.loads(request.body) for request in server.chat_requests()[start:]]
    return [(f"item-{b['messages'][1]['content'].rsplit(' ', 1)[1]}", len(b["messages"]) > 2) for b in bodies]


def test_a_kill_between_any_two_ledger_writes_loses_no_paid_answer_and_pays_for_none_twice(server, tmp_path) -> None:
    server.set_responder(ledger_responder)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def stage(cache: Path, kill_after: int) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "tests.support.ledger_child", server.url, str(cache), str(kill_after)]
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    whole = stage(tmp_path / "whole.sqlite", 0)
    assert whole.returncode == 0, whole.stderr[-2000:]
    writes, ok = map(int, whole.stdout.split())
    paid = collections.Counter(custom_id for custom_id, _ in sent_since(server, 0))
    assert ok == 3 and paid == {"item-0": 1, "item-1": 2, "item-2": 2, "item-3": 1}
    assert writes >= 1 + REQUESTS  # the store's creation, then at least one write per request
    for kill_after in range(1, writes):  # a kill just after each write but the last
        cache, start = tmp_path / f"killed-{kill_after}.sqlite", len(server.chat_requests())
        killed = stage(cache, kill_after)
        assert killed.returncode == -signal.SIGKILL, (kill_after, killed.stderr[-2000:])
        sent = collections.Counter(custom_id for custom_id, _ in sent_since(server, start))
        usage, answered, failed = ledger(cache)
        assert usage == sent, kill_after  # every call the server answered is in the ledger (none was in flight)
        assert set(usage) == answered | set(failed), kill_after  # each ledger row with its answer or failure

        start = len(server.chat_requests())
        assert [result.ok for result in run_stage(server.url, cache)] == [True, True, False, True]
        again = sent_since(server, start)
        settled = answered | {custom_id for custom_id, reask in failed.items() if not reask}
        assert not {custom_id for custom_id, _ in again} & settled, kill_after  # nothing settled is asked again
        awaiting = {custom_id for custom_id, reask in failed.items() if reask}
        assert {custom_id for custom_id, reask in again if not reask}.isdisjoint(awaiting), kill_after  # re-ask only
        assert sent + collections.Counter(custom_id for custom_id, _ in again) == paid, kill_after  # none paid twice
        assert ledger(cache) == (paid, {"item-0", "item-1", "item-3"}, {"item-2": 0}), kill_after
