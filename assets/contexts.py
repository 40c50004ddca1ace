"""Asset: a short LLM-written context per chunk (for the Anthropic-style contextual baseline), sharded by document.

Shards (``assets/sharded.py``): the chunks' documents; a shard gets its chunks and their documents (each request
is one chunk with its document window). The merge concatenates the contexts and failures in chunk order.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import dagster as dg
import pyarrow as pa

from assets.keys import key, out
from assets.llm_stage import StageRun
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
from conteb.schemas import CHUNK_CONTEXTS as SCHEMA
from curation.contextual import CUSTOM_ID_PREFIX, PROMPT_NAME, build_context_requests, contexts_table
from curation.llm_results import chunk_failures
from curation.quarantine import QuarantineRecord
from curation.shards import concat_in_order
from llm.client import LLMClient
from llm.prompts import sent_prompt_tag

STAGE = Stage.CHUNK_CONTEXTS


@dataclass(frozen=True)
class ContextsShard:
    """One shard's contexts (``CHUNK_CONTEXTS``), its failures and its ``run_requests`` metadata."""

    table: pa.Table
    quarantine: list[QuarantineRecord]
    llm: dict[str, object]


def build_contexts_asset(task: TaskConfig, shard_documents: int) -> dg.AssetsDefinition:
    """``[task]/chunk_contexts`` and ``[task]/context_quarantine``, stored beside the chunks."""

    def work(context: Context, client: LLMClient | None, shard: Shard) -> ContextsShard:
        assert client is not None  # an LLM-only stage: shards without an LLM do not run
        chunks, documents = shard.tables["chunks"], shard.tables["documents"]
        run = StageRun(context, client, task, STAGE)
        requests = build_context_requests(chunks, documents)
        results = run.ask(requests)
        table, failures = contexts_table(chunks, results, run.model, sent_prompt_tag(requests, PROMPT_NAME))
        return ContextsShard(table, chunk_failures(STAGE, CUSTOM_ID_PREFIX, failures, chunks, run.model), run.metadata)

    def merge(
        context: Context, client: LLMClient | None, plan: Plan, shards: Sequence[ContextsShard]
    ) -> Iterator[dg.Output]:
        assert client is not None
        order = plan.order[DRIVING]
        table = concat_in_order([s.table for s in shards], SCHEMA, "chunk_id", order)
        metadata = merged_llm_metadata(client, f"{task.name}/{STAGE}", plan.started, [s.llm for s in shards])
        yield dg.Output(table, StageTable.CHUNK_CONTEXTS, metadata=metadata)
        yield quarantine_output(StageTable.CONTEXT_QUARANTINE, [r for s in shards for r in s.quarantine], order)

    stage = ShardedStage(
        task=task,
        stage=STAGE,
        name=f"{task.dagster_name}__chunk_contexts",
        description="A short context situating each chunk in its document (contextual-retrieval baseline).",
        ins={
            "documents": dg.AssetIn(key(task, StageTable.SOURCE_DOCUMENTS)),
            "chunks": dg.AssetIn(key(task, StageTable.CHUNKS)),
        },
        outs={
            StageTable.CHUNK_CONTEXTS: out(task, StageTable.CHUNK_CONTEXTS, "chunk_id -> LLM-written context."),
            StageTable.CONTEXT_QUARANTINE: out(task, StageTable.CONTEXT_QUARANTINE, "Chunks whose LLM call failed."),
        },
        split=split_chunks,
        work=work,
        merge=merge,
        not_run=((StageTable.CHUNK_CONTEXTS, SCHEMA), StageTable.CONTEXT_QUARANTINE),
    )
    return sharded_multi_asset(stage, shard_documents)
