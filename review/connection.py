"""The review store's connection: opening the file, and the transactions every store operation runs in.

Contracts:

* One database file (layout: :mod:`review.schema`), created with its folder when missing, opened
  and used under the one connection policy of :mod:`conteb.sqlite_files` (WAL, ``synchronous=FULL``,
  a busy timeout, one connection per store object, safe across threads, reopened in a forked child).
  An existing file that is empty, not a SQLite database, damaged, another application's or the LLM
  answer store is refused (:class:`conteb.sqlite_kinds.StoreFileError`), never started fresh; one
  written by a newer schema, or where WAL mode is refused, raises RuntimeError. The connection is
  closed on any refusal.
* :meth:`StoreConnection._write` is one ``BEGIN IMMEDIATE`` transaction (committed on success,
  rolled back on any error), :meth:`StoreConnection._read` one consistent snapshot; either joins a
  transaction the same thread already has open. Damage met in any statement raises
  ``StoreFileError`` naming the file and what to do. Several processes may open the same file.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Self

from conteb.sqlite_files import SQLiteStore
from review.model import UnknownItemError
from review.schema import REVIEW_STORE, is_current, migrate


class StoreConnection:
    """The open review database at ``path``: its connection and transactions (no queue logic).

    Raises :class:`conteb.sqlite_kinds.StoreFileError` (naming the file and what to do) when ``path``
    exists but is not a usable review store.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._store = SQLiteStore(self.path, REVIEW_STORE, row_factory=sqlite3.Row)
        try:
            with self._read() as conn:
                current = is_current(conn, self.path)
            if not current:
                with self._write() as conn:  # looks again under the write lock
                    migrate(conn, self.path)
        except BaseException:
            self._store.close()
            raise

    # --- plumbing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent); the store cannot be used afterwards."""
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction, committed on success and rolled back on any error."""
        return self._store.write()

    def _read(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One read transaction: a consistent snapshot for several queries."""
        return self._store.read()

    def _item_row(self, conn: sqlite3.Connection, item_id: str) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM items WHERE item_id = ?", (item_id,)).fetchone()
        if row is None:
            raise UnknownItemError(f"unknown review item {item_id!r}")
        return row

    def _audit_rows(self, conn: sqlite3.Connection, item_id: str) -> list[sqlite3.Row]:
        return conn.execute("SELECT * FROM audit WHERE item_id = ? ORDER BY id", (item_id,)).fetchall()
