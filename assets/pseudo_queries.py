"""Augmentation asset: offline pseudo-queries (inverse cloze) for the documents of a task's training split.

``[task]/pseudo_queries``, ``[task]/pseudo_sentences`` (every sentence considered, with its outcome) and
``[task]/pseudo_quarantine``; the rules are in ``curation/pseudo_queries.py``. The published folder adds the
queries to its training split and cuts their sentences out of that split's ``chunk`` texts.
"""

import dagster as dg
import pyarrow as pa

from assets.keys import group, key, out
from assets.metadata import count_metadata, markdown_preview
from conteb.config import TaskConfig
from conteb.names import Stage, StageTable
from curation.pseudo_queries import build_pseudo_queries, pseudo_documents
from curation.quarantine import count_reasons, quarantine_table


def build_pseudo_queries_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/pseudo_queries``, ``[task]/pseudo_sentences`` and ``[task]/pseudo_quarantine``."""
    settings = task.pseudo_queries
    assert settings is not None, f"task '{task.name}' declares no pseudo_queries"
    ins = {
        "documents": dg.AssetIn(key(task, StageTable.SOURCE_DOCUMENTS)),
        "chunks": dg.AssetIn(key(task, StageTable.CHUNKS)),
    }
    if task.uses_span_pairing:  # a removed sentence must not take a real query's answer with it
        ins["answers"] = dg.AssetIn(key(task, StageTable.PAIRED_QUERIES))

    @dg.multi_asset(
        name=f"{task.dagster_name}__pseudo_queries",
        group_name=group(task, Stage.PSEUDO_QUERIES),
        description=(
            f"Inverse-cloze pseudo-queries for the documents of split '{settings.split}': up to "
            f"{settings.per_document} per document, {settings.per_chunk} per chunk, seed {settings.seed}."
        ),
        ins=ins,
        outs={
            StageTable.PSEUDO_QUERIES: out(
                task, StageTable.PSEUDO_QUERIES, "A sentence of a later chunk with the subject made explicit."
            ),
            StageTable.PSEUDO_SENTENCES: out(
                task, StageTable.PSEUDO_SENTENCES, "Every sentence of the split's documents and what became of it."
            ),
            StageTable.PSEUDO_QUARANTINE: out(
                task, StageTable.PSEUDO_QUARANTINE, "Documents whose title does not match title_pattern."
            ),
        },
    )
    def pseudo_queries(context: dg.AssetExecutionContext, documents: pa.Table, chunks: pa.Table, **answers: pa.Table):
        doc_ids = pseudo_documents(task, chunks)
        result = build_pseudo_queries(documents, chunks, doc_ids, settings, answers.get("answers"))
        stats = result.stats
        quarantine = quarantine_table(result.quarantine)
        context.log.info(
            f"{task.name}: {stats['pseudo_queries']} pseudo-queries from {stats['sentences']} sentences of "
            f"{stats['documents']} documents of split '{settings.split}' ({stats['documents_quarantined']} quarantined)"
        )
        for record in result.quarantine:
            context.log.warning(f"{task.name}: {record.doc_id}: {record.detail}")
        yield dg.Output(
            result.queries,
            StageTable.PSEUDO_QUERIES,
            metadata={
                **count_metadata("count", stats),
                "split": settings.split,
                "queries/preview": dg.MetadataValue.md(markdown_preview(result.queries.select(["query", "chunk_id"]))),
            },
        )
        yield dg.Output(result.sentences, StageTable.PSEUDO_SENTENCES, metadata=count_metadata("count", stats))
        yield dg.Output(
            quarantine, StageTable.PSEUDO_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return pseudo_queries
