"""The runner: merging runs of earlier evaluations, refusing to merge across corpus changes, failures."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import evaluation.run_files as run_files
import evaluation.runner as runner
from conteb.schemas import per_query_metrics_schema
from curation.sources.sample import load_sample
from evaluation.config import BM25System, EvaluationConfig
from evaluation.metrics.verify import verify_against_trec_eval
from evaluation.rechunk import SpanSources
from evaluation.run_files import load_evaluation
from evaluation.runner import evaluate_task
from tests.conftest import SAMPLE_DIR
from tests.evaluation.toy import toy_corpus

CONFIG = EvaluationConfig(
    systems=(
        BM25System(kind="bm25", name="bm25"),
        BM25System(kind="bm25", name="bm25-plain", stemmer=None, stopwords=None),
    ),
    bootstrap={"resamples": 100},
    significance={"resamples": 100, "comparisons": [("bm25", "bm25-plain")]},
    chunk_sizes={"enabled": False, "systems": []},
)


def evaluate(corpus, reports: Path, systems=None):
    return evaluate_task(corpus, CONFIG, models_dir=reports / "models", reports_dir=reports, systems=systems)


def test_later_runs_of_one_system_keep_the_others(tmp_path: Path) -> None:
    corpus = toy_corpus()
    evaluate(corpus, tmp_path, ["bm25"])
    second = evaluate(corpus, tmp_path, ["bm25-plain"])
    assert [run.system for run in second.runs] == ["bm25", "bm25-plain"]
    assert [(c.system_a, c.system_b) for c in second.comparisons] == [("bm25", "bm25-plain")]
    assert load_evaluation(tmp_path, "toy").corpus_fingerprint == corpus.fingerprint()
    assert verify_against_trec_eval(second, tmp_path) == []


def test_a_changed_corpus_drops_earlier_results(tmp_path: Path) -> None:
    evaluate(toy_corpus(), tmp_path, ["bm25"])
    changed = toy_corpus()
    changed = dataclasses.replace(changed, chunks=[*changed.chunks[:-1], "The city is known for its bridges."])
    assert changed.fingerprint() != toy_corpus().fingerprint()
    second = evaluate(changed, tmp_path, ["bm25-plain"])
    assert [run.system for run in second.runs] == ["bm25-plain"]


def test_a_failing_system_is_reported_and_the_others_still_run(tmp_path: Path, monkeypatch) -> None:
    real = runner.prepare_system

    def flaky(system, *args, **kwargs):
        if system.name == "bm25":
            raise RuntimeError("index exploded")
        return real(system, *args, **kwargs)

    monkeypatch.setattr(runner, "prepare_system", flaky)
    evaluation = evaluate(toy_corpus(), tmp_path)
    statuses = {run.system: (run.status, run.reason) for run in evaluation.runs}
    assert statuses == {"bm25": ("failed", "RuntimeError: index exploded"), "bm25-plain": ("ok", None)}


def test_verify_catches_a_tampered_run_file(tmp_path: Path) -> None:
    evaluation = evaluate(toy_corpus(), tmp_path)
    path = tmp_path / evaluation.run("bm25").run_file
    lines = path.read_text().splitlines()
    first_query = lines[0].split()[0]
    kept = [line for line in lines if line.split()[0] != first_query]  # that query now retrieves nothing
    path.write_text("\n".join(kept) + "\n")
    problems = verify_against_trec_eval(evaluation, tmp_path)
    assert problems and "bm25: ndcg@10 reported" in problems[0]


def test_unknown_system_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="no evaluation system named 'ghost'"):
        evaluate(toy_corpus(), tmp_path, ["ghost"])


def test_why_the_chunk_size_study_did_not_run_is_written_to_the_file(tmp_path: Path) -> None:
    config = CONFIG.model_copy(update={"chunk_sizes": CONFIG.chunk_sizes.model_copy(update={"enabled": True})})
    reason = "queries have no answer spans: the chunk-size study needs span-annotated queries"
    evaluate_task(
        toy_corpus(), config, models_dir=tmp_path, reports_dir=tmp_path, systems=["bm25"], no_sources_reason=reason
    )
    assert load_evaluation(tmp_path, "toy").chunk_size_note == reason


def test_per_query_metrics_are_written_with_the_declared_schema(tmp_path: Path) -> None:
    evaluation = evaluate(toy_corpus(), tmp_path, ["bm25"])
    table = pq.read_table(run_files.per_query_path(tmp_path, "toy", "bm25"))
    metrics = list(evaluation.run("bm25").metrics)
    assert table.schema.equals(per_query_metrics_schema(metrics))
    assert table.column_names == ["query_id", *metrics]  # query_id (string), then float64 per metric
    ndcg = run_files.read_per_query(tmp_path, "toy", "bm25", "ndcg@10")
    assert list(ndcg) == toy_corpus().query_ids
    assert sum(ndcg.values()) / len(ndcg) == pytest.approx(evaluation.run("bm25").metrics["ndcg@10"].value)
    assert run_files.read_per_query(tmp_path, "toy", "bm25-plain", "ndcg@10") is None  # not evaluated


def test_the_documents_of_the_queries_come_from_the_qrels(tmp_path: Path) -> None:
    """read_query_documents: each query's document is its gold chunk id's document part, as the corpus counts it
    (the unit of the reproduce report's tests); a task that wrote no qrels has none."""
    corpus = toy_corpus()
    evaluate(corpus, tmp_path, ["bm25"])
    assert run_files.read_query_documents(tmp_path, "toy") == dict(
        zip(corpus.query_ids, corpus.query_documents, strict=True)
    )
    assert run_files.read_query_documents(tmp_path, "absent") is None
    # public ids: the document part is everything before the last "_"
    from evaluation.metrics import trec

    trec.write_qrels(run_files.runs_dir(tmp_path, "public") / "qrels.trec", ["a", "b"], ["Doc_Title_12", "x-y_0"])
    assert run_files.read_query_documents(tmp_path, "public") == {"a": "Doc_Title", "b": "x-y"}


def test_a_system_scoring_nan_fails_alone_and_what_fuses_it_does_not_run(tmp_path: Path, monkeypatch) -> None:
    """A system scoring NaN inside a fitted fusion, a hybrid and evaluation.select: it fails with one line, what needs
    it is not run with its reason, on validation and on test, and every other result and the report are written."""
    from evaluation.reports.publish import write_task_report

    real = runner.prepare_system

    def nan_scores(system, *args, **kwargs):
        prepared = real(system, *args, **kwargs)
        if system.name == "bm25-plain":
            scored = prepared.score_block

            def score_block(rows):
                scores = np.array(scored(rows), dtype=np.float32)
                scores[rows == 1] = np.nan  # the second query only
                return scores

            prepared.score_block = score_block
        return prepared

    monkeypatch.setattr(runner, "prepare_system", nan_scores)
    config = EvaluationConfig.model_validate(
        {
            "systems": [
                {"name": "fused", "kind": "fusion", "systems": ["bm25", "bm25-plain"]},  # before its components
                {"name": "bm25", "kind": "bm25"},
                {"name": "bm25-plain", "kind": "bm25", "stemmer": None, "stopwords": None},
                {"name": "hybrid", "kind": "hybrid", "systems": ["bm25", "bm25-plain"]},
            ],
            "select": ["bm25", "bm25-plain", "fused", "hybrid"],
            "bootstrap": {"resamples": 100},
            "chunk_sizes": {"sizes": [4000], "systems": ["bm25-plain", "hybrid", "bm25"]},
        }
    )
    lines: list[str] = []
    validation = dataclasses.replace(toy_corpus(), split="validation")
    sample = load_sample(SAMPLE_DIR)  # the chunk-size study re-chunks the sample's span-annotated sources
    sources = SpanSources(sample.documents_table(), sample.queries_table())
    evaluation = evaluate_task(
        toy_corpus(), config, models_dir=tmp_path, reports_dir=tmp_path, validation=validation, log=lines.append,
        sources=sources,
    )  # fmt: skip
    nan = "scores are NaN for 1 of 3 queries (first: query row 1)"
    needs = f"needs bm25-plain, which failed: {nan}"
    statuses = {run.system: (run.status, run.reason) for run in evaluation.runs}
    assert statuses == {
        "fused": ("not_run", f"weights not fitted on validation: {needs}"),
        "bm25": ("ok", None),
        "bm25-plain": ("failed", nan),
        "hybrid": ("not_run", needs),
    }
    assert f"bm25-plain: FAILED: {nan}" in lines and f"hybrid: not run: {needs}" in lines
    selection = evaluation.selection
    assert selection is not None and selection.chosen == "bm25"
    assert selection.notes == [
        f"bm25-plain: failed on validation: {nan}",
        f"fused: weights not fitted: {needs}",
        f"hybrid: not run on validation: {needs}",
    ]
    assert load_evaluation(tmp_path, "toy").run("bm25").status == "ok"
    assert [point.system for point in evaluation.chunk_sizes] == ["bm25"]
    study = "scores are NaN for 1 of 195 queries (first: query row 1)"  # the sample's queries, re-chunked
    assert [note for note in evaluation.notes if note.startswith("chunk size")] == [
        f"chunk size 4000: bm25-plain failed: {study}",
        f"chunk size 4000: hybrid not run: needs bm25-plain, which failed: {study}",
    ]
    report = (tmp_path / write_task_report(evaluation, tmp_path)["tasks/toy/report.md"]).read_text(encoding="utf-8")
    assert f"**bm25-plain** (failed): {nan}" in report and f"**hybrid** (not run): {needs}" in report
