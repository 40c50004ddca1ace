"""``conteb review``: the review queue from the command line.

It reads the same ``conteb.yaml`` / ``$CONTEB_CONFIG`` and ``$CONTEB_DATA_DIR`` as the pipeline,
so it works on the store the Dagster assets push to. Every refusal (a damaged store file, a
``--task``/``--kind`` the store has no queue for, a bad reviewer name, an unsafe ``serve``: no token on a public
host, a blank or short token, a port out of range or in use, an export onto an existing file without ``--force``
or onto a store or any SQLite file) is one message and a non-zero exit, never a traceback. ``--reviewer`` defaults
to the OS user.
``conteb review check [--quick]`` reads every page of the store (see :mod:`conteb.sqlite_files`).
"""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path

import click

from cli.registry import load_registry
from cli.stores import StoreGroup, add_check_command
from conteb.config import closest_name
from conteb.sqlite_kinds import StoreFileError
from conteb.storage import llm_cache_path, resolve_data_dir, review_store_path
from review.exchange import EXPORT_FORMATS, ExportRefused
from review.flags import item_flag_notes
from review.model import STATUSES, InvalidDecisionError, UnknownItemError, clean_person_reviewer, reviewer_label
from review.schema import REVIEW_STORE
from review.store import ReviewStore
from review.web_listen import MAX_PORT, ListenError, check_port


def open_store(ctx: click.Context) -> ReviewStore:
    """The review store of the registry given to ``conteb`` (``--config``) or found as usual.

    Exits 1 with the message for a bad registry or a damaged store file.
    """
    config = load_registry(ctx)
    try:
        return ReviewStore(review_store_path(resolve_data_dir(config.config_dir)))
    except StoreFileError as error:
        raise click.ClickException(str(error)) from None


def check_queue(store: ReviewStore, task: str | None, kind: str | None) -> None:
    """``click.BadParameter`` (exit 2) naming the known tasks or kinds when ``task``/``kind`` has no queue."""
    queues = [(queue.task, queue.kind) for queue in store.stats()]
    if not queues:
        if task is not None or kind is not None:
            raise click.BadParameter(
                f"the review store {store.path} has no queue yet (the pipeline pushes them when an LLM stage runs)",
                param_hint="--task" if task is not None else "--kind",
            )
        return
    tasks = sorted({name for name, _ in queues})
    if task is not None and task not in tasks:
        raise click.BadParameter(
            f"no review queue for task {task!r}{_did_you_mean(task, tasks)}; known tasks: {', '.join(tasks)}",
            param_hint="--task",
        )
    kinds = sorted({name for owner, name in queues if task is None or owner == task})
    if kind is not None and kind not in kinds:
        where = f" of task {task!r}" if task is not None else ""
        raise click.BadParameter(
            f"no review queue {kind!r}{where}{_did_you_mean(kind, kinds)}; known kinds: {', '.join(kinds)}",
            param_hint="--kind",
        )


def _did_you_mean(name: str, known: list[str]) -> str:
    """`` (did you mean 'sample'?)`` with the closest known name (:func:`conteb.config.closest_name`), else ``""``."""
    close = closest_name(name, known)
    return f" (did you mean {close!r}?)" if close else ""


def os_user() -> str | None:
    """The OS user's name (``getpass.getuser()``), or None when the system cannot tell."""
    try:
        return getpass.getuser() or None
    except (OSError, KeyError, ImportError):
        return None


@click.group("review", cls=StoreGroup)
def review() -> None:
    """Verify LLM output: list, show, decide, export/import, serve the web UI, check the store."""


add_check_command(review, REVIEW_STORE, review_store_path)


@review.command("list")
@click.option("--task", default=None)
@click.option("--kind", default=None)
@click.option("--status", default=None, type=click.Choice(STATUSES))
@click.option("--limit", default=50, show_default=True)
@click.pass_context
def list_items(ctx: click.Context, task: str | None, kind: str | None, status: str | None, limit: int) -> None:
    """Queues with their counts, then items (filtered)."""
    store = open_store(ctx)
    check_queue(store, task, kind)
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
    store = open_store(ctx)
    try:
        item = store.get(item_id)
    except UnknownItemError:
        raise click.ClickException(f"no review item {item_id!r}") from None
    click.echo(
        f"{item.item_id}  ({item.kind}, {item.status}, version {item.version}, "
        f"reviewer {reviewer_label(item.reviewer, missing='none yet')})"
    )
    click.echo(f"title: {item.title}\nflags: {', '.join(item.flags) or 'none'}")
    for note in item_flag_notes(item):
        asked = "".join(f"\n    {question.query_id}: {question.text}" for question in note.questions)
        click.echo(f"  - {note.sentence}{asked}" + (f"\n    {note.action}" if note.action else ""))
    click.echo(f"--- original\n{item.original}\n--- proposed\n{item.proposed}")
    if item.edited_text is not None:
        click.echo(f"--- edited\n{item.edited_text}")
    click.echo(f"--- context\n{json.dumps(item.context, indent=2, ensure_ascii=False)}\n--- audit")
    for entry in store.audit(item_id):
        source = f"{entry.from_status}->" if entry.from_status else ""
        who = reviewer_label(entry.reviewer, missing="the pipeline")
        click.echo(f"  v{entry.version} {entry.action} {source}{entry.to_status} by {who}")


def _bulk(ctx: click.Context, action: str, task: str, kind: str | None, unflagged: bool, ids: tuple[str, ...],
          reviewer: str | None) -> None:  # fmt: skip
    """Decide the selected pending items; a bad queue, reviewer or id is a clean error."""
    store = open_store(ctx)
    check_queue(store, task, kind)
    name = reviewer or os_user()
    if name is None:
        raise click.UsageError("cannot tell who you are from the system: pass --reviewer NAME")
    try:
        name = clean_person_reviewer(name)
        count = store.bulk_decide(action, name, task, kind, unflagged_only=unflagged, ids=list(ids) or None)
    except (InvalidDecisionError, UnknownItemError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"{action}ed {count} pending items of {task}{'/' + kind if kind else ''} as {name}")


def _decision_options(command):
    reviewer_help = "Your name, recorded in the audit log (default: the OS user)."
    command = click.option("--reviewer", default=None, help=reviewer_help)(command)
    command = click.option("--ids", multiple=True, help="Only these item ids (repeat the option).")(command)
    command = click.option("--unflagged", is_flag=True, help="Only items the leak detector did not flag.")(command)
    command = click.option("--kind", default=None)(command)
    return click.option("--task", required=True)(command)


@review.command()
@_decision_options
@click.pass_context
def accept(
    ctx: click.Context, task: str, kind: str | None, unflagged: bool, ids: tuple[str, ...], reviewer: str | None
) -> None:
    """Accept pending items in bulk (by filter)."""
    _bulk(ctx, "accept", task, kind, unflagged, ids, reviewer)


@review.command()
@_decision_options
@click.pass_context
def reject(
    ctx: click.Context, task: str, kind: str | None, unflagged: bool, ids: tuple[str, ...], reviewer: str | None
) -> None:
    """Reject pending items in bulk (by filter)."""
    _bulk(ctx, "reject", task, kind, unflagged, ids, reviewer)


class Refused(click.ClickException):
    """A request refused for what it names (a file, a port): one line ``Error: ...``, exit status 2, as click's
    usage errors."""

    exit_code = 2


@review.command()
@click.option("--task", required=True)
@click.option("--kind", default=None)
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default=EXPORT_FORMATS[0], show_default=True)
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), default=None,
    help="The file to write (default: review-TASK[-KIND].FORMAT here). Never a store or any SQLite file.",
)  # fmt: skip
@click.option("--force", is_flag=True, help="Replace the output file when it exists (never a store).")
@click.pass_context
def export(ctx: click.Context, task: str, kind: str | None, fmt: str, output: Path | None, force: bool) -> None:
    """Write a queue to JSONL or CSV, to review offline or in another tool (atomically: a temporary file renamed
    into place)."""
    store = open_store(ctx)
    check_queue(store, task, kind)
    target = output or Path(f"review-{task}{'-' + kind if kind else ''}.{fmt}")
    answers = llm_cache_path(resolve_data_dir(load_registry(ctx).config_dir))
    try:
        rows = store.export(target, task, kind, fmt, replace=force, stores={"the LLM answer store": answers})
    except ExportRefused as error:
        raise Refused(str(error)) from None
    click.echo(f"wrote {rows} items to {target}")


@review.command("import")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--reviewer", default=None, help="Record the decisions under this name (else the file's).")
@click.pass_context
def import_(ctx: click.Context, source: Path, reviewer: str | None) -> None:
    """Bring decisions back from an exported (and edited) file; reports what it rejected."""
    try:
        report = open_store(ctx).import_file(source, reviewer)
    except (InvalidDecisionError, ValueError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"applied {report.applied}, unchanged {report.unchanged}, rejected {len(report.rejected)}")
    for line, reason in report.rejected:
        click.echo(f"  line {line}: {reason}")
    if report.rejected:
        sys.exit(1)


@review.command()
@click.option("--task", default=None)
@click.pass_context
def stats(ctx: click.Context, task: str | None) -> None:
    """Progress per queue (who decided), and agreement between people who decided the same items (automatic
    decisions are left out: the line says how many)."""
    store = open_store(ctx)
    check_queue(store, task, None)
    deciders = store.deciders(task=task)
    for queue in store.stats(task=task):
        done = queue.total - queue.pending
        line = f"{queue.task}/{queue.kind}: {done}/{queue.total} decided (revision {queue.revision})"
        by = deciders.get((queue.task, queue.kind), {})
        if by:
            line += ", by " + ", ".join(f"{reviewer_label(name)} {count}" for name, count in by.items())
        click.echo(line)
    for agreement in store.agreement(task=task):
        count = agreement.automatic
        automatic = f" ({count} automatic decision{'s' if count != 1 else ''} left out)" if count else ""
        if agreement.reviewers is None:
            click.echo(f"{agreement.task}/{agreement.kind}: agreement: no item decided by two people yet{automatic}")
            continue
        kappa = "n/a" if agreement.kappa is None else f"{agreement.kappa:.3f}"
        click.echo(
            f"{agreement.task}/{agreement.kind}: agreement: {agreement.items} items decided by "
            f"{' and '.join(agreement.reviewers)}: observed {agreement.observed:.3f}, Cohen's kappa {kappa}{automatic}"
        )


def _valid_port(ctx: click.Context, param: click.Parameter, port: int) -> int:
    """``--port`` within 0-65535 (:func:`review.web_listen.check_port`), else one line and exit status 2."""
    try:
        return check_port(port)
    except ListenError as error:
        raise Refused(f"--port: {error}") from None


@review.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--port", type=int, default=8765, show_default=True, callback=_valid_port,
    help=f"The TCP port to listen on: 1-{MAX_PORT}, or 0 for any free port (the address announced is the one bound).",
)  # fmt: skip
@click.option(
    "--token",
    default=None,
    envvar="CONTEB_REVIEW_TOKEN",
    help="Required from non-loopback clients: 16+ characters, no spaces (e.g. secrets.token_urlsafe(24)).",
)
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, token: str | None) -> None:
    """Start the review web app (http://127.0.0.1:8765 by default)."""
    # The web stack (Starlette, Jinja2, uvicorn) is imported only by the command that serves it.
    from review.web import serve as serve_app
    from review.web_security import UnsafeBindError, UnsafeTokenError, check_bind

    try:
        check_bind(host, token)
    except (UnsafeBindError, UnsafeTokenError) as error:
        raise click.ClickException(str(error)) from None
    store = open_store(ctx)
    try:
        serve_app(
            store.path, host=host, port=port, token=token,
            announce=lambda url: click.echo(f"review queue: {url}  (store {store.path})"),
        )  # fmt: skip
    except ListenError as error:
        raise Refused(str(error)) from None
