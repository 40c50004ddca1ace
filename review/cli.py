"""``conteb review``: the review queue from the command line.

It reads the same ``conteb.yaml`` / ``$CONTEB_CONFIG`` and ``$CONTEB_DATA_DIR`` as the pipeline,
so it works on the store the Dagster assets push to.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from conteb.config import ConfigError, load_config
from conteb.storage import resolve_data_dir, review_store_path


def open_store(ctx: click.Context):
    """The review store of the registry given to ``conteb`` (``--config``) or found as usual."""
    from review.store import ReviewStore

    try:
        config = load_config(ctx.find_root().obj)
    except ConfigError as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    return ReviewStore(review_store_path(resolve_data_dir(config.config_dir)))


@click.group("review")
def review() -> None:
    """Verify LLM output: list, show, decide, export/import, serve the web UI."""


@review.command("list")
@click.option("--task", default=None)
@click.option("--kind", default=None)
@click.option("--status", default=None, type=click.Choice(["pending", "accepted", "rejected", "edited"]))
@click.option("--limit", default=50, show_default=True)
@click.pass_context
def list_items(ctx: click.Context, task: str | None, kind: str | None, status: str | None, limit: int) -> None:
    """Queues with their counts, then items (filtered)."""
    store = open_store(ctx)
    for queue in store.stats(task=task, kind=kind):
        click.echo(
            f"{queue.task}/{queue.kind}: {queue.total} items, {queue.pending} pending "
            f"({queue.flagged_pending} flagged), {queue.accepted} accepted, {queue.edited} edited, "
            f"{queue.rejected} rejected"
        )
    items = store.items(task=task, kind=kind, status=status, limit=limit)
    for item in items:
        flags = f"  [{', '.join(item.flags)}]" if item.flags else ""
        click.echo(f"  {item.item_id}  {item.status}  v{item.version}{flags}")


@review.command()
@click.argument("item_id")
@click.pass_context
def show(ctx: click.Context, item_id: str) -> None:
    """One item: original, proposal, context, status and its audit log."""
    from review.store import UnknownItemError

    store = open_store(ctx)
    try:
        item = store.get(item_id)
    except UnknownItemError:
        raise click.ClickException(f"no review item {item_id!r}") from None
    click.echo(f"{item.item_id}  ({item.kind}, {item.status}, version {item.version}, reviewer {item.reviewer})")
    click.echo(f"title: {item.title}\nflags: {', '.join(item.flags) or 'none'}")
    click.echo(f"--- original\n{item.original}\n--- proposed\n{item.proposed}")
    if item.edited_text is not None:
        click.echo(f"--- edited\n{item.edited_text}")
    click.echo(f"--- context\n{json.dumps(item.context, indent=2, ensure_ascii=False)}\n--- audit")
    for entry in store.audit(item_id):
        click.echo(f"  v{entry.version} {entry.action} {entry.from_status}->{entry.to_status} by {entry.reviewer}")


def _bulk(ctx: click.Context, action: str, task: str, kind: str | None, unflagged: bool, ids: tuple[str, ...],
          reviewer: str) -> None:  # fmt: skip
    store = open_store(ctx)
    count = store.bulk_decide(action, reviewer, task, kind, unflagged_only=unflagged, ids=list(ids) or None)
    click.echo(f"{action}ed {count} pending items of {task}{'/' + kind if kind else ''}")


def _decision_options(command):
    command = click.option("--reviewer", required=True, help="Your name (recorded in the audit log).")(command)
    command = click.option("--ids", multiple=True, help="Only these item ids (repeat the option).")(command)
    command = click.option("--unflagged", is_flag=True, help="Only items the leak detector did not flag.")(command)
    command = click.option("--kind", default=None)(command)
    return click.option("--task", required=True)(command)


@review.command()
@_decision_options
@click.pass_context
def accept(
    ctx: click.Context, task: str, kind: str | None, unflagged: bool, ids: tuple[str, ...], reviewer: str
) -> None:
    """Accept pending items in bulk (by filter)."""
    _bulk(ctx, "accept", task, kind, unflagged, ids, reviewer)


@review.command()
@_decision_options
@click.pass_context
def reject(
    ctx: click.Context, task: str, kind: str | None, unflagged: bool, ids: tuple[str, ...], reviewer: str
) -> None:
    """Reject pending items in bulk (by filter)."""
    _bulk(ctx, "reject", task, kind, unflagged, ids, reviewer)


@review.command()
@click.option("--task", required=True)
@click.option("--kind", default=None)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True)
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None)
@click.pass_context
def export(ctx: click.Context, task: str, kind: str | None, fmt: str, output: Path | None) -> None:
    """Write a queue to JSONL or CSV, to review offline or in another tool."""
    target = output or Path(f"review-{task}{'-' + kind if kind else ''}.{fmt}")
    rows = open_store(ctx).export(target, task, kind, fmt)
    click.echo(f"wrote {rows} items to {target}")


@review.command("import")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--reviewer", default=None, help="Record the decisions under this name (else the file's).")
@click.pass_context
def import_(ctx: click.Context, source: Path, reviewer: str | None) -> None:
    """Bring decisions back from an exported (and edited) file; reports what it rejected."""
    report = open_store(ctx).import_file(source, reviewer)
    click.echo(f"applied {report.applied}, unchanged {report.unchanged}, rejected {len(report.rejected)}")
    for line, reason in report.rejected:
        click.echo(f"  line {line}: {reason}")
    if report.rejected:
        sys.exit(1)


@review.command()
@click.option("--task", default=None)
@click.pass_context
def stats(ctx: click.Context, task: str | None) -> None:
    """Progress per queue, and agreement between reviewers who decided the same items."""
    store = open_store(ctx)
    for queue in store.stats(task=task):
        done = queue.total - queue.pending
        click.echo(f"{queue.task}/{queue.kind}: {done}/{queue.total} decided (revision {queue.revision})")
    for agreement in store.agreement(task=task):
        kappa = "n/a" if agreement.kappa is None else f"{agreement.kappa:.3f}"
        click.echo(
            f"{agreement.task}/{agreement.kind}: {agreement.items} items decided by {agreement.reviewers}: "
            f"observed agreement {agreement.observed:.3f}, Cohen's kappa {kappa}"
        )


@review.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True)
@click.option("--token", default=None, envvar="CONTEB_REVIEW_TOKEN", help="Required from non-loopback clients.")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, token: str | None) -> None:
    """Start the review web app (http://127.0.0.1:8765 by default)."""
    from review.web import serve as serve_app

    store = open_store(ctx)
    click.echo(f"review queue: http://{host}:{port}  (store {store.path})")
    serve_app(store.path, host=host, port=port, token=token)
