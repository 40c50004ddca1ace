"""``squad_json``: SQuAD v1.1 / v2.0-format JSON, plain or gzip-compressed.

Works for SQuAD v1.1 and v2.0 dev, XQuAD and COVID-QA. An article's key is its ``title``;
COVID-QA articles have none, so their key is the paragraph's ``document_id`` and their title the
first line of the text (the paper's title). A ``License:`` line near the top of an article's text
(COVID-QA) fills the document's ``license``.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Any

from conteb.perf import gc_paused
from curation.sources.articles import RawArticle, RawParagraph, RawQuestion, answer_problem, assemble, wrong_type
from curation.sources.model import SourceError, SourceResult

_LICENSE_LINE = re.compile(r"^License:\s*(\S.*)$", re.MULTILINE)


def read_json(path: Path) -> Any:
    """Parse a JSON file, gunzipping ``*.gz``; errors name the file and the position."""
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise SourceError(f"{path}: not UTF-8 at byte {error.start}: {error.reason}") from None
    except json.JSONDecodeError as error:
        raise SourceError(f"{path}: line {error.lineno}, column {error.colno}: invalid JSON: {error.msg}") from None
    except (OSError, EOFError, zlib.error) as error:  # e.g. a truncated or non-gzip .gz file
        raise SourceError(f"{path}: cannot read: {error}") from None


def load_squad_json(path: Path) -> SourceResult:
    """Load a SQuAD-format file into whole-article documents and their answerable queries."""
    with gc_paused():
        payload = read_json(path)
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            raise SourceError(f"{path}: not SQuAD format: expected an object with a 'data' list")
        articles = [_parse_article(path, index, raw) for index, raw in enumerate(payload["data"])]
        result = assemble(articles, str(path))
    result.stats["articles"] = len(articles)
    return result


def _require(path: Path, row: str, raw: dict, key: str, kind: type | tuple[type, ...]) -> Any:
    value = raw.get(key) if isinstance(raw, dict) else None
    if not isinstance(value, kind):
        raise SourceError(f"{path}: {row}: missing or invalid '{key}'")
    return value


def _parse_article(path: Path, index: int, raw: dict) -> RawArticle:
    row = f"data[{index}]"
    paragraphs = []
    for p_index, raw_paragraph in enumerate(_require(path, row, raw, "paragraphs", list)):
        p_row = f"{row}.paragraphs[{p_index}]"
        context = _require(path, p_row, raw_paragraph, "context", str)
        questions = [
            _parse_question(f"{p_row}.qas[{q_index}]", raw_question)
            for q_index, raw_question in enumerate(raw_paragraph.get("qas", []))
        ]
        paragraphs.append(RawParagraph(context, p_row, questions))
    if not paragraphs:
        raise SourceError(f"{path}: {row}: article without paragraphs")
    title = raw.get("title")
    metadata: dict = {}
    if isinstance(title, str) and title:
        key, shown_title = title, title.replace("_", " ")
    else:
        source_id = raw["paragraphs"][0].get("document_id")
        if source_id is None:
            raise SourceError(f"{path}: {row}: article has neither 'title' nor 'document_id'")
        key = str(source_id)
        metadata["document_id"] = source_id
        shown_title = next((line.strip() for line in paragraphs[0].context.splitlines() if line.strip()), key)[:300]
    license_match = _LICENSE_LINE.search(paragraphs[0].context[:5000])
    return RawArticle(
        key=key,
        title=shown_title,
        row=row,
        paragraphs=paragraphs,
        license=license_match.group(1).strip() if license_match else None,
        metadata=metadata,
    )


def _parse_question(row: str, raw: dict) -> RawQuestion:
    """A question; one whose fields have the wrong JSON type comes back ``invalid`` (quarantined, not fatal)."""
    try:  # fast path for well-formed questions; the checked path below names what is wrong
        query_id, question, raw_answers = raw["id"], raw["question"], raw.get("answers")
        answers = [(answer["text"], answer["answer_start"]) for answer in raw_answers or ()]
        impossible = raw.get("is_impossible", False)
        if (
            type(raw_answers) in (list, type(None))
            and type(query_id) in (str, int)
            and type(question) is str
            and type(impossible) is bool
            and all(type(text) is str and type(start) is int for text, start in answers)
        ):
            return RawQuestion(str(query_id), question, answers, row, impossible)
    except (KeyError, TypeError):
        pass
    return _parse_question_checked(row, raw)


def _parse_question_checked(row: str, raw: Any) -> RawQuestion:
    """The question with ``invalid`` naming its first field of the wrong JSON type (exact types, no coercion)."""
    if not isinstance(raw, dict):
        return RawQuestion(row, "", [], row, invalid=wrong_type("qas entry", raw, (dict,), "an object"))
    query_id, question = raw.get("id"), raw.get("question")
    answers = [] if raw.get("answers") is None else raw["answers"]
    problem = (
        wrong_type("id", query_id, (str, int), "a string or integer")
        or wrong_type("question", question, (str,), "a string")
        or wrong_type("is_impossible", raw.get("is_impossible", False), (bool,), "a boolean (true or false)")
        or wrong_type("answers", answers, (list,), "a list")
        or next((p for i, a in enumerate(answers) if (p := _answer_object_problem(i, a))), None)
    )
    label = str(query_id) if type(query_id) in (str, int) else row
    if problem or not isinstance(question, str):  # a non-string question is a ``problem`` already
        return RawQuestion(label, question if isinstance(question, str) else "", [], row, invalid=problem)
    pairs = [(answer["text"], answer["answer_start"]) for answer in answers]
    return RawQuestion(label, question, pairs, row, raw.get("is_impossible", False))


def _answer_object_problem(index: int, answer: Any) -> str | None:
    if not isinstance(answer, dict):
        return wrong_type(f"answers[{index}]", answer, (dict,), "an object")
    return answer_problem(index, answer.get("text"), answer.get("answer_start"))
