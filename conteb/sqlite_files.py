"""Opening the project's SQLite files (the review queue, the LLM answer store) without ever starting fresh over one.

Rule (one owner for every store): a path that does not exist is created; a path that exists must be a readable
SQLite database, else :class:`StoreFileError` names the file, what it holds, what is wrong and what to do.
A 0-byte file counts as damaged, not as new: SQLite would silently open it as an empty database and every
decision, audit entry or paid answer that was in it would be gone without a word. The header check follows the
SQLite file format (https://www.sqlite.org/fileformat.html: the first 16 bytes are ``"SQLite format 3\\0"``);
``PRAGMA quick_check`` catches a damaged body.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal, TypedDict, Unpack

SQLITE_HEADER = b"SQLite format 3\x00"


class StoreFileError(RuntimeError):
    """An existing store file that cannot be used; the message says which file and what to do."""


def _refuse(path: Path, what: str, problem: str) -> StoreFileError:
    return StoreFileError(
        f"{path}: {problem}; it should hold {what}. Nothing was changed: restore the file from a backup, or move "
        f"it away (e.g. `mv {path} {path}.damaged`) to start an empty one knowingly."
    )


class ConnectOptions(TypedDict, total=False):
    """The ``sqlite3.connect`` keywords the stores pass; an absent key keeps sqlite3's default."""

    timeout: float
    isolation_level: Literal["DEFERRED", "EXCLUSIVE", "IMMEDIATE"] | None
    check_same_thread: bool


def connect_store(path: Path, what: str, **connect_kwargs: Unpack[ConnectOptions]) -> sqlite3.Connection:
    """``sqlite3.connect(path, **connect_kwargs)``, creating the file only when it does not exist yet.

    ``what`` describes the contents for the error message (e.g. ``"the review decisions and their audit log"``).
    Raises :class:`StoreFileError` for an existing file that is empty, not a SQLite database, unreadable or
    damaged.
    """
    path = Path(path)
    if path.exists():
        if not path.is_file():
            raise _refuse(path, what, "is not a regular file")
        try:
            with path.open("rb") as handle:
                header = handle.read(len(SQLITE_HEADER))
        except OSError as error:
            raise _refuse(path, what, f"cannot be read ({error.strerror or error})") from None
        if not header:
            raise _refuse(path, what, "is empty (0 bytes), not a database")
        if header != SQLITE_HEADER:
            raise _refuse(path, what, "is not a SQLite database (its first bytes are not the SQLite header)")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    conn = sqlite3.connect(path, **connect_kwargs)
    if existed:
        try:
            verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
        except sqlite3.DatabaseError as error:
            conn.close()
            raise _refuse(path, what, f"is damaged ({error})") from None
        if verdict != "ok":
            conn.close()
            raise _refuse(path, what, f"is damaged (quick_check: {verdict})")
    return conn
