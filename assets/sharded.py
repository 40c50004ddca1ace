"""Sharded LLM stages, Dagster-native: one graph-backed multi-asset per stage, one op step per document shard.

The graph of a stage named ``<name>`` (``<task>__chunk_contexts``…: the multi-asset's name as before)::

    <name>__split ─ plan ──────────────────────────────────────────────────┐
          └─ shards: DynamicOutput s0000, s0001, … ─> <name>__shard[sNNNN] ─ collect ─> <name>__merge ─> asset outputs

* **split** reads the stage's inputs (the upstream stage tables, through the asset ins and the stage IO manager),
  cuts its documents into shards of ``execution.shard_documents`` (rules: ``curation/shards.py``) and yields one
  ``DynamicOutput`` per shard holding that shard's slice of each input table, so a shard step loads only its
  shard. Its ``plan`` output, for the merge, holds the driving table's row order, the time the stage started (its
  cost window) and what the merge needs whole (the span pairs of the agreement).
* **shard** (mapped; ``RetryPolicy(max_retries=2)``) asks the shard's LLM requests through
  ``StageRun``/``run_requests`` with a client opened from the ``LLMResource``, and returns the shard's tables,
  quarantine records and LLM metadata. Each answer is committed to ``answers.sqlite`` as it arrives, so a step
  re-run after a kill (a lost worker, a retry) asks only for the answers still missing.
* **merge** puts the shards back in the driving table's order (the tables an unsharded run builds, row for row),
  does what spans documents (the synthetic queries' duplicate filters, the span/LLM pairing agreement), and yields
  the asset outputs through the stage IO manager, with the metadata keys the stage always had.

Why this idiom. Dynamic mapping gives one step per shard with a stable, readable step key
(``<name>.<name>__shard[s0001]``): a distributed executor (Celery, Kubernetes) runs the steps on different
workers, the in-process executor runs them one after the other, and a lost step is retried alone. The graph is
behind the same multi-asset, so asset keys, output names, the review gates and every consumer are unchanged: the
shards are steps, not assets. Rejected: partitions by shard (each shard an asset partition: the partition set would
follow the corpus and need a sensor to register it, a build would become a backfill, and the review queues and the
dataset read whole tables), and one asset per shard (the asset graph would grow with the corpus).

Intermediate values (split -> shard -> merge) go through Dagster's default IO manager (``io_manager``: the
filesystem IO manager, pickling under the instance's storage folder ``$DAGSTER_HOME/storage/<run_id>/``): it
works across processes and across machines sharing the instance's storage, it is per run (a re-execution from
failure reuses the split's outputs) and leaves nothing in ``data/``; pyarrow tables pickle as Arrow buffers. A
Parquet IO manager was not chosen because a payload is several tables plus records and candidates; a deployment
without shared storage sets the ``io_manager`` resource (e.g. an object-store pickle IO manager) and the shards
follow it.

Memory. The split holds the stage's input tables (as the unsharded asset did), never its requests; a shard holds
its slices, its requests (prompts with document windows of up to 20,000 characters per chunk: the bulk of a
stage's memory) and their answers; the merge holds the stage's output tables (plus, for synthetic queries, the
texts of the chunks that got candidates, which the copy filter reads).

LLM metadata of the merged table: ``llm/status``, ``llm/model``, ``llm/mode`` as ``run_requests`` gives them; the
request counts (``llm/requests``, ``llm/cached``, ``llm/failed``, ``llm/remembered_failures``) summed over shards;
the ledger figures (``llm/calls``, tokens, ``llm/cost_usd``: any ``llm/<name>`` that is an attribute of
``llm.cache.UsageSummary``) read from the ledger for the stage's scope since the split started, not summed: shards
running at once on several workers each read the ledger over their own time window and would count each other's
calls. ``llm/task_cost_usd`` from the ledger, as before.
"""

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import dagster as dg
import pyarrow as pa

from assets.keys import group
from assets.llm_stage import not_run_metadata, open_client
from assets.metadata import count_metadata
from assets.retries import retried_op
from conteb.config import TaskConfig
from conteb.names import Stage
from conteb.schemas import QUARANTINE
from curation.quarantine import QuarantineRecord, count_reasons, quarantine_table
from curation.shards import items_in_order, plan_shards, positions, rows_in, shard_key
from llm.cache import UsageSummary
from llm.client import LLMClient

R = TypeVar("R")
Context = dg.OpExecutionContext
RATIO_DIGITS = 4  # a ledger ratio (llm/cached_share) is rounded as run_requests rounds it
DRIVING = "driving"
"""The key of :attr:`Plan.order` that orders the driving table's rows (by their key column)."""


@dataclass(frozen=True)
class Shard:
    """One shard's input: its index, its documents and its slice of each input table."""

    index: int
    doc_ids: tuple[str, ...]
    tables: dict[str, pa.Table]
    llm_available: bool  # whether the split found an LLM configured (every shard then uses it)

    @property
    def key(self) -> str:
        return shard_key(self.index)


@dataclass(frozen=True)
class Split:
    """What a stage's split function returns: the shards (documents, slices), the row orders, the whole tables."""

    shards: list[tuple[tuple[str, ...], dict[str, pa.Table]]]
    order: dict[str, dict[str, int]]
    whole: dict[str, pa.Table] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """From the split to the merge: when the stage started, whether an LLM is configured, orders, whole tables."""

    started: float
    llm_available: bool
    order: dict[str, dict[str, int]] = field(default_factory=dict)
    whole: dict[str, pa.Table] = field(default_factory=dict)


@dataclass(frozen=True)
class ShardOutcome(Generic[R]):
    """A shard step's output: the shard's index and what the stage's work returned (``None``: not run)."""

    index: int
    value: R | None


@dataclass(frozen=True)
class ShardedStage(Generic[R]):
    """A stage as a graph (see the module doc).

    ``split(tables, shard_documents)`` cuts the input tables (pure); ``work(context, client, shard)`` runs one
    shard (``client`` is ``None`` offline, for stages with a non-LLM fallback only); ``merge(context, client,
    plan, values)`` yields the asset outputs from the shards' values in shard order. ``needs_llm``: an LLM-only
    stage, whose outputs say "not run" without an LLM (``not_run``: the table output's name and schema, the
    quarantine output's name); else offline shards run the fallback.
    """

    task: TaskConfig
    stage: Stage  # names its logs and its "not run" status (``<task>/<stage>``)
    name: str  # the multi-asset's name as before sharding (``<task>__chunk_contexts``…); ops ``<name>__split``…
    description: str
    ins: Mapping[str, dg.AssetIn]
    outs: Mapping[str, dg.AssetOut]
    split: Callable[[Mapping[str, pa.Table], int], Split]
    work: Callable[[Context, LLMClient | None, Shard], R]
    merge: Callable[[Context, LLMClient | None, Plan, Sequence[R]], Iterator[dg.Output]]
    needs_llm: bool = True
    not_run: tuple[tuple[str, pa.Schema], str] | None = None

    @property
    def label(self) -> str:
        """``<task>/<stage>``: the stage's scope in the logs and the cost ledger."""
        return f"{self.task.name}/{self.stage}"


def document_shards(
    driving: pa.Table, size: int, slices: Callable[[tuple[str, ...]], dict[str, pa.Table]]
) -> list[tuple[tuple[str, ...], dict[str, pa.Table]]]:
    """The shards of ``driving``'s documents (its ``doc_id`` column, :func:`curation.shards.plan_shards`), each
    with the slices ``slices(doc_ids)`` gives."""
    return [(doc_ids, slices(doc_ids)) for doc_ids in plan_shards(driving.column("doc_id").to_pylist(), size)]


def by_documents(tables: Mapping[str, pa.Table], doc_ids: tuple[str, ...]) -> dict[str, pa.Table]:
    """Each of ``tables`` cut to the rows of ``doc_ids`` (column ``doc_id``)."""
    return {name: rows_in(table, "doc_id", doc_ids) for name, table in tables.items()}


def split_chunks(tables: Mapping[str, pa.Table], size: int) -> Split:
    """The split of a per-chunk stage: shards of the ``chunks`` table's documents, each with its slice of every
    input table (column ``doc_id``); the driving order is the chunks' (by ``chunk_id``)."""
    chunks = tables["chunks"]
    shards = document_shards(chunks, size, lambda doc_ids: by_documents(tables, doc_ids))
    return Split(shards, {DRIVING: positions(chunks.column("chunk_id").to_pylist())})


def merged_llm_metadata(
    client: LLMClient, scope: str, since: float, shards: Sequence[Mapping[str, object]]
) -> dict[str, object]:
    """The LLM metadata of a stage's materialization from its shards' ``run_requests`` metadata (rule in the
    module doc); ``scope`` is ``<task>/<stage>``, ``since`` when the stage started. ``{}`` without shards."""
    if not shards:
        return {}
    window = client.cache.usage(scope, since=since)
    task_total = client.cache.usage(f"{scope.split('/', 1)[0]}/")
    return merge_llm_metadata(shards, window, task_total)


def merge_llm_metadata(
    shards: Sequence[Mapping[str, object]], window: UsageSummary, task_total: UsageSummary
) -> dict[str, object]:
    """Pure part of :func:`merged_llm_metadata`: keys in the first shard's order; ``llm/task_cost_usd`` from
    ``task_total``; ``llm/<name>`` from ``window`` when ``name`` is a ``UsageSummary`` attribute (a ratio such as
    ``cached_share`` rounded to 4 digits, as ``run_requests`` rounds it); other numbers summed; other values
    (status, model, mode) from the first shard."""
    merged: dict[str, object] = {}
    for key, value in shards[0].items():
        name = key.removeprefix("llm/")
        if key == "llm/task_cost_usd":
            merged[key] = task_total.cost_usd
        elif key.startswith("llm/") and hasattr(window, name):
            ledger = getattr(window, name)
            merged[key] = round(ledger, RATIO_DIGITS) if isinstance(ledger, float) and name != "cost_usd" else ledger
        elif isinstance(value, int | float) and not isinstance(value, bool):
            merged[key] = sum(shard.get(key, 0) for shard in shards)  # type: ignore[misc]
        else:
            merged[key] = value
    return merged


def quarantine_output(
    name: str, records: Sequence[QuarantineRecord], order: Mapping[str, int] | None = None
) -> dg.Output:
    """The quarantine output ``name`` of ``records`` (sorted by ``object_id`` in ``order`` when given, else kept
    in their order), with counts by reason."""
    if order is not None:
        records = items_in_order(records, lambda record: record.object_id, order)
    table = quarantine_table(records)
    return dg.Output(table, name, metadata=count_metadata("quarantine", count_reasons(table)))


def not_run_outputs(context: Context, stage: ShardedStage[Any]) -> Iterator[dg.Output]:
    """An LLM-only stage without an LLM: empty outputs whose metadata says "not run", as before sharding."""
    assert stage.not_run is not None, f"{stage.name}: an LLM-only stage names its not-run outputs"
    (table_name, schema), quarantine_name = stage.not_run
    metadata = not_run_metadata(context, stage.task, stage.stage)
    yield dg.Output(schema.empty_table(), table_name, metadata=metadata)
    yield dg.Output(QUARANTINE.empty_table(), quarantine_name, metadata=metadata)


def sharded_multi_asset(stage: ShardedStage[Any], shard_documents: int) -> dg.AssetsDefinition:
    """The graph-backed multi-asset of ``stage`` (module doc), ``shard_documents`` documents per shard."""
    if shard_documents < 1:
        raise ValueError(f"{stage.name}: shard_documents must be at least 1, got {shard_documents}")

    @dg.op(
        name=f"{stage.name}__split",
        ins={name: dg.In(pa.Table) for name in stage.ins},
        out={"plan": dg.Out(), "shards": dg.DynamicOut()},
        required_resource_keys={"llm"},
        description=f"Cut {stage.label}'s documents into shards of at most {shard_documents}.",
    )
    def split_op(context: dg.OpExecutionContext, **tables: pa.Table):
        started = time.time()
        available = open_client(context, context.resources.llm).available
        if stage.needs_llm and not available:  # nothing to ask: one empty shard, the merge says "not run"
            yield dg.Output(Plan(started, False), "plan")
            yield dg.DynamicOutput(Shard(0, (), {}, False), mapping_key=shard_key(0), output_name="shards")
            return
        cut = stage.split(tables, shard_documents)
        documents = sum(len(doc_ids) for doc_ids, _ in cut.shards)
        context.log.info(
            f"{stage.label}: {documents} documents in {len(cut.shards)} shard(s) of at most {shard_documents}"
        )
        yield dg.Output(Plan(started, available, cut.order, cut.whole), "plan")
        for index, (doc_ids, slices) in enumerate(cut.shards):
            shard = Shard(index, doc_ids, slices, available)
            yield dg.DynamicOutput(shard, mapping_key=shard.key, output_name="shards")

    @retried_op(
        name=f"{stage.name}__shard",
        required_resource_keys={"llm"},
        description=f"{stage.label} on one shard of documents: its LLM requests (cached as they arrive).",
    )
    def shard_op(context: dg.OpExecutionContext, shard: Shard) -> ShardOutcome:
        if stage.needs_llm and not shard.llm_available:
            return ShardOutcome(shard.index, None)
        client: LLMClient | None = None
        if shard.llm_available:
            client = open_client(context, context.resources.llm)
            if not client.available:
                raise dg.Failure(
                    f"{stage.label} shard {shard.key}: an LLM was configured when the stage was split but not in "
                    "this step's process (set OPENAI_API_KEY / llm.base_url on every worker)",
                    allow_retries=False,
                )
        first, last = (shard.doc_ids[0], shard.doc_ids[-1]) if shard.doc_ids else ("-", "-")
        context.log.info(f"{stage.label} shard {shard.key}: {len(shard.doc_ids)} documents ({first} … {last})")
        return ShardOutcome(shard.index, stage.work(context, client, shard))

    @dg.op(
        name=f"{stage.name}__merge",
        out={name: dg.Out(io_manager_key=out.io_manager_key) for name, out in stage.outs.items()},
        required_resource_keys={"llm"},
        description=f"Concatenate {stage.label}'s shards in document order into its asset outputs.",
    )
    def merge_op(context: dg.OpExecutionContext, plan: Plan, outcomes: list[ShardOutcome]):
        if stage.needs_llm and not plan.llm_available:
            yield from not_run_outputs(context, stage)
            return
        values = [outcome.value for outcome in sorted(outcomes, key=lambda outcome: outcome.index)]
        client = open_client(context, context.resources.llm) if plan.llm_available else None
        yield from stage.merge(context, client, plan, values)

    def compose(**inputs: Any) -> dict[str, Any]:
        plan, shards = split_op(**inputs)
        outputs = merge_op(plan, shards.map(shard_op).collect())
        return {name: getattr(outputs, name) for name in stage.outs}

    compose.__doc__ = stage.description
    return dg.graph_multi_asset(
        name=stage.name, group_name=group(stage.task, stage.stage), ins=dict(stage.ins), outs=dict(stage.outs)
    )(compose)
