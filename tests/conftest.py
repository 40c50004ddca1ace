"""Shared fixtures: project paths, the real corpora in ../shared/data, isolated data folders."""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
SAMPLE_DIR = ROOT / "data" / "sample"


@dataclass(frozen=True)
class SampleCounts:
    """What ``data/sample`` holds, counted with the project's own loader and chunker (its README, "Counts")."""

    documents: int
    chunks: int  # at 1000 characters, no overlap: the chunking of conteb.yaml's sample task
    queries: int

    def shard_size(self, shards: int) -> int:
        """Documents per shard for about ``shards`` shards of the sample: ``ceil(documents / shards)``."""
        return math.ceil(self.documents / shards)

    def shard_count(self, size: int) -> int:
        """How many shards of ``size`` documents the sample makes: ``ceil(documents / size)``."""
        return math.ceil(self.documents / size)


@cache
def sample_counts() -> SampleCounts:
    """The sample's counts, computed from its files, so that tests about something else do not hard-code them."""
    from conteb.config import ChunkingConfig
    from curation.chunking import chunk_documents
    from curation.sources.sample import load_sample

    source = load_sample(SAMPLE_DIR)
    chunks = chunk_documents(source.documents_table(), ChunkingConfig(chunk_size=1000, chunk_overlap=0)).chunks
    return SampleCounts(len(source.documents), chunks.num_rows, len(source.queries))


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (the real corpora); the test is skipped when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real corpora not available: {SHARED_DATA} is missing (see shared/data/MANIFEST.md)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes under its own tmp folder, never into the repository's data/."""
    data_dir = tmp_path / "data-out"
    monkeypatch.setenv("CONTEB_DATA_DIR", str(data_dir))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("CONTEB_CONFIG", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # offline unless a test points at its own server
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    (tmp_path / "dagster-home").mkdir()
    (tmp_path / "dagster-home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return data_dir


def write_squad(path: Path, articles: list[dict]) -> Path:
    """Write a SQuAD-format file (``.gz`` when the name says so)."""
    payload = json.dumps({"version": "1.1", "data": articles})
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(payload)
    else:
        path.write_text(payload, encoding="utf-8")
    return path


def squad_article(title: str | None, paragraphs: list[tuple[str, list[tuple[str, str, str, int]]]]) -> dict:
    """Article from ``[(context, [(qid, question, answer, answer_start), ...]), ...]``."""
    article = {
        "paragraphs": [
            {
                "context": context,
                "qas": [
                    {"id": qid, "question": q, "answers": [{"text": a, "answer_start": s}]} for qid, q, a, s in qas
                ],
            }
            for context, qas in paragraphs
        ]
    }
    if title is not None:
        article["title"] = title
    return article


def materialize_task(config_path: Path):
    """Every asset and dataset check of the first task of the registry at ``config_path``, materialized in process
    on an ephemeral instance with the definitions' resources: ``(result, checks)``; a failed step leaves
    ``result.success`` false instead of raising."""
    import dagster as dg

    from pipelines.definitions import build_definitions, task_assets
    from project.config import load_config

    config = load_config(config_path)
    assets, checks = task_assets(config.tasks[0])
    result = dg.materialize(
        [*assets, *checks],
        resources=build_definitions(config).resources,
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    return result, checks


def load_conteb(folder: Path, config: str, split: str = "test"):
    """``datasets.load_dataset(folder, config, split=split)`` with a cache private to the test.

    (``datasets`` reads ``HF_HOME`` once at import, so without this, tests would share a cache
    keyed partly by folder name and could read each other's splits.)
    """
    import datasets

    return datasets.load_dataset(str(folder), config, split=split, cache_dir=str(folder.parent / ".hf-cache"))
