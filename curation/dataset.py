"""The published ConTEB dataset folder (Hugging Face layout) and its dataset card.

``<out>/documents/<split>-<content fingerprint>.parquet`` and ``<out>/queries/...`` plus ``README.md``
whose YAML ``configs:`` section maps each config to its files, so that
``datasets.load_dataset(out, "documents", split=split)`` works offline, as the public ConTEB
evaluator loads it. The folder changes in one step (:func:`conteb.published.publish_folder`: data
files under content names first, the card last as the commit point, unnamed files removed after),
and a new content is a new ``datasets`` cache key (see that module).

Splits: one split (the task's ``split``) holds every row, or, with document-level ``splits``
(:mod:`curation.splits`), each split is its own shard per config holding the chunks of its
documents; queries and synthetic queries follow their document (``doc_id``). Shards of splits no
longer produced are removed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import yaml

from conteb.config import TaskConfig
from conteb.published import QUARANTINE_KEY, publish_folder
from conteb.schemas import CONTEB_DOCUMENTS, CONTEB_QUERIES, PAIRED_QUERIES, QUARANTINE, SYNTHETIC_QUERIES
from conteb.storage import PUBLISHED_CONFIGS, PUBLISHED_QUARANTINE
from curation.necessity import RULE as NECESSITY_RULE
from curation.necessity import is_labelled, necessity_counts
from curation.pseudo_queries import RULE as PSEUDO_RULE
from curation.pseudo_queries import card_rows, pseudo_counts, with_sentences_removed, without_pseudo
from curation.quarantine import count_reasons
from curation.reformulation import outcome_counts
from curation.reviewed import llm_failure_counts, person_supplied_counts
from curation.splits import HASH_RULE, assign_task_splits


def conteb_documents(chunks: pa.Table, reformulated: pa.Table | None = None) -> pa.Table:
    """``CONTEB_DOCUMENTS`` from a ``CHUNKS`` table.

    ``chunk`` is ``og_chunk`` unless ``reformulated`` (``REFORMULATED_CHUNKS``) gives a rewrite
    for the chunk id; every chunk must then have a row there (a missing one is an error).
    """
    columns = {name: chunks.column("og_chunk" if name == "chunk" else name) for name in CONTEB_DOCUMENTS.names}
    if reformulated is not None:
        rewrites = dict(
            zip(reformulated.column("chunk_id").to_pylist(), reformulated.column("chunk").to_pylist(), strict=True)
        )
        missing = [cid for cid in chunks.column("chunk_id").to_pylist() if cid not in rewrites]
        if missing:
            raise ValueError(f"{len(missing)} chunks have no reformulation row, e.g. {missing[:3]}")
        columns["chunk"] = pa.array([rewrites[cid] for cid in chunks.column("chunk_id").to_pylist()], pa.string())
    return pa.Table.from_pydict(columns, schema=CONTEB_DOCUMENTS)


def published_documents(chunks: pa.Table, queries: pa.Table, reformulated: pa.Table | None = None) -> pa.Table:
    """The ``documents`` as published: :func:`conteb_documents`, then the training copy of every gold chunk of a
    pseudo-query of ``queries`` (its sentences cut out: :func:`curation.pseudo_queries.with_sentences_removed`)."""
    return with_sentences_removed(conteb_documents(chunks, reformulated), queries)


@dataclass
class DatasetCard:
    """What the card states: provenance, license, counts and the settings that produced it."""

    task: str
    split: str
    source: str
    source_kind: str
    license: str | None
    description: str | None
    counts: dict[str, int]
    settings: dict[str, object]
    quarantine: dict[str, dict[str, int]] = field(default_factory=dict)  # stage -> reason -> count
    configs: tuple[str, ...] = PUBLISHED_CONFIGS[:2]  # documents and queries; set to those written on write
    empty_configs: tuple[str, ...] = ()  # configs with no rows, not published
    splits: tuple[str, ...] = ()  # document-level splits in declaration order; (): the one ``split``
    split_rule: str | None = None  # how documents were assigned to ``splits`` (fractions, seed, hash rule)
    split_counts: dict[str, dict[str, int]] = field(default_factory=dict)  # split -> what -> rows (set on write)
    config_splits: dict[str, tuple[str, ...]] = field(default_factory=dict)  # config -> splits with rows
    data_files: dict[str, dict[str, str]] = field(default_factory=dict)  # config -> split -> path (set on write)
    necessity: dict[str, int] | None = None  # curation.necessity.necessity_counts of the queries; None: unlabelled
    pseudo: dict[str, int] | None = None  # curation.pseudo_queries.pseudo_counts; None: the task has no pseudo-queries
    pseudo_split: str | None = None  # the split whose documents got them

    def _pseudo_section(self) -> str:
        if self.pseudo is None:
            return ""
        rows = "\n".join(f"| `{outcome}` | {meaning} | {n:,} |" for outcome, meaning, n in card_rows(self.pseudo))
        return (
            f"\n## Pseudo-queries (inverse cloze)\n\n{self.pseudo['sentences']:,} sentences of the documents of "
            f"split `{self.pseudo_split}` were considered; {self.pseudo['pseudo_queries']:,} became pseudo-queries "
            f"(`pairing: pseudo`, in `queries/{self.pseudo_split}` only).\n\n"
            f"| outcome | meaning | sentences |\n|---|---|---|\n{rows}\n\n{PSEUDO_RULE}\n"
        )

    def _necessity_section(self) -> str:
        if self.necessity is None:
            return ""
        n = self.necessity
        rows = "\n".join(
            f"| {label} | {n[name]:,} |"
            for name, label in (
                ("needs_context", "`needs_context`"),
                ("theme_missing", "`theme_missing`"),
                ("answerable_alone_false", "`answerable_alone` false"),
                ("unlabelled", "`answerable_alone` null (no LLM judgement)"),
            )
        )
        return f"\n## Context necessity\n\n| queries | rows |\n|---|---|\n{rows}\n\n{NECESSITY_RULE}\n"

    @property
    def split_names(self) -> tuple[str, ...]:
        """Every published split (``(split,)`` without document-level splits)."""
        return self.splits or (self.split,)

    def _empty_note(self) -> str:
        notes = []
        if self.empty_configs:
            names = ", ".join(f"`{name}`" for name in self.empty_configs)
            notes.append(f"\n- **Not published** (no rows; `datasets` cannot load an empty split): {names}")
        partial = [
            f"`{name}/{split}`"
            for name in self.configs
            for split in self.split_names
            if split not in self.config_splits.get(name, self.split_names)
        ]
        if partial:
            notes.append(f"\n- **Splits without rows** (not published for that config): {', '.join(partial)}")
        return "".join(notes)

    def _splits_section(self) -> str:
        if not self.split_counts:
            return ""
        whats = list(dict.fromkeys(what for counts in self.split_counts.values() for what in counts))
        header = "| split | " + " | ".join(whats) + " |\n|---|" + "---|" * len(whats)
        rows = "\n".join(
            f"| {split} | " + " | ".join(f"{counts.get(what, 0):,}" for what in whats) + " |"
            for split, counts in self.split_counts.items()
        )
        rule = (
            f"Documents were assigned to splits by document (every chunk and query of a document is in "
            f"its document's split): {self.split_rule}. The shares are expected values: a small corpus "
            "deviates from the fractions; the counts above are the actual ones."
            if self.split_rule
            else "Every document is in this one split."
        )
        return f"\n## Splits\n\n{header}\n{rows}\n\n{rule}\n"

    def _load_lines(self) -> str:
        several = len(self.split_names) > 1
        lines = []
        for split in self.split_names:
            for name in ("documents", "queries"):
                variable = f"{name}_{split.replace('-', '_').replace('.', '_')}" if several else name
                lines.append(f'{variable} = load_dataset("<this folder>", "{name}", split="{split}")')
        return "\n".join(lines)

    def _split_line(self) -> str:
        label = "Splits" if len(self.split_names) > 1 else "Split"
        return f"- **{label}**: " + ", ".join(f"`{s}`" for s in self.split_names)

    def render(self) -> str:
        front = {
            "pretty_name": f"ConTEB {self.task}",
            "license": self.license or "unknown",
            "task_categories": ["text-retrieval"],
            "tags": ["conteb", "context-dependent-retrieval"],
            "configs": [
                {
                    "config_name": name,
                    "data_files": [
                        {"split": split, "path": self.data_files[name][split]}
                        for split in self.config_splits.get(name, self.split_names)
                    ],
                }
                for name in self.configs
            ],
        }
        tables = self.data_files.get(PUBLISHED_QUARANTINE, {})
        if tables:
            front[QUARANTINE_KEY] = [{"stage": stage, "path": path} for stage, path in tables.items()]
        counts = "\n".join(f"| {name} | {value:,} |" for name, value in self.counts.items())
        settings = "\n".join(f"| {name} | `{value}` |" for name, value in self.settings.items())
        return f"""---
{yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip()}
---

# ConTEB task `{self.task}`

{self.description or "A context-dependent retrieval task built by conteb-pipeline."}

- **Source**: `{self.source}` (kind `{self.source_kind}`)
- **License**: {self.license or "unknown (see the source)"}
{self._split_line()}{self._empty_note()}

## Load it

```python
from datasets import load_dataset
{self._load_lines()}
```
{self._splits_section()}{self._necessity_section()}{self._pseudo_section()}
## Counts

| what | rows |
|---|---|
{counts}

## How it was built

Documents were split with LangChain's `RecursiveCharacterTextSplitter`; each chunk keeps its
character span in its document (`char_start`, `char_end`), and `chunk_id` is
`{{doc_id}}_{{chunk_index}}`. Each query was paired with the chunk holding its answer span: the
gold `chunk_id` is the chunk containing the most characters of the answer (earliest on a tie), and
`chunk_ids` lists every chunk the answer touches. `chunk` is the text to embed; `og_chunk` the
original text (identical unless the task is reformulated).

| setting | value |
|---|---|
{settings}

{self._quarantine_section()}"""

    def _quarantine_section(self) -> str:
        """Rows refused per stage ("0 rows quarantined" too), with their reasons and the table in ``quarantine/``."""
        tables = self.data_files.get(PUBLISHED_QUARANTINE, {})
        total = sum(sum(reasons.values()) for reasons in self.quarantine.values())
        if not self.quarantine:
            return f"## Quarantine\n\n{total} rows quarantined: no stage of this task refuses rows.\n"
        rows = []
        for stage, reasons in self.quarantine.items():
            count = sum(reasons.values())
            why = ", ".join(f"`{reason}`: {n:,}" for reason, n in reasons.items())
            table = f"`{tables[stage]}`" if stage in tables else ""
            label = stage.replace("_", " ")  # "llm pairing", "synthetic queries"
            rows.append(f"| {label} | {count:,} {'row' if count == 1 else 'rows'} quarantined | {why} | {table} |")
        return (
            f"## Quarantine\n\n{total:,} {'row' if total == 1 else 'rows'} quarantined in all. Each stage's refused "
            "rows, with their reasons, are in its table beside this card (columns `stage`, `reason`, `object_kind`, "
            "`object_id`, `doc_id`, `source`, `row`, `detail`: the file, the row and why), written even when empty."
            "\n\n| stage | quarantined | reasons | table |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"
        )


def _row_doc_ids(table: pa.Table) -> list[str]:
    """The document of each row: ``doc_id``, else the ``<doc_id>`` part of ``chunk_id``."""
    if "doc_id" in table.column_names:
        return table.column("doc_id").to_pylist()
    return [cid.rsplit("_", 1)[0] for cid in table.column("chunk_id").to_pylist()]


def split_table(
    table: pa.Table, config: str, assignment: Mapping[str, str], splits: tuple[str, ...]
) -> dict[str, pa.Table]:
    """``{split: rows of table whose document is in that split}`` for every name of ``splits``.

    A row whose document has no split in ``assignment``, or a split not in ``splits``, is an error
    naming the config, the row and the document.
    """
    doc_ids = _row_doc_ids(table)
    labels = []
    for row, doc_id in enumerate(doc_ids):
        split = assignment.get(doc_id)
        if split is None or split not in splits:
            reason = "has no split" if split is None else f"is assigned to undeclared split {split!r}"
            raise ValueError(f"{config}: row {row}: document {doc_id!r} {reason} (splits: {list(splits)})")
        labels.append(split)
    column = pa.array(labels, pa.string())
    return {split: table.filter(pc.equal(column, split)) for split in splits}


def write_conteb_dataset(
    out_dir: Path,
    documents: pa.Table,
    queries: pa.Table,
    card: DatasetCard,
    synthetic_queries: pa.Table | None = None,
    assignment: Mapping[str, str] | None = None,
    quarantines: Mapping[str, pa.Table] | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, Path]:
    """Publish the dataset folder in one step (:func:`conteb.published.publish_folder`); files of other
    splits, and configs no longer produced, are removed; files conteb did not write are left in place, each named
    to ``warn``. ``quarantines`` (stage -> table) are published beside the configs in ``quarantine/``, each one even
    when empty (its schema, ``QUARANTINE``).

    ``assignment`` (``{doc_id: split}``, :func:`curation.splits.assign_splits`) splits every config
    by document into ``card.splits``; without it every row goes to ``card.split``. A split without
    documents is an error (it could not be loaded); a split of another config without rows is left
    out of that config and named in the card. Sets the card's per-split counts.

    Returns the written paths by config name (``<config>/<split>`` with several splits) and ``card``.
    """
    # Queries carry their context-necessity labels (curation.necessity); unlabelled ones are published without.
    query_schema = CONTEB_QUERIES if is_labelled(queries) else PAIRED_QUERIES
    tables = {
        "documents": documents.cast(CONTEB_DOCUMENTS),
        "queries": queries.select(query_schema.names).cast(query_schema),
    }
    if synthetic_queries is not None:
        tables["synthetic_queries"] = synthetic_queries.cast(SYNTHETIC_QUERIES)
    splits = card.split_names
    if assignment is None:
        if len(splits) > 1:
            raise ValueError(f"task '{card.task}': {len(splits)} splits {list(splits)} need a document assignment")
        parts = {name: {splits[0]: table} for name, table in tables.items()}
    else:
        parts = {name: split_table(table, name, assignment, splits) for name, table in tables.items()}
        empty = [split for split, table in parts["documents"].items() if table.num_rows == 0]
        if empty:
            raise ValueError(
                f"task '{card.task}': split(s) {empty} have no documents; an empty split cannot be published"
            )
    # `datasets` cannot load a split without rows ("corresponds to no data"): such configs (and
    # splits) are left out of the folder and named in the card instead.
    parts = {name: {split: t for split, t in by_split.items() if t.num_rows > 0} for name, by_split in parts.items()}
    card.empty_configs = tuple(name for name, by_split in parts.items() if not by_split)
    parts = {name: by_split for name, by_split in parts.items() if by_split}
    card.configs = tuple(parts)
    card.config_splits = {name: tuple(by_split) for name, by_split in parts.items()}
    card.split_counts = {
        split: {
            "documents": len(set(parts["documents"][split].column("doc_id").to_pylist())),
            "chunks": parts["documents"][split].num_rows,
            **{
                name.replace("_", " "): parts[name][split].num_rows if split in parts.get(name, {}) else 0
                for name in tables
                if name != "documents"
            },
        }
        for split in splits
        if split in parts.get("documents", {})
    }

    def render(files: dict[str, dict[str, str]]) -> str:
        card.data_files = files
        return card.render()

    refused = {stage: table.select(QUARANTINE.names).cast(QUARANTINE) for stage, table in (quarantines or {}).items()}
    published = publish_folder(out_dir, {**parts, PUBLISHED_QUARANTINE: refused} if refused else parts, render, warn)
    written = {
        name if len(splits) == 1 and name != PUBLISHED_QUARANTINE else f"{name}/{split}": path
        for name, by_split in published.items()
        if name != "card"
        for split, path in by_split.items()
    }
    written["card"] = published["card"][""]
    return written


@dataclass
class PublishedTask:
    paths: dict[str, Path]  # documents, queries, card
    documents: pa.Table
    counts: dict[str, int]
    quarantine: dict[str, dict[str, int]]
    split_counts: dict[str, dict[str, int]] = field(default_factory=dict)  # split -> what -> rows
    assignment: dict[str, str] | None = None  # doc_id -> split (document-level splits only)


def publish_task(
    out_dir: Path,
    task: TaskConfig,
    source_label: str,
    chunks: pa.Table,
    queries: pa.Table,
    quarantines: dict[str, pa.Table],
    reformulated: pa.Table | None = None,
    synthetic_queries: pa.Table | None = None,
    settings: dict[str, object] | None = None,
    assignment: Mapping[str, str] | None = None,
    pseudo_sentences: pa.Table | None = None,
    warn: Callable[[str], None] | None = None,
) -> PublishedTask:
    """Write ``task``'s ConTEB folder from its stage tables; ``quarantines`` maps stage -> table.

    ``reformulated`` supplies the ``chunk`` text of reformulated tasks; ``synthetic_queries`` adds
    that config; ``settings`` adds rows to the card's settings table (e.g. the LLM model).
    ``assignment`` (``{doc_id: split}``) places each document of a task with ``splits``; by default it
    is :func:`curation.splits.assign_task_splits` over the chunks' documents (ignored without ``splits``).
    Pseudo-queries among ``queries`` get their sentences cut out of their chunks (:func:`published_documents`);
    ``pseudo_sentences`` (``PSEUDO_SENTENCES``) gives the card its count of every sentence's outcome.
    ``warn`` gets a line for each file in the folder that conteb did not write (left in place).
    """
    documents = published_documents(chunks, queries, reformulated)
    if task.splits is not None and assignment is None:
        doc_ids = documents.column("doc_id").to_pylist()
        assignment = assign_task_splits(task.name, doc_ids, task.splits.fractions, task.splits.seed)
    elif task.splits is None:
        assignment = None
    quarantine = {stage: count_reasons(table) for stage, table in quarantines.items()}
    counts = {
        "documents": len(set(documents.column("doc_id").to_pylist())),
        "chunks": documents.num_rows,
        "queries": queries.num_rows,
    }
    if synthetic_queries is not None:
        counts["synthetic queries"] = synthetic_queries.num_rows
    pseudo = pseudo_counts(pseudo_sentences) if pseudo_sentences is not None else None
    if pseudo is not None:
        counts["pseudo queries"] = queries.num_rows - without_pseudo(queries).num_rows
    if reformulated is not None:
        counts.update(outcome_counts(reformulated))
        counts.update(llm_failure_counts(reformulated))
    counts.update(person_supplied_counts(queries, synthetic_queries))
    counts["quarantined rows"] = sum(sum(reasons.values()) for reasons in quarantine.values())
    card = DatasetCard(
        task=task.name,
        split=task.evaluation_split,
        splits=task.split_names if task.splits is not None else (),
        split_rule=(
            f"fractions {dict(task.splits.fractions)}, seed {task.splits.seed}; {HASH_RULE}" if task.splits else None
        ),
        source=source_label,
        source_kind=task.source.kind,
        license=task.license,
        description=task.description,
        counts=counts,
        settings={
            "splitter": "langchain RecursiveCharacterTextSplitter",
            "chunk_size": task.chunking.chunk_size,
            "chunk_overlap": task.chunking.chunk_overlap,
            "pairing": task.pairing,
            "reformulation": task.reformulation,
            "synthetic_queries_per_chunk": task.synthetic_queries,
            **({"pseudo_queries": task.pseudo_queries.model_dump()} if task.pseudo_queries else {}),
            **(settings or {}),
        },
        quarantine=quarantine,
        necessity=necessity_counts(queries) if is_labelled(queries) else None,
        pseudo=pseudo,
        pseudo_split=task.pseudo_split if pseudo is not None else None,
    )
    paths = write_conteb_dataset(out_dir, documents, queries, card, synthetic_queries, assignment, quarantines, warn)
    return PublishedTask(
        paths, documents, counts, quarantine, card.split_counts, dict(assignment) if assignment else None
    )
