"""Corpus encoding in document shards: the fan-out of ``[task]/evaluation`` (``assets/evaluation.py``).

Encoding the chunks is the heavy part of an evaluation (a model forward over every chunk, per model-based system);
ranking is matrix products over the vectors. So the evaluation is split in three:

* **Jobs** (:func:`encoding_jobs`): the encodings the evaluation will use, one :class:`EncodingJob` per
  :class:`~evaluation.encoded.EncodingKey`: every selected system, and every component of a selected ``hybrid``
  (:meth:`~evaluation.config.EvaluationConfig.with_components`; a hybrid itself encodes nothing), that encodes chunks
  (:func:`evaluation.systems.dispatch.encodes_chunks`) and whose requirements hold on the whole corpus
  (:func:`evaluation.systems.dispatch.requirement_problem`; a system missing one is not encoded, and the evaluation
  records it
  as not run, as before), and, when the chunk-size study runs, every study system at every size, its requirements
  checked on the corpus without LLM contexts (a re-chunked corpus has none).
* **Shards** (:func:`encoding_shards`): the corpus's documents in corpus order, then the span sources' documents the
  corpus lacks (source table order), cut into consecutive shards of ``size`` documents
  (:func:`curation.shards.plan_shards`). A shard holds its documents' chunks (:meth:`EvalCorpus.chunks_of`: corpus
  order, titles, contexts, no queries) and, for the study, its documents' rows of the span sources.
* **Encode** (:func:`encode_shard`): per job, the shard's :class:`~evaluation.encoded.ChunkEncoding` or the
  :class:`~evaluation.encoded.EncodingProblem` it met. A study job encodes the shard's source documents re-chunked
  at its size (:func:`evaluation.rechunk.rechunk_corpus`: chunking is per document, so these are the whole
  re-chunking's chunks of the shard's documents). The shards are joined by :func:`evaluation.encoded.merge_outcomes`
  and the evaluation aligns each encoding to its corpus's chunk order by chunk id
  (:meth:`~evaluation.encoded.ChunkEncoding.aligned`), then encodes the queries and ranks.

Same numbers. With one shard, the shard's corpus is the corpus (same rows, same order), so the encoder forms the same
batches and the vectors are an unsharded evaluation's, bit for bit. With several shards the encoder batches windows
within a shard (sorted by token length), so a window is padded beside other windows: the vectors then agree to
float32 rounding, and rankings can swap near-ties (measured in ``bench/sharded_encoding.py``).

Memory. A shard step holds the model, its documents' chunks and their vectors; the ranking step holds every vector
of the corpus (float32 ``[C, D]``, 1.5 KiB a chunk at D = 384; late interaction: float16 token vectors), which exact
search over the whole corpus needs at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from curation.shards import plan_shards, rows_in, shard_key
from evaluation.config import EvaluationConfig
from evaluation.corpus import EvalCorpus
from evaluation.encoded import (
    EncodingJob,
    EncodingKey,
    EncodingOutcome,
    EncodingProblem,
    EncodingShard,
    merge_outcomes,
)
from evaluation.indexed import Log, NotRunnable, no_log
from evaluation.rechunk import SpanSources, rechunk_corpus
from evaluation.systems.dispatch import encode_system, encodes_chunks, requirement_problem
from evaluation.tally import summarized_warnings

logger = logging.getLogger(__name__)


def encoding_jobs(
    corpus: EvalCorpus,
    config: EvaluationConfig,
    models_dir: Path,
    *,
    systems: Sequence[str] | None = None,
    sources: SpanSources | None = None,
    chunk_sizes: bool = True,
) -> list[EncodingJob]:
    """The encodings of an evaluation of ``systems`` (default: every configured one) on ``corpus`` (module doc).

    ``sources`` and ``chunk_sizes`` as :func:`evaluation.runner.evaluate_task` takes them: the study's jobs only
    when both are given and the study is enabled.
    """
    selected = config.with_components([config.system(name) for name in systems] if systems else list(config.systems))
    jobs = [
        EncodingJob(EncodingKey(system.name), system)
        for system in selected
        if encodes_chunks(system)
        and requirement_problem(system, corpus, models_dir, require_provenance=config.require_provenance) is None
    ]
    study = config.chunk_sizes
    if sources is None or not (study.enabled and chunk_sizes):
        return jobs
    without_contexts = replace(corpus, contexts=None)
    studied = config.with_components([config.system(n) for n in study.systems if not systems or n in systems])
    for system in studied:
        name = system.name
        if not encodes_chunks(system) or (
            requirement_problem(system, without_contexts, models_dir, require_provenance=config.require_provenance)
            is not None
        ):
            continue
        jobs += [EncodingJob(EncodingKey(name, size), system) for size in study.sizes]
    return jobs


def study_sources(jobs: Sequence[EncodingJob], sources: SpanSources | None) -> SpanSources | None:
    """``sources`` when a job of the chunk-size study needs them (the shards then carry their slices), else None."""
    return sources if any(job.key.chunk_size is not None for job in jobs) else None


def encoding_shards(corpus: EvalCorpus, sources: SpanSources | None, size: int) -> list[EncodingShard]:
    """The shards of ``corpus`` (and of ``sources``' documents it lacks) of at most ``size`` documents (module doc).

    At least one shard (an empty corpus gives one empty shard). Raises ``ValueError`` when ``size < 1``.
    """
    doc_ids = corpus.document_order
    if sources is not None:
        known = set(doc_ids)
        doc_ids += [d for d in dict.fromkeys(sources.documents.column("doc_id").to_pylist()) if d not in known]
    shards = []
    for index, members in enumerate(plan_shards(doc_ids, size)):
        shard_sources = None
        if sources is not None:
            shard_sources = SpanSources(
                rows_in(sources.documents, "doc_id", members), rows_in(sources.queries, "doc_id", members)
            )
        shards.append(EncodingShard(index, members, corpus.chunks_of(members), shard_sources))
    return shards


def prefixed(log: Log, prefix: str) -> Log:
    """``log`` with ``prefix`` before every line."""
    return lambda line: log(prefix + line)


def encode_shard(
    shard: EncodingShard,
    jobs: Sequence[EncodingJob],
    models_dir: Path,
    *,
    label: str = "",
    log: Log = no_log,
    show_progress: bool = False,
) -> dict[EncodingKey, EncodingOutcome]:
    """Every job's encoding of ``shard``, or the problem it met: ``not_run`` for :class:`NotRunnable` (a model that
    cannot be loaded), ``failed`` for any other error (logged with its traceback; the reason names the shard).
    ``label`` prefixes the log lines (``<task> shard s0003``)."""
    rechunked: dict[int, EvalCorpus] = {}
    outcomes: dict[EncodingKey, EncodingOutcome] = {}
    for job in jobs:
        try:
            size = job.key.chunk_size
            if size is None:
                corpus = shard.corpus
            else:
                if shard.sources is None:
                    raise ValueError(f"a chunk-size job ({job.key}) on a shard without span sources")
                if size not in rechunked:
                    sources = shard.sources
                    rechunked[size] = rechunk_corpus(sources.documents, sources.queries, size, name=shard.corpus.name)
                corpus = rechunked[size]
            with summarized_warnings(prefixed(log, f"{label}{job.key}: ")):  # each repeated warning once per system
                encoding = encode_system(job.system, corpus, models_dir, show_progress=show_progress)
            outcomes[job.key] = encoding
            log(f"{label}{job.key}: encoded {encoding.n_chunks:,} chunks in {encoding.seconds:.1f} s")
        except NotRunnable as reason:
            outcomes[job.key] = EncodingProblem("not_run", str(reason))
            log(f"{label}{job.key}: not run: {reason}")
        except Exception as error:  # one broken system must not hide the others' encodings
            logger.exception("encoding %s failed on %s", job.key, label or "a shard")
            outcomes[job.key] = EncodingProblem("failed", f"{label}{type(error).__name__}: {error}")
            log(f"{label}{job.key}: FAILED: {type(error).__name__}: {error}")
    return outcomes


def encode_in_shards(
    corpus: EvalCorpus,
    jobs: Sequence[EncodingJob],
    models_dir: Path,
    size: int,
    *,
    sources: SpanSources | None = None,
    log: Log = no_log,
) -> dict[EncodingKey, EncodingOutcome]:
    """Every shard encoded one after the other in this process, then joined: what the Dagster graph does step by
    step (for the tests; ``conteb evaluate`` encodes in one piece)."""
    shards = encoding_shards(corpus, study_sources(jobs, sources), size)
    results: list[Mapping[EncodingKey, EncodingOutcome]] = [
        encode_shard(shard, jobs, models_dir, label=f"{corpus.name} shard {shard_key(shard.index)}: ", log=log)
        for shard in shards
    ]
    return merge_outcomes(results)
