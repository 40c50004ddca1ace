"""`conteb review export -o FILE` never writes onto a store (issue 25): on today's main, ``-o
data/review/review.sqlite`` replaced the review store, audit log and all, with CSV. An export refuses a store however
the path reaches it (as named, through a symbolic link, as a hard link, its ``-wal``), any other SQLite file, a
folder, and an existing file unless ``--force``: one line, exit status 2, nothing written. Nor, ``--force`` or not,
anything but a regular file (issue 33: as root, ``-o /dev/full --force`` replaced the device with a JSONL file)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main
from conteb.storage import llm_cache_path, review_store_path
from curation.review_items import review_item, review_items_table
from llm.cache import AnswerCache
from review.store import ReviewStore
from tests.conftest import SAMPLE_DIR


@pytest.fixture
def registry(tmp_path: Path, isolated_env: Path) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    items = [review_item("demo", "reformulation", f"doc_{i}", "doc", f"rewrite {i}", "llm", original=f"o {i}")
             for i in range(3)]  # fmt: skip
    with ReviewStore(review_store_path(isolated_env)) as store:
        store.push(review_items_table(items))
        store.decide("demo:reformulation:doc_0", "accept", "ana", 1)
    return path


def _export(registry: Path, target: Path, *extra: str) -> Result:
    args = ["--config", str(registry), "review", "export", "--task", "demo", "--format", "csv", "-o", str(target)]
    return CliRunner().invoke(main, [*args, *extra])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(result: Result, target: Path, says: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # no traceback
    (line,) = result.output.splitlines()
    assert line.startswith(f"Error: {target}: ") and says in line, line


def _store_is_intact(data_dir: Path) -> None:
    with ReviewStore(review_store_path(data_dir)) as store:
        assert len(store.items(task="demo")) == 3
        assert [entry.action for entry in store.audit()].count("accept") == 1  # the audit log is still there


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("reach", ["as named", "symbolic link", "hard link", "wal"])
def test_export_never_writes_onto_the_review_store(
    registry: Path, isolated_env: Path, tmp_path: Path, reach: str, force: bool
) -> None:
    store = review_store_path(isolated_env)
    target = {"as named": store, "symbolic link": tmp_path / "link.csv", "hard link": tmp_path / "hard.csv",
              "wal": Path(f"{store}-wal")}[reach]  # fmt: skip
    if reach == "symbolic link":
        target.symlink_to(store)
    elif reach == "hard link":
        os.link(store, target)
    before = _digest(store)
    _refused(_export(registry, target, *(["--force"] if force else [])), target, "an export never replaces a store")
    assert _digest(store) == before
    _store_is_intact(isolated_env)


def test_export_never_writes_onto_the_answer_store_or_another_sqlite_file(
    registry: Path, isolated_env: Path, tmp_path: Path
) -> None:
    answers = llm_cache_path(isolated_env)
    AnswerCache(answers).close()
    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    for target, says in ((answers, "the LLM answer store"), (other, "is a SQLite database")):
        before = _digest(target)
        _refused(_export(registry, target, "--force"), target, says)
        assert _digest(target) == before


def test_export_refuses_an_existing_file_without_force_and_replaces_it_with(
    registry: Path, isolated_env: Path, tmp_path: Path
) -> None:
    target = tmp_path / "queue.csv"
    target.write_text("my notes\n")
    _refused(_export(registry, target), target, "already exists; pass --force to replace it")
    assert target.read_text() == "my notes\n"
    result = _export(registry, target, "--force")
    assert result.exit_code == 0 and "wrote 3 items" in result.output, result.output
    assert target.read_text().startswith("item_id,")
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".queue")) == []  # no temporary
    folder = tmp_path / "folder"
    folder.mkdir()
    _refused(_export(registry, folder, "--force"), folder, "is a folder")
    _store_is_intact(isolated_env)


def _character_device(tmp_path: Path) -> Path:
    """A character device to export onto: as root a node of /dev/null's numbers made in ``tmp_path`` (an export that
    replaced it would replace the copy, not the machine's /dev/null), else /dev/null itself (a user cannot replace it).
    """
    if os.geteuid() != 0:
        return Path(os.devnull)
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.stat(os.devnull).st_rdev)
    return node


@pytest.mark.parametrize("kind", ["FIFO", "symbolic link", "character device"])
def test_export_writes_only_regular_files_even_with_force(
    registry: Path, isolated_env: Path, tmp_path: Path, kind: str
) -> None:
    elsewhere = tmp_path / "elsewhere.csv"
    elsewhere.write_text("my notes\n")
    if kind == "FIFO":
        target = tmp_path / "queue.csv"
        os.mkfifo(target)
    elif kind == "symbolic link":
        target = tmp_path / "link.csv"
        target.symlink_to(elsewhere)
    else:
        target = _character_device(tmp_path)
    before = os.lstat(target)
    says = f"is a {kind}, not a regular file; export writes only regular files"
    _refused(_export(registry, target, "--force"), target, says)
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert elsewhere.read_text() == "my notes\n"
    assert [path.name for path in tmp_path.iterdir() if ".conteb-" in path.name] == []  # no temporary
