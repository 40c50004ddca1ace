"""How the choice was made, in the reports (evaluation/reports/selection.py): the validation part of the recommended
pipeline (in-sample scores marked, the rule that decided, what the earlier rule would have chosen), and the count of
choices each rule changed across the reproduce tasks."""

from __future__ import annotations

from evaluation.reports.document import Document
from evaluation.reports.markdown import render_markdown
from evaluation.reports.selection import rule_count_blocks, rule_counts, validation_blocks
from evaluation.results import Selection

RECORD = {
    "earlier rule": "fused",
    "shrunk weights": "fused",
    "cross-validated scores": "insent",
    "tie rule": "bm25-title",
    "simplicity": "bm25-title",
}


def _selection(**fields) -> Selection:
    values = {
        "split": "validation",
        "candidates": ["insent", "fused", "bm25-title"],
        "chosen": "bm25-title",
        "validation": {
            "insent": {"needs_context": 0.8, "all": 0.85},
            "fused": {"needs_context": 0.78, "all": 0.8},
            "bm25-title": {"needs_context": 0.8, "all": 0.85},
        },
        "in_sample": {"fused": {"needs_context": 0.82, "all": 0.86}},
        "fitted_weights": {"fused": {"bm25-title": 0.5, "insent": 0.5}},
        "grid_best": {"fused": {"bm25-title": 0.9, "insent": 0.1}},
        "tiers": {"insent": 1, "fused": 2, "bm25-title": 0},
        "folds": 5,
        "n_documents": 8,
        "n_queries": 40,
        "decision": "simplest: bm25-title, the best cheap baseline; no more complex candidate led by a supported "
                    "margin",
        "by_rule": RECORD,
        "notes": ["cannot decide between bm25-title, insent on validation: each 0.800 / 0.850 (needs_context / all); "
                  "bm25-title taken as the simplest"],
    }  # fmt: skip
    return Selection(**{**values, **fields})


def _markdown(blocks) -> str:
    return render_markdown(Document("r", tuple(blocks)))


def test_the_validation_part_marks_in_sample_scores_and_says_what_decided() -> None:
    markdown = _markdown(validation_blocks(_selection()))
    assert "Chosen on the validation split (8 documents, 40 queries, disjoint from train and test): the simplest" in (
        markdown
    )
    assert "Decided by: simplest: bm25-title, the best cheap baseline; no more complex candidate led" in markdown
    assert (
        "The earlier rule (the highest in-sample score, ties to the first declared) would have chosen fused; changed "
        "by fitted fusions scored out of fold (cross-validation over documents): insent; exact ties to the simpler, "
        "then by name (not the first declared): bm25-title." in markdown
    )
    assert "Weights shrunk toward equal (one-standard-error rule over documents): fused from 0.9 bm25-title / 0.1 " in (
        markdown
    )
    assert "(a fitted fusion's cross-validated: each query scored by weights fitted on the other 4 of 5 folds of " in (
        markdown
    )
    assert "| fused | fusion with a model | 0.780 | 0.800 | 0.820 / 0.860 |" in markdown
    assert "| bm25-title (chosen) | cheap baseline | 0.800 | 0.850 | – |" in markdown
    assert "Notes: cannot decide between bm25-title, insent on validation" in markdown


def test_an_older_file_labels_its_fusion_scores_in_sample() -> None:
    older = _selection(in_sample={}, grid_best={}, tiers={}, folds=0, decision="", by_rule={}, notes=[])
    markdown = _markdown(validation_blocks(older))
    assert "Validation nDCG@10 of each candidate (in-sample for fitted fusions: written before cross-validation):" in (
        markdown
    )
    assert "| fused | – | 0.780 | 0.800 |" in markdown and "In-sample" not in markdown
    assert "Decided by" not in markdown and "The earlier rule" not in markdown and "Weights shrunk" not in markdown


def test_how_often_each_rule_changed_a_choice_across_tasks() -> None:
    unchanged = _selection(by_rule=dict.fromkeys(RECORD, "bm25-title"), grid_best={})
    older = _selection(by_rule={}, grid_best={})
    selections = [("squad", _selection()), ("held-out", unchanged), ("old", older)]
    assert rule_counts([s for _, s in selections]) == {
        "shrunk weights": 0,
        "cross-validated scores": 1,
        "tie rule": 1,
        "simplicity": 0,
        "recorded": 2,
        "shrunk": 1,
    }
    markdown = _markdown(rule_count_blocks(selections))
    assert "## How the pipeline was chosen, task by task" in markdown
    assert "Across 3 task(s) with a choice (2 with the record), the earlier rule's choice changed on 1: " in markdown
    assert "the shrinkage moved the weights of 1 fitted fusion(s)" in markdown
    assert "| squad | bm25-title | fused | cross-validated scores, tie rule | simplest: bm25-title" in markdown
    assert "| old | bm25-title | not recorded | – |" in markdown
    assert rule_count_blocks([]) == []
