"""The cluster-preserving sentence recoder of DeepCandidate (Meehan et al. 2022, Sec. 4.3, App. A.3).

Deep candidates exist only when the public document embeddings are neither
scattered nor collapsed. The recoder ``H: R^d -> R^d`` (an MLP with four
linear layers, like the paper's MLP^768) is trained on PUBLIC training
documents so that document clusters are kept but spaced apart:

1. embed each training document as the mean of its sentence embeddings and
   run k-means with ``n_clusters`` (paper: 50) centres; a document's cluster
   is its pseudo-label;
2. train H together with a linear model L: the sentences of a document go
   through H, are averaged, and L predicts the document's cluster
   (cross-entropy back-propagated through H).

Departures from the paper, all for CPU budget or clarity: each epoch averages
at most ``max_sentences`` randomly chosen sentences per document (an
unbiased estimate of the mean) instead of all of them; the number of epochs
is chosen by the dev-split cluster loss (the paper: "determined using the
validation set"); the task classifier C_dc is trained afterwards on the
final recoded embeddings (:func:`veil.training.train_head`) instead of in
parallel with its own optimiser: it never sends gradients into H either way.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil.validation import check_int
from veil.errors import DataFormatError

__all__ = ["Recoder", "RecoderConfig", "document_means", "train_recoder"]


@dataclass(frozen=True)
class RecoderConfig:
    n_clusters: int = 50
    epochs: int = 20
    patience: int = 4
    batch_size: int = 64
    lr: float = 1e-3
    max_sentences: int = 32
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def document_means(S: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Mean sentence embedding of every document, float32 (n, d); documents need >= 1 sentence."""
    counts = np.diff(offsets)
    if (counts < 1).any():
        raise DataFormatError(f"{int((counts < 1).sum())} documents have no sentences; drop them first")
    sums = np.add.reduceat(S.astype(np.float64), offsets[:-1], axis=0)
    return (sums / counts[:, None]).astype(np.float32)


@dataclass
class Recoder:
    """A trained recoder H (a torch module) with its training record; ``recode`` maps (n, d) -> (n, d)."""

    module: Any
    dim: int
    config: RecoderConfig
    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0

    def recode(self, X: np.ndarray, batch_size: int = 4096) -> np.ndarray:
        import torch

        self.module.eval()
        out = np.empty((len(X), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for i in range(0, len(X), batch_size):
                out[i:i + batch_size] = self.module(torch.as_tensor(X[i:i + batch_size], dtype=torch.float32)).numpy()
        return out

    def state(self) -> dict[str, Any]:
        return {"state_dict": self.module.state_dict(), "dim": self.dim, "config": self.config.to_dict(),
                "best_epoch": self.best_epoch, "history": self.history}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Recoder:
        module = _make_module(int(state["dim"]))
        module.load_state_dict(state["state_dict"])
        return cls(module=module, dim=int(state["dim"]), config=RecoderConfig(**state["config"]),
                   history=list(state.get("history", [])), best_epoch=int(state.get("best_epoch", 0)))


def _make_module(dim: int, rng=None):
    from veil.models.heads import MLPHead

    return MLPHead(dim, dim, hidden=(dim, dim, dim), dropout=0.0, rng=rng)


def _cluster_labels(train_means: np.ndarray, dev_means: np.ndarray, n_clusters: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=n_clusters, n_init=4, random_state=seed).fit(train_means.astype(np.float64))
    return km.labels_.astype(np.int64), km.predict(dev_means.astype(np.float64)).astype(np.int64)


def _sample_rows(offsets: np.ndarray, docs: np.ndarray, cap: int, rng: np.random.Generator) -> tuple[np.ndarray,
                                                                                                      np.ndarray]:
    """Row indices (at most ``cap`` per document) and their position in ``docs`` (segment ids)."""
    rows, seg = [], []
    for pos, doc in enumerate(docs):
        lo, hi = int(offsets[doc]), int(offsets[doc + 1])
        idx = np.arange(lo, hi) if hi - lo <= cap else lo + rng.choice(hi - lo, size=cap, replace=False)
        rows.append(idx)
        seg.append(np.full(len(idx), pos))
    return np.concatenate(rows), np.concatenate(seg)


def _segment_mean(x, seg, n):
    import torch

    sums = torch.zeros((n, x.shape[1]), dtype=x.dtype).index_add_(0, seg, x)
    counts = torch.bincount(seg, minlength=n).clamp_min(1).to(x.dtype)
    return sums / counts[:, None]


def train_recoder(S: np.ndarray, offsets: np.ndarray, train_docs: np.ndarray, dev_docs: np.ndarray, *,
                  config: RecoderConfig = RecoderConfig(), progress: bool = False) -> Recoder:
    """Train H (and L) on the sentences of ``train_docs``; early stopping on the dev cluster loss.

    ``S``/``offsets`` are all sentence embeddings and document offsets
    (:func:`veil.encoders.encode_sentences`); ``train_docs``/``dev_docs`` index
    documents (public ones only).
    """
    import torch
    from torch import nn

    check_int("n_clusters", config.n_clusters, minimum=2)
    if len(train_docs) < config.n_clusters:
        raise DataFormatError(f"{len(train_docs)} training documents for {config.n_clusters} clusters; "
                              f"use fewer clusters or more documents")
    means = document_means(S, offsets)
    y_train, y_dev = _cluster_labels(means[train_docs], means[dev_docs], config.n_clusters, config.seed)
    dim = S.shape[1]
    from veil.models.heads import _init_linear

    gen = torch.Generator().manual_seed(config.seed)  # local: veil never seeds torch's global generator
    H = _make_module(dim, rng=gen)
    L = nn.utils.skip_init(nn.Linear, dim, config.n_clusters)
    _init_linear(L, gen)
    opt = torch.optim.Adam(list(H.parameters()) + list(L.parameters()), lr=config.lr)
    rng = np.random.default_rng(config.seed)
    St = torch.as_tensor(S, dtype=torch.float32)

    def loss_on(docs: np.ndarray, labels: np.ndarray, sample_rng: np.random.Generator) -> torch.Tensor:
        rows, seg = _sample_rows(offsets, docs, config.max_sentences, sample_rng)
        doc_vecs = _segment_mean(H(St[rows]), torch.as_tensor(seg), len(docs))
        return nn.functional.cross_entropy(L(doc_vecs), torch.as_tensor(labels))

    from veil.encoders._inputs import progress_bar

    history: list[dict[str, float]] = []
    best, best_epoch, best_state, stale = float("inf"), 0, None, 0
    with progress_bar(config.epochs, "training recoder", progress) as advance:
        for epoch in range(1, config.epochs + 1):
            H.train()
            order = rng.permutation(len(train_docs))
            losses = []
            for start in range(0, len(order), config.batch_size):
                part = order[start:start + config.batch_size]
                loss = loss_on(train_docs[part], y_train[part], rng)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            H.eval()
            with torch.no_grad():
                dev_loss = float(loss_on(dev_docs, y_dev, np.random.default_rng(config.seed)))
            history.append({"epoch": epoch, "train_loss": float(np.mean(losses)), "dev_cluster_loss": dev_loss})
            advance(1)
            if dev_loss < best:
                best, best_epoch, best_state, stale = dev_loss, epoch, copy.deepcopy(H.state_dict()), 0
            else:
                stale += 1
                if stale >= config.patience:
                    break
    H.load_state_dict(best_state)
    H.eval()
    return Recoder(module=H, dim=dim, config=config, history=history, best_epoch=best_epoch)
