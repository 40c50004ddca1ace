"""`conteb llm check` and `conteb review check`: the full check that opening a store leaves out (issue 19), and
damage met by a command later is one message, never a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main
from conteb.storage import llm_cache_path, review_store_path
from curation.review_items import review_item, review_items_table
from llm.cache import AnswerCache
from llm.usage import TokenUsage
from review.store import ReviewStore
from tests.conftest import SAMPLE_DIR


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    return path


def _fill_both(data_dir: Path) -> None:
    cache = AnswerCache(llm_cache_path(data_dir))
    with cache.writes():
        for n in range(300):
            cache.put(f"k{n}", f"c{n}", "m", "t", {"text": "x" * 400}, TokenUsage(10, 2))
            cache.record_usage("demo/reformulation", f"c{n}", "m", TokenUsage(10, 2), 0.001, "online")
    cache.close()
    rows = [review_item("demo", "reformulation", f"doc_{i}", "doc", "y" * 400, "llm") for i in range(300)]
    with ReviewStore(review_store_path(data_dir)) as store:
        store.push(review_items_table(rows))


def _damage(path: Path, table: str) -> None:
    """Overwrite one of ``table``'s leaf pages in ``path`` (found through SQLite's ``dbstat``; no connection to the
    file is open when its bytes are written)."""
    with sqlite3.connect(path) as raw:
        pages = [row[0] for row in raw.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'",
                                               (table,))]  # fmt: skip
    raw.close()
    data = bytearray(path.read_bytes())
    start = (pages[len(pages) // 2] - 1) * 4096
    data[start : start + 4096] = b"\xff" * 4096
    path.write_bytes(bytes(data))


def _run(registry: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--config", str(registry), *args])


def test_check_commands_say_ok_for_sound_stores_and_nothing_to_check_without_one(
    registry: Path, isolated_env: Path
) -> None:
    for group in ("llm", "review"):
        missing = _run(registry, group, "check")
        assert missing.exit_code == 0 and "does not exist yet" in missing.output
    _fill_both(isolated_env)
    for group, path in (("llm", llm_cache_path(isolated_env)), ("review", review_store_path(isolated_env))):
        for flags in ((), ("--quick",)):
            result = _run(registry, group, "check", *flags)
            assert result.exit_code == 0, result.output
            assert f"{path}: ok (" in result.output
            assert ("quick_check" if flags else "integrity_check") in result.output


@pytest.mark.parametrize("group", ["llm", "review"])
def test_a_damaged_store_is_reported_by_check_and_by_the_commands_that_meet_it(
    registry: Path, isolated_env: Path, group: str
) -> None:
    _fill_both(isolated_env)
    path = llm_cache_path(isolated_env) if group == "llm" else review_store_path(isolated_env)
    _damage(path, "usage" if group == "llm" else "items")  # a table the command below reads
    checked = _run(registry, group, "check")
    assert checked.exit_code == 1 and "Traceback" not in checked.output
    assert f"{path}: is damaged (integrity_check: " in checked.output
    assert ".recover" in checked.output and "do not delete it" in checked.output
    use = ["costs"] if group == "llm" else ["review", "list", "--limit", "1000"]
    met = _run(registry, *use)
    assert met.exit_code == 1, met.output
    assert met.exception is None or isinstance(met.exception, SystemExit), repr(met.exception)
    assert f"{path}: is damaged (SQLite: database disk image is malformed)" in met.output
    assert f"conteb {group} check" in met.output
