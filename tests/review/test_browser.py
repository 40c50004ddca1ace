"""The review web app in a real browser: Debian's headless Chromium driven by Playwright.

The app runs under uvicorn in a background thread on 127.0.0.1 and a free port; the test names
the reviewer, accepts one item with the keyboard (``a``), edits another (``e``, type,
``Ctrl+Enter``), rejects and undoes with ``r``/``u``, and checks the store after each step. It
also checks that hostile document text never runs as script, that a shortcut pressed before the
reviewer is named asks for the name and comes back to the item, and "accept all unflagged".

Reading a flagged item (the sample's reformulation queue as the offline pipeline pushes it, at 1366×768): its
flag in words with the query that loses its answer, the decision buttons and the diff above the fold, the
neighbouring chunks folded, no name prompt until a decision is attempted; the queue list shows the changed words.
Screenshots of the item pages, the queue pages and the overview go to ``$CONTEB_SCREENSHOTS`` when it is set.

Skipped (with the reason) when ``/usr/bin/chromium`` or the ``playwright`` package is missing:
``scripts/install-browser.sh`` installs the browser; Playwright never downloads one here.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from assets.reformulations import answers_by_chunk
from conteb.config import ChunkingConfig
from curation.chunking import chunk_documents
from curation.lookups import document_titles
from curation.pairing import pair_by_span
from curation.reformulation import apply_reformulations
from curation.review_items import review_item, review_items_from_reformulations, review_items_table
from curation.sources.sample import load_sample
from curation.themes.stage import themes_table
from review.gate import auto_accept
from review.store import ReviewStore
from review.web import create_app
from tests.support.browser import open_page, require_browser, screenshot

sync_api = require_browser()

TASK, KIND = "lyon", "reformulation"
HOSTILE = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'


def _item(index: int, flags: list[str] | None = None) -> dict:
    return review_item(
        TASK,
        KIND,
        f"c{index}",
        "doc-lyon",
        f"The city hosted the games in {1970 + index}, and the subject grew. {HOSTILE}",
        "llm",
        title="Lyon",
        original=f"In {1970 + index}, Lyon hosted the games, and Lyon grew. {HOSTILE}",
        context={
            "theme": "Lyon",
            "chunk_index": index + 1,
            "previous_chunk": f"Lyon is a city in France. Chunk {index}.",
            "next_chunk": f"Later, Lyon became larger. Chunk {index + 2}.",
        },
        flags=flags or [],
    )


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "review.sqlite"
    with ReviewStore(path) as store:
        store.push(review_items_table([_item(0), _item(1, ["leak:Lyon", "lost_answer:1971"]), _item(2)]))
    return path


@contextlib.contextmanager
def _serving(store_path: Path) -> Iterator[str]:
    """The app under uvicorn in a thread, on 127.0.0.1 and a free port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(store_path), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture
def server(store_path: Path) -> Iterator[str]:
    """The app over the Lyon store."""
    with _serving(store_path) as url:
        yield url


@pytest.fixture
def page(server: str) -> Iterator[sync_api.Page]:
    """A fresh page in Debian's headless Chromium; fails the test on page errors or dialogs."""
    # a broken image (src=x) would only log a 404 if the markup were live: any error is a finding
    with open_page() as fresh:
        yield fresh


def _press(page: sync_api.Page, key: str) -> None:
    """Press ``key`` and wait for the navigation it causes."""
    with page.expect_navigation():
        page.keyboard.press(key)


def test_review_with_the_keyboard(page: sync_api.Page, server: str, store_path: Path) -> None:
    item = {i: f"{TASK}:{KIND}:c{i}" for i in range(3)}
    page.goto(f"{server}/queue/{TASK}/{KIND}")
    assert page.locator("#reviewer-input").is_visible()

    page.fill("#reviewer-input", "Browser Bea")
    with page.expect_navigation():
        page.click("#reviewer-save")
    assert page.locator("#reviewer-name").inner_text() == "Browser Bea"
    assert re.search(rf"/queue/{TASK}/{KIND}", page.url)

    with page.expect_navigation():
        page.click("#start-reviewing")
    assert page.url.endswith(f"/item/{item[0]}?status=pending")
    assert "Lyon" in " ".join(page.locator("#original del").all_inner_texts())
    assert page.evaluate("window.__xss") is None  # the hostile text stayed text
    assert HOSTILE in page.locator("#proposed").inner_text()

    _press(page, "a")  # accept c0, on to the next pending item
    assert page.url.endswith(f"/item/{item[1]}?status=pending")
    with ReviewStore(store_path) as store:
        accepted = store.get(item[0])
    assert (accepted.status, accepted.reviewer) == ("accepted", "Browser Bea")

    flags = page.locator(".flags").inner_text()  # flags in words, an old lost_answer flag (no query id) included
    assert "The rewrite still names the theme: \u2018Lyon\u2019." in flags
    assert "The rewrite removes the answer of a query paired with this chunk: \u20181971\u2019." in flags
    assert "leak:" not in flags and "lost_answer:" not in flags
    screenshot(page, "review-item.png")
    page.keyboard.press("e")
    assert page.evaluate("document.activeElement.id") == "edit-text"
    assert page.locator("#edit-text").input_value().startswith("The city hosted")  # no stray "e" typed
    page.keyboard.press("Control+A")
    page.keyboard.type("A rejuvenated city hosted the games; just a jury undid nothing.")  # a, r, j, u, k: typed
    _press(page, "Control+Enter")
    assert page.url.endswith(f"/item/{item[2]}?status=pending")
    with ReviewStore(store_path) as store:
        edited = store.get(item[1])
        assert store.get(item[0]).status == "accepted"
    assert (edited.status, edited.reviewer) == ("edited", "Browser Bea")
    assert edited.edited_text == "A rejuvenated city hosted the games; just a jury undid nothing."

    _press(page, "r")  # reject the last pending item: the queue is done
    assert f"/queue/{TASK}/{KIND}?status=pending&notice=finished" in page.url
    with ReviewStore(store_path) as store:
        assert store.get(item[2]).status == "rejected"

    page.goto(f"{server}/item/{item[0]}?status=all")
    _press(page, "j")
    assert page.url.endswith(f"/item/{item[1]}?status=all")
    _press(page, "ArrowLeft")
    assert page.url.endswith(f"/item/{item[0]}?status=all")
    _press(page, "u")  # undo the last decision (the reject of c2)
    assert page.url.endswith(f"/item/{item[2]}?status=all&notice=undone")
    assert page.locator("#item-status").inner_text() == "pending"
    with ReviewStore(store_path) as store:
        assert store.get(item[2]).status == "pending"
        assert store.get(item[1]).status == "edited"

    page.goto(server + "/")
    assert page.locator(".queue-row").count() == 1
    screenshot(page, "review-overview.png")


def test_a_shortcut_before_naming_oneself_asks_for_the_name(page: sync_api.Page, server: str, store_path: Path) -> None:
    item = f"{TASK}:{KIND}:c0"
    page.goto(f"{server}/item/{item}?status=pending")
    assert page.locator("#name-needed").is_hidden()  # no prompt before a decision is attempted
    page.keyboard.press("a")  # no reviewer yet: the name box gets the focus, nothing is posted
    assert page.evaluate("document.activeElement.id") == "reviewer-input"
    assert page.locator("#name-needed").is_visible()
    assert page.url.endswith(f"/item/{item}?status=pending")
    with ReviewStore(store_path) as store:
        assert store.get(item).status == "pending"
    page.keyboard.type("Bea")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith(f"/item/{item}?status=pending")  # back on the item, not a 404
    assert page.locator("#reviewer-name").inner_text() == "Bea"
    assert page.locator("#item-position").inner_text() == "item 1 of 3"
    _press(page, "a")
    with ReviewStore(store_path) as store:
        accepted = store.get(item)
    assert (accepted.status, accepted.reviewer) == ("accepted", "Bea")


def test_accept_all_unflagged_from_the_queue_page(page: sync_api.Page, server: str, store_path: Path) -> None:
    page.goto(f"{server}/queue/{TASK}/{KIND}")
    page.fill("#reviewer-input", "Bulk Bea")
    with page.expect_navigation():
        page.click("#reviewer-save")
    rows = page.locator("tr[data-item-id]")
    assert rows.first.get_attribute("data-item-id") == f"{TASK}:{KIND}:c1"  # the flagged item first
    screenshot(page, "review-queue.png")
    with page.expect_navigation():
        page.click("#accept-unflagged")
    assert "Accept 2 unflagged pending items" in page.locator("main").inner_text()
    with page.expect_navigation():
        page.click("#confirm-accept-unflagged")
    assert f"/queue/{TASK}/{KIND}?status=pending&notice=accepted_unflagged" in page.url
    with ReviewStore(store_path) as store:
        statuses = {item.object_id: (item.status, item.reviewer) for item in store.items(task=TASK)}
    assert statuses == {"c0": ("accepted", "Bulk Bea"), "c1": ("pending", None), "c2": ("accepted", "Bulk Bea")}


SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
FLAGGED = "sample:reformulation:ostherm_2"
FOLD = 768


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample's reformulation items as the offline pipeline pushes them (masked, unchanged ones accepted
    automatically)."""
    source = load_sample(SAMPLE)
    documents = source.documents_table()
    chunks = chunk_documents(documents, ChunkingConfig()).chunks
    paired = pair_by_span(source.queries_table(), documents, chunks).table()
    themes, _ = themes_table(documents, None, None)
    masked = apply_reformulations(chunks, themes, answers_by_chunk(paired), None, None, None).table
    items = review_items_from_reformulations("sample", masked, chunks, document_titles(documents), paired)
    path = tmp_path_factory.mktemp("sample-review") / "review.sqlite"
    with ReviewStore(path) as store:
        store.push(items)
        auto_accept(store, "sample", "reformulation", items, unchanged=True, methods=())
    return path


@pytest.fixture(scope="module")
def sample_server(sample_store: Path) -> Iterator[str]:
    with _serving(sample_store) as url:
        yield url


def test_a_flagged_item_says_why_and_fits_above_the_fold(sample_server: str, sample_store: Path) -> None:
    with open_page(1366, FOLD) as page:
        page.goto(f"{sample_server}/queue/sample/reformulation")
        with page.expect_navigation():
            page.click("tr[data-item-id] a")  # the first row: the flagged item
        assert page.url.endswith(f"/item/{FLAGGED}?status=pending")
        flags = page.locator(".flags")
        sentence = "The mask removes the answer of ostherm-q5: \u2018Ostherm Glass Museum\u2019."
        assert sentence in flags.inner_text() and "lost_answer:" not in page.locator("main").inner_text()
        question = flags.locator(".question")
        assert question.is_visible() and "ostherm-q5" in question.inner_text()
        assert "What is the best-known museum of Ostherm?" in question.inner_text()
        assert "Edit to keep the answer" in flags.inner_text()
        assert "Ostherm" in page.locator("#original del").first.inner_text()
        for button in ("#accept", "#reject", "#edit"):
            box = page.locator(button).bounding_box()
            assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= FOLD, (button, box)
        for side in ("#original", "#proposed"):
            box = page.locator(side).bounding_box()
            assert box is not None and box["y"] < FOLD - 100, (side, box)  # the diff starts above the fold
        for neighbour in ("#previous-chunk", "#next-chunk"):
            assert page.locator(neighbour).get_attribute("open") is None  # folded
            assert page.locator(f"{neighbour} .text").is_hidden()
        assert page.locator("#name-needed").is_hidden() and page.locator(".error").count() == 0
        screenshot(page, "review-flagged-item-fold.png", full_page=False)
        screenshot(page, "review-flagged-item.png")

        page.click("#accept")  # no reviewer named yet: the prompt, the name box focused, nothing posted
        assert page.locator("#name-needed").is_visible()
        assert page.evaluate("document.activeElement.id") == "reviewer-input"
        assert page.url.endswith(f"/item/{FLAGGED}?status=pending")
        screenshot(page, "review-name-prompt.png", full_page=False)
        page.click("#edit")
        assert page.evaluate("document.activeElement.id") == "edit-text"
    with ReviewStore(sample_store) as store:
        assert store.get(FLAGGED).status == "pending"


def test_the_queue_list_shows_the_changed_words(sample_server: str) -> None:
    with open_page(1366, FOLD) as page:
        page.goto(f"{sample_server}/queue/sample/reformulation")
        row = page.locator(f'tr[data-item-id="{FLAGGED}"]')
        changes = row.locator("td.changes")
        assert changes.locator("del").first.inner_text() == "Ostherm"
        assert changes.locator("ins").first.inner_text() == "subject"
        assert "Glass Museum" in changes.inner_text()  # a few unchanged words around the change
        assert len(changes.inner_text()) < 200  # the change, not the whole chunk
        assert "The mask removes the answer of ostherm-q5" in row.inner_text()
        screenshot(page, "review-queue-changes.png")
