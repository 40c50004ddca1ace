"""Store files that are not the project's, reached as attackers would (issue 25).

* A foreign SQLite file whose table is called ``items`` (as the review store's) or ``usage`` (as the answer
  store's): on today's main it was taken for an earlier version of the store, switched to WAL, marked with the
  store's application id, then failed with a traceback. It is identified read-only and never modified (its bytes,
  its mtime, no ``-wal`` beside it), with one line naming the file, its application id and its table's columns.
* A dangling symbolic link at the store's path: a raw ``sqlite3.OperationalError`` traceback from ``conteb
  review``, and ``conteb status`` said nothing. Now every command that opens a store, ``conteb validate`` (which
  ``make run`` runs first) and ``conteb status`` say it on one line naming the link and its target, and nothing is
  made at the target.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main
from conteb.sqlite_files import check_store_file
from conteb.sqlite_kinds import StoreFileError, StoreKind, sqlite_file
from conteb.storage import llm_cache_path, review_store_path
from llm.cache import ANSWER_STORE, AnswerCache
from review.schema import REVIEW_STORE
from review.store import ReviewStore
from tests.conftest import ROOT, SAMPLE_DIR
from tests.support.make import user_make_env

FOREIGN = {
    "review store": ("items", "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)"),
    "LLM answer store": ("usage", "CREATE TABLE usage (day TEXT, bytes INTEGER)"),
}
OPEN = {"review store": ReviewStore, "LLM answer store": AnswerCache}
KINDS: dict[str, StoreKind] = {"review store": REVIEW_STORE, "LLM answer store": ANSWER_STORE}


def _foreign_file(path: Path, ddl: str) -> tuple[str, int]:
    """A SQLite file of another program (application id 0, rollback journal) at ``path``: (its digest, mtime_ns)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(ddl)
        conn.execute(f"INSERT INTO {ddl.split()[2]} VALUES (1, 'x')")
    conn.close()
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_a_foreign_file_with_a_store_table_name_is_refused_and_never_modified(tmp_path: Path, kind: str) -> None:
    table, ddl = FOREIGN[kind]
    path = tmp_path / "files" / "store.sqlite"
    digest, mtime = _foreign_file(path, ddl)
    for attempt in (lambda: OPEN[kind](path), lambda: check_store_file(path, KINDS[kind])):
        with pytest.raises(StoreFileError) as refused:
            attempt()
        message = str(refused.value)
        assert "\n" not in message and message.startswith(f"{path}: is not a conteb {kind}: application id 0")
        assert f"its table {table} has the columns" in message and "Nothing was added to it" in message
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest and path.stat().st_mtime_ns == mtime
        assert sorted(p.name for p in path.parent.iterdir()) == ["store.sqlite"]  # no -wal, -shm or journal
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("PRAGMA application_id").fetchone()[0] == 0
    conn.close()


def test_an_unmarked_store_of_an_earlier_version_is_still_adopted(tmp_path: Path) -> None:
    """The column check refuses foreign tables only: an answer store made before ``cached_tokens`` existed, without
    the mark, is still adopted and migrated."""
    path = tmp_path / "answers.sqlite"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "CREATE TABLE answers (key TEXT PRIMARY KEY, custom_id TEXT, model TEXT, prompt_tag TEXT, value TEXT NOT "
            "NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL)"
        )
    conn.close()
    AnswerCache(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == ANSWER_STORE.application_id
        assert "cached_tokens" in {row[1] for row in conn.execute("PRAGMA table_info(answers)")}
    conn.close()


def test_sqlite_file_tells_stores_and_databases_from_other_files(tmp_path: Path) -> None:
    tmp_path = tmp_path / "files"
    ReviewStore(tmp_path / "review.sqlite").close()
    _foreign_file(tmp_path / "other.db", FOREIGN["review store"][1])
    (tmp_path / "notes.csv").write_text("a,b\n")
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "other.db-journal").write_bytes(b"x")
    assert sqlite_file(tmp_path / "review.sqlite") == "the project's review store"
    assert sqlite_file(tmp_path / "other.db") == "a SQLite database"
    assert sqlite_file(tmp_path / "other.db-journal") == "the -journal file of a SQLite database"
    for name in ("notes.csv", "empty", "missing", "."):
        assert sqlite_file(tmp_path / name) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "notes.csv", "other.db", "other.db-journal",
                                                          "review.sqlite"]  # fmt: skip


# --- a dangling symbolic link at a store's path -------------------------------------------------------------------


@pytest.fixture
def registry(tmp_path: Path, isolated_env: Path) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    reformulation: true\n"
    )
    return path


def _dangle(link: Path, tmp_path: Path) -> Path:
    target = tmp_path / "moved-away" / link.name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return target


def _one_line(result: Result, link: Path, target: Path, exit_code: int = 1) -> str:
    assert result.exit_code == exit_code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception  # no traceback
    lines = [line for line in result.output.splitlines() if str(link) in line]
    assert len(lines) == 1, result.output
    assert f"{link}: is a symbolic link to {target}, which does not exist" in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("store", ["review", "answers"])
def test_a_dangling_link_at_a_store_is_refused_in_one_line_by_every_command(
    registry: Path, isolated_env: Path, tmp_path: Path, store: str
) -> None:
    link = review_store_path(isolated_env) if store == "review" else llm_cache_path(isolated_env)
    target = _dangle(link, tmp_path)
    commands = [["validate", "--no-sources"], ["validate"]]
    if store == "review":
        commands += [["review", "list"], ["review", "stats"], ["review", "check"], ["review", "export", "--task", "x"]]
    else:
        commands += [["costs"], ["llm", "check"], ["llm", "retry-failed", "--task", "demo"]]
    for command in commands:
        _one_line(CliRunner().invoke(main, ["--config", str(registry), *command]), link, target)
    if store == "review":
        status = CliRunner().invoke(main, ["--config", str(registry), "status"])
        assert "Traceback" not in status.output
        _one_line(status, link, target, exit_code=0)
    kind = REVIEW_STORE if store == "review" else ANSWER_STORE
    with pytest.raises(StoreFileError, match="which does not exist"):
        (ReviewStore if store == "review" else AnswerCache)(link)
    with pytest.raises(StoreFileError, match="which does not exist"):
        check_store_file(link, kind)
    assert link.is_symlink() and not target.parent.exists()  # nothing was made at the target


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_stops_at_a_dangling_review_store_link_in_one_line(
    registry: Path, isolated_env: Path, tmp_path: Path
) -> None:
    link = review_store_path(isolated_env)
    target = _dangle(link, tmp_path)
    env = user_make_env({"CONTEB_CONFIG": str(registry)})
    run = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    output = run.stdout + run.stderr
    assert run.returncode == 2 and "Traceback" not in output, output
    problems = [line for line in run.stderr.splitlines() if not line.startswith("make:")]
    assert len(problems) == 1 and problems[0].startswith(f"{link}: is a symbolic link to {target}"), output
