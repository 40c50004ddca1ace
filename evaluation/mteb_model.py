"""``conteb.mteb_model``: a model of this project as an MTEB 2.x search model, so that MTEB can run late chunking.

MTEB hands a model a flat corpus (``SearchProtocol.index(corpus)``, then ``search(queries)``); a contextual model needs
each chunk's document. :class:`ContextualSearchModel` finds it in the ids the tasks publish (``conteb.mteb_task``): the
``doc_id`` and ``chunk_index`` columns, else ``chunk_id`` = ``{doc_id}_{chunk_index}``
(:func:`conteb.ids.split_chunk_id`, the rule of ``evaluation/load.py``); titles from ``doc_title`` (or MTEB's
``title``). A corpus whose ids carry no document raises :class:`MtebModelError` (one line: the task, the id, what is
missing).

The rest is the code path of ``conteb evaluate`` for a ``dense`` system (:func:`evaluation.systems.dispatch.
encode_system`, :func:`evaluation.systems.dense.prepare_single_vector`), so the scores are the same: the system is a
:class:`evaluation.config.DenseSystem` (``context``, ``window_policy``, ``header``; a trained model's training YAML
fills what is not given, :func:`evaluation.systems.embedders.with_training_layout`), its encoder and prefixes those
of :func:`evaluation.systems.embedders.setup_encoder`, the chunk vectors
:func:`evaluation.systems.dense.encode_single_vector` (documents in order of first appearance, each one's chunks by
``chunk_index``), the query vectors :func:`evaluation.systems.embedders.encode_queries_cached`, the scores
``query @ chunk`` (float32, cosine) and the top ``top_k`` chunks per query in trec_eval order
(:func:`evaluation.systems.ranking.rank_corpus`). MTEB scores that ranking with its own evaluator.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from conteb.ids import split_chunk_id
from embedding.models import OFFLINE_MINILM
from evaluation.config import DenseSystem
from evaluation.corpus import EvalCorpus
from evaluation.indexed import NotRunnable
from evaluation.systems.dense import encode_single_vector
from evaluation.systems.embedders import (
    EncoderSetup,
    encode_queries_cached,
    folder_spec,
    model_location_problem,
    setup_encoder,
    training_settings,
    with_training_layout,
)
from evaluation.systems.ranking import dense_scorer, rank_corpus

if TYPE_CHECKING:
    from datasets import Dataset
    from mteb import TaskMetadata
    from mteb.models import ModelMeta

SYSTEM_NAME = "mteb"
"""The name of the :class:`DenseSystem` the model runs (shown on progress bars)."""


class MtebModelError(ValueError):
    """The model cannot be made, or the corpus has no documents to read chunks in; the message says why."""


def _documents(corpus: Dataset, task: str) -> tuple[list[str], list[int]]:
    """Per corpus row, its document id and chunk index (module docstring); :class:`MtebModelError` when absent."""
    columns = corpus.column_names
    if "doc_id" in columns and "chunk_index" in columns:
        return [str(doc) for doc in corpus["doc_id"]], [int(index) for index in corpus["chunk_index"]]
    doc_ids, indices = [], []
    for row, chunk_id in enumerate(corpus["id"]):
        try:
            doc, index = split_chunk_id(str(chunk_id))
        except ValueError:
            raise MtebModelError(
                f"task {task}: corpus row {row}: id {chunk_id!r} carries no document (no doc_id and chunk_index "
                "columns, and the id is not '<doc_id>_<chunk_index>'): late chunking needs each chunk's document"
            ) from None
        doc_ids.append(doc)
        indices.append(index)
    return doc_ids, indices


def corpus_of(corpus: Dataset, task: str, split: str) -> EvalCorpus:
    """The MTEB ``corpus`` (columns ``id``, ``text``; ``doc_id``, ``chunk_index``, ``doc_title`` or ``title`` when
    present) as an :class:`EvalCorpus` without queries, rows in corpus order."""
    doc_ids, indices = _documents(corpus, task)
    column = next((name for name in ("doc_title", "title") if name in corpus.column_names), None)
    titles: list[str | None] = [title or None for title in corpus[column]] if column else [None] * corpus.num_rows
    return EvalCorpus(
        name=task,
        source="mteb",
        split=split,
        chunk_ids=[str(cid) for cid in corpus["id"]],
        chunks=list(corpus["text"]),
        doc_ids=doc_ids,
        chunk_index=np.asarray(indices, dtype=np.int32),
        titles=titles,
        query_ids=[],
        queries=[],
        gold=np.zeros(0, dtype=np.int64),
    )


class ContextualSearchModel:
    """MTEB's ``SearchProtocol`` over one :class:`DenseSystem` of this project (module docstring)."""

    def __init__(self, system: DenseSystem, setup: EncoderSetup):
        self.system = system
        self.setup = setup
        self._corpus: EvalCorpus | None = None
        self._vectors: np.ndarray | None = None

    @property
    def mteb_model_meta(self) -> ModelMeta:
        """Name ``conteb/<model>-<context>``; revision a hash of the weights and every setting that changes a
        score, so MTEB's result cache never serves one system's scores for another."""
        from mteb.models import ModelMeta

        details = self.setup.details
        settings = {key: details.get(key) for key in ("model_path", "query_prefix", "document_prefix", "max_length")}
        settings.update(self.system.model_dump(mode="json", exclude={"name", "kind", "device", "token_budget"}))
        settings["weights"] = _weights_digest(self.setup.spec.folder)
        revision = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
        return ModelMeta.create_empty(
            overwrites={
                "name": f"conteb/{self.setup.spec.label}-{self.system.context}",
                "revision": revision,
                "embed_dim": self.setup.encoder.dimension,
                "max_tokens": self.setup.encoder.max_length,
                "similarity_fn_name": "cosine",
                "framework": ["Sentence Transformers", "PyTorch"],
            }
        )

    def index(
        self,
        corpus: Dataset,
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        encode_kwargs: Any = None,
        num_proc: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Group ``corpus`` by document and encode its chunks as ``conteb evaluate`` does."""
        self._corpus = corpus_of(corpus, task_metadata.name, hf_split)
        encoded = encode_single_vector(self.system, self._corpus, self.setup)
        self._vectors = encoded.vectors

    def search(
        self,
        queries: Dataset,
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        top_k: int,
        encode_kwargs: Any = None,
        top_ranked: Any = None,
        num_proc: int | None = None,
        **kwargs: Any,
    ) -> dict[str, dict[str, float]]:
        """``{query_id: {chunk_id: score}}``: each query's ``top_k`` chunks of the indexed corpus, trec_eval order."""
        if self._corpus is None or self._vectors is None:
            raise MtebModelError(f"task {task_metadata.name}: search before index (MTEB indexes the corpus first)")
        corpus = self._corpus
        query_vectors, _ = encode_queries_cached(self.setup, list(queries["text"]))
        n = len(query_vectors)
        ranking = rank_corpus(
            dense_scorer(query_vectors, self._vectors),
            n,
            corpus.chunk_ids,
            np.zeros(n, dtype=np.int64),  # no gold here: MTEB scores the ranking itself
            corpus.chunk_doc_index(),
            corpus.document_order,
            top_k=top_k,
        )
        return {
            str(qid): {corpus.chunk_ids[c]: float(s) for c, s in zip(rows, scores, strict=True)}
            for qid, rows, scores in zip(queries["id"], ranking.top_index, ranking.top_score, strict=True)
        }


def _weights_digest(folder: Path | None) -> str:
    """sha256 (16 hex digits) over the names and sizes and mtimes of ``folder``'s files; "" for a hub id."""
    if folder is None:
        return ""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}\x00{stat.st_size}\x00{stat.st_mtime_ns}\x01".encode())
    return digest.hexdigest()[:16]


def mteb_model(
    model: str | Path = OFFLINE_MINILM,
    context: Literal["late", "independent", "title"] = "late",
    window_policy: Literal["plain", "anchored"] | None = None,
    header: Literal["title"] | None = None,
    **options: Any,
) -> ContextualSearchModel:
    """``model`` (``offline-minilm``, a saved model folder, or a hub id) as an MTEB search model, the ``dense`` system
    of ``conteb evaluate`` with these settings: ``context`` (``late``: late chunking), ``window_policy`` and ``header``
    (``None``: as the model was trained, read from ``<folder>.train.yaml`` beside a trained folder, else ``plain``
    and none); ``options``: other :class:`evaluation.config.ModelOptions` fields (``max_length``, prefixes, ...).

    Raises :class:`MtebModelError` (one line) when the settings are invalid or the model cannot be loaded.
    """
    from pydantic import ValidationError

    name = str(model)
    problem = model_location_problem(name)
    if problem:
        raise MtebModelError(f"mteb_model: {problem}")
    given = {"window_policy": window_policy, "header": header}
    try:
        system = DenseSystem(
            kind="dense",
            name=SYSTEM_NAME,
            model=name,
            context=context,
            **{key: value for key, value in given.items() if value is not None},
            **options,
        )
    except ValidationError as error:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in error.errors())
        raise MtebModelError(f"mteb_model: {reasons}") from None
    folder = Path(name).expanduser()
    spec = folder_spec(folder) if name != OFFLINE_MINILM and folder.is_dir() else None
    if spec is not None:
        system = with_training_layout(system, training_settings(spec.training_config))
    try:
        setup = setup_encoder(system, folder.parent, spec)
    except (NotRunnable, OSError) as error:
        raise MtebModelError(f"mteb_model: cannot load {name!r}: {error}") from error
    return ContextualSearchModel(system, setup)
