"""Augmentation asset: LLM-written synthetic queries per chunk, deduplicated and filtered."""

import dagster as dg
import pyarrow as pa

from assets.keys import CHUNKS, SOURCE_DOCUMENTS, SYNTHETIC_QUARANTINE, SYNTHETIC_QUERIES, key, out
from assets.llm_stage import chunk_failures, open_client, run_requests, skipped_outputs
from assets.metadata import count_metadata
from assets.resources import LLMResource
from conteb.config import TaskConfig
from conteb.schemas import QUARANTINE
from conteb.schemas import SYNTHETIC_QUERIES as SCHEMA
from curation.quarantine import count_reasons
from curation.synthetic_queries import (
    CUSTOM_ID_PREFIX,
    build_synthetic_requests,
    filter_synthetic,
    parse_synthetic_results,
    synthetic_queries_table,
    synthetic_stats,
)
from llm.prompts import load_prompt


def build_synthetic_queries_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/synthetic_queries`` and ``[task]/synthetic_quarantine``."""

    @dg.multi_asset(
        name=f"{task.dagster_name}__synthetic_queries",
        group_name=task.dagster_name,
        description=f"{task.synthetic_queries} LLM-written queries per chunk, deduplicated and filtered.",
        ins={"documents": dg.AssetIn(key(task, SOURCE_DOCUMENTS)), "chunks": dg.AssetIn(key(task, CHUNKS))},
        outs={
            SYNTHETIC_QUERIES: out(task, SYNTHETIC_QUERIES, "Synthetic queries with model and prompt version."),
            SYNTHETIC_QUARANTINE: out(task, SYNTHETIC_QUARANTINE, "Chunks whose LLM call failed."),
        },
    )
    def synthetic_queries(context: dg.AssetExecutionContext, llm: LLMResource, documents: pa.Table, chunks: pa.Table):
        client = open_client(context, llm)
        if not client.available:
            yield from skipped_outputs(
                context, task, "synthetic_queries", {SYNTHETIC_QUERIES: SCHEMA, SYNTHETIC_QUARANTINE: QUARANTINE}
            )
            return
        requests = build_synthetic_requests(chunks, documents, task.synthetic_queries)
        results, llm_meta = run_requests(context, client, task, "synthetic_queries", requests)
        candidates, failures = parse_synthetic_results(results, chunks)
        texts = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("og_chunk").to_pylist(), strict=True))
        kept, removed = filter_synthetic(candidates, texts)
        model, tag = client.settings.model, load_prompt("synthetic_queries").tag
        table = synthetic_queries_table(kept, chunks, documents, model, tag, f"llm:{model}")
        quarantine = chunk_failures("synthetic_queries", CUSTOM_ID_PREFIX, failures, chunks, model)
        context.log.info(
            f"{task.name}/synthetic_queries: {len(candidates)} written, {table.num_rows} kept; removed {removed}"
        )
        metadata = {
            **llm_meta,
            "count/candidates": len(candidates),
            **count_metadata("removed", removed),
            **count_metadata("count", synthetic_stats(table)),
        }
        yield dg.Output(table, SYNTHETIC_QUERIES, metadata=metadata)
        yield dg.Output(
            quarantine, SYNTHETIC_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return synthetic_queries
