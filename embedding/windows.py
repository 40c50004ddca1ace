"""Window planning for late chunking: how a document's chunks are laid out in model inputs, and which tokens pool.

Source of the rules: the ConTEB/InSeNT paper's public code (Conti et al., 2025, "Context is Gold to find the Gold
Passage"; repository illuin-tech/contextual-embeddings). Everything here is token ids and
positions (no model, no torch); :class:`embedding.encoder.LateChunkingEncoder` runs the windows and pools.

* **Layout** (``boundaries="separator"``): ``[CLS] prefix c_1 [SEP] c_2 [SEP] … c_n [SEP]``, every chunk tokenized on
  its own (no special tokens) and the chunks joined with the tokenizer's separator token. ``boundaries="offsets"``
  tokenizes ``sep_token.join(chunks)`` once and takes each chunk's tokens from the offset mapping (the tokens whose
  character start lies inside the chunk); the tokens between two chunks (normally one ``[SEP]``) are kept as the gap.
  The document prefix (e.g. ``search_document: ``) is tokenized alone and placed right after ``[CLS]``.
* **Pooled tokens** (:class:`Window` ``spans`` and ``cls_in_first``): a chunk's own tokens. The first chunk of a
  sequence also pools the leading ``[CLS]`` (``keep_cls_in_first``, as the public code); separators, the final
  ``[SEP]`` and the prefix are never pooled. ``exclude_special`` (ablation) drops ``[CLS]`` too. With a non-empty
  ``document_prefix`` the first chunk does *not* pool ``[CLS]`` (``cls_with_prefix=False``): the public code
  (``LongContextEmbeddingModel.forward`` with ``add_prefixes``) cuts ``[CLS]`` and the prefix tokens off the token
  states before pooling, so its chunk 0 starts at its own first token.
* **Windows** (documents longer than ``max_length`` tokens, our rule): windows of whole chunks, filled greedily
  from the first chunk; the next window starts ``window_overlap_chunks`` chunks before the end of the previous
  one (fewer when the overlap would not leave room for a new chunk; always at least one chunk later). A chunk
  seen in several windows takes its vector from one of them (**ownership**, ``ownership``): ``balanced`` takes the
  window where it has the most context on its *poorer* side, ``argmax_w min(tokens before the chunk in w, tokens
  after it in w)``; ``earliest`` the first window that holds it (the closest to the document's head); ``head`` a
  window that holds the document's head (the first window, or any anchored window), then ``balanced`` among those;
  ties to the earlier window. A single
  chunk longer than ``max_length - 2 - len(prefix)`` tokens keeps its first tokens (counted in
  ``truncated_chunks``). A document that fits is one window: exactly the one-pass result.
* **Anchored windows** (``window_policy="anchored"``, our rule, not in the public code): with a 512-token model most
  windows of a long document never see its head, where the theme is named. Every window that does not start at
  chunk 0 then begins with the document's *head*: ``[CLS] prefix head [SEP] c_a gap … c_{b-1} [SEP]``, where
  ``head`` = the tokens of the document's title (when given, tokenized alone) followed by the first chunk's tokens,
  cut to at most ``floor(anchor_share · max_length)`` tokens. The head is attended to but never pooled (neither
  ``[CLS]``, which belongs to the head's segment, nor the head's ``[SEP]``; also in token mode). The ranges of such
  windows are filled with the budget left after ``[CLS] prefix head [SEP]``; when a chunk does not fit next to the
  full head, that window's head is cut to what fits (none at all: a plain window). The first window (from chunk 0)
  is exactly the plain one, so a document that fits one window gives exactly the plain result. Ownership keeps the
  rule above with positions as they are: head tokens count as context *before* the chunk (they are attended to).
  ``anchor_tokens`` counts the head tokens added (an encode cost); titles are ignored by the plain policy.
* **Independent** (the non-contextual baseline): each chunk laid out alone, ``[CLS] prefix chunk [SEP]``, through
  the same tokenization. ``PoolingPolicy.independent_pool="all"`` (default) pools every token of that sequence,
  which is sentence-transformers' mean pooling, so the vectors equal ``model.encode(prefix + chunk)``; ``"policy"``
  uses the late-chunking rules above (isolates the effect of context).

Units: lengths and positions are tokens; ``max_length`` counts every token of a window, special tokens included.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from conteb.text import is_blank

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# The encoder's logger: the truncation warning is tallied under this name (evaluation.runner.TALLIED_LOGGERS).
logger = logging.getLogger("embedding.encoder")

WindowPolicy = Literal["plain", "anchored"]
Context = Literal["late", "independent"]
Ownership = Literal["balanced", "earliest", "head"]
OWNERSHIP_RULES: tuple[Ownership, ...] = ("balanced", "earliest", "head")
DEFAULT_OWNERSHIP: Ownership = "head"
"""Which window a chunk seen in several windows takes its vector from (module docstring, "Ownership"); it matters
only with an overlap. Chosen by measurement (``bench/window_layout.py``; bench/BENCHMARKS.md, "Window layout:
overlap and ownership, chosen by measurement", "Decision"): ``head`` against ``balanced`` and ``earliest``, plain
windows, overlap 2. Anchored windows all hold the head, so there ``head`` is ``balanced``."""
DEFAULT_WINDOW_OVERLAP_CHUNKS = 0
"""Chunks consecutive windows share, in training and in evaluation alike (``TrainingConfig``, ``ModelOptions``).
Chosen by measurement (``bench/window_layout.py``; bench/BENCHMARKS.md, "Window layout: overlap and ownership,
chosen by measurement"): no overlap against an overlap of 1 or 2 chunks, plain and anchored windows, for quality
and the tokens forwarded. With no overlap every chunk is in one window and the ownership rule does not apply."""


@dataclass(frozen=True)
class PoolingPolicy:
    """Which tokens make a chunk's vector (module docstring; the mean itself is :mod:`embedding.encoder`'s)."""

    boundaries: Literal["separator", "offsets"] = "separator"
    """``separator``: chunks tokenized one by one, joined with the sep token; ``offsets``: the joined text tokenized
    once, chunk spans from the offset mapping."""
    keep_cls_in_first: bool = True
    """Public code: the first chunk of a sequence also averages the leading ``[CLS]``."""
    exclude_special: bool = False
    """Ablation: pool only the chunk's own tokens (no ``[CLS]``/``[SEP]``/prefix), also in independent mode."""
    independent_pool: Literal["all", "policy"] = "all"
    """Independent mode: ``all`` = every token of ``[CLS] prefix chunk [SEP]`` (= ``model.encode``); ``policy`` =
    the late-chunking rules applied to a one-chunk document."""
    cls_with_prefix: bool = False
    """With a non-empty document prefix, whether the first chunk still averages ``[CLS]``. Public code: no (it drops
    ``[CLS]`` and the prefix tokens before pooling); without a prefix ``keep_cls_in_first`` alone decides."""


@dataclass(frozen=True)
class Window:
    """One model input: token ids and where each of its chunks lies.

    ``spans[k]`` is the token range ``[start, end)`` of chunk ``chunk_ids[k]`` in ``input_ids`` (the chunk's own
    tokens; ``cls_in_first`` says whether position 0 is also pooled into ``spans[0]``). ``owned`` lists the chunk
    indices (into the document's chunks) whose vector comes from this window. ``head`` is the token range of the
    anchored head (``window_policy="anchored"``; never pooled), None in a plain window.
    """

    input_ids: list[int]
    spans: list[tuple[int, int]]
    chunk_ids: list[int]
    owned: list[int]
    cls_in_first: bool = False
    head: tuple[int, int] | None = None


@dataclass
class DocumentTokens:
    """A document tokenized once: chunk tokens, the gap tokens between consecutive chunks."""

    chunks: list[list[int]]
    gaps: list[list[int]]


class WindowPlanner:
    """Lays documents out in windows (module docstring) for one tokenizer, pooling policy and window size.

    ``max_length``: tokens per window. Counters (cumulative, for reports): ``truncated_chunks``; ``anchor_tokens``
    (head tokens added to anchored windows, their ``[SEP]`` excluded).
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        policy: PoolingPolicy,
        max_length: int,
        window_overlap_chunks: int = DEFAULT_WINDOW_OVERLAP_CHUNKS,
        document_prefix: str = "",
        window_policy: WindowPolicy = "plain",
        anchor_share: float = 0.4,
        ownership: Ownership = DEFAULT_OWNERSHIP,
    ) -> None:
        if window_policy not in ("plain", "anchored"):
            raise ValueError(f"window_policy must be 'plain' or 'anchored', got {window_policy!r}")
        if ownership not in OWNERSHIP_RULES:
            raise ValueError(f"ownership must be one of {OWNERSHIP_RULES}, got {ownership!r}")
        self.ownership: Ownership = ownership
        if not 0.0 < float(anchor_share) < 1.0:
            raise ValueError(f"anchor_share must be in (0, 1), got {anchor_share}")
        if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
            raise ValueError("the tokenizer needs a [CLS] and a [SEP] token for late chunking")
        self.tokenizer = tokenizer
        self.policy = policy
        self.max_length = int(max_length)
        self.window_overlap_chunks = max(0, int(window_overlap_chunks))
        self.window_policy: WindowPolicy = window_policy
        self.truncated_chunks = 0
        self.anchor_tokens = 0
        self.cls_id: int = tokenizer.cls_token_id
        self.sep_id: int = tokenizer.sep_token_id
        self.prefix_ids: list[int] = self.tokenize([document_prefix])[0] if document_prefix else []
        if self.max_length < len(self.prefix_ids) + 3:
            raise ValueError(f"max_length {self.max_length} leaves no room for a chunk")
        self.head_cap = int(float(anchor_share) * self.max_length)  # floor(anchor_share * max_length) head tokens

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text without special tokens (one batched tokenizer call).

        Texts longer than the model's context are expected here (a document joined for the offsets layout, a chunk
        of the chunk-size study's 8000-character sizes): the planner lays them out in windows, or cuts a chunk that
        no window holds and counts it (:meth:`_truncate`, one summary line per evaluation). So the tokenizer's own
        "Token indices sequence length is longer than the specified maximum sequence length ... will result in
        indexing errors" warning (``verbose=False`` silences it) would only describe ids that never reach the model
        whole.
        """
        if not texts:
            return []
        return self.tokenizer(list(texts), add_special_tokens=False, truncation=False, verbose=False)["input_ids"]

    def plans(self, documents: Sequence[Sequence[str]]) -> list[DocumentTokens]:
        """Tokenize every document (all chunks of all documents in one tokenizer call for ``separator``)."""
        if self.policy.boundaries == "separator":
            flat = self.tokenize([chunk for doc in documents for chunk in doc])
            plans, start = [], 0
            for doc in documents:
                ids = flat[start : start + len(doc)]
                start += len(doc)
                plans.append(DocumentTokens(chunks=ids, gaps=[[self.sep_id] for _ in range(max(0, len(doc) - 1))]))
            return plans
        return [self._offsets_plan(doc) for doc in documents]

    def _offsets_plan(self, chunks: Sequence[str]) -> DocumentTokens:
        """Tokenize ``sep_token.join(chunks)`` once; assign tokens to chunks by their character start."""
        sep = self.tokenizer.sep_token
        starts, position = [], 0
        for chunk in chunks:
            starts.append(position)
            position += len(chunk) + len(sep)
        ends = np.array([s + len(c) for s, c in zip(starts, chunks, strict=True)], dtype=np.int64)
        encoded = self.tokenizer(  # the whole document: longer than the context on purpose (see tokenize)
            sep.join(chunks), add_special_tokens=False, truncation=False, return_offsets_mapping=True, verbose=False
        )
        ids = np.asarray(encoded["input_ids"], dtype=np.int64)
        offsets = np.asarray(encoded["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        owner = np.searchsorted(np.asarray(starts, dtype=np.int64), offsets[:, 0], side="right") - 1
        inside = (owner >= 0) & (offsets[:, 0] < ends[np.clip(owner, 0, None)]) & (offsets[:, 1] > offsets[:, 0])
        owner = np.where(inside, owner, -1)
        chunk_ids: list[list[int]] = []
        gaps: list[list[int]] = []
        cursor = 0
        for index in range(len(chunks)):
            positions = np.flatnonzero(owner == index)
            first = int(positions[0]) if positions.size else cursor
            last = int(positions[-1]) + 1 if positions.size else cursor
            if index > 0:
                gaps.append(ids[cursor:first].tolist())
            chunk_ids.append(ids[first:last].tolist())
            cursor = last
        return DocumentTokens(chunks=chunk_ids, gaps=gaps)

    def _truncate(self, plan: DocumentTokens) -> DocumentTokens:
        """Cut chunks longer than one window can hold (``max_length - 2 - len(prefix)`` tokens); count them."""
        cap = self.max_length - 2 - len(self.prefix_ids)
        over = [i for i, ids in enumerate(plan.chunks) if len(ids) > cap]
        if over:
            self.truncated_chunks += len(over)
            logger.warning("%d chunk(s) longer than %d tokens truncated to fit the context", len(over), cap)
            plan = DocumentTokens(chunks=[ids[:cap] for ids in plan.chunks], gaps=plan.gaps)
        return plan

    def _window_ranges(self, plan: DocumentTokens, head: int = 0) -> list[tuple[int, int, int]]:
        """Windows ``(a, b, h)``: chunks ``a..b-1`` and ``h`` head tokens (greedy fill, overlap of whole chunks).

        The first window starts at chunk 0 without a head; later windows get ``head`` tokens (0 for plain windows)
        plus their ``[SEP]``, fewer when chunk ``b`` would not fit next to the full head.
        """
        n = len(plan.chunks)
        if n == 0:
            return []
        fixed = 2 + len(self.prefix_ids)
        chunk_sums = np.concatenate([[0], np.cumsum([len(ids) for ids in plan.chunks])])
        gap_sums = np.concatenate([[0], np.cumsum([len(ids) for ids in plan.gaps])])

        def fits(a: int, b: int, h: int) -> bool:  # [CLS] prefix (head [SEP]) c_a gap … c_{b-1} [SEP]
            tokens = fixed + (h + 1 if h else 0) + chunk_sums[b] - chunk_sums[a] + gap_sums[b - 1] - gap_sums[a]
            return int(tokens) <= self.max_length

        ranges: list[tuple[int, int, int]] = []
        a, h = 0, 0
        while True:
            b = a + 1
            while b < n and fits(a, b + 1, h):
                b += 1
            ranges.append((a, b, h))
            if b >= n:
                return ranges
            a_next, h = max(b - self.window_overlap_chunks, a + 1), head
            while a_next < b and not fits(a_next, b + 1, h):  # the overlap must leave room for chunk b
                a_next += 1
            if not fits(a_next, b + 1, h):  # chunk b alone does not fit next to the full head: cut the head
                room = self.max_length - fixed - 1 - len(plan.chunks[b])
                h = max(0, min(head, room))
            a = a_next

    def _head(self, plan: DocumentTokens, title_ids: Sequence[int] | None) -> list[int]:
        """The anchored head: title tokens, then the first chunk's tokens, cut to ``head_cap`` (empty when plain)."""
        if self.window_policy != "anchored" or not plan.chunks:
            return []
        return [*(title_ids or []), *plan.chunks[0]][: self.head_cap]

    def _build(
        self, plan: DocumentTokens, a: int, b: int, *, pool_all: bool = False, head: Sequence[int] = ()
    ) -> Window:
        """The window over chunks ``a..b-1``: ``[CLS] prefix (head [SEP]) c_a gap … c_{b-1} [SEP]`` and its spans."""
        ids = [self.cls_id, *self.prefix_ids]
        head_span = None
        if head:
            ids.extend(head)
            head_span = (len(ids) - len(head), len(ids))
            ids.append(self.sep_id)
        spans: list[tuple[int, int]] = []
        for index in range(a, b):
            if index > a:
                ids.extend(plan.gaps[index - 1])
            start = len(ids)
            ids.extend(plan.chunks[index])
            spans.append((start, len(ids)))
        ids.append(self.sep_id)
        if pool_all:
            spans = [(0, len(ids))] if not self.policy.exclude_special else spans
            return Window(ids, spans, list(range(a, b)), list(range(a, b)), cls_in_first=False)
        cls = (
            self.policy.keep_cls_in_first
            and not self.policy.exclude_special
            and (not self.prefix_ids or self.policy.cls_with_prefix)
            and head_span is None  # [CLS] belongs to the head's segment, never pooled
        )
        return Window(ids, spans, list(range(a, b)), [], cls_in_first=cls, head=head_span)

    def _layout_plan(self, plan: DocumentTokens, title_ids: Sequence[int] | None = None) -> list[Window]:
        """Windows of one tokenized document, each chunk owned by exactly one window."""
        plan = self._truncate(plan)
        head = self._head(plan, title_ids)
        windows = []
        for a, b, h in self._window_ranges(plan, len(head)):
            windows.append(self._build(plan, a, b, head=head[:h]))
            self.anchor_tokens += h
        best: dict[int, tuple[tuple[int, ...], int]] = {}  # chunk -> (ownership key, window index)
        for w, window in enumerate(windows):
            for chunk, (start, end) in zip(window.chunk_ids, window.spans, strict=True):
                key = self._ownership_key(w, window, min(start, len(window.input_ids) - end))
                if chunk not in best or key > best[chunk][0]:  # ties: the earlier window
                    best[chunk] = (key, w)
        for chunk, (_, w) in sorted(best.items()):
            windows[w].owned.append(chunk)
        return windows

    def _ownership_key(self, index: int, window: Window, context: int) -> tuple[int, ...]:
        """How much chunk-owning window ``index`` is worth under :attr:`ownership` (larger wins; ``context``: tokens
        on the chunk's poorer side in the window)."""
        if self.ownership == "earliest":
            return (-index,)
        if self.ownership == "head":  # a window that holds the document's head: the first one, or an anchored one
            return (int(index == 0 or window.head is not None), context)
        return (context,)

    def _title_ids(self, titles: Sequence[str | None] | None, n: int) -> list[list[int] | None]:
        """Token ids of each document's title (None where absent or blank, :func:`conteb.text.is_blank`, or under the
        plain policy)."""
        if titles is None or self.window_policy != "anchored":
            return [None] * n
        if len(titles) != n:
            raise ValueError(f"titles: got {len(titles)} for {n} documents (one title, or None, per document)")
        given = [(i, t.strip()) for i, t in enumerate(titles) if t is not None and not is_blank(t)]
        tokenized = self.tokenize([title for _, title in given])
        out: list[list[int] | None] = [None] * n
        for (i, _), ids in zip(given, tokenized, strict=True):
            out[i] = ids
        return out

    def layout(self, chunks: list[str], title: str | None = None) -> list[Window]:
        """The windows of one document (one window when it fits in ``max_length`` tokens)."""
        return self._layout_plan(self.plans([chunks])[0], self._title_ids([title], 1)[0])

    def layouts(
        self,
        documents: Sequence[Sequence[str]],
        mode: Context,
        titles: Sequence[str | None] | None = None,
    ) -> list[list[Window]]:
        """Windows per document; in independent mode one window per chunk (titles unused)."""
        plans = self.plans(documents)
        if mode == "late":
            title_ids = self._title_ids(titles, len(plans))
            return [self._layout_plan(plan, t) for plan, t in zip(plans, title_ids, strict=True)]
        pool_all = self.policy.independent_pool == "all"
        layouts = []
        for plan in plans:
            plan = self._truncate(plan)
            windows = []
            for index in range(len(plan.chunks)):
                window = self._build(plan, index, index + 1, pool_all=pool_all)
                if not pool_all:
                    window.owned.append(index)
                windows.append(window)
            layouts.append(windows)
        return layouts
