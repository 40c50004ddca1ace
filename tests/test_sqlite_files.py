"""``conteb.sqlite_files.connect_store``: create when absent, refuse an existing file that is not a usable database."""

from __future__ import annotations

import sqlite3

import pytest

from conteb.sqlite_files import StoreFileError, connect_store


def test_creates_a_new_file_and_reopens_it(tmp_path):
    path = tmp_path / "sub" / "store.sqlite"
    conn = connect_store(path, "test rows")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()
    again = connect_store(path, "test rows")
    assert again.execute("SELECT x FROM t").fetchall() == [(1,)]


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"", "is empty"), (b"hello, not a database at all" * 10, "not a SQLite database")],
)
def test_refuses_empty_or_foreign_file_and_leaves_it(tmp_path, content, reason):
    path = tmp_path / "review.sqlite"
    path.write_bytes(content)
    with pytest.raises(StoreFileError, match=reason) as error:
        connect_store(path, "the review decisions")
    assert str(path) in str(error.value) and "the review decisions" in str(error.value)
    assert path.read_bytes() == content  # never started fresh over it


def test_refuses_a_damaged_database(tmp_path):
    path = tmp_path / "answers.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
    conn.commit()
    conn.close()
    data = bytearray(path.read_bytes())
    data[4096:8192] = b"\xff" * 4096  # overwrite a page in the middle of the file
    path.write_bytes(bytes(data))
    with pytest.raises(StoreFileError, match="damaged"):
        connect_store(path, "paid LLM answers")
