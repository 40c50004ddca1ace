"""The jobs' console logger (pipelines/console_logger.py): the review gate's error without its stack trace, every
other error whole."""

from __future__ import annotations

from pipelines.console_logger import without_gate_stack_trace

HEAD = (
    "2026-12-02 12:58:28 +0000 - dagster - ERROR - build_conteb - 1f - sample__review_queue_reformulation - "
    'STEP_FAILURE - Execution of step "sample__review_queue_reformulation" failed.\n\n'
    "dagster._core.errors.DagsterAssetCheckFailedError: {n} blocking asset check failed with ERROR severity:\n"
)
STACK = '\n\nStack Trace:\n  File "/x/execute_plan.py", line 243, in dagster_event_sequence_for_step\n    yield\n'


def test_the_gate_is_printed_without_its_stack_trace() -> None:
    text = (
        HEAD.format(n=2) + "sample/review_queue_reformulation: review_complete\nother/review_queue_x: review_complete"
    )
    assert without_gate_stack_trace(text + STACK) == text


def test_any_other_failed_check_or_error_keeps_its_stack_trace() -> None:
    mixed = HEAD.format(n=2) + "sample/review_queue_reformulation: review_complete\nsample/conteb_dataset: unique_ids"
    assert without_gate_stack_trace(mixed + STACK) == mixed + STACK
    crash = 'STEP_FAILURE - failed.\n\nValueError: bad input in "x.parquet", row 3' + STACK
    assert without_gate_stack_trace(crash) == crash
    plain = "INFO - sample: 128 chunks from 30 documents"
    assert without_gate_stack_trace(plain) == plain
