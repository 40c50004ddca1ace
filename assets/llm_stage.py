"""Running an LLM stage inside an asset: progress logs, the not-run message, cost metadata."""

import time
from collections.abc import Iterator, Sequence

import dagster as dg
import pyarrow as pa

from assets.resources import LLMResource
from conteb.config import TaskConfig
from curation.quarantine import quarantine_table
from curation.themes import llm_failure
from llm.client import LLMClient
from llm.types import LLMRequest, LLMResult

NOT_CONFIGURED = (
    "not run: no LLM configured. Set OPENAI_API_KEY (OpenAI) or llm.base_url in conteb.yaml / "
    "OPENAI_BASE_URL (any OpenAI-compatible server) to enable it."
)


def open_client(context: dg.AssetExecutionContext, llm: LLMResource) -> LLMClient:
    """The client, logging through Dagster (retries and batch progress appear in the run log)."""
    return llm.client(log=context.log.info)


def run_requests(
    context: dg.AssetExecutionContext,
    client: LLMClient,
    task: TaskConfig,
    stage: str,
    requests: Sequence[LLMRequest],
) -> tuple[dict[str, LLMResult], dict[str, object]]:
    """Answer ``requests`` under scope ``<task>/<stage>``; results by custom id, plus metadata.

    Metadata: request counts (cached, asked, failed, and among the failed the remembered failures
    that were not asked again), tokens and estimated dollars of this materialization, and the
    task's running total from the ledger.
    """
    scope = f"{task.name}/{stage}"
    started = time.time()
    step = max(1, len(requests) // 10)

    def progress(done: int, total: int) -> None:
        if done == total or done % step == 0:
            context.log.info(f"{scope}: {done}/{total} answers")

    results = client.run(requests, scope=scope, progress=progress)
    now = client.cache.usage(scope, since=started)
    total = client.cache.usage(f"{task.name}/")
    failed = [r for r in results if not r.ok]
    for result in failed[:10]:
        context.log.warning(f"{scope}: {result.custom_id} failed: {result.error}")
    if failed:
        context.log.warning(f"{scope}: {len(failed)} of {len(results)} requests failed (kept out, listed in metadata)")
    remembered = sum(r.remembered for r in results)
    if remembered:
        context.log.warning(
            f"{scope}: {remembered} of them failed validation in an earlier run with the same prompt, model and "
            f"settings and were not asked again; `conteb llm retry-failed --task {task.name} --stage {stage}` "
            "has the next run ask for them again"
        )
    metadata: dict[str, object] = {
        "llm/status": "ran",
        "llm/model": client.settings.model,
        "llm/mode": client.settings.mode,
        "llm/requests": len(results),
        "llm/cached": sum(r.cached for r in results),
        "llm/failed": len(failed),
        "llm/remembered_failures": remembered,
        "llm/calls": now.calls,
        "llm/prompt_tokens": now.prompt_tokens,
        "llm/completion_tokens": now.completion_tokens,
        "llm/cost_usd": now.cost_usd,
        "llm/task_cost_usd": total.cost_usd,
    }
    return {r.custom_id: r for r in results}, metadata


def not_run_metadata(context: dg.AssetExecutionContext, task: TaskConfig, stage: str) -> dict[str, object]:
    """Log and return the 'not run' status of an LLM-only stage."""
    context.log.warning(f"{task.name}/{stage}: {NOT_CONFIGURED}")
    return {"llm/status": NOT_CONFIGURED}


def skipped_outputs(
    context: dg.AssetExecutionContext, task: TaskConfig, stage: str, empty: dict[str, pa.Schema]
) -> Iterator[dg.Output]:
    """Empty outputs of an LLM-only stage that could not run, each carrying the 'not run' status."""
    metadata = not_run_metadata(context, task, stage)
    for name, schema in empty.items():
        yield dg.Output(schema.empty_table(), name, metadata=metadata)


def chunk_failures(
    stage: str, custom_id_prefix: str, failures: Sequence[tuple[str, str]], chunks: pa.Table, model: str
) -> pa.Table:
    """Quarantine table of ``(chunk_id, error)`` LLM failures of a per-chunk stage."""
    doc_of = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("doc_id").to_pylist(), strict=True))
    return quarantine_table(
        llm_failure(stage, "chunk", cid, doc_of[cid], f"{custom_id_prefix}{cid}", model, error)
        for cid, error in failures
    )
