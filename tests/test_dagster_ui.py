"""The Dagster UI (`dagster dev -w workspace.yaml`): the asset graph is grouped by task, and
"Materialize all" succeeds. Drives the webserver's GraphQL API, which is what the UI calls."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, SAMPLE_DIR, published_path

ASSET_NODES = "{ assetNodes { assetKey { path } groupName jobNames } }"
LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""
RUN_STATUS = "query Status($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def graphql(port: int, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        payload = json.load(response)
    assert "errors" not in payload, payload["errors"]
    return payload["data"]


def light_registry(folder: Path) -> Path:
    """The repository's conteb.yaml with a two-system evaluation (the full one is tested in process) and the offline
    mask accepted without review."""
    registry = yaml.safe_load((ROOT / "conteb.yaml").read_text())
    for task in registry["tasks"]:
        task["source"]["path"] = str(SAMPLE_DIR)
        # the four chunks the offline mask changes, accepted without a person (the review flow: test_end_to_end.py)
        task["review"] = {"auto_accept_methods": ["mask"]}
    registry["evaluation"] = {
        "systems": [{"name": "bm25", "kind": "bm25"}, {"name": "independent", "kind": "dense"}],
        "chunk_sizes": {"enabled": False, "systems": []},
    }
    path = folder / "conteb-ui.yaml"
    path.write_text(yaml.safe_dump(registry))
    return path


@pytest.fixture
def dagster_dev(isolated_env: Path):
    port = free_port()
    registry = light_registry(isolated_env.parent)
    dagster = Path(sys.executable).parent / "dagster"
    log = open(isolated_env.parent / "dagster-dev.log", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
        # -w and DAGSTER_MODULE_NAME (exported by the Makefile) would be two code-location pointers
        env={**{k: v for k, v in os.environ.items() if k != "DAGSTER_MODULE_NAME"}, "CONTEB_CONFIG": str(registry)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                assert process.poll() is None, (isolated_env.parent / "dagster-dev.log").read_text()[-3000:]
                time.sleep(1)
        else:
            pytest.fail("dagster dev did not answer within 120 s")
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def test_ui_groups_assets_by_task_and_materializes_them(dagster_dev: int, isolated_env: Path) -> None:
    nodes = graphql(dagster_dev, ASSET_NODES)["assetNodes"]

    # "Materialize all" but the paper's experiment (its own groups and job, 40 minutes) and the quickstart's training
    # (group training, job train_insent: tests/test_training_assets.py trains through Dagster).
    def skipped(group: str) -> bool:
        return group.startswith("reproduce") or group == "training"

    keys = [node["assetKey"]["path"] for node in nodes if not skipped(node["groupName"])]
    groups = {node["groupName"] for node in nodes}
    assert {"sample", "evaluation", "reproduce", "training"} <= groups and all(
        skipped(group) for group in groups - {"sample", "evaluation"}
    )
    experiment = [node for node in nodes if node["groupName"].startswith("reproduce")]
    assert all("reproduce_conteb" in n["jobNames"] and "build_conteb" not in n["jobNames"] for n in experiment)
    training = [node for node in nodes if node["groupName"] == "training"]
    assert {node["assetKey"]["path"][0] for node in training} == {"insent_model", "finetune_control_model"}
    assert all("train_insent" in node["jobNames"] for node in training)
    curation = [node for node in nodes if node["groupName"] == "sample"]
    names = {node["assetKey"]["path"][1] for node in curation}
    assert all(node["assetKey"]["path"][0] == "sample" for node in curation)
    assert {"chunks", "paired_queries", "reformulated_chunks", "synthetic_queries", "conteb_dataset"} <= names
    assert all("build_conteb" in node["jobNames"] for node in curation)
    evaluation = {tuple(node["assetKey"]["path"]) for node in nodes if node["groupName"] == "evaluation"}
    assert evaluation == {("sample", "evaluation"), ("evaluation_report",)}
    assert all("evaluate_conteb" in node["jobNames"] for node in nodes if node["groupName"] == "evaluation")

    params = {
        "selector": {
            "repositoryLocationName": "conteb",
            "repositoryName": "__repository__",
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": path} for path in keys],
        },
        "mode": "default",
        "executionMetadata": {"tags": []},
    }
    launched = graphql(dagster_dev, LAUNCH, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    status, deadline = None, time.monotonic() + 300
    while time.monotonic() < deadline:
        status = graphql(dagster_dev, RUN_STATUS, {"id": run_id})["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(2)
    assert status == "SUCCESS"
    assert published_path(isolated_env / "conteb" / "sample", "documents", "test").is_file()
    assert (isolated_env / "reports" / "results.json").exists()
