"""``python -m tests.support.publish_child TABLES FOLDER CHUNK_SIZE [KILL_AT]``: publish the sample as task ``sample``.

``TABLES/<CHUNK_SIZE>/`` holds the sample's ``chunks.parquet`` and ``queries.parquet`` chunked at that size
(:func:`write_table_sets`), so the process does only the publish step (``curation.dataset.publish_task``).

``KILL_AT`` (N >= 1): the process SIGKILLs itself just before the N-th operation that changes ``FOLDER``
(:func:`kill_before`); with fewer such operations the publish completes. The fault is injected from outside the
code under test: a :func:`sys.addaudithook` hook sees every file operation Python performs, whichever module and
function performs it, so a publish that gains an operation gains a kill point without any change here.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

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


WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
"""``open`` flags of an open that can change a file (any other open reads)."""


def _changes(event: str, args: tuple[Any, ...]) -> tuple[Path, ...]:
    """The paths that audit ``event`` is about to change; ``()`` for a read, or for an operation that will change
    nothing (creating a folder that exists, removing a path that is not there, removing a folder that is not empty)."""
    if event == "open":
        path, _mode, flags = args
        return () if isinstance(path, int) or not flags & WRITE_FLAGS else (Path(os.fsdecode(path)),)
    if event == "os.rename":  # os.rename and os.replace: (src, dst, src_dir_fd, dst_dir_fd)
        return tuple(Path(os.fsdecode(path)) for path in args[:2] if not isinstance(path, int))
    if event not in ("os.remove", "os.rmdir", "os.mkdir") or isinstance(args[0], int):
        return ()
    path = Path(os.fsdecode(args[0]))
    if event == "os.mkdir":
        changes = not os.path.lexists(path)
    elif event == "os.remove":
        changes = os.path.lexists(path)
    else:
        changes = path.is_dir() and not any(path.iterdir())
    return (path,) if changes else ()


def kill_before(folder: Path, operation: int) -> None:
    """SIGKILL this process just before its ``operation``-th (1-based) file operation that changes something inside
    ``folder``: creating or opening a file for writing, renaming, removing a file, making or removing a folder.

    Installed with :func:`sys.addaudithook` (Python raises an audit event before each of these operations,
    ``os.replace`` as ``os.rename``), so it cannot be removed: a process that calls it is one publish's child.
    """
    root = os.path.abspath(folder)
    count = 0

    def hook(event: str, args: tuple[Any, ...]) -> None:
        nonlocal count
        if not any(os.path.commonpath([root, os.path.abspath(path)]) == root for path in _changes(event, args)):
            return
        count += 1
        if count == operation:
            os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)


if __name__ == "__main__":
    tables, folder, chunk_size = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    if len(sys.argv) > 4:
        kill_before(folder, int(sys.argv[4]))
    publish(tables, folder, chunk_size)
