"""The order in which the client sends online requests, so that providers' prompt caching applies.

Providers cache the prompts they have processed and serve a later prompt's longest already-seen prefix
from that cache, at a lower price (OpenAI does it automatically for prompts of 1024 tokens or more, in
steps of 128 tokens, and reports it as ``usage.prompt_tokens_details.cached_tokens``; vLLM's prefix caching
works the same way). A prefix is cached only once a request carrying it has been processed: requests of one
document sent all at once all pay the full price. Hence the policy, "first request of each prefix group alone,
then its siblings":

1. Requests that carry the same ``LLMRequest.prefix_group`` (set by the stages whose prompts start with a whole
   document: its id, or its window) are sent together: :func:`group_order` puts each group's requests after
   its first one (stable, groups in order of first appearance; requests without a group keep their place).
2. A group's first uncached request (its *leader*) is sent alone; the group's other requests wait until the
   server has answered the leader with a chat completion (valid or not: the prompt was processed) or the
   leader has failed for good (its tries spent, or a status that is not retried): :class:`PrefixGate`.
   Requests without a group never wait.
3. The ``max_concurrency`` slots go to the waiting request that comes first in that order
   (:class:`OrderedSlots`), so a document whose leader was answered goes before later documents' leaders and
   the in-flight documents stay few (the provider's cache keeps a prefix only minutes).

Cost: a group's followers start one answer later than they would all at once; measured in
``bench/prompt_cache.py`` (bench/BENCHMARKS.md). Batch API lines are written in the same order (1); a batch has
no send order to control. No I/O; asyncio primitives only.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from llm.types import LLMRequest

K = TypeVar("K", bound=Hashable)


def group_order(pending: Mapping[K, LLMRequest]) -> dict[K, LLMRequest]:
    """``pending`` reordered so that each ``prefix_group`` is contiguous, at the place of its first request
    (stable within a group; a request without a group keeps its place relative to the groups)."""
    slots: dict[object, list[K]] = {}
    for key, request in pending.items():
        slot = ("group", request.prefix_group) if request.prefix_group is not None else ("alone", key)
        slots.setdefault(slot, []).append(key)
    return {key: pending[key] for keys in slots.values() for key in keys}


class PrefixGate:
    """Holds back a prefix group's followers until its leader (first request of the group in ``groups``) is released.

    ``groups[i]`` is the ``prefix_group`` of request ``i``; :meth:`wait` returns at once for a leader and for a
    request without a group. :meth:`release` is idempotent and a no-op for ``None``.
    """

    def __init__(self, groups: Sequence[str | None]) -> None:
        self._leaders: dict[str, int] = {}
        for index, group in enumerate(groups):
            if group is not None:
                self._leaders.setdefault(group, index)
        self._released = {group: asyncio.Event() for group in self._leaders}

    def leads(self, index: int, group: str | None) -> bool:
        """Whether request ``index`` is the leader of ``group``."""
        return group is not None and self._leaders.get(group) == index

    async def wait(self, index: int, group: str | None) -> None:
        """Return once request ``index`` may be sent."""
        if group is None or self.leads(index, group):
            return
        await self._released[group].wait()

    def release(self, group: str | None) -> None:
        """Let ``group``'s followers go."""
        if group is not None:
            self._released[group].set()


class OrderedSlots:
    """A semaphore of ``size`` slots whose free slot goes to the waiter with the smallest ``rank`` (ties: first come).

    Use ``async with slots.hold(rank):``; a waiter cancelled before it got its slot gives nothing back, one
    cancelled as it got it hands it on.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self._free = size
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    async def acquire(self, rank: int) -> None:
        if self._free > 0:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (rank, next(self._arrivals), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # the slot was handed over as the waiter was cancelled
                self.release()
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)  # the slot passes directly to the waiter
                return
        self._free += 1

    def hold(self, rank: int) -> _Held:
        """An async context manager holding one slot."""
        return _Held(self, rank)


class _Held:
    def __init__(self, slots: OrderedSlots, rank: int) -> None:
        self._slots, self._rank = slots, rank

    async def __aenter__(self) -> None:
        await self._slots.acquire(self._rank)

    async def __aexit__(self, *exc: object) -> None:
        self._slots.release()


def groups_of(requests: Iterable[LLMRequest]) -> list[str | None]:
    """The ``prefix_group`` of each request, in order (the argument of :class:`PrefixGate`)."""
    return [request.prefix_group for request in requests]
