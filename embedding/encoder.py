"""Late-chunking encoder: contextual chunk vectors from one forward pass over a whole document.

Windows (which tokens go into which model input, and which of them make each chunk's vector) are planned by
:mod:`embedding.windows`; this module runs them through the transformer and pools, following the ConTEB/InSeNT
paper's public code (Conti et al., 2025, "Context is Gold to find the Gold Passage"; illuin-tech/contextual-embeddings):

* **Pooling**: a chunk's vector is the mean of the last hidden states of its pooled tokens (its own tokens, plus
  ``[CLS]`` for the first chunk of a window where the policy says so), then L2 normalisation. Token mode keeps each
  chunk's token states instead, L2-normalised per token (ColBERT), over the same positions.
* **Batching**: the windows of all documents are sorted by length and cut into batches of at most ``token_budget``
  padded tokens (``batch size × longest window``); results come back in input order.
* **Queries**: ``query_prefix + query``, truncated to ``model.max_seq_length``, through the sentence-transformers
  modules (single vectors) or the transformer's token states (token mode, ``[CLS]`` and ``[SEP]`` kept).

``forward_*`` keep autograd (training); ``encode_*`` run in inference mode (bf16 autocast on CUDA) and return NumPy.
With ``show_progress``, ``encode_*`` draw a tqdm bar (stderr) described as ``<progress_label>: <phase>``
(:func:`progress_desc`: the system being encoded, then ``documents`` (late) or ``chunks`` (independent),
``document tokens`` or ``chunk tokens``, ``queries``, ``query tokens``); without a label, the phase alone.
Shapes: ``D`` the embedding dimension; document outputs are ``[n_chunks, D]`` per document.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer
from tqdm import tqdm

from embedding.models import hf_backbone
from embedding.windows import DEFAULT_WINDOW_OVERLAP_CHUNKS, Context, PoolingPolicy, Window, WindowPlanner, WindowPolicy

logger = logging.getLogger(__name__)


def _last_hidden(out: Any) -> torch.Tensor:
    """The last hidden states of a transformer's output (a model output object or a tuple; the module call is
    untyped)."""
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


def progress_desc(label: str, phase: str) -> str:
    """A progress bar's description: ``<label>: <phase>`` (who is encoding, then what), the phase alone without a
    label."""
    return f"{label}: {phase}" if label else phase


def _document_phase(mode: Context, tokens: bool = False) -> str:
    """What a document encode in ``mode`` goes through: ``documents`` (late) or ``chunks`` (independent); in token
    mode ``document tokens`` or ``chunk tokens``."""
    if mode == "late":
        return "document tokens" if tokens else "documents"
    return "chunk tokens" if tokens else "chunks"


def _check_mode(mode: str) -> None:
    if mode not in ("late", "independent"):
        raise ValueError(f"unknown mode {mode!r}: expected 'late' or 'independent'")


class LateChunkingEncoder:
    """Contextual chunk embeddings (late chunking) and query embeddings from a sentence-transformers model.

    ``max_length`` (tokens per window) defaults to ``model.max_seq_length``; ``token_budget`` bounds the padded
    tokens of one forward batch (``batch size × longest window``). ``window_policy`` / ``anchor_share``: plain or
    anchored windows (:mod:`embedding.windows`).

    Counters (cumulative over the encoder's life, for reports): ``truncated_chunks``; ``anchor_tokens`` (head tokens
    added to anchored windows, their ``[SEP]`` excluded); ``forwarded_windows`` and ``forwarded_tokens`` (sequences
    and real, unpadded tokens run through the transformer by the document paths).
    """

    def __init__(
        self,
        model: SentenceTransformer,
        policy: PoolingPolicy | None = None,
        max_length: int | None = None,
        window_overlap_chunks: int = DEFAULT_WINDOW_OVERLAP_CHUNKS,
        query_prefix: str = "",
        document_prefix: str = "",
        token_budget: int = 16384,
        window_policy: WindowPolicy = "plain",
        anchor_share: float = 0.4,
    ) -> None:
        self.model = model
        self.policy = policy or PoolingPolicy()
        self.tokenizer = model.tokenizer
        self.transformer = hf_backbone(model)
        length = max_length or model.max_seq_length
        if length is None:
            raise ValueError("max_length: the model has no max_seq_length, give one")
        self.max_length = int(length)
        self.planner = WindowPlanner(
            self.tokenizer,
            self.policy,
            self.max_length,
            window_overlap_chunks=window_overlap_chunks,
            document_prefix=document_prefix,
            window_policy=window_policy,
            anchor_share=anchor_share,
        )
        self.window_overlap_chunks = self.planner.window_overlap_chunks
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.token_budget = int(token_budget)
        self.window_policy: WindowPolicy = window_policy
        self.anchor_share = float(anchor_share)
        self.forwarded_windows = 0
        self.forwarded_tokens = 0
        pad = self.tokenizer.pad_token_id
        self.pad_id: int = pad if pad is not None else 0
        self._use_sdpa()

    @property
    def truncated_chunks(self) -> int:
        """Chunks cut to fit a window so far (:class:`embedding.windows.WindowPlanner`)."""
        return self.planner.truncated_chunks

    @property
    def anchor_tokens(self) -> int:
        """Head tokens added to anchored windows so far (:class:`embedding.windows.WindowPlanner`)."""
        return self.planner.anchor_tokens

    @property
    def head_cap(self) -> int:
        """The most head tokens an anchored window holds: ``floor(anchor_share * max_length)``."""
        return self.planner.head_cap

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text without special tokens (one batched tokenizer call)."""
        return self.planner.tokenize(texts)

    def layout(self, chunks: list[str], title: str | None = None) -> list[Window]:
        """The windows of one document (one window when it fits in ``max_length`` tokens)."""
        return self.planner.layout(chunks, title)

    def _layouts(
        self, documents: Sequence[Sequence[str]], mode: Context, titles: Sequence[str | None] | None = None
    ) -> list[list[Window]]:
        """Windows per document; in independent mode one window per chunk (titles unused)."""
        return self.planner.layouts(documents, mode, titles)

    # ------------------------------------------------------------------ setup

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live."""
        return self.model.device

    @property
    def dimension(self) -> int:
        """``D``, the model's embedding dimension (``ValueError`` for a model that declares none)."""
        dim = self.model.get_embedding_dimension()
        if dim is None:
            raise ValueError(f"{type(self.model).__name__} declares no embedding dimension")
        return dim

    def _use_sdpa(self) -> None:
        """Switch the transformer to PyTorch SDPA attention when it runs eager attention and supports SDPA."""
        config = getattr(self.transformer, "config", None)
        current = getattr(config, "_attn_implementation", None)
        if current == "eager" and getattr(self.transformer, "_supports_sdpa", False):
            try:
                self.transformer.set_attn_implementation("sdpa")
            except (ValueError, ImportError, AttributeError) as error:  # pragma: no cover - depends on the model
                logger.info("keeping eager attention: %s", error)

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
        hidden = _last_hidden(out)
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
        self, layouts: list[list[Window]], tokens: bool, show_progress: bool = False, desc: str = "documents"
    ) -> list[list[torch.Tensor]]:
        """Encode every window of every document; per document, per chunk a ``[D]`` (or ``[n_tokens, D]``) tensor.
        ``desc``: the progress bar's description (with ``show_progress``).

        Every chunk is owned by exactly one window (:mod:`embedding.windows`), so every chunk gets its tensor; a
        chunk left without one is a planner bug (``RuntimeError``).
        """
        flat_windows = [(d, w) for d, windows in enumerate(layouts) for w in windows]
        results: list[list[torch.Tensor | None]] = [
            [None] * (max((c for w in windows for c in w.owned), default=-1) + 1) for windows in layouts
        ]
        lengths = [len(w.input_ids) for _, w in flat_windows]
        self.forwarded_windows += len(lengths)
        self.forwarded_tokens += sum(lengths)
        batches = list(self._batches(lengths))
        for batch in tqdm(batches, desc=desc, disable=not show_progress):
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
        complete: list[list[torch.Tensor]] = []
        for document, chunks in enumerate(results):
            filled = [piece for piece in chunks if piece is not None]
            if len(filled) != len(chunks):
                raise RuntimeError(f"document {document}: {len(chunks) - len(filled)} chunk(s) owned by no window")
            complete.append(filled)
        return complete

    def forward_documents(
        self,
        documents: list[list[str]],
        mode: Context = "late",
        *,
        titles: Sequence[str | None] | None = None,
    ) -> list[torch.Tensor]:
        """Training path (autograd on): per document a ``[n_chunks, D]`` tensor of L2-normalised chunk vectors.

        ``mode="independent"`` encodes each chunk alone (the no-context "+Training" control). ``titles``: one per
        document (or None), used by anchored windows only.
        """
        results = self._run(self._layouts(documents, mode, titles), tokens=False)
        return [
            torch.stack(vectors) if vectors else torch.zeros(0, self.dimension, device=self.device)
            for vectors in results
        ]

    def forward_document_tokens(
        self,
        documents: list[list[str]],
        mode: Context = "late",
        *,
        titles: Sequence[str | None] | None = None,
    ) -> list[list[torch.Tensor]]:
        """Token mode (autograd on): per document, per chunk a ``[n_tokens, D]`` tensor, each token L2-normalised."""
        return self._run(self._layouts(documents, mode, titles), tokens=True)

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
        hidden = _last_hidden(out)
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
        mode: Context = "late",
        show_progress: bool = False,
        *,
        titles: Sequence[str | None] | None = None,
        progress_label: str = "",
    ) -> list[np.ndarray]:
        """Inference: per document a float32 ``[n_chunks, D]`` array, in the input order.

        Windows of all documents are sorted by token length and batched by ``token_budget``. ``titles``: one per
        document (or None), used by anchored windows only. ``progress_label``: names the bar (module docstring).
        """
        _check_mode(mode)
        desc = progress_desc(progress_label, _document_phase(mode))
        with self._inference():
            layouts = self._layouts(documents, mode, titles)
            results = self._run(layouts, tokens=False, show_progress=show_progress, desc=desc)
            return [
                torch.stack(v).float().cpu().numpy() if v else np.zeros((0, self.dimension), dtype=np.float32)
                for v in results
            ]

    def encode_queries(
        self, queries: list[str], batch_size: int = 128, show_progress: bool = False, *, progress_label: str = ""
    ) -> np.ndarray:
        """Inference: float32 ``[n, D]`` query vectors (sorted by length for batching, returned in input order).
        ``progress_label``: names the bar (module docstring)."""
        out = np.zeros((len(queries), self.dimension), dtype=np.float32)
        order = sorted(range(len(queries)), key=lambda i: len(queries[i]), reverse=True)
        starts = range(0, len(order), batch_size)
        with self._inference():
            desc = progress_desc(progress_label, "queries")
            for start in tqdm(starts, desc=desc, disable=not show_progress):
                index = order[start : start + batch_size]
                out[index] = self.forward_queries([queries[i] for i in index]).float().cpu().numpy()
        return out

    TOKEN_SLICE_CHUNKS = 2048
    """Chunks per slice in :meth:`encode_document_tokens` (bounds the float32 states held at once)."""

    def encode_document_tokens(
        self,
        documents: list[list[str]],
        mode: Context = "late",
        show_progress: bool = False,
        *,
        titles: Sequence[str | None] | None = None,
        progress_label: str = "",
    ) -> list[list[np.ndarray]]:
        """Inference, token mode: per document, per chunk a float16 ``[n_tokens, D]`` array, each token L2-normalised.

        The tokens are those :meth:`forward_document_tokens` keeps (the first chunk of a window also holds ``[CLS]``
        under the default policy; never an anchored head); float16 halves the memory of a corpus of token vectors.
        Documents are encoded in slices of at most ``TOKEN_SLICE_CHUNKS`` chunks so that only one slice's float32
        states are held at a time (the bar counts slices). ``titles``: one per document (or None), used by anchored
        windows only. ``progress_label``: names the bar (module docstring).
        """
        _check_mode(mode)
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
            desc = progress_desc(progress_label, _document_phase(mode, tokens=True))
            for part in tqdm(slices, desc=desc, disable=not show_progress or len(slices) < 2):
                layouts = self._layouts([documents[i] for i in part], mode, [doc_titles[i] for i in part])
                results = self._run(layouts, tokens=True)
                for chunks in results:
                    out.append([t.to(torch.float16).cpu().numpy() for t in chunks])
        return out

    def encode_query_tokens(
        self, queries: list[str], batch_size: int = 128, show_progress: bool = False, *, progress_label: str = ""
    ) -> list[np.ndarray]:
        """Inference, token mode: per query a float32 ``[n_tokens, D]`` array (padding removed, tokens L2-normalised).

        Same tokens as :meth:`forward_query_tokens`: ``query_prefix + query`` truncated to ``model.max_seq_length``,
        ``[CLS]`` and ``[SEP]`` included. ``progress_label``: names the bar (module docstring).
        """
        out: list[np.ndarray] = [np.zeros((0, 0), np.float32)] * len(queries)
        order = sorted(range(len(queries)), key=lambda i: len(queries[i]), reverse=True)
        starts = range(0, len(order), batch_size)
        with self._inference():
            desc = progress_desc(progress_label, "query tokens")
            for start in tqdm(starts, desc=desc, disable=not show_progress):
                index = order[start : start + batch_size]
                vectors, mask = self.forward_query_tokens([queries[i] for i in index])
                array, lengths = vectors.float().cpu().numpy(), mask.sum(dim=1).cpu().tolist()
                for row, i in enumerate(index):
                    out[i] = array[row, : lengths[row]].copy()
        return out
