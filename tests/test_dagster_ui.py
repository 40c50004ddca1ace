"""The Dagster UI (`dagster dev -w workspace.yaml`, one server for the module): the asset graph is grouped by task
and stage family, "Materialize all" succeeds (through the webserver's GraphQL API, which is what the UI calls), and
the lineage views a person opens read at their default zoom in headless Chromium (every asset name whole, not cut
with "…"). Screenshots of those views go to ``$CONTEB_SCREENSHOTS`` when it is set."""

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conteb.names import task_groups
from tests.conftest import ROOT, SAMPLE_DIR, offline_environment, published_path
from tests.support.browser import open_page, require_browser, screenshot

LOCATION = "conteb"  # workspace.yaml's location_name

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


@pytest.fixture(scope="module")
def dagster_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """One ``dagster dev`` for the module, on a free port: (port, its data folder)."""
    root = tmp_path_factory.mktemp("dagster-ui")
    with pytest.MonkeyPatch.context() as patch:
        data_dir = offline_environment(patch, root, root / "data-out")
        yield from _serve(root, data_dir)


def _serve(root: Path, data_dir: Path) -> Iterator[tuple[int, Path]]:
    port = free_port()
    registry = light_registry(root)
    dagster = Path(sys.executable).parent / "dagster"
    log = open(root / "dagster-dev.log", "w")  # noqa: SIM115 - closed below
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
                assert process.poll() is None, (root / "dagster-dev.log").read_text()[-3000:]
                time.sleep(1)
        else:
            pytest.fail("dagster dev did not answer within 120 s")
        yield port, data_dir
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def test_ui_groups_assets_by_task_and_materializes_them(dagster_dev: tuple[int, Path]) -> None:
    port, data_dir = dagster_dev
    nodes = graphql(port, ASSET_NODES)["assetNodes"]

    # "Materialize all" but the paper's experiment (its own groups and job, 40 minutes) and the quickstart's training
    # (group training, job train_insent: tests/test_training_assets.py trains through Dagster).
    def skipped(group: str) -> bool:
        return group.startswith("reproduce") or group == "training"

    keys = [node["assetKey"]["path"] for node in nodes if not skipped(node["groupName"])]
    groups = {node["groupName"] for node in nodes}
    sample_groups = set(task_groups("sample"))
    assert {"sample_sources", "sample_publish", "evaluation", "reproduce_models", "training"} <= groups and all(
        skipped(group) for group in groups - sample_groups - {"evaluation"}
    )
    experiment = [node for node in nodes if node["groupName"].startswith("reproduce")]
    assert all("reproduce_conteb" in n["jobNames"] and "build_conteb" not in n["jobNames"] for n in experiment)
    training = [node for node in nodes if node["groupName"] == "training"]
    assert {node["assetKey"]["path"][0] for node in training} == {"insent_model", "finetune_control_model"}
    assert all("train_insent" in node["jobNames"] for node in training)
    curation = [node for node in nodes if node["groupName"] in sample_groups]
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
    launched = graphql(port, LAUNCH, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    status, deadline = None, time.monotonic() + 300
    while time.monotonic() < deadline:
        status = graphql(port, RUN_STATUS, {"id": run_id})["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(2)
    assert status == "SUCCESS"
    assert published_path(data_dir / "conteb" / "sample", "documents", "test").is_file()
    assert (data_dir / "reports" / "results.json").exists()


VIEW_STATE = """e => {
  const moved = [...e.querySelectorAll('*')].find(x => x.style && x.style.transform.startsWith('matrix'));
  const svg = e.querySelector('svg');
  return [moved ? moved.style.transform : '', svg ? Number(svg.getAttribute('height')) : 0];
}"""


def rendered_lines(viewport) -> set[str]:
    """The lines of text of the rendered graph (the SVG viewport, not the side lists)."""
    return {line.strip() for line in viewport.inner_text().splitlines() if line.strip()}


def default_view(page, any_of: set[str], timeout: float = 30) -> tuple[set[str], float, float, float]:
    """The graph's lines once Dagster has drawn one of ``any_of`` and stopped moving (its zoom-to-fit), its scale, the
    offset of its top below the viewport's top and its height, in screen pixels."""
    viewport = page.locator("[data-svg-viewport]")
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if viewport.count() and rendered_lines(viewport) & any_of:
            state = viewport.evaluate(VIEW_STATE)
            if state == last:
                break
            last = state
        time.sleep(0.5)
    assert last is not None, f"the graph drew none of {sorted(any_of)} within {timeout} s"
    transform, height = last
    matrix = [float(value) for value in transform.removeprefix("matrix(").removesuffix(")").split(",")]
    return rendered_lines(viewport), matrix[0], matrix[5], height * matrix[0]


def panned_lines(page, offset: float, drawn_height: float) -> set[str]:
    """Every line the graph draws while it is dragged from its top to its bottom at the default zoom (Dagster draws
    only the nodes in view); ``offset`` and ``drawn_height`` as :func:`default_view` gives them."""
    viewport = page.locator("[data-svg-viewport]")
    box = viewport.bounding_box()
    # drag on the left margin, below the search bar that lies over the graph's top
    x, top, bottom = box["x"] + 6, box["y"] + 150, box["y"] + box["height"] - 40
    step, seen = bottom - top, rendered_lines(viewport)
    up = math.ceil(max(0.0, 110 - offset) / step)  # drags that bring the graph's top under the search bar
    down = up + math.ceil(max(0.0, offset + drawn_height - box["height"]) / step)

    def drag(start: float, end: float) -> None:
        page.mouse.move(x, start)
        page.mouse.down()
        page.mouse.move(x, end, steps=4)
        page.mouse.up()
        time.sleep(0.3)
        seen.update(rendered_lines(viewport))

    for _ in range(up):
        drag(top, bottom)
    for _ in range(down):
        drag(bottom, top)
    return seen


def skip_community_prompt(page) -> None:
    """Close Dagster's "Join the Dagster community" dialog (shown once per browser) when it is open."""
    skip = page.get_by_role("button", name="Skip")
    if skip.count() and skip.is_visible():
        skip.click()
        skip.wait_for(state="hidden")


def test_lineage_views_show_every_asset_name_whole_at_the_default_zoom(dagster_dev: tuple[int, Path]) -> None:
    """Each of the quickstart task's groups is drawn at a legible zoom: every name whole in the first view, and every
    asset of the group found whole while the view is dragged over the group (no zooming); the global view shows
    the task's groups by their whole names. (One group for the whole task, before, was drawn zoomed out with its
    names cut: ``reformulat…_chunks``.)"""
    require_browser()
    port, _ = dagster_dev
    nodes = graphql(port, ASSET_NODES)["assetNodes"]
    members: dict[str, set[str]] = {}
    for node in nodes:
        members.setdefault(node["groupName"], set()).add(node["assetKey"]["path"][-1])
    sample = [group for group in task_groups("sample") if group in members]
    assert len(sample) >= 5 and all(len(members[group]) <= 8 for group in sample)
    with open_page(1400, 1000) as page:
        for group in sample:
            page.goto(f"http://127.0.0.1:{port}/locations/{LOCATION}/asset-groups/{group}/lineage")
            lines, scale, offset, height = default_view(page, members[group])
            skip_community_prompt(page)
            screenshot(page, f"dagster-lineage-{group}.png", full_page=False)
            assert scale >= 0.7, (group, scale)  # Dagster draws whole nodes (name, status, kinds) above ~0.6
            assert not [line for line in lines if "…" in line], (group, lines)  # no name cut, the neighbours' too
            seen = panned_lines(page, offset, height)
            assert members[group] <= seen, (group, sorted(members[group] - seen))
            assert not [line for line in seen if "…" in line], (group, seen)
        # the global view: the quickstart's groups (collapsed) by their whole names
        page.goto(f"http://127.0.0.1:{port}/asset-groups")
        wanted = {*sample, "evaluation", "training"}
        lines, *_ = default_view(page, wanted)
        skip_community_prompt(page)
        screenshot(page, "dagster-lineage-global.png", full_page=False)
        assert wanted <= lines, sorted(wanted - lines)
