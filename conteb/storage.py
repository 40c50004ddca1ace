"""Where things live on disk, and atomic writes.

Layout under the data folder (``data/`` beside ``conteb.yaml``, or ``$CONTEB_DATA_DIR``)::

    conteb/<task>/          the published ConTEB dataset (Hugging Face layout, README card; see below)
    stages/<task>/          intermediate stage tables (Parquet), one file per asset
    llm/answers.sqlite      paid LLM answers (cache) and the cost ledger
    review/review.sqlite    review queues: items, decisions, audit log
    models/<name>/          trained models (sentence-transformers folders)
    reports/                evaluation: results.json, reports, TREC run files (see evaluation/runner.py)

A published dataset folder is a dataset card (``README.md``) naming its Parquet files, one folder per config
(:data:`PUBLISHED_CONFIGS`) and the stages' quarantine tables (:data:`PUBLISHED_QUARANTINE`); :mod:`conteb.published`
owns it (which files belong to it, publishing it in one step).
:func:`shard_split` reads a split from a shard's name where no card names the files (the hub's ``<split>.parquet``
or ``<split>-NNNNN-of-NNNNN*.parquet``).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

DATA_DIR_ENV = "CONTEB_DATA_DIR"


def resolve_data_dir(config_dir: Path) -> Path:
    """``$CONTEB_DATA_DIR`` when set, else ``<config_dir>/data``."""
    override = os.environ.get(DATA_DIR_ENV)
    return Path(override).expanduser().resolve() if override else (config_dir / "data").resolve()


def dataset_dir(data_dir: Path, task: str) -> Path:
    """Folder of the published ConTEB dataset of ``task``."""
    return data_dir / "conteb" / task


def llm_cache_path(data_dir: Path) -> Path:
    """The SQLite file of paid LLM answers and the cost ledger."""
    return data_dir / "llm" / "answers.sqlite"


def review_store_path(data_dir: Path) -> Path:
    """The SQLite file of the review queues (items, decisions, audit log)."""
    return data_dir / "review" / "review.sqlite"


def models_dir(data_dir: Path) -> Path:
    """Folder of the trained models (``models/<training asset name>``)."""
    return data_dir / "models"


def reports_dir(data_dir: Path) -> Path:
    """Folder of the evaluation reports and run files."""
    return data_dir / "reports"


PUBLISHED_CONFIGS: tuple[str, ...] = ("documents", "queries", "synthetic_queries")
"""The configs of a published ConTEB dataset, in publishing order: chunks, queries, synthetic queries."""
PUBLISHED_QUARANTINE = "quarantine"
"""The folder of a published dataset holding each stage's quarantine table (``quarantine/<stage>-<hex>.parquet``,
written even when empty); not a config: ``datasets`` cannot load a table without rows, so the card names them apart."""
PUBLISHED_FOLDERS: tuple[str, ...] = (*PUBLISHED_CONFIGS, PUBLISHED_QUARANTINE)
"""Every folder of a published dataset whose files a card names (a file there that no card names is a leftover)."""

_SHARD_NAME = re.compile(r"^(?P<split>.+?)(?:-\d{5}-of-\d{5}.*)?\.parquet$")


def shard_split(path: Path) -> str:
    """The split a shard belongs to: ``<split>.parquet`` or ``<split>-NNNNN-of-NNNNN*.parquet`` (the hub's
    sharded names, with or without a suffix after the shard count); any other name: its stem."""
    match = _SHARD_NAME.match(path.name)
    return match["split"] if match else path.stem


def read_shards(files: list[Path]) -> pa.Table:
    """The Parquet ``files`` (at least one) as one table; columns missing from some files are null there."""
    if not files:
        raise ValueError("read_shards needs at least one file")
    tables = [pq.read_table(path) for path in files]
    return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]


def stage_dir(data_dir: Path, task: str) -> Path:
    """Folder of the intermediate stage tables of ``task``."""
    return data_dir / "stages" / task


def stage_table_path(data_dir: Path, task: str, table: str) -> Path:
    """The Parquet file of stage table ``table`` (an asset name such as ``source_documents``) of ``task``."""
    return stage_dir(data_dir, task) / f"{table}.parquet"


TEMPORARY_MARK = ".conteb-"  # in the names of our temporaries: ``.<target name>.conteb-<16 hex>.tmp``
STALE_TEMPORARY_SECONDS = 30 * 60  # a temporary of ours untouched this long is a killed write's leftover


def _temporary_name(target: Path) -> Path:
    return target.with_name(f".{target.name}{TEMPORARY_MARK}{secrets.token_hex(8)}.tmp")


def remove_stale_temporaries(folder: Path, older_than: float = STALE_TEMPORARY_SECONDS) -> list[Path]:
    """Delete our temporaries in ``folder`` not modified for ``older_than`` seconds; returns them.

    Only names of our own pattern are touched (a write in progress keeps its file fresh), so other
    programs' files and running writes are left alone.
    """
    cutoff = time.time() - older_than
    removed = []
    for path in folder.glob(f".*{TEMPORARY_MARK}*.tmp"):
        with contextlib.suppress(FileNotFoundError):  # another process may clean it up first
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
                removed.append(path)
    return removed


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it onto ``target`` only on success.

    A crash inside the block leaves ``target`` as it was (old content or absent), never half-written.
    The temporary is created like a normal ``open`` does (mode ``0o666`` less the umask), so the
    renamed file has the permissions of any other file the user writes. Temporaries that a killed
    process left in the folder are removed on the next write there (:func:`remove_stale_temporaries`).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target.parent)
    tmp = _temporary_name(target)
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_parquet_atomic(table: pa.Table, target: Path, compression: str = "snappy") -> Path:
    """Write ``table`` to ``target`` as Parquet, atomically; returns ``target``.

    Snappy (Parquet's default) for stage tables: faster to write than zstd (bench/BENCHMARKS.md, "Curation
    overhead"). Published datasets pass ``compression="zstd"`` for smaller downloads.
    """
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression=compression)
    return target


def write_bytes_atomic(data: bytes, target: Path) -> Path:
    """Write ``data`` to ``target`` atomically; returns ``target``."""
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)
    return target


def write_text_atomic(text: str, target: Path) -> Path:
    """Write UTF-8 ``text`` to ``target`` atomically; returns ``target``."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target
