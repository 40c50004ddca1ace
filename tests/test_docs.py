"""The manual (docs/, mkdocs.yml): the strict build succeeds, its generated reference pages list every registry key
of the sample task's models and every ``conteb`` command, and a page mentioning a key, command or option the code
does not have fails the strict build with a message naming the page and the mention (docs/hooks/reference.py)."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cli.main import main
from conteb.config import ChunkingConfig, ReviewConfig, SampleSource, SplitsConfig, TaskConfig
from project.config import load_config

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).with_name("mkdocs")

pytestmark = pytest.mark.skipif(not MKDOCS.is_file(), reason="mkdocs is not installed (the dev extra)")


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site`` (warnings on stderr, the verdict on stdout)."""
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(MKDOCS.parent), "HOME": str(site.parent)},
        timeout=120,
    )


def page_text(site: Path, page: str) -> str:
    """The text of a built page (``use_directory_urls: false``: ``<page>.html``), tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", (site / f"{page}.html").read_text(encoding="utf-8")))


def table_rows(site: Path, page: str) -> list[list[str]]:
    """The body rows of every table of a built page, as lists of cell texts."""
    source = (site / f"{page}.html").read_text(encoding="utf-8")
    rows = []
    for body in re.findall(r"<tbody>(.*?)</tbody>", source, flags=re.S):
        for row in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S):
            cells = re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
            rows.append([" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split()) for c in cells])
    return rows


def build_with_addition(tmp_path: Path, addition: str) -> subprocess.CompletedProcess[str]:
    """The strict build of a copy of the manual whose tasks.md ends with ``addition``."""
    config, docs = tmp_manual(tmp_path)
    page = docs / "tasks.md"
    page.write_text(page.read_text(encoding="utf-8") + addition, encoding="utf-8")
    return build(config, tmp_path / "site")


def tmp_manual(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of docs/ and a config building it with the repository's hook: ``(config, docs folder)``."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("hooks", "__pycache__"))
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config.update(docs_dir=str(docs), hooks=[str(ROOT / "docs" / "hooks" / "reference.py")])
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path, docs


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site") / "site"
    result = build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, result.stderr + result.stdout
    return site


def test_strict_build_lists_every_key_of_the_sample_task(built_site: Path) -> None:
    text = page_text(built_site, "reference/registry")
    sample = next(task for task in load_config(ROOT / "conteb.yaml").tasks if task.name == "sample")
    assert isinstance(sample.source, SampleSource)
    expected = [f"tasks[].{name}" for name in TaskConfig.model_fields]
    expected += [f"tasks[].source.{name}" for name in SampleSource.model_fields]
    expected += [f"tasks[].chunking.{name}" for name in ChunkingConfig.model_fields]
    expected += [f"tasks[].review.{name}" for name in ReviewConfig.model_fields]
    expected += [f"tasks[].splits.{name}" for name in SplitsConfig.model_fields]
    missing = [key for key in expected if key not in text]
    assert not missing, f"registry reference lacks {missing}"
    # values come from the models, not from a copy: the chunk size default and a bound
    row = re.search(r"tasks\[\]\.chunking\.chunk_size\s+int \(≥ 1\)\s+1000", text)
    assert row, "chunk_size row without its type, bound and default"


def test_every_registry_key_has_a_description(built_site: Path) -> None:
    """Each key row of the registry reference says what the key does (a Field description, a comment beside or
    above the field, the model docstring's ``key``: entry, or for a block its model's first sentence)."""
    rows = table_rows(built_site, "reference/registry")
    assert len(rows) > 200
    bare = [row[0] for row in rows if len(row) == 4 and not row[3]]
    assert not bare, f"{len(bare)} registry key(s) without a description: {bare[:20]}"
    top = {row[0]: row[3] for row in rows if "." not in row[0] and "[" not in row[0]}
    assert set(top) >= {"llm", "execution", "training", "evaluation", "reproduce", "tasks"}
    assert all(top.values()), top


def test_the_command_index_cuts_no_description(built_site: Path) -> None:
    """The command table shows each command's whole first help paragraph, never click's cut ``...`` summary."""
    index = {row[0]: row[1] for row in table_rows(built_site, "reference/cli") if len(row) == 2}
    assert len(index) > 15
    assert all(text and not text.endswith(("...", "…")) for text in index.values()), index
    assert index["conteb costs"].endswith("when there are any."), index["conteb costs"]


def test_strict_build_lists_every_cli_command_and_option(built_site: Path) -> None:
    text = page_text(built_site, "reference/cli")

    def walk(command, path):
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")

    commands = list(walk(main, "conteb"))
    assert len(commands) > 15
    for path, command in commands:
        assert f"Usage: {path}" in text, path
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in text, f"{path} {opt}"


def test_a_stale_key_fails_the_strict_build_naming_page_and_key(tmp_path: Path) -> None:
    result = build_with_addition(
        tmp_path,
        "\nSet `evaluation.chunk_sizes.sizez` and `review.auto_accept_unflagged` to taste.\n"
        + "\n```bash\n.venv/bin/conteb review sever --tokn x\n```\n"
        + "\nThen `conteb evaluate --no-chunk-size`.\n",
    )
    assert result.returncode != 0
    log = result.stderr + result.stdout
    assert "docs/tasks.md" in log
    assert "registry key 'evaluation.chunk_sizes.sizez'" in log and "did you mean 'sizes'?" in log
    assert "registry key 'review.auto_accept_unflagged'" in log
    assert "no command 'conteb review sever' (did you mean 'conteb review serve'?)" in log
    assert "'conteb evaluate' has no option '--no-chunk-size'" in log
    assert "Aborted with 4 warnings in strict mode" in log


def test_right_mentions_and_code_paths_pass(tmp_path: Path) -> None:
    """Keys in every written form, module paths and file names that share a block's name are not flagged."""
    result = build_with_addition(
        tmp_path,
        "\n`execution.celery.{broker,backend}`, `tasks[0].source.templates`, `llm.prices.gpt-4o.prompt`,"
        + " `training.settings.lambda_seq`, `reproduce.profiles.cpu.training.epochs`, `splits.train`,"
        + " `review.on_reject: original`, `evaluation.comparisons`, `training.config.TrainingConfig`,"
        + " `evaluation.json`, `conteb --config x.yaml review list --task sample`, `make workers run N=3`.\n",
    )
    assert result.returncode == 0, result.stderr + result.stdout


def test_the_manual_opened_as_files_leads_to_pages_not_folder_listings(built_site: Path) -> None:
    """Opened from the build folder as file:// pages (no server), a navigation link, a link inside a page (with its
    anchor) and the registry reference all reach manual pages; a directory URL would show a folder listing."""
    from tests.support.browser import open_page, require_browser, screenshot

    require_browser()
    with open_page(1400, 1000) as page:
        page.goto((built_site / "index.html").as_uri())
        page.locator(".md-sidebar--primary nav a", has_text="Quickstart").first.click()
        page.wait_for_load_state()
        assert page.url == (built_site / "quickstart.html").as_uri()
        assert page.locator("article h1").inner_text().startswith("Quickstart")
        assert "Index of" not in page.title() and "Index of" not in page.locator("body").inner_text()
        screenshot(page, "manual-quickstart-from-files.png", full_page=False)

        page.locator("article a[href='review.html#the-gate-in-dagster']").first.click()
        page.wait_for_load_state()
        assert page.url == (built_site / "review.html").as_uri() + "#the-gate-in-dagster"
        assert page.locator("article h1").inner_text().startswith("Review")
        assert page.locator("#the-gate-in-dagster").is_visible()

        page.locator(".md-sidebar--primary nav a", has_text="Registry keys").first.click()
        page.wait_for_load_state()
        assert page.url.endswith("/reference/registry.html")
        descriptions = page.locator("article table tbody tr td:nth-child(4)").all_inner_texts()
        assert len(descriptions) > 200 and all(text.strip() for text in descriptions)
        # a key is never broken mid-word across lines ("evaluatio" / "n"): one line box per key
        broken = page.locator("article table tbody tr td:first-child code").evaluate_all(
            "codes => codes.filter(code => code.getClientRects().length > 1).map(code => code.textContent)"
        )
        assert not broken, broken
        screenshot(page, "manual-registry-from-files.png", full_page=False)

        page.locator(".md-sidebar--primary nav a", has_text="Command line").first.click()
        page.wait_for_load_state()
        costs = page.locator("article table tbody tr", has=page.locator("a[href='#conteb-costs']")).inner_text()
        assert costs.rstrip().endswith("when there are any."), costs
        screenshot(page, "manual-cli-from-files.png", full_page=False)
