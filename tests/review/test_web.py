"""The review web app (``review.web``) through Starlette's TestClient: pages, decisions, security."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markupsafe import escape
from starlette.testclient import TestClient

from curation.review_items import review_item, review_items_table
from review.diff import inline_diff, tokens, word_diff
from review.model import llm_failure_flag
from review.store import ReviewStore
from review.web import create_app, serve

BASE = "http://127.0.0.1:8765"
LOOPBACK = ("127.0.0.1", 50000)
REMOTE = ("10.1.2.3", 5000)
TASK = "lyon"
KIND = "reformulation"

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(document.cookie)>'
PAYLOADS = (SCRIPT, IMG)
EVIL = f"{SCRIPT} and {IMG}"


def _rows() -> list[dict]:
    """Three reformulation items (one flagged, all carrying hostile text) and one pairing item."""
    rows = []
    for index in range(3):
        rows.append(
            review_item(
                TASK,
                KIND,
                f"c{index}",
                "doc1",
                f"The city was founded {index} times. {EVIL}",
                "llm",
                title=f"Lyon {EVIL}",
                original=f"Lyon was founded {index} times. {EVIL}",
                context={
                    "theme": f"Lyon {EVIL}",
                    "chunk_index": index + 1,
                    "previous_chunk": f"Before {EVIL}",
                    "next_chunk": f"After {EVIL}",
                    "source": EVIL,
                },
                flags=[f"leak:Lyon{EVIL}"] if index == 1 else [],
            )
        )
    rows.append(
        review_item(
            TASK,
            "pairing",
            "q1",
            "doc1",
            f"Who founded Lyon? {EVIL}",
            "llm",
            title=f"Lyon {EVIL}",
            context={"query": f"founder {EVIL}", "answer": f"Munatius Plancus {EVIL}"},
        )
    )
    return rows


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "review" / "review.sqlite"
    with ReviewStore(path) as store:
        store.push(review_items_table(_rows()))
    return path


@pytest.fixture
def store(store_path: Path) -> Iterator[ReviewStore]:
    with ReviewStore(store_path) as opened:
        yield opened


def _client(store_path: Path, *, client: tuple[str, int] = LOOPBACK, **kwargs) -> TestClient:
    return TestClient(create_app(store_path, **kwargs), base_url=BASE, client=client)


@pytest.fixture
def web(store_path: Path) -> TestClient:
    """A loopback client with no reviewer name yet."""
    return _client(store_path)


def _csrf(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, "no CSRF field in the page"
    return match.group(1)


def _set_reviewer(web: TestClient, name: str = "alice") -> None:
    csrf = _csrf(web.get("/").text)
    response = web.post("/reviewer", data={"name": name, "next": "/", "csrf_token": csrf}, follow_redirects=False)
    assert response.status_code == 303


def _item_page(web: TestClient, item_id: str, status: str = "all") -> tuple[str, str]:
    """The item page's HTML and its CSRF token."""
    response = web.get(f"/item/{item_id}", params={"status": status})
    assert response.status_code == 200, response.text
    return response.text, _csrf(response.text)


def _decide(web: TestClient, item_id: str, action: str, *, status: str = "all", **extra: str):
    page, csrf = _item_page(web, item_id, status)
    version = re.search(r'name="version" value="(\d+)"', page).group(1)
    form = {"csrf_token": csrf, "version": version, "action": action, "status": status, **extra}
    return web.post(f"/item/{item_id}/decide", data=form, follow_redirects=False)


def _assert_escaped(page: str) -> None:
    for payload in PAYLOADS:
        assert payload not in page
    assert "<img" not in page
    assert page.count("<script") == 1  # only the page's own nonce'd script
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page or "&lt;script&gt;" in page


ITEM = f"{TASK}:{KIND}:c0"


# --------------------------------------------------------------------------------------------
# pages


def test_healthz(web: TestClient) -> None:
    response = web.get("/healthz")
    assert response.status_code == 200
    assert response.text == "ok"


def test_pages_render_with_security_headers(web: TestClient) -> None:
    for url in ("/", f"/queue/{TASK}/{KIND}", f"/queue/{TASK}/{KIND}?status=all", f"/item/{ITEM}", "/healthz"):
        response = web.get(url)
        assert response.status_code == 200, url
        headers = response.headers
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"
        assert headers["x-frame-options"] == "DENY"
        csp = headers["content-security-policy"]
        assert "default-src 'self'" in csp
        if url != "/healthz":
            nonce = re.search(r"script-src 'nonce-([^']+)'", csp).group(1)
            assert f'<script nonce="{nonce}">' in response.text
            assert headers["cache-control"] == "no-store"
    second = web.get("/").headers["content-security-policy"]
    assert second != web.get("/").headers["content-security-policy"]  # a fresh nonce per response


def test_overview_lists_queues_with_progress(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web)
    assert _decide(web, ITEM, "accept").status_code == 303
    page = web.get("/").text
    assert f'href="/queue/{TASK}/{KIND}?status=pending"' in page
    assert f'href="/queue/{TASK}/pairing?status=pending"' in page
    assert "1 / 3 decided" in page
    assert 'class="accepted" style="width: 33.33%"' in page


def test_queue_filters_and_start_link(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web)
    _decide(web, ITEM, "reject")
    pending = web.get(f"/queue/{TASK}/{KIND}").text
    assert f"/item/{TASK}:{KIND}:c1?status=pending" in pending
    assert f"/item/{ITEM}?status=pending" not in pending
    start = re.search(r'id="start-reviewing"[^>]*href="([^"]+)"', pending).group(1)
    assert start == f"/item/{TASK}:{KIND}:c1?status=pending"
    rejected = web.get(f"/queue/{TASK}/{KIND}", params={"status": "rejected"}).text
    assert f"/item/{ITEM}?status=rejected" in rejected
    assert f"/item/{TASK}:{KIND}:c1?status=rejected" not in rejected
    every = web.get(f"/queue/{TASK}/{KIND}", params={"status": "all"}).text
    assert all(f"/item/{TASK}:{KIND}:c{i}?status=all" in every for i in range(3))


def test_item_page_shows_diff_context_and_flags(web: TestClient) -> None:
    page = web.get(f"/item/{TASK}:{KIND}:c1").text
    assert "<del>Lyon</del>" in page
    assert "<ins>The city</ins>" in page
    assert "The rewrite still names the theme (\u2018Lyon &lt;script&gt;" in page  # in words, escaped
    assert "\u2019): \u2018Lyon&lt;script&gt;" in page and "leak:" not in page
    assert "Before &lt;script&gt;" in page and "After &lt;script&gt;" in page
    assert 'id="accept" data-shortcut="a"' in page and 'id="reject" data-shortcut="r"' in page
    assert 'id="edit-text"' in page and 'id="save-edit"' in page
    assert f'href="/item/{TASK}:{KIND}:c0?status=all"' in page  # previous
    assert f'href="/item/{TASK}:{KIND}:c2?status=all"' in page  # next
    pairing = web.get(f"/item/{TASK}:pairing:q1").text
    assert 'id="context-query">founder &lt;script&gt;' in pairing
    assert 'id="context-answer">Munatius Plancus' in pairing


def test_unknown_item_and_queue_are_404(web: TestClient) -> None:
    assert web.get("/item/nope:nope:nope").status_code == 404
    assert web.get("/queue/nope/nope").status_code == 404


def test_hostile_text_is_escaped_on_every_page(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web, f"eve {SCRIPT}")
    assert _decide(web, f"{TASK}:{KIND}:c2", "edit", edited_text=f"edited {EVIL}", note=f"note {EVIL}").status_code
    assert store.get(f"{TASK}:{KIND}:c2").status == "edited"
    assert _decide(web, ITEM, "accept").status_code == 303
    urls = ["/", *(f"/queue/{TASK}/{kind}?status={s}" for kind in (KIND, "pairing") for s in ("pending", "all"))]
    urls += [f"/item/{TASK}:{KIND}:c{i}" for i in range(3)] + [f"/item/{TASK}:pairing:q1"]
    for url in urls:
        page = web.get(url).text
        _assert_escaped(page)
    edited = web.get(f"/item/{TASK}:{KIND}:c2").text
    assert str(escape(f"note {EVIL}")) in edited
    assert "eve &lt;script&gt;" in edited


# --------------------------------------------------------------------------------------------
# decisions


def test_accept_reject_edit_undo_change_the_store(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web, "alice")
    response = _decide(web, ITEM, "accept", status="pending")
    assert response.status_code == 303
    assert response.headers["location"] == f"/item/{TASK}:{KIND}:c1?status=pending"
    item = store.get(ITEM)
    assert (item.status, item.reviewer, item.version) == ("accepted", "alice", 2)

    response = _decide(web, f"{TASK}:{KIND}:c1", "reject", status="pending", note="still names Lyon")
    assert response.headers["location"] == f"/item/{TASK}:{KIND}:c2?status=pending"
    assert store.get(f"{TASK}:{KIND}:c1").status == "rejected"
    assert store.get(f"{TASK}:{KIND}:c1").note == "still names Lyon"

    response = _decide(web, f"{TASK}:{KIND}:c2", "edit", status="pending", edited_text="line one\r\nline two")
    assert response.headers["location"] == f"/queue/{TASK}/{KIND}?status=pending&notice=finished"
    edited = store.get(f"{TASK}:{KIND}:c2")
    assert (edited.status, edited.edited_text, edited.reviewer) == ("edited", "line one\nline two", "alice")
    assert "this queue is done" in web.get(response.headers["location"]).text

    page, csrf = _item_page(web, ITEM)
    undo, fields = re.search(r'<form method="post" action="(/item/[^"]+/undo)"[^>]*>(.*?)</form>', page, re.S).groups()
    assert undo == f"/item/{TASK}:{KIND}:c2/undo"  # the reviewer's last decision, wherever it was
    version = re.search(r'name="version" value="(\d+)"', fields).group(1)
    assert version == str(edited.version)
    response = web.post(undo, data={"csrf_token": csrf, "version": version, "status": "all"}, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == f"/item/{TASK}:{KIND}:c2?status=all&notice=undone"
    restored = store.get(f"{TASK}:{KIND}:c2")
    assert (restored.status, restored.edited_text) == ("pending", None)


def test_next_keeps_the_status_filter(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web)
    _decide(web, f"{TASK}:{KIND}:c1", "accept")
    response = _decide(web, ITEM, "accept", status="pending")
    assert response.headers["location"] == f"/item/{TASK}:{KIND}:c2?status=pending"  # skips the decided c1
    response = _decide(web, ITEM, "reject", status="accepted")
    assert response.headers["location"] == f"/item/{TASK}:{KIND}:c1?status=accepted"


def test_reviewer_name_is_required(web: TestClient, store: ReviewStore) -> None:
    response = _decide(web, ITEM, "accept")
    assert response.status_code == 400
    assert "Set your reviewer name" in response.text
    assert store.get(ITEM).status == "pending"
    csrf = _csrf(web.get("/").text)
    for name in ("", "   ", "a\x00b", "x" * 65):
        response = web.post("/reviewer", data={"name": name, "next": "/", "csrf_token": csrf})
        assert response.status_code == 400
    assert 'id="reviewer-input"' in web.get("/").text


def test_reviewer_name_is_remembered_and_changeable(web: TestClient) -> None:
    _set_reviewer(web, "Zoé Martin")
    assert '<strong id="reviewer-name">Zoé Martin</strong>' in web.get("/").text
    cookie = web.cookies.get("conteb_review_reviewer")
    assert cookie and "Zo" in cookie
    _set_reviewer(web, "bob")
    assert '<strong id="reviewer-name">bob</strong>' in web.get("/").text


def test_reviewer_next_cannot_leave_the_site(web: TestClient) -> None:
    csrf = _csrf(web.get("/").text)
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        response = web.post(
            "/reviewer", data={"name": "al", "next": target, "csrf_token": csrf}, follow_redirects=False
        )
        assert response.headers["location"] == "/"


def test_stale_version_is_409_and_changes_nothing(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web, "bob")
    _, csrf = _item_page(web, ITEM)
    store.decide(ITEM, "reject", "alice", expected_version=1)
    form = {"csrf_token": csrf, "version": "1", "action": "accept", "status": "all"}
    response = web.post(f"/item/{ITEM}/decide", data=form)
    assert response.status_code == 409
    assert "changed by alice (reject) at" in response.text
    assert "reloaded" in response.text
    assert 'name="version" value="2"' in response.text  # the fresh item
    item = store.get(ITEM)
    assert (item.status, item.reviewer, item.version) == ("rejected", "alice", 2)
    undo = web.post(f"/item/{ITEM}/undo", data={"csrf_token": csrf, "version": "1", "status": "all"})
    assert undo.status_code == 409
    assert store.get(ITEM).status == "rejected"


def test_invalid_decision_is_400(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web)
    assert _decide(web, ITEM, "edit", edited_text="   ").status_code == 400
    assert _decide(web, ITEM, "delete").status_code == 400
    _, csrf = _item_page(web, ITEM)
    response = web.post(f"/item/{ITEM}/undo", data={"csrf_token": csrf, "version": "1"})
    assert response.status_code == 400  # nothing to undo
    assert store.get(ITEM).version == 1


def test_get_cannot_change_state(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web)
    assert web.get(f"/item/{ITEM}/decide", params={"action": "accept", "version": "1"}).status_code == 404
    assert web.get("/reviewer", params={"name": "x"}).status_code == 405
    assert store.get(ITEM).status == "pending"


# --------------------------------------------------------------------------------------------
# CSRF and cross-site requests


def test_post_without_csrf_token_is_403(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web)
    _, csrf = _item_page(web, ITEM)
    base = {"version": "1", "action": "accept"}
    assert web.post(f"/item/{ITEM}/decide", data=base).status_code == 403
    assert web.post(f"/item/{ITEM}/decide", data={**base, "csrf_token": csrf[:-2] + "xx"}).status_code == 403
    web.cookies.delete("conteb_review_csrf")
    assert web.post(f"/item/{ITEM}/decide", data={**base, "csrf_token": csrf}).status_code == 403
    assert store.get(ITEM).status == "pending"


def test_foreign_origin_or_referer_is_403(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web)
    _, csrf = _item_page(web, ITEM)
    form = {"csrf_token": csrf, "version": "1", "action": "accept"}
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1:9999"},
        {"Referer": "https://evil.example/page"},
    ):
        response = web.post(f"/item/{ITEM}/decide", data=form, headers=headers)
        assert response.status_code == 403, headers
    assert store.get(ITEM).status == "pending"
    response = web.post(f"/item/{ITEM}/decide", data=form, headers={"Origin": BASE}, follow_redirects=False)
    assert response.status_code == 303
    assert store.get(ITEM).status == "accepted"


def test_review_base_url_is_an_accepted_origin(store_path: Path, store: ReviewStore) -> None:
    web = _client(store_path, review_base_url="https://review.example.org/")
    _set_reviewer(web)
    _, csrf = _item_page(web, ITEM)
    form = {"csrf_token": csrf, "version": "1", "action": "accept"}
    headers = {"Origin": "https://review.example.org"}
    assert web.post(f"/item/{ITEM}/decide", data=form, headers=headers, follow_redirects=False).status_code == 303
    proxied = TestClient(web.app, base_url="https://review.example.org", client=LOOPBACK)
    assert proxied.get("/").status_code == 200  # its Host is trusted like a loopback name


def test_cookies_are_httponly_and_samesite_strict(web: TestClient) -> None:
    response = web.get("/")
    assert "HttpOnly" in response.headers["set-cookie"]
    assert "SameSite=Strict" in response.headers["set-cookie"]
    csrf = _csrf(response.text)
    response = web.post("/reviewer", data={"name": "al", "next": "/", "csrf_token": csrf}, follow_redirects=False)
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("conteb_review_reviewer=al;")
    assert "SameSite=Strict" in cookie and "HttpOnly" in cookie


# --------------------------------------------------------------------------------------------
# access control


def test_token_required_from_non_loopback_clients(store_path: Path) -> None:
    remote = _client(store_path, client=REMOTE, token="s3cret-token")
    response = remote.get("/")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert remote.get("/", params={"token": "wrong"}).status_code == 401
    assert remote.get(f"/item/{ITEM}", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert remote.get("/healthz").status_code == 200

    response = remote.get("/", params={"token": "s3cret-token"})
    assert response.status_code == 200
    cookie = [value for value in response.headers.get_list("set-cookie") if value.startswith("conteb_review_token=")]
    assert cookie and "HttpOnly" in cookie[0] and "SameSite=Strict" in cookie[0]
    assert remote.get(f"/item/{ITEM}").status_code == 200  # the cookie now

    bearer = _client(store_path, client=REMOTE, token="s3cret-token")
    assert bearer.get("/", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200


def test_token_client_can_decide(store_path: Path, store: ReviewStore) -> None:
    remote = _client(store_path, client=REMOTE, token="s3cret-token")
    remote.get("/", params={"token": "s3cret-token"})
    _set_reviewer(remote, "remote-rita")
    assert _decide(remote, ITEM, "accept").status_code == 303
    assert store.get(ITEM).reviewer == "remote-rita"


def test_post_without_token_is_401_and_changes_nothing(store_path: Path, store: ReviewStore) -> None:
    remote = _client(store_path, client=REMOTE, token="s3cret-token")
    form = {"csrf_token": "x", "version": "1", "action": "accept"}
    assert remote.post(f"/item/{ITEM}/decide", data=form).status_code == 401
    assert store.get(ITEM).status == "pending"


def test_loopback_needs_no_token(store_path: Path) -> None:
    local = _client(store_path, token="s3cret-token")
    assert local.get("/").status_code == 200
    assert local.get(f"/item/{ITEM}").status_code == 200


def test_non_loopback_without_configured_token_is_403(store_path: Path) -> None:
    remote = _client(store_path, client=REMOTE)
    assert remote.get("/").status_code == 403
    assert remote.get("/", params={"token": ""}).status_code == 403


def test_dns_rebinding_host_is_refused(store_path: Path) -> None:
    rebound = TestClient(create_app(store_path), base_url="http://evil.example:8765", client=LOOPBACK)
    response = rebound.get("/")
    assert response.status_code == 403
    assert "not a loopback name" in response.text
    for base in ("http://localhost:8765", "http://[::1]:8765", "http://127.0.0.2"):
        assert TestClient(create_app(store_path), base_url=base, client=LOOPBACK).get("/").status_code == 200


def test_serve_refuses_a_public_host_without_token(store_path: Path) -> None:
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.org"):
        with pytest.raises(ValueError, match="without a token"):
            serve(store_path, host=host, port=1)


# --------------------------------------------------------------------------------------------
# review.diff


def test_word_diff_marks_and_escapes() -> None:
    diff = word_diff("In 1978, Lyon hosted <b>it</b>.", "In 1978, the city hosted <b>it</b>.")
    assert str(diff.original) == "In 1978, <del>Lyon</del> hosted &lt;b&gt;it&lt;/b&gt;."
    assert str(diff.proposed) == "In 1978, <ins>the city</ins> hosted &lt;b&gt;it&lt;/b&gt;."
    assert diff.changes == 1
    assert str(inline_diff("a Lyon b", "a city b")) == "a <del>Lyon</del><ins>city</ins> b"
    new = word_diff(None, SCRIPT)
    assert str(new.original) == "" and str(new.proposed) == html.escape(SCRIPT)


def _strip(markup: str, tag: str) -> str:
    return html.unescape(re.sub(rf"</?{tag}>", "", markup))


@given(st.text(max_size=80), st.text(max_size=80))
def test_word_diff_sides_give_back_the_texts(original: str, proposed: str) -> None:
    assert "".join(tokens(original)) == original
    diff = word_diff(original, proposed)
    assert _strip(str(diff.original), "del") == original
    assert _strip(str(diff.proposed), "ins") == proposed
    assert "<" not in re.sub(r"</?(del|ins)>", "", str(diff.original) + str(diff.proposed))


def test_an_item_that_proposes_nothing_shows_its_reason_and_refuses_accept(web: TestClient, store: ReviewStore) -> None:
    reason = llm_failure_flag("the LLM wrote no query for this chunk (write one, or reject): HTTP 500")
    store.push([review_item(TASK, "synthetic_query", "synth-c9-0", "d", "", "none", flags=[reason])])
    item_id = f"{TASK}:synthetic_query:synth-c9-0"
    _set_reviewer(web)
    page, _ = _item_page(web, item_id)
    assert "the LLM wrote no query for this chunk" in page
    refused = _decide(web, item_id, "accept")
    assert refused.status_code == 400 and "proposes nothing" in refused.text
    assert store.get(item_id).status == "pending"
    assert _decide(web, item_id, "edit", edited_text="Which chunk is this?").status_code == 303
    assert store.get(item_id).status == "edited"
