"""``conteb evaluate --task <typo>``: an immediate error listing the known tasks, and no report touched."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from tests.conftest import SAMPLE_DIR


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(
        f"tasks:\n  - name: sample\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
        "  - name: squad-dev\n    source: {kind: sample, path: " + str(SAMPLE_DIR) + "}\n"
        "evaluation:\n  external:\n    - {name: public-squad, path: illuin-conteb/squad}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("smaple", "unknown task 'smaple' (did you mean 'sample'?)"),
        ("public_squad", "unknown task 'public_squad' (did you mean 'public-squad'?)"),
        ("./no/such/folder", "unknown task './no/such/folder': no such folder"),
    ],
)
def test_an_unknown_task_fails_at_once_listing_the_known_ones(
    registry: Path, isolated_env: Path, task: str, expected: str
) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(main, ["--config", str(registry), "evaluate", "--task", task])
    assert time.monotonic() - started < 10  # no hub retries
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "known tasks: sample, squad-dev, public-squad" in result.output
    assert "report:" not in result.output
    assert not (isolated_env / "reports").exists()  # no report written or rewritten


def test_a_task_that_fails_to_load_rewrites_no_report(registry: Path, isolated_env: Path) -> None:
    result = CliRunner().invoke(main, ["--config", str(registry), "evaluate", "--task", "sample"])  # not built yet
    assert result.exit_code == 1, result.output
    assert "report:" not in result.output
    assert not (isolated_env / "reports" / "report.md").exists()
