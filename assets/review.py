"""Manual-verification gate: a review queue asset per (task, kind), the reviewed stage tables downstream of it, and
the sensor that asks for the downstream run once a task's queues are complete.

Dagster has no human-approval step; this is the gate. Waiting for a person is the normal state of this pipeline, not
a failure, so no check fails and no step fails: a reviewed table's output is not required (``is_required=False``),
and while its queue has pending items the step yields no materialization, only an observation of the table saying
what waits (``review_status: waiting for review``). Dagster then skips every step downstream of it, the run
succeeds, and nothing downstream used unreviewed LLM output; the sensor requests that downstream run once reviewers
are done (or the next ``make run`` does it).
"""

import dagster as dg
import pyarrow as pa

from assets.keys import group, key, out, review_queue
from assets.metadata import count_metadata, counts_in_words
from assets.resources import ReviewStoreResource
from conteb.config import TaskConfig
from conteb.names import ReviewKind, StageFamily, StageTable
from curation.lookups import document_titles
from curation.review_items import NO_PROPOSAL, review_items_from_llm_pairs, review_items_from_synthetic
from curation.reviewed import (
    Decision,
    FailedItem,
    PendingReviewError,
    apply_query_reviews,
    apply_reformulation_reviews,
)
from project.config import ProjectConfig
from review.gate import auto_accept, completion_key
from review.model import REVIEW_COMMAND, is_llm_failure

WAITING = "waiting for review"
"""``review_status`` of a queue's materialization, and of a reviewed table's observation, while items are pending
(:func:`waiting_observation`; what ``pipelines/run_outcome.py`` reads to tell a run that waits from one that
succeeded)."""
REVIEWED_OF_KIND = {
    ReviewKind.REFORMULATION: (StageTable.REFORMULATED_CHUNKS, StageTable.REVIEWED_CHUNKS),
    ReviewKind.SYNTHETIC_QUERY: (StageTable.SYNTHETIC_QUERIES, StageTable.REVIEWED_SYNTHETIC_QUERIES),
    ReviewKind.PAIRING: (StageTable.LLM_PAIRED_QUERIES, StageTable.REVIEWED_LLM_PAIRED_QUERIES),
}


def queue_inputs(task: TaskConfig, kind: str) -> dict[str, dg.AssetIn]:
    """What a queue of ``kind`` builds its items from."""
    if kind == ReviewKind.REFORMULATION:
        return {"items": dg.AssetIn(key(task, StageTable.REFORMULATION_REVIEW_ITEMS))}
    ins = {
        "documents": dg.AssetIn(key(task, StageTable.SOURCE_DOCUMENTS)),
        "chunks": dg.AssetIn(key(task, StageTable.CHUNKS)),
    }
    synthetic = kind == ReviewKind.SYNTHETIC_QUERY
    ins["stage"] = dg.AssetIn(key(task, StageTable.SYNTHETIC_QUERIES if synthetic else StageTable.LLM_PAIRED_QUERIES))
    # the stage's LLM failures reach a person too (curation/review_items.py)
    failures = StageTable.SYNTHETIC_QUARANTINE if synthetic else StageTable.LLM_PAIRING_QUARANTINE
    ins["failures"] = dg.AssetIn(key(task, failures))
    if not synthetic:
        ins["queries"] = dg.AssetIn(key(task, StageTable.SOURCE_QUERIES))
    if kind == ReviewKind.PAIRING and task.uses_span_pairing:
        ins["span_pairs"] = dg.AssetIn(key(task, StageTable.PAIRED_QUERIES))
    return ins


def queue_items(task: TaskConfig, kind: str, tables: dict[str, pa.Table]) -> pa.Table:
    """The ``REVIEW_ITEMS`` to push for ``kind``."""
    if kind == ReviewKind.REFORMULATION:
        return tables["items"]
    documents = tables["documents"]
    titles = document_titles(documents)
    if kind == ReviewKind.SYNTHETIC_QUERY:
        return review_items_from_synthetic(task.name, tables["stage"], tables["chunks"], titles, tables["failures"])
    return review_items_from_llm_pairs(
        task.name, tables["stage"], tables["chunks"], titles, tables.get("span_pairs"), tables["failures"],
        tables["queries"],
    )  # fmt: skip


def build_queue_asset(task: TaskConfig, kind: str) -> dg.AssetsDefinition:
    """``[task]/review_queue_<kind>``: pushes the items to the review store (idempotently)."""

    @dg.asset(
        key=key(task, review_queue(kind)),
        group_name=group(task, StageFamily.REVIEW),
        kinds={"sqlite"},
        description=f"Push {kind} items to the review queue; decisions already made are kept.",
        ins=queue_inputs(task, kind),
    )
    def queue(context: dg.AssetExecutionContext, review: ReviewStoreResource, **tables: pa.Table):
        store = review.store()
        items = queue_items(task, kind, tables)
        report = store.push(items)
        accepted = auto_accept(
            store,
            task.name,
            kind,
            items,
            unchanged=task.review.auto_accept_unchanged,
            methods=task.review.auto_accept_methods,
        )
        auto, by_method = accepted.unchanged, accepted.by_method
        if by_method:
            context.log.info(f"{task.name}/{kind}: {by_method} '{'/'.join(task.review.auto_accept_methods)}' "
                             "proposals accepted without review (review.auto_accept_methods)")  # fmt: skip
        [stats] = store.stats(task=task.name, kind=kind) or [None]
        pending = stats.pending if stats else 0
        url = review.queue_url(task.name, kind)
        state = WAITING if pending else "complete"
        context.log.info(
            f"{task.name}/{kind}: pushed {report.total} items ({report.added} new, {report.reopened} reopened, "
            f"{report.unchanged} unchanged); {auto} unchanged proposals auto-accepted; {pending} pending -> {url}"
        )
        if stats and stats.failed_pending:
            context.log.warning(
                f"{task.name}/{kind}: {stats.failed_pending} pending item(s) failed at the LLM (call failed or "
                "answer refused): never accepted automatically, they wait for a person"
            )
        metadata = {
            "review_status": state,
            "review_url": dg.MetadataValue.url(url),
            **count_metadata(
                "push", {"added": report.added, "reopened": report.reopened, "unchanged": report.unchanged}
            ),
            "auto_accepted": auto,
            "auto_accepted_by_method": by_method,
        }
        if stats:
            metadata |= count_metadata(
                "queue",
                {"pending": stats.pending, "accepted": stats.accepted, "rejected": stats.rejected,
                 "edited": stats.edited, "flagged_pending": stats.flagged_pending,
                 "failed_pending": stats.failed_pending, "revision": stats.revision},
            )  # fmt: skip
        return dg.MaterializeResult(metadata=metadata)

    return queue


def waiting_message(task: TaskConfig, kind: str, pending: int, url: str) -> str:
    """The one line a run stopped at ``task``'s ``kind`` queue logs (and its observation shows): not a failure, how
    many items wait, and the command that resolves them."""
    return (
        f"WAITING FOR REVIEW (not a failure): task '{task.name}': {pending} {kind} item(s) pending; decide them with "
        f"`{REVIEW_COMMAND}` ({url}), then rerun `make run` (nothing downstream of the queue runs until then)"
    )


def waiting_observation(asset_key: dg.AssetKey, pending: int, url: str) -> dg.AssetObservation:
    """What a reviewed table's step records instead of a materialization while its queue waits (the Dagster UI shows
    it on the asset's page; :mod:`pipelines.run_outcome` reads it)."""
    return dg.AssetObservation(
        asset_key=asset_key,
        metadata={
            "review_status": WAITING,
            "pending": pending,
            "review_command": REVIEW_COMMAND,
            "review_url": dg.MetadataValue.url(url),
        },
    )


def decisions(review: ReviewStoreResource, task: TaskConfig, kind: str) -> dict[str, Decision]:
    """``object_id -> Decision`` of a task's queue."""
    return {
        item.object_id: Decision(item.status, item.final_text, item.reviewer)
        for item in review.store().items(task=task.name, kind=kind)
    }


def failed_items(review: ReviewStoreResource, task: TaskConfig, kind: str) -> list[FailedItem]:
    """The queue's items that propose nothing because their LLM answer failed (``NO_PROPOSAL``)."""
    return [
        FailedItem(item.object_id, item.doc_id, item.context)
        for item in review.store().items(task=task.name, kind=kind)
        if item.method == NO_PROPOSAL and is_llm_failure(item.flags)
    ]


def build_reviewed_asset(task: TaskConfig, kind: str) -> dg.AssetsDefinition:
    """``reviewed_chunks`` / ``reviewed_synthetic_queries`` / ``reviewed_llm_paired_queries``."""
    source_name, reviewed_name = REVIEWED_OF_KIND[kind]

    @dg.multi_asset(
        name=f"{task.dagster_name}__{reviewed_name}",
        group_name=group(task, StageFamily.REVIEW),
        description=f"{source_name} after review: only accepted or edited {kind} output goes on.",
        ins={"table": dg.AssetIn(key(task, source_name))},
        deps=[key(task, review_queue(kind))],
        outs={
            # Not required: while the queue has pending items the step yields none, and Dagster skips what uses it.
            reviewed_name: out(
                task, reviewed_name, f"{source_name} with the reviewers' decisions applied.", required=False
            )
        },
    )
    def reviewed(context: dg.AssetExecutionContext, review: ReviewStoreResource, table: pa.Table):
        try:
            if kind == ReviewKind.REFORMULATION:
                result = apply_reformulation_reviews(table, decisions(review, task, kind))
            else:
                result = apply_query_reviews(
                    kind, table, decisions(review, task, kind), failed_items(review, task, kind)
                )
        except PendingReviewError as error:
            [stats] = review.store().stats(task=task.name, kind=kind) or [None]
            if stats is None or not stats.pending:  # an item with no queue entry at all: a defect, not a wait
                raise dg.Failure(description=f"task '{task.name}': {error}") from error
            url = review.queue_url(task.name, kind)
            context.log.info(waiting_message(task, kind, stats.pending, url))
            yield waiting_observation(key(task, reviewed_name), stats.pending, url)
            return
        context.log.info(f"{task.name}/{reviewed_name}: {counts_in_words(result.stats)}")
        yield dg.Output(result.table, reviewed_name, metadata=count_metadata("review", result.stats))

    return reviewed


def build_review_sensor(config: ProjectConfig) -> dg.SensorDefinition | None:
    """Requests the downstream run of a task once all its review queues are complete.

    Run key = task + each queue's revision, so it fires once per completion (and again only
    after new items or changed decisions complete the queue anew).
    """
    reviewed_tasks = [task for task in config.tasks if task.review_kinds]
    if not reviewed_tasks:
        return None
    downstream = {
        task.name: [key(task, REVIEWED_OF_KIND[kind][1]) for kind in task.review_kinds]
        + (
            [key(task, StageTable.ANSWERABILITY), key(task, StageTable.ANSWERABILITY_QUARANTINE)]
            if task.answerability is not False
            else []
        )
        + [key(task, StageTable.CONTEB_DATASET)]
        for task in reviewed_tasks
    }

    @dg.sensor(
        name="review_queue_sensor",
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        asset_selection=dg.AssetSelection.assets(*[k for keys in downstream.values() for k in keys]),
        description="When a task's review queues are complete, materialize what uses the reviewed output.",
    )
    def review_queue_sensor(context: dg.SensorEvaluationContext, review: ReviewStoreResource):
        stats = {(s.task, s.kind): s for s in review.store().stats()}
        for task in reviewed_tasks:
            # A queue never pushed has nothing to wait for; completion_key has the rest of the rule.
            queues = [q for q in (stats.get((task.name, kind)) for kind in task.review_kinds) if q is not None]
            run_key = completion_key(task.name, queues)
            if run_key is None:
                continue
            yield dg.RunRequest(run_key=run_key, asset_selection=downstream[task.name], tags={"conteb/task": task.name})

    return review_queue_sensor
