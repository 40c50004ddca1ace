"""`conteb costs`: calls, prompt, cached and completion tokens, cached share and dollars per task/stage and task."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cli.main import main
from conteb.storage import llm_cache_path
from llm.cache import AnswerCache
from llm.usage import TokenUsage
from tests.conftest import SAMPLE_DIR


def test_costs_shows_cached_tokens_share_and_dollars_per_stage_and_task(tmp_path: Path, isolated_env: Path) -> None:
    config = tmp_path / "conteb.yaml"
    config.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    ledger = AnswerCache(llm_cache_path(isolated_env))
    ledger.record_usage("demo/llm_pairing", "pair:q1", "gpt-4o", TokenUsage(3000, 10, 2048), 0.0053, "online")
    ledger.record_usage("demo/llm_pairing", "pair:q2", "gpt-4o", TokenUsage(1000, 10, 0), 0.0026, "online")
    ledger.record_usage("demo/chunk_contexts", "context:c", "gpt-4o", TokenUsage(2000, 40, 0), 0.0054, "batch")
    ledger.record_usage("other/reformulation", "reformulate:x", "gpt-4o", TokenUsage(500, 500, 0), 0.0063, "online")
    ledger.close()
    result = CliRunner().invoke(main, ["--config", str(config), "costs"])
    assert result.exit_code == 0, result.output
    header, *lines = result.output.strip().splitlines()
    assert header.split() == ["task/stage", "calls", "prompt", "tok", "cached", "tok", "cached", "compl.", "tok", "USD"]
    rows = {line.rsplit(maxsplit=6)[0].strip(): line.split()[-6:] for line in lines}
    assert list(rows) == [
        "demo/chunk_contexts", "demo/llm_pairing", "demo (all stages)",
        "other/reformulation", "other (all stages)", "total",
    ]  # fmt: skip
    assert rows["demo/llm_pairing"] == ["2", "4,000", "2,048", "51.2%", "20", "0.0079"]
    assert rows["demo (all stages)"] == ["3", "6,000", "2,048", "34.1%", "60", "0.0133"]
    assert rows["total"] == ["4", "6,500", "2,048", "31.5%", "560", "0.0196"]


def test_costs_counts_implausible_usage(tmp_path: Path, isolated_env: Path) -> None:
    config = tmp_path / "conteb.yaml"
    config.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    ledger = AnswerCache(llm_cache_path(isolated_env))
    ledger.record_usage("demo/llm_pairing", "pair:q1", "gpt-4o", TokenUsage(3000, 10, 0), 0.0076, "online")
    ledger.record_usage("demo/llm_pairing", "pair:q2", "gpt-4o", TokenUsage(10**15, 10, 0), 2.5e9, "online")
    ledger.record_usage("demo/reformulation", "re:x", "gpt-4o", TokenUsage(10**20, 10, 0), 2.5e14, "batch")
    ledger.close()
    result = CliRunner().invoke(main, ["--config", str(config), "costs"])
    assert result.exit_code == 0, result.output
    *_, total, implausible = result.output.strip().splitlines()
    assert total.split()[-6:] == ["3", "3,000", "0", "0.0%", "10", "0.0076"]
    assert implausible.startswith("implausible usage: 2 call(s)")
    assert implausible.endswith("demo/llm_pairing 1, demo/reformulation 1")
