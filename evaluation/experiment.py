"""What the paper's controlled experiment evaluates: its systems, its statistics and its training settings.

Systems (names fixed: :mod:`evaluation.reports.paper` refers to them): ``bm25``, ``independent``, ``title-prefix``,
``late-chunking`` (plain windows), ``late-chunking-anchored`` — the untrained baselines of ``default_systems()``
with the experiment's base model and prefixes — the cheap baselines a user tries first (``bm25-title``, ``hybrid`` of
``bm25`` and ``independent``, ``hybrid-title`` of ``bm25-title`` and ``title-prefix``), the title header inside the
windows (``late-chunking-title``, ``late-chunking-anchored-title``), and the four trained models: ``insent`` (late
chunking, plain windows), ``insent-anchored`` (anchored windows, trained that way), ``insent-anchored-title``
(anchored windows, each chunk under its title header, trained and evaluated that way), ``finetune-control`` (each
chunk alone), read from their model folders; the fusions of ``bm25-title`` with each InSeNT model (``fused-<model>``,
weights fitted on validation); ``contextual`` joins when the task has LLM chunk contexts. Every tested system is also
compared with the best cheap baseline (:mod:`evaluation.comparisons`), beside the paper's pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from conteb.names import SystemName
from evaluation.config import (
    ChunkSizeConfig,
    EvaluationConfig,
    FusionSystem,
    SignificanceConfig,
    SystemConfig,
    default_systems,
)

UNTRAINED = (
    SystemName.BM25,
    SystemName.BM25_TITLE,
    SystemName.INDEPENDENT,
    SystemName.TITLE_PREFIX,
    SystemName.LATE_CHUNKING,
    SystemName.LATE_CHUNKING_ANCHORED,
    SystemName.LATE_CHUNKING_TITLE,
    SystemName.LATE_CHUNKING_ANCHORED_TITLE,
    SystemName.HYBRID,
    SystemName.HYBRID_TITLE,
)
TRAINED_MODELS: dict[str, tuple[str, str]] = {
    # system name -> (untrained system it is a copy of, model folder name)
    SystemName.INSENT: (SystemName.LATE_CHUNKING, "insent-plain"),
    SystemName.INSENT_ANCHORED: (SystemName.LATE_CHUNKING_ANCHORED, "insent-anchored"),
    SystemName.INSENT_ANCHORED_TITLE: (SystemName.LATE_CHUNKING_ANCHORED_TITLE, "insent-anchored-title"),
    SystemName.FINETUNE_CONTROL: (SystemName.INDEPENDENT, "finetune-control"),
}
ANCHORED = (SystemName.LATE_CHUNKING_ANCHORED, SystemName.LATE_CHUNKING_ANCHORED_TITLE)
"""The untrained systems with anchored windows (their trained copies train with anchored windows too)."""
COMPARISONS = (
    (SystemName.LATE_CHUNKING, SystemName.INDEPENDENT),
    (SystemName.LATE_CHUNKING_ANCHORED, SystemName.INDEPENDENT),
    (SystemName.LATE_CHUNKING_ANCHORED, SystemName.LATE_CHUNKING),
    (SystemName.TITLE_PREFIX, SystemName.INDEPENDENT),
    (SystemName.INSENT, SystemName.INDEPENDENT),
    (SystemName.INSENT_ANCHORED, SystemName.INDEPENDENT),
    (SystemName.INSENT, SystemName.FINETUNE_CONTROL),
    (SystemName.INSENT_ANCHORED, SystemName.FINETUNE_CONTROL),
    (SystemName.INSENT, SystemName.LATE_CHUNKING),
    (SystemName.INSENT_ANCHORED, SystemName.INSENT),
    (SystemName.INSENT_ANCHORED_TITLE, SystemName.INSENT_ANCHORED),
    (SystemName.INSENT_ANCHORED_TITLE, SystemName.LATE_CHUNKING_ANCHORED_TITLE),
    (SystemName.CONTEXTUAL, SystemName.INDEPENDENT),
    (SystemName.LATE_CHUNKING_TITLE, SystemName.LATE_CHUNKING),
    (SystemName.LATE_CHUNKING_ANCHORED_TITLE, SystemName.LATE_CHUNKING_ANCHORED),
    (SystemName.BM25_TITLE, SystemName.BM25),
)
CHUNK_SIZE_SYSTEMS = (
    SystemName.BM25,
    SystemName.BM25_TITLE,
    SystemName.HYBRID,
    SystemName.INDEPENDENT,
    SystemName.LATE_CHUNKING,
    SystemName.LATE_CHUNKING_ANCHORED,
    SystemName.INSENT,
    SystemName.INSENT_ANCHORED,
)
"""The systems of the experiment's chunk-size study (those that ran): the cheap baselines that encode nothing more
(BM25, contextual BM25, the hybrid of BM25 and independent chunks), the untrained late chunking and InSeNT."""


def model_folder(models_root: Path, system: str) -> Path:
    """Where the experiment's trained model behind ``system`` is saved."""
    return models_root / TRAINED_MODELS[system][1]


def experiment_systems(
    models_root: Path,
    base_model: str,
    *,
    anchor_share: float,
    window_overlap_chunks: int | None = None,
    query_prefix: str | None = None,
    document_prefix: str | None = None,
    device: str | None = None,
    contextual: bool = False,
) -> tuple[SystemConfig, ...]:
    """The experiment's systems (see the module docstring); ``models_root`` holds the trained model folders.

    ``window_overlap_chunks`` (None: the systems' default) is set on every late-chunking system."""
    defaults = {system.name: system for system in default_systems()}
    model_fields = {"query_prefix": query_prefix, "document_prefix": document_prefix, "device": device}

    def with_model(system: SystemConfig, model: str) -> SystemConfig:
        if system.kind in ("bm25", "hybrid", "fusion"):  # no model (a fusion fuses the experiment's own systems)
            return system
        update: dict[str, object] = {"model": model, **model_fields}
        if getattr(system, "window_policy", "plain") == "anchored":
            update["anchor_share"] = anchor_share
        if window_overlap_chunks is not None and getattr(system, "context", None) == "late":
            update["window_overlap_chunks"] = window_overlap_chunks
        return system.model_copy(update=update)

    systems = [with_model(defaults[name], base_model) for name in UNTRAINED]
    for name, (template, _) in TRAINED_MODELS.items():
        trained = with_model(defaults[template], str(model_folder(models_root, name)))
        # model_copy does not validate: a plain str; a model folder reads as untrained to the comparison rule: tested
        systems.append(trained.model_copy(update={"name": str(name), "role": "tested"}))
    systems += fused_systems(list(TRAINED_MODELS))
    if contextual:
        systems.append(with_model(defaults[SystemName.CONTEXTUAL], base_model))
    return tuple(systems)


def fused_systems(trained: Sequence[str]) -> list[SystemConfig]:
    """For each InSeNT model of ``trained`` (every one but the control), the fusion of ``bm25-title`` with it, weights
    fitted on the task's validation split (``fused-<model>``): the title's words and the trained model's context."""
    return [
        FusionSystem(
            kind="fusion", name=SystemName.fused(name), systems=(str(SystemName.BM25_TITLE), name), fit="validation"
        )
        for name in trained
        if name != SystemName.FINETUNE_CONTROL
    ]


def experiment_evaluation(
    base: EvaluationConfig, systems: Sequence[SystemConfig], chunk_sizes: Sequence[int]
) -> EvaluationConfig:
    """``base`` (bootstrap, cutoffs, scaling) with the experiment's systems, comparisons and chunk-size study; every
    system but the fine-tuned control is a candidate of the choice on validation (``select``)."""
    names = {s.name for s in systems}
    study = tuple(n for n in CHUNK_SIZE_SYSTEMS if n in names)
    return base.model_copy(
        update={
            "systems": tuple(systems),
            "significance": SignificanceConfig(
                method=base.significance.method,
                resamples=base.significance.resamples,
                metric=base.significance.metric,
                comparisons=tuple((a, b) for a, b in COMPARISONS if a in names and b in names),
            ),
            "chunk_sizes": ChunkSizeConfig(enabled=bool(chunk_sizes), sizes=tuple(chunk_sizes), systems=study),
            "select": tuple(s.name for s in systems if s.name != SystemName.FINETUNE_CONTROL),
        }
    )


def training_settings(
    profile_training: Mapping[str, object],
    *,
    data: Sequence[Path],
    output: Path,
    base_model: str,
    system: str,
    anchor_share: float,
    window_overlap_chunks: int | None = None,
) -> dict[str, object]:
    """The training YAML of one of the experiment's models (``training/config.py`` fields)."""
    template, _ = TRAINED_MODELS[system]
    settings: dict[str, object] = dict(profile_training)
    settings.update(
        data=[str(folder) for folder in data],
        output=str(output),
        base_model=base_model,
        split="train",
        context="independent" if template == SystemName.INDEPENDENT else "late",
        window_policy="anchored" if template in ANCHORED else "plain",
        header="title" if template == SystemName.LATE_CHUNKING_ANCHORED_TITLE else None,
    )
    if settings["window_policy"] == "anchored":
        settings["anchor_share"] = anchor_share
    if window_overlap_chunks is not None:
        settings["window_overlap_chunks"] = window_overlap_chunks
    return settings
