"""The ``evaluation:`` config block (``evaluation.config``): default systems, window options, chunk-size defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evaluation.config import DenseSystem, EvaluationConfig, LateInteractionSystem, default_systems, template_fields


def test_default_systems_include_title_prefix_and_anchored_late_chunking():
    systems = {s.name: s for s in default_systems()}
    anchored, title = systems["late-chunking-anchored"], systems["title-prefix"]
    assert isinstance(anchored, DenseSystem) and anchored.context == "late"
    assert anchored.window_policy == "anchored" and anchored.anchor_share == 0.4
    assert systems["late-chunking"].window_policy == "plain"
    assert isinstance(title, DenseSystem) and title.context == "title" and title.title_template == "{title}\n\n{chunk}"
    config = EvaluationConfig()
    assert {"title-prefix", "late-chunking-anchored"} <= set(config.chunk_sizes.systems)
    assert ("late-chunking-anchored", "late-chunking") in config.significance.comparisons
    assert ("late-chunking-anchored", "independent") in config.significance.comparisons


def test_default_systems_include_the_cheap_baselines_and_headers_with_windows():
    systems = {s.name: s for s in default_systems()}
    assert systems["bm25-title"].kind == "bm25" and systems["bm25-title"].context == "title"
    assert systems["hybrid"].kind == "hybrid" and systems["hybrid"].systems == ("bm25", "independent")
    assert systems["hybrid"].k == 60 and systems["hybrid-title"].systems == ("bm25-title", "title-prefix")
    late, anchored = systems["late-chunking-title"], systems["late-chunking-anchored-title"]
    assert (late.context, late.header, late.window_policy) == ("late", "title", "plain")
    assert (anchored.context, anchored.header, anchored.window_policy) == ("late", "title", "anchored")
    names = list(systems)
    assert all(names.index(h) > names.index(c) for h in ("hybrid", "hybrid-title") for c in systems[h].systems)
    config = EvaluationConfig()
    new = {"bm25-title", "hybrid", "hybrid-title", "late-chunking-title", "late-chunking-anchored-title"}
    assert new <= set(config.chunk_sizes.systems)
    assert {type(c.name) for s in config.systems for c in config.components(s)} == {str}
    assert {type(n) for n in systems["hybrid"].systems} == {str}
    assert [c.name for c in config.with_components([config.system("hybrid"), config.system("bm25")])] == [
        "hybrid", "bm25", "independent",
    ]  # fmt: skip


def test_window_options_are_validated():
    system = LateInteractionSystem(kind="late_interaction", name="li", window_policy="anchored", anchor_share=0.25)
    assert system.window_policy == "anchored" and system.anchor_share == 0.25
    for share in (0.0, 1.0, 1.5):
        with pytest.raises(ValidationError, match="anchor_share"):
            DenseSystem(kind="dense", name="d", context="late", anchor_share=share)
    with pytest.raises(ValidationError, match="window_policy"):
        DenseSystem(kind="dense", name="d", context="late", window_policy="sliding")


def test_default_chunk_size_systems_follow_the_declared_systems():
    systems = [{"name": "bm25", "kind": "bm25"}, {"name": "late-chunking", "kind": "dense", "context": "late"}]
    config = EvaluationConfig.model_validate({"systems": systems})
    assert config.chunk_sizes.systems == ("bm25", "late-chunking")  # defaults that are declared, in default order
    config = EvaluationConfig.model_validate({"systems": systems, "chunk_sizes": {"sizes": [500]}})
    assert config.chunk_sizes.systems == ("bm25", "late-chunking") and config.chunk_sizes.sizes == (500,)
    with pytest.raises(ValidationError, match=r"unknown system\(s\) \['title-prefix'\]"):
        EvaluationConfig.model_validate({"systems": systems, "chunk_sizes": {"systems": ["bm25", "title-prefix"]}})


def test_default_names_are_plain_strings():
    """The defaults spell SystemName members; the validated config holds plain str (yaml/JSON dumps, reprs)."""
    config = EvaluationConfig()
    names = [s.name for s in config.systems] + list(config.chunk_sizes.systems)
    names += [name for pair in config.significance.comparisons for name in pair]
    assert names and {type(name) for name in names} == {str}
    assert type(config.significance.metric) is str and config.significance.metric == "ndcg@10"
    custom = EvaluationConfig(systems=[{"kind": "bm25", "name": "bm25"}, {"kind": "dense", "name": "independent"}])
    assert custom.chunk_sizes.systems == ("bm25", "independent")
    assert {type(name) for name in custom.chunk_sizes.systems} == {str}


def test_template_fields():
    assert template_fields("{title}\n\n{chunk}") == {"title", "chunk"}
    assert template_fields("{} and {chunk}") == {"", "chunk"}
    with pytest.raises(ValueError):
        template_fields("{chunk")


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{title:>300000000}{chunk}", "{title:>300000000} has width or precision 300,000,000, above 1,000"),
        ("{title:.5000}{chunk}", "{title:.5000} has width or precision 5,000, above 1,000"),
        ("{title:{chunk}}{chunk}", "{title:{chunk}} nests a field in its format spec"),
        ("{title:d} {chunk}", "cannot be filled: ValueError: Unknown format code 'd'"),
        ("{title.upper}{chunk}", "may use only ['chunk', 'title']; unknown: ['title.upper']"),
        ("{title[0]}{chunk}", "may use only ['chunk', 'title']; unknown: ['title[0]']"),
    ],
)
def test_a_title_template_must_expand_within_bounds(template: str, why: str) -> None:
    # issue 33: '{title:>300000000}{chunk}' passed validate and ran out of memory at evaluation
    with pytest.raises(ValidationError) as raised:
        EvaluationConfig.model_validate(
            {"systems": [{"name": "t", "kind": "bm25", "context": "title", "title_template": template}]}
        )
    assert why in str(raised.value)
    bounded = "{title:>40.1000}: {chunk!r:^20}"  # widths and precisions up to 1,000 stay allowed
    system = EvaluationConfig.model_validate(
        {"systems": [{"name": "t", "kind": "bm25", "context": "title", "title_template": bounded}]}
    )
    assert system.systems[0].title_template == bounded
