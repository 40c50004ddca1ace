"""``conteb workers check``: are the Celery workers of ``execution.executor: celery`` there, and on this registry?

What ``make run`` and ``make evaluate`` ask before they start a run on Celery, so a missing broker, no worker or
workers started on another registry, other prompt files or other code (``project/fingerprint.py``) are told in one
line (exit status 1) before any run is created. A run started
without the check fails the same ways by itself, within seconds (``pipelines/celery_loop.py``,
``pipelines/celery_steps.py``). With another executor there is nothing to check (exit status 0).
"""

from __future__ import annotations

import sys
import time

import click

from cli.registry import load_registry


@click.group()
def workers() -> None:
    """The Celery workers of `execution.executor: celery` (`make workers` starts them on this machine)."""


@workers.command("check")
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds to wait for a worker to answer on the queue.")  # fmt: skip
@click.option("--quiet", is_flag=True, help="Say nothing when all is well.")
@click.pass_context
def check(ctx: click.Context, wait_s: float, quiet: bool) -> None:
    """Check the broker, that a worker consumes the queue, and that every worker runs this registry, prompts, code
    and LLM endpoint."""
    config = load_registry(ctx)
    if config.execution.executor != "celery":
        if not quiet:
            click.echo(f"execution.executor is {config.execution.executor}: no Celery workers needed")
        return
    from pipelines.celery import QUEUE, celery_app, loop_settings
    from pipelines.celery_loop import CeleryUnavailable, check_broker, no_worker_message, queue_consumers
    from pipelines.celery_steps import RESTART_WORKERS, worker_fingerprints
    from project.fingerprint import REGISTRY_PART, environment_differs, fingerprint_differences, step_fingerprint

    expected = step_fingerprint(config)
    settings = loop_settings(config.execution.celery, expected)
    app = celery_app(config.execution.celery)
    try:
        check_broker(app, settings)
    except CeleryUnavailable as error:
        sys.exit(f"{error}")
    deadline = time.monotonic() + wait_s
    while not (consumers := queue_consumers(app, QUEUE)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if not consumers:
        sys.exit(no_worker_message(settings, 0, waited_s=wait_s))
    fingerprints = worker_fingerprints(app)
    stale = {name: fingerprint_differences(expected, fingerprints.get(name)) for name in consumers}
    stale = {name: differences for name, differences in stale.items() if differences}
    if stale:
        shell = any(environment_differs(expected, fingerprints.get(name)) for name in stale)
        sys.exit(
            f"Celery worker(s) {', '.join(sorted(stale))} started on another registry, prompts, code or LLM endpoint "
            f"than {config.config_path}, this checkout and this shell: this run would be launched with "
            f"{'; and '.join(dict.fromkeys(clause for clauses in stale.values() for clause in clauses))}: "
            f"restart the workers{' from this shell' if shell else ''}: {RESTART_WORKERS}"
        )
    if not quiet:
        click.echo(f"{len(consumers)} worker(s) on {config.execution.celery.broker}, registry "
                   f"{expected[REGISTRY_PART]}, same prompts, code and LLM endpoint: "
                   + ", ".join(consumers))  # fmt: skip
