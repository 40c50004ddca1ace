from curation.sources.sample import load_sample
from tests.conftest import SAMPLE_DIR


def test_bundled_sample_is_well_formed() -> None:
    result = load_sample(SAMPLE_DIR)
    assert 8 <= len(result.documents) <= 12
    assert all(3000 <= len(doc.text) <= 8000 for doc in result.documents)
    assert len(result.queries) >= 40
    assert result.quarantine == []
    texts = {doc.doc_id: doc.text for doc in result.documents}
    for query in result.queries:
        [(answer, start)] = query.answers
        assert texts[query.doc_id][start : start + len(answer)] == answer, query.query_id
    later = sum(1 for q in result.queries if q.answers[0][1] >= 1000)
    assert later / len(result.queries) >= 0.6  # most answers sit in chunks that do not name the subject
