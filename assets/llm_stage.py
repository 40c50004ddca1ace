"""Running an LLM stage in a Dagster step: the client, the not-run status, progress logs, cost metadata.

A stage's shard step (``assets/sharded.py``) opens the client (:func:`open_client`) and asks the LLM through a
:class:`StageRun` (or :func:`run_requests` directly, for a stage with two passes such as reformulation), which
keeps that run's LLM metadata; when no LLM is configured the stage's outputs carry :func:`not_run_metadata`.
The helpers take an asset's or an op's context (they use its log only).
"""

import time
from collections.abc import Sequence

import dagster as dg

from assets.resources import LLMResource
from conteb.config import TaskConfig
from conteb.names import Stage
from llm.breaker import EndpointBroken
from llm.client import LLMClient
from llm.structured import StructuredOutputRefused
from llm.types import LLMRequest, LLMResult

NOT_CONFIGURED = (
    "not run: no LLM configured. Set OPENAI_API_KEY (OpenAI) or llm.base_url in conteb.yaml / "
    "OPENAI_BASE_URL (any OpenAI-compatible server) to enable it."
)
StageContext = dg.AssetExecutionContext | dg.OpExecutionContext
"""The context of an asset or of an op step (of a graph-backed asset): both have the run's ``log``."""


def open_client(context: StageContext, llm: LLMResource) -> LLMClient:
    """The client, logging through Dagster (retries and batch progress appear in the run log)."""
    return llm.client(log=context.log.info)


def run_requests(
    context: StageContext,
    client: LLMClient,
    task: TaskConfig,
    stage: Stage,
    requests: Sequence[LLMRequest],
) -> tuple[dict[str, LLMResult], dict[str, object]]:
    """Answer ``requests`` under scope ``<task>/<stage>``; results by custom id, plus metadata.

    Metadata: request counts (cached, asked, failed, and among the failed the remembered failures
    that were not asked again), tokens and estimated dollars of this materialization (``llm/cached_tokens``:
    prompt tokens the provider served from its prompt cache; ``llm/cached_share``: their share of the prompt
    tokens; ``llm/implausible_usage``: calls whose answer reported impossible token counts, recorded as 0), and the
    task's running total from the ledger.
    """
    scope = f"{task.name}/{stage}"
    started = time.time()
    step = max(1, len(requests) // 10)

    def progress(done: int, total: int) -> None:
        if done == total or done % step == 0:
            context.log.info(f"{scope}: {done}/{total} answers")

    try:
        results = client.run(requests, scope=scope, progress=progress)
    except (StructuredOutputRefused, EndpointBroken) as error:  # every request would fail alike: stop, in one line
        raise dg.Failure(description=f"{scope}: {error}") from None
    now = client.cache.usage(scope, since=started)
    total = client.cache.usage(f"{task.name}/")
    failed = [r for r in results if not r.ok]
    for result in failed[:10]:
        context.log.warning(f"{scope}: {result.custom_id} failed: {result.error}")
    if failed:
        context.log.warning(f"{scope}: {len(failed)} of {len(results)} requests failed (kept out, listed in metadata)")
    if now.implausible_usage:
        context.log.warning(
            f"{scope}: {now.implausible_usage} answers reported implausible token counts (kept, recorded as 0 tokens "
            "and $0): the dollars of this stage are a lower bound; check the provider's bill"
        )
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
        "llm/cached_tokens": now.cached_tokens,
        "llm/cached_share": round(now.cached_share, 4),
        "llm/completion_tokens": now.completion_tokens,
        "llm/cost_usd": now.cost_usd,
        "llm/implausible_usage": now.implausible_usage,
        "llm/task_cost_usd": total.cost_usd,
    }
    return {r.custom_id: r for r in results}, metadata


def not_run_metadata(context: StageContext, task: TaskConfig, stage: str) -> dict[str, object]:
    """Log and return the 'not run' status of an LLM stage (``stage``: its name, or a label built from it)."""
    context.log.warning(f"{task.name}/{stage}: {NOT_CONFIGURED}")
    return {"llm/status": NOT_CONFIGURED}


class StageRun:
    """One run of an LLM stage in a step (an asset, or a shard of one): :meth:`ask` answers its requests (scope
    ``<task>/<stage>``) and keeps that run's LLM metadata for the stage's table."""

    def __init__(self, context: StageContext, client: LLMClient, task: TaskConfig, stage: Stage) -> None:
        self.context = context
        self.client = client
        self.task = task
        self.stage = stage
        self.metadata: dict[str, object] = {}

    @property
    def model(self) -> str:
        """The configured model (the provenance of the rows and of their failures)."""
        return self.client.settings.model

    def ask(self, requests: Sequence[LLMRequest]) -> dict[str, LLMResult]:
        """The results of ``requests`` by custom id (see :func:`run_requests`)."""
        results, self.metadata = run_requests(self.context, self.client, self.task, self.stage, requests)
        return results
