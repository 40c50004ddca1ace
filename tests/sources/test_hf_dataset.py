from pathlib import Path

import datasets
import pytest

from conteb.config import HFColumns
from curation.sources.hf_dataset import load_hf_dataset, rows_to_articles
from curation.sources.model import SourceError

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
