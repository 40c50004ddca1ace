"""The ``conteb`` command line.

``conteb status``: the tasks of the registry and where their datasets landed, with row counts, the review queues
waiting, and what to do next. With ``--run-status N`` (what ``make run`` passes after ``dagster job execute -j
build_conteb``) it also says how that run ended and exits 0 (succeeded), 3 (:data:`EXIT_WAITING_FOR_REVIEW`: the
run stopped at review gates, not a crash; ``make run`` exits 0 then) or N (failed).
``conteb validate``: load the registry and open every source it declares, and check the store files of the data
folder (read-only: a dangling symbolic link, a foreign or damaged file); one line per problem, naming the file, the
task and the field (exit status 1 on any problem); the rows a source would quarantine are counted and the first
named (not a problem: the build quarantines them too); a task whose validation split holds too few documents for
``evaluation.select`` to support any lead is warned about (:func:`validation_size_line`; exit status unchanged).
``conteb costs``: the LLM cost ledger: calls, tokens and estimated dollars per task and stage.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click
import pyarrow.parquet as pq

from cli.registry import load_registry
from conteb.config import HFDatasetSource, TaskConfig, display_path
from conteb.names import Job
from conteb.published import CardError, config_shards, unnamed_files
from conteb.sqlite_files import check_store_file
from conteb.sqlite_kinds import StoreFileError
from conteb.storage import (
    PUBLISHED_CONFIGS,
    dataset_dir,
    llm_cache_path,
    resolve_data_dir,
    review_store_path,
)
from evaluation.config import EvaluationConfig


@click.group()
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Task registry (default: $CONTEB_CONFIG or ./conteb.yaml).",
)
@click.pass_context
def main(ctx: click.Context, config_path: Path | None) -> None:
    """conteb-pipeline: curate, train and evaluate context-dependent retrieval."""
    ctx.obj = config_path


@main.command()
@click.option("--no-sources", is_flag=True, help="Check the registry only; do not open the sources it declares.")
@click.pass_context
def validate(ctx: click.Context, no_sources: bool) -> None:
    """Validate the task registry, open every source it declares and check the store files of the data folder
    (read-only; exit status 1 on any problem)."""
    config = load_registry(ctx)
    shown = display_path(config.config_path)
    opened = {} if no_sources else {task.name: check_source(task, config.config_dir) for task in config.tasks}
    problems = [
        f"{shown}: task '{task.name}' (tasks[{index}]): source: {opened[task.name]}"
        for index, task in enumerate(config.tasks)
        if isinstance(opened.get(task.name), SourceProblem)
    ]
    problems += store_problems(resolve_data_dir(config.config_dir))
    if problems:
        click.echo("\n".join(problems), err=True)
        sys.exit(1)
    click.echo(f"{shown}: {len(config.tasks)} task(s) OK: {', '.join(t.name for t in config.tasks)}")
    for task in config.tasks:
        click.echo(f"  {task.name}: {describe_splits(task)}")
        if task.name in opened:
            click.echo(f"  {task.name}: source: {opened[task.name]}")
        line = validation_size_line(task, config.evaluation, opened.get(task.name))
        if line:
            click.echo(f"  {task.name}: {line}")


QUARANTINE_SHOWN = 5
"""Quarantined source rows ``conteb validate`` names (file, row, reason) before counting the rest."""


def store_problems(data_dir: Path) -> list[str]:
    """One line per store file of ``data_dir`` (the review store, the LLM answer store) that every command and
    step would refuse: the read-only checks of each open (:func:`conteb.sqlite_files.check_store_file`), which
    make and change nothing. A missing store is no problem: it is made on first use."""
    from llm.cache import ANSWER_STORE
    from review.schema import REVIEW_STORE

    problems = []
    for path, kind in ((review_store_path(data_dir), REVIEW_STORE), (llm_cache_path(data_dir), ANSWER_STORE)):
        try:
            check_store_file(path, kind)
        except StoreFileError as error:
            problems.append(str(error))
    return problems


class SourceProblem(str):
    """Why a task's source cannot be read (the loader's message: file, row and reason)."""


class SourceOpened(str):
    """What a task's opened source holds, in words, with the ids of the documents the task keeps (``max_documents``
    applied): :func:`validation_size_line` counts its validation split from them."""

    doc_ids: list[str]


def validation_size_line(task: TaskConfig, evaluation: EvaluationConfig, opened: str | None) -> str | None:
    """The warning of a task whose validation split cannot support any lead of ``evaluation.select``
    (:func:`evaluation.choice.documents_needed`): counted from the opened source's documents with the splits' own
    rule (:func:`curation.splits.assign_splits`), or, the source not opened, a line saying it is checked at evaluation.
    None when there is nothing to warn of (no validation split, no choice to support, enough documents)."""
    from curation.splits import assign_splits
    from evaluation.choice import documents_needed

    if task.validation_split is None or task.splits is None or not evaluation.select:
        return None
    needed = documents_needed(evaluation)
    if needed is None:
        return None
    if not isinstance(opened, SourceOpened):
        return (
            f"validation split not counted here (source not opened): evaluation.select needs >= {needed} validation "
            "documents to support any lead; the evaluation says so if it has fewer"
        )
    assignment = assign_splits(opened.doc_ids, task.splits.fractions, task.splits.seed)
    held = sum(1 for split in assignment.values() if split == task.validation_split)
    if held >= needed:
        return None
    return (
        f"warning: validation split has {held} document(s) (counted from the source and the splits' fractions and "
        f"seed), fewer than the {needed} evaluation.select needs to support any lead among {list(evaluation.select)}: "
        "it cannot decide there and keeps the simplest candidate; add documents or give validation a larger share"
    )


def check_source(task: TaskConfig, base_dir: Path) -> str:
    """Load ``task``'s source as the ``source_documents`` asset would: ``documents N, queries M`` (then the rows it
    would quarantine: their count by reason and the first ones, file, row and reason), ``not opened: ...`` for a hub
    dataset (no network is assumed), or a :class:`SourceProblem`; what it holds as a :class:`SourceOpened`."""
    from curation.quarantine import count_reasons
    from curation.sources import SourceError, load_source

    if isinstance(task.source, HFDatasetSource) and not Path(task.source.path).exists():
        return f"not opened: hub dataset {task.source.path!r} (loaded when the task runs)"
    try:
        result = load_source(task.source, base_dir)
    except SourceError as error:
        return SourceProblem(str(error))
    doc_ids = [d.doc_id for d in result.documents][: task.max_documents]
    held = f"documents {len(result.documents):,}, queries {len(result.queries):,}"
    if not result.quarantine:
        return _opened(held, doc_ids)
    reasons = ", ".join(f"{reason} {n:,}" for reason, n in count_reasons(result.quarantine_table()).items())
    shown = [f"\n    {record.where_and_why()}" for record in result.quarantine[:QUARANTINE_SHOWN]]
    more = len(result.quarantine) - QUARANTINE_SHOWN
    rest = f"\n    ... and {more:,} more (all in source_quarantine when the task runs)" if more > 0 else ""
    return _opened(f"{held}, quarantined {len(result.quarantine):,} ({reasons}):{''.join(shown)}{rest}", doc_ids)


def _opened(words: str, doc_ids: list[str]) -> SourceOpened:
    opened = SourceOpened(words)
    opened.doc_ids = doc_ids
    return opened


def describe_splits(task: TaskConfig) -> str:
    """``split test`` or ``splits train 0.5, test 0.5 (by document, seed 0); evaluated on test``."""
    if task.splits is None:
        return f"split {task.split}"
    shares = ", ".join(f"{name} {fraction:g}" for name, fraction in task.splits.fractions.items())
    train = f"; trained on {task.train_split}" if task.train_split else ""
    return f"splits {shares} (by document, seed {task.splits.seed}){train}; evaluated on {task.evaluation_split}"


EXIT_WAITING_FOR_REVIEW = 3
"""Exit status of ``conteb status --run-status N`` when the build run stopped at review gates (it succeeded, and
review queues hold part of it back): not a crash; decide the items and rerun. For scripts: ``make run`` turns it
into 0, since waiting for a person is the normal state of this pipeline."""

BUILD_JOB = Job.BUILD


@main.command()
@click.option(
    "--run-status",
    type=int,
    default=None,
    help="Exit status of the `dagster job execute -j build_conteb` just run (`make run` passes it). Exit 0 after a "
    f"success, {EXIT_WAITING_FOR_REVIEW} when the run stopped at review gates, else this status.",
)
@click.pass_context
def status(ctx: click.Context, run_status: int | None) -> None:
    """Where each task's ConTEB dataset is, with its row counts, the review queues waiting, and what to do next."""
    config = load_registry(ctx)
    data_dir = resolve_data_dir(config.config_dir)
    click.echo(f"registry: {config.config_path}\ndata:     {data_dir}")
    built = False
    for task in config.tasks:
        folder = dataset_dir(data_dir, task.name)
        state, complete = _published_state(folder)
        built = built or complete
        click.echo(f"  {task.name:<20} {folder}  [{state}]")
        click.echo(f"  {'':<20} {describe_splits(task)}{_split_rows(folder, task.split_names) if complete else ''}")
        _echo_leftovers(folder)
    waiting = _review_status(data_dir)
    outcome = "waiting" if waiting else ("built" if built else "not built")
    code = 0
    if run_status is not None:
        code, outcome = _run_verdict(run_status, waiting)
    _next_steps(outcome, any(task.review_kinds for task in config.tasks))
    sys.exit(code)


def _published_state(folder: Path) -> tuple[str, bool]:
    """``(the status line's state, whether it is a built dataset)``: the rows of the files its card names; a card
    naming a missing file is not a dataset (:mod:`conteb.published`)."""
    counts = []
    try:
        for config_name, unit in zip(PUBLISHED_CONFIGS, ("chunks", "queries", "synthetic queries"), strict=True):
            files = config_shards(folder, config_name, None)
            if files:
                counts.append(f"{sum(pq.ParquetFile(f).metadata.num_rows for f in files):,} {unit}")
    except CardError as error:
        return f"not built: {error}", False
    return (", ".join(counts), True) if counts else ("not built yet", False)


def _echo_leftovers(folder: Path) -> None:
    """Say when ``folder`` holds files no card names: what an interrupted publish left (the next one removes it)."""
    try:
        leftovers = unnamed_files(folder)
    except CardError:  # already said on the state line
        return
    if leftovers:
        click.echo(
            f"  {'':<20} leftovers of an interrupted publish: {len(leftovers)} file(s) no dataset card names "
            f"(e.g. {leftovers[0].relative_to(folder)}); readers ignore them, the next publish of the task removes them"
        )


def _split_rows(folder: Path, splits: tuple[str, ...]) -> str:
    """`` (train: 40 chunks, test: 38 chunks)`` from the published documents files, when built."""
    rows = []
    for split in splits:
        files = config_shards(folder, "documents", split)
        if files:
            rows.append(f"{split}: {sum(pq.ParquetFile(f).metadata.num_rows for f in files):,} chunks")
    return f" ({', '.join(rows)})" if rows else ""


def _review_status(data_dir: Path) -> list:
    """Print the review queues with pending items (task/kind, pending of total, and how many of those failed at the
    LLM: :attr:`review.model.QueueStats.failed_pending`); return them."""
    store_path = review_store_path(data_dir)
    if not os.path.lexists(store_path):  # a dangling symbolic link is refused below, in one line
        return []
    from review.store import ReviewStore

    try:
        waiting = [q for q in ReviewStore(store_path).stats() if q.pending]
    except StoreFileError as error:
        click.echo(f"  review: {error}")
        return []
    for queue in waiting:
        failed = f"; {queue.failed_pending} items failed at the LLM, pending" if queue.failed_pending else ""
        click.echo(
            f"  waiting for review: {queue.task}/{queue.kind}: {queue.pending} of {queue.total} items pending{failed}"
        )
    return waiting


def _run_verdict(run_status: int, waiting: list) -> tuple[int, str]:
    """How the build run just made ended: ``(exit status, outcome)``; says it in one line. A run that stopped at
    review gates succeeded in Dagster's terms (``run_status`` 0) and gives :data:`EXIT_WAITING_FOR_REVIEW`."""
    outcome = _latest_build_outcome()  # a failed run_status is a failure, whatever an earlier run waits for
    if run_status == 0 and outcome is not None and outcome.state == "waiting_for_review":
        pending = sum(q.pending for q in waiting)
        where = ", ".join(f"{q.task}/{q.kind}" for q in waiting) or ", ".join(outcome.waiting)
        click.echo(
            f"{BUILD_JOB}: WAITING FOR REVIEW (not a failure): {pending} item(s) pending in {where}; "
            "nothing downstream used unreviewed output"
        )
        return EXIT_WAITING_FOR_REVIEW, "waiting"
    if run_status == 0:  # (a run recorded elsewhere, or none: the run just made said it succeeded)
        click.echo(f"{BUILD_JOB}: succeeded")
        return 0, "built"
    steps = f" (failed steps: {', '.join(outcome.failed_steps)})" if outcome and outcome.failed_steps else ""
    click.echo(f"{BUILD_JOB} failed with exit status {run_status}{steps}: see the first error above")
    return run_status, "failed"


def _latest_build_outcome():
    """The latest ``build_conteb`` run's outcome from the Dagster instance ($DAGSTER_HOME), None without one."""
    if not os.environ.get("DAGSTER_HOME"):
        return None
    import dagster as dg

    from pipelines.run_outcome import latest_run_outcome

    return latest_run_outcome(dg.DagsterInstance.get(), BUILD_JOB)


def _conteb_command() -> str:
    """``conteb`` when it is on ``$PATH``, else the path of this environment's script (``.venv/bin/conteb``)."""
    if shutil.which("conteb"):
        return "conteb"
    script = Path(sys.executable).parent / "conteb"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def _next_steps(outcome: str, has_review_queues: bool) -> None:
    """What to do after ``outcome`` (``built``, ``waiting``, ``failed``, ``not built``), one command a line."""
    review = f"{_conteb_command()} review serve"
    if outcome == "waiting":
        steps = [
            (review, "decide the pending items in the browser (or `conteb review accept ...`)"),
            ("make run", "then rerun: the reviewed output goes on to the datasets"),
        ]
    elif outcome == "failed":
        steps = [("make run", "fix the first error above, then rerun")]
    elif outcome == "not built":
        steps = [("make run", "build the datasets of the registry")]
    else:
        steps = [
            ("make evaluate", "compare the retrieval systems; reports in data/reports/"),
            ("make train", "train InSeNT and its control on conteb.yaml's training: tasks, then evaluate"),
            ("make dev", "the Dagster UI: assets, checks, runs (http://127.0.0.1:3000)"),
        ]
        if has_review_queues:
            steps.append((review, "look at the review queues and their decisions"))
    width = max(len(command) for command, _ in steps) + 3
    click.echo("next:\n" + "\n".join(f"  {command:<{width}}{what}" for command, what in steps))


@main.command()
@click.pass_context
def costs(ctx: click.Context) -> None:
    """LLM calls, tokens (prompt, of which served from the provider's prompt cache, completion) and estimated
    dollars per task/stage and per task (from the cost ledger); then the calls whose answers reported implausible
    token counts (recorded as 0 tokens and $0), when there are any."""
    from llm.cache import AnswerCache, UsageSummary

    config = load_registry(ctx)
    path = llm_cache_path(resolve_data_dir(config.config_dir))
    if not os.path.lexists(path):  # a dangling symbolic link is refused below, in one line
        click.echo(f"no LLM calls recorded yet ({path} does not exist)")
        return
    try:
        by_scope = AnswerCache(path).usage_by_scope()
    except StoreFileError as error:
        click.echo(str(error), err=True)
        sys.exit(1)

    def line(label: str, usage: UsageSummary) -> str:
        return (
            f"{label:<40} {usage.calls:>7,} {usage.prompt_tokens:>11,} {usage.cached_tokens:>11,} "
            f"{usage.cached_share:>7.1%} {usage.completion_tokens:>11,} {usage.cost_usd:>10.4f}"
        )

    header = ("task/stage", "calls", "prompt tok", "cached tok", "cached", "compl. tok", "USD")
    click.echo("{:<40} {:>7} {:>11} {:>11} {:>7} {:>11} {:>10}".format(*header))
    by_task: dict[str, list[tuple[str, UsageSummary]]] = {}
    for scope, usage in by_scope.items():
        by_task.setdefault(scope.split("/", 1)[0], []).append((scope, usage))
    total = UsageSummary(0, 0, 0, 0.0)
    for task, scopes in by_task.items():
        subtotal = UsageSummary(0, 0, 0, 0.0)
        for scope, usage in scopes:
            click.echo(line(scope, usage))
            subtotal += usage
        click.echo(line(f"{task} (all stages)", subtotal))
        total += subtotal
    click.echo(line("total", total))
    if total.implausible_usage:
        where = ", ".join(
            f"{scope} {usage.implausible_usage}" for scope, usage in by_scope.items() if usage.implausible_usage
        )
        click.echo(
            f"implausible usage: {total.implausible_usage} call(s) whose answer reported impossible token counts, "
            f"counted as 0 tokens and $0 above (the dollars are a lower bound; check the provider's bill): {where}"
        )


def _register_subcommands() -> None:
    from cli.evaluate import evaluate
    from cli.llm import llm
    from cli.review import review
    from cli.workers import workers

    main.add_command(review)
    main.add_command(workers)
    main.add_command(evaluate)
    main.add_command(llm)


_register_subcommands()
