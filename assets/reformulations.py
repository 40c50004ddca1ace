"""Stage 3 asset: themes and reformulated chunks (LLM, or the labelled masking fallback),
with review items for the manual-verification queue."""

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from assets.keys import (
    CHUNKS,
    REFORMULATED_CHUNKS,
    REFORMULATION_QUARANTINE,
    REFORMULATION_REVIEW_ITEMS,
    SOURCE_DOCUMENTS,
    THEMES,
    key,
    out,
    queries_key,
)
from assets.llm_stage import not_run_metadata, open_client, run_requests
from assets.metadata import count_metadata
from assets.resources import LLMResource
from conteb.config import TaskConfig
from curation.quarantine import count_reasons, quarantine_table
from curation.reformulation import apply_reformulations, build_reformulation_requests
from curation.review_items import review_items_from_reformulations
from curation.themes import build_theme_requests, themes_table

FALLBACK = "mask: no LLM configured, so theme mentions were masked (a deterministic non-LLM method)"


def answers_by_chunk(queries: pa.Table) -> dict[str, list[str]]:
    """``chunk_id -> answers`` of the paired queries (to detect answers lost by a rewrite)."""
    grouped: dict[str, list[str]] = {}
    for chunk_id, answer in zip(
        queries.column("chunk_id").to_pylist(), queries.column("answer").to_pylist(), strict=True
    ):
        if answer:
            grouped.setdefault(chunk_id, []).append(answer)
    return grouped


def build_reformulation_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``themes``, ``reformulated_chunks``, ``reformulation_review_items``, ``reformulation_quarantine``."""

    @dg.multi_asset(
        name=f"{task.dagster_name}__reformulation",
        group_name=task.dagster_name,
        description=(
            "Rewrite every chunk but each document's first so it no longer names the document's theme "
            "(LLM; offline: labelled masking). Flags leaks and lost answers; every rewrite becomes a review item."
        ),
        ins={
            "documents": dg.AssetIn(key(task, SOURCE_DOCUMENTS)),
            "chunks": dg.AssetIn(key(task, CHUNKS)),
            "queries": dg.AssetIn(key(task, queries_key(task))),
        },
        outs={
            THEMES: out(task, THEMES, "Each document's theme and aliases (LLM, or from the title)."),
            REFORMULATED_CHUNKS: out(task, REFORMULATED_CHUNKS, "Original and rewritten chunk text, leak flags."),
            REFORMULATION_REVIEW_ITEMS: out(task, REFORMULATION_REVIEW_ITEMS, "Rewrites awaiting human review."),
            REFORMULATION_QUARANTINE: out(task, REFORMULATION_QUARANTINE, "LLM failures (kept as original text)."),
        },
    )
    def reformulation(
        context: dg.AssetExecutionContext, llm: LLMResource, documents: pa.Table, chunks: pa.Table, queries: pa.Table
    ):
        client = open_client(context, llm)
        first_chunks = {
            doc_id: text
            for doc_id, index, text in zip(
                *(chunks.column(c).to_pylist() for c in ("doc_id", "chunk_index", "og_chunk")), strict=True
            )
            if index == 0
        }
        chunked = documents.filter(pc.is_in(documents.column("doc_id"), pa.array(list(first_chunks))))
        if client.available:
            theme_results, theme_meta = run_requests(
                context, client, task, "themes", build_theme_requests(chunked, first_chunks)
            )
            themes, failures = themes_table(chunked, theme_results, client.settings.model)
            results, llm_meta = run_requests(
                context, client, task, "reformulation", build_reformulation_requests(chunks, themes)
            )
            output = apply_reformulations(
                chunks, themes, answers_by_chunk(queries), results, client.settings.model, None
            )
            status = {"method": "llm", **{f"themes/{k}": v for k, v in theme_meta.items()}, **llm_meta}
        else:
            themes, failures = themes_table(chunked, None, None)
            output = apply_reformulations(chunks, themes, answers_by_chunk(queries), None, None, None)
            context.log.warning(f"{task.name}/reformulation: {FALLBACK}")
            status = {"method": FALLBACK, **not_run_metadata(context, task, "reformulation (LLM)")}
        titles = dict(zip(documents.column("doc_id").to_pylist(), documents.column("title").to_pylist(), strict=True))
        items = review_items_from_reformulations(task.name, output.table, chunks, titles)
        quarantine = quarantine_table([*failures, *output.failures])
        context.log.info(f"{task.name}/reformulation: {output.stats}; {items.num_rows} review items")
        stats = count_metadata("count", output.stats)
        yield dg.Output(themes, THEMES, metadata={"count/llm": themes.column("method").to_pylist().count("llm")})
        yield dg.Output(output.table, REFORMULATED_CHUNKS, metadata={**status, **stats})
        yield dg.Output(
            items, REFORMULATION_REVIEW_ITEMS, metadata={"count/flagged": sum(items.column("flagged").to_pylist())}
        )
        yield dg.Output(
            quarantine, REFORMULATION_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return reformulation
