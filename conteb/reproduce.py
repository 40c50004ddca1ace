"""The ``reproduce:`` block of ``conteb.yaml``: the paper's controlled experiment, one command (``make reproduce``).

The experiment (job ``reproduce_conteb``; the asset groups ``reproduce_models``, ``reproduce_results`` and those
of its tasks):

1. **Tasks** (:func:`experiment_tasks`), each built by the same asset factories as any registry task, in groups of
   its own (``reproduce_sources``, ``reproduce_controlled_queries``, ...: ``conteb.names.task_groups``), outside
   ``build_conteb`` and ``evaluate_conteb``:

   * ``reproduce``: SQuAD v1.1 dev (``source``; the bundled sample when that file is absent), split by document
     (``splits``), made context-dependent by the reformulation stage (the configured LLM, else the labelled offline
     mask); trained on (``train``) and evaluated (``test``);
   * ``reproduce-covidqa``: COVID-QA (``covidqa``), split by document (``covidqa_splits``: a small ``train`` share,
     the papers are long and bring few questions each), reformulated; its ``train`` split is trained on, its ``test``
     split evaluated: the experiment's second real evaluated task, on papers no model read;
   * ``reproduce-sotu``: the State of the Union addresses (``sotu``), documents only: offline inverse-cloze
     pseudo-queries on its ``train`` split (``curation/pseudo_queries.py``), trained on;
   * ``reproduce-controlled``: generated same-template documents (``curation/sources/controlled``) of the
     ``controlled.train_domains``, all trained on;
   * ``reproduce-heldout`` and ``reproduce-heldout-untitled``: generated documents of the
     ``controlled.heldout_domains`` (templates and domains never trained on), with informative and with
     uninformative titles (the same documents otherwise), evaluated.

   A corpus whose file is absent, or that the profile sizes to 0 documents, is left out (the report says so).
2. **Models** (:class:`conteb.names.ReproduceModel`): InSeNT with plain windows, InSeNT with anchored windows, InSeNT
   with anchored windows and the title header (``header: title``: each chunk read under its document's title, in
   training and in evaluation, system ``insent-anchored-title``), and the "+Training" control (each chunk alone), all
   trained on the ``train`` splits of the training tasks with the profile's settings.
3. **Evaluation** of every baseline on the ``test`` split of each evaluated task, on all queries and on the
   ``needs_context`` subset, and the chunk-size study on SQuAD's test documents.
4. **Report**: the paper's headline effects beside ours (``evaluation/reports/paper.py``) and the experiment's
   target on every evaluated task.

``profile`` is the one switch between the scaled-down CPU run (the offline MiniLM, ``max_documents`` articles) and
the paper-sized GPU run (ModernBERT-embed-large, every article); the profiles' values are defaults a user may
override under ``profiles:``: an entry named ``cpu`` or ``gpu`` is merged over that built-in profile key by key (its
``training`` mapping key by key too), so ``profiles: {cpu: {max_documents: 4}}`` changes that one value; another
name is a profile of its own (``base_model`` required).

``splits`` are document-level splits as a task declares them (:class:`conteb.config.SplitsConfig`: loadable names,
fractions in (0, 1] summing to 1) and must name the splits the experiment uses (:data:`REQUIRED_SPLITS`: it trains
on ``train`` and evaluates on ``test``); a missing one is named, with the closest declared name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from conteb.config import SplitsConfig, StrictModel, closest_name

REPRODUCE_TASK = "reproduce"
"""Name (key prefix) of the experiment's task and assets."""
MODELS_GROUP = f"{REPRODUCE_TASK}_models"
"""The Dagster asset group of the experiment's trained models."""
EVALUATION_GROUP = f"{REPRODUCE_TASK}_results"
"""The Dagster asset group of the experiment's evaluations and its comparison with the paper."""
EXPERIMENT_GROUPS = (MODELS_GROUP, EVALUATION_GROUP)
"""The experiment's own asset groups (its tasks' stages are in their tasks' groups, ``conteb.names.task_groups``)."""

DEFAULT_SOURCE = Path("../shared/data/squad-v1.1-dev.json.gz")
"""SQuAD v1.1 dev where the shared corpora sit beside the checkout (relative to ``conteb.yaml``)."""
DEFAULT_COVIDQA = Path("../shared/data/covidqa-2020-04-23.json.gz")
DEFAULT_SOTU = Path("../shared/data/sotu")
FALLBACK_SOURCE = Path("data/sample")
SOTU_PSEUDO_QUERIES: dict[str, Any] = {
    "title_pattern": r"(?P<year>\d{4})-(?P<president>[A-Za-z]+)(?:-\d+)?",
    "subject": "the {year} State of the Union address ({president})",
    "template": "In {subject}: {sentence}",
}
"""How a State of the Union file name (``YEAR-President.txt``) names the address in its pseudo-queries."""
HELDOUT_SPLITS = {"validation": 0.3, "test": 0.7}
"""A held-out task's own documents: a share to choose and fit on (never trained on, never reported as test)."""
TRAINING_ONLY_SPLITS = {"train": 0.5, "test": 0.5}
"""The splits of a task that is trained on and never evaluated (the State of the Union addresses): half its
documents trained on, the other half held out (published as ``test``, read by nothing of the experiment)."""
REQUIRED_SPLITS = ("train", "test")
"""The splits the experiment reads: its models train on ``train``, every system is evaluated on ``test``."""


class ReproduceProfile(StrictModel):
    """How big the experiment is: the base model, how many articles, the training settings, the study sizes.

    ``training`` holds :class:`training.config.TrainingConfig` fields (validated when the training runs);
    ``data``, ``output``, ``context`` and ``window_policy`` are set per model by the experiment.
    """

    # the model trained and evaluated (offline-minilm, a local folder or a hub name)
    base_model: str
    max_documents: int | None = Field(None, ge=2)  # the first N articles of the source; None: every one
    # training settings (`training.settings` keys) of every model the experiment trains
    training: dict[str, Any] = Field(default_factory=dict)
    # the chunk sizes (characters) of the experiment's chunk-size study
    chunk_sizes: tuple[int, ...] = (1000, 300, 100)
    # late chunking's window overlap (whole chunks), in training and in every late system evaluated; None: the
    # default (embedding/windows.py DEFAULT_WINDOW_OVERLAP_CHUNKS, the same in training and evaluation)
    window_overlap_chunks: int | None = Field(None, ge=0)
    query_prefix: str | None = None  # None: the model's own (see evaluation/systems/embedders.py)
    # text put before every document sequence; null: the model's own
    document_prefix: str | None = None
    device: str | None = None  # None: CUDA when present, else CPU
    # COVID-QA (0: left out; None: every paper): its first N papers, split as `covidqa_splits`
    covidqa_documents: int | None = Field(None, ge=0)
    # the first N State of the Union addresses used (0: left out; null: every one)
    sotu_documents: int | None = Field(None, ge=0)
    # inverse-cloze pseudo-queries per State of the Union address
    pseudo_queries_per_document: int = Field(20, ge=1)
    # generated documents per template: trained on (controlled.train_domains), evaluated (heldout_domains)
    controlled_documents_per_template: int = Field(20, ge=0, le=100)
    # generated documents per template of the held-out domains (evaluated)
    heldout_documents_per_template: int = Field(20, ge=1, le=100)


CPU_PROFILE = ReproduceProfile(
    base_model="offline-minilm",
    max_documents=40,
    training={
        "epochs": 2,
        "batch_docs": 2,
        "lr": 5e-5,
        "lambda_seq": 0.1,
        "eval_every": 0,
        "checkpoint_every": 8,
        "attention_dropout": 0.0,
        "gradient_checkpointing": False,
    },
    chunk_sizes=(1000, 300),
    window_overlap_chunks=0,
    covidqa_documents=40,
    sotu_documents=8,
    pseudo_queries_per_document=20,
    controlled_documents_per_template=12,
    heldout_documents_per_template=20,
)
"""Scaled down for a 2-core CPU, sized so that the test splits can decide the experiment's question within the
hour (bench/BENCHMARKS.md, "Test sets that can decide", has the measured sizes, times and minimum detectable
differences): the first 40 SQuAD v1.1 dev articles (split by ``splits``: about a quarter trained on, a quarter to
choose on, half evaluated), the first 40 COVID-QA papers (``covidqa_splits``) and 8 State of the Union addresses
(half trained on), 12 generated documents per trained-on template, 20 per held-out template (80 per held-out task,
``HELDOUT_SPLITS``: at least 16 of them to choose on). MiniLM, batches of two documents, 2 epochs, chunk sizes 1000
and 300. Two settings buy speed: windows without overlap (with 1000-character chunks in 512-token windows an overlap of
one or two chunks forwards one window per chunk, twice the windows), and no attention dropout while training (like
the paper's ModernBERT, whose ``attention_dropout`` is 0; with dropout, CPU SDPA falls back to the unfused kernel,
slower and far hungrier for memory), so no gradient checkpointing either (bench/BENCHMARKS.md, "Attention dropout
and gradient checkpointing on CPU")."""

GPU_PROFILE = ReproduceProfile(
    base_model="lightonai/modernbert-embed-large",
    max_documents=None,
    training={
        "epochs": 2,
        "batch_docs": 4,
        "lr": 5e-5,
        "lambda_seq": 0.1,
        "eval_every": 0,
        "checkpoint_every": 50,
        "query_prefix": "search_query: ",
        "document_prefix": "search_document: ",
    },
    chunk_sizes=(8000, 1000, 500, 300, 200, 100),
    query_prefix="search_query: ",
    document_prefix="search_document: ",
)
"""The paper's setting: ModernBERT-embed-large (8k tokens), 4 documents per batch, every SQuAD dev article."""


BUILT_IN_PROFILES = {"cpu": CPU_PROFILE, "gpu": GPU_PROFILE}
"""The profiles a ``profiles:`` entry of the same name is merged over."""


def merged_profile(name: str, given: Any) -> Any:
    """``given`` (a ``profiles:`` entry as written) merged over the built-in profile ``name``, key by key and its
    ``training`` mapping key by key; ``given`` itself for another name or a value that is not a mapping."""
    built_in = BUILT_IN_PROFILES.get(name)
    if built_in is None or not isinstance(given, dict):
        return given
    merged = {**built_in.model_dump(), **given}
    if isinstance(given.get("training"), dict):
        merged["training"] = {**built_in.training, **given["training"]}
    return merged


class ControlledPlan(StrictModel):
    """The generated tasks of the experiment: which domains are trained on, which are held out (never trained on)."""

    # the template domains whose generated documents are trained on
    train_domains: tuple[str, ...] = ("geography", "sport", "things")
    # the template domains held out: evaluated, never trained on
    heldout_domains: tuple[str, ...] = ("organisations", "people")
    # the generation seed of both (another seed: other entities and facts)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _disjoint(self) -> ControlledPlan:
        both = sorted(set(self.train_domains) & set(self.heldout_domains))
        if both:
            raise ValueError(f"heldout_domains: {both} also in train_domains; held-out domains are never trained on")
        if not self.heldout_domains:
            raise ValueError("heldout_domains: name at least one domain to evaluate on")
        return self


class ReproduceConfig(StrictModel):
    """The ``reproduce:`` block (every key optional)."""

    source: Path | None = None  # SQuAD-format JSON file or sample-format folder; default: DEFAULT_SOURCE or the sample
    covidqa: Path | None = None  # default: DEFAULT_COVIDQA when present
    sotu: Path | None = None  # a folder of State of the Union texts; default: DEFAULT_SOTU when present
    controlled: ControlledPlan = ControlledPlan()
    # the SQuAD task's document splits: train (the models read it), validation (fusion weights fitted and the pipeline
    # chosen there, evaluation/select.py), test (every system evaluated)
    splits: SplitsConfig = SplitsConfig(fractions={"train": 0.25, "validation": 0.25, "test": 0.5}, seed=0)
    # COVID-QA's document splits: few papers trained on (long papers, few questions each), the rest chosen and
    # evaluated on
    covidqa_splits: SplitsConfig = SplitsConfig(fractions={"train": 0.1, "validation": 0.3, "test": 0.6}, seed=0)
    # which entry of `profiles` sizes the run: cpu (this machine) or gpu
    profile: Literal["cpu", "gpu"] = "cpu"
    profiles: dict[str, ReproduceProfile] = Field(default_factory=lambda: dict(BUILT_IN_PROFILES))
    window_share: float = Field(0.4, gt=0.0, lt=1.0)  # anchored windows: the head's cap, as a share of the window

    @field_validator("profiles", mode="before")
    @classmethod
    def _over_the_built_in_profiles(cls, value: Any) -> Any:
        """The built-in profiles, each ``profiles:`` entry merged over the one of its name (:func:`merged_profile`)."""
        if not isinstance(value, dict):
            return value
        return {**BUILT_IN_PROFILES, **{name: merged_profile(name, given) for name, given in value.items()}}

    @model_validator(mode="after")
    def _required_splits(self) -> ReproduceConfig:
        for key, splits in (("splits", self.splits), ("covidqa_splits", self.covidqa_splits)):
            declared = splits.names
            for name in REQUIRED_SPLITS:
                if name not in declared:
                    close = closest_name(name, [split for split in declared if split not in REQUIRED_SPLITS])
                    hint = f"; did you mean {name!r} instead of {close!r}?" if close else ""
                    raise ValueError(
                        f"{key}: the experiment trains on 'train' and evaluates on 'test': no {name!r} split among "
                        f"{', '.join(map(repr, declared))}{hint}"
                    )
        return self

    @property
    def settings(self) -> ReproduceProfile:
        """The active profile."""
        try:
            return self.profiles[self.profile]
        except KeyError:
            raise ValueError(f"reproduce.profile {self.profile!r} has no entry under reproduce.profiles") from None

    @property
    def split_fields(self) -> dict[str, float | int]:
        """``splits`` as a task's ``splits:`` mapping (the split names with their fractions, and ``seed``)."""
        return {**self.splits.fractions, "seed": self.splits.seed}

    @property
    def covidqa_split_fields(self) -> dict[str, float | int]:
        """``covidqa_splits`` as a task's ``splits:`` mapping."""
        return {**self.covidqa_splits.fractions, "seed": self.covidqa_splits.seed}


def reproduce_source(block: ReproduceConfig, config_dir: Path) -> dict[str, Any]:
    """The task's ``source:`` mapping: the configured file (``squad_json``) or folder (``sample`` format), else
    SQuAD v1.1 dev when present, else the bundled sample."""
    if block.source is not None:
        path = (config_dir / block.source).resolve()
        return {"kind": "sample" if path.is_dir() else "squad_json", "path": str(path)}
    squad = (config_dir / DEFAULT_SOURCE).resolve()
    if squad.is_file():
        return {"kind": "squad_json", "path": str(squad)}
    return {"kind": "sample", "path": str((config_dir / FALLBACK_SOURCE).resolve())}


def reproduce_task_fields(block: ReproduceConfig, config_dir: Path, llm_available: bool) -> dict[str, Any]:
    """The registry fields of the experiment's task (validated as a ``TaskConfig`` by the caller).

    The offline mask is deterministic and labelled (``method = "mask"``): it is accepted without a person
    (``review.auto_accept_methods``); LLM rewrites still wait in the review queue.
    """
    source = reproduce_source(block, config_dir)
    return {
        "name": REPRODUCE_TASK,
        "source": source,
        "splits": block.split_fields,
        "max_documents": block.settings.max_documents,
        "pairing": "span",
        "reformulation": True,
        "chunk_contexts": llm_available,
        "review": {"auto_accept_methods": ["mask"]},
        "license": "cc-by-sa-4.0" if source["kind"] == "squad_json" else "cc0-1.0",
        "description": "The paper's controlled experiment: SQuAD v1.1 dev split by document, later chunks "
        "rewritten so that they no longer name the article.",
    }


@dataclass(frozen=True)
class ExperimentTask:
    """One task of the experiment: its registry fields (validated as a ``TaskConfig`` by the caller), whether its
    ``train`` split is trained on, whether its ``test`` split is evaluated, and what it is (for the report)."""

    fields: dict[str, Any]
    trains: bool
    evaluates: bool
    about: str

    @property
    def name(self) -> str:
        return str(self.fields["name"])


def _corpus_path(configured: Path | None, default: Path, config_dir: Path) -> Path | None:
    """``configured`` (must exist: a typo is an error later, at the source), else ``default`` when present."""
    if configured is not None:
        return (config_dir / configured).resolve()
    path = (config_dir / default).resolve()
    return path if path.exists() else None


def _controlled(domains: Sequence[str], per_template: int, seed: int, titles: str) -> dict[str, Any]:
    return {
        "kind": "controlled",
        "domains": list(domains),
        "documents_per_template": per_template,
        "seed": seed,
        "titles": titles,
    }


def experiment_tasks(block: ReproduceConfig, config_dir: Path, llm_available: bool) -> list[ExperimentTask]:
    """Every task of the experiment, the SQuAD task first (module docstring, item 1)."""
    profile = block.settings
    main = reproduce_task_fields(block, config_dir, llm_available)
    tasks = [ExperimentTask(main, True, True, "SQuAD v1.1 dev (or the sample), split by document, reformulated")]
    covidqa = _corpus_path(block.covidqa, DEFAULT_COVIDQA, config_dir)
    fields: dict[str, Any]
    if covidqa is not None and profile.covidqa_documents != 0:
        fields = {
            "name": f"{REPRODUCE_TASK}-covidqa",
            "source": {"kind": "squad_json", "path": str(covidqa)},
            "splits": block.covidqa_split_fields,
            "max_documents": profile.covidqa_documents,
            "pairing": "span",
            "reformulation": True,
            "review": {"auto_accept_methods": ["mask"]},
            "license": "apache-2.0",
            "description": "COVID-QA, split by document: the experiment trains on its train split and evaluates on "
            "its test split.",
        }
        tasks.append(ExperimentTask(fields, True, True, "COVID-QA papers, split by document, reformulated"))
    sotu = _corpus_path(block.sotu, DEFAULT_SOTU, config_dir)
    if sotu is not None and profile.sotu_documents != 0:
        fields = {
            "name": f"{REPRODUCE_TASK}-sotu",
            "source": {"kind": "text_folder", "path": str(sotu), "patterns": ["*.txt"]},
            "splits": {**TRAINING_ONLY_SPLITS, "seed": block.splits.seed},
            "max_documents": profile.sotu_documents,
            "pairing": "span",
            "reformulation": False,
            "pseudo_queries": {**SOTU_PSEUDO_QUERIES, "per_document": profile.pseudo_queries_per_document},
            "license": "other",
            "description": "State of the Union addresses (public domain): inverse-cloze pseudo-queries on the "
            "train split, trained on.",
        }
        tasks.append(ExperimentTask(fields, True, False, "State of the Union addresses, pseudo-queries"))
    plan = block.controlled
    if profile.controlled_documents_per_template:
        fields = {
            "name": f"{REPRODUCE_TASK}-controlled",
            "source": _controlled(
                plan.train_domains, profile.controlled_documents_per_template, plan.seed, "informative"
            ),
            "splits": {"train": 1.0, "seed": plan.seed},
            "pairing": "span",
            "reformulation": False,
            "license": "cc0-1.0",
            "description": "Generated same-template documents (trained-on domains).",
        }
        tasks.append(
            ExperimentTask(fields, True, False, f"generated documents, domains {', '.join(plan.train_domains)}")
        )
    for suffix, titles in (("heldout", "informative"), ("heldout-untitled", "uninformative")):
        fields = {
            "name": f"{REPRODUCE_TASK}-{suffix}",
            "source": _controlled(plan.heldout_domains, profile.heldout_documents_per_template, plan.seed, titles),
            "splits": {**HELDOUT_SPLITS, "seed": plan.seed},
            "pairing": "span",
            "reformulation": False,
            "license": "cc0-1.0",
            "description": f"Generated same-template documents of held-out domains, {titles} titles.",
        }
        about = f"generated documents, held-out domains {', '.join(plan.heldout_domains)}, {titles} titles"
        tasks.append(ExperimentTask(fields, False, True, about))
    return tasks
