"""The published ConTEB dataset folder (Hugging Face layout) and its dataset card.

``<out>/documents/<split>-00000-of-00001.parquet`` and ``<out>/queries/...`` plus ``README.md``
whose YAML ``configs:`` section maps each config to its files, so that
``datasets.load_dataset(out, "documents", split=split)`` works offline, as the public ConTEB
evaluator loads it. Every file is written atomically; the card is written last.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import yaml

from conteb.config import TaskConfig
from conteb.schemas import CONTEB_DOCUMENTS, CONTEB_QUERIES, SYNTHETIC_QUERIES
from conteb.storage import write_parquet_atomic, write_text_atomic
from curation.quarantine import count_reasons

CONFIGS = ("documents", "queries", "synthetic_queries")


def conteb_documents(chunks: pa.Table, reformulated: pa.Table | None = None) -> pa.Table:
    """``CONTEB_DOCUMENTS`` from a ``CHUNKS`` table.

    ``chunk`` is ``og_chunk`` unless ``reformulated`` (``REFORMULATED_CHUNKS``) gives a rewrite
    for the chunk id; every chunk must then have a row there (a missing one is an error).
    """
    columns = {name: chunks.column("og_chunk" if name == "chunk" else name) for name in CONTEB_DOCUMENTS.names}
    if reformulated is not None:
        rewrites = dict(
            zip(reformulated.column("chunk_id").to_pylist(), reformulated.column("chunk").to_pylist(), strict=True)
        )
        missing = [cid for cid in chunks.column("chunk_id").to_pylist() if cid not in rewrites]
        if missing:
            raise ValueError(f"{len(missing)} chunks have no reformulation row, e.g. {missing[:3]}")
        columns["chunk"] = pa.array([rewrites[cid] for cid in chunks.column("chunk_id").to_pylist()], pa.string())
    return pa.Table.from_pydict(columns, schema=CONTEB_DOCUMENTS)


def data_file(config: str, split: str) -> str:
    """Relative path of a config's single Parquet shard, named as ``push_to_hub`` names it."""
    return f"{config}/{split}-00000-of-00001.parquet"


@dataclass
class DatasetCard:
    """What the card states: provenance, license, counts and the settings that produced it."""

    task: str
    split: str
    source: str
    source_kind: str
    license: str | None
    description: str | None
    counts: dict[str, int]
    settings: dict[str, object]
    quarantine: dict[str, dict[str, int]] = field(default_factory=dict)  # stage -> reason -> count
    configs: tuple[str, ...] = ("documents", "queries")
    empty_configs: tuple[str, ...] = ()  # configs with no rows, not published

    def _empty_note(self) -> str:
        if not self.empty_configs:
            return ""
        names = ", ".join(f"`{name}`" for name in self.empty_configs)
        return f"\n- **Not published** (no rows; `datasets` cannot load an empty split): {names}"

    def render(self) -> str:
        front = {
            "pretty_name": f"ConTEB {self.task}",
            "license": self.license or "unknown",
            "task_categories": ["text-retrieval"],
            "tags": ["conteb", "context-dependent-retrieval"],
            "configs": [
                {"config_name": name, "data_files": [{"split": self.split, "path": data_file(name, self.split)}]}
                for name in self.configs
            ],
        }
        counts = "\n".join(f"| {name} | {value:,} |" for name, value in self.counts.items())
        settings = "\n".join(f"| {name} | `{value}` |" for name, value in self.settings.items())
        quarantined = [
            f"| {stage} | {reason} | {count:,} |"
            for stage, reasons in self.quarantine.items()
            for reason, count in reasons.items()
        ]
        quarantine = (
            "| stage | reason | rows |\n|---|---|---|\n" + "\n".join(quarantined)
            if quarantined
            else "Nothing was quarantined."
        )
        return f"""---
{yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip()}
---

# ConTEB task `{self.task}`

{self.description or "A context-dependent retrieval task built by conteb-pipeline."}

- **Source**: `{self.source}` (kind `{self.source_kind}`)
- **License**: {self.license or "unknown (see the source)"}
- **Split**: `{self.split}`{self._empty_note()}

## Load it

```python
from datasets import load_dataset
documents = load_dataset("<this folder>", "documents", split="{self.split}")
queries = load_dataset("<this folder>", "queries", split="{self.split}")
```

## Counts

| what | rows |
|---|---|
{counts}

## How it was built

Documents were split with LangChain's `RecursiveCharacterTextSplitter`; each chunk keeps its
character span in its document (`char_start`, `char_end`), and `chunk_id` is
`{{doc_id}}_{{chunk_index}}`. Each query was paired with the chunk holding its answer span: the
gold `chunk_id` is the chunk containing the most characters of the answer (earliest on a tie), and
`chunk_ids` lists every chunk the answer touches. `chunk` is the text to embed; `og_chunk` the
original text (identical unless the task is reformulated).

| setting | value |
|---|---|
{settings}

## Quarantine

Rows refused by a stage, with their reasons (the full table with file, row and detail is in the
pipeline's `stages/{self.task}/` folder):

{quarantine}
"""


def write_conteb_dataset(
    out_dir: Path,
    documents: pa.Table,
    queries: pa.Table,
    card: DatasetCard,
    synthetic_queries: pa.Table | None = None,
) -> dict[str, Path]:
    """Write the dataset folder; removes shards of other splits, and configs no longer produced.

    Returns the written paths by config name (and ``card``).
    """
    tables = {"documents": documents.cast(CONTEB_DOCUMENTS), "queries": queries.cast(CONTEB_QUERIES)}
    if synthetic_queries is not None:
        tables["synthetic_queries"] = synthetic_queries.cast(SYNTHETIC_QUERIES)
    # `datasets` cannot load a split without rows ("corresponds to no data"): such configs are
    # left out of the folder and named in the card instead.
    card.empty_configs = tuple(name for name, table in tables.items() if table.num_rows == 0)
    tables = {name: table for name, table in tables.items() if table.num_rows > 0}
    card.configs = tuple(tables)
    written: dict[str, Path] = {}
    for name, table in tables.items():
        target = out_dir / data_file(name, card.split)
        write_parquet_atomic(table, target, compression="zstd")
        for stale in target.parent.glob("*.parquet"):
            if stale != target:
                stale.unlink()
        written[name] = target
    for name in set(CONFIGS) - set(tables):
        shutil.rmtree(out_dir / name, ignore_errors=True)
    written["card"] = write_text_atomic(card.render(), out_dir / "README.md")
    return written


@dataclass
class PublishedTask:
    paths: dict[str, Path]  # documents, queries, card
    documents: pa.Table
    counts: dict[str, int]
    quarantine: dict[str, dict[str, int]]


def publish_task(
    out_dir: Path,
    task: TaskConfig,
    source_label: str,
    chunks: pa.Table,
    queries: pa.Table,
    quarantines: dict[str, pa.Table],
    reformulated: pa.Table | None = None,
    synthetic_queries: pa.Table | None = None,
    settings: dict[str, object] | None = None,
) -> PublishedTask:
    """Write ``task``'s ConTEB folder from its stage tables; ``quarantines`` maps stage -> table.

    ``reformulated`` supplies the ``chunk`` text of reformulated tasks; ``synthetic_queries`` adds
    that config; ``settings`` adds rows to the card's settings table (e.g. the LLM model).
    """
    documents = conteb_documents(chunks, reformulated)
    quarantine = {stage: count_reasons(table) for stage, table in quarantines.items()}
    counts = {
        "documents": len(set(documents.column("doc_id").to_pylist())),
        "chunks": documents.num_rows,
        "queries": queries.num_rows,
    }
    if synthetic_queries is not None:
        counts["synthetic queries"] = synthetic_queries.num_rows
    if reformulated is not None:
        methods = reformulated.column("method").to_pylist()
        for method in sorted(set(methods)):
            counts[f"chunks reformulated by {method}"] = methods.count(method)
    counts["quarantined rows"] = sum(sum(reasons.values()) for reasons in quarantine.values())
    card = DatasetCard(
        task=task.name,
        split=task.split,
        source=source_label,
        source_kind=task.source.kind,
        license=task.license,
        description=task.description,
        counts=counts,
        settings={
            "splitter": "langchain RecursiveCharacterTextSplitter",
            "chunk_size": task.chunking.chunk_size,
            "chunk_overlap": task.chunking.chunk_overlap,
            "pairing": task.pairing,
            "reformulation": task.reformulation,
            "synthetic_queries_per_chunk": task.synthetic_queries,
            **(settings or {}),
        },
        quarantine=quarantine,
    )
    paths = write_conteb_dataset(out_dir, documents, queries, card, synthetic_queries)
    return PublishedTask(paths, documents, counts, quarantine)
