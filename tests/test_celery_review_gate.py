"""The review gate with ``execution.executor: celery``: the run launched as a user launches it (``dagster job execute
-j build_conteb``) stops at the gate on the workers as it does in process: it exits 0, prints no ERROR line, the
reviewed table's step ran on a worker and yielded nothing, and the run's outcome is "waiting for review" with the
steps downstream of it skipped by the executor's loop (Dagster's ``ActiveExecution``)."""

from __future__ import annotations

import dagster as dg
import pytest

from pipelines.run_outcome import latest_run_outcome
from tests.conftest import SAMPLE_DIR
from tests.support.celery_cluster import REDIS_SERVER, CeleryCluster, free_port, run_events

pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None,
    reason="redis-server not found: run scripts/install-redis.sh (Debian: apt-get install redis-server); CI does",
)


def test_a_celery_run_stops_at_the_review_gate_and_exits_0(tmp_path_factory: pytest.TempPathFactory) -> None:
    port = free_port()
    registry = (
        "execution:\n  executor: celery\n"
        f"  celery: {{broker: 'redis://127.0.0.1:{port}/0', backend: 'redis://127.0.0.1:{port}/1'}}\n"
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: '{SAMPLE_DIR}'}}\n"
        "    reformulation: true\n    answerability: false\n"  # offline: the mask changes four chunks, they wait
    )
    cluster = CeleryCluster(tmp_path_factory.mktemp("celery-gate"), registry, workers=1)
    cluster.start()
    try:
        code = cluster.launch("build_conteb", "build").wait(timeout=240)
        terminal = cluster.log_text("build")
        assert code == 0, terminal[-3000:] + cluster.worker_logs()
        assert not [line for line in terminal.splitlines() if "ERROR" in line], terminal[-3000:]
        assert "WAITING FOR REVIEW (not a failure): task 'demo': 4 reformulation item(s) pending" in terminal
        instance = cluster.instance()
        outcome = latest_run_outcome(instance, "build_conteb")
        assert outcome is not None and outcome.state == "waiting_for_review", outcome
        assert outcome.waiting == ("demo/reviewed_chunks",)
        assert {step.split(".")[0] for step in outcome.skipped_steps} == {
            "demo__conteb_dataset",
            "demo__dataset_checks",
        }
        events = run_events(instance, outcome.run_id)
        on_worker = [e for e in events if e.event_type == dg.DagsterEventType.STEP_SUCCESS]
        assert "demo__reviewed_chunks" in {e.step_key for e in on_worker}
        assert not (cluster.data_dir / "conteb" / "demo").exists()  # nothing downstream of the queue ran
    finally:
        cluster.stop()
