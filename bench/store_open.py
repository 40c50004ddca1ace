"""Opening a large LLM answer store: the checks on every open against ``PRAGMA quick_check`` / ``integrity_check``
(issue 19, part 1), and what ``synchronous=FULL`` costs a commit.

Store: ``--size-gb`` of realistic rows written through ``llm.cache.AnswerCache`` (the product's code path) into a
temporary folder: per answer, a SHA-256 key, a ``custom_id`` like the stages' (``task/stage/doc_chunk``), a JSON
answer of ~1,000 characters of words (a reformulated chunk's size) and one cost-ledger row, 2,000 answers per
transaction (``AnswerCache.writes``). The folder is removed at the end unless ``--keep``.

Measured, ``--repeats`` times each, every connection closed in between (medians, and min–max):

* ``baseline``: a bare ``sqlite3.connect`` + one query (``SELECT COUNT(*) FROM sqlite_master``) + close;
* ``open``: ``AnswerCache(path)`` + close: every check of ``conteb.sqlite_files`` on open, the policy's pragmas and
  the schema/migration transaction;
* ``open + quick_check`` and ``open + integrity_check``: ``conteb.sqlite_files.check_store`` (its own open included),
  what ``conteb llm check [--quick]`` runs;

each warm (the file in the page cache) and cold (``posix_fadvise(DONTNEED)`` on the file first: the benchmark opens
the file itself only then, while it holds no connection to it). Each is also given as a ratio to the baseline of
the same run. Commits: ``--commits`` single ``AnswerCache.put`` calls (synchronous FULL, one fsync each) against
the same insert + commit on a bare connection with ``synchronous=NORMAL``.

Usage (from the repository root)::

    python bench/store_open.py [--size-gb 1.0] [--repeats 5] [--commits 200] [--folder /tmp] [--json out.json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `import llm` from a checkout

import argparse
import hashlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable

from bench.record import result_header
from conteb.sqlite_files import check_store
from llm.cache import ANSWER_STORE, AnswerCache
from llm.usage import TokenUsage

_TEXT = (
    "the of and in to a was is for on as by with from that at his an were are which this be or its first their "
    "after also has new other two but not had it one they been more have city all during can into time only some "
    "university world may state most years such these her where when between many there would both three however"
)
WORDS = tuple(_TEXT.split(" "))
TRANSACTION = 2_000


def answer_text(rng: random.Random) -> str:
    """About 1,000 characters of words: the size of a reformulated chunk."""
    words: list[str] = []
    length = 0
    while length < 1_000:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def build(path: Path, size_bytes: int) -> int:
    """Write answers and ledger rows through ``AnswerCache`` until the file holds ``size_bytes``; returns the count."""
    rng = random.Random(0)
    cache = AnswerCache(path)
    answers = 0
    started = time.perf_counter()
    while path.stat().st_size + _wal_size(path) < size_bytes:
        with cache.writes():
            for _ in range(TRANSACTION):
                key = hashlib.sha256(f"answer {answers}".encode()).hexdigest()
                custom_id = f"squad/reformulation/{answers // 40:06d}_{answers % 40}"
                usage = TokenUsage(prompt_tokens=rng.randint(300, 2_500), completion_tokens=rng.randint(150, 400))
                cache.put(key, custom_id, "gpt-4o-mini", "reformulation@v3:1a2b3c4d5e6f",
                          {"rewritten": answer_text(rng)}, usage)  # fmt: skip
                cache.record_usage("squad/reformulation", custom_id, "gpt-4o-mini", usage, 0.0004, "online")
                answers += 1
        if answers % 100_000 == 0:
            print(f"  {answers:,} answers, {path.stat().st_size / 1e9:.2f} GB, {time.perf_counter() - started:.0f} s")
    cache.close()  # the last connection: SQLite checkpoints the WAL into the file
    return answers


def _wal_size(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal").st_size
    except FileNotFoundError:
        return 0


def evict(path: Path) -> None:
    """Drop the file's pages from the page cache (no connection to it is open in this process now)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def baseline(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    conn.close()


def open_store(path: Path) -> None:
    AnswerCache(path).close()


def quick_check(path: Path) -> None:
    assert check_store(path, ANSWER_STORE, quick=True).ok


def integrity_check(path: Path) -> None:
    assert check_store(path, ANSWER_STORE).ok


def timed(action: Callable[[Path], None], path: Path, repeats: int, cold: bool) -> list[float]:
    action(path)  # once untimed: warm the cache (and the code)
    times = []
    for _ in range(repeats):
        if cold:
            evict(path)
        started = time.perf_counter()
        action(path)
        times.append(time.perf_counter() - started)
    return times


def commit_costs(folder: Path, commits: int) -> dict[str, float]:
    """Milliseconds per commit: ``AnswerCache.put`` (FULL) and a bare insert + commit with ``synchronous=NORMAL``."""
    rng = random.Random(1)
    cache = AnswerCache(folder / "commits.sqlite")
    started = time.perf_counter()
    for n in range(commits):
        cache.put(f"k{n}", f"c{n}", "m", "t", {"rewritten": answer_text(rng)}, TokenUsage(1, 1))
    full = (time.perf_counter() - started) / commits * 1e3
    cache.close()
    bare = sqlite3.connect(folder / "bare.sqlite", isolation_level=None)
    bare.execute("PRAGMA journal_mode = WAL")
    bare.execute("PRAGMA synchronous = NORMAL")
    bare.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT)")
    started = time.perf_counter()
    for n in range(commits):
        bare.execute("BEGIN IMMEDIATE")
        bare.execute("INSERT INTO answers VALUES (?, ?)", (f"k{n}", json.dumps({"rewritten": answer_text(rng)})))
        bare.execute("COMMIT")
    normal = (time.perf_counter() - started) / commits * 1e3
    bare.close()
    return {"put_full_ms": round(full, 3), "bare_normal_ms": round(normal, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep the store (its path is printed)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="store-open-", dir=args.folder))
    rows: list[dict] = []
    result = result_header(args, rows)
    try:
        path = folder / "answers.sqlite"
        started = time.perf_counter()
        answers = build(path, int(args.size_gb * 1e9))
        size = path.stat().st_size
        result["store"] = {"answers": answers, "bytes": size, "build_s": round(time.perf_counter() - started, 1)}
        print(f"store: {answers:,} answers, {size / 1e9:.3f} GB, built in {result['store']['build_s']} s")
        actions = {"baseline": baseline, "open": open_store, "open + quick_check": quick_check,
                   "open + integrity_check": integrity_check}  # fmt: skip
        for cache_state in ("warm", "cold"):
            base = None
            for name, action in actions.items():
                times = timed(action, path, args.repeats, cold=cache_state == "cold")
                median = statistics.median(times)
                base = median if name == "baseline" else base
                row = {"cache": cache_state, "what": name, "median_s": median, "min_s": min(times),
                       "max_s": max(times), "vs_baseline": median / base if base else None}  # fmt: skip
                rows.append(row)
                print(f"{cache_state:>4}  {name:<24} median {median * 1e3:10.2f} ms  (min {min(times) * 1e3:.2f}, "
                      f"max {max(times) * 1e3:.2f})  {row['vs_baseline']:10.1f}x baseline")  # fmt: skip
        result["commits"] = commit_costs(folder, args.commits)
        print(f"commit: AnswerCache.put (FULL) {result['commits']['put_full_ms']} ms, bare insert (NORMAL) "
              f"{result['commits']['bare_normal_ms']} ms")  # fmt: skip
    finally:
        if args.keep:
            print(f"kept: {folder}")
        else:
            shutil.rmtree(folder)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
