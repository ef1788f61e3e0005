"""What each federated client holds: its partition of a corpus' train split (frozen MiniLM vectors) and its share
of the test split, plus the public vectors inter-mode TextHide mixes in.

The vectors come from veil's embedding cache (``VEIL_HOME``), so a client
process encodes a corpus once; within one process the loaded arrays are kept
by :func:`_corpus_vectors` (an explicit, bounded cache of public data: no
secret is ever cached here). The train split is cut among clients by
:func:`veil.federated.partition.partition_indices` (IID or per-class
Dirichlet); the test split is cut IID with the same seed, so every test
example is evaluated by exactly one client, through that client's own secret
mask.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from veil.errors import InvalidParameterError
from veil.federated.config import FederatedConfig
from veil.federated.partition import partition_indices

__all__ = ["ClientData", "client_data", "corpus_arrays"]


@dataclass(frozen=True)
class ClientData:
    partition: int
    X_train: np.ndarray  # (n, d) float32, unit-norm MiniLM vectors (not yet scaled)
    y_train: np.ndarray  # (n,) int64
    train_index: np.ndarray  # (n,) positions in the corpus' (subsampled) train split: for scoring attacks only
    X_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    public: np.ndarray | None  # (P, d) public vectors (inter mode), unscaled
    texts_train: tuple[str, ...] | None = None  # finetune only: the texts behind X_train, in the same order
    texts_test: tuple[str, ...] | None = None

    @property
    def dim(self) -> int:
        return int(self.X_train.shape[1])


def _subsample(idx: np.ndarray, limit: int) -> np.ndarray:
    """An evenly spaced, seed-free subset (the same one for every configuration), as the TextHide experiments use."""
    if limit <= 0 or len(idx) <= limit:
        return idx
    return idx[np.linspace(0, len(idx) - 1, limit).round().astype(int)]


@functools.lru_cache(maxsize=4)
def _corpus_vectors(corpus: str, max_train: int, max_test: int, public: str, public_size: int,
                    backend: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
    import veil.corpora as vc
    from veil.encoders import TextEncoder

    c = vc.load(corpus)
    if c.task != "classification":
        raise InvalidParameterError(f"corpus {corpus!r} is not a classification corpus; federated TextHide trains a "
                                    "classifier head (try rt-polarity, sms-spam or trec-questions)")
    tr = _subsample(c.indices("train"), max_train)
    te = _subsample(c.indices("test"), max_test)
    encoder = TextEncoder("minilm", backend=backend)
    X_tr = encoder.encode_corpus(c.select(tr, name=f"{corpus}-train{len(tr)}"), None, progress=False)
    X_te = encoder.encode_corpus(c.select(te, name=f"{corpus}-test{len(te)}"), None, progress=False)
    pub = np.zeros((0, X_tr.shape[1]), dtype=np.float32)
    if public:
        p = vc.load(public)
        pidx = p.indices("train")[:public_size]
        pub = encoder.encode_corpus(p.select(pidx, name=f"{public}-train{len(pidx)}"), None, progress=False)
    for arr in (X_tr, X_te, pub):
        arr.setflags(write=False)
    return (X_tr, np.asarray(c.labels[tr], dtype=np.int64), X_te, np.asarray(c.labels[te], dtype=np.int64),
            int(c.num_classes), pub)


@functools.lru_cache(maxsize=4)
def _corpus_texts(corpus: str, max_train: int, max_test: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    import veil.corpora as vc

    c = vc.load(corpus)
    tr = _subsample(c.indices("train"), max_train)
    te = _subsample(c.indices("test"), max_test)
    return tuple(c.texts[i] for i in tr), tuple(c.texts[i] for i in te)


def corpus_arrays(cfg: FederatedConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
    """(X_train, y_train, X_test, y_test, num_classes, public) for the whole run (public is empty in intra mode),
    encoded with the default backend (``VEIL_ENCODER_BACKEND``; the one :func:`veil.federated.run.frozen_backend`
    names in the run's record) and kept per backend."""
    from veil.encoders.backends import resolve_backend

    return _corpus_vectors(cfg.corpus, cfg.max_train, cfg.max_test, cfg.public if cfg.mode == "inter" else "",
                           cfg.public_size, resolve_backend(None))


def client_data(cfg: FederatedConfig, partition: int, num_partitions: int | None = None) -> ClientData:
    """Partition ``partition`` of ``num_partitions`` (default ``cfg.clients``)."""
    n_parts = cfg.clients if num_partitions is None else int(num_partitions)
    if not 0 <= partition < n_parts:
        raise InvalidParameterError(f"partition-id {partition} is outside 0..{n_parts - 1}; give each SuperNode "
                                    f"--node-config 'partition-id=I num-partitions={n_parts}' with a distinct I")
    X_tr, y_tr, X_te, y_te, num_classes, pub = corpus_arrays(cfg)
    train_parts = partition_indices(y_tr, n_parts, alpha=cfg.alpha, seed=cfg.seed, min_size=cfg.batch_size)
    test_parts = partition_indices(y_te, n_parts, alpha=0.0, seed=cfg.seed)
    tr, te = train_parts[partition], test_parts[partition]
    texts_tr = texts_te = None
    if cfg.finetune:
        all_tr, all_te = _corpus_texts(cfg.corpus, cfg.max_train, cfg.max_test)
        texts_tr, texts_te = tuple(all_tr[i] for i in tr), tuple(all_te[i] for i in te)
    return ClientData(partition=partition, X_train=X_tr[tr], y_train=y_tr[tr], train_index=tr, X_test=X_te[te],
                      y_test=y_te[te], num_classes=num_classes, public=pub if cfg.mode == "inter" else None,
                      texts_train=texts_tr, texts_test=texts_te)
