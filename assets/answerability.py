"""LLM stage asset: whether each published query can be answered from its gold chunk alone.

``[task]/answerability`` (``StageTable.ANSWERABILITY``) and ``[task]/answerability_quarantine``. It reads the same
stage tables as the published folder (``assets.benchmark.dataset_inputs``), so it judges exactly the
final queries against their gold chunks *as embedded* (after reformulation and review) and waits at
the same review gate. Offline (no LLM configured) it is "not run" and ``answerable_alone`` stays null. Pseudo-queries
(``curation/pseudo_queries.py``) are not judged: they are training data, never evaluated (their label stays null).
The ``conteb_dataset`` asset reads the table to label the queries (``curation/necessity.py``).

Sharded by the queries' documents (``assets/sharded.py``): the split builds the published queries and documents,
and a shard gets its queries and their gold chunks (each request is one query with its gold chunk). The merge
restores the published queries' order (span rows, then LLM rows, under ``pairing: both``).
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from assets.benchmark import dataset_inputs, final_queries
from assets.keys import out
from assets.llm_stage import StageRun
from assets.sharded import (
    DRIVING,
    Context,
    Plan,
    Shard,
    ShardedStage,
    Split,
    document_shards,
    merged_llm_metadata,
    quarantine_output,
    sharded_multi_asset,
)
from conteb.config import TaskConfig
from conteb.names import Stage, StageTable
from conteb.schemas import ANSWERABILITY as SCHEMA
from curation.answerability import PROMPT_NAME, answerability_table, build_answerability_requests
from curation.dataset import published_documents
from curation.pseudo_queries import without_pseudo
from curation.quarantine import QuarantineRecord
from curation.shards import concat_in_order, positions, rows_in
from llm.client import LLMClient
from llm.prompts import sent_prompt_tag

STAGE = Stage.ANSWERABILITY


@dataclass(frozen=True)
class AnswerabilityShard:
    """One shard's judgements (``ANSWERABILITY``), failures and ``run_requests`` metadata."""

    table: pa.Table
    quarantine: list[QuarantineRecord]
    llm: dict[str, object]


def check_gold_chunks(queries: pa.Table, documents: pa.Table) -> None:
    """Raise ``ValueError`` naming the row (in the published queries) of the first query whose gold chunk is not
    in ``documents``, as :func:`build_answerability_requests` would on the whole table (a shard knows its rows only)."""
    present = pc.is_in(queries.column("chunk_id"), value_set=documents.column("chunk_id").combine_chunks())
    if pc.all(present).as_py() is False:
        row = present.to_pylist().index(False)
        qid, chunk_id = queries.column("query_id")[row].as_py(), queries.column("chunk_id")[row].as_py()
        raise ValueError(f"queries: row {row}: query {qid!r}: gold chunk_id {chunk_id!r} is not in the documents")


def split_published(task: TaskConfig) -> Callable[[Mapping[str, pa.Table], int], Split]:
    """The split of ``task``'s answerability: the published queries' documents, each shard with its queries and the
    published documents' rows of their gold chunks; rows ordered by the published queries' ids."""

    def split(tables: Mapping[str, pa.Table], size: int) -> Split:
        published = final_queries(task, dict(tables))
        documents = published_documents(tables["chunks"], published, tables.get("reformulated"))
        queries = without_pseudo(published)  # training data, never evaluated: no LLM judgement paid for them
        check_gold_chunks(queries, documents)

        def slices(doc_ids: tuple[str, ...]) -> dict[str, pa.Table]:
            shard_queries = rows_in(queries, "doc_id", doc_ids)
            gold = rows_in(documents, "chunk_id", set(shard_queries.column("chunk_id").to_pylist()))
            return {"queries": shard_queries, "documents": gold}

        order = {DRIVING: positions(queries.column("query_id").to_pylist())}
        return Split(document_shards(queries, size, slices), order)

    return split


def build_answerability_asset(task: TaskConfig, shard_documents: int) -> dg.AssetsDefinition:
    """``[task]/answerability`` and ``[task]/answerability_quarantine``."""

    def work(context: Context, client: LLMClient | None, shard: Shard) -> AnswerabilityShard:
        assert client is not None  # an LLM-only stage: shards without an LLM do not run
        queries, documents = shard.tables["queries"], shard.tables["documents"]
        run = StageRun(context, client, task, STAGE)
        requests = build_answerability_requests(queries, documents)
        results = run.ask(requests)
        table, failures = answerability_table(queries, results, run.model, sent_prompt_tag(requests, PROMPT_NAME))
        return AnswerabilityShard(table, failures, run.metadata)

    def merge(
        context: Context, client: LLMClient | None, plan: Plan, shards: Sequence[AnswerabilityShard]
    ) -> Iterator[dg.Output]:
        assert client is not None
        order = plan.order[DRIVING]
        table = concat_in_order([s.table for s in shards], SCHEMA, "query_id", order)
        failures = [r for s in shards for r in s.quarantine]
        answerable = table.column("answerable_alone").to_pylist()
        context.log.info(
            f"{task.name}/{STAGE}: {answerable.count(False)} of {table.num_rows} judged queries need more "
            f"than their chunk; {len(failures)} not judged"
        )
        metadata = {
            **merged_llm_metadata(client, f"{task.name}/{STAGE}", plan.started, [s.llm for s in shards]),
            "count/judged": table.num_rows,
            "count/answerable_alone": answerable.count(True),
            "count/answerable_alone_false": answerable.count(False),
        }
        yield dg.Output(table, StageTable.ANSWERABILITY, metadata=metadata)
        yield quarantine_output(StageTable.ANSWERABILITY_QUARANTINE, failures, order)

    stage = ShardedStage(
        task=task,
        stage=STAGE,
        name=f"{task.dagster_name}__answerability",
        description="LLM judgement per published query: can its gold chunk (as embedded) alone answer it?",
        ins=dataset_inputs(task),
        outs={
            StageTable.ANSWERABILITY: out(
                task, StageTable.ANSWERABILITY, "query_id -> answerable_alone, reason (LLM)."
            ),
            StageTable.ANSWERABILITY_QUARANTINE: out(
                task, StageTable.ANSWERABILITY_QUARANTINE, "Queries whose LLM call failed."
            ),
        },
        split=split_published(task),
        work=work,
        merge=merge,
        not_run=((StageTable.ANSWERABILITY, SCHEMA), StageTable.ANSWERABILITY_QUARANTINE),
    )
    return sharded_multi_asset(stage, shard_documents)
