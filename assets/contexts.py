"""Asset: a short LLM-written context per chunk (for the Anthropic-style contextual baseline)."""

import dagster as dg
import pyarrow as pa

from assets.keys import CHUNK_CONTEXTS, CHUNKS, CONTEXT_QUARANTINE, SOURCE_DOCUMENTS, key, out
from assets.llm_stage import chunk_failures, open_client, run_requests, skipped_outputs
from assets.metadata import count_metadata
from assets.resources import LLMResource
from conteb.config import TaskConfig
from conteb.schemas import CHUNK_CONTEXTS as SCHEMA
from conteb.schemas import QUARANTINE
from curation.contextual import CUSTOM_ID_PREFIX, build_context_requests, contexts_table
from curation.quarantine import count_reasons
from llm.prompts import load_prompt


def build_contexts_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/chunk_contexts`` and ``[task]/context_quarantine``, stored beside the chunks."""

    @dg.multi_asset(
        name=f"{task.dagster_name}__chunk_contexts",
        group_name=task.dagster_name,
        description="A short context situating each chunk in its document (contextual-retrieval baseline).",
        ins={"documents": dg.AssetIn(key(task, SOURCE_DOCUMENTS)), "chunks": dg.AssetIn(key(task, CHUNKS))},
        outs={
            CHUNK_CONTEXTS: out(task, CHUNK_CONTEXTS, "chunk_id -> LLM-written context."),
            CONTEXT_QUARANTINE: out(task, CONTEXT_QUARANTINE, "Chunks whose LLM call failed."),
        },
    )
    def chunk_contexts(context: dg.AssetExecutionContext, llm: LLMResource, documents: pa.Table, chunks: pa.Table):
        client = open_client(context, llm)
        if not client.available:
            yield from skipped_outputs(
                context, task, "chunk_contexts", {CHUNK_CONTEXTS: SCHEMA, CONTEXT_QUARANTINE: QUARANTINE}
            )
            return
        results, llm_meta = run_requests(
            context, client, task, "chunk_contexts", build_context_requests(chunks, documents)
        )
        model = client.settings.model
        table, failures = contexts_table(chunks, results, model, load_prompt("chunk_context").tag)
        quarantine = chunk_failures("chunk_contexts", CUSTOM_ID_PREFIX, failures, chunks, model)
        yield dg.Output(table, CHUNK_CONTEXTS, metadata=llm_meta)
        yield dg.Output(
            quarantine, CONTEXT_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return chunk_contexts
