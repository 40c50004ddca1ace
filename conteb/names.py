"""The project's vocabularies, each defined once: stages, pairings, review kinds, job names, system names,
trained-model asset names, the Dagster asset groups of a task.

Each vocabulary is a :class:`enum.StrEnum` (its members compare equal to, and format as, the plain strings
stored in Parquet columns, SQLite rows and cache keys), except :class:`StageTable`, whose names go to Dagster
as output names, which must be plain ``str``. Those stored strings are a contract:
renaming a value would orphan paid LLM answers (the cache key holds the stage) and review decisions
(the queue key holds the kind), so values only ever get added.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Stage(StrEnum):
    """A curation stage: the ``stage`` column of quarantine tables, and (for LLM stages) the stage
    part of an LLM cache key and of the cost ledger."""

    SOURCE = "source"
    CHUNKING = "chunking"
    PAIRING = "pairing"  # span pairing (answer spans located in chunks)
    LLM_PAIRING = "llm_pairing"
    THEMES = "themes"
    REFORMULATION = "reformulation"
    SYNTHETIC_QUERIES = "synthetic_queries"
    CHUNK_CONTEXTS = "chunk_contexts"
    ANSWERABILITY = "answerability"
    PSEUDO_QUERIES = "pseudo_queries"  # offline inverse-cloze queries (curation/pseudo_queries.py)


LLM_STAGES: tuple[Stage, ...] = (
    Stage.THEMES,
    Stage.REFORMULATION,
    Stage.LLM_PAIRING,
    Stage.SYNTHETIC_QUERIES,
    Stage.CHUNK_CONTEXTS,
    Stage.ANSWERABILITY,
)
"""The stages that call an LLM (each has answers in ``answers.sqlite`` under its name)."""


class StageFamily(StrEnum):
    """A family of a task's stages: one Dagster asset group ``<task>_<family>`` each (:func:`stage_group`), small
    enough that a group's lineage view at its default zoom (1400 x 1000) shows every asset of the group, with its
    whole name: Dagster fits a group's graph to its width (a group of two or three stages keeps names whole; a
    whole task cuts them) and stacks a stage's assets, and each neighbouring asset outside the group, in columns.
    Most groups fit one screen; ``sources`` and ``publish``, which nearly every stage reads or feeds, are taller
    (a person pans down). The names are short: Dagster's zoomed-out graph cuts a group name longer than 18
    characters (``sample_rewrite`` fits)."""

    SOURCES = "sources"  # the source's documents, queries and quarantine; the chunks
    PAIRING = "pairing"  # how the source's queries get their gold chunk: span and LLM pairing
    QUERIES = "queries"  # queries written for chunks: synthetic queries (LLM), pseudo-queries (offline)
    REWRITE = "rewrite"  # reformulation: the themes and the chunks rewritten without them
    CONTEXTS = "contexts"  # the LLM-written context of each chunk
    REVIEW = "review"  # the review queues and the reviewed tables
    PUBLISH = "publish"  # answerability and the published ConTEB dataset


FAMILY_OF_STAGE: dict[Stage, StageFamily] = {
    Stage.SOURCE: StageFamily.SOURCES,
    Stage.CHUNKING: StageFamily.SOURCES,
    Stage.PAIRING: StageFamily.PAIRING,
    Stage.LLM_PAIRING: StageFamily.PAIRING,
    Stage.SYNTHETIC_QUERIES: StageFamily.QUERIES,
    Stage.PSEUDO_QUERIES: StageFamily.QUERIES,
    Stage.THEMES: StageFamily.REWRITE,
    Stage.REFORMULATION: StageFamily.REWRITE,
    Stage.CHUNK_CONTEXTS: StageFamily.CONTEXTS,
    Stage.ANSWERABILITY: StageFamily.PUBLISH,
}
"""The family (asset group) of each curation stage; the review assets and the dataset name theirs directly."""


def stage_group(task: str, stage: Stage | StageFamily) -> str:
    """The Dagster asset group of ``stage`` (a stage, or a family) of task ``task`` (its Dagster name, no ``-``):
    ``<task>_<family>``, e.g. ``sample_rewrite``. Families hold no ``_``, so two tasks never share a group."""
    family = stage if isinstance(stage, StageFamily) else FAMILY_OF_STAGE[stage]
    return f"{task}_{family}"


def task_groups(task: str) -> tuple[str, ...]:
    """Every asset group a task's stages may use (:func:`stage_group` of each family), in pipeline order."""
    return tuple(stage_group(task, family) for family in StageFamily)


class Pairing(StrEnum):
    """How a query got its gold chunk: the ``pairing`` column of ``PAIRED_QUERIES`` and ``CONTEB_QUERIES``."""

    SPAN = "span"  # the chunk holding the source's annotated answer span (curation/pairing.py)
    LLM = "llm"  # an LLM named the chunk, or wrote the query from it (LLM pairing, synthetic queries)
    PSEUDO = "pseudo"  # inverse cloze: a sentence cut from the chunk (curation/pseudo_queries.py); training only


class ReviewKind(StrEnum):
    """A manual-verification queue: one per kind of LLM output a person accepts, rejects or corrects."""

    REFORMULATION = "reformulation"
    PAIRING = "pairing"
    SYNTHETIC_QUERY = "synthetic_query"


class Job(StrEnum):
    """The Dagster jobs users run by name (``dagster job execute -j <name>``)."""

    BUILD = "build_conteb"
    TRAIN = "train_insent"
    EVALUATE = "evaluate_conteb"
    REPRODUCE = "reproduce_conteb"


class SystemName(StrEnum):
    """The names of the retrieval systems the default registry defines (users may add their own)."""

    BM25 = "bm25"
    BM25_SUBWORD = "bm25-subword"
    BM25_TITLE = "bm25-title"  # BM25 over the title-prefix text (the contextual BM25 baseline)
    INDEPENDENT = "independent"
    LATE_CHUNKING = "late-chunking"
    LATE_CHUNKING_ANCHORED = "late-chunking-anchored"
    TITLE_PREFIX = "title-prefix"
    INSENT = "insent"
    FINETUNE_CONTROL = "finetune-control"
    INSENT_ANCHORED = "insent-anchored"  # the reproduce experiment's own system: InSeNT with anchored windows
    INSENT_ANCHORED_TITLE = "insent-anchored-title"  # the same, trained and evaluated with the title header
    CONTEXTUAL = "contextual"
    HYBRID = "hybrid"  # reciprocal rank fusion of bm25 and independent
    HYBRID_TITLE = "hybrid-title"  # reciprocal rank fusion of bm25-title and title-prefix
    LATE_CHUNKING_TITLE = "late-chunking-title"  # late chunking whose chunks carry the title header
    LATE_CHUNKING_ANCHORED_TITLE = "late-chunking-anchored-title"  # the same with anchored windows
    FUSED_INSENT = "fused-insent"  # fusion of bm25-title and insent, weights fitted on validation

    @staticmethod
    def fused(system: str) -> str:
        """The name of the fitted fusion of ``bm25-title`` with ``system`` (a trained model): ``fused-<system>``."""
        return f"fused-{system}"


class TrainedModel(StrEnum):
    """The training assets of the registry (``training:`` block): Dagster asset ``<name>``, model folder
    ``<data>/models/<name>``, training YAML ``<data>/models/<name>.train.yaml``; a dense system's ``trained``."""

    INSENT = "insent_model"  # late chunking + InSeNT
    FINETUNE_CONTROL = "finetune_control_model"  # the "+Training" control: each chunk encoded alone


def trained_model_name(value: str) -> str:
    """``value`` when it names a :class:`TrainedModel` (as a plain string); else ValueError naming the known ones."""
    if value not in set(TrainedModel):
        raise ValueError(f"{value!r} is not a training asset; known: {[str(name) for name in TrainedModel]}")
    return str(value)


class ReproduceModel(StrEnum):
    """The models the reproduce experiment trains: asset ``[reproduce, <name>]`` (``assets/reproduce.py``)."""

    INSENT_PLAIN = "insent_plain"
    INSENT_ANCHORED = "insent_anchored"
    INSENT_ANCHORED_TITLE = "insent_anchored_title"  # anchored windows, each chunk under its title header
    FINETUNE_CONTROL = "finetune_control"


class StageTable:
    """The stage tables of a task: Dagster asset ``[task, <name>]``, stored as
    ``stages/<task>/<name>.parquet`` (:func:`conteb.storage.stage_table_path`).

    Plain ``str`` constants, not an enum: they are Dagster output names and asset-key parts, and Dagster's
    serialisation refuses enum members there."""

    SOURCE_DOCUMENTS: Final = "source_documents"
    SOURCE_QUERIES: Final = "source_queries"
    SOURCE_QUARANTINE: Final = "source_quarantine"
    CHUNKS: Final = "chunks"
    CHUNK_QUARANTINE: Final = "chunk_quarantine"
    PAIRED_QUERIES: Final = "paired_queries"
    PAIRING_QUARANTINE: Final = "pairing_quarantine"
    LLM_PAIRED_QUERIES: Final = "llm_paired_queries"
    LLM_PAIRING_QUARANTINE: Final = "llm_pairing_quarantine"
    THEMES: Final = "themes"
    REFORMULATED_CHUNKS: Final = "reformulated_chunks"
    REFORMULATION_REVIEW_ITEMS: Final = "reformulation_review_items"
    REFORMULATION_QUARANTINE: Final = "reformulation_quarantine"
    SYNTHETIC_QUERIES: Final = "synthetic_queries"
    SYNTHETIC_QUARANTINE: Final = "synthetic_quarantine"
    CHUNK_CONTEXTS: Final = "chunk_contexts"
    CONTEXT_QUARANTINE: Final = "context_quarantine"
    ANSWERABILITY: Final = "answerability"
    ANSWERABILITY_QUARANTINE: Final = "answerability_quarantine"
    PSEUDO_QUERIES: Final = "pseudo_queries"
    PSEUDO_SENTENCES: Final = "pseudo_sentences"
    PSEUDO_QUARANTINE: Final = "pseudo_quarantine"
    REVIEWED_CHUNKS: Final = "reviewed_chunks"
    REVIEWED_SYNTHETIC_QUERIES: Final = "reviewed_synthetic_queries"
    REVIEWED_LLM_PAIRED_QUERIES: Final = "reviewed_llm_paired_queries"
    CONTEB_DATASET: Final = "conteb_dataset"
