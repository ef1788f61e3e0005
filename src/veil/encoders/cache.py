"""On-disk cache of corpus embeddings under ``veil_home()/embeddings/``.

An entry is one ``.npy`` file (float32, shape ``(n, dim)``) keyed by the model
id (a fingerprint of the weights), pooling, max_length, normalisation, the
corpus name, the split and the sha256 of the texts in order, plus a
``.npy.sha256`` file holding the sha256 of the array's bytes. Both are
written atomically (temporary file + rename), the array first. A file that
cannot be read, whose shape, dtype or values are wrong, or whose bytes do not
match the recorded sha256 is reported with a :class:`CacheWarning`, deleted
and recomputed (then rewritten).

Why recompute rather than refuse: the cache holds nothing that cannot be
recomputed exactly from the model and the texts, so a damaged entry costs
time, never correctness, and the warning says what happened. Refusing would
only make the user delete the file by hand. An entry with no ``.sha256``
file (written by a veil before the checksum existed, or by a process killed
between the two writes, which leaves a complete array) passes the shape,
dtype and finiteness checks as before, and its checksum is then recorded.
Writes to a cache folder that cannot be written raise
:class:`~veil.errors.CacheLocationError` before the model runs.

A user's private texts are not cached unless the user asks. Inside
:func:`private_texts` (``veil bench --data`` and ``veil encode FILE`` run in
one), any list of texts holding one of the given texts is cached in this
process' memory only (:class:`MemoryCache`) instead of the default folder, so
that a run reuses its encodings but none stay behind, after an error or
Ctrl-C either; ``keep=True`` (``--cache-embeddings``) caches them on disk as
any other corpus. An explicit :class:`EmbeddingCache` passed as ``cache=`` is
the caller's choice and is used as given.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
import os
import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from veil._io import atomic_write, atomic_write_text, veil_home, writable_dir
from veil.encoders._inputs import check_bool, check_texts
from veil.errors import DataWarning, InvalidParameterError, InvalidTypeError

if TYPE_CHECKING:  # pragma: no cover
    from veil.corpora.base import Corpus
    from veil.encoders.text import TextEncoder

__all__ = ["CacheKey", "CacheWarning", "EmbeddingCache", "MemoryCache", "array_sha256", "encode_cached",
           "encode_corpus", "encode_sentences", "private_texts", "resolve_store", "texts_sha256"]

ALL_SPLITS = "all"  # the split name of a whole-corpus entry


class CacheWarning(DataWarning):
    """A cached file (embeddings, a fitted pipeline) was unreadable, inconsistent or damaged and is recomputed."""


def array_sha256(arr: np.ndarray) -> str:
    """sha256 of an array's bytes in C order (dtype and shape are checked separately)."""
    return hashlib.sha256(np.ascontiguousarray(arr).data).hexdigest()


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def texts_sha256(texts: Iterable[str]) -> str:
    """sha256 of the texts in order (each length-prefixed, so boundaries matter)."""
    h = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


@dataclass(frozen=True)
class CacheKey:
    """Everything that determines a corpus' embeddings.

    ``n`` and ``dim`` are the expected array shape, checked on every read.
    """

    model_id: str
    pooling: str
    max_length: int
    normalize: bool
    corpus: str
    split: str
    texts_sha256: str
    n: int
    dim: int

    def digest(self) -> str:
        """sha256 of the whole key (the file name's last part)."""
        return hashlib.sha256(json.dumps(dataclasses.asdict(self), sort_keys=True).encode()).hexdigest()


#: the files of one entry (see :meth:`EmbeddingCache.path`): the array, its checksum, and atomic_write's
#: temporary files of either (``.<name>.<random>.tmp``)
_ENTRY_NAME = r"[A-Za-z0-9._-]+-\d+-(?:norm|raw)-[0-9a-f]{16}\.npy(?:\.sha256)?"
_ENTRY_FILE = re.compile(rf"^(?:{_ENTRY_NAME}|\.{_ENTRY_NAME}\.[^/]+\.tmp)$")


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", part).strip("._") or "_"


class EmbeddingCache:
    """Embeddings on disk, one ``.npy`` per :class:`CacheKey`.

    ``root`` defaults to ``veil_home()/embeddings`` (read when the cache is
    created, so ``VEIL_HOME`` set before then is respected).
    """

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        if root is not None and not isinstance(root, (str, os.PathLike)):
            raise InvalidTypeError(f"root must be a folder path or None, not {type(root).__name__}")
        self.root = Path(root).expanduser() if root is not None else veil_home() / "embeddings"

    def __repr__(self) -> str:
        return f"EmbeddingCache(root={str(self.root)!r})"

    def path(self, key: CacheKey) -> Path:
        """Where the entry for ``key`` lives (it may not exist)."""
        norm = "norm" if key.normalize else "raw"
        name = f"{_safe(key.split)}-{_safe(key.pooling)}-{key.max_length}-{norm}-{key.digest()[:16]}.npy"
        return self.root / _safe(key.model_id) / _safe(key.corpus) / name

    def get(self, key: CacheKey) -> np.ndarray | None:
        """The cached array, or None on a miss (a damaged file warns, is deleted and counts as a miss).

        The array's sha256 must match its ``.sha256`` file; an entry without
        one passes on the shape checks alone and gets its checksum recorded.
        """
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            return self._discard(path, f"unreadable ({type(exc).__name__}: {exc})")
        if not isinstance(arr, np.ndarray) or arr.dtype != np.float32 or arr.shape != (key.n, key.dim):
            found = f"{getattr(arr, 'dtype', type(arr).__name__)} {getattr(arr, 'shape', '')}"
            return self._discard(path, f"holds {found}, expected float32 ({key.n}, {key.dim})")
        if not np.isfinite(arr).all():
            return self._discard(path, "holds NaN or infinite values")
        digest = array_sha256(arr)
        try:
            recorded = _checksum_path(path).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            with contextlib.suppress(OSError):  # no checksum yet: record it; a read-only cache still reads
                atomic_write_text(_checksum_path(path), digest + "\n")
            return arr
        except (OSError, UnicodeDecodeError) as exc:
            return self._discard(path, f"missing a readable checksum ({type(exc).__name__}: {exc})")
        if recorded != digest:
            return self._discard(path, f"damaged (the array's sha256 is {digest[:12]}..., "
                                       f"{_checksum_path(path).name} records {recorded[:12]}...)")
        return arr

    def put(self, key: CacheKey, embeddings: np.ndarray) -> Path:
        """Store ``embeddings`` (float32, shape ``(key.n, key.dim)``) atomically; returns the file."""
        if not isinstance(embeddings, np.ndarray):
            raise InvalidTypeError(f"embeddings must be a numpy array, not {type(embeddings).__name__}")
        if embeddings.dtype != np.float32 or embeddings.shape != (key.n, key.dim):
            raise InvalidParameterError(f"embeddings are {embeddings.dtype} {embeddings.shape}, but the key expects "
                                        f"float32 ({key.n}, {key.dim}); cast with .astype(np.float32) or fix the key")
        path = self.path(key)
        try:
            with atomic_write(path, "wb") as fh:
                np.save(fh, np.ascontiguousarray(embeddings), allow_pickle=False)
            atomic_write_text(_checksum_path(path), array_sha256(embeddings) + "\n")
        except OSError:
            writable_dir(path.parent)  # a CacheLocationError naming the folder (and VEIL_HOME) if that is the cause
            raise
        return path

    def check_writable(self, key: CacheKey) -> None:
        """Raise :class:`~veil.errors.CacheLocationError` unless ``key``'s entry could be written."""
        writable_dir(self.path(key).parent)

    def has(self, key: CacheKey) -> bool:
        """Whether an entry for ``key`` exists (not read or checked here)."""
        return self.path(key).is_file()

    def clear(self, model_id: str | None = None) -> int:
        """Delete every entry (or those of one model id); returns the number of entries removed.

        Only files veil writes here are removed: entry arrays and their checksum files, named as
        :meth:`path` names them, at ``root/<model>/<corpus>/``, and the temporary files of interrupted writes
        of such entries. Any other file (a user's ``.npy`` in a folder given as ``root``) stays, and a folder
        is removed only when removing entries emptied it.
        """
        base = self.root if model_id is None else self.root / _safe(model_id)
        if not base.is_dir():
            return 0
        removed = 0
        emptied: set[Path] = set()
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(self.root).parts
            if len(rel) != 3 or not path.is_file() or path.is_symlink() or not _ENTRY_FILE.match(path.name):
                continue
            path.unlink()
            removed += path.name.endswith(".npy")
            emptied.add(path.parent)
        for folder in sorted(emptied | {f.parent for f in emptied}, key=lambda p: len(p.parts), reverse=True):
            if folder != self.root and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        return removed

    @staticmethod
    def _discard(path: Path, problem: str) -> None:
        warnings.warn(f"cached embeddings {path} are {problem}; deleting the file and recomputing",
                      CacheWarning, stacklevel=3)
        # ``path`` is an entry path (:meth:`path`: an entry file name inside root/<model>/<corpus>/), which
        # only veil writes; a damaged one is veil's own file, recomputed from the model and the texts
        path.unlink(missing_ok=True)
        _checksum_path(path).unlink(missing_ok=True)
        return None


class MemoryCache(EmbeddingCache):
    """Entries held in this process' memory only, never written to disk: where :func:`private_texts` keeps the
    encodings of a user's private texts. Gone with the process (or :meth:`clear`)."""

    def __init__(self) -> None:
        self.root = Path("<memory>")
        self._entries: dict[str, np.ndarray] = {}

    def __repr__(self) -> str:
        return f"MemoryCache({len(self._entries)} entries)"

    def get(self, key: CacheKey) -> np.ndarray | None:
        arr = self._entries.get(key.digest())
        return None if arr is None else arr.copy()

    def put(self, key: CacheKey, embeddings: np.ndarray) -> Path:
        if not isinstance(embeddings, np.ndarray):
            raise InvalidTypeError(f"embeddings must be a numpy array, not {type(embeddings).__name__}")
        if embeddings.dtype != np.float32 or embeddings.shape != (key.n, key.dim):
            raise InvalidParameterError(f"embeddings are {embeddings.dtype} {embeddings.shape}, but the key expects "
                                        f"float32 ({key.n}, {key.dim}); cast with .astype(np.float32) or fix the key")
        self._entries[key.digest()] = np.array(embeddings, copy=True)
        return self.path(key)

    def check_writable(self, key: CacheKey) -> None:
        return None

    def has(self, key: CacheKey) -> bool:
        return key.digest() in self._entries

    def clear(self, model_id: str | None = None) -> int:
        if model_id is not None:
            raise InvalidParameterError("a MemoryCache clears all its entries at once: call clear() without model_id")
        removed = len(self._entries)
        self._entries.clear()
        return removed


#: the private texts of the innermost :func:`private_texts` block and the memory store their encodings go to
_PRIVATE: contextvars.ContextVar[tuple[frozenset[str], MemoryCache] | None] = contextvars.ContextVar(
    "veil_private_texts", default=None)


@contextlib.contextmanager
def private_texts(texts: Iterable[str], *, keep: bool = False) -> Iterator[None]:
    """While the block runs, encodings of any list of texts holding one of ``texts`` (a user's private data) that
    would go to the default on-disk cache (``cache=True``) are kept in this process' memory instead
    (:class:`MemoryCache`: reused within the block, gone when it ends, normally, on an error or on Ctrl-C).
    ``keep=True`` (the user asked for it: ``--cache-embeddings``) changes nothing: they are cached on disk as any
    corpus. Blocks nest (the texts add up)."""
    keep = check_bool("keep", keep)
    if keep:
        yield
        return
    outer = _PRIVATE.get()
    mine = frozenset(check_texts(list(texts)))
    store = outer[1] if outer is not None else MemoryCache()
    token = _PRIVATE.set(((outer[0] | mine) if outer is not None else mine, store))
    try:
        yield
    finally:
        _PRIVATE.reset(token)
        if outer is None:
            store.clear()


def resolve_store(cache: bool | EmbeddingCache, texts: Iterable[str]) -> EmbeddingCache | None:
    """The store ``encode_cached(..., cache=cache)`` reads and writes for ``texts``: None for ``cache=False``, the
    given cache, or for ``cache=True`` the default folder, unless ``texts`` hold a private text of an active
    :func:`private_texts` block (then its memory store)."""
    if cache is False:
        return None
    if not isinstance(cache, (bool, EmbeddingCache)):
        raise InvalidTypeError(f"cache must be True, False or an EmbeddingCache, not {type(cache).__name__}")
    if cache is not True:
        return cache
    scope = _PRIVATE.get()
    if scope is not None and not scope[0].isdisjoint(texts):
        return scope[1]
    return EmbeddingCache()


def encode_corpus(encoder: TextEncoder, corpus: Corpus, split: str | None = None, *,
                  cache: bool | EmbeddingCache = True, batch_size: int = 64, normalize: bool | None = None,
                  progress: bool = True) -> np.ndarray:
    """Embeddings of ``corpus`` (``split=None``: every text) in corpus order.

    ``cache=True`` uses :class:`EmbeddingCache` at its default root, an
    :class:`EmbeddingCache` uses that cache, ``False`` always runs the model. A
    hit does not run the model. The key includes ``encoder.model_id``, which
    changes when the encoder's weights are fine-tuned in place.
    """
    from veil.corpora.base import Corpus

    if not isinstance(corpus, Corpus):
        raise InvalidTypeError(f"corpus must be a veil Corpus (veil.corpora.load(...)), not {type(corpus).__name__}; "
                               f"use encoder.encode(texts) for a plain list")
    if split is not None and not isinstance(split, str):
        raise InvalidTypeError(f"split must be a split name or None, not {type(split).__name__}")
    texts = check_texts(corpus.texts if split is None else [corpus.texts[i] for i in corpus.indices(split)])
    return encode_cached(encoder, texts, corpus.name, split or ALL_SPLITS, cache=cache,
                         batch_size=batch_size, normalize=normalize, progress=progress)


def encode_sentences(encoder: TextEncoder, corpus: Corpus, *, cache: bool | EmbeddingCache = True,
                     batch_size: int = 64, normalize: bool | None = None,
                     progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings of every sentence of a document corpus, through the cache.

    Returns ``(S, offsets)``: ``S`` is float32 ``(total sentences, dim)`` in
    corpus order and ``offsets`` int64 ``(n_documents + 1,)``, so document
    ``i``'s sentence embeddings are ``S[offsets[i]:offsets[i + 1]]``. The
    cache entry is keyed like :func:`encode_corpus` with the split name
    ``"sentences"``.
    """
    from veil.corpora.base import Corpus

    if not isinstance(corpus, Corpus):
        raise InvalidTypeError(f"corpus must be a veil Corpus (veil.corpora.load(...)), not {type(corpus).__name__}")
    if corpus.documents is None:
        raise InvalidParameterError(f"corpus {corpus.name!r} has no sentence lists; use a document corpus "
                                    f"(e.g. news-articles, spam-assassin) or load a file with sentences")
    counts = np.asarray([len(doc) for doc in corpus.documents], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    flat = check_texts([sentence for doc in corpus.documents for sentence in doc])
    S = encode_cached(encoder, flat, corpus.name, "sentences", cache=cache, batch_size=batch_size,
                              normalize=normalize, progress=progress)
    return S, offsets


def encode_cached(encoder: TextEncoder, texts: list[str], name: str, split: str, *,
                  cache: bool | EmbeddingCache = True, batch_size: int = 64, normalize: bool | None = None,
                  progress: bool = True) -> np.ndarray:
    """Embeddings of any list of texts through the cache, keyed as ``name``/``split`` plus the texts' sha256.

    ``name`` and ``split`` only label the cache file (e.g. ``"news-articles"``,
    ``"vocabulary"``); the texts' hash decides hits. Private texts (:func:`private_texts`) are
    cached in memory only.
    """
    texts = check_texts(texts)
    store = resolve_store(cache, texts)
    normalize = encoder.normalize if normalize is None else check_bool("normalize", normalize)
    if store is None:
        return encoder.encode(texts, batch_size=batch_size, normalize=normalize, progress=progress)
    key = CacheKey(model_id=encoder.model_id, pooling=encoder.pooling, max_length=encoder.max_length,
                   normalize=bool(normalize), corpus=name, split=split,
                   texts_sha256=texts_sha256(texts), n=len(texts), dim=encoder.dim)
    hit = store.get(key)
    if hit is not None:
        encoder.warn_truncated(texts)  # the cached vectors are of truncated texts too: say so as encoding did
        return hit
    store.check_writable(key)  # fail before the model runs, not after
    embeddings = encoder.encode(texts, batch_size=batch_size, normalize=normalize, progress=progress)
    store.put(key, embeddings)
    return embeddings
