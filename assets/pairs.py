"""Stage 2 assets: pair each query with the chunk(s) holding its answer (by answer span; by the LLM, sharded)."""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import dagster as dg
import pyarrow as pa

from assets.keys import group, key, out
from assets.llm_stage import StageRun
from assets.metadata import count_metadata, counts_in_words
from assets.sharded import (
    DRIVING,
    Context,
    Plan,
    Shard,
    ShardedStage,
    Split,
    by_documents,
    document_shards,
    merged_llm_metadata,
    quarantine_output,
    sharded_multi_asset,
)
from conteb.config import TaskConfig
from conteb.names import Stage, StageTable
from conteb.schemas import PAIRED_QUERIES as PAIRED_QUERIES_SCHEMA
from curation.llm_pairing import PROMPT_NAME, apply_llm_pairing, build_pairing_requests, pairing_agreement
from curation.pairing import PAIRING_METHODS
from curation.quarantine import QuarantineRecord, count_reasons, quarantine_table
from curation.shards import concat_in_order, positions, sum_counts
from llm.client import LLMClient
from llm.prompts import sent_prompt_tag


def build_pairs_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/paired_queries`` and ``[task]/pairing_quarantine``."""
    method = PAIRING_METHODS["span"]

    @dg.multi_asset(
        name=f"{task.dagster_name}__pairs",
        group_name=group(task, Stage.PAIRING),
        description="Pair queries with the chunks holding their answer spans; unmatched spans are quarantined.",
        ins={
            "queries": dg.AssetIn(key(task, StageTable.SOURCE_QUERIES)),
            "documents": dg.AssetIn(key(task, StageTable.SOURCE_DOCUMENTS)),
            "chunks": dg.AssetIn(key(task, StageTable.CHUNKS)),
        },
        outs={
            StageTable.PAIRED_QUERIES: out(
                task, StageTable.PAIRED_QUERIES, "Queries with their gold chunk_id and touched chunk_ids."
            ),
            StageTable.PAIRING_QUARANTINE: out(
                task, StageTable.PAIRING_QUARANTINE, "Queries and answers not paired, with reasons."
            ),
        },
    )
    def pairs(context: dg.AssetExecutionContext, queries: pa.Table, documents: pa.Table, chunks: pa.Table):
        result = method(queries, documents, chunks)
        quarantine = quarantine_table(result.quarantine)
        total = result.stats.get("queries", 0)
        paired = result.stats.get("paired", 0)
        others = {name: count for name, count in result.stats.items() if name not in ("queries", "paired")}
        context.log.info(
            f"{task.name}: paired {paired}/{total} queries by answer span; "
            f"{quarantine.num_rows} quarantine rows" + (f" ({counts_in_words(others)})" if others else "")
        )
        metadata = {
            **count_metadata("count", result.stats),
            "paired_fraction": round(paired / total, 4) if total else 0.0,
        }
        yield dg.Output(result.table(), StageTable.PAIRED_QUERIES, metadata=metadata)
        yield dg.Output(
            quarantine, StageTable.PAIRING_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return pairs


@dataclass(frozen=True)
class PairingShard:
    """One shard's LLM pairs (``PAIRED_QUERIES``), quarantine records, statistics and ``run_requests`` metadata."""

    table: pa.Table
    quarantine: list[QuarantineRecord]
    stats: dict[str, int]
    llm: dict[str, object]


def split_queries(tables: Mapping[str, pa.Table], size: int) -> Split:
    """Shards of the queries' documents, each with its queries, documents and chunks (column ``doc_id``); the
    span pairs (``pairing: both``) stay whole, for the agreement; rows ordered by query id."""
    queries = tables["queries"]
    sliced = {name: tables[name] for name in ("queries", "documents", "chunks")}
    shards = document_shards(queries, size, lambda doc_ids: by_documents(sliced, doc_ids))
    whole = {"span_pairs": tables["span_pairs"]} if "span_pairs" in tables else {}
    return Split(shards, {DRIVING: positions(queries.column("query_id").to_pylist())}, whole)


def build_llm_pairs_asset(task: TaskConfig, shard_documents: int) -> dg.AssetsDefinition:
    """``[task]/llm_paired_queries`` and ``[task]/llm_pairing_quarantine`` (LLM names the chunk), sharded by the
    queries' documents (``assets/sharded.py``): each request is one query with its document's chunks."""
    ins = {
        "queries": dg.AssetIn(key(task, StageTable.SOURCE_QUERIES)),
        "documents": dg.AssetIn(key(task, StageTable.SOURCE_DOCUMENTS)),
        "chunks": dg.AssetIn(key(task, StageTable.CHUNKS)),
    }
    if task.uses_span_pairing:  # pairing: both -> agreement with the span method
        ins["span_pairs"] = dg.AssetIn(key(task, StageTable.PAIRED_QUERIES))

    def work(context: Context, client: LLMClient | None, shard: Shard) -> PairingShard:
        assert client is not None  # an LLM-only stage: shards without an LLM do not run
        queries, documents, chunks = (shard.tables[name] for name in ("queries", "documents", "chunks"))
        run = StageRun(context, client, task, Stage.LLM_PAIRING)
        requests = build_pairing_requests(queries, documents, chunks)
        results = run.ask(requests)
        tag = sent_prompt_tag(requests, PROMPT_NAME)
        result = apply_llm_pairing(queries, documents, chunks, results, run.model, tag)
        return PairingShard(result.table(), result.quarantine, result.stats, run.metadata)

    def merge(
        context: Context, client: LLMClient | None, plan: Plan, shards: Sequence[PairingShard]
    ) -> Iterator[dg.Output]:
        assert client is not None
        order = plan.order[DRIVING]
        table = concat_in_order([s.table for s in shards], PAIRED_QUERIES_SCHEMA, "query_id", order)
        scope = f"{task.name}/{Stage.LLM_PAIRING}"
        metadata: dict[str, object] = {
            **merged_llm_metadata(client, scope, plan.started, [s.llm for s in shards]),
            **count_metadata("count", sum_counts(s.stats for s in shards)),
        }
        span_pairs = plan.whole.get("span_pairs")
        if span_pairs is not None:
            agreement = pairing_agreement(span_pairs, table)
            context.log.info(f"{task.name}: span/LLM pairing agreement {agreement}")
            metadata.update(
                {f"agreement/{k}": v for k, v in agreement.items() if k != "disagreements"}
                | {"agreement/disagreements": dg.MetadataValue.json(agreement["disagreements"])}
            )
        yield dg.Output(table, StageTable.LLM_PAIRED_QUERIES, metadata=metadata)
        yield quarantine_output(StageTable.LLM_PAIRING_QUARANTINE, [r for s in shards for r in s.quarantine], order)

    stage = ShardedStage(
        task=task,
        stage=Stage.LLM_PAIRING,
        name=f"{task.dagster_name}__llm_pairs",
        description="The LLM sees a document's numbered chunks and each query, and names the chunk(s) answering it.",
        ins=ins,
        outs={
            StageTable.LLM_PAIRED_QUERIES: out(task, StageTable.LLM_PAIRED_QUERIES, "Queries paired by the LLM."),
            StageTable.LLM_PAIRING_QUARANTINE: out(
                task, StageTable.LLM_PAIRING_QUARANTINE, "'none' and failed LLM answers, with reasons."
            ),
        },
        split=split_queries,
        work=work,
        merge=merge,
        not_run=((StageTable.LLM_PAIRED_QUERIES, PAIRED_QUERIES_SCHEMA), StageTable.LLM_PAIRING_QUARANTINE),
    )
    return sharded_multi_asset(stage, shard_documents)
