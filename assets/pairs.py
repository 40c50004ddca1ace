"""Stage 2 asset: pair each query with the chunk(s) holding its answer."""

import dagster as dg
import pyarrow as pa

from assets.keys import (
    CHUNKS,
    LLM_PAIRED_QUERIES,
    LLM_PAIRING_QUARANTINE,
    PAIRED_QUERIES,
    PAIRING_QUARANTINE,
    SOURCE_DOCUMENTS,
    SOURCE_QUERIES,
    key,
    out,
)
from assets.llm_stage import open_client, run_requests, skipped_outputs
from assets.metadata import count_metadata
from assets.resources import LLMResource
from conteb.config import TaskConfig
from conteb.schemas import PAIRED_QUERIES as PAIRED_QUERIES_SCHEMA
from conteb.schemas import QUARANTINE
from curation.llm_pairing import apply_llm_pairing, build_pairing_requests, pairing_agreement
from curation.pairing import PAIRING_METHODS
from curation.quarantine import count_reasons, quarantine_table
from llm.prompts import load_prompt


def build_pairs_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/paired_queries`` and ``[task]/pairing_quarantine``."""
    method = PAIRING_METHODS["span"]

    @dg.multi_asset(
        name=f"{task.dagster_name}__pairs",
        group_name=task.dagster_name,
        description="Pair queries with the chunks holding their answer spans; unmatched spans are quarantined.",
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
            f"{task.name}: paired {paired}/{total} queries by answer span; "
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


def build_llm_pairs_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/llm_paired_queries`` and ``[task]/llm_pairing_quarantine`` (LLM names the chunk)."""
    ins = {
        "queries": dg.AssetIn(key(task, SOURCE_QUERIES)),
        "documents": dg.AssetIn(key(task, SOURCE_DOCUMENTS)),
        "chunks": dg.AssetIn(key(task, CHUNKS)),
    }
    if task.uses_span_pairing:  # pairing: both -> agreement with the span method
        ins["span_pairs"] = dg.AssetIn(key(task, PAIRED_QUERIES))

    @dg.multi_asset(
        name=f"{task.dagster_name}__llm_pairs",
        group_name=task.dagster_name,
        description="The LLM sees a document's numbered chunks and each query, and names the chunk(s) answering it.",
        ins=ins,
        outs={
            LLM_PAIRED_QUERIES: out(task, LLM_PAIRED_QUERIES, "Queries paired by the LLM."),
            LLM_PAIRING_QUARANTINE: out(task, LLM_PAIRING_QUARANTINE, "'none' and failed LLM answers, with reasons."),
        },
    )
    def llm_pairs(context: dg.AssetExecutionContext, llm: LLMResource, queries: pa.Table, documents: pa.Table,
                  chunks: pa.Table, span_pairs: pa.Table | None = None):  # fmt: skip
        client = open_client(context, llm)
        if not client.available:
            yield from skipped_outputs(
                context,
                task,
                "llm_pairing",
                {LLM_PAIRED_QUERIES: PAIRED_QUERIES_SCHEMA, LLM_PAIRING_QUARANTINE: QUARANTINE},
            )
            return
        results, llm_meta = run_requests(
            context, client, task, "llm_pairing", build_pairing_requests(queries, documents, chunks)
        )
        result = apply_llm_pairing(
            queries, documents, chunks, results, client.settings.model, load_prompt("pairing").tag
        )
        table, quarantine = result.table(), quarantine_table(result.quarantine)
        metadata = {**llm_meta, **count_metadata("count", result.stats)}
        if span_pairs is not None:
            agreement = pairing_agreement(span_pairs, table)
            context.log.info(f"{task.name}: span/LLM pairing agreement {agreement}")
            metadata.update(
                {f"agreement/{k}": v for k, v in agreement.items() if k != "disagreements"}
                | {"agreement/disagreements": dg.MetadataValue.json(agreement["disagreements"])}
            )
        yield dg.Output(table, LLM_PAIRED_QUERIES, metadata=metadata)
        yield dg.Output(
            quarantine, LLM_PAIRING_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return llm_pairs
