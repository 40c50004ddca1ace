"""``conteb evaluate``: the evaluation of the ``evaluate_conteb`` job, outside Dagster.

Same registry, same data folder (``$CONTEB_DATA_DIR``), same files under ``data/reports/``; tqdm bars named
``<system>: <phase>`` while encoding. ``--task`` takes a registry task, an ``evaluation.external`` name, a
ConTEB folder or a hub dataset id; without it every configured target is evaluated. The overall report is rebuilt
afterwards from every task evaluated so far.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from cli.registry import load_registry
from conteb.config import closest_name
from conteb.storage import reports_dir, resolve_data_dir
from project.config import ProjectConfig


@click.command()
@click.option("--task", "tasks", multiple=True, help="Task name, ConTEB folder or hub id (repeatable; default: all).")
@click.option("--system", "systems", multiple=True, help="System name from evaluation.systems (repeatable).")
@click.option("--split", default="test", show_default=True, help="Split of a folder/hub task given by path.")
@click.option("--no-chunk-sizes", is_flag=True, help="Skip the chunk-size robustness study (the slow part).")
@click.pass_context
def evaluate(ctx: click.Context, tasks: tuple[str, ...], systems: tuple[str, ...], split: str, no_chunk_sizes: bool):
    """Evaluate retrieval systems on ConTEB tasks; write data/reports/ (results.json, reports, TREC runs).

    Exit status 2 for an unknown ``--task`` or ``--system`` (told before anything loads), 1 when a task or a
    system failed; the overall report is rebuilt only when some task was evaluated.
    """
    config = load_registry(ctx)
    declared = [s.name for s in config.evaluation.systems]
    unknown = [name for name in systems if name not in declared]
    if unknown:
        hints = "".join(
            f" (did you mean {close!r} for {name!r}?)" for name in unknown if (close := closest_name(name, declared))
        )
        click.echo(f"unknown system(s) {unknown}{hints}; evaluation.systems declares: {', '.join(declared)}", err=True)
        sys.exit(2)
    known = known_task_names(config)
    problems = [problem for name in tasks if (problem := unknown_task_problem(name, known))]
    if problems:
        click.echo("\n".join(problems) + f"\nknown tasks: {', '.join(known) or '(none)'}", err=True)
        sys.exit(2)
    # Imported after the checks above: an unknown name is told before torch and the models load.
    from evaluation.load import CorpusError
    from evaluation.reports.publish import write_reports
    from evaluation.reports.significance import figures_text, sizes_text, verdict_text
    from evaluation.results import BEST_BASELINE, HEADLINE
    from evaluation.run_files import load_evaluation
    from evaluation.targets import evaluate_target, evaluation_targets, find_target

    data_dir = resolve_data_dir(config.config_dir)
    reports = reports_dir(data_dir)
    targets = [
        find_target(config.tasks, config.evaluation, data_dir, name, split) for name in tasks
    ] or evaluation_targets(config.tasks, config.evaluation, data_dir)
    if not targets:
        click.echo("nothing to evaluate: no tasks in the registry and no --task", err=True)
        sys.exit(2)
    failed = False
    evaluated = 0
    for target in targets:
        click.echo(f"== {target.name} ({target.path}, split {target.split})")
        try:
            evaluation = evaluate_target(
                target,
                config.evaluation,
                data_dir,
                systems=systems or None,
                chunk_sizes=not no_chunk_sizes,
                log=click.echo,
                show_progress=True,
            )
        except CorpusError as error:
            click.echo(f"{target.name}: {error}", err=True)
            failed = True
            continue
        evaluated += 1
        for run in evaluation.runs:
            if run.status == "ok":
                m = run.metrics[HEADLINE]
                sizes = sizes_text(m.n_queries, m.n_documents)
                click.echo(f"  {run.system:<20} nDCG@10 {m.value:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}] ({sizes})")
            else:
                click.echo(f"  {run.system:<20} {run.status}: {run.reason}")
                failed = failed or run.status == "failed"
        for comparison in evaluation.comparisons:
            against = comparison.system_b
            if comparison.plan == BEST_BASELINE:
                against = f"the best cheap baseline ({comparison.system_b})"
            click.echo(f"  {comparison.system_a} vs {against}: {figures_text(comparison)}: {verdict_text(comparison)}")
    if not evaluated:  # nothing new: the reports of earlier evaluations stay as they are
        sys.exit(1)
    names = list(
        dict.fromkeys(
            [t.name for t in evaluation_targets(config.tasks, config.evaluation, data_dir)] + [t.name for t in targets]
        )
    )
    evaluations = [e for name in names if (e := load_evaluation(reports, name)) is not None]
    paths = write_reports(evaluations, reports)
    click.echo(f"report: {paths.get('report.md', Path(reports) / 'report.md')}")
    if failed:
        sys.exit(1)


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def known_task_names(config: ProjectConfig) -> list[str]:
    """Registry tasks (declaration order), then ``evaluation.external`` names: what ``--task`` takes by name."""
    return [task.name for task in config.tasks] + [target.name for target in config.evaluation.external]


def unknown_task_problem(name: str, known: list[str]) -> str | None:
    """Why ``--task name`` cannot be evaluated, decided without loading anything (None: a known name, an existing
    folder, or a hub id ``owner/name``); a close known name is suggested (:func:`conteb.config.closest_name`)."""
    if name in known or Path(name).expanduser().exists():
        return None
    if not name.startswith((".", "/", "~")) and _HUB_ID.fullmatch(name):
        return None
    close = closest_name(name, known)
    if close:
        return f"unknown task {name!r} (did you mean {close!r}?)"
    if "/" in name or name.startswith((".", "~")):
        return f"unknown task {name!r}: no such folder ({Path(name).expanduser().resolve()})"
    return f"unknown task {name!r}: not a task of the registry, a ConTEB folder, or a hub id (owner/name)"
