"""Evaluate the configured systems on one task: index, rank, measure, test, and write the run files.

``evaluate_task`` is what the Dagster asset ``[task]/evaluation`` and ``conteb evaluate`` both call. The files it
writes under ``reports_dir`` are those of :mod:`evaluation.run_files` (their layout's one owner).

Every metric summary and every paired comparison is computed on all queries and, when the corpus is
labelled (``EvalCorpus.needs_context``) and some queries need context, again on that subset
(``SystemRun.subset_metrics``, ``TaskEvaluation.subset_comparisons``). Which comparisons, and their tests:
:func:`evaluation.comparisons.compare_systems` (each tested system against the best cheap baseline on the same
queries, then the configured pairs), one Holm family per task.

A ``hybrid`` fuses systems prepared once per corpus: the components of the selected hybrids are kept prepared
(:class:`~evaluation.indexed.IndexedSystem`, their encodings and query vectors) while the task's systems run, and a
component that is not itself selected (or comes later) is prepared when its hybrid needs it. A component that cannot
run makes the hybrid not run (``component <name> not run: <reason>``); one that fails (raises, or scores NaN) makes it
not run too (``needs <name>, which failed: <reason>``), as does one that failed on validation for a fusion whose
weights it would have fitted.

One system's failure stays its own: a system that raises or scores NaN is recorded ``failed`` with its reason in one
log line, the systems that fuse it ``not_run`` (above), and every other system's results, the comparisons and the
files are written; so is a failure on validation (:func:`evaluation.select.fit_and_select` leaves the system out of the
choice with a note) and in the chunk-size study (a note).

Evaluating a subset of systems keeps the earlier results of the others (merged by system name), so
comparisons can use per-query metrics written by an earlier run.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa

from conteb.schemas import per_query_metrics_schema
from conteb.storage import write_parquet_atomic, write_text_atomic
from evaluation.comparisons import compare_systems, comparison_plan
from evaluation.config import FUSING, EvaluationConfig, FusionSystem, SystemConfig
from evaluation.corpus import EvalCorpus
from evaluation.encoded import EncodingKey, EncodingOutcome
from evaluation.indexed import IndexedSystem, Log, NotRunnable, ScoresNaN, failure_reason, needs_failed, no_log
from evaluation.metrics import trec
from evaluation.metrics.retrieval import metrics_from_gold_rank
from evaluation.metrics.stats import adjust_family, summarize
from evaluation.metrics.views import by_position, sample_subsets, scaling_curve, scaling_sizes
from evaluation.rechunk import SpanSources, rechunk_corpus
from evaluation.results import (
    HEADLINE,
    NEEDS_CONTEXT,
    PROVENANCE_RECORDED,
    ChunkSizePoint,
    LLMUsage,
    SystemRun,
    TaskEvaluation,
    to_json,
)
from evaluation.run_files import evaluation_path, load_evaluation, per_query_path, runs_dir
from evaluation.select import fit_and_select, with_weights
from evaluation.systems.dispatch import prepare_system, requirement_problem, system_provenance
from evaluation.systems.ranking import rank_corpus
from evaluation.tally import summarized_warnings

logger = logging.getLogger(__name__)


def _relative(path: Path, reports_dir: Path) -> str:
    return str(path.relative_to(reports_dir))


_Prepared = IndexedSystem | Exception


class _Evaluator:
    """State shared by the systems of one task evaluation.

    ``needed``: the names of the components of the hybrids that will run; their prepared systems (or the error that
    preparing them raised) are kept per ``(name, chunk size)`` until :meth:`release`.
    """

    def __init__(
        self,
        corpus: EvalCorpus,
        config: EvaluationConfig,
        models_dir: Path,
        reports_dir: Path,
        log: Log,
        show_progress: bool,
        needed: set[str] | None = None,
    ) -> None:
        self.corpus = corpus
        self.config = config
        self.models_dir = models_dir
        self.reports_dir = reports_dir
        self.log = log
        self.show_progress = show_progress
        self.plan = comparison_plan(config)
        self.needed = needed or set()
        self.prepared: dict[tuple[str, int | None], _Prepared] = {}
        sizes = scaling_sizes(corpus.n_documents, config.scaling.points)
        self.subsets, self.subset_size = sample_subsets(
            corpus.n_documents, sizes, config.scaling.repeats, config.scaling.seed
        )
        self.skipped: list[str] = []  # chunk-size study: systems left out at a size, and why
        self.failed: dict[str, str] = {}  # system -> why it failed (what fuses it does not run)
        self.unfitted: dict[str, str] = {}  # fitted fusion -> why its weights were not fitted on validation
        mask = corpus.needs_context
        self.needs_context = mask if mask is not None and mask.any() else None  # bool [Q], None: not reported

    def prepare(
        self,
        system: SystemConfig,
        corpus: EvalCorpus,
        encodings: Mapping[EncodingKey, EncodingOutcome],
        size: int | None = None,
        log: Log | None = None,
    ) -> IndexedSystem:
        """``system`` prepared on ``corpus`` (the task's, or its re-chunking at ``size``) with its encoding from
        ``encodings``; a hybrid over its components (kept prepared, module docstring). Raises :class:`NotRunnable`
        (a component's as ``component <name> not run: ...``, a failed one's as ``needs <name>, which failed: ...``)."""
        if isinstance(system, FUSING):
            parts = []
            for component in self.config.components(system):
                if component.name in self.failed:
                    raise NotRunnable(needs_failed(component.name, self.failed[component.name]))
                reused = (component.name, size) in self.prepared
                try:
                    parts.append((component.name, self._single(component, corpus, encodings, size, log, keep=True)))
                except NotRunnable as reason:
                    raise NotRunnable(f"component {component.name} not run: {reason}") from reason
                except Exception as error:
                    self.failed[component.name] = failure_reason(error)
                    raise NotRunnable(needs_failed(component.name, self.failed[component.name])) from error
                if log is not None:
                    log(f"{system.name}: fuses {component.name} ({'reused' if reused else 'prepared for it'})")
            if system.name in self.unfitted:
                raise NotRunnable(f"weights not fitted on validation: {self.unfitted[system.name]}")
            return prepare_system(system, corpus, self.models_dir, components=parts)
        return self._single(system, corpus, encodings, size, log, keep=system.name in self.needed)

    def _single(
        self,
        system: SystemConfig,
        corpus: EvalCorpus,
        encodings: Mapping[EncodingKey, EncodingOutcome],
        size: int | None,
        log: Log | None,
        keep: bool,
    ) -> IndexedSystem:
        """:func:`prepare_system` for a system that is not a hybrid; with ``keep``, once per ``(system, size)``: later
        calls return the same prepared system, or raise the same error."""

        def prepared() -> IndexedSystem:
            return prepare_system(
                system,
                corpus,
                self.models_dir,
                encoded=encodings.get(EncodingKey(system.name, size)),
                show_progress=self.show_progress,
                log=log or no_log,
                require_provenance=self.config.require_provenance,
            )

        if not keep:
            return prepared()
        key = (system.name, size)
        if key not in self.prepared:
            try:
                self.prepared[key] = prepared()
            except Exception as error:
                self.prepared[key] = error
        kept = self.prepared[key]
        if isinstance(kept, Exception):
            raise kept
        return kept

    def failure(self, system: SystemConfig, error: Exception) -> tuple[Literal["not_run", "failed"], str]:
        """``(status, reason)`` of ``system`` after it raised ``error`` while running, remembered for what fuses the
        failed system: ``not_run`` when a system it fuses scored NaN (``needs <name>, which failed: ...``), else
        ``failed`` with :func:`~evaluation.indexed.failure_reason`."""
        if isinstance(error, ScoresNaN) and error.component and error.component != system.name:
            self.failed[error.component] = str(error)
            return "not_run", needs_failed(error.component, str(error))
        self.failed[system.name] = failure_reason(error)
        return "failed", self.failed[system.name]

    def release(self, size: int | None) -> None:
        """Forget the components kept for ``size`` (None: the task's corpus)."""
        self.prepared = {key: value for key, value in self.prepared.items() if key[1] != size}

    def _summary(self, values: np.ndarray, documents: Sequence[str] | np.ndarray):
        """The summary of per-query ``values`` with its interval over ``documents`` (one per value)."""
        b = self.config.bootstrap
        return summarize(values, documents, b.resamples, b.confidence, b.seed)

    def _rank(self, indexed: IndexedSystem, corpus: EvalCorpus, subsets: np.ndarray | None, label: str):
        done = 0
        next_log = max(1, corpus.n_queries // 4)

        def progress(n: int) -> None:
            nonlocal done, next_log
            done += n
            if done >= next_log or done == corpus.n_queries:
                self.log(f"{label}: ranked {done:,}/{corpus.n_queries:,} queries over {corpus.n_chunks:,} chunks")
                next_log = done + max(1, corpus.n_queries // 4)

        return rank_corpus(
            indexed.score_block,
            corpus.n_queries,
            corpus.chunk_ids,
            corpus.gold,
            corpus.chunk_doc_index(),
            corpus.document_order,
            top_k=self.config.top_k,
            block=self.config.query_block,
            subsets=subsets,
            progress=progress,
        )

    def run_system(
        self,
        system: SystemConfig,
        llm_usage: LLMUsage | None,
        encodings: Mapping[EncodingKey, EncodingOutcome],
    ) -> SystemRun:
        corpus = self.corpus
        role = self.plan.role(system.name)
        base = SystemRun(task=corpus.name, system=system.name, kind=system.kind, status="not_run", role=role)
        provenance = system_provenance(system, self.models_dir)
        if provenance is not None:
            base.provenance, base.provenance_note = provenance.status, provenance.note
        problem = requirement_problem(
            system, corpus, self.models_dir, require_provenance=self.config.require_provenance
        )
        if problem:
            self.log(f"{system.name}: not run: {problem}")
            base.reason = problem
            return base
        if provenance is not None and provenance.status != PROVENANCE_RECORDED:
            self.log(f"{system.name}: {provenance.note}")
        self.log(f"{system.name}: indexing {corpus.n_chunks:,} chunks of {corpus.n_documents:,} documents")
        try:
            indexed = self.prepare(system, corpus, encodings, log=self.log)
        except NotRunnable as reason:
            self.log(f"{system.name}: not run: {reason}")
            base.reason = str(reason)
            return base
        started = time.perf_counter()
        ranking = self._rank(indexed, corpus, self.subsets, system.name)
        rank_seconds = time.perf_counter() - started
        per_query = metrics_from_gold_rank(ranking.gold_rank, self.config.cutoffs)
        headline = per_query[HEADLINE]
        run_path = runs_dir(self.reports_dir, corpus.name) / f"{system.name}.trec"
        trec.write_run(run_path, corpus.query_ids, corpus.chunk_ids, ranking.top_index, ranking.top_score, system.name)
        table = pa.table({"query_id": corpus.query_ids, **per_query}, schema=per_query_metrics_schema(list(per_query)))
        write_parquet_atomic(table, per_query_path(self.reports_dir, corpus.name, system.name))
        b = self.config.bootstrap
        documents = np.asarray(corpus.query_documents)
        run = SystemRun(
            task=corpus.name,
            system=system.name,
            kind=system.kind,
            status="ok",
            description=indexed.description,
            metrics={name: self._summary(values, documents) for name, values in per_query.items()},
            document_ndcg10=self._summary(metrics_from_gold_rank(ranking.doc_rank, (10,))[HEADLINE], documents),
            by_position=by_position(
                headline, corpus.chunk_index[corpus.gold], documents, b.resamples, b.confidence, b.seed
            ),
            scaling=scaling_curve(ranking.subset_rank, self.subset_size),
            index_seconds=round(indexed.index_seconds, 3),
            documents_per_second=round(corpus.n_documents / indexed.index_seconds, 3)
            if indexed.index_seconds > 0
            else None,
            query_seconds=round(indexed.query_seconds + rank_seconds, 3),
            llm_tokens=llm_usage.tokens if llm_usage and system.kind == "contextual" else None,
            llm_usd=llm_usage.usd if llm_usage and system.kind == "contextual" else None,
            run_file=_relative(run_path, self.reports_dir),
            # ``trained``: the training asset of the model (None: an untrained model; read by
            # evaluation/reports/reading.py)
            details={**indexed.details, "trained": system.trained} if hasattr(system, "trained") else indexed.details,
            subset_metrics=self._subset_metrics(per_query, documents),
            provenance=base.provenance,
            provenance_note=base.provenance_note,
            role=role,
        )
        self.log(
            f"{system.name}: nDCG@10 {run.metrics[HEADLINE].value:.3f} "
            f"[{run.metrics[HEADLINE].ci_low:.3f}, {run.metrics[HEADLINE].ci_high:.3f}] over {corpus.n_queries:,} "
            f"queries of {corpus.n_documents:,} documents; indexed in {indexed.index_seconds:.1f} s"
        )
        return run

    def _subset_metrics(self, per_query: dict[str, np.ndarray], documents: np.ndarray) -> dict[str, dict]:
        """Every metric's summary on the ``needs_context`` queries (``{}`` when the subset is not reported)."""
        if self.needs_context is None:
            return {}
        mask = self.needs_context
        return {NEEDS_CONTEXT: {name: self._summary(v[mask], documents[mask]) for name, v in per_query.items()}}

    def chunk_size_points(
        self,
        sources: SpanSources,
        systems: Sequence[SystemConfig],
        encodings: Mapping[EncodingKey, EncodingOutcome],
    ) -> list[ChunkSizePoint]:
        points = []
        for size in self.config.chunk_sizes.sizes:
            corpus = rechunk_corpus(
                sources.documents, sources.queries, size, name=self.corpus.name, split=self.corpus.split
            )
            self.log(f"chunk size {size}: {corpus.n_chunks:,} chunks, {corpus.n_queries:,} queries")
            for system in systems:
                try:
                    indexed = self.prepare(system, corpus, encodings, size)
                    ranking = self._rank(indexed, corpus, None, f"{system.name}@{size}")
                except NotRunnable as reason:
                    self.skipped.append(f"chunk size {size}: {system.name} not run: {reason}")
                    self.log(self.skipped[-1])
                    continue
                except Exception as error:  # one system's failure stays its own (module docstring)
                    status, why = self.failure(system, error)
                    self.skipped.append(f"chunk size {size}: {system.name} {status.replace('_', ' ')}: {why}")
                    self.log(self.skipped[-1])
                    continue
                ndcg = metrics_from_gold_rank(ranking.gold_rank, (10,))[HEADLINE]
                summary = self._summary(ndcg, corpus.query_documents)
                points.append(
                    ChunkSizePoint(
                        task=self.corpus.name,
                        system=system.name,
                        chunk_size=size,
                        value=summary.value,
                        ci_low=summary.ci_low,
                        ci_high=summary.ci_high,
                        n_queries=summary.n_queries,
                        n_chunks=corpus.n_chunks,
                        n_documents=summary.n_documents,
                    )
                )
                self.log(f"chunk size {size}: {system.name} nDCG@10 {summary.value:.3f}")
            self.release(size)
        return points


def _validate(
    validation: EvalCorpus | None,
    config: EvaluationConfig,
    selected: Sequence[SystemConfig],
    models_dir: Path,
    reports_dir: Path,
    log: Log,
    show_progress: bool,
    unfitted: dict[str, str],
):
    """Fitted fusion weights and the choice of :func:`evaluation.select.fit_and_select` on ``validation`` (({}, None)
    without it): the fusions fitted are those selected or candidates; systems are prepared once on ``validation``;
    ``unfitted`` receives why a fusion's weights were not fitted."""
    names = {s.name for s in selected} | set(config.select)
    fusions = [s for s in config.systems if isinstance(s, FusionSystem) and s.fitted and s.name in names]
    if validation is None or not (fusions or config.select):
        return {}, None
    needed = {c.name for s in config.systems for c in config.components(s)}
    evaluator = _Evaluator(validation, config, models_dir, reports_dir, log, show_progress, needed)

    def prepare(system: SystemConfig) -> IndexedSystem:
        return evaluator.prepare(system, validation, {}, log=None)

    log(f"{validation.name}: validation split, {validation.n_documents} documents, {validation.n_queries} queries")
    try:
        return fit_and_select(config, validation, prepare, fusions, log=log, unfitted=unfitted)
    finally:
        evaluator.release(None)


def evaluate_task(
    corpus: EvalCorpus,
    config: EvaluationConfig,
    *,
    models_dir: Path,
    reports_dir: Path,
    systems: Sequence[str] | None = None,
    sources: SpanSources | None = None,
    no_sources_reason: str | None = None,
    llm_usage: LLMUsage | None = None,
    chunk_sizes: bool = True,
    encodings: Mapping[EncodingKey, EncodingOutcome] | None = None,
    log: Log = logger.info,
    show_progress: bool = False,
    validation: EvalCorpus | None = None,
) -> TaskEvaluation:
    """Evaluate ``systems`` (default: every configured one) on ``corpus`` and write the task's files.

    ``validation``: the task's validation split (documents disjoint from train and test): the weights of fusions with
    ``fit: validation`` are fitted on it and the pipeline of ``evaluation.select`` chosen on it
    (:mod:`evaluation.select`) before ``corpus`` is evaluated; nothing of ``corpus`` is read for either.

    Systems with a missing requirement are recorded as ``not_run`` with the reason; a system that
    raises is recorded as ``failed`` with the error and the others still run (callers decide whether
    a failure fails the run). ``sources`` enable the chunk-size study (span-annotated tasks only);
    without them ``no_sources_reason`` is recorded as the study's note. ``encodings``: chunk sides encoded elsewhere
    (the evaluation's encode shards, ``evaluation/sharding.py``), used instead of encoding here; a system (or study
    point) without one encodes its chunks here.
    """
    with summarized_warnings(log):
        return _evaluate_task(
            corpus, config, models_dir, reports_dir, systems, sources, no_sources_reason, llm_usage, chunk_sizes,
            encodings or {}, log, show_progress, validation,
        )  # fmt: skip


def _evaluate_task(
    corpus: EvalCorpus,
    config: EvaluationConfig,
    models_dir: Path,
    reports_dir: Path,
    systems: Sequence[str] | None,
    sources: SpanSources | None,
    no_sources_reason: str | None,
    llm_usage: LLMUsage | None,
    chunk_sizes: bool,
    encodings: Mapping[EncodingKey, EncodingOutcome],
    log: Log,
    show_progress: bool,
    validation: EvalCorpus | None = None,
) -> TaskEvaluation:
    """:func:`evaluate_task` without the warning summary."""
    selected = [config.system(name) for name in systems] if systems else list(config.systems)
    unfitted: dict[str, str] = {}
    fitted, selection = _validate(validation, config, selected, models_dir, reports_dir, log, show_progress, unfitted)
    study = config.chunk_sizes
    study_systems = [config.system(name) for name in study.systems if not systems or name in systems]
    needed = {c.name for s in [*selected, *study_systems] for c in config.components(s)}
    evaluator = _Evaluator(corpus, config, models_dir, reports_dir, log, show_progress, needed)
    evaluator.unfitted = unfitted
    task_runs = runs_dir(reports_dir, corpus.name)
    gold_ids = [corpus.chunk_ids[g] for g in corpus.gold]
    qrels_path = trec.write_qrels(task_runs / "qrels.trec", corpus.query_ids, gold_ids)
    subset_rows = np.flatnonzero(evaluator.needs_context) if evaluator.needs_context is not None else None
    subset_ids: list[str] | None = None
    subset_qrels: dict[str, str] = {}
    if subset_rows is not None:  # the subset's own qrels: trec_eval (and verify.py) can score it alone
        subset_ids = [corpus.query_ids[r] for r in subset_rows]
        path = trec.write_qrels(
            task_runs / f"qrels.{NEEDS_CONTEXT}.trec", subset_ids, [gold_ids[r] for r in subset_rows]
        )
        subset_qrels[NEEDS_CONTEXT] = _relative(path, reports_dir)
    previous = load_evaluation(reports_dir, corpus.name)
    fingerprint = corpus.fingerprint()
    if previous is not None and previous.corpus_fingerprint != fingerprint:
        if systems:
            log(
                f"{corpus.name}: the corpus changed since the last evaluation: earlier results of other systems dropped"
            )
        previous = None
    runs: dict[str, SystemRun] = {}
    if previous is not None and systems:
        runs = {run.system: run for run in previous.runs if run.system in {s.name for s in config.systems}}
    log(
        f"{corpus.name}: {corpus.n_documents:,} documents, {corpus.n_chunks:,} chunks, {corpus.n_queries:,} queries; "
        f"systems: {', '.join(s.name for s in selected)}"
    )
    for system in selected:
        try:
            run = evaluator.run_system(with_weights(system, config, fitted), llm_usage, encodings)
        except Exception as error:  # one broken system must not hide the others' results
            if not isinstance(error, ScoresNaN):  # NaN scores: the reason says it all; anything else: its traceback
                logger.debug("system %s failed on %s", system.name, corpus.name, exc_info=True)
            status, reason = evaluator.failure(system, error)
            log(f"{system.name}: {'FAILED' if status == 'failed' else 'not run'}: {reason}")
            run = SystemRun(task=corpus.name, system=system.name, kind=system.kind, status=status, reason=reason)
        runs[system.name] = run
    evaluator.release(None)
    order = [s.name for s in config.systems]
    evaluation = TaskEvaluation(
        task=corpus.name,
        source=corpus.source,
        split=corpus.split,
        n_documents=corpus.n_documents,
        n_chunks=corpus.n_chunks,
        n_queries=corpus.n_queries,
        runs=sorted(runs.values(), key=lambda r: order.index(r.system)),
        qrels_file=_relative(qrels_path, reports_dir),
        subset_qrels_files=subset_qrels,
        notes=list(corpus.notes),
        corpus_fingerprint=fingerprint,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        n_needs_context=corpus.n_needs_context,
        selection=selection,
    )
    if config.select and validation is None:
        evaluation.notes.append(f"no pipeline chosen: {corpus.name} has no validation split (evaluation.select)")
    documents = dict(zip(corpus.query_ids, corpus.query_documents, strict=True))
    evaluation.comparisons = compare_systems(evaluation, config, reports_dir, corpus.query_ids, documents)
    if subset_ids is not None:
        evaluation.subset_comparisons = compare_systems(
            evaluation, config, reports_dir, subset_ids, documents, NEEDS_CONTEXT
        )
    adjust_family(evaluation.comparisons + evaluation.subset_comparisons)  # one family: the task's comparisons
    if not (study.enabled and chunk_sizes):
        evaluation.chunk_size_note = "chunk-size study disabled"
        if previous is not None and previous.chunk_sizes:
            evaluation.chunk_sizes = previous.chunk_sizes
            evaluation.chunk_size_note = "chunk-size study not rerun (disabled): points of the previous evaluation"
    elif sources is None:
        evaluation.chunk_size_note = no_sources_reason or "no span-annotated source documents: chunk-size study not run"
    else:
        evaluation.chunk_sizes = evaluator.chunk_size_points(
            sources, [with_weights(s, config, fitted) for s in study_systems], encodings
        )
        evaluation.notes += evaluator.skipped
        if systems and previous is not None:
            kept = [p for p in previous.chunk_sizes if p.system not in {s.name for s in study_systems}]
            evaluation.chunk_sizes = kept + evaluation.chunk_sizes
    write_text_atomic(to_json(evaluation), evaluation_path(reports_dir, corpus.name))
    return evaluation
