"""Late-chunking encoder: contextual chunk vectors from one forward pass over a whole document.

Source of the rules: the ConTEB/InSeNT paper's public code (Conti et al., 2025, "Context is Gold to find the Gold
Passage"), as summarised in ``DESIGN.md`` ("Late chunking (public code)"):

* **Layout** (``boundaries="separator"``): ``[CLS] prefix c_1 [SEP] c_2 [SEP] … c_n [SEP]``, every chunk tokenized on
  its own (no special tokens) and the chunks joined with the tokenizer's separator token. ``boundaries="offsets"``
  tokenizes ``sep_token.join(chunks)`` once and takes each chunk's tokens from the offset mapping (the tokens whose
  character start lies inside the chunk); the tokens between two chunks (normally one ``[SEP]``) are kept as the gap.
  The document prefix (e.g. ``search_document: ``) is tokenized alone and placed right after ``[CLS]``.
* **Pooling**: a chunk's vector is the mean of the last hidden states of its own tokens, then L2 normalisation.
  The first chunk of a sequence also averages the leading ``[CLS]`` (``keep_cls_in_first``, as the public code);
  separators, the final ``[SEP]`` and the prefix are never pooled. ``exclude_special`` (ablation) drops ``[CLS]`` too.
  With a non-empty ``document_prefix`` the first chunk does *not* average ``[CLS]`` (``cls_with_prefix=False``): the
  public code (``LongContextEmbeddingModel.forward`` with ``add_prefixes``) cuts ``[CLS]`` and the prefix tokens off
  the token states before pooling, so its chunk 0 starts at its own first token.
  Token mode keeps each chunk's token states, L2-normalised per token (ColBERT), over the same positions.
* **Windows** (documents longer than ``max_length`` tokens, our rule): windows of whole chunks, filled greedily
  from the first chunk; the next window starts ``window_overlap_chunks`` chunks before the end of the previous
  one (fewer when the overlap would not leave room for a new chunk; always at least one chunk later). A chunk
  seen in several windows takes its vector from the window where it has the most context on its *poorer* side:
  ``argmax_w min(tokens before the chunk in w, tokens after it in w)``, ties to the earlier window. A single
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
  the same tokenization, batching and pooling code. ``PoolingPolicy.independent_pool="all"`` (default) averages
  every token of that sequence, which is sentence-transformers' mean pooling, so the vectors equal
  ``model.encode(prefix + chunk)``; ``"policy"`` uses the late-chunking rules above (isolates the effect of context).

Shapes: ``D`` the embedding dimension; document outputs are ``[n_chunks, D]`` per document.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer
from tqdm import tqdm

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolingPolicy:
    """Which tokens make a chunk's vector (see the module docstring for the sources)."""

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
class _Plan:
    """A document tokenized once: chunk tokens, the gap tokens between consecutive chunks."""

    chunks: list[list[int]]
    gaps: list[list[int]]


class LateChunkingEncoder:
    """Contextual chunk embeddings (late chunking) and query embeddings from a sentence-transformers model.

    ``max_length`` (tokens per window) defaults to ``model.max_seq_length``; ``token_budget`` bounds the padded
    tokens of one forward batch (``batch size × longest window``). ``window_policy`` / ``anchor_share``: plain or
    anchored windows (module docstring).

    Counters (cumulative over the encoder's life, for reports): ``truncated_chunks``; ``anchor_tokens`` (head tokens
    added to anchored windows, their ``[SEP]`` excluded); ``forwarded_windows`` and ``forwarded_tokens`` (sequences
    and real, unpadded tokens run through the transformer by the document paths).
    """

    def __init__(
        self,
        model: SentenceTransformer,
        policy: PoolingPolicy | None = None,
        max_length: int | None = None,
        window_overlap_chunks: int = 2,
        query_prefix: str = "",
        document_prefix: str = "",
        token_budget: int = 16384,
        window_policy: Literal["plain", "anchored"] = "plain",
        anchor_share: float = 0.4,
    ) -> None:
        if window_policy not in ("plain", "anchored"):
            raise ValueError(f"window_policy must be 'plain' or 'anchored', got {window_policy!r}")
        if not 0.0 < float(anchor_share) < 1.0:
            raise ValueError(f"anchor_share must be in (0, 1), got {anchor_share}")
        self.model = model
        self.policy = policy or PoolingPolicy()
        self.tokenizer = model.tokenizer
        self.transformer = model[0].auto_model
        self.max_length = int(max_length or model.max_seq_length)
        self.window_overlap_chunks = max(0, int(window_overlap_chunks))
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.token_budget = int(token_budget)
        self.window_policy: Literal["plain", "anchored"] = window_policy
        self.anchor_share = float(anchor_share)
        self.truncated_chunks = 0
        self.anchor_tokens = 0
        self.forwarded_windows = 0
        self.forwarded_tokens = 0
        tok = self.tokenizer
        if tok.cls_token_id is None or tok.sep_token_id is None:
            raise ValueError("the tokenizer needs a [CLS] and a [SEP] token for late chunking")
        self.cls_id: int = tok.cls_token_id
        self.sep_id: int = tok.sep_token_id
        self.pad_id: int = tok.pad_token_id if tok.pad_token_id is not None else 0
        self.prefix_ids: list[int] = self._tokenize([document_prefix])[0] if document_prefix else []
        if self.max_length < len(self.prefix_ids) + 3:
            raise ValueError(f"max_length {self.max_length} leaves no room for a chunk")
        self.head_cap = int(self.anchor_share * self.max_length)  # floor(anchor_share * max_length) head tokens
        self._use_sdpa()

    # ------------------------------------------------------------------ setup

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live."""
        return self.model.device

    def _use_sdpa(self) -> None:
        """Switch the transformer to PyTorch SDPA attention when it runs eager attention and supports SDPA."""
        config = getattr(self.transformer, "config", None)
        current = getattr(config, "_attn_implementation", None)
        if current == "eager" and getattr(self.transformer, "_supports_sdpa", False):
            try:
                self.transformer.set_attn_implementation("sdpa")
            except (ValueError, ImportError, AttributeError) as error:  # pragma: no cover - depends on the model
                logger.info("keeping eager attention: %s", error)

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text without special tokens (one batched tokenizer call)."""
        if not texts:
            return []
        return self.tokenizer(list(texts), add_special_tokens=False, truncation=False)["input_ids"]

    # ------------------------------------------------------------------ layout

    def _plans(self, documents: Sequence[Sequence[str]]) -> list[_Plan]:
        """Tokenize every document (all chunks of all documents in one tokenizer call for ``separator``)."""
        if self.policy.boundaries == "separator":
            flat = self._tokenize([chunk for doc in documents for chunk in doc])
            plans, start = [], 0
            for doc in documents:
                ids = flat[start : start + len(doc)]
                start += len(doc)
                plans.append(_Plan(chunks=ids, gaps=[[self.sep_id] for _ in range(max(0, len(doc) - 1))]))
            return plans
        return [self._offsets_plan(doc) for doc in documents]

    def _offsets_plan(self, chunks: Sequence[str]) -> _Plan:
        """Tokenize ``sep_token.join(chunks)`` once; assign tokens to chunks by their character start."""
        sep = self.tokenizer.sep_token
        starts, position = [], 0
        for chunk in chunks:
            starts.append(position)
            position += len(chunk) + len(sep)
        ends = np.array([s + len(c) for s, c in zip(starts, chunks, strict=True)], dtype=np.int64)
        encoded = self.tokenizer(
            sep.join(chunks), add_special_tokens=False, truncation=False, return_offsets_mapping=True
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
        return _Plan(chunks=chunk_ids, gaps=gaps)

    def _truncate(self, plan: _Plan) -> _Plan:
        """Cut chunks longer than one window can hold (``max_length - 2 - len(prefix)`` tokens); count them."""
        cap = self.max_length - 2 - len(self.prefix_ids)
        over = [i for i, ids in enumerate(plan.chunks) if len(ids) > cap]
        if over:
            self.truncated_chunks += len(over)
            logger.warning("%d chunk(s) longer than %d tokens truncated to fit the context", len(over), cap)
            plan = _Plan(chunks=[ids[:cap] for ids in plan.chunks], gaps=plan.gaps)
        return plan

    def _window_ranges(self, plan: _Plan, head: int = 0) -> list[tuple[int, int, int]]:
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

    def _head(self, plan: _Plan, title_ids: Sequence[int] | None) -> list[int]:
        """The anchored head: title tokens, then the first chunk's tokens, cut to ``head_cap`` (empty when plain)."""
        if self.window_policy != "anchored" or not plan.chunks:
            return []
        return [*(title_ids or []), *plan.chunks[0]][: self.head_cap]

    def _build(self, plan: _Plan, a: int, b: int, *, pool_all: bool = False, head: Sequence[int] = ()) -> Window:
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

    def _layout_plan(self, plan: _Plan, title_ids: Sequence[int] | None = None) -> list[Window]:
        """Windows of one tokenized document, each chunk owned by exactly one window."""
        plan = self._truncate(plan)
        head = self._head(plan, title_ids)
        windows = []
        for a, b, h in self._window_ranges(plan, len(head)):
            windows.append(self._build(plan, a, b, head=head[:h]))
            self.anchor_tokens += h
        best: dict[int, tuple[int, int]] = {}  # chunk -> (context on its poorer side, window index)
        for w, window in enumerate(windows):
            for chunk, (start, end) in zip(window.chunk_ids, window.spans, strict=True):
                context = min(start, len(window.input_ids) - end)
                if chunk not in best or context > best[chunk][0]:
                    best[chunk] = (context, w)
        for chunk, (_, w) in sorted(best.items()):
            windows[w].owned.append(chunk)
        return windows

    def _title_ids(self, titles: Sequence[str | None] | None, n: int) -> list[list[int] | None]:
        """Token ids of each document's title (None where absent or blank, or under the plain policy)."""
        if titles is None or self.window_policy != "anchored":
            return [None] * n
        if len(titles) != n:
            raise ValueError(f"titles: got {len(titles)} for {n} documents (one title, or None, per document)")
        given = [i for i, t in enumerate(titles) if t is not None and t.strip()]
        tokenized = self._tokenize([titles[i].strip() for i in given])  # type: ignore[union-attr]
        out: list[list[int] | None] = [None] * n
        for i, ids in zip(given, tokenized, strict=True):
            out[i] = ids
        return out

    def layout(self, chunks: list[str], title: str | None = None) -> list[Window]:
        """The windows of one document (one window when it fits in ``max_length`` tokens)."""
        return self._layout_plan(self._plans([chunks])[0], self._title_ids([title], 1)[0])

    def _layouts(
        self,
        documents: Sequence[Sequence[str]],
        mode: Literal["late", "independent"],
        titles: Sequence[str | None] | None = None,
    ) -> list[list[Window]]:
        """Windows per document; in independent mode one window per chunk (titles unused)."""
        plans = self._plans(documents)
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

    # ------------------------------------------------------------------ forward

    def _batches(self, lengths: Sequence[int]) -> Iterator[list[int]]:
        """Window indices sorted by length, cut into batches of at most ``token_budget`` padded tokens."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
        batch: list[int] = []
        for index in order:
            longest = lengths[batch[0]] if batch else lengths[index]
            if batch and (len(batch) + 1) * longest > self.token_budget:
                yield batch
                batch = []
            batch.append(index)
        if batch:
            yield batch

    def _hidden(self, windows: Sequence[Window]) -> tuple[torch.Tensor, int]:
        """Last hidden states of a batch, flattened: ``[B * T, D]`` and ``T`` (the batch's longest window)."""
        longest = max(len(w.input_ids) for w in windows)
        ids = torch.full((len(windows), longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(windows), longest), dtype=torch.long)
        for row, window in enumerate(windows):
            ids[row, : len(window.input_ids)] = torch.as_tensor(window.input_ids, dtype=torch.long)
            mask[row, : len(window.input_ids)] = 1
        device = self.device
        out = self.transformer(input_ids=ids.to(device), attention_mask=mask.to(device))
        hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return hidden.reshape(-1, hidden.shape[-1]), longest

    @staticmethod
    def _positions(windows: Sequence[Window], longest: int) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
        """Flat token positions, their segment ids, and ``(window row, chunk id)`` per segment (owned chunks)."""
        positions: list[np.ndarray] = []
        segments: list[tuple[int, int]] = []
        counts: list[int] = []
        for row, window in enumerate(windows):
            owned = set(window.owned)
            for k, (chunk, (start, end)) in enumerate(zip(window.chunk_ids, window.spans, strict=True)):
                if chunk not in owned:
                    continue
                span = np.arange(start, end, dtype=np.int64)
                if k == 0 and window.cls_in_first:
                    span = np.concatenate([np.zeros(1, dtype=np.int64), span])
                positions.append(span + row * longest)
                counts.append(span.size)
                segments.append((row, chunk))
        flat = np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)
        return flat, np.asarray(counts, dtype=np.int64), segments

    def _run(
        self, layouts: list[list[Window]], tokens: bool, show_progress: bool = False
    ) -> list[list[torch.Tensor | None]]:
        """Encode every window of every document; per document, per chunk a ``[D]`` (or ``[n_tokens, D]``) tensor."""
        flat_windows = [(d, w) for d, windows in enumerate(layouts) for w in windows]
        results: list[list[torch.Tensor | None]] = [
            [None] * (max((c for w in windows for c in w.owned), default=-1) + 1) for windows in layouts
        ]
        lengths = [len(w.input_ids) for _, w in flat_windows]
        self.forwarded_windows += len(lengths)
        self.forwarded_tokens += sum(lengths)
        batches = list(self._batches(lengths))
        for batch in tqdm(batches, desc="late chunking", disable=not show_progress):
            windows = [flat_windows[i][1] for i in batch]
            hidden, longest = self._hidden(windows)
            flat, counts, segments = self._positions(windows, longest)
            if not segments:
                continue
            states = hidden[torch.from_numpy(flat).to(hidden.device)].float()
            if tokens:
                pieces = list(torch.split(F.normalize(states, dim=-1), counts.tolist()))
            else:
                seg = torch.repeat_interleave(torch.arange(len(segments)), torch.from_numpy(counts)).to(hidden.device)
                sums = torch.zeros(len(segments), states.shape[-1], device=hidden.device).index_add(0, seg, states)
                means = sums / torch.from_numpy(counts).clamp(min=1).to(hidden.device, sums.dtype).unsqueeze(-1)
                pieces = list(F.normalize(means, dim=-1))
            for (row, chunk), piece in zip(segments, pieces, strict=True):
                results[flat_windows[batch[row]][0]][chunk] = piece
        return results

    def forward_documents(
        self,
        documents: list[list[str]],
        mode: Literal["late", "independent"] = "late",
        *,
        titles: Sequence[str | None] | None = None,
    ) -> list[torch.Tensor]:
        """Training path (autograd on): per document a ``[n_chunks, D]`` tensor of L2-normalised chunk vectors.

        ``mode="independent"`` encodes each chunk alone (the no-context "+Training" control). ``titles``: one per
        document (or None), used by anchored windows only.
        """
        results = self._run(self._layouts(documents, mode, titles), tokens=False)
        dim = self.model.get_embedding_dimension()
        return [
            torch.stack(vectors) if vectors else torch.zeros(0, dim, device=self.device)  # type: ignore[arg-type]
            for vectors in results
        ]

    def forward_document_tokens(
        self,
        documents: list[list[str]],
        mode: Literal["late", "independent"] = "late",
        *,
        titles: Sequence[str | None] | None = None,
    ) -> list[list[torch.Tensor]]:
        """Token mode (autograd on): per document, per chunk a ``[n_tokens, D]`` tensor, each token L2-normalised."""
        return self._run(self._layouts(documents, mode, titles), tokens=True)  # type: ignore[return-value]

    def _query_features(self, queries: Sequence[str]) -> dict[str, torch.Tensor]:
        """Tokenized queries (with ``query_prefix``), truncated to ``model.max_seq_length``, on the model's device."""
        features = self.tokenizer(
            [self.query_prefix + q for q in queries],
            padding=True,
            truncation=True,
            max_length=self.model.max_seq_length,
            return_tensors="pt",
        )
        return {key: value.to(self.device) for key, value in features.items()}

    def forward_queries(self, queries: list[str]) -> torch.Tensor:
        """Query vectors ``[n, D]`` (L2-normalised, autograd on), through the sentence-transformers modules."""
        out = self.model(self._query_features(queries))
        return F.normalize(out["sentence_embedding"].float(), dim=-1)

    def forward_query_tokens(self, queries: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Query token vectors ``[n, q_len, D]`` (per-token L2-normalised, zero at padding) and the mask ``[n, q_len]``.

        All real tokens count, ``[CLS]`` and ``[SEP]`` included (ColBERT keeps them).
        """
        features = self._query_features(queries)
        out = self.transformer(input_ids=features["input_ids"], attention_mask=features["attention_mask"])
        hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        mask = features["attention_mask"].bool()
        return F.normalize(hidden.float(), dim=-1) * mask.unsqueeze(-1), mask

    # ------------------------------------------------------------------ inference

    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        """``eval()`` + ``inference_mode``, with bf16 autocast on CUDA; restores every module's training flag."""
        flags = [(module, module.training) for module in self.model.modules()]
        self.model.eval()
        autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16) if self.device.type == "cuda" else contextlib.nullcontext()
        )
        try:
            with torch.inference_mode(), autocast:
                yield
        finally:
            for module, training in flags:
                module.training = training

    def encode_documents(
        self,
        documents: list[list[str]],
        mode: Literal["late", "independent"] = "late",
        show_progress: bool = False,
        *,
        titles: Sequence[str | None] | None = None,
    ) -> list[np.ndarray]:
        """Inference: per document a float32 ``[n_chunks, D]`` array, in the input order.

        Windows of all documents are sorted by token length and batched by ``token_budget``. ``titles``: one per
        document (or None), used by anchored windows only.
        """
        if mode not in ("late", "independent"):
            raise ValueError(f"unknown mode {mode!r}: expected 'late' or 'independent'")
        dim = self.model.get_embedding_dimension()
        with self._inference():
            results = self._run(self._layouts(documents, mode, titles), tokens=False, show_progress=show_progress)
            return [
                torch.stack(v).float().cpu().numpy() if v else np.zeros((0, dim), dtype=np.float32)  # type: ignore[arg-type]
                for v in results
            ]

    def encode_queries(self, queries: list[str], batch_size: int = 128, show_progress: bool = False) -> np.ndarray:
        """Inference: float32 ``[n, D]`` query vectors (sorted by length for batching, returned in input order)."""
        dim = self.model.get_embedding_dimension()
        out = np.zeros((len(queries), dim), dtype=np.float32)
        order = sorted(range(len(queries)), key=lambda i: len(queries[i]), reverse=True)
        starts = range(0, len(order), batch_size)
        with self._inference():
            for start in tqdm(starts, desc="queries", disable=not show_progress):
                index = order[start : start + batch_size]
                out[index] = self.forward_queries([queries[i] for i in index]).float().cpu().numpy()
        return out

    TOKEN_SLICE_CHUNKS = 2048
    """Chunks per slice in :meth:`encode_document_tokens` (bounds the float32 states held at once)."""

    def encode_document_tokens(
        self,
        documents: list[list[str]],
        mode: Literal["late", "independent"] = "late",
        show_progress: bool = False,
        *,
        titles: Sequence[str | None] | None = None,
    ) -> list[list[np.ndarray]]:
        """Inference, token mode: per document, per chunk a float16 ``[n_tokens, D]`` array, each token L2-normalised.

        The tokens are those :meth:`forward_document_tokens` keeps (the first chunk of a window also holds ``[CLS]``
        under the default policy; never an anchored head); float16 halves the memory of a corpus of token vectors.
        Documents are encoded in slices of at most ``TOKEN_SLICE_CHUNKS`` chunks so that only one slice's float32
        states are held at a time. ``titles``: one per document (or None), used by anchored windows only.
        """
        if mode not in ("late", "independent"):
            raise ValueError(f"unknown mode {mode!r}: expected 'late' or 'independent'")
        dim = self.model.get_embedding_dimension()
        if titles is not None and len(titles) != len(documents):
            raise ValueError(f"titles: got {len(titles)} for {len(documents)} documents")
        doc_titles = list(titles) if titles is not None else [None] * len(documents)
        out: list[list[np.ndarray]] = []
        slices: list[list[int]] = [[]]
        size = 0
        for index, document in enumerate(documents):
            if slices[-1] and size + len(document) > self.TOKEN_SLICE_CHUNKS:
                slices.append([])
                size = 0
            slices[-1].append(index)
            size += len(document)
        with self._inference():
            for part in tqdm(slices, desc="token vectors", disable=not show_progress or len(slices) < 2):
                layouts = self._layouts([documents[i] for i in part], mode, [doc_titles[i] for i in part])
                results = self._run(layouts, tokens=True)
                for chunks in results:
                    out.append(
                        [
                            t.to(torch.float16).cpu().numpy() if t is not None else np.zeros((0, dim), np.float16)
                            for t in chunks
                        ]
                    )
        return out

    def encode_query_tokens(
        self, queries: list[str], batch_size: int = 128, show_progress: bool = False
    ) -> list[np.ndarray]:
        """Inference, token mode: per query a float32 ``[n_tokens, D]`` array (padding removed, tokens L2-normalised).

        Same tokens as :meth:`forward_query_tokens`: ``query_prefix + query`` truncated to ``model.max_seq_length``,
        ``[CLS]`` and ``[SEP]`` included.
        """
        out: list[np.ndarray] = [np.zeros((0, 0), np.float32)] * len(queries)
        order = sorted(range(len(queries)), key=lambda i: len(queries[i]), reverse=True)
        starts = range(0, len(order), batch_size)
        with self._inference():
            for start in tqdm(starts, desc="query tokens", disable=not show_progress):
                index = order[start : start + batch_size]
                vectors, mask = self.forward_query_tokens([queries[i] for i in index])
                vectors, lengths = vectors.float().cpu().numpy(), mask.sum(dim=1).cpu().tolist()
                for row, i in enumerate(index):
                    out[i] = vectors[row, : lengths[row]].copy()
        return out
