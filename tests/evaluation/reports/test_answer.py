"""The report leads with the answer (evaluation/reports/answer.py): its first lines, on a real small evaluation with a
validation split, in the task report and in the reproduce report."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from assets.evaluation import run_metadata
from evaluation.config import EvaluationConfig
from evaluation.corpus import EvalCorpus
from evaluation.reports.markdown import render_markdown
from evaluation.reports.overall import overall_document
from evaluation.reports.paper import PaperComparison
from evaluation.reports.publish import write_task_report
from evaluation.reports.reproduce import reproduce_document
from evaluation.runner import evaluate_task
from tests.evaluation.toy import save_tiny_model, toy_corpus

SYSTEMS = [
    {"name": "bm25", "kind": "bm25"},
    {"name": "bm25-title", "kind": "bm25", "context": "title"},
    {"name": "insent", "kind": "dense", "trained": "insent_model", "context": "late"},
    {"name": "fused-insent", "kind": "fusion", "systems": ["bm25", "insent"]},
]


def _labelled(corpus: EvalCorpus, gold: list[int], split: str) -> EvalCorpus:
    mask = np.array([True, False, True])
    return dataclasses.replace(corpus, gold=np.array(gold, dtype=np.int64), split=split, needs_context=mask)


def _evaluate(tmp_path: Path, select: list[str]):
    save_tiny_model(tmp_path / "models" / "insent_model")
    config = EvaluationConfig.model_validate(
        {
            "systems": SYSTEMS,
            "select": select,
            "chunk_sizes": {"sizes": []},
            "bootstrap": {"resamples": 100},
            "significance": {"resamples": 100},
        }
    )
    return evaluate_task(
        _labelled(toy_corpus(), [2, 3, 5], "test"),
        config,
        models_dir=tmp_path / "models",
        reports_dir=tmp_path / "reports",
        validation=_labelled(toy_corpus(), [2, 3, 5], "validation"),
    )


def _first_lines(markdown: str, n: int) -> list[str]:
    return [line for line in markdown.splitlines() if line.strip()][:n]


def test_the_task_report_opens_with_the_recommended_pipeline(tmp_path: Path) -> None:
    evaluation = _evaluate(tmp_path, ["fused-insent"])
    written = write_task_report(evaluation, tmp_path / "reports")
    markdown = next(path for name, path in written.items() if name.endswith("report.md")).read_text()
    fused = evaluation.run("fused-insent")
    assert fused is not None and fused.status == "ok"
    weights = fused.details["weights"]
    lines = _first_lines(markdown, 6)
    assert lines[1] == "## Recommended pipeline"
    assert lines[2].startswith(
        f"Recommended: fused-insent ({weights['bm25']:.2g} × bm25 + {weights['insent']:.2g} × insent; weights fitted"
    )
    assert lines[3] == "Contains the model trained here: yes (insent)."
    all_q, needs = fused.summary(), fused.summary("ndcg@10", "needs_context")
    assert lines[4] == (
        f"Test nDCG@10 (95% CI over documents): all queries {all_q.value:.3f} [{all_q.ci_low:.3f}, "
        f"{all_q.ci_high:.3f}] (3 queries of 3 documents); needs_context {needs.value:.3f} [{needs.ci_low:.3f}, "
        f"{needs.ci_high:.3f}] (2 queries of 2 documents)."
    )
    assert lines[5].startswith("Against the best cheap baseline on the same test queries: all queries: ")
    assert " against bm25" in lines[5] and "needs_context: " in lines[5]
    # three documents can never reach 0.05: the line says so beside its adjusted p, queries and documents
    assert "no measurable difference (3 documents: too few for any difference to reach p \\< 0.05)" in lines[5]
    assert "adjusted p = " in lines[5] and "randomization over documents, 3 queries of 3 documents)" in lines[5]
    # the overall report (the quickstart's data/reports/report.md) names it first too
    overall = _first_lines(render_markdown(overall_document([evaluation], {})), 3)
    assert overall[1:] == [
        "## Recommended pipeline",
        f"- toy: {lines[2].removeprefix('Recommended: ').removesuffix('.')} (contains the model trained here): test "
        f"nDCG@10 {all_q.value:.3f} on all queries, {needs.value:.3f} on needs_context (chosen on validation)",
    ]


def test_a_chosen_cheap_baseline_and_the_reproduce_report(tmp_path: Path) -> None:
    evaluation = _evaluate(tmp_path, ["bm25-title"])
    assert evaluation.selection is not None and evaluation.selection.chosen == "bm25-title"
    lines = _first_lines(render_markdown(reproduce_document(PaperComparison("toy", "test"), evaluation, [], {})), 5)
    assert lines[1:4] == [
        "## Recommended pipeline",
        "Recommended: bm25-title.",
        "Contains the model trained here: no.",
    ]
    assert lines[4].startswith("Test nDCG@10 (95% CI over documents): all queries ")
    assert run_metadata(evaluation)["recommended"].value == "bm25-title"  # the Dagster asset's metadata
