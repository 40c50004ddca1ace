import random

import pyarrow as pa
import pytest

import curation.synthetic_queries as synthetic_queries
from conteb.schemas import CHUNKS, SOURCE_DOCUMENTS, SYNTHETIC_QUERIES
from curation.synthetic_queries import (
    FILTERS,
    Candidate,
    build_synthetic_requests,
    filter_synthetic,
    jaccard,
    normalize_query,
    parse_synthetic_results,
    similarity_features,
    synthetic_queries_table,
    synthetic_schema,
    synthetic_stats,
)
from curation.windows import document_window, window_bounds
from llm.prompts import load_prompt
from llm.types import LLMResult

INTRO = "Lyon is a city in France. "  # 26 characters
BODY = "The old town has Roman ruins and a basilica built in 1872 on the hill."
TEXT = INTRO + BODY
CHUNK_BOUNDS = ((0, len(INTRO)), (len(INTRO), len(TEXT)))


def tables() -> tuple[pa.Table, pa.Table]:
    docs = pa.Table.from_pylist(
        [{"doc_id": "lyon", "title": "Lyon", "text": TEXT, "source": "f"}], schema=SOURCE_DOCUMENTS
    )
    rows = [
        {
            "chunk_id": f"lyon_{i}",
            "doc_id": "lyon",
            "chunk_index": i,
            "char_start": s,
            "char_end": e,
            "og_chunk": TEXT[s:e],
        }
        for i, (s, e) in enumerate(CHUNK_BOUNDS)
    ]
    rows.append(
        {"chunk_id": "ghost_0", "doc_id": "ghost", "chunk_index": 0, "char_start": 0, "char_end": 3, "og_chunk": "abc"}
    )
    return pa.Table.from_pylist(rows, schema=CHUNKS), docs


# --- schema, requests, window ---


def test_schema_shape() -> None:
    schema = synthetic_schema(3)
    assert schema["required"] == ["queries"] and schema["additionalProperties"] is False
    array = schema["properties"]["queries"]
    assert (array["type"], array["minItems"], array["maxItems"]) == ("array", 1, 3)
    item = array["items"]
    assert item["required"] == ["query", "answer"] and item["additionalProperties"] is False
    assert item["properties"] == {"query": {"type": "string"}, "answer": {"type": "string"}}
    with pytest.raises(ValueError):
        synthetic_schema(0)


def test_requests_and_validator() -> None:
    chunks, docs = tables()
    requests = build_synthetic_requests(chunks, docs, n=2)
    assert [r.custom_id for r in requests] == ["synth:lyon_0", "synth:lyon_1"]  # ghost: unknown document
    system, user = (message["content"] for message in requests[1].messages)
    assert "write 2 distinct questions" in system
    assert f"Passage:\n{BODY}" in user and TEXT in user and "Document title: Lyon" in user
    assert requests[0].prompt_tag == load_prompt("synthetic_queries").tag
    validate = requests[0].validator
    item = {"query": "q", "answer": "a"}
    assert validate({"queries": [item]}) is None
    assert validate({"queries": [item, item]}) is None
    assert "got 3 queries; write 2" in validate({"queries": [item] * 3})
    assert "got 0 queries; write 2" in validate({"queries": []})
    assert "item 1" in validate({"queries": [item, {"query": "q"}]})
    assert "list" in validate({"queries": "q"})


def test_requests_truncate_long_documents() -> None:
    text = "x" * 100 + "CHUNK" + "y" * 100
    docs = pa.Table.from_pylist([{"doc_id": "d", "title": None, "text": text, "source": "f"}], schema=SOURCE_DOCUMENTS)
    chunks = pa.Table.from_pylist(
        [{"chunk_id": "d_0", "doc_id": "d", "chunk_index": 0, "char_start": 100, "char_end": 105, "og_chunk": "CHUNK"}],
        schema=CHUNKS,
    )
    [request] = build_synthetic_requests(chunks, docs, n=1, max_document_chars=25)
    user = request.messages[1]["content"]
    assert "[...] xxxxxxxxxxCHUNKyyyyyyyyyy [...]" in user and "Document title: d" in user


def test_window_bounds() -> None:
    assert window_bounds(50, 10, 20, 100) == (0, 50)  # fits: whole document
    assert window_bounds(1000, 500, 600, 300) == (400, 700)  # spare 200 split 100/100
    assert window_bounds(1000, 20, 120, 300) == (0, 300)  # start edge: unused share goes after
    assert window_bounds(1000, 900, 1000, 300) == (700, 1000)  # end edge: unused share goes before
    assert window_bounds(1000, 100, 600, 300) == (100, 400)  # chunk longer than the budget
    assert window_bounds(1000, 500, 601, 300) == (401, 701)  # odd spare: the extra character goes after
    with pytest.raises(ValueError):
        window_bounds(10, 0, 1, 0)


def test_document_window_marks_cuts() -> None:
    text = "abcdefghij"
    assert document_window(text, 4, 6, 20) == text
    assert document_window(text, 4, 6, 4) == "[...] defg [...]"
    assert document_window(text, 0, 2, 4) == "abcd [...]"
    assert document_window(text, 8, 10, 4) == "[...] ghij"


# --- parsing ---


def test_parse_results() -> None:
    chunks, _ = tables()
    results = {
        "synth:lyon_0": LLMResult(
            "synth:lyon_0", value={"queries": [{"query": "a?", "answer": "x"}, {"query": "b?", "answer": "y"}]}
        ),
        "synth:lyon_1": LLMResult("synth:lyon_1", error="rate limited"),
    }
    candidates, failures = parse_synthetic_results(results, chunks)
    assert candidates == [Candidate("lyon_0", "lyon", "a?", "x", 0), Candidate("lyon_0", "lyon", "b?", "y", 1)]
    assert failures == [("lyon_1", "the LLM call failed: rate limited"), ("ghost_0", "no result for this request")]
    malformed = {"synth:lyon_0": LLMResult("synth:lyon_0", value={"queries": [{"query": 3, "answer": "x"}]})}
    _, failures = parse_synthetic_results(malformed, chunks.slice(0, 1))
    assert failures[0][0] == "lyon_0" and "item 0" in failures[0][1]


# --- normalisation and filters ---


def test_normalize_query() -> None:
    assert normalize_query("  Où est   l'Élysée ?! ") == "ou est l elysee"
    assert normalize_query("STRASSE\tund  Straße") == "strasse und strasse"
    assert normalize_query("?!...") == ""


def cand(query: str, chunk_id: str = "c_0", index: int = 0) -> Candidate:
    return Candidate(chunk_id, chunk_id.split("_")[0], query, "", index)


CHUNK = "The quick brown fox jumps over the lazy dog near the river bank every morning at dawn."
CHUNKS_TEXT = {"c_0": CHUNK, "c_1": "Concatenate strings with plus.", "e_0": "Other text."}


def run(candidates: list[Candidate], **kwargs: float) -> tuple[list[str], dict[str, int]]:
    kept, counts = filter_synthetic(candidates, CHUNKS_TEXT, **kwargs)
    assert sum(counts.values()) + len(kept) == len(candidates)
    assert list(counts) == list(FILTERS)
    return [c.query for c in kept], counts


def removed(counts: dict[str, int]) -> dict[str, int]:
    return {name: count for name, count in counts.items() if count}


def test_filter_empty() -> None:
    kept, counts = run([cand(" ?! "), cand("Why?")])
    assert kept == ["Why?"] and removed(counts) == {"empty": 1}


def test_filter_too_long() -> None:
    at_limit = " ".join(["w"] * 5)
    kept, counts = run(
        [cand("x" * 11), cand(at_limit + " more"), cand("y" * 10), cand(at_limit)], max_chars=10, max_words=5
    )
    assert kept == ["y" * 10, at_limit] and removed(counts) == {"too_long": 2}


def test_filter_copies_chunk() -> None:
    substring = cand("Brown fox jumps!")  # normalised, a whole-word substring of the chunk
    shingle = cand("why does the quick brown fox jumps over the lazy dog so often?")  # 9 shared words
    partial_word = cand("cat", "c_1")  # inside "concatenate", not a whole word
    seven_words = cand("does it jump over the lazy dog near the water?")  # shares 7 words only
    kept, counts = run([substring, shingle, partial_word, seven_words])
    assert kept == ["cat", "does it jump over the lazy dog near the water?"]
    assert removed(counts) == {"copies_chunk": 2}


def test_filter_duplicate_across_the_task() -> None:
    kept, counts = run([cand("Where is Lyon?"), cand("where is LYON", "e_0"), cand("Where is Paris?", "e_0")])
    assert kept == ["Where is Lyon?", "Where is Paris?"] and removed(counts) == {"duplicate": 1}


def test_filter_near_duplicate_within_a_document() -> None:
    first = "when was the basilica on the hill of fourviere built"
    close = "When was the basilica on the hill of Fourviere finished?"
    # unigrams+bigrams: 9 + 8 shared, 10 + 9 each -> 17 / 21 = 0.81: kept at 0.85, removed at 0.8
    kept, counts = run([cand(first), cand(close, "c_1"), cand("who designed the basilica")])
    assert kept == [first, close, "who designed the basilica"] and removed(counts) == {}
    kept, counts = run([cand(first), cand(close, "c_1")], near_duplicate_threshold=0.8)  # same document, other chunk
    assert kept == [first] and removed(counts) == {"near_duplicate": 1}
    kept, counts = run([cand(first), cand(close, "e_0")], near_duplicate_threshold=0.8)  # another document
    assert kept == [first, close] and removed(counts) == {}
    with pytest.raises(ValueError):
        filter_synthetic([], {}, near_duplicate_threshold=0)


def test_near_duplicate_prefix_filter_matches_brute_force() -> None:
    rng = random.Random(7)
    words = ["when", "was", "the", "city", "built", "who", "named", "river", "bridge", "old", "town", "why"]
    candidates = [cand(" ".join(rng.choices(words, k=rng.randint(2, 7))), "c_0", i) for i in range(200)]
    for threshold in (0.5, 0.85, 1.0):
        kept, _ = filter_synthetic(candidates, {}, near_duplicate_threshold=threshold)
        assert kept == brute_force_near_duplicates(candidates, threshold)


def brute_force_near_duplicates(candidates: list[Candidate], threshold: float) -> list[Candidate]:
    """Reference: exact-duplicate then all-pairs Jaccard filtering (every candidate in one document)."""
    kept, kept_features, seen = [], [], set()
    for candidate in candidates:
        normalized = normalize_query(candidate.query)
        features = similarity_features(normalized)
        if normalized in seen or any(jaccard(features, other) >= threshold for other in kept_features):
            continue
        seen.add(normalized)
        kept_features.append(features)
        kept.append(candidate)
    return kept


def test_filter_order_counts_first_matching_filter() -> None:
    # copies the chunk and duplicates a kept query: counted once, as copies_chunk (earlier filter)
    kept, counts = run([cand("lazy dog river", "e_0"), cand("the lazy dog")])
    assert kept == ["lazy dog river"] and removed(counts) == {"copies_chunk": 1}


def test_the_near_duplicate_filter_compares_few_pairs_on_ten_thousand_candidates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The prefix filter's work, counted (not timed: a wall-clock bound fails under load): near-duplicate checks
    on 10,000 candidates of 50 documents compare under a twentieth of each document's pairs."""
    candidates = [
        cand(f"question {i} about topic {i % 7} and item {i * 31 % 97}", f"d{i % 50}_0", i) for i in range(10_000)
    ]
    calls = 0
    real = synthetic_queries.jaccard

    def counted(a: frozenset[str], b: frozenset[str]) -> float:
        nonlocal calls
        calls += 1
        return real(a, b)

    monkeypatch.setattr(synthetic_queries, "jaccard", counted)
    kept, counts = filter_synthetic(candidates, {})
    all_pairs = 50 * (200 * 199 // 2)  # 200 candidates per document, every pair compared
    assert calls < all_pairs // 20, f"{calls:,} Jaccard comparisons of {all_pairs:,} pairs"
    assert len(kept) + sum(counts.values()) == len(candidates)


# --- output table ---


def test_table_ids_offsets_and_stats() -> None:
    chunks, docs = tables()
    kept = [
        Candidate("lyon_1", "lyon", " When was the basilica built? ", " 1872 ", 2),  # index 2: ids not renumbered
        Candidate("lyon_1", "lyon", "Which country?", "France", 0),  # in the document, not in this chunk
        Candidate("lyon_0", "lyon", "What is Lyon?", "a city", 1),
        Candidate("lyon_0", "lyon", "Empty answer?", "  ", 3),
    ]
    table = synthetic_queries_table(
        kept, chunks, docs, model="gpt-4o", prompt_version="synthetic_queries@v1:abc", source="llm"
    )
    assert table.schema == SYNTHETIC_QUERIES
    rows = table.to_pylist()
    assert [r["query_id"] for r in rows] == ["synth-lyon_1-2", "synth-lyon_1-0", "synth-lyon_0-1", "synth-lyon_0-3"]
    basilica, country, city, empty = rows
    start = TEXT.index("1872")
    assert (basilica["answer"], basilica["answer_start"], basilica["answer_end"]) == ("1872", start, start + 4)
    assert TEXT[basilica["answer_start"] : basilica["answer_end"]] == "1872"
    assert basilica["query"] == "When was the basilica built?" and basilica["chunk_ids"] == ["lyon_1"]
    assert (country["answer"], country["answer_start"], country["answer_end"]) == ("France", None, None)
    assert (city["answer_start"], city["answer_end"]) == (8, 14)
    assert (empty["answer"], empty["answer_start"]) == (None, None)
    assert {(r["pairing"], r["source"], r["model"], r["prompt_version"]) for r in rows} == {
        ("llm", "llm", "gpt-4o", "synthetic_queries@v1:abc")
    }
    assert synthetic_stats(table) == {"queries": 4, "chunks": 2, "answer_not_in_chunk": 2}
    again = synthetic_queries_table(kept, chunks, docs, model="gpt-4o", prompt_version="p", source="llm")
    assert again.column("query_id").to_pylist() == table.column("query_id").to_pylist()
