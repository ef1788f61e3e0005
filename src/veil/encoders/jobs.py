"""``veil encode``: encode a corpus (or a user file) split into a .npy matrix."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veil._io import atomic_write
from veil.errors import InvalidParameterError

__all__ = ["EncodeJob", "run_encode"]


@dataclass(frozen=True)
class EncodeJob:
    source: str
    out: Path
    split: str | None = None
    model: str = "minilm"
    pooling: str = "mean"
    batch_size: int = 64
    text: str = "text"
    cache: bool = True
    progress: bool = True
    max_length: int | None = None
    file_options: dict[str, Any] = field(default_factory=dict)  # loader options for a user file (label=, encoding=)
    cache_embeddings: bool = False  # a user file's encodings also go to the cache (default: only to ``out``)


def run_encode(job: EncodeJob) -> dict[str, Any]:
    """Load ``job.source``, encode it through the cache, write ``job.out`` atomically. A user file's encodings are
    written to ``job.out`` only, never cached, unless ``job.cache_embeddings``
    (:func:`veil.encoders.cache.private_texts`)."""
    import veil.corpora as vc
    from veil.encoders import TextEncoder

    if Path(job.out).suffix != ".npy":
        raise InvalidParameterError(f"--out must end in .npy, got {job.out}")
    if Path(job.out).is_dir():
        raise InvalidParameterError(f"--out {job.out} is a folder; give a file name ending in .npy")
    is_builtin = job.source in vc.names()
    corpus = vc.load(job.source) if is_builtin else vc.load(job.source, **{"text": job.text, **job.file_options})
    from veil.encoders.cache import private_texts

    encoder = TextEncoder(job.model, pooling=job.pooling, max_length=job.max_length)
    start = time.perf_counter()
    with private_texts([] if is_builtin else corpus.texts, keep=job.cache_embeddings):
        emb = encoder.encode_corpus(corpus, job.split, cache=job.cache, batch_size=job.batch_size,
                                    progress=job.progress)
    seconds = time.perf_counter() - start
    with atomic_write(job.out, "wb") as fh:
        np.save(fh, emb.astype(np.float32, copy=False))
    return {"out": str(job.out), "shape": list(emb.shape), "seconds": seconds, "model": encoder.model_name,
            "pooling": encoder.pooling, "corpus": corpus.name, "split": job.split}
