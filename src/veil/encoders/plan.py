"""Say what an encoding step will cost before it starts: how many texts, how many cached, roughly how long.

Every command that encodes texts calls :func:`announce_encoding` just before the encoder runs. It
prints one line, e.g.::

    veil: encoding 14,203 sentences of spam-assassin (0 of 14,203 cached): about 3m10s on this machine now
    (measured: 64 of them took 0.55 s; estimate scaled by token count)

The estimate is a measurement, never a typed constant: a calibration batch of the real texts
still to encode (:data:`CALIBRATION_TEXTS`, spread evenly over them) is encoded once with the same
encoder, after a two-text warm-up, and its time per token is scaled to the token count of all
texts still to encode (counted exactly up to :data:`TOKEN_SAMPLE` texts, else estimated from an
even sample of that many). It therefore reflects this machine's current load and the encoder's
backend, and costs a fraction of a second. Cached texts are not counted: whether a cache entry
exists is checked with the key :func:`veil.encoders.cache.encode_cached` would use.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from veil.encoders._inputs import check_int, check_texts
from veil.errors import DataWarning, InvalidParameterError, InvalidTypeError
from veil.progress import format_seconds

if TYPE_CHECKING:  # pragma: no cover
    from veil.corpora.base import Corpus
    from veil.encoders.cache import EmbeddingCache
    from veil.encoders.text import TextEncoder

__all__ = ["EncodingPlan", "announce_encoding", "announce_corpus", "announce_sentences", "is_cached",
           "estimate_seconds", "CALIBRATION_TEXTS", "TOKEN_SAMPLE"]

CALIBRATION_TEXTS = 64  #: texts encoded (and timed) to measure this machine's speed
TOKEN_SAMPLE = 2000     #: texts whose tokens are counted exactly; beyond that the count is scaled from a sample


@dataclass(frozen=True)
class EncodingPlan:
    """One encoding step: ``n_texts`` passed to the encoder, ``n_cached`` of them already cached.

    ``seconds``: the measured estimate for the ``n_texts - n_cached`` texts to encode (None when none
    are); ``calibration``: how many texts were timed and how long they took.
    """

    what: str
    n_texts: int
    n_cached: int
    seconds: float | None
    calibration: tuple[int, float] | None = None

    @property
    def n_to_encode(self) -> int:
        return self.n_texts - self.n_cached

    def line(self) -> str:
        if self.n_texts == 0:
            return f"veil: encoding no {self.what}: nothing to encode"
        if self.n_to_encode == 0:
            return f"veil: encoding {self.n_texts:,} {self.what}: all cached, nothing to encode"
        cached = f"{self.n_cached:,} of {self.n_texts:,} cached"
        head = f"veil: encoding {self.n_to_encode:,} {self.what} ({cached})"
        if self.seconds is None or self.calibration is None:
            return head
        n, t = self.calibration
        return (f"{head}: about {_about(self.seconds)} on this machine now (measured: {n} of them took {t:.2f} s; "
                f"scaled by token count)")


def _about(seconds: float) -> str:
    return "under 1s" if seconds < 1 else format_seconds(seconds)


def _cache_key(encoder: TextEncoder, texts: list[str], name: str, split: str):
    """The key :func:`veil.encoders.cache.encode_cached` files these texts under (normalize: the encoder's)."""
    from veil.encoders.cache import CacheKey, texts_sha256

    return CacheKey(model_id=encoder.model_id, pooling=encoder.pooling, max_length=encoder.max_length,
                    normalize=bool(encoder.normalize), corpus=name, split=split, texts_sha256=texts_sha256(texts),
                    n=len(texts), dim=encoder.dim)


def is_cached(encoder: TextEncoder, texts: Sequence[str], name: str, split: str, *,
              cache: bool | EmbeddingCache = True) -> bool:
    """Whether ``encode_cached(encoder, texts, name, split, cache=cache)`` would find an entry (not read here)."""
    from veil.encoders.cache import resolve_store

    texts = list(texts)
    store = resolve_store(cache, texts)
    return store is not None and store.has(_cache_key(encoder, texts, name, split))


def _spread(n: int, k: int) -> np.ndarray:
    """``k`` indices spread evenly over ``range(n)`` (all of them when ``k >= n``)."""
    if k >= n:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))


def _tokens(encoder: TextEncoder, texts: list[str]) -> np.ndarray:
    ids = encoder.tokenizer(texts, add_special_tokens=True, truncation=True, max_length=encoder.max_length,
                            return_attention_mask=False, return_token_type_ids=False, verbose=False)["input_ids"]
    return np.fromiter(map(len, ids), dtype=np.int64, count=len(texts))


def estimate_seconds(encoder: TextEncoder, texts: Sequence[str], *, batch_size: int = 64
                     ) -> tuple[float, tuple[int, float]]:
    """Measured seconds to encode ``texts`` with ``encoder``, and ``(texts timed, their seconds)``.

    Encodes a two-text warm-up and then :data:`CALIBRATION_TEXTS` texts spread over ``texts``, and
    scales the time per (padded) token to the token count of all of ``texts``.
    """
    texts = check_texts(texts)
    batch_size = check_int("batch_size", batch_size, low=1)
    if not texts:
        raise InvalidParameterError("texts is empty; there is nothing to estimate")
    sample = [texts[i] for i in _spread(len(texts), CALIBRATION_TEXTS)]
    counted = texts if len(texts) <= TOKEN_SAMPLE else [texts[i] for i in _spread(len(texts), TOKEN_SAMPLE)]
    total_tokens = float(_tokens(encoder, counted).sum()) * len(texts) / len(counted)
    # encode() sorts by length and pads each batch to its longest text: the calibration's padded tokens are what
    # it paid for; a full run's long length-sorted batches pad little, so it pays about its token count
    calib_batch = min(batch_size, 32)
    lengths = np.sort(_tokens(encoder, sample))[::-1]
    sample_tokens = float(sum(len(chunk) * chunk[0] for chunk in np.array_split(
        lengths, range(calib_batch, len(lengths), calib_batch))))
    with warnings.catch_warnings():  # truncation is warned about by the real encoding, once
        warnings.simplefilter("ignore", DataWarning)
        encoder.encode(sample[:2], batch_size=batch_size, progress=False)  # warm-up: first-call allocations
        start = time.perf_counter()
        encoder.encode(sample, batch_size=calib_batch, progress=False)
        took = time.perf_counter() - start
    return took * total_tokens / sample_tokens, (len(sample), took)


def announce_encoding(encoder: TextEncoder, texts: Sequence[str], *, what: str = "texts",
                      cache_as: tuple[str, str] | None = None, cached: int = 0,
                      cache: bool | EmbeddingCache = True, estimate: bool = True,
                      log: Callable[[str], object] | None = None) -> EncodingPlan:
    """Print (through ``log``; default: stderr) one line saying what encoding ``texts`` will cost; return it.

    ``texts``: every text the step passes to the encoder. ``cache_as=(name, split)``: the labels
    the step caches them under (:func:`~veil.encoders.cache.encode_cached`'s); if that entry exists,
    all are cached. ``cached``: otherwise, how many of ``texts`` the caller already holds (they are
    the first ``cached`` texts; e.g. a memo). ``estimate=False`` skips the timing (the count alone).
    """
    texts = check_texts(texts)
    if not isinstance(what, str) or not what:
        raise InvalidTypeError("what must be a non-empty str naming the texts, e.g. 'sentences of news-articles'")
    cached = check_int("cached", cached, low=0, high=len(texts))
    if cache_as is not None:
        if (not isinstance(cache_as, tuple) or len(cache_as) != 2
                or not all(isinstance(p, str) for p in cache_as)):
            raise InvalidTypeError("cache_as must be a (name, split) tuple of str, as passed to encode_cached")
        if is_cached(encoder, texts, *cache_as, cache=cache):
            cached = len(texts)
    todo = texts[cached:]
    seconds, calibration = estimate_seconds(encoder, todo) if todo and estimate else (None, None)
    plan = EncodingPlan(what=what, n_texts=len(texts), n_cached=cached, seconds=seconds, calibration=calibration)
    line = plan.line()
    if log is None:
        print(line, file=sys.stderr, flush=True)
    else:
        log(line)
    return plan


def announce_corpus(encoder: TextEncoder, corpus: Corpus, split: str | None = None, *, what: str | None = None,
                    log: Callable[[str], object] | None = None) -> EncodingPlan:
    """:func:`announce_encoding` for ``encode_corpus(encoder, corpus, split)`` (the same texts and cache entry)."""
    texts = corpus.texts if split is None else [corpus.texts[i] for i in corpus.indices(split)]
    return announce_encoding(encoder, texts, what=what or f"texts of {corpus.name}" + (f" ({split})" if split else ""),
                             cache_as=(corpus.name, split or "all"), log=log)


def announce_sentences(encoder: TextEncoder, corpus: Corpus, *, what: str | None = None,
                       log: Callable[[str], object] | None = None) -> EncodingPlan:
    """:func:`announce_encoding` for ``encode_sentences(encoder, corpus)`` (every sentence of every document)."""
    if corpus.documents is None:
        raise InvalidParameterError(f"corpus {corpus.name!r} has no sentence lists; announce_corpus() its texts")
    flat = [s for doc in corpus.documents for s in doc]
    return announce_encoding(encoder, flat, what=what or f"sentences of {corpus.name}",
                             cache_as=(corpus.name, "sentences"), log=log)
