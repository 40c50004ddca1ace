"""``hf_dataset``: any Hugging Face dataset (local folder offline, or the hub when reachable).

Rows are grouped into documents by the ``doc_key`` column (default: the title column, else the
text itself). Within a document, distinct ``text`` values are its paragraphs in first-seen order,
joined like SQuAD articles. When a query column is mapped, each row is a question whose
``answers`` use the SQuAD form ``{"text": [...], "answer_start": [...]}`` (or a list of
``{"text", "answer_start"}`` objects), with offsets relative to the row's text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conteb.config import HFColumns
from curation.sources.articles import RawArticle, RawParagraph, RawQuestion, answer_problem, assemble, wrong_type
from curation.sources.model import SourceError, SourceResult

ARROW_FILE_MAGIC = b"ARROW1"  # the first and last bytes of the Arrow IPC *file* format


def arrow_problem(path: Path) -> str | None:
    """Why ``path`` is no complete Arrow IPC file or stream (``save_to_disk`` writes streams), or None.

    Every record batch is read (memory-mapped, no copy); a stream must end with its end-of-stream marker, so one cut
    at a message boundary, which a reader takes for a shorter (or empty) table, is found too.
    """
    import pyarrow as pa

    try:
        with pa.memory_map(str(path)) as source:
            if source.read(len(ARROW_FILE_MAGIC)) == ARROW_FILE_MAGIC:  # the file format checks its own footer
                source.seek(0)
                reader = pa.ipc.open_file(source)
                for index in range(reader.num_record_batches):
                    reader.get_batch(index)
                return None
            source.seek(0)
            for _ in pa.ipc.open_stream(source):
                pass
            source.seek(0)
            messages = pa.ipc.MessageReader.open_stream(source)
            while True:
                before = source.tell()
                try:
                    messages.read_next_message()
                except StopIteration:
                    break
            marked = source.tell() > before  # the last read consumed the end-of-stream marker, not the end of file
    except (pa.ArrowException, OSError) as error:
        return f"truncated or not an Arrow file ({error})"
    return None if marked else "truncated Arrow stream: it ends without its end-of-stream marker"


def check_arrow_files(folder: Path) -> None:
    """Raise :class:`SourceError` naming the first ``*.arrow`` file under ``folder`` that is truncated or no Arrow."""
    for path in sorted(folder.rglob("*.arrow")):
        problem = arrow_problem(path)
        if problem:
            raise SourceError(f"{path}: {problem}")


def check_data_files(folder: Path) -> None:
    """Raise :class:`SourceError` naming the first data file that a ``state.json`` under ``folder`` (what
    ``save_to_disk`` writes per split) lists and the folder lacks (a shard deleted or not copied), or a
    ``state.json`` that cannot be read."""
    for state in sorted(folder.rglob("state.json")):
        try:
            listed = json.loads(state.read_text(encoding="utf-8")).get("_data_files", [])
            names = [entry["filename"] for entry in listed]
        except (OSError, ValueError, AttributeError, TypeError, KeyError) as error:
            raise SourceError(f"{state}: unreadable dataset state ({type(error).__name__}: {error})") from None
        for name in names:
            if not (state.parent / name).is_file():
                raise SourceError(
                    f"{state.parent / name}: missing: {state} lists it as one of the {len(names)} data file(s) of "
                    "this split (a shard deleted or not copied); restore it or save the dataset again"
                )


def open_hf_dataset(path: str, name: str | None, split: str) -> Any:
    """A ``datasets.Dataset``: ``load_from_disk`` for a saved dataset folder, else ``load_dataset``.

    A local folder's Arrow files are checked first (:func:`check_arrow_files`, :func:`check_data_files`): a truncated
    or missing one is an error naming it, never a dataset with fewer rows or a traceback.
    """
    import datasets

    folder = Path(path)
    if folder.is_dir():
        check_arrow_files(folder)
    if folder.is_dir() and ((folder / "dataset_dict.json").exists() or (folder / "state.json").exists()):
        check_data_files(folder)
        try:
            loaded = datasets.load_from_disk(str(folder))
        except OSError as error:  # a file gone since the check, or unreadable
            raise SourceError(
                f"{error.filename or path}: cannot load the saved dataset: {error.strerror or error}"
            ) from None
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise SourceError(f"{path}: no split {split!r}; available: {sorted(loaded)}")
            loaded = loaded[split]
        return loaded
    try:
        return datasets.load_dataset(path, name, split=split)
    except (FileNotFoundError, ValueError, datasets.exceptions.DatasetGenerationError) as error:
        cause = f" ({error.__cause__})" if error.__cause__ else ""  # a generation error's message omits its cause
        raise SourceError(f"{path}: cannot load split {split!r} (config {name!r}): {error}{cause}") from None


def load_hf_dataset(path: str, name: str | None, split: str, columns: HFColumns) -> SourceResult:
    """Load a dataset and assemble its rows into documents and queries."""
    dataset = open_hf_dataset(path, name, split)
    source = f"{path}" + (f"[{name}]" if name else "") + f":{split}"
    result = assemble(rows_to_articles(dataset.to_list(), columns, source), source)
    result.stats["rows"] = len(dataset)
    return result


def rows_to_articles(rows: list[dict], columns: HFColumns, source: str) -> list[RawArticle]:
    """Group dataset rows into :class:`RawArticle` objects (see the module docstring)."""
    available = set(rows[0]) if rows else set()
    mapped = {
        "text": columns.text,
        "title": columns.title,
        "doc_key": columns.doc_key,
        "query_id": columns.query_id,
        "query": columns.query,
        "answers": columns.answers,
    }
    missing = {role: col for role, col in mapped.items() if col and rows and col not in available}
    if columns.query is None:
        missing = {role: col for role, col in missing.items() if role not in ("query_id", "answers")}
    if missing:
        wanted = ", ".join(f"{role} -> '{col}'" for role, col in missing.items())
        raise SourceError(
            f"{source}: columns not in the dataset: {wanted}; available: {sorted(available)} "
            "(map them under source.columns, or set a role to null)"
        )
    key_column = columns.doc_key or columns.title or columns.text
    articles: dict[str, RawArticle] = {}
    paragraphs: dict[tuple[str, str], RawParagraph] = {}
    for index, row in enumerate(rows):
        text = row[columns.text]
        if not isinstance(text, str):
            raise SourceError(f"{source}: row {index}: column '{columns.text}' is not a string")
        key = str(row[key_column])
        article = articles.get(key)
        if article is None:
            title = row[columns.title] if columns.title else None
            article = articles[key] = RawArticle(key=key, title=title, row=f"row {index}")
        paragraph = paragraphs.get((key, text))
        if paragraph is None:
            paragraph = paragraphs[(key, text)] = RawParagraph(text, f"row {index}")
            article.paragraphs.append(paragraph)
        if columns.query:
            paragraph.questions.append(_question(row, index, columns.query, columns, source))
    return list(articles.values())


def _question(row: dict, index: int, query_column: str, columns: HFColumns, source: str) -> RawQuestion:
    """The row's question (column ``query_column``, the mapped ``columns.query``); a question or answer of the
    wrong type comes back ``invalid`` (quarantined)."""
    query_id = str(row[columns.query_id]) if columns.query_id else f"row-{index}"
    question = row[query_column]
    answers = _answers(row.get(columns.answers) if columns.answers else None, index, columns, source)
    problem = wrong_type(query_column, question, (str,), "a string") or next(
        (p for i, (text, start) in enumerate(answers) if (p := answer_problem(i, text, start))), None
    )
    if problem:
        return RawQuestion(query_id, question if isinstance(question, str) else "", [], f"row {index}", invalid=problem)
    return RawQuestion(query_id, question, answers, f"row {index}")


def _answers(value: Any, index: int, columns: HFColumns, source: str) -> list[tuple[Any, Any]]:
    """``(text, answer_start)`` pairs of the answers column, unchecked; a column not in SQuAD form is an error."""
    if value is None:
        return []
    if isinstance(value, dict) and "text" in value and "answer_start" in value:
        return list(zip(value["text"], value["answer_start"], strict=False))
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return [(item.get("text"), item.get("answer_start")) for item in value]
    raise SourceError(
        f"{source}: row {index}: column '{columns.answers}' is not SQuAD-style answers "
        "({'text': [...], 'answer_start': [...]})"
    )
