"""End-to-end: materialize the real assets with Dagster and reload the output with `datasets`."""

import json
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from conteb.ids import split_chunk_id
from conteb.names import StageTable
from conteb.published import card_quarantine, unnamed_files
from conteb.schemas import QUARANTINE
from conteb.storage import stage_table_path
from pipelines.definitions import build_definitions
from pipelines.run_outcome import run_outcome
from project.config import load_config
from tests.conftest import ROOT, BuiltSample, load_conteb, published_path, sample_counts

# The chunks whose later paragraph names its entity (data/sample/README.md, "The leak rule"): offline, the mask
# changes exactly these, so they wait for a person; the mask of ostherm_2 removes the answer of ostherm-q5 (flagged).
MASKED_CHUNKS = ("brackwater-rovers_3", "ostherm_2", "tarnwick_3", "vestvik-if_2")


def run_build(config_path: Path) -> tuple[dg.ExecuteInProcessResult, dg.DagsterInstance]:
    defs = build_definitions(load_config(config_path))
    instance = dg.DagsterInstance.ephemeral()
    result = defs.resolve_job_def("build_conteb").execute_in_process(instance=instance)
    return result, instance


def check_results(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    """``{"<asset>:<check>": passed}`` of the run's asset check evaluations."""
    return {
        f"{ev.asset_key.to_user_string()}:{ev.check_name}": ev.passed for ev in result.get_asset_check_evaluations()
    }


def test_build_conteb_on_the_sample(built_sample: BuiltSample) -> None:
    """A new user's first hour: the first run stops at the review gate with the four chunks the mask changed (one
    flagged: the mask removes an answer), a person accepts them, the rerun publishes every chunk and question."""
    # the first run succeeded and stopped at the review gate: no check failed, reviewed_chunks waits (observed, not
    # materialized) with the four masked chunks pending (data/sample/README.md), and what uses it was skipped
    assert built_sample.gate_failures == ()
    assert built_sample.gate_waiting == ("sample/reviewed_chunks",)
    skipped = {step.split(".")[0] for step in built_sample.gate_skipped}  # a sharded stage: its graph's steps
    assert skipped == {"sample__answerability", "sample__conteb_dataset", "sample__dataset_checks"}
    assert sorted(built_sample.pending) == sorted(f"sample:reformulation:{cid}" for cid in MASKED_CHUNKS)
    assert built_sample.flagged == ("sample:reformulation:ostherm_2",)
    items = pq.read_table(stage_table_path(built_sample.data_dir, "sample", StageTable.REFORMULATION_REVIEW_ITEMS))
    [flagged] = [row for row in items.to_pylist() if row["flagged"]]  # says which question loses its answer
    assert flagged["flags"] == ["lost_answer:Ostherm Glass Museum"]
    museum = {"answer": "Ostherm Glass Museum", "query": "What is the best-known museum of Ostherm?"}
    assert json.loads(flagged["context"])["lost_answers"] == [{**museum, "query_id": "ostherm-q5"}]
    assert not built_sample.published_at_gate  # nothing published before the review

    instance = built_sample.instance()
    first = instance.get_run_by_id(built_sample.run_ids[0])
    assert first is not None and first.is_success  # waiting for a person is not a failed run
    assert run_outcome(instance, first).waiting == ("sample/reviewed_chunks",)
    second = instance.get_run_by_id(built_sample.run_ids[1])
    assert second is not None and second.is_success
    assert run_outcome(instance, second).state == "succeeded"
    evaluations = [
        entry.dagster_event.event_specific_data
        for entry in instance.all_logs(second.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    ]
    dataset_key = dg.AssetKey(["sample", "conteb_dataset"])
    on_dataset = {ev.check_name: ev.passed for ev in evaluations if ev.asset_key == dataset_key}
    assert len(on_dataset) == 8 and all(on_dataset.values()), on_dataset
    assert all(ev.passed for ev in evaluations), [ev.check_name for ev in evaluations if not ev.passed]

    folder = built_sample.dataset
    # conteb.yaml splits the sample by document: train (make train), validation (the pipeline chosen) and test (make
    # evaluate), together all of it
    splits = {
        split: (load_conteb(folder, "documents", split), load_conteb(folder, "queries", split))
        for split in ("train", "validation", "test")
    }
    assert sum(d.num_rows for d, _ in splits.values()) == sample_counts().chunks  # every chunk at 1000 characters
    assert sum(q.num_rows for _, q in splits.values()) == sample_counts().queries  # every question of the sample
    doc_ids = {split: {split_chunk_id(cid)[0] for cid in d["chunk_id"]} for split, (d, _) in splits.items()}
    assert doc_ids["train"] and doc_ids["validation"] and doc_ids["test"]
    assert not (doc_ids["train"] & doc_ids["test"] or doc_ids["validation"] & (doc_ids["train"] | doc_ids["test"]))
    changed = set()
    for documents, queries in splits.values():
        chunk_ids = set(documents["chunk_id"])
        assert all(cid in chunk_ids for cid in queries["chunk_id"])
        changed |= {row["chunk_id"] for row in documents if row["chunk"] != row["og_chunk"]}
    assert changed == set(MASKED_CHUNKS)  # the accepted masks are published, every other chunk as it was

    # the quarantine tables beside the data (README): one per stage, empty with its schema, and the card says so
    tables = card_quarantine(folder)
    assert set(tables) == {"source", "chunking", "pairing", "reformulation", "synthetic_queries", "answerability"}
    for stage, path in tables.items():
        assert path.parent == folder / "quarantine" and path.name.startswith(f"{stage}-")
        table = pq.read_table(path)
        assert table.num_rows == 0 and table.schema.equals(QUARANTINE), stage
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "0 rows quarantined in all." in card
    for stage, path in tables.items():
        label = stage.replace("_", " ")
        assert f"| {label} | 0 rows quarantined |  | `{path.relative_to(folder)}` |" in card
    assert unnamed_files(folder) == []

    materialization = instance.get_latest_materialization_event(dg.AssetKey(["sample", "conteb_dataset"]))
    metadata = materialization.asset_materialization.metadata
    assert metadata["dagster/row_count"].value == sample_counts().chunks
    assert metadata["dataset_dir"].value == str(folder)
    assert "chunk_id" in metadata["preview"].value
    chunks_meta = instance.get_latest_materialization_event(
        dg.AssetKey(["sample", "chunks"])
    ).asset_materialization.metadata
    assert {c.name for c in chunks_meta["dagster/column_schema"].value.columns} >= {"chunk_id", "char_start"}


def test_checks_read_the_published_files_and_fail_on_corruption(built_sample: BuiltSample, isolated_env: Path) -> None:
    built_sample.copy_data(isolated_env)
    defs = build_definitions(load_config(ROOT / "conteb.yaml"))
    instance = dg.DagsterInstance.ephemeral()
    path = published_path(isolated_env / "conteb" / "sample", "documents", "test")
    table = pq.read_table(path)
    texts = table.column("og_chunk").to_pylist()
    texts[3] = texts[3] + " tampered"
    pq.write_table(table.set_column(table.schema.get_field_index("og_chunk"), "og_chunk", [texts]), path)
    checks_job = dg.define_asset_job(
        "checks_only", selection=dg.AssetSelection.checks_for_assets(dg.AssetKey(["sample", "conteb_dataset"]))
    )
    job = dg.Definitions(
        assets=defs.assets, asset_checks=defs.asset_checks, resources=defs.resources, jobs=[checks_job]
    ).resolve_job_def("checks_only")
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    outcomes = check_results(result)
    assert outcomes["sample/conteb_dataset:chunks_match_source"] is False
    assert outcomes["sample/conteb_dataset:no_empty_chunks"] is True


def test_quarantine_reaches_tables_and_metadata(tmp_path: Path, isolated_env: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "documents").mkdir(parents=True)
    (corpus / "documents" / "alpha.txt").write_text("Alpha\n\nAlpha is first. It was founded in 1900.\n")
    (corpus / "documents" / "blank.txt").write_text("Blank\n\n   \n")
    rows = [
        ("a1", "alpha", "When was Alpha founded?", "1900", 34),
        ("a2", "alpha", "Wrong offset?", "1900", 3),
        ("b1", "blank", "Anything?", "x", 0),
        ("a1", "alpha", "Dup?", "1900", 34),
    ]
    keys = ("query_id", "doc_id", "question", "answer", "answer_start")
    (corpus / "queries.jsonl").write_text("".join(json.dumps(dict(zip(keys, row, strict=True))) + "\n" for row in rows))
    config = tmp_path / "conteb.yaml"
    config.write_text("tasks:\n  - name: tiny\n    source: {kind: sample, path: corpus}\n")
    result, instance = run_build(config)
    assert result.success
    stages = isolated_env / "stages" / "tiny"
    reasons = {
        stage: sorted(pq.read_table(stages / f"{stage}.parquet").column("reason").to_pylist())
        for stage in ("source_quarantine", "chunk_quarantine", "pairing_quarantine")
    }
    assert reasons == {
        "source_quarantine": ["duplicate_query_id"],
        "chunk_quarantine": ["empty_document"],
        "pairing_quarantine": ["document_quarantined", "span_text_mismatch"],
    }
    pairing = pq.read_table(stages / "pairing_quarantine.parquet").to_pylist()
    mismatch = next(r for r in pairing if r["reason"] == "span_text_mismatch")
    assert mismatch["row"] == "line 2" and mismatch["source"].endswith("queries.jsonl")
    event = instance.get_latest_materialization_event(dg.AssetKey(["tiny", "pairing_quarantine"]))
    assert event.asset_materialization.metadata["quarantine/span_text_mismatch"].value == 1
    folder = isolated_env / "conteb" / "tiny"
    card = (folder / "README.md").read_text()
    assert "4 rows quarantined in all." in card
    published = card_quarantine(folder)
    assert (
        f"| chunking | 1 row quarantined | `empty_document`: 1 | `{published['chunking'].relative_to(folder)}` |"
        in card
    )
    for stage, name in (
        ("source", "source_quarantine"),
        ("chunking", "chunk_quarantine"),
        ("pairing", "pairing_quarantine"),
    ):
        assert pq.read_table(published[stage]).equals(pq.read_table(stages / f"{name}.parquet").cast(QUARANTINE))


@pytest.mark.slow
def test_squad_v11_dev_end_to_end(tmp_path: Path, isolated_env: Path, shared_data: Path) -> None:
    config = tmp_path / "conteb.yaml"
    config.write_text(
        "tasks:\n  - name: squad\n    source: {kind: squad_json, path: "
        f"{shared_data / 'squad-v1.1-dev.json.gz'}}}\n    split: validation\n"
    )
    result, _ = run_build(config)
    assert result.success
    assert all(check_results(result).values())
    folder = isolated_env / "conteb" / "squad"
    documents = load_conteb(folder, "documents", "validation")
    queries = load_conteb(folder, "queries", "validation")
    assert len(set(documents["doc_id"])) == 48
    stages = isolated_env / "stages" / "squad"
    quarantined = sum(
        pq.read_table(stages / f"{name}.parquet").column("object_kind").to_pylist().count("query")
        for name in ("source_quarantine", "pairing_quarantine")
    )
    assert queries.num_rows + quarantined == 10570  # every answerable question paired or quarantined
    assert queries.num_rows / 10570 >= 0.99
