"""A published ConTEB task folder as an MTEB 2.x retrieval task: ``mteb.evaluate(model, tasks=[mteb_task(path)])``.

What MTEB gets from the folder (the layout of :mod:`conteb.storage`, columns of :mod:`conteb.schemas`), split
``split`` only:

* **corpus**: one entry per row of the ``documents`` config: ``id`` = ``chunk_id``, ``text`` = ``chunk`` (the text to
  embed, reformulated where the task reformulates). No ``title`` column: MTEB would prepend it to the text
  (``title + " " + text``), which is the title-prefix baseline, not the independent chunks this task is about. Where
  the folder has them, ``doc_id``, ``chunk_index`` and ``doc_title`` (the ``title`` column, ``""`` when null: MTEB's
  data loaders refuse None) ride along: MTEB's own encoders ignore them; a contextual search model
  (``conteb.mteb_model``) groups the chunks into documents with them.
* **queries**: one per row of ``queries``: ``id`` = ``query_id`` (``"q{row}"`` without the column, as
  ``evaluation/load.py`` names them), ``text`` = ``query``.
* **relevant_docs**: ``{query_id: {chunk_id: 1}}`` with the gold ``chunk_id`` (relevance 1), the qrels our own
  evaluation scores (``evaluation/runner.py`` writes them to ``qrels.trec``). ``chunk_ids`` (every chunk the answer
  *touches*, a straddling answer's neighbours included) is not read when ``chunk_id`` is there; a folder that has only
  ``chunk_ids`` (several chunks hold the answer) gets each of them at relevance 1.

Nothing is dropped silently: a missing split or column, a null or duplicate id, a blank query, a gold chunk that is
not in ``documents`` or a pseudo-query (``pairing: pseudo``: inverse-cloze training data, never evaluated) raises
:class:`MtebTaskError` naming the file, the row and the reason.

Metadata: ``name`` = the folder's name (or ``name``), ``description``/``license`` from the dataset card's
(``README.md``) first paragraph and YAML front matter, ``revision`` = a content hash of the two Parquet files read (so
MTEB's result cache never serves scores of another build under the same name), ``main_score`` ``ndcg_at_10``,
``eval_langs`` ``langs`` (default English: every source this project ships is), reference = the ConTEB paper
(Conti et al., 2025, arXiv:2505.24782). ``mteb`` is imported only when a task is made, so ``import conteb`` stays
light; nothing here reaches the Hugging Face hub.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import pyarrow as pa

from conteb.names import Pairing
from conteb.published import CARD, CardError, card_front, config_splits, read_config
from conteb.text import is_blank

if TYPE_CHECKING:
    from mteb.abstasks import AbsTaskRetrieval

CONTEB_PAPER = "https://arxiv.org/abs/2505.24782"
"""Conti et al., 2025, "Context is Gold to find the Gold Passage: Evaluating and Training Contextual Document
Embeddings" (EMNLP 2025): the ConTEB benchmark."""

CONTEB_BIBTEX = """@article{conti2025context,
  title={Context is Gold to find the Gold Passage: Evaluating and Training Contextual Document Embeddings},
  author={Conti, Max and Faysse, Manuel and Viaud, Gautier and Bosselut, Antoine and Hudelot, C{\\'e}line and
          Colombo, Pierre},
  journal={arXiv preprint arXiv:2505.24782},
  year={2025}
}"""

MAIN_SCORE = "ndcg_at_10"
"""MTEB's name of nDCG@10 (pytrec_eval's ``ndcg_cut_10``), the headline metric of ConTEB and of our reports."""

DEFAULT_LANGS: tuple[str, ...] = ("eng-Latn",)
"""MTEB language codes (ISO 639-3 + script) of the tasks built here: the sample and the shared corpora are English."""


class MtebTaskError(ValueError):
    """The folder cannot be an MTEB task; the message names the file, the row and the reason."""


def _table(folder: Path, config: str, split: str) -> tuple[pa.Table, list[Path]]:
    try:
        found = read_config(folder, config, split)
    except CardError as error:
        raise MtebTaskError(str(error)) from error
    if not found:
        splits = config_splits(folder, config)
        raise MtebTaskError(
            f"{folder}: no {config!r} shards of split {split!r} (splits found: {list(splits) or 'none'}; "
            f"is this a published ConTEB task folder, data/conteb/<task>/?)"
        )
    return found


def _require(table: pa.Table, where: Path, columns: Sequence[str]) -> None:
    missing = [column for column in columns if column not in table.column_names]
    if missing:
        raise MtebTaskError(f"{where}: missing column(s) {missing}; has {table.column_names}")


def _ids(values: list[Any], where: Path, what: str) -> list[str]:
    """``values`` as strings, refusing null, blank and repeated ids."""
    seen: dict[str, int] = {}
    for row, value in enumerate(values):
        if value is None or is_blank(str(value)):
            raise MtebTaskError(f"{where}: row {row}: {what} is null or blank")
        if value in seen:
            raise MtebTaskError(f"{where}: row {row}: duplicate {what} {value!r} (first at row {seen[value]})")
        seen[value] = row
    return [str(value) for value in values]


DOCUMENT_COLUMNS = {"doc_id": "doc_id", "chunk_index": "chunk_index", "title": "doc_title"}
"""Columns of ``documents`` passed on with the corpus (where present), by their name in the MTEB corpus."""


def read_corpus(folder: Path, split: str) -> tuple[dict[str, list[Any]], dict[str, str], dict[str, dict[str, int]]]:
    """``(corpus columns {"id": [chunk_id], "text": [chunk], ...}, queries {query_id: query}, relevant_docs
    {query_id: {chunk_id: 1}})`` of ``split`` of the task ``folder`` (module docstring), in file order."""
    documents, doc_files = _table(folder, "documents", split)
    _require(documents, doc_files[0], ("chunk_id", "chunk"))
    chunk_ids = _ids(documents.column("chunk_id").to_pylist(), doc_files[0], "chunk_id")
    texts = documents.column("chunk").to_pylist()
    for row, text in enumerate(texts):
        if text is None:
            raise MtebTaskError(f"{doc_files[0]}: row {row}: chunk {chunk_ids[row]!r} has no text (null)")
    corpus: dict[str, list[Any]] = {"id": chunk_ids, "text": texts}
    for column, name in DOCUMENT_COLUMNS.items():
        if column in documents.column_names:
            values = documents.column(column).to_pylist()
            corpus[name] = ["" if value is None else value for value in values] if column == "title" else values
    known = set(chunk_ids)

    queries, query_files = _table(folder, "queries", split)
    where = query_files[0]
    _require(queries, where, ("query",))
    names = queries.column_names
    if "chunk_id" not in names and "chunk_ids" not in names:
        raise MtebTaskError(f"{where}: no gold column (chunk_id or chunk_ids); has {names}")
    qids = _ids(
        queries.column("query_id").to_pylist() if "query_id" in names else [f"q{r}" for r in range(queries.num_rows)],
        where,
        "query_id",
    )
    golds = queries.column("chunk_id" if "chunk_id" in names else "chunk_ids").to_pylist()
    pairings = queries.column("pairing").to_pylist() if "pairing" in names else [None] * queries.num_rows
    texts = queries.column("query").to_pylist()
    relevant: dict[str, dict[str, int]] = {}
    for row, (qid, text, gold, pairing) in enumerate(zip(qids, texts, golds, pairings, strict=True)):
        if pairing == Pairing.PSEUDO:
            raise MtebTaskError(
                f"{where}: row {row}: query {qid!r} is a pseudo-query (pairing 'pseudo'): inverse-cloze training "
                f"data, never evaluated; load the task's evaluation split instead of {split!r}"
            )
        if text is None or is_blank(text):
            raise MtebTaskError(f"{where}: row {row}: query {qid!r} is empty (blank)")
        gold_ids = gold if isinstance(gold, list) else [gold]
        if not gold_ids or any(cid is None for cid in gold_ids):
            raise MtebTaskError(f"{where}: row {row}: query {qid!r} has no gold chunk id")
        for cid in gold_ids:
            if cid not in known:
                raise MtebTaskError(f"{where}: row {row}: query {qid!r}: gold chunk_id {cid!r} is not in documents")
        relevant[qid] = {cid: 1 for cid in gold_ids}
    return corpus, dict(zip(qids, texts, strict=True)), relevant


def read_card(folder: Path) -> tuple[dict[str, Any], str | None]:
    """The dataset card's YAML front matter (:func:`conteb.published.card_front`) and its first paragraph after the
    ``# `` title (the task's description, as ``curation/dataset.py`` writes it); ``({}, None)`` without a card."""
    path = folder / CARD
    if not path.is_file():
        return {}, None
    try:
        front = card_front(folder)
    except CardError as error:
        raise MtebTaskError(str(error)) from error
    text = path.read_text(encoding="utf-8")
    if text.startswith("---\n"):
        text = text[4:].partition("\n---\n")[2]
    _, title, body = text.partition("\n# ")
    paragraphs = [p.strip() for p in body.split("\n\n")[1:]] if title else []
    description = next((p for p in paragraphs if p and not p.startswith(("-", "#", "|", "`"))), None)
    return front, description


def content_revision(files: Sequence[Path]) -> str:
    """sha256 over the bytes of ``files`` (in order), first 16 hex digits: the task's MTEB ``revision``."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def _task_class() -> type[AbsTaskRetrieval]:
    """The :class:`mteb.AbsTaskRetrieval` subclass of ConTEB folders (made on first use: ``mteb`` loads lazily)."""
    from datasets import Dataset
    from mteb.abstasks import AbsTaskRetrieval

    class ConTEBFolderTask(AbsTaskRetrieval):
        """One split of a ConTEB task folder; :meth:`load_data` reads the folder (:func:`read_corpus`), no hub.

        MTEB keeps ``metadata`` on the class (``unload_data`` drops an instance's own), so each task gets a subclass
        carrying its ``metadata`` and ``folder`` (:func:`mteb_task`)."""

        folder: Path

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            if self.data_loaded:
                return
            split = self.metadata.eval_splits[0]
            corpus, queries, relevant = read_corpus(self.folder, split)
            self.dataset = {
                "default": {
                    split: {
                        "corpus": Dataset.from_dict(corpus),
                        "queries": Dataset.from_dict({"id": list(queries), "text": list(queries.values())}),
                        "relevant_docs": relevant,
                        "top_ranked": None,
                    }
                }
            }
            self.data_loaded = True

    return ConTEBFolderTask


def mteb_task(
    path: str | Path, *, split: str = "test", name: str | None = None, langs: Sequence[str] = DEFAULT_LANGS
) -> AbsTaskRetrieval:
    """The ConTEB task folder ``path`` (``data/conteb/<task>/``), split ``split``, as an MTEB retrieval task.

    ``name`` defaults to the folder's name; ``langs``: MTEB language codes of its text. The split's files are checked
    now (a missing split or column raises :class:`MtebTaskError`); MTEB reads them on ``load_data``.
    """
    from mteb import TaskMetadata
    from mteb.types import Licenses

    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise MtebTaskError(f"{folder}: not a folder (a published ConTEB task is data/conteb/<task>/)")
    files = [_table(folder, config, split)[1][0] for config in ("documents", "queries")]
    front, description = read_card(folder)
    license_ = front.get("license")
    known = set(get_args(Licenses))  # MTEB's license names (a Literal); others are told in the description
    metadata = TaskMetadata(
        name=name or folder.resolve().name,
        description=(description or "A ConTEB context-dependent retrieval task.")
        + (f" (card license: {license_})" if license_ and license_ not in known and license_ != "unknown" else ""),
        reference=CONTEB_PAPER,
        dataset={"path": str(folder.resolve()), "revision": content_revision(files)},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=[split],
        eval_langs=list(langs),
        main_score=MAIN_SCORE,
        license=license_ if license_ in known else "not specified",
        task_subtypes=["Question answering"],
        sample_creation="found",
        bibtex_citation=CONTEB_BIBTEX,
    )
    base = _task_class()
    return type(base.__name__, (base,), {"metadata": metadata, "folder": folder})()
