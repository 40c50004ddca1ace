"""Training samples and batches from ConTEB task folders.

Rules (also stated in the model card):

* A sample is one document: all its chunks in ``chunk_index`` order, its queries (``queries`` and,
  when ``include_synthetic``, ``synthetic_queries``) and each query's gold chunk position.
* A query whose gold chunk or document is unknown, whose text is empty, or that repeats an
  earlier (query, chunk) pair is filtered, counted under its reason in :class:`DataStats`.
  ``chunk_id`` is the gold chunk; where absent, the first of ``chunk_ids``.
* Documents without queries are kept: they are in-batch negatives (the paper's batches are
  documents with their queries; such a document only adds negatives). They are counted.
* Documents longer than the context are *not* dropped: the encoder embeds them in windows of
  whole chunks; :func:`count_tokens` counts them (``windowed_documents``) and chunks that alone
  exceed the window (``chunks_over_max_length``, truncated by the encoder).
* The validation split is by document and seeded; it is drawn from documents that have queries
  (documents without queries stay in training as negatives), and leaves at least one for training.
* A batch is ``batch_docs`` documents; the order is a seeded shuffle per epoch. A trailing batch of a
  single document (no in-batch negatives) joins the previous batch. An optimizer step reads the epoch's next
  ``world_size × grad_accumulation`` batches, dealt round robin to the ranks (:func:`step_batches`); the last step
  of an epoch reads what is left, so every batch is read once an epoch whatever the number of processes.
* Several task folders: documents keep their ``doc_id``; a ``doc_id`` seen in two folders is
  qualified as ``<folder name>/<doc_id>``, and so are its ``chunk_ids`` (``source_doc_id`` keeps the
  published id), so that ids stay unique across the samples.
* What a model saw (:func:`documents_seen`, written to ``training_data.json``): per folder and split, the
  published ids and, per document, the fingerprints of its text (its ``og_chunk`` texts placed at their
  ``char_start``), of each chunk (``og_chunk``, and ``chunk`` where reformulated) and of its passages
  (:mod:`conteb.content`).
* Splits: each folder is read from one split (``TrainingConfig.split``, default ``train``; see
  :func:`resolve_split`): only that split's shards of every config, as
  the dataset card names them (:mod:`conteb.published`). A folder without that split but
  with a single one is read from it, with a warning (it is the split the evaluation reads: the
  trained model is then refused there, see :mod:`evaluation.leakage`); several splits and none of
  them the one asked for is an error naming the splits found. ``split=None`` reads every shard.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from conteb.content import document_prints
from conteb.ids import split_chunk_id
from conteb.names import Pairing
from conteb.published import config_splits, read_config
from conteb.text import is_blank
from evaluation.systems.headers import header_text


@dataclass
class TrainingSample:
    """One document with all its chunks in order, its queries and their gold chunk positions."""

    doc_id: str
    chunks: list[str]
    queries: list[str] = field(default_factory=list)
    gold: list[int] = field(default_factory=list)  # gold[i]: position in ``chunks`` of queries[i]'s chunk
    task: str = ""
    n_tokens: int | None = None  # document tokens (chunks + separators), set by count_tokens
    title: str | None = None  # the document's title (first non-null ``title`` of its chunks)
    source_doc_id: str = ""  # the doc_id as published (``doc_id`` may be qualified by the folder name)
    folder: str = ""  # the task folder it was read from
    split: str | None = None  # the split it was read from (None: every shard)
    chunk_ids: list[str] = field(default_factory=list)  # chunk_ids[i]: the id of chunks[i] (qualified like doc_id)
    # originals[i]: the og_chunk of chunks[i] (``chunk`` where not published); empty: the chunks are the originals
    originals: list[str] = field(default_factory=list)
    char_starts: list[int | None] = field(default_factory=list)  # char_starts[i]: its offset (None: not published)


@dataclass
class DataStats:
    """Counts over everything read, and what was filtered and why."""

    tasks: list[str] = field(default_factory=list)
    documents: int = 0
    chunks: int = 0
    queries: int = 0  # kept (real + synthetic)
    synthetic_queries: int = 0  # kept, from synthetic_queries
    pseudo_queries: int = 0  # kept, pairing "pseudo" (offline inverse cloze, curation/pseudo_queries.py)
    documents_without_queries: int = 0
    windowed_documents: int = 0  # token count > max_length (embedded in windows, not dropped)
    chunks_over_max_length: int = 0  # a single chunk longer than the window (truncated)
    max_length: int | None = None
    max_document_tokens: int = 0
    filtered: dict[str, int] = field(default_factory=dict)  # reason -> queries filtered
    train_documents: int = 0
    validation_documents: int = 0
    train_queries: int = 0
    validation_queries: int = 0
    splits: dict[str, str | None] = field(default_factory=dict)  # folder -> split read (None: every shard)
    warnings: list[str] = field(default_factory=list)  # e.g. a folder read from its only split, not 'train'

    def count_filtered(self, reason: str, amount: int = 1) -> None:
        self.filtered[reason] = self.filtered.get(reason, 0) + amount

    def as_dict(self) -> dict:
        return asdict(self)


def resolve_split(folder: Path, requested: str | None) -> tuple[str | None, str | None]:
    """``(split to read, warning or None)`` for ``folder`` (rules in the module docstring).

    Raises ``ValueError`` naming the folder and the splits found when ``requested`` is absent and the
    folder has several splits (or none).
    """
    if requested is None:
        return None, None
    found = config_splits(folder, "documents")
    if requested in found:
        return requested, None
    if len(found) == 1:
        return found[0], (
            f"{folder}: no split {requested!r}; reading its only split {found[0]!r} "
            "(declare `splits:` in conteb.yaml to keep evaluation documents out of training)"
        )
    raise ValueError(f"{folder}: no split {requested!r} to train on; splits found: {list(found) or 'none'}")


def _gold_chunk_ids(table: pa.Table) -> list[str | None]:
    if "chunk_id" in table.column_names:
        return table.column("chunk_id").to_pylist()
    if "chunk_ids" in table.column_names:
        return [ids[0] if ids else None for ids in table.column("chunk_ids").to_pylist()]
    raise ValueError("queries table has neither chunk_id nor chunk_ids")


def _config_table(folder: Path, config: str, split: str | None) -> pa.Table | None:
    """``config``'s shards of ``split`` in ``folder`` as one table, or None when it has none."""
    found = read_config(folder, config, split)
    return found[0] if found else None


def _doc_of_chunk(chunk_id: str) -> str | None:
    """The document part of a gold ``chunk_id`` (:func:`conteb.ids.split_chunk_id`); None when malformed."""
    try:
        return split_chunk_id(chunk_id)[0]
    except ValueError:
        return None


def read_task(
    folder: Path, include_synthetic: bool = True, stats: DataStats | None = None, split: str | None = None
) -> list[TrainingSample]:
    """Samples of one ConTEB task folder, sorted by ``doc_id`` (rules in the module docstring).

    ``split``: the split asked for (resolved by :func:`resolve_split`; None: every shard).
    """
    folder = Path(folder)
    stats = stats if stats is not None else DataStats()
    split, warning = resolve_split(folder, split)
    if warning:
        warnings.warn(warning, stacklevel=2)
        stats.warnings.append(warning)
    stats.tasks.append(folder.name)
    stats.splits[str(folder)] = split
    documents = _config_table(folder, "documents", split)
    if documents is None:
        raise FileNotFoundError(f"{folder}: no documents (no dataset card naming them, nor documents/*.parquet)")

    def optional(name: str) -> list:
        return documents.column(name).to_pylist() if name in documents.column_names else [None] * documents.num_rows

    rows = sorted(
        zip(
            *(documents.column(name).to_pylist() for name in ("doc_id", "chunk_index", "chunk_id", "chunk")),
            optional("title"),
            optional("og_chunk"),
            optional("char_start"),
            strict=True,
        ),
        key=lambda row: (row[0], row[1]),
    )
    samples: dict[str, TrainingSample] = {}
    position: dict[str, tuple[str, int]] = {}  # chunk_id -> (doc_id, position in its document)
    for doc_id, _, chunk_id, text, title, original, char_start in rows:
        sample = samples.setdefault(
            doc_id,
            TrainingSample(
                doc_id=doc_id, chunks=[], task=folder.name, source_doc_id=doc_id, folder=str(folder), split=split
            ),
        )
        if chunk_id in position:
            raise ValueError(f"{folder}: duplicate chunk_id {chunk_id!r} in documents")
        position[chunk_id] = (doc_id, len(sample.chunks))
        sample.chunks.append(text or "")
        sample.chunk_ids.append(chunk_id)
        sample.originals.append(original if original is not None else text or "")
        sample.char_starts.append(char_start)
        if sample.title is None and title:
            sample.title = title
    configs = ["queries"] + (["synthetic_queries"] if include_synthetic else [])
    seen: set[tuple[str, str]] = set()
    for config in configs:
        table = _config_table(folder, config, split)
        if table is None:
            continue
        doc_ids = table.column("doc_id").to_pylist() if "doc_id" in table.column_names else None
        pairings = table.column("pairing").to_pylist() if "pairing" in table.column_names else None
        for index, (query, chunk_id) in enumerate(
            zip(table.column("query").to_pylist(), _gold_chunk_ids(table), strict=True)
        ):
            doc_id = doc_ids[index] if doc_ids is not None else (_doc_of_chunk(chunk_id) if chunk_id else None)
            if is_blank(query):
                stats.count_filtered(f"{config}:empty_query")
            elif doc_id not in samples:
                stats.count_filtered(f"{config}:unknown_document")
            elif chunk_id not in position or position[chunk_id][0] != doc_id:
                stats.count_filtered(f"{config}:unknown_chunk")
            elif (query, chunk_id) in seen:
                stats.count_filtered(f"{config}:duplicate_query")
            else:
                seen.add((query, chunk_id))
                sample = samples[doc_id]
                sample.queries.append(query)
                sample.gold.append(position[chunk_id][1])
                stats.queries += 1
                stats.synthetic_queries += config == "synthetic_queries"
                stats.pseudo_queries += pairings is not None and pairings[index] == Pairing.PSEUDO
    result = [samples[doc_id] for doc_id in sorted(samples)]
    stats.documents += len(result)
    stats.chunks += sum(len(sample.chunks) for sample in result)
    stats.documents_without_queries += sum(not sample.queries for sample in result)
    return result


def load_samples(
    folders: Sequence[Path], include_synthetic: bool = True, split: str | None = None
) -> tuple[list[TrainingSample], DataStats]:
    """Samples of every folder (its ``split``, see :func:`resolve_split`), in folder order then ``doc_id``
    order, with their stats."""
    stats = DataStats()
    samples: list[TrainingSample] = []
    names: set[str] = set()
    for folder in folders:
        for sample in read_task(Path(folder), include_synthetic, stats, split):
            if sample.doc_id in names:
                sample.doc_id = f"{_qualifier(sample)}{sample.doc_id}"
                sample.chunk_ids = [f"{_qualifier(sample)}{chunk}" for chunk in sample.chunk_ids]
            names.add(sample.doc_id)
            samples.append(sample)
    return samples, stats


def _qualifier(sample: TrainingSample) -> str:
    """The prefix that qualifies a clashing ``doc_id`` and its ``chunk_ids`` (module docstring)."""
    return f"{sample.task}/"


def _published_chunk_ids(sample: TrainingSample) -> list[str]:
    """The chunk ids as published (without the qualifier :func:`load_samples` may have added)."""
    if sample.source_doc_id and sample.doc_id != sample.source_doc_id:
        return [chunk.removeprefix(_qualifier(sample)) for chunk in sample.chunk_ids]
    return list(sample.chunk_ids)


def document_record(sample: TrainingSample) -> dict:
    """The content record of one document in ``training_data.json`` (:mod:`training.card`): its published id and
    the fingerprints of its text, chunks and passages (:func:`conteb.content.document_prints`)."""
    complete = len(sample.originals) == len(sample.chunks) == len(sample.char_starts)
    prints = document_prints(
        _published_chunk_ids(sample),
        sample.originals if complete else sample.chunks,
        sample.chunks,
        sample.char_starts if complete else None,
    )
    return {
        "doc_id": sample.source_doc_id or sample.doc_id,
        "text": prints.text,
        "chunks": {chunk: list(found) for chunk, found in prints.chunks.items()},
        "passages": list(prints.passages),
    }


def documents_seen(samples: Sequence[TrainingSample]) -> list[dict]:
    """What a model trained on ``samples`` saw, per task folder and split (folder order kept):
    ``[{"folder": ..., "task": <folder name>, "split": ..., "doc_ids": [sorted published ids],
    "documents": [content records (:func:`document_record`) in doc_id order]}]``."""
    groups: dict[tuple[str, str, str | None], dict[str, TrainingSample]] = {}
    for sample in samples:
        group = groups.setdefault((sample.folder, sample.task, sample.split), {})
        group[sample.source_doc_id or sample.doc_id] = sample
    return [
        {
            "folder": folder,
            "task": task,
            "split": split,
            "doc_ids": sorted(group),
            "documents": [document_record(group[doc_id]) for doc_id in sorted(group)],
        }
        for (folder, task, split), group in groups.items()
    ]


def chunk_texts(sample: TrainingSample, header: str | None, title_template: str) -> list[str]:
    """What the encoder reads of each chunk of ``sample``: its text, or with ``header: title`` its header text
    (:func:`evaluation.systems.headers.header_text`, the evaluation's own rule; a document without a title keeps its
    chunks as they are)."""
    if header is None:
        return sample.chunks
    return [header_text(title_template, sample.title, chunk) or chunk for chunk in sample.chunks]


def encoder_inputs(
    samples: Sequence[TrainingSample], header: str | None, title_template: str
) -> tuple[list[list[str]], list[str | None] | None]:
    """Per document of ``samples``: the chunk texts the encoder reads (:func:`chunk_texts`) and the titles anchored
    windows take for their head. With a header the head takes no separate title (None): it is the first chunk's
    header text (the title, then the first chunk), as in evaluation (:mod:`evaluation.systems.dense`)."""
    texts = [chunk_texts(sample, header, title_template) for sample in samples]
    return texts, (None if header is not None else [sample.title for sample in samples])


def count_tokens(
    samples: Sequence[TrainingSample],
    tokenize: Callable[[list[str]], list[list[int]]],
    max_length: int | None,
    stats: DataStats,
    texts: Callable[[TrainingSample], list[str]] = lambda sample: sample.chunks,
) -> None:
    """Set each sample's ``n_tokens`` and count windowed documents and over-long chunks.

    ``tokenize`` maps texts to token ids without special tokens; a document's length is its
    chunks' tokens (``texts(sample)``: what the encoder reads) plus one separator per chunk and the leading/trailing
    special tokens.
    """
    stats.max_length = max_length
    for sample in samples:
        chunks = texts(sample)
        lengths = [len(ids) for ids in tokenize(chunks)] if chunks else []
        sample.n_tokens = sum(lengths) + len(lengths) + 1
        stats.max_document_tokens = max(stats.max_document_tokens, sample.n_tokens)
        if max_length is not None:
            stats.windowed_documents += sample.n_tokens > max_length
            stats.chunks_over_max_length += sum(length + 2 > max_length for length in lengths)


def split_by_document(
    samples: Sequence[TrainingSample], fraction: float, seed: int
) -> tuple[list[TrainingSample], list[TrainingSample]]:
    """``(train, validation)``: a seeded share of the documents with queries goes to validation."""
    with_queries = [sample for sample in samples if sample.queries]
    n_validation = min(round(fraction * len(with_queries)), len(samples) - 1) if fraction > 0 else 0
    if fraction > 0 and n_validation == 0 and len(with_queries) >= 2:
        n_validation = 1
    keys = sorted(sample.doc_id for sample in with_queries)
    random.Random(seed).shuffle(keys)
    chosen = set(keys[: max(n_validation, 0)])
    train = [sample for sample in samples if sample.doc_id not in chosen]
    validation = [sample for sample in samples if sample.doc_id in chosen]
    return train, validation


def make_batches(samples: Sequence[TrainingSample], batch_docs: int, seed: int, epoch: int) -> list[list[int]]:
    """Batches of ``batch_docs`` sample positions for ``epoch`` (seeded shuffle; rules above)."""
    order = list(range(len(samples)))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    batches = [order[start : start + batch_docs] for start in range(0, len(order), batch_docs)]
    if len(batches) > 1 and len(batches[-1]) == 1 and batch_docs > 1:
        batches[-2].extend(batches.pop())
    return batches


def steps_per_epoch(n_batches: int, world_size: int, grad_accumulation: int) -> int:
    """Optimizer steps that read an epoch's ``n_batches`` (:func:`step_batches`): at least one."""
    return max(1, math.ceil(n_batches / (world_size * grad_accumulation)))


def step_batches(
    batches: list[list[int]], in_epoch: int, rank: int, world_size: int, grad_accumulation: int
) -> tuple[list[list[int]], int]:
    """``(this rank's batches, the step's batches on all ranks)`` of step ``in_epoch`` of an epoch.

    The step reads the epoch's next ``world_size × grad_accumulation`` batches (fewer at the end of an epoch, none
    read twice), dealt round robin: rank ``r`` takes the step's batches ``r``, ``r + world_size``, ... -- none when
    the step has fewer batches than ranks.
    """
    per_step = world_size * grad_accumulation
    step = batches[in_epoch * per_step : (in_epoch + 1) * per_step]
    return step[rank::world_size], len(step)


def validation_groups(samples: Sequence[TrainingSample], batch_docs: int) -> list[list[TrainingSample]]:
    """Validation documents in groups of ``batch_docs`` (in-batch retrieval), in a fixed order."""
    ordered = sorted(samples, key=lambda sample: sample.doc_id)
    return [ordered[start : start + batch_docs] for start in range(0, len(ordered), batch_docs)]
