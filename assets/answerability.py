"""LLM stage asset: whether each published query can be answered from its gold chunk alone.

``[task]/answerability`` (``ANSWERABILITY``) and ``[task]/answerability_quarantine``. It reads the same
stage tables as the published folder (``assets.benchmark.dataset_inputs``), so it judges exactly the
final queries against their gold chunks *as embedded* (after reformulation and review) and waits at
the same review gate. Offline (no LLM configured) it is "not run" and ``answerable_alone`` stays null.
The ``conteb_dataset`` asset reads the table to label the queries (``curation/necessity.py``).
"""

import dagster as dg
import pyarrow as pa

from assets.benchmark import dataset_inputs, final_queries
from assets.keys import ANSWERABILITY, ANSWERABILITY_QUARANTINE, out
from assets.llm_stage import open_client, run_requests, skipped_outputs
from assets.metadata import count_metadata
from assets.resources import LLMResource
from conteb.config import TaskConfig
from conteb.schemas import ANSWERABILITY as SCHEMA
from conteb.schemas import QUARANTINE
from curation.answerability import STAGE, answerability_table, build_answerability_requests
from curation.dataset import conteb_documents
from curation.quarantine import count_reasons, quarantine_table


def build_answerability_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/answerability`` and ``[task]/answerability_quarantine``."""

    @dg.multi_asset(
        name=f"{task.dagster_name}__answerability",
        group_name=task.dagster_name,
        description="LLM judgement per published query: can its gold chunk (as embedded) alone answer it?",
        ins=dataset_inputs(task),
        outs={
            ANSWERABILITY: out(task, ANSWERABILITY, "query_id -> answerable_alone, reason (LLM)."),
            ANSWERABILITY_QUARANTINE: out(task, ANSWERABILITY_QUARANTINE, "Queries whose LLM call failed."),
        },
    )
    def answerability(context: dg.AssetExecutionContext, llm: LLMResource, **tables: pa.Table):
        client = open_client(context, llm)
        if not client.available:
            yield from skipped_outputs(
                context, task, STAGE, {ANSWERABILITY: SCHEMA, ANSWERABILITY_QUARANTINE: QUARANTINE}
            )
            return
        queries = final_queries(task, tables)
        documents = conteb_documents(tables["chunks"], tables.get("reformulated"))
        requests = build_answerability_requests(queries, documents)
        results, llm_meta = run_requests(context, client, task, STAGE, requests)
        table, failures = answerability_table(queries, results, client.settings.model)
        quarantine = quarantine_table(failures)
        answerable = table.column("answerable_alone").to_pylist()
        context.log.info(
            f"{task.name}/{STAGE}: {answerable.count(False)} of {table.num_rows} judged queries need more than "
            f"their chunk; {len(failures)} not judged"
        )
        metadata = {
            **llm_meta,
            "count/judged": table.num_rows,
            "count/answerable_alone": answerable.count(True),
            "count/answerable_alone_false": answerable.count(False),
        }
        yield dg.Output(table, ANSWERABILITY, metadata=metadata)
        yield dg.Output(
            quarantine, ANSWERABILITY_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return answerability
