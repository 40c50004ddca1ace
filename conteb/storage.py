"""Where things live on disk, and atomic writes.

Layout under the data folder (``data/`` beside ``conteb.yaml``, or ``$CONTEB_DATA_DIR``)::

    conteb/<task>/          the published ConTEB dataset (Hugging Face layout, README card)
    stages/<task>/          intermediate stage tables (Parquet), one file per asset
    llm/answers.sqlite      paid LLM answers (cache) and the cost ledger
    review/review.sqlite    review queues: items, decisions, audit log
    models/<name>/          trained models (sentence-transformers folders)
    reports/                evaluation: results.json, reports, TREC run files (see evaluation/runner.py)
"""

from __future__ import annotations

import contextlib
import os
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


def stage_dir(data_dir: Path, task: str) -> Path:
    """Folder of the intermediate stage tables of ``task``."""
    return data_dir / "stages" / task


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

    Snappy (Parquet's default) for stage tables: 3x faster to write than zstd here. Published
    datasets pass ``compression="zstd"`` for smaller downloads.
    """
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression=compression)
    return target


def write_text_atomic(text: str, target: Path) -> Path:
    """Write UTF-8 ``text`` to ``target`` atomically; returns ``target``."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target
