"""Published output: the ConTEB dataset folder of a task, and its asset checks (ERROR severity)."""

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from assets.keys import group, key
from assets.metadata import count_metadata, markdown_preview, table_metadata
from assets.resources import ConTEBSettings, LLMResource
from conteb.config import TaskConfig
from conteb.names import Stage, StageFamily, StageTable
from conteb.published import PublishRefused, read_config
from conteb.schemas import CONTEB_DOCUMENTS, CONTEB_QUERIES, PAIRED_QUERIES
from conteb.storage import dataset_dir, stage_table_path
from curation import validation
from curation.dataset import publish_task, published_documents
from curation.llm_pairing import combine_pairings
from curation.necessity import label_queries, necessity_counts
from curation.reviewed import queries_after_rejections
from curation.sources import source_label

STAGE_OF_QUARANTINE = {
    name: str(stage)  # the stage's id: its published table quarantine/<stage>-<hex>.parquet, its row of the card
    for name, stage in {
        StageTable.SOURCE_QUARANTINE: Stage.SOURCE,
        StageTable.CHUNK_QUARANTINE: Stage.CHUNKING,
        StageTable.PAIRING_QUARANTINE: Stage.PAIRING,
        StageTable.LLM_PAIRING_QUARANTINE: Stage.LLM_PAIRING,
        StageTable.REFORMULATION_QUARANTINE: Stage.REFORMULATION,
        StageTable.SYNTHETIC_QUARANTINE: Stage.SYNTHETIC_QUERIES,
        StageTable.ANSWERABILITY_QUARANTINE: Stage.ANSWERABILITY,
        StageTable.PSEUDO_QUARANTINE: Stage.PSEUDO_QUERIES,
    }.items()
}


def necessity_inputs(task: TaskConfig) -> dict[str, dg.AssetIn]:
    """What labels the queries (``curation/necessity.py``): the themes of a reformulated task (else the
    title rule) and the LLM answerability judgements, unless the task says ``answerability: false``."""
    ins: dict[str, dg.AssetIn] = {}
    if task.reformulation:
        ins["themes"] = dg.AssetIn(key(task, StageTable.THEMES))
    if task.answerability is not False:
        ins["answerability"] = dg.AssetIn(key(task, StageTable.ANSWERABILITY))
        ins[StageTable.ANSWERABILITY_QUARANTINE] = dg.AssetIn(key(task, StageTable.ANSWERABILITY_QUARANTINE))
    return ins


def dataset_inputs(task: TaskConfig) -> dict[str, dg.AssetIn]:
    """The stage tables the published folder is made of, by the task's settings."""
    ins = {"chunks": dg.AssetIn(key(task, StageTable.CHUNKS))}
    quarantines = [StageTable.SOURCE_QUARANTINE, StageTable.CHUNK_QUARANTINE]
    if task.uses_span_pairing:
        ins["span_queries"] = dg.AssetIn(key(task, StageTable.PAIRED_QUERIES))
        quarantines.append(StageTable.PAIRING_QUARANTINE)
    # LLM output reaches the benchmark only through its review queue (assets/review.py).
    if task.uses_llm_pairing:
        ins["llm_queries"] = dg.AssetIn(key(task, StageTable.REVIEWED_LLM_PAIRED_QUERIES))
        quarantines.append(StageTable.LLM_PAIRING_QUARANTINE)
    if task.reformulation:
        ins["reformulated"] = dg.AssetIn(key(task, StageTable.REVIEWED_CHUNKS))
        quarantines.append(StageTable.REFORMULATION_QUARANTINE)
    if task.synthetic_queries:
        ins["synthetic"] = dg.AssetIn(key(task, StageTable.REVIEWED_SYNTHETIC_QUERIES))
        quarantines.append(StageTable.SYNTHETIC_QUARANTINE)
    if task.pseudo_queries:
        ins["pseudo_queries"] = dg.AssetIn(key(task, StageTable.PSEUDO_QUERIES))
        ins["pseudo_sentences"] = dg.AssetIn(key(task, StageTable.PSEUDO_SENTENCES))
        quarantines.append(StageTable.PSEUDO_QUARANTINE)
    ins.update({name: dg.AssetIn(key(task, name)) for name in quarantines})
    return ins


def final_queries(task: TaskConfig, tables: dict[str, pa.Table]) -> pa.Table:
    """The published queries: span pairs, LLM pairs, or both combined (span rows win); without
    those of chunks whose rewrite was rejected when the task says ``on_reject: drop_queries``;
    then the task's pseudo-queries (``pseudo_queries``), last."""
    if task.pairing == "both":
        queries = combine_pairings(tables["span_queries"], tables["llm_queries"])
    else:
        queries = tables["span_queries" if task.uses_span_pairing else "llm_queries"]
    queries = queries_after_rejections(queries, tables.get("reformulated"), task.review.on_reject)
    if task.pseudo_queries:
        queries = pa.concat_tables([queries.cast(PAIRED_QUERIES), tables["pseudo_queries"].cast(PAIRED_QUERIES)])
    return queries


def build_dataset_asset(task: TaskConfig) -> dg.AssetsDefinition:
    """``[task]/conteb_dataset``: ``data/conteb/<task>/`` in the public ConTEB layout."""

    @dg.asset(
        key=key(task, StageTable.CONTEB_DATASET),
        group_name=group(task, StageFamily.PUBLISH),
        kinds={"parquet", "huggingface"},
        description=f"The ConTEB dataset folder of task '{task.name}' (documents, queries, README card).",
        ins={**dataset_inputs(task), **necessity_inputs(task)},
    )
    def conteb_dataset(
        context: dg.AssetExecutionContext, settings: ConTEBSettings, llm: LLMResource, **tables: pa.Table
    ) -> dg.MaterializeResult:
        out_dir = dataset_dir(settings.data_path, task.name)
        queries = final_queries(task, tables)
        embedded = published_documents(tables["chunks"], queries, tables.get("reformulated"))
        queries = label_queries(queries, embedded, tables.get("themes"), tables.get("answerability"))
        # in the stages' order (the card's rows)
        quarantines = {stage: tables[name] for name, stage in STAGE_OF_QUARANTINE.items() if name in tables}
        uses_llm = task.uses_llm_pairing or task.reformulation or task.synthetic_queries
        try:
            published = publish_task(
                out_dir,
                task,
                source_label(task.source, settings.config_dir),
                tables["chunks"],
                queries,
                quarantines,
                reformulated=tables.get("reformulated"),
                synthetic_queries=tables.get("synthetic"),
                settings={"llm_model": llm.settings.model} if uses_llm else None,
                pseudo_sentences=tables.get("pseudo_sentences"),
                warn=context.log.warning,
            )
        except PublishRefused as error:  # a symbolic link where the folder goes: one line, no traceback
            raise dg.Failure(description=f"task '{task.name}': {error}") from None
        counts, written = published.counts, published.paths
        refused = sum(table.num_rows for table in quarantines.values())
        context.log.info(
            f"{task.name}: ConTEB dataset written to {out_dir} ({counts['chunks']} chunks, {counts['queries']} "
            f"queries; {refused} {'row' if refused == 1 else 'rows'} quarantined, its tables in quarantine/)"
        )
        return dg.MaterializeResult(
            metadata={
                **table_metadata(published.documents),
                "dataset_dir": dg.MetadataValue.path(str(out_dir)),
                **{f"{name}_file": dg.MetadataValue.path(str(path)) for name, path in written.items()},
                "queries/row_count": queries.num_rows,
                "queries/preview": dg.MetadataValue.md(markdown_preview(queries)),
                **count_metadata("count", counts),
                **{f"count/{name}": n for name, n in necessity_counts(queries).items()},
                **{
                    f"split/{split}/{what.replace(' ', '_')}": n
                    for split, split_counts in published.split_counts.items()
                    for what, n in split_counts.items()
                },
                **{
                    f"quarantine/{stage}/{reason}": n
                    for stage, reasons in published.quarantine.items()
                    for reason, n in reasons.items()
                },
            }
        )

    return conteb_dataset


CHECKS = {
    "chunk_ids_unique_and_well_formed": "Chunk ids are '<doc_id>_<chunk_index>' and unique.",
    "query_chunk_ids_exist": "Every query's chunk_id and chunk_ids exist among the chunks.",
    "chunks_within_size": "No chunk is longer than the configured chunk_size.",
    "chunks_match_source": "chunk == text[char_start:char_end] of its source document.",
    "no_empty_chunks": "No chunk is blank (empty, whitespace or invisible characters only).",
    "no_empty_queries": "No query is blank (empty, whitespace or invisible characters only).",
    "splits_by_document": "Each document is in one split, with its queries; every declared split has documents.",
    "pseudo_queries_only_in_training_split": (
        "No pseudo-query (pairing 'pseudo') is in an evaluated split: only in the split pseudo_queries names."
    ),
}


def build_dataset_checks(task: TaskConfig) -> dg.AssetChecksDefinition:
    """The ERROR-severity invariants of the published folder, read back from disk."""
    asset_key = key(task, StageTable.CONTEB_DATASET)

    @dg.multi_asset_check(
        name=f"{task.dagster_name}__dataset_checks",
        specs=[
            dg.AssetCheckSpec(name, asset=asset_key, description=text, blocking=True) for name, text in CHECKS.items()
        ],
    )
    def dataset_checks(context: dg.AssetCheckExecutionContext, settings: ConTEBSettings):
        data_path = settings.data_path
        folder = dataset_dir(data_path, task.name)
        documents_by_split = read_splits(folder, "documents", task.split_names)
        queries_by_split = read_splits(folder, "queries", task.split_names)
        documents = pa.concat_tables(list(documents_by_split.values()), promote_options="default")
        queries = pa.concat_tables(list(queries_by_split.values()), promote_options="default")
        sources = pq.read_table(
            stage_table_path(data_path, task.name, StageTable.SOURCE_DOCUMENTS), columns=["doc_id", "text"]
        )
        outcomes = {
            "chunk_ids_unique_and_well_formed": validation.chunk_ids_unique_and_well_formed(documents),
            "query_chunk_ids_exist": validation.query_chunk_ids_exist(queries, documents),
            "chunks_within_size": validation.chunks_within_size(documents, task.chunking.chunk_size),
            "chunks_match_source": validation.chunks_match_source(documents, sources),
            "no_empty_chunks": validation.no_empty_chunks(documents),
            "no_empty_queries": validation.no_empty_queries(queries),
            "splits_by_document": validation.splits_by_document(documents_by_split, queries_by_split),
            "pseudo_queries_only_in_training_split": validation.pseudo_queries_only_in(
                queries_by_split, task.pseudo_split
            ),
        }
        failed = {name: outcome for name, outcome in outcomes.items() if not outcome.passed}
        context.log.info(f"{task.name}: {len(outcomes) - len(failed)}/{len(outcomes)} dataset checks passed")
        for name, outcome in failed.items():
            context.log.error(f"{task.name}: check {name} failed on {outcome.failures} rows, e.g. {outcome.examples}")
        for name, outcome in outcomes.items():
            yield dg.AssetCheckResult(
                check_name=name,
                asset_key=asset_key,
                passed=outcome.passed,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={
                    "failures": outcome.failures,
                    "checked": outcome.checked,
                    "examples": dg.MetadataValue.md("\n".join(f"- {e}" for e in outcome.examples) or "none"),
                },
            )

    return dataset_checks


def read_splits(folder: Path, config: str, splits: tuple[str, ...]) -> dict[str, pa.Table]:
    """``{split: table}`` of ``config`` read back from the files its card names; a split without files is empty."""
    schema = CONTEB_DOCUMENTS if config == "documents" else CONTEB_QUERIES
    tables = {}
    for split in splits:
        found = read_config(folder, config, split)
        tables[split] = found[0] if found else schema.empty_table()
    return tables
