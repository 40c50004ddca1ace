"""Which ConTEB tasks ``evaluate_conteb`` / ``conteb evaluate`` evaluate, and where their inputs are.

A target is a task of the registry (its published folder ``data/conteb/<task>``, its chunk contexts
and span-annotated sources from its stage tables, :func:`conteb.storage.stage_table_path`) or an
``evaluation.external`` dataset (a folder or a hub id: no stage tables, so contexts are absent and
the chunk-size study rebuilds documents from the chunks' offsets when the queries carry answer spans).

A registry task is evaluated on its ``evaluation_split`` (``test`` when it declares document-level
``splits``, else its last declared split, else its one ``split``); its chunk-size study re-chunks only
the source documents of that split.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from conteb.config import TaskConfig
from conteb.names import Stage, StageTable
from conteb.staging import staged_tree
from conteb.storage import dataset_dir, llm_cache_path, models_dir, reports_dir, stage_table_path
from evaluation.config import EvaluationConfig
from evaluation.corpus import EvalCorpus
from evaluation.encoded import EncodingKey, EncodingOutcome
from evaluation.indexed import NotRunnable
from evaluation.load import load_config_table, load_corpus, read_contexts
from evaluation.rechunk import SpanSources, sources_from_dataset
from evaluation.results import LLMUsage, TaskEvaluation


@dataclass(frozen=True)
class EvalTarget:
    """One task to evaluate. ``data_dir``: the data folder that holds the task's stage tables (registry tasks
    only; None for an external dataset)."""

    name: str
    path: str
    split: str
    data_dir: Path | None = None
    span_annotated: bool = True
    split_by_document: bool = False  # the folder has several document-level splits: sources filtered to this one
    chunk_contexts: bool | None = None  # the registry task sets chunk_contexts: true (None: not a registry task)
    validation_split: str | None = None  # the split fusion weights are fitted and the pipeline chosen on (select.py)

    def load(self) -> EvalCorpus:
        """The corpus, with the LLM chunk contexts when the task produced them, else why there are none."""
        contexts = read_contexts(self._stage_table(StageTable.CHUNK_CONTEXTS)) if self.data_dir else None
        corpus = load_corpus(self.path, name=self.name, split=self.split, contexts=contexts)
        if contexts is None:
            corpus.contexts_missing = self.missing_contexts()
        return corpus

    def load_validation(self) -> EvalCorpus | None:
        """The validation split's corpus (with the chunk contexts), None when the task declares none."""
        if self.validation_split is None:
            return None
        return dataclasses.replace(self, split=self.validation_split, validation_split=None).load()

    def missing_contexts(self) -> str:
        """Why this target has no LLM chunk contexts, and how to get them (the ``contextual`` system's not-run
        reason)."""
        if self.data_dir is None:
            return (
                "an external dataset has no LLM chunk contexts: the contextual system runs on tasks of the registry "
                "with chunk_contexts: true"
            )
        if self.chunk_contexts is False:
            return "the task does not set chunk_contexts: true (set it and configure an LLM endpoint, then make run)"
        return (
            "chunk_contexts is set, but no contexts were produced: the chunk_contexts stage runs only with an LLM "
            "(none was configured when the task was built, or every call failed: see its context_quarantine); "
            "configure an endpoint (llm.base_url in the registry, or OPENAI_BASE_URL) and OPENAI_API_KEY, then make run"
        )

    def _stage_table(self, table: str) -> Path:
        """The Parquet file of stage table ``table`` (a :class:`StageTable` name) of this (registry) task."""
        if self.data_dir is None:
            raise ValueError(f"{self.name}: an external dataset has no stage tables")
        return stage_table_path(self.data_dir, self.name, table)

    def sources(self) -> tuple[SpanSources | None, str | None]:
        """Span-annotated original documents for the chunk-size study, or None and why not."""
        if self.data_dir is not None:
            documents = self._stage_table(StageTable.SOURCE_DOCUMENTS)
            queries = self._stage_table(StageTable.SOURCE_QUERIES)
            if not self.span_annotated:
                return None, "the task pairs queries by LLM, not by answer span: chunk-size study not run"
            if documents.is_file() and queries.is_file():
                sources = SpanSources(pq.read_table(documents), pq.read_table(queries))
                return (self._of_this_split(sources) if self.split_by_document else sources), None
            return None, f"{documents} missing: materialize the task's source assets first"
        try:
            documents, _ = load_config_table(self.path, "documents", self.split)
            queries, _ = load_config_table(self.path, "queries", self.split)
            return SpanSources(*sources_from_dataset(documents, queries)), None
        except NotRunnable as reason:
            return None, str(reason)

    def _of_this_split(self, sources: SpanSources) -> SpanSources:
        """The source documents (and their queries) of the evaluated split only."""
        published, _ = load_config_table(self.path, "documents", self.split)
        kept = pa.array(sorted(set(published.column("doc_id").to_pylist())), pa.string())
        return SpanSources(
            sources.documents.filter(pc.is_in(sources.documents.column("doc_id"), kept)),
            sources.queries.filter(pc.is_in(sources.queries.column("doc_id"), kept)),
        )

    def llm_usage(self) -> LLMUsage | None:
        """Tokens and dollars the task's chunk contexts cost, from the LLM ledger (None when never paid)."""
        path = llm_cache_path(self.data_dir) if self.data_dir is not None else None
        if path is None or not path.is_file():
            return None
        from llm.cache import AnswerCache

        cache = AnswerCache(path)
        try:
            usage = cache.usage(f"{self.name}/{Stage.CHUNK_CONTEXTS}")  # the ledger scope: <task>/<stage>
        finally:
            cache.close()
        if usage.calls == 0:
            return None
        return LLMUsage(tokens=usage.prompt_tokens + usage.completion_tokens, usd=usage.cost_usd)


def evaluation_targets(tasks: Sequence[TaskConfig], evaluation: EvaluationConfig, data_dir: Path) -> list[EvalTarget]:
    """Every target of the ``evaluation:`` block: the registry ``tasks`` it names (``evaluation.tasks``; default
    all), then its external tasks."""
    names = evaluation.tasks
    targets = [
        EvalTarget(
            name=task.name,
            path=str(dataset_dir(data_dir, task.name)),
            split=task.evaluation_split,
            data_dir=data_dir,
            span_annotated=task.uses_span_pairing,
            split_by_document=task.splits is not None,
            chunk_contexts=task.chunk_contexts,
            validation_split=task.validation_split,
        )
        for task in tasks
        if names is None or task.name in names
    ]
    targets += [EvalTarget(name=t.name, path=t.path, split=t.split) for t in evaluation.external]
    return targets


def find_target(
    tasks: Sequence[TaskConfig], evaluation: EvaluationConfig, data_dir: Path, name_or_path: str, split: str = "test"
) -> EvalTarget:
    """A configured target by name, else a folder path or hub id evaluated ad hoc (named after its last part)."""
    for target in evaluation_targets(tasks, evaluation, data_dir):
        if target.name == name_or_path:
            return target
    for task in tasks:  # a registry task left out of evaluation.tasks can still be evaluated by name
        if task.name == name_or_path:
            return EvalTarget(
                task.name,
                str(dataset_dir(data_dir, task.name)),
                task.evaluation_split,
                data_dir,
                task.uses_span_pairing,
                task.splits is not None,
                task.chunk_contexts,
                task.validation_split,
            )
    name = Path(name_or_path.rstrip("/")).name.lower().replace("_", "-") or "task"
    return EvalTarget(name=name, path=name_or_path, split=split)


@dataclass(frozen=True)
class LoadedTarget:
    """A target with its corpus and, when the chunk-size study runs, its span sources (or why there are none)."""

    target: EvalTarget
    corpus: EvalCorpus
    sources: SpanSources | None = None
    no_sources_reason: str | None = None
    validation: EvalCorpus | None = None  # the validation split (fusion weights, the chosen pipeline)


def load_target(target: EvalTarget, evaluation: EvaluationConfig, *, chunk_sizes: bool = True) -> LoadedTarget:
    """``target``'s corpus, and its span sources when the chunk-size study runs (``chunk_sizes`` and enabled).

    Raises :class:`evaluation.load.CorpusError` when the task's files are unusable.
    """
    corpus = target.load()
    sources, why_not = target.sources() if chunk_sizes and evaluation.chunk_sizes.enabled else (None, None)
    return LoadedTarget(target, corpus, sources, why_not, target.load_validation())


@dataclass(frozen=True)
class ReportedEvaluation:
    """A task's evaluation and where its report files landed (relative name -> path under ``reports/``)."""

    evaluation: TaskEvaluation
    paths: dict[str, Path]


def evaluate_and_report(
    loaded: LoadedTarget,
    evaluation: EvaluationConfig,
    data_dir: Path,
    *,
    systems: Sequence[str] | None = None,
    chunk_sizes: bool = True,
    encodings: Mapping[EncodingKey, EncodingOutcome] | None = None,
    log: Callable[[str], None] = print,
    show_progress: bool = False,
) -> ReportedEvaluation:
    """:func:`evaluation.runner.evaluate_task` on a loaded target, with its LLM cost, and the task's report
    (:func:`evaluation.reports.publish.write_task_report`), as one unit; ``encodings``: the chunk sides its encode
    shards
    computed (``evaluation/sharding.py``).

    Every file of the task (``runs/<task>/``, ``tasks/<task>/``: run files, per-query metrics, ``evaluation.json``,
    report, plots) is written to a stage and lands under ``reports/`` only when both succeed
    (:func:`conteb.staging.staged_tree`): an evaluation stopped half-way (Ctrl-C, SIGTERM, an error) leaves the
    complete reports of the previous one as they were. The earlier files of the task are seeded into the stage, so
    the results of systems not re-run are merged as before.
    """
    from evaluation.reports.publish import task_report_folder, write_task_report
    from evaluation.run_files import task_paths
    from evaluation.runner import evaluate_task  # torch and sentence-transformers: only when evaluating

    name = loaded.target.name
    seed = dict.fromkeys([*task_paths(name), task_report_folder(name)])
    with staged_tree(reports_dir(data_dir), seed=seed) as staged:
        result = evaluate_task(
            loaded.corpus,
            evaluation,
            models_dir=models_dir(data_dir),
            reports_dir=staged.stage,
            systems=systems,
            sources=loaded.sources,
            no_sources_reason=loaded.no_sources_reason,
            llm_usage=loaded.target.llm_usage(),
            chunk_sizes=chunk_sizes,
            encodings=encodings,
            log=log,
            show_progress=show_progress,
            validation=loaded.validation,
        )
        written = write_task_report(result, staged.stage)
    return ReportedEvaluation(result, {relative: staged.final(path) for relative, path in written.items()})


def evaluate_target(
    target: EvalTarget,
    evaluation: EvaluationConfig,
    data_dir: Path,
    *,
    systems: Sequence[str] | None = None,
    chunk_sizes: bool = True,
    log: Callable[[str], None] = print,
    show_progress: bool = False,
) -> TaskEvaluation:
    """Load ``target`` (:func:`load_target`), then evaluate and report it in this process
    (:func:`evaluate_and_report`): the entry of the command line; ``[task]/evaluation`` encodes in shards between
    the two.

    Raises :class:`evaluation.load.CorpusError` when the task's files are unusable.
    """
    loaded = load_target(target, evaluation, chunk_sizes=chunk_sizes)
    reported = evaluate_and_report(
        loaded, evaluation, data_dir, systems=systems, chunk_sizes=chunk_sizes, log=log, show_progress=show_progress
    )
    return reported.evaluation
