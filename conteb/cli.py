"""The ``conteb`` command line.

``conteb status``: the tasks of the registry and where their datasets landed, with row counts.
``conteb validate``: load the registry and report problems (exit status 1 on an invalid file).
``conteb costs``: the LLM cost ledger: calls, tokens and estimated dollars per task and stage.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pyarrow.parquet as pq

from conteb.config import ConfigError, load_config
from conteb.storage import dataset_dir, llm_cache_path, resolve_data_dir, review_store_path


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


def _load(ctx: click.Context):
    try:
        return load_config(ctx.obj)
    except ConfigError as error:
        click.echo(str(error), err=True)
        sys.exit(1)


@main.command()
@click.pass_context
def validate(ctx: click.Context) -> None:
    """Validate the task registry."""
    config = _load(ctx)
    click.echo(f"{config.config_path}: {len(config.tasks)} task(s) OK: {', '.join(t.name for t in config.tasks)}")
    for task in config.tasks:
        click.echo(f"  {task.name}: {describe_splits(task)}")


def describe_splits(task) -> str:
    """``split test`` or ``splits train 0.5, test 0.5 (by document, seed 0); evaluated on test``."""
    if task.splits is None:
        return f"split {task.split}"
    shares = ", ".join(f"{name} {fraction:g}" for name, fraction in task.splits.fractions.items())
    train = f"; trained on {task.train_split}" if task.train_split else ""
    return f"splits {shares} (by document, seed {task.splits.seed}){train}; evaluated on {task.evaluation_split}"


@main.command()
@click.pass_context
def status(ctx: click.Context) -> None:
    """Where each task's ConTEB dataset is, with its row counts."""
    config = _load(ctx)
    data_dir = resolve_data_dir(config.config_dir)
    click.echo(f"registry: {config.config_path}\ndata:     {data_dir}")
    for task in config.tasks:
        folder = dataset_dir(data_dir, task.name)
        counts = []
        for config_name, unit in (
            ("documents", "chunks"),
            ("queries", "queries"),
            ("synthetic_queries", "synthetic queries"),
        ):
            files = sorted((folder / config_name).glob("*.parquet"))
            if files:
                counts.append(f"{sum(pq.ParquetFile(f).metadata.num_rows for f in files):,} {unit}")
        state = ", ".join(counts) if counts else "not built yet"
        click.echo(f"  {task.name:<20} {folder}  [{state}]")
        click.echo(f"  {'':<20} {describe_splits(task)}{_split_rows(folder, task.split_names)}")
    _review_status(config, data_dir)


def _split_rows(folder: Path, splits: tuple[str, ...]) -> str:
    """`` (train: 40 chunks, test: 38 chunks)`` from the published documents shards, when built."""
    from curation.dataset import data_file

    rows = []
    for split in splits:
        path = folder / data_file("documents", split)
        if path.is_file():
            rows.append(f"{split}: {pq.ParquetFile(path).metadata.num_rows:,} chunks")
    return f" ({', '.join(rows)})" if rows else ""


def _review_status(config, data_dir: Path) -> None:
    """Pending review items per queue, with the commands that resolve them."""
    store_path = review_store_path(data_dir)
    if not store_path.exists():
        return
    from review.store import ReviewStore

    waiting = [q for q in ReviewStore(store_path).stats() if q.pending]
    for queue in waiting:
        click.echo(f"  review: {queue.task}/{queue.kind}: {queue.pending} of {queue.total} items pending")
    if waiting:
        click.echo("  -> decide them with `conteb review serve` (or `conteb review accept ...`), then rerun `make run`")


@main.command()
@click.pass_context
def costs(ctx: click.Context) -> None:
    """LLM calls, tokens and estimated dollars per task/stage (from the cost ledger)."""
    from llm.cache import AnswerCache

    config = _load(ctx)
    path = llm_cache_path(resolve_data_dir(config.config_dir))
    if not path.exists():
        click.echo(f"no LLM calls recorded yet ({path} does not exist)")
        return
    by_scope = AnswerCache(path).usage_by_scope()
    click.echo(f"{'task/stage':<40} {'calls':>7} {'prompt tok':>11} {'compl. tok':>11} {'USD':>10}")
    for scope, usage in by_scope.items():
        click.echo(
            f"{scope:<40} {usage.calls:>7,} {usage.prompt_tokens:>11,} {usage.completion_tokens:>11,} "
            f"{usage.cost_usd:>10.4f}"
        )
    total = sum(u.cost_usd for u in by_scope.values())
    click.echo(f"{'total':<40} {sum(u.calls for u in by_scope.values()):>7,} {'':>11} {'':>11} {total:>10.4f}")


def _register_subcommands() -> None:
    from evaluation.cli import evaluate
    from review.cli import review

    main.add_command(review)
    main.add_command(evaluate)


_register_subcommands()
