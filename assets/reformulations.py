"""Stage 3 asset: themes and reformulated chunks (LLM, or the labelled masking fallback), with review items for
the manual-verification queue; sharded by document (``assets/sharded.py``).

A shard holds whole documents: their chunks, their source rows and the paired queries of their chunks, so one
shard step does both passes for its documents (theme extraction on each document's opening, then the rewrite of
every later chunk with its document's theme). Offline the shards run the masking fallback; the outputs are the
same as an unsharded run's (themes, rewrites, leak flags and review items are all per document).
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from assets.keys import key, out, queries_key
from assets.llm_stage import not_run_metadata, run_requests
from assets.metadata import count_metadata
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
from conteb.schemas import REFORMULATED_CHUNKS, REVIEW_ITEMS, THEMES
from curation.lookups import document_titles
from curation.quarantine import QuarantineRecord
from curation.reformulation import PROMPT_NAME as REFORMULATION
from curation.reformulation import apply_reformulations, build_reformulation_requests, describe_stats
from curation.review_items import review_items_from_reformulations
from curation.shards import concat_in_order, items_in_order, positions, rows_in, sum_counts
from curation.themes.naming import OFFLINE_METHODS
from curation.themes.stage import PROMPT_NAME as THEME
from curation.themes.stage import build_theme_requests, themes_table
from llm.client import LLMClient
from llm.prompts import sent_prompt_tag

FALLBACK = "mask: no LLM configured, so theme mentions were masked (a deterministic non-LLM method)"
DOCUMENT_ORDER = "documents"
"""The key of ``Plan.order`` ordering the themes and their failures (by ``doc_id``, the source documents' order)."""


def answers_by_chunk(queries: pa.Table) -> dict[str, list[str]]:
    """``chunk_id -> answers`` of the paired queries (to detect answers lost by a rewrite)."""
    grouped: dict[str, list[str]] = {}
    for chunk_id, answer in zip(
        queries.column("chunk_id").to_pylist(), queries.column("answer").to_pylist(), strict=True
    ):
        if answer:
            grouped.setdefault(chunk_id, []).append(answer)
    return grouped


@dataclass(frozen=True)
class ReformulationShard:
    """One shard's themes, rewrites and review items, the theme and rewrite failures, the rewrite statistics and
    the ``run_requests`` metadata of both passes (empty offline)."""

    themes: pa.Table
    reformulated: pa.Table
    items: pa.Table
    theme_failures: list[QuarantineRecord]
    failures: list[QuarantineRecord]
    stats: dict[str, int]
    llm: dict[str, dict[str, object]]


def split_documents(tables: Mapping[str, pa.Table], size: int) -> Split:
    """Shards of the chunks' documents, each with its chunks and documents (column ``doc_id``) and the paired
    queries of its chunks (column ``chunk_id``); rewrites ordered by chunk id, themes by the documents' order."""
    chunks = tables["chunks"]

    def slices(doc_ids: tuple[str, ...]) -> dict[str, pa.Table]:
        shard = by_documents({name: tables[name] for name in ("chunks", "documents")}, doc_ids)
        shard["queries"] = rows_in(tables["queries"], "chunk_id", shard["chunks"].column("chunk_id").to_pylist())
        return shard

    order = {
        DRIVING: positions(chunks.column("chunk_id").to_pylist()),
        DOCUMENT_ORDER: positions(tables["documents"].column("doc_id").to_pylist()),
    }
    return Split(document_shards(chunks, size, slices), order)


def build_reformulation_asset(task: TaskConfig, shard_documents: int) -> dg.AssetsDefinition:
    """``themes``, ``reformulated_chunks``, ``reformulation_review_items``, ``reformulation_quarantine``."""

    def work(context: Context, client: LLMClient | None, shard: Shard) -> ReformulationShard:
        documents, chunks, queries = (shard.tables[name] for name in ("documents", "chunks", "queries"))
        first_chunks = {
            doc_id: text
            for doc_id, index, text in zip(
                *(chunks.column(c).to_pylist() for c in ("doc_id", "chunk_index", "og_chunk")), strict=True
            )
            if index == 0
        }
        chunked = documents.filter(pc.is_in(documents.column("doc_id"), pa.array(list(first_chunks), pa.string())))
        llm: dict[str, dict[str, object]] = {}
        if client is not None:
            theme_requests = build_theme_requests(chunked, first_chunks)
            theme_results, llm[Stage.THEMES] = run_requests(context, client, task, Stage.THEMES, theme_requests)
            themes, theme_failures = themes_table(
                chunked, theme_results, client.settings.model, first_chunks, sent_prompt_tag(theme_requests, THEME)
            )
            requests = build_reformulation_requests(chunks, themes)
            results, llm[Stage.REFORMULATION] = run_requests(context, client, task, Stage.REFORMULATION, requests)
            failed_themes = {record.object_id: record.detail for record in theme_failures}
            tag = sent_prompt_tag(requests, REFORMULATION)
            output = apply_reformulations(
                chunks, themes, answers_by_chunk(queries), results, client.settings.model, tag, failed_themes
            )
        else:
            themes, theme_failures = themes_table(chunked, None, None, first_chunks)
            output = apply_reformulations(chunks, themes, answers_by_chunk(queries), None, None, None)
        items = review_items_from_reformulations(task.name, output.table, chunks, document_titles(documents), queries)
        return ReformulationShard(themes, output.table, items, theme_failures, output.failures, output.stats, llm)

    def merge(
        context: Context, client: LLMClient | None, plan: Plan, shards: Sequence[ReformulationShard]
    ) -> Iterator[dg.Output]:
        by_chunk, by_document = plan.order[DRIVING], plan.order[DOCUMENT_ORDER]
        themes = concat_in_order([s.themes for s in shards], THEMES, "doc_id", by_document)
        table = concat_in_order([s.reformulated for s in shards], REFORMULATED_CHUNKS, "chunk_id", by_chunk)
        items = concat_in_order([s.items for s in shards], REVIEW_ITEMS, "object_id", by_chunk)
        stats = sum_counts(s.stats for s in shards)
        if client is not None:
            theme_meta, llm_meta = (
                merged_llm_metadata(client, f"{task.name}/{stage}", plan.started, [s.llm[stage] for s in shards])
                for stage in (Stage.THEMES, Stage.REFORMULATION)
            )
            status = {"method": "llm", **{f"themes/{k}": v for k, v in theme_meta.items()}, **llm_meta}
        else:
            context.log.warning(f"{task.name}/{Stage.REFORMULATION}: {FALLBACK}")
            status = {"method": FALLBACK, **not_run_metadata(context, task, f"{Stage.REFORMULATION} (LLM)")}
        context.log.info(f"{task.name}/{Stage.REFORMULATION}: {describe_stats(stats)}; {items.num_rows} review items")
        methods = themes.column("method").to_pylist()
        yield dg.Output(
            themes,
            StageTable.THEMES,
            metadata={f"count/{method}": methods.count(method) for method in ("llm", *OFFLINE_METHODS)},
        )
        yield dg.Output(table, StageTable.REFORMULATED_CHUNKS, metadata={**status, **count_metadata("count", stats)})
        yield dg.Output(
            items,
            StageTable.REFORMULATION_REVIEW_ITEMS,
            metadata={"count/flagged": sum(items.column("flagged").to_pylist())},
        )
        # theme failures first (in document order), then rewrite failures (in chunk order), as an unsharded run
        records = [
            *items_in_order([r for s in shards for r in s.theme_failures], lambda r: r.object_id, by_document),
            *items_in_order([r for s in shards for r in s.failures], lambda r: r.object_id, by_chunk),
        ]
        yield quarantine_output(StageTable.REFORMULATION_QUARANTINE, records)

    stage = ShardedStage(
        task=task,
        stage=Stage.REFORMULATION,
        name=f"{task.dagster_name}__reformulation",
        description=(
            "Rewrite every chunk but each document's first so it no longer names the document's theme "
            "(LLM; offline: labelled masking). Flags leaks and lost answers; every rewrite becomes a review item."
        ),
        ins={
            "documents": dg.AssetIn(key(task, StageTable.SOURCE_DOCUMENTS)),
            "chunks": dg.AssetIn(key(task, StageTable.CHUNKS)),
            "queries": dg.AssetIn(key(task, queries_key(task))),
        },
        outs={
            StageTable.THEMES: out(
                task,
                StageTable.THEMES,
                "Each document's theme and aliases (LLM; offline: an informative title, else the head's main name).",
            ),
            StageTable.REFORMULATED_CHUNKS: out(
                task, StageTable.REFORMULATED_CHUNKS, "Original and rewritten chunk text, leak flags."
            ),
            StageTable.REFORMULATION_REVIEW_ITEMS: out(
                task, StageTable.REFORMULATION_REVIEW_ITEMS, "Rewrites awaiting human review."
            ),
            StageTable.REFORMULATION_QUARANTINE: out(
                task, StageTable.REFORMULATION_QUARANTINE, "LLM failures (kept as original text)."
            ),
        },
        split=split_documents,
        work=work,
        merge=merge,
        needs_llm=False,
    )
    return sharded_multi_asset(stage, shard_documents)
