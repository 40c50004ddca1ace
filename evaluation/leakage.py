"""Train/test leakage: refuse to evaluate a model on text it was trained on, and say what is known of its training data.

A model trained by :mod:`training.loop` has ``training_data.json`` in its folder (written by
:func:`training.card.write_model_card`, format in :mod:`training.card`): per task folder and split, the ids of the
documents it saw and, from format 2 on, the fingerprints of their texts, chunks and passages (:mod:`conteb.content`,
the one rule both sides use; the evaluated side is :attr:`evaluation.corpus.EvalCorpus.content_prints`).

**Provenance** (:func:`model_provenance`): ``recorded`` (content fingerprints under this version's rule), ``ids
only`` (format 1, or fingerprints of another rule) or ``unknown`` (no file: a hub or packaged model, a folder copied
without it), with a one-line note; the runner records both on the system's run and every report shows them.

**Overlap by content** (:func:`content_overlap`, format 2): an evaluated document overlaps the training data when

* its text print is a training document's: the same document, whatever its id, title, file name, task or folder, and
  however it was chunked;
* a print of one of its chunks (original ``og_chunk`` or embedded ``chunk``) is a training chunk's (original or
  embedded): the same chunk, even inside another document;
* one of its passage prints is a training document's: a run of at least 60 words in common (never under 50), e.g.
  an XQuAD paragraph the model read as part of its SQuAD article.

Any overlap refuses the model on the corpus; the reason counts the evaluated documents touched, the identical
documents, the identical chunks and the documents sharing a passage, and gives an example.

**Overlap by id** (every format): an entry concerns the corpus when its ``task`` is the corpus name (a registry task's
folder is ``data/conteb/<task>``) or its ``folder`` is the corpus's source folder, and any of its ``doc_ids`` is in
the corpus. This is all a format-1 file allows; with format 2 it still catches an edited document kept under its id.

**Required provenance**: with ``evaluation.require_provenance``, a model whose provenance is not ``recorded`` is refused
(:func:`leakage_problem`). Every refusal starts with :data:`REFUSED`; the runner reports the system as not run with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from conteb.content import PASSAGE_WINDOW, PASSAGE_WORDS
from embedding.model_folder import TRAINING_DATA_FILE, TrainingRecord, parse_training_record
from evaluation.corpus import EvalCorpus
from evaluation.results import PROVENANCE_IDS_ONLY, PROVENANCE_RECORDED, PROVENANCE_UNKNOWN, provenance_label

REFUSED = "refused:"
MAX_EXAMPLES = 3
SHARED_RUN_WORDS = PASSAGE_WORDS + PASSAGE_WINDOW - 1
"""A run of this many words in common is always found by the passage prints (:mod:`conteb.content`)."""


@dataclass(frozen=True)
class Seen:
    """Where a training text was seen: the entry's task, split and folder, and the training document or chunk id."""

    task: str
    split: str | None
    folder: str
    item: str

    def where(self) -> str:
        split = f"split '{self.split}'" if self.split is not None else "every split"
        return f"of training task '{self.task}' ({split})"


@dataclass(frozen=True)
class TrainingIndex:
    """A record's fingerprints, each mapped to where it was first seen (documents, chunks, passages)."""

    texts: dict[str, Seen]
    chunks: dict[str, Seen]
    passages: dict[str, Seen]
    n_documents: int


def _index(record: TrainingRecord) -> TrainingIndex:
    texts: dict[str, Seen] = {}
    chunks: dict[str, Seen] = {}
    passages: dict[str, Seen] = {}
    n_documents = 0
    for entry in record.tasks:
        task, split, folder = entry["task"], entry.get("split"), str(entry.get("folder") or "")
        for document in entry.get("documents", []):
            n_documents += 1
            seen = Seen(task, split, folder, document["doc_id"])
            if document["text"] is not None:
                texts.setdefault(document["text"], seen)
            for chunk_id, prints in document["chunks"].items():
                for found in prints:
                    chunks.setdefault(found, Seen(task, split, folder, chunk_id))
            for found in document["passages"]:
                passages.setdefault(found, seen)
    return TrainingIndex(texts, chunks, passages, n_documents)


@lru_cache(maxsize=16)
def _load(path: str, raw: bytes) -> tuple[TrainingRecord, TrainingIndex | None]:
    """The record and its content index, parsed once per content of the file."""
    record = parse_training_record(Path(path), raw)
    return record, (_index(record) if record.has_content else None)


def _read(folder: Path) -> tuple[TrainingRecord | None, TrainingIndex | None]:
    """``folder``'s ``training_data.json`` (:func:`training.card.parse_training_record`) with its content index;
    ``(None, None)`` when absent. Raises ``ValueError`` naming the file when it is not in a documented format."""
    path = Path(folder) / TRAINING_DATA_FILE
    if not path.is_file():
        return None, None
    return _load(str(path), path.read_bytes())


@dataclass(frozen=True)
class Provenance:
    """What is known of a model's training documents: ``status`` (:data:`evaluation.results.PROVENANCE_RECORDED` ...)
    and a ``note`` that starts with the status's label."""

    status: str
    note: str
    folder: Path | None = None


def model_provenance(folder: Path | None, label: str) -> Provenance:
    """The provenance of the model ``label`` saved in ``folder`` (None: a hub id, nothing on disk).

    Raises ``ValueError`` naming the file when its ``training_data.json`` is not in a documented format.
    """
    if folder is None:
        return Provenance(
            PROVENANCE_UNKNOWN,
            f"{provenance_label(PROVENANCE_UNKNOWN)}: {label} is a hub model; its training documents are not recorded "
            "here, so its overlap with the evaluated corpus could not be checked",
        )
    record, index = _read(folder)
    if record is None:
        return Provenance(
            PROVENANCE_UNKNOWN,
            f"{provenance_label(PROVENANCE_UNKNOWN)}: {label} has no {TRAINING_DATA_FILE} (looked in {folder}; a hub "
            "or packaged model, or a model folder copied without it): its training documents are not known, so its "
            "overlap with the evaluated corpus could not be checked",
            folder,
        )
    if index is None:
        return Provenance(
            PROVENANCE_IDS_ONLY,
            f"{provenance_label(PROVENANCE_IDS_ONLY)}: {record.path} has {record.missing_content()}; overlap with "
            "the evaluated corpus was checked on task names, folders and document ids only, not on content; "
            "retrain the model to record content fingerprints",
            folder,
        )
    tasks = ", ".join(sorted({f"'{entry['task']}'" for entry in record.tasks})) or "none"
    return Provenance(
        PROVENANCE_RECORDED,
        f"{provenance_label(PROVENANCE_RECORDED)}: {record.path} records {index.n_documents:,} training "
        f"document(s) of task(s) {tasks}; overlap with the evaluated corpus was checked on content",
        folder,
    )


@dataclass
class ContentOverlap:
    """What an evaluated corpus shares with a model's training data (rules in the module docstring)."""

    n_documents: int  # documents of the evaluated corpus
    documents: dict[str, Seen] = field(default_factory=dict)  # evaluated doc id -> the training document, same text
    chunks: dict[str, tuple[str, Seen]] = field(default_factory=dict)  # evaluated chunk id -> (its doc id, training)
    passages: dict[str, Seen] = field(default_factory=dict)  # evaluated doc id -> a training doc sharing a passage

    @property
    def touched(self) -> set[str]:
        """The evaluated documents with any overlap."""
        return set(self.documents) | set(self.passages) | {doc for doc, _ in self.chunks.values()}

    def example(self) -> str:
        """One overlap in words: an identical document first, else an identical chunk, else a shared passage."""
        if self.documents:
            doc, seen = next(iter(self.documents.items()))
            return f"evaluated document '{doc}' is training document '{seen.item}' {seen.where()}"
        if self.chunks:
            chunk, (doc, seen) = next(iter(self.chunks.items()))
            return f"evaluated chunk '{chunk}' (document '{doc}') is training chunk '{seen.item}' {seen.where()}"
        doc, seen = next(iter(self.passages.items()))
        return (
            f"evaluated document '{doc}' shares a passage of {PASSAGE_WORDS}+ words with training document "
            f"'{seen.item}' {seen.where()}"
        )


def _content_overlap(index: TrainingIndex, corpus: EvalCorpus) -> ContentOverlap:
    overlap = ContentOverlap(n_documents=corpus.n_documents)
    for doc, prints in corpus.content_prints.items():
        if prints.text is not None and prints.text in index.texts:
            overlap.documents[doc] = index.texts[prints.text]
        for chunk, found in prints.chunks.items():
            seen = next((index.chunks[p] for p in found if p in index.chunks), None)
            if seen is not None:
                overlap.chunks[chunk] = (doc, seen)
        shared = next((index.passages[p] for p in prints.passages if p in index.passages), None)
        if shared is not None:
            overlap.passages[doc] = shared
    return overlap


def training_index(trained_model_folder: Path) -> TrainingIndex | None:
    """The content fingerprints recorded in ``trained_model_folder``; None when it records none (no
    ``training_data.json``, or an ids-only one). Raises ``ValueError`` on a file not in a documented format."""
    return _read(Path(trained_model_folder))[1]


def content_overlap(trained_model_folder: Path, corpus: EvalCorpus) -> ContentOverlap | None:
    """What ``corpus`` shares with the training data recorded in ``trained_model_folder`` (None: no content recorded,
    see :func:`training_index`)."""
    index = training_index(trained_model_folder)
    return None if index is None else _content_overlap(index, corpus)


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'s' if count != 1 else ''}"


def _content_problem(folder: Path, corpus: EvalCorpus, overlap: ContentOverlap) -> str | None:
    touched = overlap.touched
    if not touched:
        return None
    return (
        f"{REFUSED} {folder.name} was trained on text of {len(touched):,} of the "
        f"{_plural(overlap.n_documents, 'document')} of the evaluated corpus '{corpus.name}' "
        f"(split '{corpus.split}'), whatever their names: "
        f"{_plural(len(overlap.documents), 'identical document')}, "
        f"{_plural(len(overlap.chunks), 'identical chunk')} (original or embedded text), "
        f"{_plural(len(overlap.passages), 'document')} sharing a passage of {PASSAGE_WORDS}+ words; "
        f"e.g. {overlap.example()} (see {folder / TRAINING_DATA_FILE}); evaluate on documents the model did not see: "
        "give every task over the same documents the same `splits:` (same seed) in conteb.yaml and train on the train "
        "split only, or retrain the model without these documents"
    )


def _same_folder(a: str | None, b: str) -> bool:
    if not a:
        return False
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except (OSError, RuntimeError):
        return False


def _id_problem(folder: Path, record: TrainingRecord, corpus: EvalCorpus) -> str | None:
    evaluated = set(corpus.document_order)
    overlap: dict[str | None, set[str]] = {}
    for entry in record.tasks:
        if entry["task"] != corpus.name and not _same_folder(entry.get("folder"), corpus.source):
            continue
        shared = evaluated.intersection(str(doc_id) for doc_id in entry["doc_ids"])
        if shared:
            overlap.setdefault(entry.get("split"), set()).update(shared)
    if not overlap:
        return None
    total = set().union(*overlap.values())
    splits = ", ".join(f"'{split}'" if split is not None else "every split" for split in overlap)
    examples = ", ".join(repr(doc_id) for doc_id in sorted(total)[:MAX_EXAMPLES])
    return (
        f"{REFUSED} {folder.name} was trained on {len(total)} document{'s' if len(total) != 1 else ''} "
        f"of task '{corpus.name}' "
        f"(split {splits}) that are also in the evaluated split '{corpus.split}': e.g. {examples} "
        f"(see {folder / TRAINING_DATA_FILE}); evaluate on a split disjoint from training (declare "
        f"`splits:` for the task in conteb.yaml, e.g. {{train: 0.5, test: 0.5, seed: 0}}, and retrain)"
    )


def unreadable_problem(folder: Path, error: ValueError) -> str:
    """The refusal for a model folder whose ``training_data.json`` cannot be read."""
    return f"{REFUSED} cannot tell which documents {Path(folder).name} was trained on: {error}"


def training_overlap_problem(trained_model_folder: Path, corpus: EvalCorpus) -> str | None:
    """Why the model in ``trained_model_folder`` must not be evaluated on ``corpus`` (overlap by content, then by id;
    module docstring), or None.

    None when the folder has no ``training_data.json`` (nothing recorded: :func:`model_provenance` says so) or when
    nothing of ``corpus`` is in its training data.
    """
    folder = Path(trained_model_folder)
    try:
        record, index = _read(folder)
    except ValueError as error:
        return unreadable_problem(folder, error)
    if record is None:
        return None
    if index is not None:
        problem = _content_problem(folder, corpus, _content_overlap(index, corpus))
        if problem:
            return problem
    return _id_problem(folder, record, corpus)


def leakage_problem(provenance: Provenance, corpus: EvalCorpus, *, require_provenance: bool = False) -> str | None:
    """The refusal of a model of known ``provenance`` on ``corpus``: unrecorded provenance when it is required, else
    any overlap with its training data (:func:`training_overlap_problem`); None when it may be evaluated."""
    if require_provenance and provenance.status != PROVENANCE_RECORDED:
        return (
            f"{REFUSED} {provenance.note} (evaluation.require_provenance is true: only models whose "
            f"{TRAINING_DATA_FILE} records content fingerprints are evaluated; train the model with this pipeline, "
            "or set require_provenance: false to evaluate it with its provenance reported)"
        )
    if provenance.folder is None:
        return None
    return training_overlap_problem(provenance.folder, corpus)
