"""Sizes of the generated (``kind: controlled``) corpus: document lengths, chunks, where the answers fall, and the
longest run of words two documents of one template share.

Every template of :data:`curation.sources.controlled.catalog.TEMPLATES`, ``--documents`` documents each (seed
``--seed``), chunked by the project's splitter at ``--chunk-size`` characters. The shared run is counted in the words
of :func:`conteb.content.words` after :func:`conteb.content.normalise` (what the passage prints hash): it must stay
below :data:`conteb.content.PASSAGE_WORDS`, or two documents of a template would share a passage print
(``tests/sources/test_controlled.py`` checks the prints themselves). Deterministic: no timing.

Usage (from the repository root)::

    .venv/bin/python bench/controlled_corpus.py [--documents 20] [--seed 0] [--chunk-size 1000]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from conteb.config import ChunkingConfig
from conteb.content import PASSAGE_WORDS, normalise, words
from curation.chunking import chunk_text, make_splitter
from curation.sources.controlled.catalog import TEMPLATES
from curation.sources.controlled.generate import generate_controlled


def shares_run(documents: list[list[str]], length: int) -> bool:
    """Whether two of ``documents`` (word lists) hold the same run of ``length`` consecutive words."""
    first_seen: dict[tuple[str, ...], int] = {}
    for index, document in enumerate(documents):
        for start in range(len(document) - length + 1):
            if first_seen.setdefault(tuple(document[start : start + length]), index) != index:
                return True
    return False


def longest_shared_run(documents: list[list[str]]) -> int:
    """The longest run of words two of ``documents`` share (0: none), by bisection on :func:`shares_run`."""
    low, high = 0, max((len(document) for document in documents), default=0)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if shares_run(documents, middle) else (low, middle - 1)
    return low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20, help="documents per template (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk-size", type=int, default=1000)
    args = parser.parse_args()

    corpus = generate_controlled(TEMPLATES, args.documents, args.seed)
    splitter = make_splitter(ChunkingConfig(chunk_size=args.chunk_size, chunk_overlap=0))
    lengths = [len(document.text) for document in corpus.documents]
    chunks = [len(chunk_text(document.text, splitter, 0)) for document in corpus.documents]
    starts = [start for query in corpus.queries for _, start in query.answers]
    by_template: dict[str, list[list[str]]] = defaultdict(list)
    for document in corpus.documents:
        by_template[document.metadata["template"]].append(words(normalise(document.text)))
    shared = max(longest_shared_run(documents) for documents in by_template.values())
    late = sum(start >= args.chunk_size for start in starts) / len(starts)
    print(f"{len(TEMPLATES)} templates, {len(corpus.documents)} documents, {len(corpus.queries)} queries")
    print(f"document text: {min(lengths):,} to {max(lengths):,} characters")
    print(f"chunks at {args.chunk_size:,} characters: {min(chunks)} to {max(chunks)} per document")
    print(f"answers starting at character {args.chunk_size:,} or later: {late:.0%}")
    print(f"longest run of words two documents of a template share: {shared} (passage prints: {PASSAGE_WORDS})")


if __name__ == "__main__":
    main()
