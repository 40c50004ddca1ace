"""A documents-only task (a ``text_folder`` source, no queries) publishes and passes its checks."""

from pathlib import Path

from tests.conftest import load_conteb, materialize_task


def test_documents_only_task_publishes_and_passes_its_checks(tmp_path: Path, isolated_env: Path) -> None:
    corpus = tmp_path / "speeches"
    corpus.mkdir()
    (corpus / "first.txt").write_text("The first speech.\n\nIt talks about the harvest and the roads.\n")
    (corpus / "second.txt").write_text("The second speech.\n\nIt talks about the schools.\n")
    config_path = tmp_path / "conteb.yaml"
    config_path.write_text("tasks:\n  - name: speeches\n    source: {kind: text_folder, path: speeches}\n")
    result, checks = materialize_task(config_path)
    assert result.success
    evaluations = {ev.check_name: ev.passed for ev in result.get_asset_check_evaluations()}
    assert len(evaluations) == len(checks[0].check_specs) and all(evaluations.values()), evaluations
    folder = isolated_env / "conteb" / "speeches"
    assert load_conteb(folder, "documents").num_rows == 2
    assert not (folder / "queries").exists()
    assert "`queries`" in (folder / "README.md").read_text()  # named in the card as not published
