"""`conteb review ...` on a real store, through click's runner (as a user types it)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from conteb.storage import review_store_path
from curation.review_items import review_item, review_items_table
from review.store import ReviewStore
from tests.conftest import SAMPLE_DIR


@pytest.fixture
def registry(tmp_path: Path, isolated_env: Path) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    reformulation: true\n"
    )
    store = ReviewStore(review_store_path(isolated_env))
    items = [
        review_item("demo", "reformulation", f"doc_{i}", "doc", f"rewrite {i}", "llm", title="Doc",
                    original=f"original {i}", flags=["leak:Doc"] if i == 0 else [])
        for i in range(3)
    ]  # fmt: skip
    store.push(review_items_table(items))
    return path


def run(registry: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["--config", str(registry), "review", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_list_show_and_bulk_accept_unflagged(registry: Path, isolated_env: Path) -> None:
    assert "demo/reformulation: 3 items, 3 pending (1 flagged)" in run(registry, "list")
    shown = run(registry, "show", "demo:reformulation:doc_0")
    assert "leak:Doc" in shown and "original 0" in shown and "rewrite 0" in shown
    assert "still names the theme: ‘Doc’." in shown  # the flag in words, as on the page
    assert "accepted 2 pending items" in run(registry, "accept", "--task", "demo", "--unflagged", "--reviewer", "ana")
    store = ReviewStore(review_store_path(isolated_env))
    assert [i.status for i in store.items(task="demo")] == ["pending", "accepted", "accepted"]
    assert "v2 accept pending->accepted by ana" in run(registry, "show", "demo:reformulation:doc_1")


def test_export_edit_import_round_trip(registry: Path, isolated_env: Path, tmp_path: Path) -> None:
    exported = tmp_path / "queue.jsonl"
    assert "wrote 3 items" in run(registry, "export", "--task", "demo", "--format", "jsonl", "-o", str(exported))
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    rows[0].update(status="edited", edited_text="fixed by hand", reviewer="bob")
    rows[1].update(status="rejected", reviewer="bob")
    rows[2].update(version=99, status="accepted", reviewer="bob")  # stale: refused
    exported.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = CliRunner().invoke(main, ["--config", str(registry), "review", "import", str(exported)])
    assert result.exit_code == 1  # something was refused, and the command says what
    assert "applied 2" in result.output and "line 3: conflict" in result.output
    item = ReviewStore(review_store_path(isolated_env)).get("demo:reformulation:doc_0")
    assert (item.status, item.final_text, item.reviewer) == ("edited", "fixed by hand", "bob")


def test_stats_and_status_point_at_pending_work(registry: Path) -> None:
    assert "demo/reformulation: 0/3 decided" in run(registry, "stats")
    status = CliRunner().invoke(main, ["--config", str(registry), "status"]).output
    assert "review: demo/reformulation: 3 of 3 items pending" in status and "conteb review serve" in status
