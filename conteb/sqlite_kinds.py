"""The kinds of the project's SQLite stores and how a file is recognised as one of them (or as none).

* Each kind (:class:`StoreKind`) has its own ``PRAGMA application_id`` (:data:`APPLICATION_IDS`), its tables and
  their columns (:func:`table_columns`, read by SQLite from the kind's DDL).
* :func:`identity_problem`: the refusal of a file that is another kind of store, another application's database,
  or an unmarked file (application id 0) whose tables are not this kind's, by name or by columns (a foreign file
  whose table happens to be called ``items`` or ``usage`` is not adopted); read on the read-only connection of
  :mod:`conteb.sqlite_files` before anything is written.
* :func:`sqlite_file`: what SQLite file a path holds, for commands that must never write onto one.
"""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

APPLICATION_IDS: dict[str, int] = {
    "review store": 0x43544252,  # "CTBR"
    "LLM answer store": 0x43544241,  # "CTBA"
}
"""``PRAGMA application_id`` of each kind of store (:attr:`StoreKind.name` -> value), distinct and non-zero."""


@dataclass(frozen=True)
class TableColumns:
    """The columns of one table of a kind of store: those every version of the project made (``required``) and
    every one it may hold (``known``: also the columns added since, which a migration adds to an older file)."""

    table: str
    required: frozenset[str]
    known: frozenset[str]


@dataclass(frozen=True)
class StoreKind:
    """One kind of store: ``name`` (a key of :data:`APPLICATION_IDS`), what it holds (``contents``, for messages),
    the tables it makes (``tables``) and their columns (``columns``, :func:`table_columns`), to recognise an
    unmarked file of an earlier version, and the command that checks a file in full (``check_command``). A table
    of ``tables`` that ``columns`` does not describe is recognised by its name alone."""

    name: str
    contents: str
    tables: frozenset[str]
    check_command: str
    columns: tuple[TableColumns, ...] = ()

    @property
    def application_id(self) -> int:
        return APPLICATION_IDS[self.name]


def created_names(ddl: Iterable[str], kinds: str = "TABLE|INDEX|TRIGGER") -> frozenset[str]:
    """The names the ``CREATE <kind> IF NOT EXISTS <name>`` statements of ``ddl`` make (``kinds``: which kinds of
    schema object, ``|``-separated)."""
    return frozenset(re.findall(rf"CREATE (?:{kinds}) IF NOT EXISTS (\w+)", " ".join(ddl)))


def table_columns(ddl: Iterable[str], added: Mapping[str, Iterable[str]] | None = None) -> tuple[TableColumns, ...]:
    """The columns of each table ``ddl`` makes (run on an in-memory database, so SQLite itself reads the DDL);
    ``added``: ``table -> columns`` added after the table's first release, not required of an older file (those
    that ``ddl`` does not declare are still known)."""
    added = added or {}
    memory = sqlite3.connect(":memory:")
    try:
        for statement in ddl:
            memory.execute(statement)
        found = {table: {row[1] for row in memory.execute(f"PRAGMA table_info({table})")} for table in
                 created_names(ddl, "TABLE")}  # fmt: skip
    finally:
        memory.close()
    return tuple(
        TableColumns(
            table, frozenset(columns - set(added.get(table, ()))), frozenset(columns | set(added.get(table, ())))
        )
        for table, columns in sorted(found.items())
    )


class StoreFileError(RuntimeError):
    """A store file that cannot be used; the message names the file, what is wrong and what to do."""


def refusal(path: Path, kind: StoreKind, problem: str, advice: str) -> StoreFileError:
    return StoreFileError(f"{path}: {problem}; it should hold {kind.contents} (the {kind.name}). {advice}")


def foreign_advice(path: Path) -> str:
    return (
        "Nothing was added to it: point conteb at its own file (the data folder, $CONTEB_DATA_DIR), or move this one "
        f"away (`mv {shlex.quote(str(path))} <elsewhere>`) if it does not belong there."
    )


def user_tables(conn: sqlite3.Connection) -> set[str]:
    """Names of the tables and views that are not SQLite's own (``sqlite_*``)."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    ).fetchall()
    return {row[0] for row in rows}


def columns_of(conn: sqlite3.Connection, kind: StoreKind, tables: set[str]) -> dict[str, set[str]]:
    """The columns of the file's tables that ``kind`` describes (:attr:`StoreKind.columns`)."""
    described = {entry.table for entry in kind.columns} & tables
    return {table: {row[1] for row in conn.execute(f"PRAGMA table_info({table})")} for table in sorted(described)}


def _shown(names: Iterable[str]) -> str:
    listed = sorted(names)
    return ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")


def _column_problem(kind: StoreKind, columns: Mapping[str, set[str]]) -> str | None:
    """Why an unmarked file's tables are not those of ``kind`` (a table lacking a column every version made, or
    holding one none made), or ``None``."""
    for entry in kind.columns:
        found = columns.get(entry.table)
        if found is None:
            continue
        missing, unknown = entry.required - found, found - entry.known
        if missing or unknown:
            lacking = f", not {_shown(missing)}" if missing else ""
            foreign = f" (the {kind.name}'s has no {_shown(unknown)})" if unknown else ""
            return f"its table {entry.table} has the columns {_shown(found)}{lacking}{foreign}"
    return None


def identity_problem(
    path: Path, kind: StoreKind, application_id: int, tables: set[str], columns: Mapping[str, set[str]]
) -> StoreFileError | None:
    """The refusal of a file that is not this kind of store (``None``: it is, or it is an unmarked one to adopt:
    application id 0 and only this kind's tables, each with this kind's columns)."""
    if application_id == kind.application_id:
        return None
    other = next((name for name, value in APPLICATION_IDS.items() if value == application_id), None)
    if other is not None:
        return refusal(
            path,
            kind,
            f"is the project's {other}, not its {kind.name}",
            "Nothing was changed: check which file was given (the data folder keeps each store under its own name).",
        )
    if application_id != 0:
        return refusal(
            path, kind, f"is another application's SQLite database (application_id {application_id:#010x})",
            foreign_advice(path),
        )  # fmt: skip
    foreign = tables - kind.tables
    if foreign:
        return refusal(
            path, kind, f"is a SQLite database with tables this store does not make ({_shown(foreign)})",
            foreign_advice(path),
        )  # fmt: skip
    columns_problem = _column_problem(kind, columns)
    if columns_problem is not None:
        return refusal(
            path, kind, f"is not a conteb {kind.name}: application id 0, and {columns_problem}", foreign_advice(path)
        )
    return None


SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database (``<database>-wal`` and so on)."""


def sqlite_file(path: Path) -> str | None:
    """What SQLite file is at ``path``: ``"the project's review store"`` (or LLM answer store), ``"a SQLite
    database"``, ``"the -wal file of ..."`` for a file SQLite keeps beside one; None for anything else (a missing,
    empty or other file, a folder). The header is read by SQLite itself (module doc), on a read-only connection
    with ``immutable=1``, which takes no lock and writes nothing, not even a ``-wal`` or ``-shm``."""
    for suffix in SIDECAR_SUFFIXES:
        if path.name.endswith(suffix) and path.name != suffix:
            beside = sqlite_file(path.with_name(path.name[: -len(suffix)]))
            if beside is not None and path.exists():
                return f"the {suffix} file of {beside}"
    try:
        found = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode) or found.st_size == 0:
        return None
    try:
        conn = sqlite3.connect(path.absolute().as_uri() + "?mode=ro&immutable=1", uri=True)
        try:
            application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    other = next((name for name, value in APPLICATION_IDS.items() if value == application_id), None)
    return f"the project's {other}" if other is not None else "a SQLite database"
