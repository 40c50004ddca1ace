"""Stage 0 asset: load a task's source into documents, queries and a quarantine table."""

import dagster as dg

from assets.keys import group, out
from assets.metadata import count_metadata, counts_in_words
from assets.resources import ConTEBSettings
from conteb.config import TaskConfig
from conteb.names import Stage, StageTable
from curation.quarantine import count_reasons
from curation.sources import SourceError, load_source, source_label


def build_source_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/source_documents``, ``[task]/source_queries``, ``[task]/source_quarantine``."""

    @dg.multi_asset(
        name=f"{task.dagster_name}__source",
        group_name=group(task, Stage.SOURCE),
        description=f"Load the {task.source.kind} source of task '{task.name}'.",
        outs={
            StageTable.SOURCE_DOCUMENTS: out(
                task, StageTable.SOURCE_DOCUMENTS, "Whole documents (doc_id, title, text, source, license)."
            ),
            StageTable.SOURCE_QUERIES: out(
                task, StageTable.SOURCE_QUERIES, "Queries with answer spans in document coordinates."
            ),
            StageTable.SOURCE_QUARANTINE: out(task, StageTable.SOURCE_QUARANTINE, "Source rows refused, with reasons."),
        },
    )
    def source(context: dg.AssetExecutionContext, settings: ConTEBSettings):
        label = source_label(task.source, settings.config_dir)
        context.log.info(f"{task.name}: loading {task.source.kind} source {label}")
        try:
            result = load_source(task.source, settings.config_dir)
        except SourceError as error:
            raise dg.Failure(description=f"task '{task.name}': {error}") from error
        result.keep_first_documents(task.max_documents)
        for warning in result.warnings:
            context.log.warning(warning)
        quarantine = result.quarantine_table()
        stats = count_metadata("count", result.stats)
        context.log.info(
            f"{task.name}: {len(result.documents)} documents, {len(result.queries)} queries, "
            f"{quarantine.num_rows} quarantined ({counts_in_words(result.stats)})"
        )
        yield dg.Output(result.documents_table(), StageTable.SOURCE_DOCUMENTS, metadata=stats)
        yield dg.Output(result.queries_table(), StageTable.SOURCE_QUERIES, metadata=stats)
        yield dg.Output(
            quarantine, StageTable.SOURCE_QUARANTINE, metadata=count_metadata("quarantine", count_reasons(quarantine))
        )

    return source
