"""The evaluation reports as files and as the Dagster UI's Markdown: the entry points.

Every report is first built as one :class:`~evaluation.reports.document.Document`
(:func:`~evaluation.reports.task.task_document`, :func:`~evaluation.reports.overall.overall_document`),
then written out by :func:`~evaluation.reports.markdown.render_markdown` or
:func:`~evaluation.reports.html.render_html`: the file report, the HTML page and the Dagster metadata
show the same numbers, all formatted by :mod:`evaluation.reports.formatting` (3 decimals, the value in
``results.json`` rounded). Images are references chosen here: relative paths for the files on disk
(:func:`write_reports`, :func:`write_task_report`), ``data:`` URIs of smaller plots for the Dagster UI
(:func:`dagster_markdown_overall`, :func:`dagster_markdown_task`).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from conteb.staging import staged_tree
from conteb.storage import write_bytes_atomic, write_text_atomic
from evaluation.reports import plots
from evaluation.reports.html import render_html
from evaluation.reports.markdown import markdown_escape, render_markdown
from evaluation.reports.overall import overall_document
from evaluation.reports.task import task_document
from evaluation.results import TaskEvaluation, results_records, to_json

DAGSTER_DPI = 80

# --------------------------------------------------------------------------------------------- Dagster


def data_uri(png: bytes) -> str:
    """A PNG as a ``data:`` URI (for Markdown shown by the Dagster UI)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def reading_markdown(sentences: Sequence[str]) -> str:
    """The reading (:mod:`evaluation.reports.reading`) as a Markdown list (Dagster metadata ``reading``)."""
    return "\n".join(f"- {markdown_escape(sentence)}" for sentence in sentences) + "\n"


def dagster_markdown_overall(evaluations: list[TaskEvaluation]) -> str:
    """The overall Markdown with its plots inlined as small ``data:`` URIs (``MetadataValue.md``)."""
    images = {"overview": data_uri(plots.plot_overview(evaluations, dpi=DAGSTER_DPI))}
    for evaluation in evaluations:
        images[f"positions/{evaluation.task}"] = data_uri(plots.plot_positions(evaluation, dpi=DAGSTER_DPI))
        images[f"scaling/{evaluation.task}"] = data_uri(plots.plot_scaling(evaluation, dpi=DAGSTER_DPI))
    chunk_sizes = plots.plot_chunk_sizes(evaluations, dpi=DAGSTER_DPI)
    if chunk_sizes is not None:
        images["chunk_sizes"] = data_uri(chunk_sizes)
    return render_markdown(overall_document(evaluations, images))


def dagster_markdown_task(evaluation: TaskEvaluation) -> str:
    """The Markdown of one task with its plots inlined as small ``data:`` URIs (``MetadataValue.md``)."""
    images = {
        "positions": data_uri(plots.plot_positions(evaluation, dpi=DAGSTER_DPI)),
        "scaling": data_uri(plots.plot_scaling(evaluation, dpi=DAGSTER_DPI)),
    }
    chunk_sizes = plots.plot_chunk_sizes([evaluation], dpi=DAGSTER_DPI)
    if chunk_sizes is not None:
        images["chunk_sizes"] = data_uri(chunk_sizes)
    return render_markdown(task_document(evaluation, images))


# --------------------------------------------------------------------------------------------- files

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def task_folder_name(task: str) -> str:
    """The folder of ``task`` under ``reports/tasks`` (characters outside ``[A-Za-z0-9._-]`` -> ``_``)."""
    name = _UNSAFE_NAME.sub("_", task)
    return "_" + name if name in ("", ".", "..") else name


def task_report_folder(task: str) -> str:
    """The folder of ``task``'s report, relative to ``reports/``: ``tasks/<task folder name>``."""
    return f"tasks/{task_folder_name(task)}"


def write_task_report(evaluation: TaskEvaluation, reports_dir: Path) -> dict[str, Path]:
    """``tasks/<task>/report.md``, ``report.html``, ``positions.png``, ``scaling.png`` and, when the task has
    chunk-size points, ``chunk_sizes.png``; returns relative name -> path."""
    base = task_report_folder(evaluation.task)
    reports_dir = Path(reports_dir)
    written: dict[str, Path] = {}
    images = {"positions": "positions.png", "scaling": "scaling.png"}
    written[f"{base}/positions.png"] = write_bytes_atomic(
        plots.plot_positions(evaluation), reports_dir / base / "positions.png"
    )
    written[f"{base}/scaling.png"] = write_bytes_atomic(
        plots.plot_scaling(evaluation), reports_dir / base / "scaling.png"
    )
    chunk_sizes = plots.plot_chunk_sizes([evaluation]) if evaluation.chunk_sizes else None
    if chunk_sizes is not None:
        written[f"{base}/chunk_sizes.png"] = write_bytes_atomic(chunk_sizes, reports_dir / base / "chunk_sizes.png")
        images["chunk_sizes"] = "chunk_sizes.png"
    document = task_document(evaluation, images)
    written[f"{base}/report.md"] = write_text_atomic(render_markdown(document), reports_dir / base / "report.md")
    written[f"{base}/report.html"] = write_text_atomic(render_html(document), reports_dir / base / "report.html")
    return written


def write_reports(evaluations: list[TaskEvaluation], reports_dir: Path) -> dict[str, Path]:
    """Write every report under ``reports_dir``, all files together or none (:func:`conteb.staging.staged_tree`);
    returns relative name -> path.

    ``results.json`` (:func:`~evaluation.results.results_records`), ``report.json`` (every :class:`TaskEvaluation`),
    ``report.md``, ``report.html`` (the overview and chunk-size figures inline as SVG, their labels text),
    ``overview.png``, ``chunk_sizes.png`` (when a task has chunk-size points) and, per task,
    ``tasks/<task>/report.md``, ``report.html``, ``positions.png``, ``scaling.png``.
    """
    folders = [task_folder_name(e.task) for e in evaluations]
    if len(set(folders)) != len(folders):
        raise ValueError(f"two tasks share a report folder: {[e.task for e in evaluations]}")
    with staged_tree(Path(reports_dir)) as staged:
        written = _write_reports(evaluations, staged.stage)
    return {name: staged.final(path) for name, path in written.items()}


def _write_reports(evaluations: list[TaskEvaluation], reports_dir: Path) -> dict[str, Path]:
    written: dict[str, Path] = {}

    def put(name: str, write: Callable[[Path], Path]) -> None:
        written[name] = write(reports_dir / name)

    put("results.json", lambda p: write_text_atomic(json.dumps(results_records(evaluations), indent=2) + "\n", p))
    full = [json.loads(to_json(e)) for e in evaluations]
    put("report.json", lambda p: write_text_atomic(json.dumps(full, indent=2, allow_nan=False) + "\n", p))
    overall_images = {"overview": "overview.png"}
    figures: dict[str, str] = {}  # inline SVG for report.html: its labels are text a browser and a search find
    overview = plots.overview_figure(evaluations)
    put("overview.png", lambda p: write_bytes_atomic(plots.png_bytes(overview, plots.DEFAULT_DPI), p))
    figures["overview"] = plots.svg_text(overview)
    chunk_sizes = plots.chunk_sizes_figure(evaluations)
    if chunk_sizes is not None:
        put("chunk_sizes.png", lambda p: write_bytes_atomic(plots.png_bytes(chunk_sizes, plots.DEFAULT_DPI), p))
        overall_images["chunk_sizes"] = "chunk_sizes.png"
        figures["chunk_sizes"] = plots.svg_text(chunk_sizes)

    for evaluation in evaluations:
        written.update(write_task_report(evaluation, reports_dir))

    tasks = {e.task: task_report_folder(e.task) for e in evaluations}
    for task, base in tasks.items():
        overall_images[f"positions/{task}"] = f"{base}/positions.png"
        overall_images[f"scaling/{task}"] = f"{base}/scaling.png"
    md_links = {task: f"{base}/report.md" for task, base in tasks.items()}
    html_links = {task: f"{base}/report.html" for task, base in tasks.items()}
    put(
        "report.md",
        lambda p: write_text_atomic(render_markdown(overall_document(evaluations, overall_images, md_links)), p),
    )
    put(
        "report.html",
        lambda p: write_text_atomic(render_html(overall_document(evaluations, overall_images, html_links, figures)), p),
    )
    return written
