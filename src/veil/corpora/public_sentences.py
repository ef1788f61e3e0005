"""Public sentences from veil's built-in corpora: the text a model that must never see private text learns from.

One split of a built-in corpus (``train`` to learn from, ``dev`` to measure on; the ``test`` split, where
experiments find their targets, is never read here) as a list of clean, distinct sentences: every sentence of
a document corpus (news-articles, spam-assassin, hoc-speeches, brown, ...), every text of a short-text corpus
(health-tweets, sms-spam, ...). Rules, in this order:

1. whitespace collapsed; sentences of fewer than ``min_words`` whitespace-separated words dropped;
2. sentences that occur in an ``exclude`` set dropped (compared lower-cased, whitespace collapsed: see
   :func:`sentence_key`; the caller builds it with :func:`excluded_keys` from the corpora that must never be
   learned from, e.g. an evaluation corpus);
3. duplicates dropped (the first occurrence kept, by the same key);
4. ``keep`` (a caller's test over a list of sentences, e.g. "at most 48 WordPiece tokens") applied;
5. at most ``cap`` sentences kept: a uniform random subset drawn with ``seed``, in corpus order.

:func:`select_public` applies them to several corpora at once (a sentence of one corpus that another already
gave is dropped), draws an optional ``max_train`` subset, and draws ``heldout`` sentences from the same
corpora's dev splits, none equal to a training sentence: the exact selection :mod:`veil.training.inverter`
trains and measures on, so that anything compared with the trained model (the nearest public sentence) can
rebuild it from the model's configuration.

The corpus must be pulled (``veil corpora pull NAME``); nothing here downloads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from veil.errors import InvalidParameterError

__all__ = ["sentence_key", "split_sentences_of", "excluded_keys", "public_sentences", "PublicSelection",
           "select_public"]

#: the splits public sentences may come from (the test split holds experiments' targets)
PUBLIC_SPLITS = ("train", "dev")


def sentence_key(text: str) -> str:
    """The key two sentences are compared by: lower-cased, whitespace collapsed."""
    return " ".join(text.lower().split())


def split_sentences_of(corpus: object, split: str | None) -> list[str]:
    """The sentences of one split of a loaded corpus (``None``: every split), in corpus order, whitespace
    collapsed and empty ones dropped: a document's sentences, or the text itself for a short-text corpus."""
    idx = range(len(corpus)) if split is None else corpus.indices(split)  # type: ignore[attr-defined]
    docs = corpus.documents  # type: ignore[attr-defined]
    texts = corpus.texts  # type: ignore[attr-defined]
    out: list[str] = []
    for i in idx:
        for s in (docs[i] if docs is not None else [texts[i]]):
            s = " ".join(s.split())
            if s:
                out.append(s)
    return out


def excluded_keys(names: Iterable[str]) -> set[str]:
    """The keys (:func:`sentence_key`) of every sentence and every text, all splits, of the corpora ``names``."""
    import veil.corpora as vc

    keys: set[str] = set()
    for name in names:
        corpus = vc.load(name)
        keys.update(sentence_key(s) for s in split_sentences_of(corpus, None))
        keys.update(sentence_key(t) for t in corpus.texts if t.strip())
    return keys


def public_sentences(name: str, split: str, *, min_words: int = 3, exclude: set[str] | frozenset[str] = frozenset(),
                     keep: Callable[[Sequence[str]], Sequence[bool]] | None = None, cap: int | None = None,
                     seed: int = 0) -> list[str]:
    """The clean, distinct sentences of the ``split`` (``train`` or ``dev``) of the built-in corpus ``name``, by
    the rules of this module's docstring."""
    import veil.corpora as vc
    from veil.validation import check_int

    if split not in PUBLIC_SPLITS:
        raise InvalidParameterError(f"public sentences come from the {' or '.join(PUBLIC_SPLITS)} split, not "
                                    f"{split!r} (the test split holds experiments' targets)")
    min_words = check_int("min_words", min_words, minimum=1)
    if cap is not None:
        cap = check_int("cap", cap, minimum=1)
    if name not in vc.names():
        from veil.errors import UnknownNameError

        raise UnknownNameError("corpus", name, vc.names())
    sentences: list[str] = []
    seen: set[str] = set()
    for s in split_sentences_of(vc.load(name), split):
        key = sentence_key(s)
        if len(s.split()) < min_words or key in exclude or key in seen:
            continue
        seen.add(key)
        sentences.append(s)
    if keep is not None and sentences:
        verdict = list(keep(sentences))
        if len(verdict) != len(sentences):
            raise InvalidParameterError(f"keep answered {len(verdict)} verdicts for {len(sentences)} sentences")
        sentences = [s for s, ok in zip(sentences, verdict) if ok]
    if cap is not None and cap < len(sentences):
        chosen = np.sort(np.random.default_rng([seed, _name_seed(name)]).permutation(len(sentences))[:cap])
        sentences = [sentences[i] for i in chosen]
    return sentences


def _name_seed(name: str) -> int:
    """A stable integer of a corpus name (each corpus draws its own subset, whatever the others' order)."""
    import zlib

    return zlib.crc32(name.encode("utf-8"))


@dataclass(frozen=True)
class PublicSelection:
    """Training and held-out sentences, each with the corpus it came from."""

    train: list[str]
    train_corpora: list[str]
    heldout: list[str]
    heldout_corpora: list[str]


def select_public(sources: Sequence[tuple[str, int | None]], *, exclude: Iterable[str] = (), min_words: int = 3,
                  keep: Callable[[Sequence[str]], Sequence[bool]] | None = None, seed: int = 0,
                  max_train: int | None = None, heldout: int = 500, heldout_seed: int = 12345) -> PublicSelection:
    """The training sentences of ``sources`` (``(corpus, cap)`` pairs: train splits, each capped) and ``heldout``
    sentences of their dev splits, by the rules of this module's docstring; ``exclude`` names the corpora whose
    sentences are never selected."""
    from veil.errors import DataFormatError

    banned = excluded_keys(exclude)
    texts: list[str] = []
    owners: list[str] = []
    seen: set[str] = set()
    for name, cap in sources:
        got = [s for s in public_sentences(name, "train", min_words=min_words, exclude=banned, keep=keep, cap=cap,
                                           seed=seed) if sentence_key(s) not in seen]
        seen.update(sentence_key(s) for s in got)
        texts += got
        owners += [name] * len(got)
    if max_train is not None and max_train < len(texts):
        chosen = np.sort(np.random.default_rng(seed).permutation(len(texts))[:max_train])
        texts, owners = [texts[i] for i in chosen], [owners[i] for i in chosen]
    pool: list[tuple[str, str]] = []
    for name, _ in sources:
        pool += [(name, s) for s in public_sentences(name, "dev", min_words=min_words, exclude=banned | seen,
                                                     keep=keep)]
    if not texts or not pool:
        raise DataFormatError(f"no {'training' if not texts else 'held-out'} sentences pass the filters in "
                              f"{', '.join(s for s, _ in sources)}; name more corpora, or loosen the filters")
    chosen = np.sort(np.random.default_rng(heldout_seed).permutation(len(pool))[:heldout])
    return PublicSelection(texts, owners, [pool[i][1] for i in chosen], [pool[i][0] for i in chosen])
