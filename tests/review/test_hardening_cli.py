"""Issue 11 (hardening) for `conteb review ...`: damaged store, unsafe serve, typos, default reviewer, labels."""

from __future__ import annotations

import getpass
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

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
    items = [
        review_item("demo", "reformulation", f"doc_{i}", "doc", f"rewrite {i}", "llm", title="Doc",
                    original=f"original {i}", flags=["leak:Doc"] if i == 0 else [])
        for i in range(3)
    ]  # fmt: skip
    items.append(review_item("demo", "synthetic_query", "q0", "doc", "When?", "llm"))
    with ReviewStore(review_store_path(isolated_env)) as store:
        store.push(review_items_table(items))
    return path


def invoke(registry: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--config", str(registry), "review", *args])


def _refused(result: Result) -> str:
    """The output of a command that must fail cleanly: non-zero rc, no traceback."""
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.output


def _statuses(isolated_env: Path) -> dict[str, str]:
    with ReviewStore(review_store_path(isolated_env)) as store:
        return {item.object_id: item.status for item in store.items(task="demo")}


def test_empty_store_file_is_refused_with_the_file_name(registry: Path, isolated_env: Path) -> None:
    path = review_store_path(isolated_env)
    path.unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"")
    output = _refused(invoke(registry, "list"))
    assert str(path) in output and "empty" in output
    assert path.stat().st_size == 0


def test_serve_on_a_public_host_without_token_is_one_clear_line(registry: Path) -> None:
    result = invoke(registry, "serve", "--host", "0.0.0.0", "--port", "1")
    output = _refused(result)
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and "without a token" in lines[0], output


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (" ", "the review token is blank"),
        ("", "the review token is blank"),
        ("\u3000\t", "the review token is blank"),
        ("\u200b" * 20, "the review token is blank"),
        ("short-token", "the review token has 11 characters"),
        ("a-long-enough-token with-a-space", "space, control or format character (U+0020)"),
        ("a-long-enough-token\u2028-value", "space, control or format character (U+2028)"),
    ],
)
def test_serve_refuses_a_blank_or_weak_token_in_one_line(
    registry: Path, monkeypatch: pytest.MonkeyPatch, token: str, expected: str
) -> None:
    import review.web

    monkeypatch.setattr(review.web, "serve", lambda *args, **kwargs: pytest.fail("served with a bad token"))
    for host in ("127.0.0.1", "0.0.0.0"):
        output = _refused(invoke(registry, "serve", "--host", host, "--port", "1", "--token", token))
        lines = [line for line in output.splitlines() if line.strip()]
        assert len(lines) == 1 and expected in lines[0], output
    with pytest.raises(ValueError, match=re.escape(expected)):
        review.web.check_bind("127.0.0.1", token)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("accept", "--task", "dmeo", "--reviewer", "ana"), "demo"),
        (("reject", "--task", "dmeo", "--reviewer", "ana"), "demo"),
        (("list", "--task", "dmeo"), "demo"),
        (("export", "--task", "dmeo"), "demo"),
        (("stats", "--task", "dmeo"), "demo"),
        (("accept", "--task", "demo", "--kind", "reformulaton", "--reviewer", "ana"), "reformulation, synthetic_query"),
        (("list", "--kind", "reformulaton"), "reformulation, synthetic_query"),
    ],
)
def test_unknown_task_or_kind_fails_and_lists_the_known_ones(
    registry: Path,
    isolated_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    expected: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # `export` writes into the working folder
    before = _statuses(isolated_env)
    output = _refused(invoke(registry, *args))
    assert expected in output
    assert _statuses(isolated_env) == before


def test_reviewer_defaults_to_the_os_user(registry: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(getpass, "getuser", lambda: "os-user")
    result = invoke(registry, "accept", "--task", "demo", "--kind", "reformulation", "--unflagged")
    assert result.exit_code == 0, result.output
    with ReviewStore(review_store_path(isolated_env)) as store:
        assert {item.reviewer for item in store.items(task="demo", status="accepted")} == {"os-user"}


def test_reviewer_with_control_characters_is_a_clear_error(registry: Path, isolated_env: Path) -> None:
    output = _refused(invoke(registry, "accept", "--task", "demo", "--reviewer", "ana\x1b[31m"))
    assert "control characters" in output
    assert set(_statuses(isolated_env).values()) == {"pending"}


@pytest.mark.parametrize(("name", "expected"), [("Auto", "reserved"), ("auto:mask", "reserved"),
                                              ("ana\u2028bob", "line separators")])  # fmt: skip
def test_reviewer_cannot_be_the_automatic_one_or_hold_line_separators(
    registry: Path, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, expected: str
) -> None:
    output = _refused(invoke(registry, "accept", "--task", "demo", "--reviewer", name))
    assert expected in output and len([line for line in output.splitlines() if line.strip()]) == 1
    monkeypatch.setattr(getpass, "getuser", lambda: name)  # nor can the OS user's name
    assert expected in _refused(invoke(registry, "reject", "--task", "demo", "--kind", "reformulation"))
    monkeypatch.chdir(tmp_path)
    assert invoke(registry, "export", "--task", "demo", "--kind", "reformulation", "-o", "q.jsonl").exit_code == 0
    assert expected in _refused(invoke(registry, "import", "q.jsonl", "--reviewer", name))
    assert set(_statuses(isolated_env).values()) == {"pending"}


def test_stats_agreement_is_between_people_and_counts_automatic_decisions(registry: Path, isolated_env: Path) -> None:
    item = "demo:reformulation:doc_1"
    with ReviewStore(review_store_path(isolated_env)) as store:
        store.bulk_decide("accept", "auto:mask", "demo", "reformulation", ids=[item])
        store.decide(item, "reject", "ana", store.get(item).version)  # auto and ana on one item: not a pair
    stats = invoke(registry, "stats", "--task", "demo")
    assert stats.exit_code == 0, stats.output
    assert "demo/reformulation: agreement: no item decided by two people yet (1 automatic decision left out)" in (
        stats.output
    )
    assert "kappa" not in stats.output
    with ReviewStore(review_store_path(isolated_env)) as store:
        store.decide(item, "reject", "ben", store.get(item).version)
    stats = invoke(registry, "stats", "--task", "demo")
    assert "demo/reformulation: agreement: 1 items decided by ana and ben: observed 1.000" in stats.output
    assert "auto:mask (automatic) and" not in stats.output and "1 automatic decision left out" in stats.output


def test_stats_and_show_label_automatic_and_unknown_reviewers(registry: Path, isolated_env: Path) -> None:
    with ReviewStore(review_store_path(isolated_env)) as store:
        store.bulk_decide("accept", "auto", "demo", "reformulation", ids=["demo:reformulation:doc_1"])
        store.decide("demo:reformulation:doc_2", "reject", "ana", 1)
    stats = invoke(registry, "stats")
    assert stats.exit_code == 0, stats.output
    assert "None" not in stats.output
    assert "auto (automatic)" in stats.output and "ana 1" in stats.output
    assert "agreement: no item decided by two people yet" in stats.output and "kappa" not in stats.output
    shown = invoke(registry, "show", "demo:reformulation:doc_0")
    assert shown.exit_code == 0 and "None" not in shown.output
    assert "by the pipeline" in shown.output
    auto = invoke(registry, "show", "demo:reformulation:doc_1").output
    assert "by auto (automatic)" in auto
