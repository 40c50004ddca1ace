"""The project's SQLite stores (the review queue, the LLM answer store): making, checking, opening and using their
files. This module is the one owner of the rules below; :mod:`review.connection` and :mod:`llm.cache` only name
their kind of store (:class:`StoreKind`) and run their statements through :class:`SQLiteStore`.

**Never open a store's file outside SQLite.** On POSIX, closing *any* descriptor of a file drops every advisory
lock the process holds on it, SQLite's included (https://www.sqlite.org/howtocorrupt.html, section 2.2). A plain
``open()``/``close()`` of the database while the process holds a connection to it lets another process's close
believe it is the last user: it checkpoints and deletes the ``-wal`` file this process still writes into, and those
writes are gone when this process ends. So the header and the schema are read by SQLite itself (a file that is not
a database fails with ``SQLITE_NOTADB``), sizes come from ``os.stat`` (which opens no descriptor), and a new store
is made under a private temporary name and hard-linked into place (``os.link`` fails when the name exists), so no
process ever sees a half-made file; nothing in the project reads, copies or deletes a store's database, ``-wal``
or ``-shm`` file. (Where a file system has no hard links, the file is created in place: another process opening
it in the first milliseconds may see 0 bytes and refuse it as empty, which loses nothing.)

**Connection policy** (every connection of every store, in every process):

* ``journal_mode=WAL``, persistent in the file: set when it is made, switched on when an older file lacks it,
  RuntimeError when SQLite refuses (a file system without shared memory, e.g. some network mounts). Readers never
  block the writer and a killed process loses no committed transaction.
* ``synchronous=FULL``: a commit returns once the WAL is on disk, so an acknowledged decision or paid answer
  survives a power cut, not only a killed process (NORMAL would lose the latest commits on power loss). It costs
  one fsync per commit (bench/BENCHMARKS.md, "Opening the SQLite stores"), nothing next to an LLM call or a
  reviewer's click; bulk writes join one transaction (:meth:`SQLiteStore.write` nests).
* Busy timeout :data:`BUSY_TIMEOUT_S` for every lock wait; ``foreign_keys=ON``.
* Autocommit (``isolation_level=None``): every statement runs in an explicit transaction, :meth:`SQLiteStore.read`
  (``BEGIN``, one snapshot) or :meth:`SQLiteStore.write` (``BEGIN IMMEDIATE``: the write lock first, so a
  read-modify-write never fails half-way on a busy lock), committed on success, rolled back on any error. A
  ``read``/``write`` inside another of the same thread joins it; a ``write`` inside a ``read`` is a RuntimeError.
* One connection per store object and process. Any thread may use it, one at a time: a re-entrant lock is held for
  the whole transaction (hence ``check_same_thread=False``: the lock, not sqlite3, serialises). Several store
  objects on one file, in one process or many, are safe: each has its own connection, and closing one drops no
  lock of another (SQLite's unix VFS defers closing its descriptors while the process holds locks on the file).
* Fork: a connection is never used across ``fork()`` (https://www.sqlite.org/howtocorrupt.html, section 2.6). A
  store object inherited by a forked child (a Celery prefork pool process, a fork-started multiprocessing child)
  notices the new pid on its next use, sets the inherited connection aside without using or closing it (a close
  in the child would run SQLite's close-time locking and checkpoint from a copied state) and opens its own, with
  every check below. None is inherited today: Celery workers fork their pool after importing
  ``pipelines.definitions`` (``pipelines/celery.py``), whose resources hold paths and open stores only inside a
  step, and Dagster's multiprocess executor starts step processes with ``spawn``; the guard keeps it so.

**Identity.** ``PRAGMA application_id`` marks each kind of store with its own value (:data:`APPLICATION_IDS`, set
when the file is made), so a review store given as the answer store, or another application's SQLite file, is
refused (:class:`StoreFileError`) and left as it was: the checks run on a read-only connection, which never writes
the database or its ``-wal`` (a WAL-mode file may get SQLite's empty ``-wal``/``-shm`` beside it), and nothing is
written to a file that is not ours. A file with ``application_id`` 0 holding only this kind's tables (or none), each
with this kind's columns, was made by an earlier version of the project: it is adopted (marked, switched to WAL) on
open, in a write transaction that looks again, so existing stores keep working. Any other unmarked file, such as a
foreign one whose table happens to be called ``items`` or ``usage``, is refused by the read-only checks before
anything is written (the kinds, their tables and columns, and the refusals: :mod:`conteb.sqlite_kinds`).

**Checks.** On every open, each O(1) in the file's size: it is not a dangling symbolic link (SQLite would make the
link's target, wherever it points); it is a regular file and not 0 bytes (SQLite would open an
empty file as a new database, and every decision or paid answer that was in it would be gone without a word);
SQLite reads its header and schema (``SQLITE_NOTADB``: not a database; ``SQLITE_CORRUPT``: damaged, which includes
a file shorter than the page count in its header, https://www.sqlite.org/fileformat.html, "in-header database
size"); its identity; ``page_count * page_size`` fits in the file plus the frames its ``-wal`` can hold (a
truncated file whose WAL still names the full size, e.g. a copy interrupted while a writer was running); WAL mode.
The full check reads every page, so it grows with the file: on a large answer store it costs seconds where the checks
above cost about a millisecond (bench/BENCHMARKS.md, "Opening the SQLite stores"). On every open it would tax each
``conteb costs``, each ``conteb review`` command and each Dagster step process; once per process, still each of them,
as most open the store once. So it runs where it belongs: :func:`check_store`, behind ``conteb llm check`` and
``conteb review check``. Damage met later, in any statement (``database disk image is malformed``), raises
:class:`StoreFileError` naming the file and a safe next step. No message advises throwing a file away: a damaged one
is checked, then recovered (``sqlite3 FILE .recover``) or restored from a backup, and only then moved aside.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conteb.sqlite_kinds import (
    StoreFileError,
    StoreKind,
    columns_of,
    identity_problem,
    refusal,
    user_tables,
)

BUSY_TIMEOUT_S = 30.0
"""How long a connection waits for another connection's lock before ``sqlite3.OperationalError``."""

_WAL_HEADER_BYTES = 32
_WAL_FRAME_HEADER_BYTES = 24  # https://www.sqlite.org/fileformat.html, section 4.1
_SET_ASIDE: list[sqlite3.Connection] = []
"""Connections inherited across fork: kept referenced so the child never closes them, and never used."""


def _unusable_advice(path: Path) -> str:
    quoted = shlex.quote(str(path))
    return (
        "Nothing was changed: if it held the store, restore it from a backup; otherwise move it away "
        f"(`mv {quoted} {quoted}.unusable`) and an empty store is made at the next run."
    )


def _damaged_advice(path: Path, kind: StoreKind, checked: bool) -> str:
    quoted = shlex.quote(str(path))
    first = (
        "Stop the processes that use it, then"
        if checked
        else f"Check it first: `{kind.check_command}` (or `sqlite3 {quoted} 'PRAGMA integrity_check'`). If it is "
        "damaged, stop the processes that use it, then"
    )
    return (
        f"Nothing was changed; do not delete it. {first} recover what it holds with the sqlite3 shell "
        f"(`sqlite3 {quoted} .recover | sqlite3 {quoted}.recovered`, and check the copy) or restore a backup; only "
        f"then move the damaged file aside (`mv {quoted} {quoted}.damaged`) and put the recovered copy in its place."
    )


def _dangling_advice(path: Path) -> str:
    quoted = shlex.quote(str(path))
    return (
        "Nothing was changed: if the store was moved, point the link at it (`ln -sfn NEW-PLACE "
        f"{quoted}`); otherwise remove the link (`rm {quoted}`) and an empty store is made at the next run."
    )


def _primary_code(error: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``error`` (``None`` when sqlite3 did not say)."""
    code = getattr(error, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def _mapped_error(path: Path, kind: StoreKind, error: sqlite3.Error) -> StoreFileError | None:
    """The :class:`StoreFileError` for an error that says the file itself is unusable (not a database, damaged,
    unreadable); ``None`` for any other error (a busy lock, a bad statement), which the caller re-raises."""
    code = _primary_code(error)
    if code == sqlite3.SQLITE_NOTADB:
        return refusal(path, kind, f"is not a SQLite database (SQLite: {error})", _unusable_advice(path))
    if code == sqlite3.SQLITE_CORRUPT:
        return refusal(path, kind, f"is damaged (SQLite: {error})", _damaged_advice(path, kind, checked=False))
    if code in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY):
        return StoreFileError(
            f"{path}: cannot be read or written (SQLite: {error}); it holds {kind.contents}. Nothing was changed: "
            "check the file's and its folder's permissions and the disk, then try again."
        )
    return None


# --- making a store ---------------------------------------------------------------------------------------------


def _create(path: Path, kind: StoreKind) -> None:
    """Make an empty, marked, WAL-mode store at ``path`` unless a file appeared there meanwhile (see module doc)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file or a dangling symbolic link in the way, no permission
        raise StoreFileError(
            f"{path}: cannot make its folder {path.parent} ({error.strerror or error}); it would hold "
            f"{kind.contents}. Nothing was changed: check that path and its permissions."
        ) from None
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.creating")
    conn = sqlite3.connect(temporary, isolation_level=None)
    try:
        conn.execute(f"PRAGMA application_id = {kind.application_id}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    finally:
        conn.close()  # the only connection: SQLite checkpoints and removes the temporary's -wal and -shm
    try:
        if str(mode).lower() != "wal":
            raise RuntimeError(f"{path}: SQLite cannot use WAL mode in {path.parent} (it answered {mode!r})")
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        except OSError:  # no hard links on this file system: make it in place (module doc)
            if not path.exists():
                _create_in_place(path, kind)
    finally:
        for leftover in (temporary, Path(f"{temporary}-wal"), Path(f"{temporary}-shm")):
            leftover.unlink(missing_ok=True)  # a private name nobody else opens


def _create_in_place(path: Path, kind: StoreKind) -> None:
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    try:
        conn.execute("BEGIN IMMEDIATE")
        if conn.execute("PRAGMA application_id").fetchone()[0] == 0 and not user_tables(conn):
            conn.execute(f"PRAGMA application_id = {kind.application_id}")
        conn.execute("COMMIT")
    finally:
        conn.close()


# --- the checks on every open -----------------------------------------------------------------------------------


def _truncation(path: Path, page_size: int, page_count: int) -> str | None:
    """Why the file is too short for its pages, or ``None``: the pages must fit in the file plus its WAL's frames."""
    file_size = os.stat(path).st_size
    try:
        wal_size = os.stat(f"{path}-wal").st_size
    except FileNotFoundError:
        wal_size = 0
    wal_pages = max(0, wal_size - _WAL_HEADER_BYTES) // (_WAL_FRAME_HEADER_BYTES + page_size)
    if page_count <= file_size // page_size + wal_pages:
        return None
    return (
        f"is truncated ({page_count:,} pages of {page_size:,} bytes need {page_count * page_size:,} bytes; the file "
        f"has {file_size:,} and its -wal holds at most {wal_pages:,} pages)"
    )


def _probe(path: Path, kind: StoreKind) -> bool:
    """The checks of an existing file on a read-only connection (module doc); True when it is to be adopted."""
    probe: sqlite3.Connection | None = None
    try:
        probe = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True, isolation_level=None,
                                timeout=BUSY_TIMEOUT_S)  # fmt: skip
        probe.execute("BEGIN")
        application_id = probe.execute("PRAGMA application_id").fetchone()[0]
        tables = user_tables(probe)
        columns = columns_of(probe, kind, tables)
        page_size = probe.execute("PRAGMA page_size").fetchone()[0]
        page_count = probe.execute("PRAGMA page_count").fetchone()[0]
        truncated = _truncation(path, page_size, page_count)  # inside the snapshot: the WAL cannot be reset
        probe.execute("COMMIT")
    except sqlite3.Error as error:
        raise _mapped_error(path, kind, error) or error from None
    finally:
        if probe is not None:
            probe.close()
    refused = identity_problem(path, kind, application_id, tables, columns)
    if refused is not None:
        raise refused
    if truncated is not None:
        raise refusal(path, kind, truncated, _damaged_advice(path, kind, checked=False))
    return application_id == 0


def _existing_file(path: Path, kind: StoreKind) -> os.stat_result | None:
    try:
        found = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):  # a dangling symbolic link: never made (SQLite would create its target)
            raise refusal(
                path, kind, f"is a symbolic link to {os.readlink(path)}, which does not exist", _dangling_advice(path)
            ) from None
        return None
    except OSError as error:
        raise StoreFileError(
            f"{path}: cannot be read ({error.strerror or error}); it should hold {kind.contents}. Nothing was "
            "changed: check the file's and its folder's permissions."
        ) from None
    if not stat.S_ISREG(found.st_mode):
        raise refusal(path, kind, "is not a regular file", _unusable_advice(path))
    if found.st_size == 0:
        raise refusal(path, kind, "is empty (0 bytes), not a database", _unusable_advice(path))
    return found


def _adopt(conn: sqlite3.Connection, path: Path, kind: StoreKind) -> None:
    """Mark an unmarked file of an earlier version, looking again under the write lock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = user_tables(conn)
        refused = identity_problem(path, kind, application_id, tables, columns_of(conn, kind, tables))
        if refused is not None:
            raise refused
        if application_id == 0:
            conn.execute(f"PRAGMA application_id = {kind.application_id}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _connect(path: Path, kind: StoreKind, row_factory: Callable[..., Any] | None) -> sqlite3.Connection:
    """A connection to the store at ``path`` under the policy, after the checks (made first when missing)."""
    if _existing_file(path, kind) is None:
        _create(path, kind)
        _existing_file(path, kind)
    adopt = _probe(path, kind)
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RuntimeError(f"{path}: could not switch the {kind.name} to WAL mode (SQLite answered {mode!r})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        if adopt:
            _adopt(conn, path, kind)
    except sqlite3.Error as error:
        conn.close()
        raise _mapped_error(path, kind, error) or error from None
    except BaseException:
        conn.close()
        raise
    conn.row_factory = row_factory
    return conn


def check_store_file(path: Path, kind: StoreKind) -> bool:
    """The checks of every open (module doc), on a read-only connection, making and changing nothing: False when
    nothing is at ``path`` (a store is made there on first use), True for a usable ``kind`` of store;
    :class:`StoreFileError` naming the file, why and what to do otherwise (a dangling symbolic link, another kind
    of store, a foreign, empty, damaged or unreadable file)."""
    if _existing_file(path, kind) is None:
        return False
    _probe(path, kind)
    return True


# --- a store object ---------------------------------------------------------------------------------------------


class SQLiteStore:
    """The connection of one store object to the file at ``path`` (a ``kind`` of store), under the module's policy.

    Made with its folder when missing; raises :class:`StoreFileError` for a file that is not a usable store of
    ``kind`` (and RuntimeError when WAL mode is refused). ``row_factory`` is set on the connection.
    """

    def __init__(self, path: Path, kind: StoreKind, *, row_factory: Callable[..., Any] | None = None) -> None:
        self.path = Path(path)
        self.kind = kind
        self._row_factory = row_factory
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._depth = 0
        self._writing = False
        self._conn: sqlite3.Connection | None = _connect(self.path, kind, row_factory)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, {self.kind.name!r})"

    def _in_this_process(self) -> None:
        """After a fork: set the inherited connection aside (never used, never closed) and open this process's own."""
        if self._pid == os.getpid():
            return
        if self._conn is not None:
            _SET_ASIDE.append(self._conn)
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._depth, self._writing = 0, False
        self._conn = None if self._conn is None else _connect(self.path, self.kind, self._row_factory)

    def close(self) -> None:
        """Close the connection (idempotent); the store cannot be used afterwards. In a forked child the inherited
        connection is only set aside (see the module doc)."""
        if self._pid != os.getpid():
            if self._conn is not None:
                _SET_ASIDE.append(self._conn)
            self._pid, self._lock, self._conn = os.getpid(), threading.RLock(), None
            return
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (``BEGIN``): a consistent snapshot for several queries."""
        with self._transaction(write=False) as conn:
            yield conn

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction, committed when the block ends, rolled back on any error."""
        with self._transaction(write=True) as conn:
            yield conn

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[sqlite3.Connection]:
        self._in_this_process()
        with self._lock:
            conn = self._conn
            if conn is None:
                raise sqlite3.ProgrammingError(f"{self.path}: the {self.kind.name} is closed")
            if self._depth:
                if write and not self._writing:
                    raise RuntimeError(f"{self.path}: a write inside a read transaction (start with write())")
                self._depth += 1
                try:
                    yield conn
                finally:
                    self._depth -= 1
                return
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                self._depth, self._writing = 1, write
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as error:
                mapped = _mapped_error(self.path, self.kind, error)
                if mapped is None:
                    raise
                raise mapped from error
            finally:
                self._depth, self._writing = 0, False


# --- the full check ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check_store` found: ``problems`` (empty when sound), the file's pages and the check's time."""

    path: Path
    pragma: str
    problems: tuple[str, ...]
    page_count: int
    page_size: int
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems

    def message(self, kind: StoreKind) -> str:
        """One paragraph for people: the verdict and, when damaged, what to do."""
        size = f"{self.page_count:,} pages of {self.page_size:,} bytes, {self.pragma} in {self.seconds:.2f} s"
        if self.ok:
            return f"{self.path}: ok ({size})"
        shown = "; ".join(self.problems[:5])
        if len(self.problems) > 5:
            shown += f" (and {len(self.problems) - 5} more)"
        advice = _damaged_advice(self.path, kind, checked=True)
        return str(refusal(self.path, kind, f"is damaged ({self.pragma}: {shown})", advice))


def check_store(path: Path, kind: StoreKind, *, quick: bool = False) -> CheckResult:
    """Read every page of the existing store at ``path``: ``PRAGMA integrity_check`` (``quick``: ``quick_check``,
    which skips the index contents). Raises FileNotFoundError when it does not exist and :class:`StoreFileError`
    when the checks on open refuse it."""
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path} does not exist: no {kind.name} to check")
    store = SQLiteStore(path, kind)
    pragma = "quick_check" if quick else "integrity_check"
    try:
        with store.read() as conn:
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            page_count = conn.execute("PRAGMA page_count").fetchone()[0]
        started = time.perf_counter()
        try:
            with store.read() as conn:
                rows = [row[0] for row in conn.execute(f"PRAGMA {pragma}").fetchall()]
        except StoreFileError as error:  # damage the check itself cannot walk past
            cause = error.__cause__
            if not isinstance(cause, sqlite3.Error) or _primary_code(cause) != sqlite3.SQLITE_CORRUPT:
                raise
            rows = [str(cause)]
        seconds = time.perf_counter() - started
    finally:
        store.close()
    problems = () if rows == ["ok"] else tuple(rows)
    return CheckResult(Path(path), pragma, problems, page_count, page_size, seconds)
