"""The whole registry: ``conteb.yaml`` (or the file named by ``$CONTEB_CONFIG``), assembled from each part's block.

Each part owns its block: tasks (:mod:`conteb.config`), ``llm:`` (:mod:`llm.settings`), ``evaluation:``
(:mod:`evaluation.config`), ``reproduce:`` (:mod:`conteb.reproduce`); the blocks about how Dagster runs things
(``execution:``, ``training:``) live here. ``load_config`` parses and validates the file; any problem raises
:class:`conteb.config.ConfigError` with a message naming the file, the task and the field, so a bad registry fails
when Dagster loads the code location rather than halfway through a run.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from conteb.config import (
    ConfigError,
    ControlledSource,
    HFDatasetSource,
    SampleSource,
    StrictModel,
    TaskConfig,
    TextFolderSource,
    describe_validation_error,
    display_path,
    unknown_key_message,
)
from conteb.reproduce import ExperimentTask, ReproduceConfig, experiment_tasks
from conteb.storage import resolve_data_dir
from conteb.yaml_text import YAMLNestingError, load_yaml
from evaluation.config import EvaluationConfig
from llm.settings import LLMSettings

CONFIG_ENV = "CONTEB_CONFIG"
DEFAULT_CONFIG_NAME = "conteb.yaml"


def _redis_url(value: str) -> str:
    """``value`` when it is a Redis URL ``redis[s]://[user:password@]host[:port][/db]``, else a ``ValueError``."""
    try:
        url = urlsplit(value)
        port = url.port  # raises ValueError when not a number in 0..65535
    except ValueError as error:
        raise ValueError(f"{value!r} is not a valid URL ({error})") from None
    if url.scheme not in ("redis", "rediss"):
        raise ValueError(
            f"{value!r} is not a Redis URL (redis://HOST:PORT/DB); the Celery executor of this project uses "
            "a Redis broker and result backend (scripts/workers.sh starts one on 127.0.0.1)"
        )
    if not url.hostname:
        raise ValueError(f"{value!r} names no host (e.g. redis://127.0.0.1:6390/0)")
    if port == 0:
        raise ValueError(f"{value!r}: port 0 is not a port Redis can listen on")
    db = url.path.strip("/")
    if db and not db.isdigit():
        raise ValueError(f"{value!r}: the database after the port must be a number (e.g. /0), not {db!r}")
    return value


class CeleryConfig(StrictModel):
    """The ``execution.celery:`` block: Dagster's Celery executor (``dagster-celery``) with a Redis broker.

    ``broker`` and ``backend`` are Redis URLs (the task queue and where step results come back); a loopback
    broker is started by ``scripts/workers.sh start`` (Debian's ``redis-server``). ``workers``: how many worker
    processes the script starts, each running ``concurrency`` steps at once (Celery prefork pool size).
    ``no_worker_timeout_s``: a run with no worker on the queue that long fails, saying so (``make workers``);
    ``stop_timeout_s``: how long a run stopped by Ctrl-C or SIGTERM waits for the steps it revoked.
    ``visibility_timeout_s``: Redis transport only: a task taken by a worker whose *main* process then died is
    handed to another worker after this many seconds (a killed pool process is re-queued at once instead); it
    must exceed the longest step, or a step still running is started a second time elsewhere.
    """

    # the Redis URL of the task queue
    broker: str = "redis://127.0.0.1:6390/0"
    # the Redis URL where step results come back (another database than the broker's)
    backend: str = "redis://127.0.0.1:6390/1"
    workers: int = Field(2, ge=1, le=64)
    # steps one worker process runs at once (Celery's prefork pool size)
    concurrency: int = Field(1, ge=1, le=64)
    visibility_timeout_s: int = Field(6 * 3600, ge=60)
    # a run fails when no worker consumes the queue for this long (before its first step, or while steps wait)
    no_worker_timeout_s: float = Field(60.0, gt=0, le=24 * 3600)
    # after Ctrl-C / SIGTERM: how long the run waits for the steps it revoked before it ends anyway
    stop_timeout_s: float = Field(20.0, gt=0, le=3600)

    @field_validator("broker")
    @classmethod
    def _broker_is_redis(cls, value: str) -> str:
        return _redis_url(value)

    @field_validator("backend")
    @classmethod
    def _backend_is_redis(cls, value: str) -> str:
        return _redis_url(value)

    @model_validator(mode="after")
    def _broker_and_backend_differ(self) -> CeleryConfig:
        if self.broker == self.backend:
            raise ValueError(
                f"backend: the same Redis database as the broker ({self.broker}); give the results their own "
                "database, e.g. redis://127.0.0.1:6390/1"
            )
        return self


class ExecutionConfig(StrictModel):
    """How ``build_conteb`` (and, with ``celery``, ``evaluate_conteb``) runs its steps, and how heavy stages shard.

    ``auto`` runs in process (no per-step subprocess start-up) unless the
    registry declares more than ``multiprocess_from_tasks`` tasks, then multiprocess. ``celery`` sends
    every step of ``build_conteb`` and ``evaluate_conteb`` to Celery workers (``execution.celery``, see
    :class:`CeleryConfig`; start them with ``make workers``); the other jobs stay in process.
    """

    # how steps run: auto (in process, multiprocess above `multiprocess_from_tasks` tasks), in_process, multiprocess, or
    # celery (on the workers of `make workers`)
    executor: Literal["auto", "in_process", "multiprocess", "celery"] = "auto"
    # steps run at once by the multiprocess executor; null: one per CPU core
    max_concurrent: int | None = Field(None, ge=1)
    # with executor auto: more tasks than this in the registry run multiprocess
    multiprocess_from_tasks: int = Field(4, ge=1)
    # documents per shard of the heavy stages (the LLM stages): one step per shard, so a distributed executor runs
    # shards on different workers and a step's memory is bounded by its shard, not by the corpus
    shard_documents: int = Field(100, ge=1)
    # documents per encode shard of each task's evaluation (its model-based systems' chunk encoding): one step per
    # shard; larger than shard_documents because a step loads its models, and a shard's work is model forwards only
    encode_shard_documents: int = Field(1000, ge=1)
    # where the encode steps run: a Dagster concurrency pool (e.g. "gpu", limited by `dagster instance concurrency
    # set gpu <N>`) and op tags (e.g. dagster-k8s/config asking for a GPU; deploy/k8s/jobs.py GPU_OP_TAGS)
    encode_pool: str | None = None
    # op tags of the encode steps (e.g. a dagster-k8s/config asking for a GPU)
    encode_op_tags: dict[str, Any] = Field(default_factory=dict)
    celery: CeleryConfig = CeleryConfig()


class TrainingBlock(StrictModel):
    """The ``training:`` block: which tasks feed InSeNT training, and how it is launched.

    ``settings`` are the training hyperparameters (see ``training/config.py``: base_model, mode,
    lambda_seq, lr, epochs, max_steps, batch_docs, ...); they are validated by the training
    package when the asset runs. ``launcher``: ``subprocess`` runs ``python -m
    pipelines.pipes_train`` locally through Dagster Pipes (the README shows the Kubernetes swap).
    ``nproc_per_node``: processes on this machine; above 1 the Pipes subprocess is ``torchrun`` (``python -m
    torch.distributed.run --standalone``) and training is data parallel (``training/distributed.py``: one GPU a
    process, or CPU processes with Gloo).
    ``control``: also train the paper's "+Training" control (same data, no context).
    """

    # the tasks whose train split feeds InSeNT training (published folders of `make run`)
    tasks: tuple[str, ...] = ()
    launcher: Literal["subprocess"] = "subprocess"
    nproc_per_node: int = Field(1, ge=1)
    control: bool = True
    # training hyperparameters: the keys of `training.settings` below (training/config.py)
    settings: dict[str, Any] = Field(default_factory=dict)


class ProjectConfig(StrictModel):
    """The whole registry. ``config_path`` is where it was read from (paths resolve against it)."""

    llm: LLMSettings = LLMSettings()  # the LLM endpoint, model, rate budget, retries, batch mode and prices
    execution: ExecutionConfig = ExecutionConfig()  # how the jobs run their steps: in process, multiprocess, Celery
    training: TrainingBlock = TrainingBlock()  # which tasks train InSeNT and the +Training control, and how
    # the retrieval systems evaluated, the metrics' cutoffs, confidence intervals, tests and the two studies
    evaluation: EvaluationConfig = EvaluationConfig()
    reproduce: ReproduceConfig = ReproduceConfig()  # the paper's controlled experiment (make reproduce)
    tasks: tuple[TaskConfig, ...] = ()  # the benchmark tasks: each one's source, splits and curation stages
    config_path: Path | None = None

    @model_validator(mode="after")
    def _unique_task_names(self) -> ProjectConfig:
        seen: dict[str, int] = {}
        for index, task in enumerate(self.tasks):
            if task.name in seen:
                raise ValueError(
                    f"task '{task.name}' (tasks[{index}]): name: duplicate task name, "
                    f"already declared at tasks[{seen[task.name]}]"
                )
            seen[task.name] = index
        unknown = [name for name in self.training.tasks if name not in seen]
        if unknown:
            raise ValueError(f"training.tasks: unknown task(s) {unknown}; declared: {sorted(seen)}")
        unknown = [name for name in self.evaluation.tasks or () if name not in seen]
        if unknown:
            raise ValueError(f"evaluation.tasks: unknown task(s) {unknown}; declared: {sorted(seen)}")
        clash = [t.name for t in self.evaluation.external if t.name in seen]
        if clash:
            raise ValueError(f"evaluation.external: name(s) {clash} already used by tasks")
        return self

    @property
    def config_dir(self) -> Path:
        return self.config_path.parent if self.config_path else Path.cwd()

    def reproduce_task(self, llm_available: bool) -> TaskConfig:
        """The SQuAD task of the paper's controlled experiment (``reproduce:`` block; see conteb/reproduce.py)."""
        return self.reproduce_tasks(llm_available)[0][1]

    def reproduce_tasks(self, llm_available: bool) -> list[tuple[ExperimentTask, TaskConfig]]:
        """Every task of the experiment (:func:`conteb.reproduce.experiment_tasks`), the SQuAD task first, each with
        its validated ``TaskConfig``."""
        out = []
        for task in experiment_tasks(self.reproduce, self.config_dir, llm_available):
            try:
                config = TaskConfig.model_validate(task.fields)
            except ValidationError as error:
                raise ConfigError(f"{self.config_path}: reproduce: task {task.name}: {error}") from None
            problem = controlled_source_problem(config.source)
            if problem:
                raise ConfigError(f"{self.config_path}: reproduce: controlled: {problem}")
            out.append((task, config))
        return out

    def task(self, name: str) -> TaskConfig:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"no task named {name!r} in {self.config_path}")


def registry_fingerprint(config: ProjectConfig) -> str:
    """16 hex digits of the SHA-256 of the resolved registry and of the data folder it resolves to.

    The canonical JSON (sorted keys) of every validated setting, defaults and resolved source paths included
    (``config_path`` left out: the same registry read from another path is the same registry), and the data folder
    (``$CONTEB_DATA_DIR`` or ``data/`` beside the registry): two processes with the same fingerprint build the same
    steps on the same files. It is the ``registry`` part of a Celery step's fingerprint (``project/fingerprint.py``).
    """
    payload = {
        "registry": config.model_dump(mode="json", exclude={"config_path"}),
        "data_dir": str(resolve_data_dir(config.config_dir)),
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def find_config_path(start: Path | None = None) -> Path:
    """``$CONTEB_CONFIG`` if set, else ``conteb.yaml`` in ``start`` (default: cwd) or the project."""
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser().resolve()
    candidates = [
        (start or Path.cwd()) / DEFAULT_CONFIG_NAME,
        Path(__file__).resolve().parents[1] / DEFAULT_CONFIG_NAME,
    ]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    return candidates[0].resolve()


def load_config(path: Path | str | None = None) -> ProjectConfig:
    """Read, validate and resolve the registry at ``path`` (default: :func:`find_config_path`).

    Source paths are made absolute relative to the config file and must exist (hub dataset names
    of ``hf_dataset`` sources are the exception).
    """
    config_path = Path(path).resolve() if path else find_config_path()
    try:
        raw = load_yaml(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{config_path}: no such file (set {CONFIG_ENV} or create it)") from None
    except YAMLNestingError as error:
        raise ConfigError(f"{config_path}: {error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{config_path}: not valid YAML: {error}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{config_path}: the top level must be a mapping with a 'tasks' list")
    try:
        config = ProjectConfig.model_validate({**raw, "config_path": config_path})
    except ValidationError as error:
        raise ConfigError(describe_validation_error(config_path, raw, error, ProjectConfig)) from None
    config = _resolve_paths(config)
    _check_free_form_blocks(config)
    config.reproduce_tasks(llm_available=False)  # the experiment's tasks, as the code location builds them
    return config


def _check_free_form_blocks(config: ProjectConfig) -> None:
    """ConfigError, one line per unknown key (with the closest :class:`training.config.TrainingConfig` field), for the
    training settings the registry holds as free-form mappings: ``training.settings`` and each
    ``reproduce.profiles.<name>.training``; their values are validated when the training runs."""
    from training.config import TrainingConfig

    shown = display_path(config.config_path) if config.config_path else DEFAULT_CONFIG_NAME
    fields = sorted(TrainingConfig.model_fields)
    blocks = [("training.settings", config.training.settings)]
    blocks += [
        (f"reproduce.profiles.{name}.training", profile.training) for name, profile in config.reproduce.profiles.items()
    ]
    problems = [
        f"{shown}: {where}: {unknown_key_message(str(key), fields)}"
        for where, settings in blocks
        for key in settings
        if key not in fields
    ]
    if problems:
        raise ConfigError("\n".join(problems))


def _as_written(written: str | Path, base: Path, resolved: Path) -> str:
    """``'corpora/x.gz' (relative to /reg, the registry's folder: /reg/corpora/x.gz)``; absolute paths as written."""
    if Path(written).expanduser().is_absolute():
        return repr(str(written))
    return f"{str(written)!r} (relative to {base}, the registry's folder: {resolved})"


def controlled_source_problem(source: object) -> str | None:
    """Why a ``controlled`` source names templates or domains the catalogue does not have (``field: reason``), or
    None (also for any other kind of source)."""
    if not isinstance(source, ControlledSource):
        return None
    from curation.sources.controlled.catalog import select_templates  # the catalogue, only where a task uses it

    try:
        select_templates(source.templates, source.domains)
    except ValueError as error:
        return f"{'source.domains' if source.domains is not None else 'source.templates'}: {error}"
    return None


def _resolve_paths(config: ProjectConfig) -> ProjectConfig:
    base = config.config_dir
    shown = display_path(config.config_path) if config.config_path else DEFAULT_CONFIG_NAME
    tasks = []
    for index, task in enumerate(config.tasks):
        source = task.source
        where = f"{shown}: task '{task.name}' (tasks[{index}]): source.path"
        if isinstance(source, ControlledSource):  # generated: no path; its template names are checked here
            problem = controlled_source_problem(source)
            if problem:
                raise ConfigError(f"{shown}: task '{task.name}' (tasks[{index}]): {problem}")
        elif isinstance(source, HFDatasetSource):
            local = (base / source.path).resolve()
            looks_local = source.path.startswith((".", "/", "~"))
            if local.exists():
                source = source.model_copy(update={"path": str(local)})
            elif looks_local:
                raise ConfigError(f"{where}: no such dataset folder: {_as_written(source.path, base, local)}")
        else:
            resolved = (base / source.path.expanduser()).resolve()
            if not resolved.exists():
                raise ConfigError(f"{where}: no such file or folder: {_as_written(source.path, base, resolved)}")
            must_be_dir = isinstance(source, TextFolderSource | SampleSource)
            if must_be_dir != resolved.is_dir():
                kind = "a folder" if must_be_dir else "a file"
                raise ConfigError(f"{where}: {resolved} is not {kind}")
            source = source.model_copy(update={"path": resolved})
        tasks.append(task.model_copy(update={"source": source}))
    external = []
    for index, target in enumerate(config.evaluation.external):
        local = (base / target.path).expanduser()
        if local.exists():
            target = target.model_copy(update={"path": str(local.resolve())})
        elif target.path.startswith((".", "/", "~")):
            raise ConfigError(
                f"{shown}: evaluation.external[{index}] ({target.name}): path: no such folder: "
                f"{_as_written(target.path, base, local.resolve())}"
            )
        external.append(target)
    evaluation = config.evaluation.model_copy(update={"external": tuple(external)})
    return config.model_copy(update={"tasks": tuple(tasks), "evaluation": evaluation})
