"""Augmentation asset: LLM-written synthetic queries per chunk, deduplicated and filtered; sharded by document.

Shards (``assets/sharded.py``): the chunks' documents; a shard asks its chunks' requests and builds the rows of
every candidate it got (answer offsets need the shard's chunks and documents). The filters run once, in the
merge, over every candidate in chunk order: the duplicate filter compares a query with every query kept before
it in the task, so filtering shard by shard would keep a query another shard already has. The copy filter reads
the texts of the chunks with candidates, which the shards send along.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import dagster as dg
import pyarrow as pa

from assets.keys import key, out
from assets.llm_stage import StageRun
from assets.metadata import count_metadata, counts_in_words
from assets.sharded import (
    DRIVING,
    Context,
    Plan,
    Shard,
    ShardedStage,
    merged_llm_metadata,
    quarantine_output,
    sharded_multi_asset,
    split_chunks,
)
from conteb.config import TaskConfig
from conteb.names import Stage, StageTable
from conteb.schemas import SYNTHETIC_QUERIES as SCHEMA
from curation.llm_results import chunk_failures
from curation.lookups import chunk_texts
from curation.quarantine import QuarantineRecord
from curation.shards import concat_in_order, items_in_order
from curation.synthetic_queries import (
    CUSTOM_ID_PREFIX,
    PROMPT_NAME,
    Candidate,
    build_synthetic_requests,
    filter_synthetic,
    parse_synthetic_results,
    synthetic_queries_table,
    synthetic_stats,
)
from llm.client import LLMClient
from llm.prompts import sent_prompt_tag

STAGE = Stage.SYNTHETIC_QUERIES


@dataclass(frozen=True)
class SyntheticShard:
    """One shard's candidates (before the filters), their ``SYNTHETIC_QUERIES`` rows (same order), the texts of
    their chunks, the shard's failures and its ``run_requests`` metadata."""

    candidates: list[Candidate]
    rows: pa.Table
    texts: dict[str, str]
    quarantine: list[QuarantineRecord]
    llm: dict[str, object]


def build_synthetic_queries_asset(task: TaskConfig, shard_documents: int) -> dg.AssetsDefinition:
    """``[task]/synthetic_queries`` and ``[task]/synthetic_quarantine``."""

    def work(context: Context, client: LLMClient | None, shard: Shard) -> SyntheticShard:
        assert client is not None  # an LLM-only stage: shards without an LLM do not run
        chunks, documents = shard.tables["chunks"], shard.tables["documents"]
        run = StageRun(context, client, task, STAGE)
        requests = build_synthetic_requests(chunks, documents, task.synthetic_queries)
        results = run.ask(requests)
        candidates, failures = parse_synthetic_results(results, chunks)
        model, tag = run.model, sent_prompt_tag(requests, PROMPT_NAME)
        rows = synthetic_queries_table(candidates, chunks, documents, model, tag, f"llm:{model}")
        asked = {candidate.chunk_id for candidate in candidates}
        texts = {cid: text for cid, text in chunk_texts(chunks).items() if cid in asked}
        quarantine = chunk_failures(STAGE, CUSTOM_ID_PREFIX, failures, chunks, model)
        return SyntheticShard(candidates, rows, texts, quarantine, run.metadata)

    def merge(
        context: Context, client: LLMClient | None, plan: Plan, shards: Sequence[SyntheticShard]
    ) -> Iterator[dg.Output]:
        assert client is not None
        order = plan.order[DRIVING]
        candidates = items_in_order([c for s in shards for c in s.candidates], lambda c: c.chunk_id, order)
        kept, removed = filter_synthetic(candidates, {cid: text for s in shards for cid, text in s.texts.items()})
        rows = concat_in_order([s.rows for s in shards], SCHEMA, "chunk_id", order)
        kept_set = set(kept)  # rows and candidates are in the same order: one row per candidate
        table = rows.filter(pa.array([c in kept_set for c in candidates], pa.bool_())).combine_chunks()
        context.log.info(
            f"{task.name}/{STAGE}: {len(candidates)} written, {table.num_rows} kept; removed by filter: "
            f"{counts_in_words(removed)}"
        )
        metadata = {
            **merged_llm_metadata(client, f"{task.name}/{STAGE}", plan.started, [s.llm for s in shards]),
            "count/candidates": len(candidates),
            **count_metadata("removed", removed),
            **count_metadata("count", synthetic_stats(table)),
        }
        yield dg.Output(table, StageTable.SYNTHETIC_QUERIES, metadata=metadata)
        yield quarantine_output(StageTable.SYNTHETIC_QUARANTINE, [r for s in shards for r in s.quarantine], order)

    stage = ShardedStage(
        task=task,
        stage=STAGE,
        name=f"{task.dagster_name}__synthetic_queries",
        description=f"{task.synthetic_queries} LLM-written queries per chunk, deduplicated and filtered.",
        ins={
            "documents": dg.AssetIn(key(task, StageTable.SOURCE_DOCUMENTS)),
            "chunks": dg.AssetIn(key(task, StageTable.CHUNKS)),
        },
        outs={
            StageTable.SYNTHETIC_QUERIES: out(
                task, StageTable.SYNTHETIC_QUERIES, "Synthetic queries with model and prompt version."
            ),
            StageTable.SYNTHETIC_QUARANTINE: out(
                task, StageTable.SYNTHETIC_QUARANTINE, "Chunks whose LLM call failed."
            ),
        },
        split=split_chunks,
        work=work,
        merge=merge,
        not_run=((StageTable.SYNTHETIC_QUERIES, SCHEMA), StageTable.SYNTHETIC_QUARANTINE),
    )
    return sharded_multi_asset(stage, shard_documents)
