"""Context-necessity labels on the real corpora: what ``curation/necessity.py`` labels, and what a change of the
theme matcher or of the offline theme changes.

Corpora (``../shared/data``, read by path): XQuAD (en) and SQuAD v1.1 dev, loaded with the project's loader
(:func:`curation.sources.squad.load_squad_json`), chunked at 1000 characters (:func:`curation.chunking.chunk_documents`)
and paired by answer span (:func:`curation.pairing.pair_by_span`), as a registry task with ``pairing: span`` is. The
labels are :func:`curation.necessity.label_queries` of the published documents
(:func:`curation.dataset.conteb_documents`) in one of two variants:

* ``original``: chunks as written, no reformulation (``themes`` None: the offline theme of each document);
* ``masked``: the offline reformulation stage, as the pipeline runs it without an LLM: the themes table
  (:func:`curation.themes.stage.themes_table` without LLM results) and
  :func:`curation.reformulation.apply_reformulations` without LLM results (every chunk but each document's first has
  its theme mentions masked); the labels read the same themes table.

No LLM: ``answerable_alone`` is null, so ``needs_context`` = ``theme_missing``. ``--drop-titles`` sets every
document's title to null and its doc id to ``doc<n>`` before chunking (a corpus without titles: the loader's doc ids
are slugs of the titles, so keeping them would keep the titles). The script only calls functions that every
version of the tree has, so it can run on an exported old tree (``PYTHONPATH=/tmp/old``) and the two JSON files be
compared: ``--compare OLD.json`` prints the labels that changed (counts per direction, examples with the theme
names found in the query and in the gold chunk) and, with ``--drop-titles`` against a run with titles, how well the
two labellings agree.

Usage (from the repository root)::

    nice -n 10 .venv/bin/python bench/necessity_labels.py --corpus xquad --variant original --json /tmp/x.json
    nice -n 10 .venv/bin/python bench/necessity_labels.py --corpus squad --drop-titles --compare /tmp/s.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import inspect
import json

import pyarrow as pa

from conteb.config import ChunkingConfig
from curation.chunking import chunk_documents
from curation.dataset import conteb_documents
from curation.necessity import document_variants, label_queries
from curation.pairing import pair_by_span
from curation.reformulation import apply_reformulations
from curation.sources.squad import load_squad_json
from curation.themes.mentions import find_mentions
from curation.themes.stage import themes_table

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CORPORA = {"xquad": "xquad-en.json.gz", "squad": "squad-v1.1-dev.json.gz", "covidqa": "covidqa-2020-04-23.json.gz"}
CHUNK_SIZE = 1000


def _renamed(table: pa.Table, new_id: dict[str, str]) -> pa.Table:
    """``table`` with its ``doc_id`` column mapped through ``new_id``."""
    ids = pa.array([new_id[doc_id] for doc_id in table.column("doc_id").to_pylist()], pa.string())
    return table.set_column(table.schema.get_field_index("doc_id"), table.schema.field("doc_id"), ids)


def build(corpus: str, variant: str, drop_titles: bool, data: Path = SHARED) -> dict:
    """Labels of every paired query, the variants of every document, and the texts the examples quote."""
    source = load_squad_json(data / CORPORA[corpus])
    documents, source_queries = source.documents_table(), source.queries_table()
    original_id = {doc_id: doc_id for doc_id in documents.column("doc_id").to_pylist()}
    if drop_titles:  # no title, and doc ids that name nothing ("doc7"): the loaders' ids are slugs of the titles
        original_id = {f"doc{n}": doc_id for n, doc_id in enumerate(original_id)}
        anonymous = {doc_id: new for new, doc_id in original_id.items()}
        documents = documents.set_column(
            documents.schema.get_field_index("title"), "title", pa.nulls(documents.num_rows, pa.string())
        )
        documents, source_queries = _renamed(documents, anonymous), _renamed(source_queries, anonymous)
    chunks = chunk_documents(documents, ChunkingConfig(chunk_size=CHUNK_SIZE, chunk_overlap=0)).chunks
    queries = pair_by_span(source_queries, documents, chunks).table()
    themes = None
    if variant == "masked":
        heads = {
            d: t
            for d, i, t in zip(
                *(chunks.column(c).to_pylist() for c in ("doc_id", "chunk_index", "og_chunk")), strict=True
            )
            if i == 0
        }
        # as the reformulation asset does (first chunks as heads); older trees' themes_table has no heads
        takes_heads = "heads" in inspect.signature(themes_table).parameters
        themes, _ = themes_table(documents, None, None, heads) if takes_heads else themes_table(documents, None, None)
        published = conteb_documents(chunks, apply_reformulations(chunks, themes, {}, None, None, None).table)
    else:
        published = conteb_documents(chunks)
    labelled = label_queries(queries, published, themes)
    variants = document_variants(published, themes)
    text_of = dict(zip(published.column("chunk_id").to_pylist(), published.column("chunk").to_pylist(), strict=True))
    doc_of = dict(zip(published.column("chunk_id").to_pylist(), published.column("doc_id").to_pylist(), strict=True))
    rows = {}
    for qid, query, chunk_id, missing, needs in zip(
        *(labelled.column(c).to_pylist() for c in ("query_id", "query", "chunk_id", "theme_missing", "needs_context")),
        strict=True,
    ):
        names = variants[doc_of[chunk_id]]
        rows[qid] = {
            "query": query,
            "doc_id": original_id[doc_of[chunk_id]],
            "chunk_id": chunk_id,
            "theme_missing": bool(missing),
            "needs_context": bool(needs),
            "in_query": [m[2] for m in find_mentions(query, names)],
            "in_chunk": sorted({m[2] for m in find_mentions(text_of[chunk_id], names)}),
        }
    return {
        "corpus": corpus,
        "variant": variant,
        "drop_titles": drop_titles,
        "documents": len(variants),
        "queries": labelled.num_rows,
        "needs_context": sum(r["needs_context"] for r in rows.values()),
        "documents_with_a_label": len({r["doc_id"] for r in rows.values() if r["needs_context"]}),
        "themes": {original_id[doc_id]: _longest_name(names) for doc_id, names in variants.items()},
        "rows": rows,
    }


def _longest_name(variants: list[str]) -> str | None:
    """The longest variant that is not a possessive (the theme or its longest form), None when there is none."""
    names = [name for name in variants if not name.endswith(("'s", "’s", "'", "’"))]
    return names[0] if names else None


def compare(new: dict, old: dict, examples: int) -> dict:
    """Labels that changed between ``old`` and ``new`` (same queries), with examples, and the agreement."""
    common = [q for q in new["rows"] if q in old["rows"]]
    gained = [q for q in common if new["rows"][q]["needs_context"] and not old["rows"][q]["needs_context"]]
    lost = [q for q in common if old["rows"][q]["needs_context"] and not new["rows"][q]["needs_context"]]
    both = sum(1 for q in common if new["rows"][q]["needs_context"] and old["rows"][q]["needs_context"])
    old_total = sum(1 for q in common if old["rows"][q]["needs_context"])
    new_total = sum(1 for q in common if new["rows"][q]["needs_context"])

    def example(qid: str) -> dict:
        a, b = old["rows"][qid], new["rows"][qid]
        return {
            "query_id": qid,
            "query": b["query"],
            "theme": new["themes"].get(b["doc_id"]),
            "old theme": old["themes"].get(a["doc_id"]),
            "old: in query / in chunk": [a["in_query"], a["in_chunk"]],
            "new: in query / in chunk": [b["in_query"], b["in_chunk"]],
        }

    return {
        "queries compared": len(common),
        "old needs_context": old_total,
        "new needs_context": new_total,
        "labelled by both": both,
        "new only": len(gained),
        "old only": len(lost),
        "precision against old": round(both / new_total, 3) if new_total else None,
        "recall of old": round(both / old_total, 3) if old_total else None,
        "documents themed differently": sum(
            1 for d, theme in new["themes"].items() if (theme or "").lower() != (old["themes"].get(d) or "").lower()
        ),
        "examples new only": [example(q) for q in gained[:examples]],
        "examples old only": [example(q) for q in lost[:examples]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="xquad")
    parser.add_argument("--variant", choices=("original", "masked"), default="original")
    parser.add_argument("--drop-titles", action="store_true", help="documents without titles")
    parser.add_argument("--json", type=Path, help="write every label here")
    parser.add_argument("--compare", type=Path, help="a JSON written by this script (e.g. by the old tree)")
    parser.add_argument("--examples", type=int, default=8)
    parser.add_argument("--data", type=Path, default=SHARED, help="the shared corpora folder")
    args = parser.parse_args()
    result = build(args.corpus, args.variant, args.drop_titles, args.data)
    summary = {k: v for k, v in result.items() if k not in ("rows", "themes")}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.compare:
        print(json.dumps(compare(result, json.loads(args.compare.read_text()), args.examples), indent=1))


if __name__ == "__main__":
    main()
