"""A run stopped by the review gate says so, unmistakably: in the run's log, in the check's description and
metadata (the Dagster UI), in ``conteb status`` and in its exit status (3, not a crash's 1); ``make run`` ends
by saying what to do next."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from click.testing import CliRunner

from cli.main import EXIT_WAITING_FOR_REVIEW, main
from pipelines.definitions import build_definitions
from project.config import load_config
from tests.conftest import SAMPLE_DIR, squad_article, write_squad
from tests.support.openai_server import OpenAICompatibleServer
from tests.test_llm_stages_e2e import API_KEY, stopped_at_review_gate
from tests.test_review_gate import rewriting_llm


def _status(config: Path, run_status: int):
    return CliRunner().invoke(main, ["--config", str(config), "status", "--run-status", str(run_status)])


def test_a_run_waiting_for_review_is_told_apart_from_a_crash(tmp_path: Path, isolated_env: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    instance = dg.DagsterInstance.get()  # $DAGSTER_HOME: where `conteb status` finds the run
    with OpenAICompatibleServer(rewriting_llm) as server:
        gated = tmp_path / "conteb.yaml"
        gated.write_text(
            f"llm: {{base_url: {server.url}}}\ntasks:\n  - name: demo\n"
            f"    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    reformulation: true\n"
        )
        defs = build_definitions(load_config(gated))
        result = defs.resolve_job_def("build_conteb").execute_in_process(instance=instance, raise_on_error=False)
    assert stopped_at_review_gate(result)
    logged = [e.user_message for e in instance.all_logs(result.run_id) if e.dagster_event is None]  # context.log
    [line] = [message for message in logged if "WAITING FOR REVIEW" in message]  # one queue waits: one line
    assert "task 'demo'" in line and "reformulation item(s) pending" in line and "conteb review serve" in line
    [evaluation] = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert evaluation.description.startswith("WAITING FOR REVIEW")
    assert evaluation.metadata["status"].value == "waiting for review"

    status = _status(gated, 1)
    assert status.exit_code == EXIT_WAITING_FOR_REVIEW == 3, status.output
    assert "WAITING FOR REVIEW (not a failure)" in status.output
    assert "demo/reformulation" in status.output and "conteb review serve" in status.output
    assert "failed" not in status.output.lower()

    # A crash while the same queue still waits: exit status 1 and "failed", never "waiting for review".
    source = write_squad(
        tmp_path / "dev.json.gz", [squad_article("Ana", [("Ana is a city.", [("q1", "What?", "city", 9)])])]
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("tasks:\n  - name: squad\n    source: {kind: squad_json, path: dev.json.gz}\n")
    defs = build_definitions(load_config(broken))
    source.write_bytes(source.read_bytes()[:20])  # truncated after the registry was read
    crashed = defs.resolve_job_def("build_conteb").execute_in_process(instance=instance, raise_on_error=False)
    assert not crashed.success
    status = _status(broken, 1)
    assert status.exit_code == 1, status.output
    assert "WAITING FOR REVIEW (not a failure)" not in status.output
    assert "build_conteb failed" in status.output


def test_status_after_a_successful_run_says_what_to_do_next(tmp_path: Path) -> None:
    config = tmp_path / "conteb.yaml"
    config.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    status = _status(config, 0)
    assert status.exit_code == 0, status.output
    next_steps = status.output.split("next:", 1)[1]
    for step in ("make evaluate", "make dev"):
        assert step in next_steps


def test_status_passes_a_failed_run_status_through(tmp_path: Path) -> None:
    config = tmp_path / "conteb.yaml"
    config.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    status = _status(config, 1)  # no run recorded at all (e.g. the code location did not load)
    assert status.exit_code == 1, status.output
    assert "build_conteb failed" in status.output
