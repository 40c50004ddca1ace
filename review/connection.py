"""The review store's connection: opening the file, and the transactions every store operation runs in.

Contracts:

* One database file (layout: :mod:`review.schema`), created with its folder when missing; an
  existing file that is empty or not a sound SQLite database is refused
  (:class:`conteb.sqlite_files.StoreFileError`), never started fresh; one written by a newer
  schema, or where WAL mode is refused, raises RuntimeError. The connection is closed on any
  refusal.
* Each :class:`StoreConnection` holds one connection guarded by a re-entrant lock, so it is safe
  to share across threads; :meth:`StoreConnection._write` is one ``BEGIN IMMEDIATE`` transaction
  (committed on success, rolled back on any error), :meth:`StoreConnection._read` one consistent
  snapshot. Several processes may open the same file (WAL, a busy timeout).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from conteb.sqlite_files import connect_store
from review.model import UnknownItemError
from review.schema import BUSY_TIMEOUT_S, STORE_CONTENTS, configure, migrate


class StoreConnection:
    """The open review database at ``path``: its connection, lock and transactions (no queue logic).

    Raises :class:`conteb.sqlite_files.StoreFileError` (naming the file and what to do) when ``path``
    exists but is empty, not a SQLite database or damaged.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn = connect_store(
            self.path, STORE_CONTENTS, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            configure(self._conn, self.path)
            with self._write() as conn:
                migrate(conn, self.path)
        except BaseException:
            self._conn.close()
            raise

    # --- plumbing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent); the store cannot be used afterwards."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction, committed on success and rolled back on any error."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: a consistent snapshot for several queries."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("COMMIT")

    def _item_row(self, conn: sqlite3.Connection, item_id: str) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM items WHERE item_id = ?", (item_id,)).fetchone()
        if row is None:
            raise UnknownItemError(f"unknown review item {item_id!r}")
        return row

    def _audit_rows(self, conn: sqlite3.Connection, item_id: str) -> list[sqlite3.Row]:
        return conn.execute("SELECT * FROM audit WHERE item_id = ? ORDER BY id", (item_id,)).fetchall()
