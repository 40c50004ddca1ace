"""``python -m tests.support.publish_child TABLES FOLDER CHUNK_SIZE``: publish the sample as task ``sample``.

``TABLES/<CHUNK_SIZE>/`` holds the sample's ``chunks.parquet`` and ``queries.parquet`` chunked at that size
(:func:`write_table_sets`), so the process does only the publish step (``curation.dataset.publish_task``). The test
of atomic publishing runs it with ``CONTEB_PUBLISH_KILL_AT=N`` (:mod:`conteb.published`'s fault hook).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq

from conteb.config import ChunkingConfig, SampleSource, TaskConfig
from conteb.names import Stage
from curation.dataset import PublishedTask, publish_task
from curation.quarantine import QuarantineReason, QuarantineRecord, quarantine_table

SPLITS = {"train": 0.5, "test": 0.5, "seed": 0}


def sample_task(chunk_size: int) -> TaskConfig:
    """The sample task split by document into train and test, chunked at ``chunk_size`` characters."""
    return TaskConfig(
        name="sample",
        source=SampleSource(kind="sample"),
        splits=SPLITS,
        chunking=ChunkingConfig(chunk_size=chunk_size, chunk_overlap=0),
    )


def write_table_sets(sample_dir: Path, tables: Path, chunk_sizes: tuple[int, ...]) -> None:
    """The sample's chunks and span-paired queries at each of ``chunk_sizes``, under ``tables/<size>/``."""
    from curation.chunking import chunk_documents
    from curation.pairing import pair_by_span
    from curation.sources.sample import load_sample

    source = load_sample(sample_dir)
    documents = source.documents_table()
    for size in chunk_sizes:
        chunks = chunk_documents(documents, ChunkingConfig(chunk_size=size, chunk_overlap=0)).chunks
        queries = pair_by_span(source.queries_table(), documents, chunks).table()
        (tables / str(size)).mkdir(parents=True, exist_ok=True)
        pq.write_table(chunks, tables / str(size) / "chunks.parquet")
        pq.write_table(queries, tables / str(size) / "queries.parquet")


def refused(chunk_size: int) -> QuarantineRecord:
    """A chunking quarantine row naming ``chunk_size``: the two sizes' published quarantine tables differ, so a
    republish replaces that table too (in the same step as the data)."""
    return QuarantineRecord(
        stage=Stage.CHUNKING,
        reason=QuarantineReason.EMPTY_DOCUMENT,
        object_kind="document",
        object_id=f"blank-{chunk_size}",
        doc_id=f"blank-{chunk_size}",
        source="data/sample",
        row=f"blank-{chunk_size}.txt",
        detail="blank text",
    )


def publish(tables: Path, folder: Path, chunk_size: int) -> PublishedTask:
    """Publish ``tables/<chunk_size>/`` into ``folder``, with a chunking quarantine table of one row."""
    chunks = pq.read_table(tables / str(chunk_size) / "chunks.parquet")
    queries = pq.read_table(tables / str(chunk_size) / "queries.parquet")
    quarantines = {str(Stage.CHUNKING): quarantine_table([refused(chunk_size)])}
    return publish_task(folder, sample_task(chunk_size), "data/sample", chunks, queries, quarantines)


if __name__ == "__main__":
    publish(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
