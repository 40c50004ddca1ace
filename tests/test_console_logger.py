"""The jobs' console logger (pipelines/console_logger.py): the steps Dagster skips behind a review gate are printed at
DEBUG, so that at INFO a run that waits ends with the waiting line; every other line as Dagster prints it."""

from __future__ import annotations

import dagster as dg
import pytest

from pipelines.console_logger import console_logger

WAITING = "WAITING FOR REVIEW (not a failure): 4 item(s) pending"


@dg.op(out={"reviewed": dg.Out(is_required=False)})
def gate(context):
    """A review gate that waits: one line, no output."""
    context.log.info(WAITING)
    yield from ()


@dg.op
def downstream(context, reviewed: int) -> int:
    context.log.info("downstream ran")
    return reviewed


@dg.op
def other(context) -> None:
    context.log.warning("a warning of another step")


@dg.job(logger_defs={"console": console_logger})
def gated() -> None:
    downstream(gate())
    other()


def _run(capsys: pytest.CaptureFixture[str], level: str) -> tuple[dg.ExecuteInProcessResult, list[str]]:
    capsys.readouterr()
    config = {"loggers": {"console": {"config": {"log_level": level}}}}
    result = gated.execute_in_process(run_config=config, instance=dg.DagsterInstance.ephemeral())
    return result, capsys.readouterr().err.splitlines()


def test_skipped_steps_are_printed_at_debug_not_info(capsys: pytest.CaptureFixture[str]) -> None:
    result, lines = _run(capsys, "INFO")
    assert result.success
    assert [e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SKIPPED] == ["downstream"]
    assert not [line for line in lines if "Skipping step" in line], lines
    assert any(WAITING in line and " - INFO - " in line for line in lines), lines
    assert any("a warning of another step" in line and " - WARNING - " in line for line in lines), lines
    assert not [line for line in lines if "downstream ran" in line]


def test_at_debug_the_skipped_steps_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    _, lines = _run(capsys, "DEBUG")
    [skipping] = [line for line in lines if "Skipping step downstream due to skipped dependencies" in line]
    assert " - DEBUG - " in skipping
