"""Text documents in, epsilon-SentDP embeddings out: encoder -> recoder -> DeepCandidate.

:class:`SentDPPipeline` is the whole of DeepCandidate (Meehan et al. 2022,
Fig. 2): it is fitted on the PUBLIC training split of a document corpus
(recoder H and candidate set F, App. A.3) and then embeds private
documents, each release spending its epsilon. The candidate set F is the
recoded mean embedding of up to ``n_candidates`` (paper: 5000) public
training documents with at least ``min_sentences`` (paper: 8) sentences;
when a corpus has fewer, all of them are used (the count is in
:meth:`SentDPPipeline.config`).

Saved pipelines (:meth:`save`) hold only public material: the recoder's
weights, the candidate embeddings, and the configuration; nothing about the
private documents. They record the sha256 of their contents, checked on
:meth:`SentDPPipeline.load`. See :mod:`veil.defenses.sentdp` for what the guarantee
covers and what it does not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from veil.defenses.sentdp.mechanism import DeepCandidate, Releases
from veil.defenses.sentdp.recoder import Recoder, RecoderConfig, document_means, train_recoder
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike

if TYPE_CHECKING:  # pragma: no cover
    from veil.corpora.base import Corpus
    from veil.encoders.text import TextEncoder

__all__ = ["SentDPPipeline", "split_documents", "state_sha256"]


def split_documents(S: np.ndarray, offsets: np.ndarray, docs: Sequence[int] | np.ndarray) -> list[np.ndarray]:
    """The (k_i, d) sentence-embedding blocks of the given documents."""
    return [S[offsets[i]:offsets[i + 1]] for i in docs]


@dataclass
class SentDPPipeline:
    """A fitted DeepCandidate pipeline (public parts only).

    ``recoder`` is None for the ablation without H (candidates and sentences
    then live in the encoder's space).
    """

    candidates: np.ndarray
    recoder: Recoder | None
    candidate_docs: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    encoder: TextEncoder | None = None

    # ------------------------------------------------------------ fitting
    @classmethod
    def fit_vectors(cls, S: np.ndarray, offsets: np.ndarray, train_docs: np.ndarray, dev_docs: np.ndarray, *,
                    n_candidates: int = 5000, min_sentences: int = 8, recoder: RecoderConfig | None = RecoderConfig(),
                    seed: int = 0, progress: bool = False) -> SentDPPipeline:
        """Fit on precomputed sentence embeddings of PUBLIC documents (train for H and F, dev for early stopping)."""
        train_docs, dev_docs = np.asarray(train_docs, dtype=np.int64), np.asarray(dev_docs, dtype=np.int64)
        if len(train_docs) == 0 or len(dev_docs) == 0:
            raise DataFormatError("fitting DeepCandidate needs public train and dev documents")
        counts = np.diff(offsets)
        rec = None if recoder is None else train_recoder(S, offsets, train_docs, dev_docs, config=recoder,
                                                         progress=progress)
        eligible = train_docs[counts[train_docs] >= min_sentences]
        if len(eligible) == 0:
            raise DataFormatError(f"no public training document has >= {min_sentences} sentences; lower "
                                  f"min_sentences or use a corpus of longer documents")
        rng = np.random.default_rng(seed)  # choosing PUBLIC documents: a seed is fine here
        chosen = np.sort(rng.choice(eligible, size=min(n_candidates, len(eligible)), replace=False))
        blocks = split_documents(S, offsets, chosen)
        flat = np.concatenate(blocks)
        sub_offsets = np.concatenate([[0], np.cumsum([len(b) for b in blocks])])
        recoded = flat if rec is None else rec.recode(flat)
        candidates = document_means(recoded, sub_offsets).astype(np.float64)
        info = {"n_candidates": int(len(chosen)), "n_candidates_requested": int(n_candidates),
                "eligible_documents": int(len(eligible)), "min_sentences": int(min_sentences),
                "recoder": None if rec is None else {**rec.config.to_dict(), "best_epoch": rec.best_epoch},
                "seed": int(seed)}
        return cls(candidates=candidates, recoder=rec, candidate_docs=chosen, info=info)

    @classmethod
    def fit(cls, corpus: Corpus, *, encoder: TextEncoder | None = None, n_candidates: int = 5000,
            min_sentences: int = 8, recoder: RecoderConfig | None = RecoderConfig(), seed: int = 0,
            progress: bool = True) -> SentDPPipeline:
        """Fit on a document corpus' train (and dev) split, encoding its sentences through the cache."""
        from veil.encoders import TextEncoder, encode_sentences

        if corpus.documents is None:
            raise InvalidParameterError(f"corpus {corpus.name!r} has no sentence lists; DeepCandidate needs "
                                        f"multi-sentence documents (e.g. news-articles, spam-assassin)")
        encoder = encoder or TextEncoder("minilm")
        S, offsets = encode_sentences(encoder, corpus, progress=progress)
        counts = np.diff(offsets)
        train = np.asarray([i for i in corpus.indices("train") if counts[i] >= 1], dtype=np.int64)
        dev = np.asarray([i for i in corpus.indices("dev") if counts[i] >= 1], dtype=np.int64)
        pipe = cls.fit_vectors(S, offsets, train, dev, n_candidates=n_candidates, min_sentences=min_sentences,
                               recoder=recoder, seed=seed, progress=progress)
        pipe.encoder = encoder
        pipe.info.update({"corpus": corpus.name, "encoder": encoder.model_id})
        return pipe

    # ------------------------------------------------------------ using
    @property
    def dim(self) -> int:
        return int(self.candidates.shape[1])

    def config(self) -> dict[str, Any]:
        return {"m": int(len(self.candidates)), "dim": self.dim, **self.info}

    def mechanism(self, *, epsilon: float, n_projections: int = 50, depth: str = "tukey-min",
                  rng: RngLike = None) -> DeepCandidate:
        """The DeepCandidate mechanism over this pipeline's candidates."""
        return DeepCandidate(candidates=self.candidates, epsilon=epsilon, n_projections=n_projections, depth=depth,
                             rng=rng)

    def recode(self, sentence_vectors: np.ndarray) -> np.ndarray:
        """Sentence embeddings (n, d) through H (identity without a recoder)."""
        return sentence_vectors if self.recoder is None else self.recoder.recode(sentence_vectors)

    def sentence_vectors(self, documents: Sequence[Sequence[str]], *, progress: bool = True) -> list[np.ndarray]:
        """Encode and recode each document's sentences: one (k_i, d) array per document."""
        if self.encoder is None:
            raise InvalidParameterError("this pipeline has no encoder; pass encoder= to load()/fit() or embed "
                                        "vectors with release_vectors()")
        if isinstance(documents, str) or not isinstance(documents, Sequence):
            raise InvalidTypeError("documents must be a list of documents, each a list of sentences")
        for n, doc in enumerate(documents):
            if isinstance(doc, str) or not isinstance(doc, Sequence):
                raise InvalidTypeError(f"document {n} must be a list of sentence strings, not {type(doc).__name__}")
            if len(doc) == 0:
                raise DataFormatError(f"document {n} has no sentences; SentDP needs at least one")
        flat = [s for doc in documents for s in doc]
        X = self.recode(self.encoder.encode(flat, progress=progress))
        offsets = np.concatenate([[0], np.cumsum([len(doc) for doc in documents])])
        return split_documents(X, offsets, range(len(documents)))

    def embed(self, documents: Sequence[Sequence[str]], *, epsilon: float, n_projections: int = 50,
              depth: str = "tukey-min", rng: RngLike = None, progress: bool = True) -> Releases:
        """epsilon-SentDP embeddings of text documents (lists of sentences); each spends ``epsilon``."""
        mech = self.mechanism(epsilon=epsilon, n_projections=n_projections, depth=depth, rng=rng)
        return mech.release(self.sentence_vectors(documents, progress=progress), progress=progress)

    # ------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> Path:
        """Write the public parts (recoder weights, candidates, config) atomically to one file.

        The file (format 2) records the sha256 of its contents, which
        :meth:`load` checks.
        """
        import torch

        from veil._io import atomic_write

        state: dict[str, Any] = {
            "format": 2, "candidates": torch.as_tensor(self.candidates),
            "candidate_docs": torch.as_tensor(self.candidate_docs), "info": self.info,
            "recoder": None if self.recoder is None else self.recoder.state()}
        state["sha256"] = state_sha256(state)
        path = Path(path)
        with atomic_write(path, "wb") as fh:
            torch.save(state, fh)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, *, encoder: TextEncoder | None = None) -> SentDPPipeline:
        """Read a file written by :meth:`save`, checking its recorded sha256.

        A file whose contents do not match the recorded sha256 raises
        :class:`~veil.errors.CacheCorruptError`; one that is not a saved
        pipeline at all raises :class:`~veil.errors.DataFormatError`. Files
        written before the checksum existed (format 1) are read unchecked.
        """
        import torch

        from veil.errors import CacheCorruptError, ResourceMissingError

        path = Path(path)
        fix = f"SentDPPipeline.fit(corpus).save({str(path)!r})"
        if not path.is_file():
            raise ResourceMissingError(f"SentDP pipeline {path}", fix,
                                       message=f"SentDP pipeline {path} does not exist; fit and save one: {fix}")
        try:
            state = torch.load(path, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
            first = str(exc).split(". ")[0][:200]  # torch appends advice to disable weights_only: never do that here
            raise DataFormatError(f"{path} is not a saved SentDP pipeline or is damaged ({type(exc).__name__}: "
                                  f"{first}); fit and save it again: {fix}") from exc
        if not isinstance(state, dict) or state.get("format") not in (1, 2):
            raise DataFormatError(f"{path} is not a saved SentDP pipeline (format 1 or 2); fit and save one: {fix}")
        if state["format"] == 2:
            recorded = state.get("sha256")
            digest = state_sha256({k: v for k, v in state.items() if k != "sha256"})
            if digest != recorded:
                raise CacheCorruptError(f"SentDP pipeline {path}", f"its contents hash to {digest[:12]}..., the "
                                        f"file records {str(recorded)[:12]}...", fix)
        try:
            rec = None if state["recoder"] is None else Recoder.from_state(state["recoder"])
            return cls(candidates=state["candidates"].numpy(), recoder=rec,
                       candidate_docs=state["candidate_docs"].numpy(), info=dict(state["info"]), encoder=encoder)
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as exc:
            raise DataFormatError(f"{path} is not a complete SentDP pipeline ({type(exc).__name__}: {exc}); fit and "
                                  f"save it again: {fix}") from exc


def state_sha256(state: Any) -> str:
    """sha256 of a saved pipeline's contents: tensors by dtype, shape and bytes, mappings by sorted key."""
    import hashlib

    h = hashlib.sha256()
    _feed(h, state)
    return h.hexdigest()


def _feed(h: Any, obj: Any) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}:".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, Mapping):
        h.update(b"{")
        for key in sorted(obj, key=str):
            _feed(h, str(key))
            _feed(h, obj[key])
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(b"[")
        for item in obj:
            _feed(h, item)
        h.update(b"]")
    else:
        h.update(json.dumps(obj, default=repr).encode() + b";")
