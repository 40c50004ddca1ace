"""The reproduce report's description of the profile (evaluation/reports/profile.py): built from the settings as
trained and the evaluations as run, so an overridden setting changes its sentence; the paper's setting differs in
nothing."""

from __future__ import annotations

from evaluation.reports.profile import TrainedModel, model_line, profile_lines, scaled_down_line
from evaluation.results import Summary, SystemRun, TaskEvaluation

SETTINGS = {  # training/config.py fields as load_training_config fills them in (the CPU profile's values)
    "base_model": "offline-minilm", "context": "late", "window_policy": "anchored", "anchor_share": 0.4,
    "header": None, "max_length": None, "batch_docs": 2, "epochs": 2, "max_steps": None, "lr": 5e-05,
    "lambda_seq": 0.1, "window_overlap_chunks": 0, "attention_dropout": 0.0,
}  # fmt: skip


def evaluation(task: str = "reproduce", max_length: int = 512) -> TaskEvaluation:
    run = SystemRun(
        task, "insent-anchored", "dense", "ok", metrics={"ndcg@10": Summary(0.7, 0.6, 0.8, 40)},
        details={"max_length": max_length},
    )  # fmt: skip
    return TaskEvaluation(
        task, "src", "test", n_documents=15, n_chunks=300, n_queries=400, runs=[run], n_needs_context=120
    )


def model(**overrides) -> TrainedModel:
    return TrainedModel("insent-anchored", {**SETTINGS, **overrides}, {"reproduce": 9, "reproduce-sotu": 4})


def test_the_description_is_built_from_the_settings_as_trained() -> None:
    evaluations = [evaluation(), evaluation("reproduce-heldout")]
    lines = profile_lines([model()], evaluations, max_documents=24)
    assert lines == [
        "`insent-anchored` as trained: base model `offline-minilm`, 512-token windows (the model's context), late "
        "chunking, anchored windows, the head at most 40% of the window, no header; 2 documents per batch, 2 epochs, "
        "lr 5e-05, λ_seq 0.1, window overlap 0 chunks, attention dropout 0.0; trained on the documents of "
        "`reproduce` 9; `reproduce-sotu` 4.",
        "Evaluated: `reproduce` (test: 15 documents, 400 queries, 120 need context); `reproduce-heldout` (test: 15 "
        "documents, 400 queries, 120 need context).",
        "Differs from the paper's setting: base model `offline-minilm` instead of `lightonai/modernbert-embed-large`; "
        "512-token windows instead of 8,192; 2 documents per batch instead of 4; the first 24 SQuAD v1.1 dev "
        "articles instead of every one.",
    ]


def test_an_overridden_setting_changes_its_sentence() -> None:
    evaluations = [evaluation()]
    before = model_line(model(), evaluations)
    for overrides, shown in (
        ({"batch_docs": 3}, "3 documents per batch"),
        ({"max_steps": 1}, "1 optimizer step,"),
        ({"lr": 2e-05}, "lr 2e-05"),
        ({"max_length": 256}, "256-token windows,"),
        ({"header": "title"}, "each chunk under its title header"),
        ({"window_policy": "plain"}, "late chunking, plain windows"),
        ({"base_model": "/models/tiny"}, "base model `/models/tiny`"),
    ):
        after = model_line(model(**overrides), evaluations)
        assert shown in after and shown not in before, overrides
    assert "3 documents per batch instead of 4" in scaled_down_line([model(batch_docs=3)], evaluations, None)
    # the window the evaluation recorded when training left max_length to the model
    assert "8,192-token windows (the model's context)" in model_line(model(), [evaluation(max_length=8192)])
    control = model_line(model(context="independent", window_policy="plain"), evaluations)
    assert "each chunk encoded alone, no header" in control and "λ_seq" not in control


def test_the_papers_setting_differs_in_nothing() -> None:
    paper = model(base_model="lightonai/modernbert-embed-large", batch_docs=4)
    assert scaled_down_line([paper], [evaluation(max_length=8192)], None) is None
    assert len(profile_lines([paper], [evaluation(max_length=8192)], None)) == 2
