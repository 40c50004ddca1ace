"""Issue 11 (hardening) for the review web app: bad input, the first hour of a new reviewer, big queues, logs."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

from curation.review_items import review_item, review_items_table
from review.store import ReviewStore
from review.web import serve
from review.web_security import RedactTokenFilter, _redact_token, token_pattern
from review.web_urls import page_links
from tests.review.test_web import _client, _csrf, _decide, _item_page, _set_reviewer

TASK, KIND = "big", "reformulation"
FLAGGED = {3, 17, 41, 58}
N_ITEMS = 60


def _iid(index: int) -> str:
    return f"{TASK}:{KIND}:c{index:02d}"


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A queue of 60 items (4 flagged) and a small second queue."""
    rows = [
        review_item(TASK, KIND, f"c{i:02d}", "doc", f"Proposal number {i}. " * 12, "llm", original=f"Original {i}.",
                    flags=["leak:Doc"] if i in FLAGGED else [])
        for i in range(N_ITEMS)
    ]  # fmt: skip
    rows.append(review_item(TASK, "pairing", "q0", "doc", "Who?", "llm"))
    path = tmp_path / "review.sqlite"
    with ReviewStore(path) as store:
        store.push(review_items_table(rows))
    return path


@pytest.fixture
def store(store_path: Path) -> Iterator[ReviewStore]:
    with ReviewStore(store_path) as opened:
        yield opened


@pytest.fixture
def web(store_path: Path) -> TestClient:
    return _client(store_path)


def _row_ids(page: str) -> list[str]:
    return re.findall(r'<tr class="[^"]*" data-item-id="([^"]+)"', page)


def _form_fields(page: str, action: str) -> dict[str, str]:
    form = re.search(rf'<form method="post" action="{re.escape(action)}"[^>]*>(.*?)</form>', page, re.S)
    assert form, f"no form posting to {action}"
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form.group(1)))


# --------------------------------------------------------------------------------------------
# item 2: bad query parameters and names, NUL text, undo ownership


def test_huge_offset_is_not_a_server_error(web: TestClient) -> None:
    response = web.get(f"/queue/{TASK}/{KIND}", params={"offset": str(10**30), "status": "all"})
    assert response.status_code == 200
    assert _row_ids(response.text)[-1] == _iid(N_ITEMS - 1)  # clamped to the last page
    for bad in ("abc", "-5", "1e3"):
        response = web.get(f"/queue/{TASK}/{KIND}", params={"offset": bad})
        assert response.status_code == 400, bad
        assert "offset" in response.text


def _name_refused(web: TestClient, name: str) -> str:
    """The 400 page answering ``name`` in the reviewer form (no cookie set)."""
    csrf = _csrf(web.get("/").text)
    response = web.post("/reviewer", data={"name": name, "next": "/", "csrf_token": csrf})
    assert response.status_code == 400
    assert web.cookies.get("conteb_review_reviewer") is None
    return response.text


@pytest.mark.parametrize("name", ["eve\x1b[31m", "eve\nmallory", "eve\u202e"])
def test_reviewer_name_with_control_characters_is_400(web: TestClient, name: str) -> None:
    assert "control characters" in _name_refused(web, name)


@pytest.mark.parametrize("name", ["eve\u2028mallory", "eve\u2029mallory", "eve\u0085x", "e\ufeffve"])
def test_reviewer_name_with_line_separators_is_400(web: TestClient, name: str) -> None:
    assert "control characters or line separators" in _name_refused(web, name)


@pytest.mark.parametrize(
    "name", ["auto", "AUTO", " Auto ", "\uff41\uff55\uff54\uff4f", "auto:mask", "auto (automatic)"]
)
def test_reviewer_cannot_take_the_automatic_reviewers_name(web: TestClient, store: ReviewStore, name: str) -> None:
    assert "reserved for the pipeline" in _name_refused(web, name)
    web.cookies.set("conteb_review_reviewer", "auto")  # a cookie set by hand names nobody
    refused = _decide(web, _iid(0), "accept")
    assert refused.status_code == 400 and "Set your reviewer name" in refused.text
    bulk = f"/queue/{TASK}/{KIND}/accept-unflagged"
    assert web.post(bulk, data=_form_fields(web.get(bulk).text, bulk)).status_code == 400
    assert store.count(task=TASK, kind=KIND, status="pending") == N_ITEMS
    _set_reviewer(web, "automaton")  # a name that only starts like it is a person's
    assert _decide(web, _iid(0), "accept").status_code == 303


def test_nul_in_edited_text_is_400_and_not_stored(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web)
    response = _decide(web, _iid(0), "edit", edited_text="fixed\x00text")
    assert response.status_code == 400
    assert "NUL" in response.text
    assert store.get(_iid(0)).status == "pending"


def test_undo_of_another_reviewers_decision_is_refused(web: TestClient, store: ReviewStore) -> None:
    store.decide(_iid(0), "accept", "alice", 1)
    _set_reviewer(web, "bob")
    _, csrf = _item_page(web, _iid(0))
    response = web.post(f"/item/{_iid(0)}/undo", data={"csrf_token": csrf, "version": "2", "status": "all"})
    assert response.status_code == 400
    assert "made by &#39;alice&#39;" in response.text or "made by 'alice'" in response.text
    assert store.get(_iid(0)).status == "accepted"


def _access_log(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], secret: str, *paths: str
) -> tuple[list[int], list[str]]:
    """Serve the queue as ``conteb review serve --token secret`` does, GET each of ``paths``: the status codes
    and uvicorn's access-log lines."""
    captured: dict[str, Any] = {}
    run = uvicorn.Server.run
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets: captured.update(server=server, sockets=sockets))
    serve(store_path, host="127.0.0.1", port=0, token=secret)  # binds a free port; the server runs below
    server, (sock,) = captured["server"], captured["sockets"]
    port = sock.getsockname()[1]
    thread = threading.Thread(target=run, args=(server,), kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        codes = [httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10).status_code for path in paths]
        time.sleep(0.2)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    out, err = capfd.readouterr()
    access = [line for line in (out + err).splitlines() if '"GET /' in line]
    assert access, out + err
    return codes, access


def test_access_log_does_not_show_the_token(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    secret = "s3cret-token-value"
    codes, access = _access_log(store_path, monkeypatch, capfd, secret, f"/?token={secret}&status=all")
    assert codes == [200]
    assert all(secret not in line for line in access), access
    assert any("status=all" in line for line in access)


def test_percent_encoded_token_is_read_decoded_and_never_logged(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    secret = "s3cret-token-value"
    encoded = "%73%33cret-t%6Fken-value"  # the same secret, some characters percent-encoded
    paths = [f"/?tok%65n={secret}&status=all", f"/?%74oken={encoded}", f"/?TOKEN={secret}", f"/x/{secret}"]
    codes, access = _access_log(store_path, monkeypatch, capfd, secret, *paths)
    assert codes[:3] == [200, 200, 200]  # the decoded query is what authenticates
    assert len(access) == len(paths)
    for line in access:
        assert "cret-t" not in line and "%33cret" not in line.lower(), line
    assert "tok%65n=REDACTED&status=all" in access[0] and "/x/REDACTED" in access[3]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('"GET /?tok%65n=guess&a=1 HTTP/1.1"', '"GET /?tok%65n=REDACTED&a=1 HTTP/1.1"'),
        ('"GET /?a=1&%54OKEN=guess HTTP/1.1"', '"GET /?a=1&%54OKEN=REDACTED HTTP/1.1"'),
        ('"GET /?Token=guess HTTP/1.1"', '"GET /?Token=REDACTED HTTP/1.1"'),
        ("referer: https://x/?a=b&to%6Ben=guess#top", "referer: https://x/?a=b&to%6Ben=REDACTED#top"),
        ("GET /p?tokens=kept&xtoken=kept", "GET /p?tokens=kept&xtoken=kept"),
        ("GET /Open-Sesame-1234567/", "GET /REDACTED/"),
        ("GET /?q=%4fpen%2d%53esame-1234567", "GET /?q=REDACTED"),
        ("referer: http://h/open-sesame-1234567", "referer: http://h/open-sesame-1234567"),  # case matters
    ],
)
def test_redaction_reads_decoded_names_and_hides_the_token_anywhere(line: str, expected: str) -> None:
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, "%s", (line,), None)
    RedactTokenFilter(token="Open-Sesame-1234567").filter(record)
    assert record.getMessage() == expected


def test_redaction_of_a_token_with_a_space_matches_plus() -> None:
    assert _redact_token("/?q=a+b%2Bc", token_pattern("a b+c")) == "/?q=REDACTED"


# --------------------------------------------------------------------------------------------
# item 3: the first hour


def test_accept_before_naming_oneself_asks_for_the_name_then_returns_to_the_item(
    web: TestClient, store: ReviewStore
) -> None:
    response = _decide(web, _iid(0), "accept", status="pending")
    assert response.status_code == 400
    assert "Set your reviewer name" in response.text
    fields = _form_fields(response.text, "/reviewer")
    assert fields["next"] == f"/item/{_iid(0)}?status=pending"
    form = {"name": "ana", "next": fields["next"], "csrf_token": fields["csrf_token"]}
    saved = web.post("/reviewer", data=form, follow_redirects=False)
    assert saved.status_code == 303
    back = web.get(saved.headers["location"])
    assert back.status_code == 200  # the item again, not a 404 on .../decide
    assert 'id="reviewer-name">ana<' in back.text and f'value="{store.get(_iid(0)).version}"' in back.text
    assert _decide(web, _iid(0), "accept", status="pending").status_code == 303


def test_item_page_without_a_name_sends_shortcuts_to_the_name_box(web: TestClient) -> None:
    page, _ = _item_page(web, _iid(0))
    assert 'id="reviewer-input"' in page
    assert 'data-needs-name="true"' in page  # the script focuses the name box instead of posting


def test_queue_page_is_paginated_flagged_first(web: TestClient) -> None:
    page = web.get(f"/queue/{TASK}/{KIND}").text
    ids = _row_ids(page)
    assert len(ids) == 25
    assert ids[:4] == [_iid(i) for i in sorted(FLAGGED)]  # flagged first
    assert ids[4:] == [_iid(i) for i in range(N_ITEMS) if i not in FLAGGED][:21]
    assert 'aria-current="page">1<' in page
    assert f'href="/queue/{TASK}/{KIND}?status=pending&amp;offset=25&amp;size=25">2<' in page
    assert f'href="/queue/{TASK}/{KIND}?status=pending&amp;offset=50&amp;size=25">3<' in page
    third = web.get(f"/queue/{TASK}/{KIND}", params={"status": "pending", "offset": 50, "size": 25}).text
    assert len(_row_ids(third)) == 10 and "Items 51–60 of 60" in third
    big = web.get(f"/queue/{TASK}/{KIND}", params={"size": 100}).text
    assert len(_row_ids(big)) == 60
    assert web.get(f"/queue/{TASK}/{KIND}", params={"size": 7}).status_code == 400
    # the changed words, each change cut to a few lines (the item page shows it whole)
    assert "<del>Original</del><ins>Proposal number</ins> 0.<ins> Proposal number 0. Proposal number 0." in page


def test_page_links_leave_out_the_middle_of_long_queues() -> None:
    links = page_links(total=1000, offset=500, size=25)
    numbers = [None if link is None else link["number"] for link in links]
    assert numbers == [1, None, 19, 20, 21, 22, 23, None, 40]
    assert [link["offset"] for link in links if link and link["current"]] == [500]
    assert page_links(total=0, offset=0, size=25) == [{"number": 1, "offset": 0, "current": True}]


def test_item_page_shows_its_position(web: TestClient) -> None:
    page, _ = _item_page(web, _iid(4), status="pending")
    assert re.search(r'id="item-position">item 5 of 60<', page)


def test_accept_all_unflagged_with_confirmation(web: TestClient, store: ReviewStore) -> None:
    _set_reviewer(web, "ana")
    queue = web.get(f"/queue/{TASK}/{KIND}").text
    link = re.search(r'id="accept-unflagged"[^>]*href="([^"]+)"', queue)
    assert link and "56" in queue[link.start() : link.start() + 300]
    confirm = web.get(link.group(1))
    assert confirm.status_code == 200
    assert "Accept 56 unflagged pending items" in confirm.text and "ana" in confirm.text
    assert store.count(task=TASK, kind=KIND, status="pending") == N_ITEMS  # showing it changed nothing
    fields = _form_fields(confirm.text, link.group(1))
    assert set(fields) >= {"csrf_token", "revision"}

    assert web.post(link.group(1), data={**fields, "csrf_token": "wrong"}).status_code == 403
    stale = {**fields, "revision": str(int(fields["revision"]) - 1)}
    assert web.post(link.group(1), data=stale).status_code == 409
    assert store.count(task=TASK, kind=KIND, status="pending") == N_ITEMS

    done = web.post(link.group(1), data=fields, follow_redirects=False)
    assert done.status_code == 303
    assert store.count(task=TASK, kind=KIND, status="accepted") == 56
    assert {item.item_id for item in store.items(task=TASK, kind=KIND, status="pending")} == {_iid(i) for i in FLAGGED}
    accepts = [entry for entry in store.audit() if entry.action == "accept"]
    assert len(accepts) == 56 and {entry.reviewer for entry in accepts} == {"ana"}
    assert store.get(f"{TASK}:pairing:q0").status == "pending"  # another queue
    assert "Every unflagged pending item was accepted" in web.get(done.headers["location"]).text


def test_accept_all_unflagged_needs_a_name(web: TestClient, store: ReviewStore) -> None:
    url = f"/queue/{TASK}/{KIND}/accept-unflagged"
    confirm = web.get(url)
    assert confirm.status_code == 200 and 'id="reviewer-input"' in confirm.text
    fields = _form_fields(confirm.text, url)
    response = web.post(url, data=fields)
    assert response.status_code == 400 and "reviewer name" in response.text
    assert store.count(task=TASK, kind=KIND, status="pending") == N_ITEMS


def test_unknown_queue_for_accept_all_is_404(web: TestClient) -> None:
    assert web.get("/queue/nope/nope/accept-unflagged").status_code == 404
