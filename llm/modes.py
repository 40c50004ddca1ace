"""``llm.structured_output: auto``: which structured-output mode an endpoint and model accept, found once.

:class:`ModeFinder` holds a client's mode. An explicit setting is the mode, obeyed; a refusal of it stops the run
(:class:`llm.structured.StructuredOutputRefused`, one line naming the setting). With ``auto``:

1. :meth:`ModeFinder.recall`: the OpenAI API is asked in ``json_schema``; another endpoint in the mode remembered
   for its URL and model in the answer store (``structured_modes``), logged in one line; a lesser mode remembered
   longer ago than ``llm.mode_reprobe_after_s`` is not trusted: the modes are tried again (2.), best first;
2. else the modes are tried best first (:data:`llm.structured.PROBE_ORDER`) on the run's own first request, sent
   alone (:attr:`ModeFinder.confirmed`): the first call the server answers settles the mode
   (:meth:`ModeFinder.settle`: remembered, logged in one line with the refusals that led to it, and a line
   ``llm: <endpoint>: structured mode <before> -> <after>: <why>`` when it differs from the mode kept before); a
   refusal (:func:`llm.structured.mode_refusal`) is asked again once, the request sent alone, and only the same
   mode refused on :data:`REFUSALS_TO_DEMOTE` separate requests moves to the next mode
   (:meth:`ModeFinder.next_after`), so one transient error never demotes an endpoint; every mode refused stops
   the run;
3. a remembered mode refused later (twice: the server changed) is forgotten and found again, once per client.

No request is spent on finding: against a server that accepts ``json_schema`` the calls are the run's own. In
``mode: batch`` (the Batch API is OpenAI's) ``auto`` asks in ``json_schema`` without looking.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import cast

from llm.cache import AnswerCache
from llm.settings import LLMSettings
from llm.structured import PROBE_ORDER, Mode, ModeRefused, StructuredOutputRefused, refused_setting

REFUSALS_TO_DEMOTE = 2
"""How many separate requests must see a mode refused before ``auto`` gives it up (and the answer store says so)."""


class ModeFinder:
    """The structured-output mode of one client (module doc); ``log`` receives its one-line reports."""

    def __init__(self, settings: LLMSettings, cache: AnswerCache, log: Callable[[str], None]) -> None:
        self.settings = settings
        self.cache = cache
        self.log = log
        explicit = settings.structured_output
        self._mode: Mode | None = None if explicit == "auto" else explicit
        self._trying: Mode = PROBE_ORDER[0]
        self._recalled = self._found_again = False
        self._confirmed = self._mode is not None  # an explicit mode is trusted until refused
        self._refusals: list[ModeRefused] = []
        self._strikes: collections.Counter[Mode] = collections.Counter()
        self._kept: Mode | None = None  # the mode the answer store held when this client recalled it

    @property
    def current(self) -> Mode:
        """The mode to ask in: the setting, the mode found or recalled, else the mode being tried."""
        return self._mode or self._trying

    @property
    def confirmed(self) -> bool:
        """Whether the mode is trusted (explicit, recalled, or answered in by this client): until then the client
        sends its first request alone, so that a refusal costs one request."""
        return self._confirmed

    @property
    def endpoint(self) -> str:
        return self.settings.resolved_base_url().rstrip("/")

    def recall(self) -> None:
        """With ``auto``, once: the OpenAI API's mode, else the one remembered in the answer store (logged)."""
        if self._mode is not None or self._recalled:
            return
        self._recalled = True
        url, model = self.endpoint, self.settings.model
        if self.settings.endpoint_family() == "openai":
            self._mode, self._confirmed = "json_schema", True
            self.log(f"llm: structured output json_schema for {model} (the OpenAI API supports it)")
            return
        remembered = self.cache.structured_mode(url, model)
        if remembered is not None and remembered[0] in PROBE_ORDER:
            mode, reason, when = remembered
            self._kept = cast(Mode, mode)
            day = time.strftime("%Y-%m-%d", time.localtime(when))
            after = self.settings.mode_reprobe_after_s
            if mode != PROBE_ORDER[0] and time.time() - when >= after:
                self.log(
                    f"llm: {url}: structured mode {mode} for {model}, kept since {day}, is older than "
                    f"llm.mode_reprobe_after_s ({after:g} s): asking in {PROBE_ORDER[0]} again"
                )
                return
            self._mode, self._confirmed = self._kept, True
            self.log(
                f"llm: structured output {mode} for {model} at {url} ({reason}; found on {day}, kept in the answer "
                "store; llm.structured_output: auto)"
            )

    def settle(self) -> None:
        """The server answered a call: the mode is confirmed; with ``auto``, keep it (answer store), say why, once."""
        self._confirmed = True
        if self._mode is not None:
            return
        self._mode = mode = self._trying
        refused = "; ".join(f"{refusal} twice" for refusal in self._refusals)
        reason = f"the server refused {refused}, accepted {mode}" if refused else f"the server accepted {mode}"
        self.cache.remember_structured_mode(self.endpoint, self.settings.model, mode, reason)
        self.log(
            f"llm: structured output {mode} for {self.settings.model} at {self.endpoint} ({reason}; "
            "llm.structured_output: auto, kept in the answer store)"
        )
        before = self._kept or PROBE_ORDER[0]
        if mode != before:
            self.log(f"llm: {self.endpoint}: structured mode {before} -> {mode}: {reason}")

    def next_after(self, refusal: ModeRefused) -> None:
        """After ``refusal``, the mode to ask in next: the same one, once more, with its first request sent alone,
        until it was refused :data:`REFUSALS_TO_DEMOTE` times, then the next one; raises
        :class:`StructuredOutputRefused` for an explicit setting (at once) or when every mode was refused."""
        url = self.endpoint
        if self.settings.structured_output != "auto":
            raise StructuredOutputRefused(refused_setting(url, refusal))
        self._confirmed = False
        self._strikes[refusal.mode] += 1
        if self._strikes[refusal.mode] < REFUSALS_TO_DEMOTE:
            self.log(f"llm: {url}: the server refused structured mode {refusal}; asking in it once more before "
                     "changing mode")  # fmt: skip
            return
        self._refusals.append(refusal)
        if self._mode is not None and not self._found_again:  # the server changed since the mode was found
            self._mode, self._found_again, self._trying = None, True, PROBE_ORDER[0]
            if refusal.mode != PROBE_ORDER[0]:
                return
        self._mode = None
        index = PROBE_ORDER.index(refusal.mode)
        if index + 1 == len(PROBE_ORDER):
            refused = "; ".join(str(each) for each in self._refusals)
            raise StructuredOutputRefused(
                f"the server at {url} refused every structured-output mode for {self.settings.model} ({refused}); "
                "check llm.base_url and llm.model in conteb.yaml (`conteb llm check` tries each mode)"
            )
        self._trying = PROBE_ORDER[index + 1]
