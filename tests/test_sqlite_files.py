"""``conteb.sqlite_files``: making, checking, marking and using the project's SQLite stores (issue 11, issue 19)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conteb.sqlite_files import SQLiteStore, check_store
from conteb.sqlite_kinds import APPLICATION_IDS, StoreFileError, StoreKind
from llm.cache import ANSWER_STORE, AnswerCache
from llm.usage import TokenUsage
from review.schema import REVIEW_STORE
from review.store import ReviewStore

NOTES = StoreKind("LLM answer store", "test rows", frozenset({"t"}), "conteb llm check")
"""A kind of store for these tests: the answer store's mark, one table ``t``."""


def _files(folder: Path) -> dict[str, str]:
    """Every file in ``folder`` -> the SHA-256 of its bytes (read when no connection is open)."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.iterdir())}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty folder of its own (``tmp_path`` also holds the test's Dagster home)."""
    made = tmp_path / "stores"
    made.mkdir()
    return made


def _fill(path: Path, rows: int = 200) -> None:
    store = SQLiteStore(path, NOTES)
    with store.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * rows)
    store.close()


def test_creates_a_marked_wal_file_and_reopens_it(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "store.sqlite"
    _fill(path, rows=1)
    assert sorted(p.name for p in path.parent.iterdir()) == ["store.sqlite"]  # no temporary or sidecar left
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_IDS["LLM answer store"]
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again = SQLiteStore(path, NOTES)
    with again.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    again.close()


def test_the_application_ids_are_distinct_and_the_kinds_name_the_tables_they_make(tmp_path: Path) -> None:
    assert len(set(APPLICATION_IDS.values())) == len(APPLICATION_IDS) and 0 not in APPLICATION_IDS.values()
    assert REVIEW_STORE.application_id != ANSWER_STORE.application_id
    AnswerCache(tmp_path / "answers.sqlite").close()
    ReviewStore(tmp_path / "review.sqlite").close()
    for name, kind in (("answers.sqlite", ANSWER_STORE), ("review.sqlite", REVIEW_STORE)):
        with sqlite3.connect(tmp_path / name) as raw:
            tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            assert raw.execute("PRAGMA application_id").fetchone()[0] == kind.application_id
        assert tables - {"sqlite_sequence"} == kind.tables


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"", "is empty"), (b"hello, not a database at all" * 10, "not a SQLite database")],
)
def test_refuses_empty_or_foreign_file_and_leaves_it(folder: Path, content: bytes, reason: str) -> None:
    path = folder / "review.sqlite"
    path.write_bytes(content)
    with pytest.raises(StoreFileError, match=reason) as error:
        SQLiteStore(path, NOTES)
    assert str(path) in str(error.value) and "test rows" in str(error.value) and "mv " in str(error.value)
    assert _files(folder) == {"review.sqlite": hashlib.sha256(content).hexdigest()}  # never started fresh


def _damage(path: Path, start: int, end: int) -> None:
    """Overwrite bytes ``start:end`` of ``path`` (no connection is open)."""
    data = bytearray(path.read_bytes())
    data[start:end] = b"\xff" * (min(end, len(data)) - start)
    path.write_bytes(bytes(data))


def test_a_damaged_first_page_is_refused_on_open(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    _fill(path)
    _damage(path, 100, 4096)  # the header is intact, the schema page is not
    with pytest.raises(StoreFileError, match="is damaged") as error:
        SQLiteStore(path, NOTES)
    message = str(error.value)
    assert str(path) in message and "conteb llm check" in message and ".recover" in message
    assert "do not delete it" in message and message.index("Check it first") < message.index("mv ")


def test_damage_met_later_names_the_file_and_the_check_finds_it(tmp_path: Path) -> None:
    """A damaged page in the body is not read on open (no full check there); the first statement that meets it
    raises StoreFileError naming the file and the check, and check_store reports it."""
    path = tmp_path / "answers.sqlite"
    _fill(path)
    assert check_store(path, NOTES).ok
    _damage(path, 4096, 8192)  # a page in the middle of the file
    store = SQLiteStore(path, NOTES)
    with pytest.raises(StoreFileError, match="is damaged") as error, store.read() as conn:
        conn.execute("SELECT COUNT(*), MAX(x) FROM t").fetchone()
    assert str(path) in str(error.value) and "conteb llm check" in str(error.value)
    with store.read() as conn:  # the store is still usable for what is intact
        assert conn.execute("SELECT 1").fetchone() == (1,)
    store.close()
    for quick in (True, False):
        result = check_store(path, NOTES, quick=quick)
        assert not result.ok and result.problems
        text = result.message(NOTES)
        assert "is damaged" in text and ".recover" in text and "Check it first" not in text


def test_a_truncated_file_is_refused(tmp_path: Path) -> None:
    """Without a WAL, SQLite itself finds the header's page count beyond the file's end (damaged); with one, the
    pages the WAL can hold do not make up for the missing ones (truncated). Both say not to delete it."""
    path = tmp_path / "answers.sqlite"
    _fill(path)
    size = path.stat().st_size
    os.truncate(path, size - 3 * 4096)  # an interrupted copy: the last pages are missing
    with pytest.raises(StoreFileError, match="is damaged") as damaged:
        SQLiteStore(path, NOTES)
    assert "do not delete it" in str(damaged.value) and path.stat().st_size == size - 3 * 4096

    with_wal = tmp_path / "with-wal.sqlite"
    _fill(with_wal)
    child = multiprocessing.get_context("spawn").Process(target=_one_more_row_then_die, args=(with_wal,))
    child.start()
    child.join(timeout=60)
    assert Path(f"{with_wal}-wal").stat().st_size > 0
    os.truncate(with_wal, with_wal.stat().st_size - 10 * 4096)
    with pytest.raises(StoreFileError, match="is truncated") as truncated:
        SQLiteStore(with_wal, NOTES)
    assert "do not delete it" in str(truncated.value)


def _one_more_row_then_die(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("INSERT INTO t VALUES ('one more')")
    os._exit(0)  # like a kill: the commit stays in the -wal


def test_another_applications_file_is_refused_and_left_byte_for_byte(folder: Path) -> None:
    for name, application_id in (("unmarked.db", 0), ("marked.db", 0x12345678)):
        path = folder / name
        with sqlite3.connect(path) as raw:
            raw.execute(f"PRAGMA application_id = {application_id}")
            raw.execute("CREATE TABLE notes (body TEXT)")
            raw.execute("INSERT INTO notes VALUES ('mine')")
        raw.close()
    before = _files(folder)
    with pytest.raises(StoreFileError, match=r"tables this store does not make \(notes\)") as unmarked:
        AnswerCache(folder / "unmarked.db")
    with pytest.raises(StoreFileError, match=r"another application's SQLite database \(application_id 0x12345678\)"):
        ReviewStore(folder / "marked.db")
    assert "Nothing was added to it" in str(unmarked.value) and str(folder / "unmarked.db") in str(unmarked.value)
    assert _files(folder) == before  # byte for byte, and no -wal, -shm or journal beside them


def test_a_foreign_file_with_a_hot_wal_is_not_checkpointed(folder: Path) -> None:
    """Another application killed with uncommitted-to-the-file WAL frames: refusing it changes neither file."""
    path = folder / "theirs.db"
    child = multiprocessing.get_context("spawn").Process(target=_leave_a_hot_wal, args=(path,))
    child.start()
    child.join(timeout=60)
    assert Path(f"{path}-wal").stat().st_size > 0
    before = _files(folder)
    with pytest.raises(StoreFileError, match="tables this store does not make"):
        AnswerCache(path)
    after = _files(folder)
    assert after["theirs.db"] == before["theirs.db"] and after["theirs.db-wal"] == before["theirs.db-wal"]


def _leave_a_hot_wal(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.executemany("INSERT INTO notes VALUES (?)", [("x" * 100,)] * 50)
    os._exit(0)  # like a kill: no close, no checkpoint


def test_one_kind_of_store_given_as_the_other_is_refused(folder: Path) -> None:
    review_path, answers_path = folder / "review.sqlite", folder / "answers.sqlite"
    ReviewStore(review_path).close()
    AnswerCache(answers_path).close()
    before = _files(folder)
    with pytest.raises(StoreFileError, match="is the project's review store, not its LLM answer store"):
        AnswerCache(review_path)
    with pytest.raises(StoreFileError, match="is the project's LLM answer store, not its review store"):
        ReviewStore(answers_path)
    after = _files(folder)
    assert {name: after[name] for name in before} == before  # the files themselves, byte for byte
    assert {name for name in after if name not in before} <= {
        f"{name}-{end}" for name in before for end in ("wal", "shm")
    }
    assert all(after[f"{name}-wal"] == hashlib.sha256(b"").hexdigest() for name in before if f"{name}-wal" in after)


OLD_ANSWERS_SCHEMA = """
CREATE TABLE answers (key TEXT PRIMARY KEY, custom_id TEXT, model TEXT, prompt_tag TEXT, value TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL);
CREATE TABLE usage (id INTEGER PRIMARY KEY, scope TEXT NOT NULL, custom_id TEXT, model TEXT,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, mode TEXT NOT NULL,
    created_at REAL NOT NULL);
CREATE TABLE batches (batch_id TEXT PRIMARY KEY, scope TEXT NOT NULL, keys_digest TEXT NOT NULL,
    status TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL);
INSERT INTO answers VALUES ('k1', 'c1', 'm', 'tag', '{"a": 1}', 10, 2, 0.0);
INSERT INTO usage VALUES (1, 'demo/theme', 'c1', 'm', 10, 2, 0.5, 'online', 0.0);
"""
"""An answer store as an earlier version made it: no application_id, no cached_tokens, no failures table."""


def _old_unmarked(path: Path, script: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(script)
    conn.close()


def test_an_unmarked_answer_store_of_an_earlier_version_is_adopted(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    _old_unmarked(path, OLD_ANSWERS_SCHEMA)
    cache = AnswerCache(path)
    found = cache.get("k1")
    assert found is not None and found.value == {"a": 1} and found.cached_tokens == 0
    assert cache.usage("demo/").cost_usd == 0.5
    cache.put("k2", "c2", "m", "tag", {"a": 2}, TokenUsage(5, 1))
    cache.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA application_id").fetchone()[0] == ANSWER_STORE.application_id
        assert raw.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 2
    with pytest.raises(StoreFileError, match="is the project's LLM answer store"):
        ReviewStore(path)  # marked now: the other kind refuses it


def test_an_unmarked_review_store_and_an_empty_database_are_adopted(tmp_path: Path) -> None:
    from curation.review_items import review_item, review_items_table
    from review.schema import SCHEMA

    path = tmp_path / "review.sqlite"
    _old_unmarked(path, ";\n".join(SCHEMA) + ";")
    with ReviewStore(path) as store:
        store.push(review_items_table([review_item("demo", "reformulation", "c0", "doc", "New text.", "llm")]))
        assert store.count() == 1
    empty = tmp_path / "empty.sqlite"
    _old_unmarked(empty, "")  # a header, no tables: what an earlier version left when killed at once
    AnswerCache(empty).close()
    for name, kind in ((path, REVIEW_STORE), (empty, ANSWER_STORE)):
        with sqlite3.connect(name) as raw:
            assert raw.execute("PRAGMA application_id").fetchone()[0] == kind.application_id


def test_nested_transactions_join_and_writes_commit_once(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    cache = AnswerCache(path)
    with cache.writes():
        cache.put("a", "a", "m", "t", {"v": 1}, TokenUsage())
        cache.put("b", "b", "m", "t", {"v": 2}, TokenUsage())
        with sqlite3.connect(path) as other:  # another connection sees nothing before the commit
            assert other.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 0
        other.close()
    assert set(AnswerCache(path).get_many(["a", "b"])) == {"a", "b"}
    with pytest.raises(ZeroDivisionError), cache.writes():
        cache.put("c", "c", "m", "t", {"v": 3}, TokenUsage())
        _ = 1 / 0
    assert cache.get("c") is None  # rolled back as a whole
    store = SQLiteStore(tmp_path / "notes.sqlite", NOTES)
    with pytest.raises(RuntimeError, match="a write inside a read"), store.read(), store.write():
        pass
    cache.close()
    store.close()


def test_a_store_inherited_by_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    cache = AnswerCache(path)
    cache.put("parent-1", "p", "m", "t", {"v": 1}, TokenUsage())
    inherited = cache._store._conn
    child = multiprocessing.get_context("fork").Process(target=_child_writes, args=(cache, id(inherited)))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    cache.put("parent-2", "p", "m", "t", {"v": 2}, TokenUsage())  # the parent's connection is untouched
    assert cache._store._conn is inherited
    assert set(cache.get_many(["parent-1", "child", "parent-2"])) == {"parent-1", "child", "parent-2"}
    cache.close()


def _child_writes(cache: AnswerCache, inherited_id: int) -> None:
    cache.put("child", "c", "m", "t", {"v": 0}, TokenUsage())
    assert id(cache._store._conn) != inherited_id  # a connection of its own, the inherited one set aside
    cache.close()


def test_processes_making_the_same_new_store_at_once_all_open_it(tmp_path: Path) -> None:
    """No process ever sees a half-made file (the store is made under a temporary name and linked into place), so
    none of several starting at once refuses it as empty."""
    path = tmp_path / "new" / "answers.sqlite"
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    children = [context.Process(target=_open_at_once, args=(path, barrier, n)) for n in range(4)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=60)
    assert [child.exitcode for child in children] == [0, 0, 0, 0]
    assert set(AnswerCache(path).get_many([f"k{n}" for n in range(4)])) == {f"k{n}" for n in range(4)}
    assert sorted(p.name for p in path.parent.iterdir() if ".creating" in p.name) == []


def _open_at_once(path: Path, barrier: Any, n: int) -> None:
    barrier.wait(timeout=30)
    AnswerCache(path).put(f"k{n}", "c", "m", "t", {"n": n}, TokenUsage())
