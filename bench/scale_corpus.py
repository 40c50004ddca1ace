"""Corpus replication for the scale benchmark (``bench/scale.py``): k copies of a SQuAD-format corpus under new ids.

:func:`replicate_squad` is pure: given a parsed SQuAD v1.1/v2.0 payload (``{"version", "data": [article…]}``) and
``copies`` = k >= 1, it returns a new payload whose ``data`` holds the original articles (copy 0, unchanged) and,
for i = 1..k-1, every article again with

* ``title`` = ``"<title> (copy i)"``: a new document key, so the loader gives it a new document id
  (``slugify``: ``super-bowl-50-copy-1``). The suffix is a parenthesised qualifier, which the offline theme rule
  drops (``curation.themes.naming.theme_from_title``: ``"Fresno (California)"`` -> ``"Fresno"``), so a copy keeps its
  original's theme and every copy costs the curation the same work as the original;
* every question ``id`` = ``"<id>-copy-i"``;
* contexts, questions and answers (``text``, ``answer_start``) unchanged: the contexts are the same strings, so
  the answer offsets stay valid.

An article without a ``title`` (COVID-QA keys articles by their paragraphs' ``document_id``) gets
``document_id`` = ``"<document_id>-copy-i"`` on each paragraph instead. Copy order: all of copy 0, then all of
copy 1, …, so the first n documents of a k× corpus are those of the 1× corpus.

:func:`write_squad` writes a payload as JSON (gzip-compressed when the name ends in ``.gz``); :func:`read_squad`
reads one back. No project import: the benchmark feeds the written file to the project's ``squad_json`` loader.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any


def copy_suffix(index: int) -> str:
    """The title suffix of copy ``index`` (>= 1): ``" (copy 3)"``."""
    return f" (copy {index})"


def _copy_article(article: dict[str, Any], index: int) -> dict[str, Any]:
    """Article ``article`` as copy ``index`` (>= 1): new title (or document ids) and question ids."""
    out = copy.deepcopy(article)
    if isinstance(out.get("title"), str):
        out["title"] += copy_suffix(index)
    for paragraph in out.get("paragraphs", []):
        if not isinstance(out.get("title"), str) and "document_id" in paragraph:
            paragraph["document_id"] = f"{paragraph['document_id']}-copy-{index}"
        for question in paragraph.get("qas", []):
            if "id" in question:
                question["id"] = f"{question['id']}-copy-{index}"
    return out


def replicate_squad(payload: dict[str, Any], copies: int) -> dict[str, Any]:
    """``copies`` x the articles of ``payload`` (rules in the module docstring); ``payload`` is not modified.

    Raises ``ValueError`` when ``copies`` < 1 or ``payload`` is not SQuAD-shaped (no ``data`` list).
    """
    if copies < 1:
        raise ValueError(f"copies must be at least 1, not {copies}")
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise ValueError("not SQuAD format: expected an object with a 'data' list")
    articles = [copy.deepcopy(article) for article in data]
    for index in range(1, copies):
        articles.extend(_copy_article(article, index) for article in data)
    return {**{k: v for k, v in payload.items() if k != "data"}, "data": articles}


def count_questions(payload: dict[str, Any]) -> int:
    """Questions in ``payload`` (every ``qas`` entry, answerable or not)."""
    return sum(len(p.get("qas", [])) for a in payload["data"] for p in a.get("paragraphs", []))


def read_squad(path: Path) -> dict[str, Any]:
    """A SQuAD-format JSON file, plain or ``.gz``."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return json.loads(raw.decode("utf-8"))


def write_squad(payload: dict[str, Any], path: Path) -> Path:
    """Write ``payload`` to ``path`` (gzip level 1 when it ends in ``.gz``); returns ``path``."""
    raw = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw, compresslevel=1) if path.suffix == ".gz" else raw)
    return path
