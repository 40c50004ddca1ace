"""The prompt-cache send policy: a prefix group's first request alone, then its siblings (llm/scheduling.py)."""

from __future__ import annotations

import asyncio
import dataclasses

from llm.scheduling import OrderedSlots, PrefixGate, group_order
from tests.llm.conftest import make_request
from tests.llm.test_cached_tokens_ledger import document_request
from tests.support.openai_server import Fault


def test_group_order_keeps_groups_together_at_their_first_place() -> None:
    def grouped(n: int, group: str | None):
        return dataclasses.replace(make_request(n), prefix_group=group)

    pending = {n: grouped(n, group) for n, group in enumerate(["a", None, "b", "a", None, "b", "a"])}
    assert list(group_order(pending)) == [0, 3, 6, 1, 2, 5, 4]


def test_ordered_slots_go_to_the_smallest_rank_first() -> None:
    async def scenario() -> list[int]:
        slots, order = OrderedSlots(1), []

        async def take(rank: int) -> None:
            async with slots.hold(rank):
                order.append(rank)
                await asyncio.sleep(0.01)

        first = asyncio.create_task(take(9))  # holds the only slot
        await asyncio.sleep(0)
        waiting = [asyncio.create_task(take(rank)) for rank in (5, 2, 7, 1)]
        await asyncio.gather(first, *waiting)
        return order

    assert asyncio.run(scenario()) == [9, 1, 2, 5, 7]


def test_a_cancelled_waiter_gives_its_turn_away() -> None:
    async def scenario() -> list[int]:
        slots, order = OrderedSlots(1), []
        await slots.acquire(0)
        cancelled = asyncio.create_task(slots.acquire(1))
        later = asyncio.create_task(slots.acquire(2))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0)
        slots.release()
        await later
        order.append(2)
        slots.release()
        await slots.acquire(3)  # the slot came back: free again
        return order

    assert asyncio.run(scenario()) == [2]


def test_followers_wait_for_their_leader_only() -> None:
    async def scenario() -> list[str]:
        gate, seen = PrefixGate(["a", "a", None, "b"]), []

        async def go(index: int, group: str | None) -> None:
            await gate.wait(index, group)
            seen.append(f"{index}")

        tasks = [asyncio.create_task(go(i, g)) for i, g in enumerate(["a", "a", None, "b"])]
        await asyncio.sleep(0.01)
        seen.append("release a")
        gate.release("a")
        await asyncio.gather(*tasks)
        return seen

    assert asyncio.run(scenario()) == ["0", "2", "3", "release a", "1"]


def test_leader_first_lets_every_follower_use_the_providers_cache(server, make_client) -> None:
    server.latency_s = 0.05
    requests = [document_request(n, group=f"doc{n // 4}") for n in range(12)]  # 3 documents x 4 requests
    results = make_client(max_concurrency=8).run(requests, scope="t/s")
    assert all(r.ok for r in results)
    assert [r.cached_tokens > 0 for r in results] == [n % 4 != 0 for n in range(12)]


def test_without_groups_a_documents_requests_go_at_once_and_miss_the_cache(server, make_client) -> None:
    server.latency_s = 0.05
    requests = [document_request(n, group=None) for n in range(4)]
    # An explicit mode: with ``auto`` and no mode found yet, the first request goes alone (test_local_servers.py)
    results = make_client(max_concurrency=8, structured_output="json_schema").run(requests, scope="t/s")
    assert all(r.ok for r in results) and all(r.cached_tokens == 0 for r in results)


def test_a_failed_leader_still_lets_its_followers_go(server, make_client) -> None:
    server.inject(Fault(kind="status", status=400), match=lambda body: "question 0" in str(body))
    results = make_client(max_concurrency=4).run([document_request(n) for n in range(3)], scope="t/s")
    assert [r.ok for r in results] == [False, True, True]
