from pathlib import Path

import datasets
import pytest
from click.testing import CliRunner

from cli.main import main
from conteb.config import HFColumns
from curation.sources.hf_dataset import load_hf_dataset, rows_to_articles
from curation.sources.model import SourceError
from tests.conftest import materialize_task

ROWS = {
    "id": ["q1", "q2", "q3"],
    "title": ["Lyon", "Lyon", "Nice"],
    "context": ["Lyon is a city.", "The city has a metro since 1978.", "Nice is on the coast."],
    "question": ["What is Lyon?", "When did Lyon's metro open?", "Where is Nice?"],
    "answers": [
        {"text": ["a city"], "answer_start": [8]},
        {"text": ["1978"], "answer_start": [27]},
        {"text": ["the coast"], "answer_start": [11]},
    ],
}


def test_saved_dataset_is_grouped_into_articles(tmp_path: Path) -> None:
    datasets.DatasetDict({"validation": datasets.Dataset.from_dict(ROWS)}).save_to_disk(str(tmp_path / "ds"))
    result = load_hf_dataset(str(tmp_path / "ds"), None, "validation", HFColumns())
    lyon, nice = result.documents
    assert (lyon.doc_id, lyon.text) == ("lyon", "Lyon is a city.\n\nThe city has a metro since 1978.")
    q2 = result.queries[1]
    start = q2.answers[0][1]
    assert lyon.text[start : start + 4] == "1978"
    assert nice.title == "Nice"


def test_parquet_folder_through_load_dataset(tmp_path: Path) -> None:
    folder = tmp_path / "pq"
    folder.mkdir()
    datasets.Dataset.from_dict(ROWS).to_parquet(str(folder / "validation.parquet"))
    result = load_hf_dataset(str(folder), None, "validation", HFColumns())
    assert [q.query_id for q in result.queries] == ["q1", "q2", "q3"]


def test_documents_only_mapping() -> None:
    articles = rows_to_articles([{"text": "one"}, {"text": "two"}], HFColumns(text="text", title=None, query=None), "x")
    assert [a.paragraphs[0].context for a in articles] == ["one", "two"]


def test_missing_column_names_role_and_available_columns() -> None:
    with pytest.raises(
        SourceError, match=r"columns not in the dataset: query -> 'question'.*available: \['context', 'title'\]"
    ):
        rows_to_articles([{"context": "c", "title": "t"}], HFColumns(query_id=None, answers=None), "x")


def saved_with_cut_arrow(folder: Path, cut: str) -> Path:
    """``ROWS`` saved as a DatasetDict at ``folder``, its one Arrow stream cut: ``"schema"`` just after the schema
    message (a reader takes it for an empty table), ``"half"`` in the middle of a record batch."""
    datasets.DatasetDict({"validation": datasets.Dataset.from_dict(ROWS)}).save_to_disk(str(folder))
    [arrow] = sorted(folder.rglob("*.arrow"))
    data = arrow.read_bytes()
    assert data[:4] == b"\xff\xff\xff\xff"  # an Arrow IPC stream: continuation marker, then the schema's length
    schema_end = 8 + int.from_bytes(data[4:8], "little")
    arrow.write_bytes(data[: schema_end if cut == "schema" else len(data) // 2])
    return arrow


@pytest.mark.parametrize(("cut", "reason"), [("schema", "truncated Arrow stream"), ("half", "truncated or not an")])
def test_truncated_arrow_file_is_an_error_naming_it(tmp_path: Path, cut: str, reason: str) -> None:
    arrow = saved_with_cut_arrow(tmp_path / "ds", cut)
    with pytest.raises(SourceError, match=rf"^{arrow}: {reason}"):
        load_hf_dataset(str(tmp_path / "ds"), None, "validation", HFColumns())


def test_truncated_arrow_file_in_a_plain_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    """A folder of ``.arrow`` files read by ``load_dataset`` (no ``state.json``)."""
    arrow = saved_with_cut_arrow(tmp_path / "saved", "schema")
    (tmp_path / "plain").mkdir()
    plain = arrow.rename(tmp_path / "plain" / "validation.arrow")
    with pytest.raises(SourceError, match=rf"^{plain}: truncated Arrow stream"):
        load_hf_dataset(str(tmp_path / "plain"), None, "validation", HFColumns())


def test_validate_and_the_build_name_the_truncated_arrow_file(tmp_path: Path) -> None:
    arrow = saved_with_cut_arrow(tmp_path / "ds", "schema")
    config = tmp_path / "conteb.yaml"
    config.write_text("tasks:\n  - name: cut\n    source: {kind: hf_dataset, path: ds, split: validation}\n")
    checked = CliRunner().invoke(main, ["--config", str(config), "validate"])
    assert checked.exit_code == 1 and "documents 0" not in checked.output
    [line] = checked.output.splitlines()
    assert line.startswith(f"{config}: task 'cut' (tasks[0]): source: {arrow}: truncated Arrow stream")
    run, _ = materialize_task(config)
    [failure] = [event for event in run.all_events if event.is_step_failure]
    assert f"{arrow}: truncated Arrow stream" in str(failure.step_failure_data.user_failure_data.description)


def test_a_deleted_shard_is_one_line_naming_it(tmp_path: Path) -> None:
    """issue 33: a saved dataset with one of its two shards deleted gave tracebacks in validate and in the run (the
    run reads it through the same load_hf_dataset, whose SourceError it reports as one failure line)."""
    datasets.DatasetDict({"validation": datasets.Dataset.from_dict(ROWS)}).save_to_disk(
        str(tmp_path / "ds"), num_shards={"validation": 2}
    )
    gone = sorted((tmp_path / "ds" / "validation").glob("*.arrow"))[1]
    gone.unlink()
    with pytest.raises(SourceError, match=rf"^{gone}: missing: .*state.json lists it as one of the 2 data file\(s\)"):
        load_hf_dataset(str(tmp_path / "ds"), None, "validation", HFColumns())
    config = tmp_path / "conteb.yaml"
    config.write_text("tasks:\n  - name: gone\n    source: {kind: hf_dataset, path: ds, split: validation}\n")
    checked = CliRunner().invoke(main, ["--config", str(config), "validate"])
    assert checked.exit_code == 1 and "Traceback" not in checked.output
    [line] = checked.output.splitlines()
    assert line.startswith(f"{config}: task 'gone' (tasks[0]): source: {gone}: missing:")
