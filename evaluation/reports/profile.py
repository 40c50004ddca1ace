"""The reproduce report's description of the profile, built from the settings actually used.

Contract: pure functions of what the reproduce job wrote — each trained model's training settings as run (its
``<model>.train.yaml`` with the training defaults filled in, :class:`TrainedModel`, read by the Dagster layer), the
documents it was trained on (``training_data.json``) and the evaluations of the evaluated tasks
(:class:`~evaluation.results.TaskEvaluation`: sizes, and each run's ``details["max_length"]``, the window the encoder
used). :func:`profile_lines` returns one line per trained model, one for the evaluated tasks and, where the run
differs from the paper's setting (:data:`conteb.reproduce.GPU_PROFILE`, ModernBERT-embed-large with 8k-token windows,
4 documents per batch, every SQuAD dev article), one line naming each difference. Nothing here is a fixed sentence:
override a setting and its line changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conteb.reproduce import GPU_PROFILE
from evaluation.results import TaskEvaluation

PAPER_WINDOW_TOKENS = 8192
"""The paper's window (ModernBERT-embed-large's context, 8k tokens)."""


@dataclass(frozen=True)
class TrainedModel:
    """One trained model of the experiment: its evaluation ``system``, its training ``settings`` as run
    (``training/config.py`` fields) and the documents it was trained on per task (empty: not recorded)."""

    system: str
    settings: Mapping[str, Any]
    training_documents: Mapping[str, int] = field(default_factory=dict)


def _evaluated_window(system: str, evaluations: Sequence[TaskEvaluation]) -> int | None:
    """The window (tokens) the encoder of ``system`` used when evaluated, as the run recorded it."""
    for evaluation in evaluations:
        run = evaluation.run(system)
        length = run.details.get("max_length") if run is not None else None
        if isinstance(length, int):
            return length
    return None


def window_tokens(model: TrainedModel, evaluations: Sequence[TaskEvaluation]) -> int | None:
    """The window length the model was trained with: ``max_length`` when set, else the model's own context as its
    evaluation recorded it; ``None`` when neither is known."""
    length = model.settings.get("max_length")
    return length if isinstance(length, int) else _evaluated_window(model.system, evaluations)


def _window_text(model: TrainedModel, evaluations: Sequence[TaskEvaluation]) -> str:
    length = window_tokens(model, evaluations)
    source = "" if isinstance(model.settings.get("max_length"), int) else " (the model's context)"
    return (
        "windows of the model's context (length not recorded)"
        if length is None
        else f"{length:,}-token windows{source}"
    )


def _layout_text(settings: Mapping[str, Any]) -> str:
    """Context, window policy and header, as trained."""
    if settings.get("context") == "independent":
        layout = "each chunk encoded alone"
    elif settings.get("window_policy") == "anchored":
        share = settings.get("anchor_share")
        cap = f", the head at most {share:.0%} of the window" if isinstance(share, int | float) else ""
        layout = f"late chunking, anchored windows{cap}"
    else:
        layout = "late chunking, plain windows"
    header = settings.get("header")
    return layout + (f", each chunk under its {header} header" if header else ", no header")


def _schedule_text(settings: Mapping[str, Any]) -> str:
    """Batch, epochs or steps, learning rate, λ_seq, window overlap and attention dropout, as trained."""
    steps = settings.get("max_steps")
    parts = [
        f"{settings.get('batch_docs')} documents per batch",
        f"{steps} optimizer step{'' if steps == 1 else 's'}" if steps else f"{settings.get('epochs')} epochs",
        f"lr {settings.get('lr')}",
    ]
    if settings.get("context") != "independent":
        parts.append(f"λ_seq {settings.get('lambda_seq')}")
        parts.append(f"window overlap {settings.get('window_overlap_chunks')} chunks")
    if settings.get("attention_dropout") is not None:
        parts.append(f"attention dropout {settings['attention_dropout']}")
    return ", ".join(parts)


def model_line(model: TrainedModel, evaluations: Sequence[TaskEvaluation]) -> str:
    """How one model was trained: base model, window length, layout and header, schedule, training documents."""
    documents = "; ".join(f"`{task}` {n:,}" for task, n in model.training_documents.items())
    trained_on = f"; trained on the documents of {documents}" if documents else ""
    return (
        f"`{model.system}` as trained: base model `{model.settings.get('base_model')}`, "
        f"{_window_text(model, evaluations)}, {_layout_text(model.settings)}; {_schedule_text(model.settings)}"
        f"{trained_on}."
    )


def evaluated_line(evaluations: Sequence[TaskEvaluation]) -> str:
    """The evaluated tasks with their sizes (documents, queries, queries that need context)."""
    if not evaluations:
        return "Evaluated: no task."

    def size(e: TaskEvaluation) -> str:
        needs = "" if e.n_needs_context is None else f", {e.n_needs_context:,} need context"
        return f"`{e.task}` ({e.split}: {e.n_documents:,} documents, {e.n_queries:,} queries{needs})"

    return "Evaluated: " + "; ".join(size(e) for e in evaluations) + "."


def scaled_down_line(
    models: Sequence[TrainedModel], evaluations: Sequence[TaskEvaluation], max_documents: int | None
) -> str | None:
    """What differs from the paper's setting, each difference named with both values; ``None`` when nothing does."""
    paper_model, paper_batch = GPU_PROFILE.base_model, GPU_PROFILE.training["batch_docs"]
    differences = []
    bases = sorted({str(m.settings.get("base_model")) for m in models})
    if bases and bases != [paper_model]:
        differences.append(f"base model {', '.join(f'`{b}`' for b in bases)} instead of `{paper_model}`")
    windows = sorted({w for m in models if (w := window_tokens(m, evaluations)) is not None})
    if windows and windows != [PAPER_WINDOW_TOKENS]:
        shown = ", ".join(f"{w:,}" for w in windows)
        differences.append(f"{shown}-token windows instead of {PAPER_WINDOW_TOKENS:,}")
    batches = sorted({b for m in models if isinstance(b := m.settings.get("batch_docs"), int)})
    if batches and batches != [paper_batch]:
        differences.append(f"{', '.join(map(str, batches))} documents per batch instead of {paper_batch}")
    if max_documents:
        differences.append(f"the first {max_documents:,} SQuAD v1.1 dev articles instead of every one")
    if not differences:
        return None
    return "Differs from the paper's setting: " + "; ".join(differences) + "."


def profile_lines(
    models: Sequence[TrainedModel], evaluations: Sequence[TaskEvaluation], max_documents: int | None
) -> list[str]:
    """The description of the run (module docstring): a line per model, the evaluated tasks, the differences."""
    lines = [model_line(model, evaluations) for model in models]
    lines.append(evaluated_line(evaluations))
    scaled = scaled_down_line(models, evaluations, max_documents)
    return lines + ([scaled] if scaled else [])
