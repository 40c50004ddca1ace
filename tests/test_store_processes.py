"""Several processes on one store file, killed writers: no acknowledged write is ever lost (issue 19).

The children are real processes (``tests/support/store_workers.py``) writing through the product's store classes.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from llm.cache import AnswerCache
from review.store import ReviewStore
from tests.conftest import ROOT
from tests.support.store_workers import AT_LEAST, GRACE_S, Acknowledged, answer_value, worker


def expect_line(child: subprocess.Popen[str], expected: str) -> None:
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    assert line == expected, f"worker said {line!r}, expected {expected!r}"


def test_a_write_after_another_process_opened_and_closed_the_file_survives_a_kill(tmp_path: Path) -> None:
    """The issue's smallest reproduction: two ``AnswerCache`` objects on one file in one process, another process
    opens and closes the file, the first process writes again and is killed with SIGKILL: the write is there."""
    path = tmp_path / "answers.sqlite"
    writer = worker("two-caches", path)
    try:
        expect_line(writer, "ready")
        subprocess.run(
            [sys.executable, "-c", f"from llm.cache import AnswerCache; AnswerCache({str(path)!r}).close()"],
            cwd=ROOT, check=True, timeout=60,
        )  # fmt: skip
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
        expect_line(writer, "committed second")
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=10)
    reopened = AnswerCache(path)
    try:
        for key in ("first", "second"):
            found = reopened.get(key)
            assert found is not None, f"the acknowledged answer {key!r} was lost"
            assert found.value == answer_value(key)
    finally:
        reopened.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


SOAK_S = 10.0
MOST = 3_000  # answers or items per writer: the bound in iterations


def test_soak_several_writers_and_readers_on_both_stores(tmp_path: Path) -> None:
    """Three answer writers and one review writer (each with two store objects on its file) and two readers
    opening and closing both files in a loop, for SOAK_S seconds: both files pass ``integrity_check`` and hold
    exactly the rows the writers reported committing."""
    answers_path = tmp_path / "answers.sqlite"
    review_path = answers_path.with_suffix(".review")
    AnswerCache(answers_path).close()  # made before the race, as a build makes it before its steps run
    ReviewStore(review_path).close()
    writers = [worker("answers-writer", answers_path, SOAK_S, MOST) for _ in range(3)]
    review_writer = worker("review-writer", review_path, SOAK_S, MOST)
    readers = [worker("reader", answers_path, SOAK_S) for _ in range(2)]
    outputs = {"answers": [Acknowledged(child) for child in writers], "items": [Acknowledged(review_writer)],
               "opens": [Acknowledged(child) for child in readers]}  # fmt: skip
    reports: dict[str, list[int]] = {}
    for what, readings in outputs.items():
        for reading in readings:
            assert reading.child.wait(timeout=SOAK_S + GRACE_S + 60) == 0, reading.last
            reading.join(timeout=10)
            assert reading.last.startswith("done "), reading.last
            reports.setdefault(what, []).append(int(reading.last.split()[1]))
            if what != "opens":
                assert len(reading.keys) == reports[what][-1]  # every commit was acknowledged
    with sqlite3.connect(answers_path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        answers = raw.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        ledger = raw.execute("SELECT COUNT(*) FROM usage").fetchone()[0]
    raw.close()
    with sqlite3.connect(review_path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        items = raw.execute("SELECT COUNT(*) FROM items").fetchone()[0]
        audit = raw.execute("SELECT COUNT(*) FROM audit").fetchone()[0]
    raw.close()
    print(
        f"soak {SOAK_S:.0f} s: answer writers committed {reports['answers']} (store: {answers} answers, {ledger} "
        f"ledger rows), review writer {reports['items']} (store: {items} items, {audit} audit rows), readers opened "
        f"both files {reports['opens']} times"
    )
    assert answers == ledger == sum(reports["answers"]) and min(reports["answers"]) >= AT_LEAST
    assert items == audit == sum(reports["items"]) >= AT_LEAST
    assert min(reports["opens"]) > 0
