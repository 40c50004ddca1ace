"""Published output: the ConTEB dataset folder of a task, and its asset checks (ERROR severity)."""

import os
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from assets.keys import (
    CHUNK_QUARANTINE,
    CHUNKS,
    CONTEB_DATASET,
    PAIRED_QUERIES,
    PAIRING_QUARANTINE,
    SOURCE_DOCUMENTS,
    SOURCE_QUARANTINE,
    key,
)
from conteb.config import TaskConfig
from conteb.storage import dataset_dir, stage_dir
from curation import validation
from curation.dataset import data_file, publish_task
from pipelines.metadata import count_metadata, markdown_preview, table_metadata
from pipelines.resources import ConTEBSettings


def build_dataset_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/conteb_dataset``: ``data/conteb/<task>/`` in the public ConTEB layout."""

    @dg.asset(
        key=key(task, CONTEB_DATASET),
        group_name=task.dagster_name,
        kinds={"parquet", "huggingface"},
        description=f"The ConTEB dataset folder of task '{task.name}' (documents, queries, README card).",
        ins={
            "chunks": dg.AssetIn(key(task, CHUNKS)),
            "queries": dg.AssetIn(key(task, PAIRED_QUERIES)),
            "source_quarantine": dg.AssetIn(key(task, SOURCE_QUARANTINE)),
            "chunk_quarantine": dg.AssetIn(key(task, CHUNK_QUARANTINE)),
            "pairing_quarantine": dg.AssetIn(key(task, PAIRING_QUARANTINE)),
        },
    )
    def conteb_dataset(
        context: dg.AssetExecutionContext,
        settings: ConTEBSettings,
        chunks: pa.Table,
        queries: pa.Table,
        source_quarantine: pa.Table,
        chunk_quarantine: pa.Table,
        pairing_quarantine: pa.Table,
    ) -> dg.MaterializeResult:
        out_dir = dataset_dir(settings.data_path, task.name)
        published = publish_task(
            out_dir,
            task,
            display_path(task.source.path, settings.config_dir),
            chunks,
            queries,
            {"source": source_quarantine, "chunking": chunk_quarantine, "pairing": pairing_quarantine},
        )
        counts, written = published.counts, published.paths
        context.log.info(
            f"{task.name}: ConTEB dataset written to {out_dir} ({counts['chunks']} chunks, {counts['queries']} queries)"
        )
        return dg.MaterializeResult(
            metadata={
                **table_metadata(published.documents),
                "dataset_dir": dg.MetadataValue.path(str(out_dir)),
                "documents_file": dg.MetadataValue.path(str(written["documents"])),
                "queries_file": dg.MetadataValue.path(str(written["queries"])),
                "queries/row_count": queries.num_rows,
                "queries/preview": dg.MetadataValue.md(markdown_preview(queries)),
                **count_metadata("count", counts),
                **{
                    f"quarantine/{stage}/{reason}": n
                    for stage, reasons in published.quarantine.items()
                    for reason, n in reasons.items()
                },
            }
        )

    return conteb_dataset


CHECKS = {
    "chunk_ids_unique_and_well_formed": "Chunk ids are '<doc_id>_<chunk_index>' and unique.",
    "query_chunk_ids_exist": "Every query's chunk_id and chunk_ids exist among the chunks.",
    "chunks_within_size": "No chunk is longer than the configured chunk_size.",
    "chunks_match_source": "chunk == text[char_start:char_end] of its source document.",
    "no_empty_chunks": "No chunk is empty or whitespace only.",
}


def build_dataset_checks(task: TaskConfig) -> dg.AssetChecksDefinition:
    """The ERROR-severity invariants of the published folder, read back from disk."""
    asset_key = key(task, CONTEB_DATASET)

    @dg.multi_asset_check(
        name=f"{task.dagster_name}__dataset_checks",
        specs=[
            dg.AssetCheckSpec(name, asset=asset_key, description=text, blocking=True) for name, text in CHECKS.items()
        ],
    )
    def dataset_checks(context: dg.AssetCheckExecutionContext, settings: ConTEBSettings):
        data_path = settings.data_path
        folder = dataset_dir(data_path, task.name)
        documents = pq.read_table(folder / data_file("documents", task.split))
        queries = pq.read_table(folder / data_file("queries", task.split))
        sources = pq.read_table(
            stage_dir(data_path, task.name) / f"{SOURCE_DOCUMENTS}.parquet", columns=["doc_id", "text"]
        )
        outcomes = {
            "chunk_ids_unique_and_well_formed": validation.chunk_ids_unique_and_well_formed(documents),
            "query_chunk_ids_exist": validation.query_chunk_ids_exist(queries, documents),
            "chunks_within_size": validation.chunks_within_size(documents, task.chunking.chunk_size),
            "chunks_match_source": validation.chunks_match_source(documents, sources),
            "no_empty_chunks": validation.no_empty_chunks(documents),
        }
        failed = {name: outcome for name, outcome in outcomes.items() if not outcome.passed}
        context.log.info(f"{task.name}: {len(outcomes) - len(failed)}/{len(outcomes)} dataset checks passed")
        for name, outcome in failed.items():
            context.log.error(f"{task.name}: check {name} failed on {outcome.failures} rows, e.g. {outcome.examples}")
        for name, outcome in outcomes.items():
            yield dg.AssetCheckResult(
                check_name=name,
                asset_key=asset_key,
                passed=outcome.passed,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={
                    "failures": outcome.failures,
                    "checked": outcome.checked,
                    "examples": dg.MetadataValue.md("\n".join(f"- {e}" for e in outcome.examples) or "none"),
                },
            )

    return dataset_checks


def display_path(path: Path | str, base: Path) -> str:
    """``path`` relative to ``base`` when it is a local path, else unchanged (a hub dataset name)."""
    return os.path.relpath(path, base) if os.path.isabs(path) else str(path)
