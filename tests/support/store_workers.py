"""Child processes for the multi-process store tests (issue 19): ``python -m tests.support.store_workers ROLE ...``,
and the helpers that start them (:func:`worker`), read what they acknowledge (:class:`Acknowledged`) and run a
``conteb`` command in a loop (:class:`CommandLoop`).

Test code, not shipped. Each role writes only through the product's store classes (:class:`llm.cache.AnswerCache`,
:class:`review.store.ReviewStore`, :class:`llm.client.LLMClient`), so what is tested is what the pipeline runs. A
writer prints ``committed <key>`` only after the store call that commits the row has returned: that line is the
acknowledgement the tests hold the store to.

Roles:

* ``two-caches PATH``: opens two ``AnswerCache`` objects on PATH, writes ``first`` through the first one, prints
  ``ready``, waits for a line on stdin, writes ``second`` through the second object, prints ``committed second``
  and sleeps until it is killed (the issue's smallest reproduction).
* ``answers-writer PATH SECONDS MAX``: two ``AnswerCache`` objects on PATH, writing answers and ledger rows in
  turn through both until SECONDS have passed or MAX answers are written (:func:`keep_writing`); then
  ``done <answers>``.
* ``review-writer PATH SECONDS MAX``: two ``ReviewStore`` objects on PATH, pushing one item per transaction in turn
  through both, as long; then ``done <items>``.
* ``reader PATH SECONDS``: opens and closes an ``AnswerCache`` on PATH and a ``ReviewStore`` on PATH's ``.review``
  sibling in a loop, reading a count each time; then ``done <opens>``.
* ``llm-writer PATH URL COUNT``: two ``LLMClient`` objects, each with its own ``AnswerCache`` on PATH, asking the
  OpenAI-compatible server at URL for requests ``0..COUNT-1`` (``tests.llm.conftest.make_request``) two at a time,
  in turn; ``committed item-<n>`` for each answer once ``run`` has returned it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from llm.cache import AnswerCache
from llm.usage import TokenUsage

ROOT = Path(__file__).resolve().parents[2]
USAGE = TokenUsage(prompt_tokens=120, completion_tokens=30, cached_tokens=0)


# --- the parent's side -------------------------------------------------------------------------------------------


def worker(role: str, *args: object) -> subprocess.Popen[str]:
    """``python -m tests.support.store_workers ROLE ARGS...`` with pipes on stdin and stdout."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.store_workers", role, *map(str, args)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


class Acknowledged(threading.Thread):
    """Reads a worker's stdout in the background: ``keys`` (every ``committed <key>``, in order) and ``last``."""

    def __init__(self, child: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.child = child
        self.keys: list[str] = []
        self.last = ""
        self.start()

    def run(self) -> None:
        assert self.child.stdout is not None
        for line in self.child.stdout:
            self.last = line.strip()
            if self.last.startswith("committed "):
                self.keys.append(self.last.removeprefix("committed "))


class CommandLoop(threading.Thread):
    """Runs ``command`` (a process each time) again and again until :attr:`stop` is set; counts the runs and keeps
    the output of every run that exited non-zero or did not print ``expect``."""

    def __init__(self, command: Sequence[str], expect: str) -> None:
        super().__init__(daemon=True)
        self.command = list(command)
        self.expect = expect
        self.stop = threading.Event()
        self.runs = 0
        self.failures: list[str] = []
        self.start()

    def run(self) -> None:
        while not self.stop.is_set():
            done = subprocess.run(self.command, capture_output=True, text=True, timeout=120)
            if done.returncode != 0 or self.expect not in done.stdout:
                self.failures.append(done.stdout + done.stderr)
            self.runs += 1


def wait_for_runs(loops: Sequence[CommandLoop], more: int, timeout_s: float = 60) -> None:
    """Wait until the loops together have finished ``more`` runs more than now."""
    target = sum(loop.runs for loop in loops) + more
    deadline = time.monotonic() + timeout_s
    while sum(loop.runs for loop in loops) < target:
        assert time.monotonic() < deadline, "the command loops stalled"
        time.sleep(0.05)


def stop_all(loops: Sequence[CommandLoop]) -> list[str]:
    """Stop the loops, wait for them, and return the failed runs' output."""
    for loop in loops:
        loop.stop.set()
    for loop in loops:
        loop.join(timeout=120)
    return [failure for loop in loops for failure in loop.failures]


# --- the children ------------------------------------------------------------------------------------------------


AT_LEAST = 10
"""A soak writer goes on past its SECONDS until it has committed this many rows (the lock is not fair, and the
machine may be loaded), for at most :data:`GRACE_S` more."""
GRACE_S = 20.0


def keep_writing(started: float, seconds: float, written: int, most: int) -> bool:
    """Whether a soak writer started at ``started`` (``time.monotonic()``) writes another row."""
    elapsed = time.monotonic() - started
    if written >= most or elapsed >= seconds + GRACE_S:
        return False
    return elapsed < seconds or written < AT_LEAST


def answer_value(key: str) -> dict[str, str]:
    """The JSON answer a worker stores under ``key`` (the test checks it back)."""
    return {"answer": f"the answer for {key}", "pad": "x" * 200}


def put(cache: AnswerCache, key: str) -> None:
    cache.put(key, key, "test-model", "test@v1", answer_value(key), USAGE)


def two_caches(path: Path) -> None:
    first, second = AnswerCache(path), AnswerCache(path)
    put(first, "first")
    print("ready", flush=True)
    sys.stdin.readline()
    put(second, "second")
    print("committed second", flush=True)
    time.sleep(600)


def answers_writer(path: Path, seconds: float, most: int) -> None:
    caches = (AnswerCache(path), AnswerCache(path))
    started = time.monotonic()
    answers = 0
    while keep_writing(started, seconds, answers, most):
        cache = caches[answers % 2]
        key = f"{os.getpid()}-{answers}"
        put(cache, key)
        cache.record_usage("soak/writer", key, "test-model", USAGE, 0.001, "online")
        answers += 1
        print(f"committed {key}", flush=True)
    for cache in caches:
        cache.close()
    print(f"done {answers}", flush=True)


def review_writer(path: Path, seconds: float, most: int) -> None:
    from curation.review_items import review_item, review_items_table
    from review.store import ReviewStore

    stores = (ReviewStore(path), ReviewStore(path))
    started = time.monotonic()
    items = 0
    while keep_writing(started, seconds, items, most):
        object_id = f"w{os.getpid()}-{items}"
        row = review_item("soak", "reformulation", object_id, "doc", f"Proposal {items}.", "llm", original="Original.")
        stores[items % 2].push(review_items_table([row]))
        items += 1
        print(f"committed {object_id}", flush=True)
    for store in stores:
        store.close()
    print(f"done {items}", flush=True)


def reader(path: Path, seconds: float) -> None:
    from review.store import ReviewStore

    deadline = time.monotonic() + seconds
    opens = 0
    while time.monotonic() < deadline:
        cache = AnswerCache(path)
        cache.usage()
        cache.close()
        store = ReviewStore(path.with_suffix(".review"))
        store.stats()
        store.close()
        opens += 1
    print(f"done {opens}", flush=True)


def llm_writer(path: Path, url: str, count: int) -> None:
    from llm.client import LLMClient
    from llm.settings import LLMSettings
    from tests.llm.conftest import API_KEY, make_request

    settings = LLMSettings(base_url=url, timeout_s=10.0, backoff_initial_s=0.01, backoff_max_s=0.2, max_attempts=4)
    clients = [LLMClient(settings, AnswerCache(path), API_KEY) for _ in range(2)]
    for start in range(0, count, 2):
        results = clients[start // 2 % 2].run([make_request(n) for n in (start, start + 1)], scope="demo/reformulation")
        for result in results:
            if result.value is not None:
                print(f"committed {result.custom_id}", flush=True)
    print("done", flush=True)


def main(argv: list[str]) -> None:
    role, path = argv[0], Path(argv[1])
    if role == "two-caches":
        two_caches(path)
    elif role == "answers-writer":
        answers_writer(path, float(argv[2]), int(argv[3]))
    elif role == "review-writer":
        review_writer(path, float(argv[2]), int(argv[3]))
    elif role == "reader":
        reader(path, float(argv[2]))
    elif role == "llm-writer":
        llm_writer(path, argv[2], int(argv[3]))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
