"""Retrieval systems: check what a system needs, then index a corpus and return a scorer.

The runner calls :func:`requirement_problem` (cheap, no model load) and :func:`prepare_system`, then scores blocks of
queries with :attr:`IndexedSystem.score_block` (float32 ``[B, C]`` over every chunk, corpus order).

One module per kind: :mod:`evaluation.systems.bm25` (``bm25``), :mod:`evaluation.systems.dense` (``dense``,
``contextual``),
:mod:`evaluation.systems.late_interaction` (``late_interaction``), :mod:`evaluation.systems.hybrid` (``hybrid``:
fuses systems already prepared, which :mod:`evaluation.runner` passes as ``components``); models and prefixes:
:mod:`evaluation.systems.embedders`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from embedding.models import OFFLINE_MINILM, offline_minilm_path
from evaluation.config import (
    BM25System,
    ContextualSystem,
    DenseSystem,
    FusionSystem,
    HybridSystem,
    LateInteractionSystem,
    SystemConfig,
)
from evaluation.corpus import EvalCorpus
from evaluation.encoded import ChunkEncoding, EncodingOutcome, EncodingProblem
from evaluation.indexed import IndexedSystem, Log, NotRunnable, no_log
from evaluation.leakage import Provenance, leakage_problem, model_provenance, unreadable_problem
from evaluation.systems.bm25 import bm25_problem, prepare_bm25
from evaluation.systems.dense import contextual_problem, encode_single_vector, prepare_single_vector
from evaluation.systems.embedders import as_trained, model_problem, setup_encoder, trained_folder
from evaluation.systems.fusion import prepare_fusion
from evaluation.systems.hybrid import prepare_hybrid
from evaluation.systems.late_interaction import encode_late_interaction, prepare_late_interaction

ModelSystem = DenseSystem | ContextualSystem | LateInteractionSystem


def requirement_problem(
    system: SystemConfig, corpus: EvalCorpus, models_dir: Path, *, require_provenance: bool = False
) -> str | None:
    """Why ``system`` cannot run on ``corpus`` (checked before any model loads), or None.

    Reasons: a trained model not there yet (``<models_dir>/<trained>`` missing or holding no saved model), a model
    folder that does not exist, no chunk contexts for ``contextual`` (or a template with unknown fields), an unknown
    stemmer or stop-word language for ``bm25``, and train/test leakage (:mod:`evaluation.leakage`, a reason starting
    ``refused:``): a model whose ``training_data.json`` shows it was trained on documents, chunks or passages of this
    corpus, or, with ``require_provenance`` (``evaluation.require_provenance``), a model whose training documents are
    not recorded with content fingerprints (hub and packaged models included). A hub id is only found out when
    loading (:class:`NotRunnable` then). A ``hybrid`` has no requirement of its own: its components' are checked when
    they are prepared (a component that cannot run makes the hybrid not run, :mod:`evaluation.runner`).
    """
    match system:
        case HybridSystem() | FusionSystem():
            return None
        case BM25System():
            return bm25_problem(system)
        case ContextualSystem():
            return (
                contextual_problem(system, corpus)
                or model_problem(system, Path(models_dir))
                or _leakage_problem(system, corpus, Path(models_dir), require_provenance)
            )
        case DenseSystem() | LateInteractionSystem():
            return model_problem(system, Path(models_dir)) or _leakage_problem(
                system, corpus, Path(models_dir), require_provenance
            )
    raise TypeError(f"unknown system config {system!r}")  # pragma: no cover


def _model_location(system: ModelSystem, models_dir: Path) -> tuple[Path | None, str]:
    """``(folder, label)`` of the model ``system`` embeds with; folder None for a hub id."""
    if system.trained is not None:
        return trained_folder(models_dir, system.trained), system.trained
    name = system.model or OFFLINE_MINILM
    if name == OFFLINE_MINILM:
        return offline_minilm_path(), f"{OFFLINE_MINILM} (the packaged all-MiniLM-L6-v2)"
    folder = Path(name).expanduser()
    return (folder, str(folder)) if folder.is_dir() else (None, name)


def system_provenance(system: SystemConfig, models_dir: Path) -> Provenance | None:
    """What is known of the training documents of ``system``'s model (:func:`evaluation.leakage.model_provenance`);
    None for a system without a model (``bm25``, ``hybrid``), a model that is not there (:func:`model_problem`) or a
    model folder whose ``training_data.json`` cannot be read (:func:`requirement_problem` refuses it)."""
    if isinstance(system, BM25System | HybridSystem | FusionSystem) or model_problem(system, Path(models_dir)):
        return None
    try:
        return model_provenance(*_model_location(system, Path(models_dir)))
    except ValueError:
        return None


def _leakage_problem(system: ModelSystem, corpus: EvalCorpus, models_dir: Path, require_provenance: bool) -> str | None:
    """The train/test overlap refusal (and the required-provenance one) for the model of ``system``."""
    folder, label = _model_location(system, models_dir)
    try:
        provenance = model_provenance(folder, label)
    except ValueError as error:
        return unreadable_problem(folder or Path(label), error)
    return leakage_problem(provenance, corpus, require_provenance=require_provenance)


class EncodingFailed(RuntimeError):
    """A shard's encoder raised: the system fails with the shard's error (``str(e)``)."""


def encodes_chunks(system: SystemConfig) -> bool:
    """Whether ``system`` encodes chunks with a model (the work the evaluation's encode shards do)."""
    return isinstance(system, DenseSystem | ContextualSystem | LateInteractionSystem)


def encode_system(
    system: SystemConfig, corpus: EvalCorpus, models_dir: Path, *, show_progress: bool = False
) -> ChunkEncoding:
    """The chunk side of ``system`` over ``corpus`` (a shard's documents, or a whole corpus).

    Requirements are the caller's to check (:func:`requirement_problem` on the whole corpus: a shard alone may hold
    no chunk context and still belong to a task that has them). Raises :class:`NotRunnable` when the model cannot be
    loaded, ``TypeError`` for a system that encodes nothing (``bm25``).
    """
    if isinstance(system, DenseSystem | LateInteractionSystem):
        system = as_trained(system, Path(models_dir))
    match system:
        case DenseSystem() | ContextualSystem():
            setup = setup_encoder(system, Path(models_dir))
            return encode_single_vector(system, corpus, setup, show_progress=show_progress)
        case LateInteractionSystem():
            setup = setup_encoder(system, Path(models_dir))
            return encode_late_interaction(system, corpus, setup, show_progress=show_progress)
    raise TypeError(f"system {system.name!r} ({system.kind}) encodes no chunks")


def prepare_system(
    system: SystemConfig,
    corpus: EvalCorpus,
    models_dir: Path,
    *,
    encoded: EncodingOutcome | None = None,
    show_progress: bool = False,
    log: Log = no_log,
    require_provenance: bool = False,
    components: Sequence[tuple[str, IndexedSystem]] | None = None,
) -> IndexedSystem:
    """Index ``corpus`` and encode its queries for ``system``.

    ``components``: for a ``hybrid`` or a ``fusion``, its systems prepared on ``corpus`` (``(name, indexed)`` in its
    order; ValueError without them): it fuses their scores (:mod:`evaluation.systems.hybrid`, ``...fusion``).

    ``encoded``: the system's chunk side computed elsewhere (the evaluation's encode shards), used instead of
    encoding the chunks here; an :class:`~evaluation.encoded.EncodingProblem` raises :class:`NotRunnable`
    (``not_run``) or :class:`EncodingFailed` (``failed``) with its reason.
    Raises :class:`NotRunnable` with the reason of :func:`requirement_problem` (``require_provenance`` passed on), or
    when a hub model cannot be loaded.
    Logs counts and timings through ``log``.
    """
    problem = requirement_problem(system, corpus, models_dir, require_provenance=require_provenance)
    if problem:
        raise NotRunnable(problem)
    if isinstance(encoded, EncodingProblem):
        if encoded.status == "not_run":
            raise NotRunnable(encoded.reason)
        raise EncodingFailed(encoded.reason)
    models_dir = Path(models_dir)
    if isinstance(system, DenseSystem | LateInteractionSystem):
        system = as_trained(system, models_dir)  # the trained layout and header where the system sets neither
    match system:
        case HybridSystem():
            if components is None:
                raise ValueError(f"hybrid {system.name}: its components' prepared systems are needed (components=...)")
            return prepare_hybrid(system, components, corpus.chunk_ids)
        case FusionSystem():
            if components is None:
                raise ValueError(f"fusion {system.name}: its components' prepared systems are needed (components=...)")
            return prepare_fusion(system, components, corpus.chunk_ids)
        case BM25System():
            return prepare_bm25(system, corpus, show_progress=show_progress, log=log)
        case DenseSystem() | ContextualSystem():
            return prepare_single_vector(
                system, corpus, models_dir, encoded=encoded, show_progress=show_progress, log=log
            )
        case LateInteractionSystem():
            return prepare_late_interaction(
                system, corpus, models_dir, encoded=encoded, show_progress=show_progress, log=log
            )
    raise TypeError(f"unknown system config {system!r}")  # pragma: no cover
