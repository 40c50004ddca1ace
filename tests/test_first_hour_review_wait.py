"""Waiting for review is not a failure: a run stopped by the review gate succeeds in Dagster's terms (no failed
step, no failed check, the steps downstream of the queue skipped), says so in the run's log and on the reviewed
table's observation (the Dagster UI), in ``conteb status`` and in its exit status (3 for scripts, not a crash's 1);
``make run`` prints no ERROR line, ends by saying what waits and the command that decides it, and exits 0."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import dagster as dg
from click.testing import CliRunner

from cli.main import EXIT_WAITING_FOR_REVIEW, main
from pipelines.definitions import build_definitions
from pipelines.run_outcome import latest_run_outcome, waiting_tables
from project.config import load_config
from tests.conftest import ROOT, SAMPLE_DIR, squad_article, write_squad
from tests.support.make import user_make_env
from tests.support.openai_server import OpenAICompatibleServer
from tests.test_llm_stages_e2e import API_KEY, stopped_at_review_gate
from tests.test_review_gate import rewriting_llm


def documented_gate_output(page: Path) -> list[str]:
    """The lines of ``page``'s ``text`` block that shows the first ``make run`` (the one with the WAITING line)."""
    blocks = re.findall(r"```text\n(.*?)```", page.read_text(), re.S)
    [block] = [block for block in blocks if "WAITING FOR REVIEW" in block]
    return block.splitlines()


def printed_in_order(shown: list[str], printed: list[str]) -> bool:
    """Whether each line of ``shown`` matches a line of ``printed``, in order: ``...`` stands for any text (a log
    line's timestamp and run id, a folder)."""
    remaining = iter(printed)
    for line in shown:
        pattern = re.compile(".*".join(re.escape(part) for part in line.split("...")))
        if not any(pattern.fullmatch(candidate) for candidate in remaining):
            return False
    return True


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
        [observation] = [
            e.asset_observation_data.asset_observation for e in result.all_events if e.is_asset_observation
        ]
        assert observation.asset_key == dg.AssetKey(["demo", "reviewed_chunks"])  # observed, not materialized
        assert observation.metadata["review_status"].value == "waiting for review"
        assert observation.metadata["review_command"].value == "conteb review serve"
        assert not result.asset_materializations_for_node("demo__reviewed_chunks")
        assert latest_run_outcome(instance, "build_conteb").state == "waiting_for_review"

        status = _status(gated, 0)  # `dagster job execute` exited 0: the run succeeded
        assert status.exit_code == EXIT_WAITING_FOR_REVIEW == 3, status.output
        assert "WAITING FOR REVIEW (not a failure)" in status.output
        assert "demo/reformulation" in status.output and "conteb review serve" in status.output
        assert "failed" not in status.output.lower()

        # A crash in the same run as the queue that still waits: a failed run, exit status 1, never "waiting".
        source = write_squad(
            tmp_path / "dev.json.gz", [squad_article("Ana", [("Ana is a city.", [("q1", "What?", "city", 9)])])]
        )
        broken = tmp_path / "broken.yaml"
        broken.write_text(gated.read_text() + "  - name: squad\n    source: {kind: squad_json, path: dev.json.gz}\n")
        defs = build_definitions(load_config(broken))
        source.write_bytes(source.read_bytes()[:20])  # truncated after the registry was read
        crashed = defs.resolve_job_def("build_conteb").execute_in_process(instance=instance, raise_on_error=False)
    assert not crashed.success and waiting_tables(crashed.all_events) == ("demo/reviewed_chunks",)
    assert latest_run_outcome(instance, "build_conteb").failed_steps == ("squad__source",)
    status = _status(broken, 1)
    assert status.exit_code == 1, status.output
    assert "WAITING FOR REVIEW (not a failure)" not in status.output
    assert "build_conteb failed with exit status 1 (failed steps: squad__source)" in status.output


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


def test_the_first_hour_in_commands_waiting_for_review_is_not_a_failure(isolated_env: Path) -> None:
    """What a new user types, on a fresh data folder: ``make run`` (the plain ``dagster job execute -j build_conteb``
    with the Makefile's ``DAGSTER_MODULE_NAME``) stops at the review gate and exits 0, with no ERROR line, no
    "resulted in failure", no make error, and ends with what waits and the command that decides it; ``conteb status``
    alone still exits 3 for scripts; ``conteb review accept``; ``make run`` again publishes the dataset."""
    make_run = ["make", "--no-print-directory", "run"]
    run = subprocess.run(make_run, cwd=ROOT, env=user_make_env(), capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    assert not [line for line in output.splitlines() if "ERROR" in line], output[-3000:]
    for failure in ("resulted in failure", "Error 3", "make: ***", "STEP_FAILURE", "RUN_FAILURE", "Traceback"):
        assert failure not in output, output[-3000:]
    assert "{'" not in output and "Warning" not in output  # counts in words (assets/metadata.py), no warnings
    # the run's log ends with what waits and the command (the steps skipped behind the gate are DEBUG lines)
    assert (
        "WAITING FOR REVIEW (not a failure): task 'sample': 4 reformulation item(s) pending; decide them with "
        "`conteb review serve`" in run.stderr.strip().splitlines()[-1]
    ), run.stderr[-3000:]
    # the last lines (conteb status, on stdout): what waits, then the commands that decide it
    verdict, steps = run.stdout.split("build_conteb: WAITING FOR REVIEW (not a failure)", 1)
    assert "waiting for review: sample/reformulation: 4 of 98 items pending" in verdict
    assert "conteb review serve" in steps and "conteb review accept" in steps and "make run" in steps

    terminal = (run.stderr + run.stdout).splitlines()  # the job (stderr), then conteb status (stdout)
    for page in ("README.md", "docs/quickstart.md"):  # the manual shows what the terminal prints, line for line
        shown = documented_gate_output(ROOT / page)
        assert printed_in_order(shown, terminal), f"{page}: {shown} not in\n{output[-3000:]}"

    config = ["--config", str(ROOT / "conteb.yaml")]
    alone = CliRunner().invoke(main, [*config, "status", "--run-status", "0"])
    assert alone.exit_code == EXIT_WAITING_FOR_REVIEW, alone.output  # for scripts: distinct from 0 and from 1

    decided = CliRunner().invoke(main, [*config, "review", "accept", "--task", "sample", "--reviewer", "ana"])
    assert decided.exit_code == 0, decided.output
    run = subprocess.run(make_run, cwd=ROOT, env=user_make_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    written = f"ConTEB dataset written to {isolated_env / 'conteb' / 'sample'} (128 chunks, 195 queries; "
    assert written + "0 rows quarantined, its tables in quarantine/)" in run.stderr  # says so when nothing was refused
    assert "build_conteb: succeeded" in run.stdout and "WAITING FOR REVIEW" not in run.stdout + run.stderr
    assert (isolated_env / "conteb" / "sample" / "README.md").exists()
