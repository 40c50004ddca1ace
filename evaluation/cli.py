"""``conteb evaluate``: the evaluation of the ``evaluate_conteb`` job, outside Dagster.

Same registry, same data folder (``$CONTEB_DATA_DIR``), same files under ``data/reports/``; tqdm bars
while encoding. ``--task`` takes a registry task, an ``evaluation.external`` name, a ConTEB folder or a
hub dataset id; without it every configured target is evaluated. The overall report is rebuilt
afterwards from every task evaluated so far.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from conteb.config import ConfigError, load_config
from conteb.storage import reports_dir, resolve_data_dir


@click.command()
@click.option("--task", "tasks", multiple=True, help="Task name, ConTEB folder or hub id (repeatable; default: all).")
@click.option("--system", "systems", multiple=True, help="System name from evaluation.systems (repeatable).")
@click.option("--split", default="test", show_default=True, help="Split of a folder/hub task given by path.")
@click.option("--no-chunk-sizes", is_flag=True, help="Skip the chunk-size robustness study (the slow part).")
@click.pass_context
def evaluate(ctx: click.Context, tasks: tuple[str, ...], systems: tuple[str, ...], split: str, no_chunk_sizes: bool):
    """Evaluate retrieval systems on ConTEB tasks; write data/reports/ (results.json, reports, TREC runs)."""
    from evaluation.load import CorpusError
    from evaluation.report import write_reports, write_task_report
    from evaluation.results import HEADLINE
    from evaluation.runner import load_evaluation
    from evaluation.targets import evaluate_target, evaluation_targets, find_target

    try:
        config = load_config(ctx.obj)
    except ConfigError as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    unknown = [name for name in systems if name not in {s.name for s in config.evaluation.systems}]
    if unknown:
        names = ", ".join(s.name for s in config.evaluation.systems)
        click.echo(f"unknown system(s) {unknown}; evaluation.systems declares: {names}", err=True)
        sys.exit(2)
    data_dir = resolve_data_dir(config.config_dir)
    reports = reports_dir(data_dir)
    targets = [find_target(config, data_dir, name, split) for name in tasks] or evaluation_targets(config, data_dir)
    if not targets:
        click.echo("nothing to evaluate: no tasks in the registry and no --task", err=True)
        sys.exit(2)
    failed = False
    for target in targets:
        click.echo(f"== {target.name} ({target.path}, split {target.split})")
        try:
            evaluation = evaluate_target(
                target,
                config,
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
        write_task_report(evaluation, reports)
        for run in evaluation.runs:
            if run.status == "ok":
                m = run.metrics[HEADLINE]
                click.echo(f"  {run.system:<20} nDCG@10 {m.value:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}]")
            else:
                click.echo(f"  {run.system:<20} {run.status}: {run.reason}")
                failed = failed or run.status == "failed"
        for comparison in evaluation.comparisons:
            click.echo(
                f"  {comparison.system_a} vs {comparison.system_b}: {comparison.difference:+.3f} "
                f"(p = {comparison.p_value:.4f}, {comparison.n_queries} queries)"
            )
    names = list(dict.fromkeys([t.name for t in evaluation_targets(config, data_dir)] + [t.name for t in targets]))
    evaluations = [e for name in names if (e := load_evaluation(reports, name)) is not None]
    paths = write_reports(evaluations, reports)
    click.echo(f"report: {paths.get('report.md', Path(reports) / 'report.md')}")
    if failed:
        sys.exit(1)
