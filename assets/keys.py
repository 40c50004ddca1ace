"""Asset keys of a task's stages (one place, so factories and checks agree)."""

from __future__ import annotations

import dagster as dg

from conteb.config import TaskConfig

SOURCE_DOCUMENTS = "source_documents"
SOURCE_QUERIES = "source_queries"
SOURCE_QUARANTINE = "source_quarantine"
CHUNKS = "chunks"
CHUNK_QUARANTINE = "chunk_quarantine"
PAIRED_QUERIES = "paired_queries"
PAIRING_QUARANTINE = "pairing_quarantine"
CONTEB_DATASET = "conteb_dataset"


def key(task: TaskConfig, name: str) -> dg.AssetKey:
    """``AssetKey([task.name, name])``."""
    return dg.AssetKey([task.name, name])


def out(task: TaskConfig, name: str, description: str) -> dg.AssetOut:
    """An ``AssetOut`` of a stage table stored by the stage IO manager."""
    return dg.AssetOut(
        key=key(task, name), description=description, io_manager_key="stage_io_manager", kinds={"python", "parquet"}
    )


LLM_PAIRED_QUERIES = "llm_paired_queries"
LLM_PAIRING_QUARANTINE = "llm_pairing_quarantine"
THEMES = "themes"
REFORMULATED_CHUNKS = "reformulated_chunks"
REFORMULATION_REVIEW_ITEMS = "reformulation_review_items"
REFORMULATION_QUARANTINE = "reformulation_quarantine"
SYNTHETIC_QUERIES = "synthetic_queries"
SYNTHETIC_QUARANTINE = "synthetic_quarantine"
CHUNK_CONTEXTS = "chunk_contexts"
CONTEXT_QUARANTINE = "context_quarantine"
ANSWERABILITY = "answerability"
ANSWERABILITY_QUARANTINE = "answerability_quarantine"


def queries_key(task: TaskConfig) -> str:
    """The paired-queries asset whose answers describe the task's chunks (span when it has one)."""
    return PAIRED_QUERIES if task.uses_span_pairing else LLM_PAIRED_QUERIES


REVIEWED_CHUNKS = "reviewed_chunks"
REVIEWED_SYNTHETIC_QUERIES = "reviewed_synthetic_queries"
REVIEWED_LLM_PAIRED_QUERIES = "reviewed_llm_paired_queries"


def review_queue(kind: str) -> str:
    """Asset name of a task's review queue of ``kind``."""
    return f"review_queue_{kind}"
