"""Stage 2 asset: pair each query with the chunk(s) holding its answer."""

import dagster as dg
import pyarrow as pa

from assets.keys import CHUNKS, PAIRED_QUERIES, PAIRING_QUARANTINE, SOURCE_DOCUMENTS, SOURCE_QUERIES, key, out
from conteb.config import TaskConfig
from curation.pairing import PAIRING_METHODS
from curation.quarantine import count_reasons, quarantine_table
from pipelines.metadata import count_metadata


def build_pairs_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/paired_queries`` and ``[task]/pairing_quarantine``."""
    method = PAIRING_METHODS[task.pairing]

    @dg.multi_asset(
        name=f"{task.dagster_name}__pairs",
        group_name=task.dagster_name,
        description=f"Pair queries with chunks ({task.pairing} method); unmatched spans are quarantined.",
        ins={
            "queries": dg.AssetIn(key(task, SOURCE_QUERIES)),
            "documents": dg.AssetIn(key(task, SOURCE_DOCUMENTS)),
            "chunks": dg.AssetIn(key(task, CHUNKS)),
        },
        outs={
            PAIRED_QUERIES: out(task, PAIRED_QUERIES, "Queries with their gold chunk_id and touched chunk_ids."),
            PAIRING_QUARANTINE: out(task, PAIRING_QUARANTINE, "Queries and answers not paired, with reasons."),
        },
    )
    def pairs(context: dg.AssetExecutionContext, queries: pa.Table, documents: pa.Table, chunks: pa.Table):
        result = method(queries, documents, chunks)
        quarantine = quarantine_table(result.quarantine)
        total = result.stats.get("queries", 0)
        paired = result.stats.get("paired", 0)
        context.log.info(
            f"{task.name}: paired {paired}/{total} queries ({task.pairing}); "
            f"{quarantine.num_rows} quarantine rows; {result.stats}"
        )
        metadata = {
            **count_metadata("count", result.stats),
            "paired_fraction": round(paired / total, 4) if total else 0.0,
        }
        yield dg.Output(result.table(), PAIRED_QUERIES, metadata=metadata)
        yield dg.Output(
            quarantine, PAIRING_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return pairs
