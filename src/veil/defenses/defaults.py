"""What a defense needs beyond its settings, built from public material with veil's public defaults.

One code path for the bench (the defenses' ``bench_make`` and :mod:`veil.bench.data`), the CLI (``veil obfuscate``,
``veil sentdp eval``) and Python (:func:`veil.protect`):

* :func:`mask_pool`: TextHide's secret pool of sign masks, from the OS CSPRNG (``rng=None``, the default); an int
  seed is for checks only (it warns). :func:`key_seeds` splits one such seed into the independent streams the
  bench has always used (the pool, then the mixing).
* :func:`mean_embeddings` / :func:`document_candidates`: DeepCandidate's public candidates (and truncation's box):
  the public documents' mean sentence embeddings.
* :func:`word_vectors`: metric DP's word vectors: the public text's most frequent words, each encoded alone by
  MiniLM (unnormalised, cached).
* :func:`tag_vocabulary`: the obfuscators' public same-tag vocabulary, from public tagged sentences.

Each builder takes the public material itself (texts, embeddings, tagged sentences); which public corpus or
treebank to read by default is the caller's (the bench: the corpus' own train split; :func:`veil.protect`: the
CLI's defaults). Nothing here is secret but the mask pool, which is never derived from an experiment seed unless
one is given for a check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["METRIC_DP_VOCABULARY", "PUBLIC_CORPUS", "key_seeds", "mask_pool", "public_vectors", "mean_embeddings",
           "document_candidates", "word_vectors", "tag_vocabulary"]

#: the most frequent public words metric DP's word vectors cover (the bench's default)
METRIC_DP_VOCABULARY = 20000
#: the public corpus whose texts fill TextHide's inter-mode slots (the bench's, and ``veil texthide eval --public``)
PUBLIC_CORPUS = "health-tweets"


def key_seeds(rng: Any, n: int = 2) -> list[int | None]:
    """``n`` independent seeds from one int key seed (``rng`` None: ``n`` Nones, i.e. the OS CSPRNG for each)."""
    if rng is None:
        return [None] * n
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(int(rng)).spawn(n)]


def mask_pool(m: int | str | None, dim: int, *, rng: Any = None) -> Any:
    """TextHide's secret pool of ``m`` sign masks of width ``dim`` (``m`` 0: no mask; None or ``"inf"``: an
    infinite pool); ``rng`` None draws the key from the OS CSPRNG (the default), an int seed warns."""
    from veil.defenses.texthide.masks import MaskPool
    from veil.errors import InvalidParameterError

    if isinstance(m, str):
        if m.strip().lower() not in ("inf", "infinite"):
            try:
                m = int(m)
            except ValueError:
                raise InvalidParameterError(f"m must be an integer >= 0 or 'inf', got {m!r}") from None
        else:
            m = None
    return MaskPool(m, dim, rng=rng)


def public_vectors(size: int, *, corpus: str = PUBLIC_CORPUS, encoder: Any = None,
                   what: str | None = None) -> tuple[list[str], np.ndarray]:
    """The first ``size`` texts of ``corpus``' train split (public) and their MiniLM vectors (float32; encoded once,
    cached as ``<corpus>-train<size>``): TextHide's inter-mode public slots. ``what`` is said before encoding
    (``{n}`` in it: the number of texts)."""
    import veil.corpora as vc
    from veil.encoders import TextEncoder
    from veil.encoders.plan import announce_corpus

    pub = vc.load(corpus)
    idx = pub.indices("train")[:int(size)]
    sel = pub.select(idx, name=f"{corpus}-train{len(idx)}")
    encoder = encoder if encoder is not None else TextEncoder("minilm")
    announce_corpus(encoder, sel, what=(what or "public texts of {corpus} (the first {n} of its train split)").format(
        corpus=corpus, n=len(idx)))
    X = encoder.encode_corpus(sel, None, progress=True)
    return list(sel.texts), np.ascontiguousarray(X, dtype=np.float32)


def mean_embeddings(documents: Sequence[Any]) -> np.ndarray:
    """One float32 vector per document: the mean (in float64) of its ``(k, d)`` sentence embeddings."""
    return np.stack([np.asarray(d).astype(np.float64).mean(axis=0) for d in documents]).astype(np.float32)


def document_candidates(public_means: Any) -> np.ndarray:
    """DeepCandidate's candidates (and truncation's box data): the public documents' mean sentence embeddings
    (:func:`mean_embeddings`), as float64."""
    return np.asarray(public_means).astype(np.float64)


def word_vectors(public_texts: Iterable[str], *, vocabulary: int = METRIC_DP_VOCABULARY, encoder: Any = None,
                 name: str = "public-vocabulary", announce: Callable[[list[str]], None] | None = None) -> Any:
    """Metric DP's word vectors: the ``vocabulary`` most frequent words of the public texts, each encoded alone
    by ``encoder`` (default MiniLM), unnormalised, cached under ``name``; ``announce(words)`` runs before the
    encoding (to say what is encoded)."""
    from veil.encoders import TextEncoder
    from veil.encoders.word_vectors import WordVectors, build_vocabulary

    words = build_vocabulary(public_texts, max_size=int(vocabulary))
    if announce is not None:
        announce(words)
    return WordVectors.from_encoder(encoder if encoder is not None else TextEncoder("minilm"), words, name=name)


def tag_vocabulary(sentences: Iterable[Any]) -> Any:
    """The obfuscators' public vocabulary: every word of each tag in the public sentences (each a tree with
    ``words`` and ``tags``, or a ``(words, tags)`` pair)."""
    from veil.defenses.obfuscation import TagVocabulary

    return TagVocabulary.from_sentences((s.words, s.tags) if hasattr(s, "words") else (s[0], s[1])
                                        for s in sentences)
