"""End to end: a ``kind: controlled`` task through ``build_conteb`` publishes a ConTEB folder whose queries all pair by
answer span, with nothing quarantined."""

from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from curation.sources.controlled.catalog import BY_NAME
from pipelines.definitions import build_definitions
from project.config import load_config
from tests.conftest import load_conteb

TEMPLATES = ("city", "composer")
DOCUMENTS = 3


def test_a_controlled_task_builds_and_pairs_every_query_by_span(tmp_path: Path, isolated_env: Path) -> None:
    config_path = tmp_path / "conteb.yaml"
    config_path.write_text(
        "tasks:\n  - name: made\n    source: {kind: controlled, templates: ["
        + ", ".join(TEMPLATES)
        + f"], documents_per_template: {DOCUMENTS}, titles: uninformative}}\n    reformulation: true\n",
        encoding="utf-8",
    )
    defs = build_definitions(load_config(config_path))
    result = defs.resolve_job_def("build_conteb").execute_in_process(instance=dg.DagsterInstance.ephemeral())
    assert result.success
    checks = {ev.check_name: ev.passed for ev in result.get_asset_check_evaluations()}
    assert checks and all(checks.values()), checks

    folder = isolated_env / "conteb" / "made"
    documents = load_conteb(folder, "documents")
    queries = load_conteb(folder, "queries")
    expected = DOCUMENTS * sum(len(BY_NAME[name].questions) for name in TEMPLATES)
    assert queries.num_rows == expected
    assert set(queries["pairing"]) == {"span"}
    chunks = dict(zip(documents["chunk_id"], documents["og_chunk"], strict=True))
    for chunk_id, answer in zip(queries["chunk_id"], queries["answer"], strict=True):
        assert answer in chunks[chunk_id]  # the span lies inside its chunk
    assert len(set(documents["doc_id"])) == DOCUMENTS * len(TEMPLATES)
    assert min(documents["chunk_index"]) == 0 and max(documents["chunk_index"]) >= 3  # 4+ chunks per document
    assert documents["chunk"] == documents["og_chunk"]  # reformulation (offline mask) found no entity after the head
    stages = isolated_env / "stages" / "made"
    for stage in ("source_quarantine", "chunk_quarantine", "pairing_quarantine"):
        assert pq.read_table(stages / f"{stage}.parquet").num_rows == 0, stage
    card = (folder / "README.md").read_text()
    assert "0 rows quarantined in all." in card and "| chunking | 0 rows quarantined |" in card
    assert "controlled (templates city, composer; 3 documents per template; seed 0; uninformative titles)" in card
    # Uninformative titles: the theme is the entity the head names, so every query whose gold chunk is not the head
    # needs context (its chunk never names the entity), and the head's own queries do not.
    positions = dict(zip(documents["chunk_id"], documents["chunk_index"], strict=True))
    labels = [positions[chunk_id] > 0 for chunk_id in queries["chunk_id"]]
    assert queries["needs_context"] == labels and any(labels) and not all(labels)
