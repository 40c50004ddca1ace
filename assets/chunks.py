"""Stage 1 asset: recursive 1000-character chunking with character spans."""

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from assets.keys import group, key, out
from assets.metadata import count_metadata
from conteb.config import TaskConfig
from conteb.names import Stage, StageTable
from curation.chunking import chunk_documents
from curation.quarantine import count_reasons, quarantine_table


def build_chunks_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/chunks`` and ``[task]/chunk_quarantine`` from ``[task]/source_documents``."""
    settings = task.chunking

    @dg.multi_asset(
        name=f"{task.dagster_name}__chunks",
        group_name=group(task, Stage.CHUNKING),
        description=(
            f"RecursiveCharacterTextSplitter, chunk_size={settings.chunk_size}, "
            f"chunk_overlap={settings.chunk_overlap}; empty documents are quarantined."
        ),
        ins={"documents": dg.AssetIn(key(task, StageTable.SOURCE_DOCUMENTS))},
        outs={
            StageTable.CHUNKS: out(
                task, StageTable.CHUNKS, "One row per chunk with its character span in the document."
            ),
            StageTable.CHUNK_QUARANTINE: out(task, StageTable.CHUNK_QUARANTINE, "Documents not chunked, with reasons."),
        },
    )
    def chunks(context: dg.AssetExecutionContext, documents: pa.Table):
        result = chunk_documents(documents, settings)
        quarantine = quarantine_table(result.quarantine)
        lengths = pc.utf8_length(result.chunks.column("og_chunk"))
        context.log.info(
            f"{task.name}: {result.stats['chunks']} chunks from {result.stats['documents_chunked']} documents, "
            f"{quarantine.num_rows} documents quarantined"
        )
        length_stats = {}
        if result.chunks.num_rows:
            length_stats = {
                "chunk_chars/mean": round(float(pc.mean(lengths).as_py()), 1),
                "chunk_chars/max": int(pc.max(lengths).as_py()),
            }
        yield dg.Output(
            result.chunks, StageTable.CHUNKS, metadata={**count_metadata("count", result.stats), **length_stats}
        )
        yield dg.Output(
            quarantine, StageTable.CHUNK_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return chunks
