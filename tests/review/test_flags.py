"""Review flags in words (:func:`review.flags.flag_notes`) and the queue's changed words
(:func:`review.diff.changed_words`): pure functions, tested directly."""

from __future__ import annotations

from review.diff import changed_words
from review.flags import Question, flag_notes, leak_flag, lost_answer_flag, lost_answer_queries
from review.model import llm_failure_flag

OSTHERM = {
    "theme": "Ostherm",
    "lost_answers": [
        {
            "query_id": "ostherm-q5",
            "query": "What is the best-known museum of Ostherm?",
            "answer": "Ostherm Glass Museum",
        }
    ],
}


def test_a_lost_answer_names_its_query_and_what_to_do() -> None:
    [note] = flag_notes([lost_answer_flag("Ostherm Glass Museum")], OSTHERM, "mask")
    assert note.kind == "lost_answer"
    assert note.sentence == "The mask removes the answer of ostherm-q5: \u2018Ostherm Glass Museum\u2019."
    assert note.questions == (Question("ostherm-q5", "What is the best-known museum of Ostherm?"),)
    assert note.action.startswith("Edit to keep the answer") and "reject" in note.action
    [rewrite] = flag_notes(["lost_answer:Ostherm Glass Museum"], OSTHERM, "llm")
    assert rewrite.sentence.startswith("The rewrite removes the answer of ostherm-q5")


def test_an_old_lost_answer_flag_without_its_queries_still_reads_in_words() -> None:
    """Items pushed before the context listed the queries: the answer, no id, no raw code."""
    [note] = flag_notes(["lost_answer:1971"], {"theme": "Lyon"}, "mask")
    assert note.sentence == "The mask removes the answer of a query paired with this chunk: \u20181971\u2019."
    assert note.questions == () and "lost_answer" not in note.sentence


def test_an_answer_two_queries_share_names_both_and_a_colon_in_the_answer_is_kept() -> None:
    context = {
        "lost_answers": [
            {"query_id": "q1", "query": "When?", "answer": "10:30"},
            {"query_id": "q2", "query": "At what time?", "answer": "10:30"},
            {"query_id": "q3", "query": "Other?", "answer": "noon"},
        ]
    }
    [note] = flag_notes(["lost_answer:10:30"], context, "llm")
    assert note.sentence == "The rewrite removes the answer of q1 and q2: \u201810:30\u2019."
    assert [question.query_id for question in note.questions] == ["q1", "q2"]


def test_every_flag_kind_curation_writes_reads_in_words() -> None:
    flags = [
        leak_flag("Lyon's"),
        llm_failure_flag("the LLM call failed after 5 tries: InternalServerError"),
        "answer_not_in_chunk",
        "disagrees_with_span",
    ]
    leak, failed, not_in_chunk, disagrees = flag_notes(flags, {"theme": "Lyon", "answer": "in 1978"}, "llm", "lyon_3")
    assert leak.sentence == "The rewrite still names the theme (\u2018Lyon\u2019): \u2018Lyon's\u2019."
    assert (
        failed.sentence
        == "The LLM's answer failed or was refused: the LLM call failed after 5 tries: InternalServerError."
    )
    assert (
        not_in_chunk.sentence == "The LLM's answer (\u2018in 1978\u2019) is not a passage of the chunk, word for word."
    )
    assert disagrees.sentence == "The LLM chose another gold chunk than the answer span's (lyon_3)."
    for note in (leak, failed, not_in_chunk, disagrees):
        assert note.action and note.code in flags and not note.sentence.startswith(note.code)
    [same] = flag_notes(["leak:Lyon"], {"theme": "Lyon"}, "mask")
    assert same.sentence == "The mask still names the theme: \u2018Lyon\u2019."


def test_an_unknown_flag_reads_as_itself() -> None:
    [note] = flag_notes(["low_confidence"])
    assert (note.kind, note.sentence, note.action) == ("low_confidence", "low_confidence", "")


def test_lost_answer_queries_keeps_the_queries_of_lost_answers_in_order() -> None:
    rows = [
        {"query_id": "a", "query": "A?", "answer": "x", "chunk_id": "c"},
        {"query_id": "b", "query": "B?", "answer": "y", "chunk_id": "c"},
        {"query_id": "c", "query": "C?", "answer": "x", "chunk_id": "c"},
    ]
    assert lost_answer_queries(["x"], rows) == [
        {"query_id": "a", "query": "A?", "answer": "x"},
        {"query_id": "c", "query": "C?", "answer": "x"},
    ]


def test_changed_words_shows_each_change_with_a_few_words_around_it() -> None:
    original = (
        "The city's university was founded in 1991 as a school of medicine and today has about 8,000 students. "
        "Its best-known museum is the Ostherm Glass Museum, housed in a former royal bathhouse."
    )
    proposed = original.replace("Ostherm Glass Museum", "the subject Glass Museum").replace("1991", "1990")
    shown = str(changed_words(original, proposed, words=3))
    assert "<del>1991</del><ins>1990</ins>" in shown
    assert "<del>Ostherm</del><ins>the subject</ins>" in shown
    assert shown.startswith("…") and shown.endswith("…") and " … " in shown  # unchanged stretches elided
    assert "school of medicine and today" not in shown
    assert str(changed_words("same text", "same text")) == ""
    assert str(changed_words(None, "a <b>query</b>")) == "<ins>a &lt;b&gt;query&lt;/b&gt;</ins>"
    long = str(changed_words("Short.", "A long sentence. " * 40, limit=50))
    assert (
        long
        == "<del>Short</del><ins>A long sentence</ins>.<ins> A long sentence. A long sentence. A long sentence…</ins>"
    )
    assert str(changed_words("<i>x</i> y", "<i>x</i> z")) == "&lt;i&gt;x&lt;/i&gt; <del>y</del><ins>z</ins>"
