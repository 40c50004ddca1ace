"""A stage killed mid-way (SIGKILL) and rerun repeats no finished request and loses no answer."""

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
