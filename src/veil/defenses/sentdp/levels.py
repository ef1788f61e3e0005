"""Approximate Tukey depth of many documents at once, level by level: DeepCandidate's fast path.

Meehan et al. 2022, Sec. 4.4 (Tukey's minimum over projections, veil's default depth). On projection j a
candidate at sorted position r has the one-dimensional depth ``min(le_j(r), ge_j(r))`` with

    le_j(r) = #{l : left_j(s_l) <= r}        ge_j(r) = #{l : right_j(s_l) > r}

where ``left_j(s)`` / ``right_j(s)`` count the candidates whose value on projection j is ``< s`` /
``<= s`` (so ``s <= c_r  <=>  r >= left(s)`` and ``s >= c_r  <=>  r < right(s)``: ties count on both
sides, as in :mod:`veil.defenses.sentdp.depth`). Hence the depth on projection j is >= t exactly when
``lo_jt <= r < hi_jt``, with ``lo_jt`` the left position of the t-th smallest sentence value and ``hi_jt``
the right position of the t-th largest, and a candidate's Tukey depth (the minimum over projections) is
the number of levels t = 1, 2, ... whose window holds it on EVERY projection (the windows shrink as t
grows, so the levels a candidate passes are a prefix).

Level by level, the candidates still at depth >= t - 1 are checked against the level-t windows in one of
two ways, whichever touches fewer entries (both give the same set):

* densely: their ranks (int16 when m < 2^15) compared with the windows, projection block by block
  (8, 16, 32, ... projections; only the candidates inside every window so far go on to the next block);
* by striking out: the candidates at the positions that leave the windows (``lo_j(t-1) .. lo_jt - 1``
  and ``hi_jt .. hi_j(t-1) - 1`` of each projection, found through the sorted order) are removed.

On real documents most candidates leave at level 1 or 2 through thin bands, so a document costs a small
fraction of the p * m counts of the histogram path (:func:`~veil.defenses.sentdp.depth.depth_histogram`).

Shared across the documents of one call: all their sentences are projected in one einsum (row by row,
the same numbers as each document alone: :func:`~veil.defenses.sentdp.depth.project_sentences`), the
documents with the same number of sentences are sorted together, and one binary search per projection
locates the ``FIRST_LEVELS`` smallest and largest values of every document. A document that still holds
candidates after those levels (deep or long documents with many ties) is computed by the histogram path
from the same projections; so is every document under ``depth="appendix"``. Each document's utilities
are therefore a function of that document alone, identical in a batch of any size (tested).
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Iterator, Sequence

import numpy as np

from veil.defenses.sentdp.depth import DEPTHS, ProjectionSet, depth_histogram, project_sentences
from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["FIRST_LEVELS", "BATCH", "MAX_WORKERS", "default_workers", "depth_batch", "iter_depths", "tukey_levels",
           "windows"]

FIRST_LEVELS = 6  # levels located for every document at once; deeper documents take the histogram path
BATCH = 256  # documents per batch in iter_depths (memory: BATCH * m float64 utilities)
BATCH_BYTES = 1 << 24  # at most this many bytes of utilities per batch (fewer documents when m is large)
MIN_CHUNK = 16  # smallest batch worth a thread
THREAD_WORK = 1 << 22  # ... and at least this many (candidate, projection) pairs in it: less is not worth a thread
MAX_WORKERS = 4  # threads at most by default (the sampler runs in the caller's thread, holding the GIL)
# relative costs (measured on real MiniLM documents, m = 5000, p = 100): striking one band entry costs about as
# much as one dense rank comparison with its gathers, one broadcast comparison about a fifth of that
STRIKE_COST = 1.0
BROADCAST_COST = 0.2


def default_workers() -> int:
    """Threads for :func:`iter_depths`: the CPUs this process may use, at most ``MAX_WORKERS``.

    ``OMP_NUM_THREADS``, when set to a positive integer, caps it too (as it
    caps numpy's and torch's own threads).
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cpus = os.cpu_count() or 1
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        cpus = min(cpus, int(omp))
    return max(1, min(MAX_WORKERS, cpus))


def iter_depths(documents: Sequence[np.ndarray], projections: ProjectionSet, depth: str, *,
                batch: int = BATCH, workers: int = 1) -> Iterator[np.ndarray]:
    """The utilities (m,) of each document in turn, in order, computed ``batch`` documents at a time.

    With ``workers > 1`` the batches are computed by that many threads
    (numpy's projections, sorts, searches and gathers run outside the GIL),
    at most ``workers + 1`` batches ahead of the consumer; the utilities do
    not depend on it (each is a function of its own document), and the
    consumer (the sampler) sees them in document order.
    """
    n = len(documents)
    p, m = projections.order.shape
    batch = max(1, min(batch, BATCH_BYTES // (8 * m)))  # each batch holds (batch, m) float64 utilities
    min_chunk = max(MIN_CHUNK, -(-THREAD_WORK // (p * m)))  # documents worth handing to a thread
    if workers > 1 and n >= 2 * min_chunk:
        batch = min(batch, max(min_chunk, -(-n // (2 * workers))))
    else:
        workers = 1
    chunks = (documents[start:start + batch] for start in range(0, n, batch))
    if workers <= 1 or n <= batch:
        for chunk in chunks:
            yield from depth_batch(chunk, projections, depth)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="veil-depth") as pool:
        pending = deque(pool.submit(depth_batch, chunk, projections, depth)
                        for chunk in itertools.islice(chunks, workers + 1))
        while pending:
            rows = pending.popleft().result()
            chunk = next(chunks, None)
            if chunk is not None:
                pending.append(pool.submit(depth_batch, chunk, projections, depth))
            yield from rows


def depth_batch(documents: Sequence[np.ndarray], projections: ProjectionSet, depth: str) -> np.ndarray:
    """Depth of every candidate among each document's sentence embeddings: float64 (n, m)."""
    if depth not in DEPTHS:
        raise InvalidParameterError(f"depth must be one of {', '.join(map(repr, DEPTHS))}, got {depth!r}")
    docs = [np.asarray(S) for S in documents]
    if any(S.ndim != 2 or S.shape[0] < 1 for S in docs):
        raise DataFormatError("a document needs at least one sentence embedding")
    p, m = projections.sorted_values.shape
    n = len(docs)
    out = np.empty((n, m))
    if n == 0:
        return out
    ks = np.asarray([S.shape[0] for S in docs], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(ks)])
    # float64 first, as project_sentences casts each document alone: the same input numbers
    X = docs[0] if n == 1 else np.concatenate([S.astype(np.float64, copy=False) for S in docs])
    sp = project_sentences(X, projections.vectors)  # (N, p): each row from its own sentence only
    if depth == "appendix":
        for b in range(n):
            out[b] = depth_histogram(docs[b], projections, depth, sentence_values=sp[offsets[b]:offsets[b + 1]])
        return out
    levels = int(min(FIRST_LEVELS, ks.max()))
    lo, hi = windows(sp, ks, offsets, levels, projections)
    out, unfinished = tukey_levels(lo, hi, ks, projections)
    for b in np.flatnonzero(unfinished).tolist():  # candidates deeper than the levels located: count everything
        out[b] = depth_histogram(docs[b], projections, depth, sentence_values=sp[offsets[b]:offsets[b + 1]])
    return out


def windows(sp: np.ndarray, ks: np.ndarray, offsets: np.ndarray, levels: int,
            projections: ProjectionSet) -> tuple[np.ndarray, np.ndarray]:
    """Level windows ``(lo, hi)``, each int64 (n, p, levels): ``lo[b, j, t-1] <= r < hi[b, j, t-1]``.

    ``lo`` is the left position of document b's t-th smallest value on
    projection j, ``hi`` the right position of its t-th largest. Levels
    beyond a document's k are empty (``lo = m``, ``hi = 0``).
    """
    sv = projections.sorted_values
    p, m = sv.shape
    n = len(ks)
    low = np.full((n, levels, p), np.inf)  # +inf: left position m
    high = np.full((n, levels, p), -np.inf)  # -inf: right position 0
    for k in np.unique(ks).tolist():
        idx = np.flatnonzero(ks == k)
        values = np.sort(sp[offsets[idx][:, None] + np.arange(k)], axis=1)  # (n_k, k, p), ascending
        t = min(levels, k)
        low[idx, :t] = values[:, :t]
        high[idx, :t] = values[:, ::-1][:, :t]
    # right(s) = #{c <= s} = #{c < nextafter(s, +inf)}: no float lies strictly between s and its successor
    queries = np.concatenate([low, np.nextafter(high, np.inf)], axis=1)  # (n, 2 levels, p)
    queries = np.ascontiguousarray(queries.transpose(2, 0, 1)).reshape(p, n * 2 * levels)
    order = np.argsort(queries, axis=1)  # sorted keys make the binary searches cache-friendly
    queries = np.take_along_axis(queries, order, axis=1)
    found = np.empty(queries.shape, dtype=np.int64)
    for j in range(p):
        found[j] = sv[j].searchsorted(queries[j], side="left")  # exact binary search
    pos = np.empty_like(found)
    np.put_along_axis(pos, order, found, axis=1)
    pos = pos.reshape(p, n, 2 * levels).transpose(1, 0, 2)
    return pos[:, :, :levels], pos[:, :, levels:]


def _concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + l) for s, l in zip(starts, lengths)])`` without a Python loop."""
    ends = np.cumsum(lengths)
    return np.arange(int(ends[-1])) + np.repeat(starts - ends + lengths, lengths)


def _groups(sizes: np.ndarray, limit: int) -> list[np.ndarray]:
    """Consecutive index groups whose sizes sum to at most ``limit`` (a single larger item forms its own)."""
    groups, start, total = [], 0, 0
    for i, size in enumerate(sizes.tolist()):
        if i > start and total + size > limit:
            groups.append(np.arange(start, i))
            start, total = i, 0
        total += size
    if start < len(sizes):
        groups.append(np.arange(start, len(sizes)))
    return groups


def _blocks(p: int) -> list[tuple[int, int]]:
    """Projection blocks of growing size (8, 16, 32, ...): candidates that leave early skip the rest."""
    out, start, size = [], 0, 8
    while start < p:
        out.append((start, min(p, start + size)))
        start, size = start + size, 2 * size
    return out


def _dense_cost(bands: np.ndarray, alive: np.ndarray, p: int, m: int) -> np.ndarray:
    """Rank comparisons the block-by-block dense check is expected to make, per document (an estimate).

    A candidate leaves on projection j with probability about ``f_j`` (the
    share of the alive candidates in projection j's bands, taken as
    independent): a block of projections is reached by ``alive * prod(1 -
    f)`` of them over the projections before it.
    """
    f = np.minimum((bands[:, :p] + bands[:, p:]) / np.maximum(alive, 1)[:, None], 1.0 - 1e-9)
    reach = np.exp(np.concatenate([np.zeros((len(f), 1)), np.cumsum(np.log1p(-f), axis=1)], axis=1))  # (a, p + 1)
    starts = np.asarray([j0 for j0, _ in _blocks(p)])
    sizes = np.asarray([j1 - j0 for j0, j1 in _blocks(p)], dtype=np.float64)
    per_block = reach[:, starts] * sizes  # (a, blocks)
    # the first block of a document whose candidates are all alive is a broadcast, with no gathers
    per_block[:, 0] *= np.where(alive == m, BROADCAST_COST, 1.0)
    return alive * per_block.sum(axis=1)


def tukey_levels(lo: np.ndarray, hi: np.ndarray, ks: np.ndarray,
                 projections: ProjectionSet) -> tuple[np.ndarray, np.ndarray]:
    """Tukey depth of every candidate for n documents from their windows ``lo``, ``hi`` (n, p, T).

    Returns ``(util, unfinished)``: ``util`` float64 (n, m), and a boolean
    (n,) marking the documents with candidates still inside the windows of
    level T while T < k (their depth may be higher: the caller counts them
    on the histogram path; their row of ``util`` is meaningless).
    """
    n, p, levels = lo.shape
    m = projections.order.shape[1]
    small = projections.rank_small.dtype
    unsigned = np.uint16 if small == np.int16 else np.uint32
    rowbase = np.arange(p, dtype=np.int64) * m
    mask = np.ones((n, m), dtype=bool)  # candidates at depth >= t of each document
    flat = mask.reshape(-1)  # a view: document b's candidate i is flat[b * m + i]
    util = np.zeros((n, m), dtype=np.int16)  # the number of levels passed (levels <= FIRST_LEVELS or k)
    alive = np.full(n, m, dtype=np.int64)
    active = np.arange(n)  # documents that still have candidates at depth >= t
    prev_lo, prev_hi = np.zeros((n, p), dtype=np.int64), np.full((n, p), m, dtype=np.int64)
    for t in range(levels):
        low, high = lo[active, :, t], hi[active, :, t]
        # an empty window on some projection: no candidate of that document reaches depth t + 1
        keep = ~(high <= low).any(axis=1)
        if not keep.all():
            mask[active[~keep]] = False
            active, low, high, prev_lo, prev_hi = active[keep], low[keep], high[keep], prev_lo[keep], prev_hi[keep]
        if active.size == 0:
            break
        bands = np.concatenate([low - prev_lo, prev_hi - high], axis=1)  # (a, 2p) lengths of the bands
        band = bands.sum(axis=1)
        strike = band * STRIKE_COST < _dense_cost(bands, alive[active], p, m)
        if strike.any():  # strike out the candidates in the bands
            s_idx = np.flatnonzero(strike & (band > 0))
            for g in _groups(band[s_idx], 1 << 21):
                rows = s_idx[g]
                starts = np.concatenate([rowbase + prev_lo[rows], rowbase + high[rows]], axis=1)
                positions = _concat_ranges(starts.ravel(), bands[rows].ravel())
                flat[np.repeat(active[rows] * m, band[rows]) + projections.order_flat[positions]] = False
        if not strike.all():  # check the remaining candidates' ranks against the windows
            d_idx = np.flatnonzero(~strike)
            for g in _groups(alive[active[d_idx]] * p, 1 << 22):
                rows = d_idx[g]
                docs = active[rows]
                base_all = low[rows].astype(small).T  # (p, documents)
                width_all = (high[rows] - low[rows]).astype(small).view(unsigned).T
                blocks = _blocks(p)
                if (alive[docs] == m).all():  # every candidate alive: the first block by broadcasting, no gathers
                    j0, j1 = blocks.pop(0)
                    ranks = projections.rank_small[j0:j1, None, :]  # (block, 1, m)
                    pairs = np.flatnonzero(((ranks - base_all[j0:j1, :, None]).view(unsigned)
                                            < width_all[j0:j1, :, None]).all(axis=0))
                else:
                    pairs = np.flatnonzero(mask[docs])
                which, cand = np.divmod(pairs, m)
                for j0, j1 in blocks:  # the survivors of each block of projections go on to the next
                    ranks = projections.rank_small[j0:j1, cand]  # (block, pairs)
                    # low <= r < high  <=>  (r - low) < (high - low) as unsigned integers (r - low < 0 wraps high)
                    inside = ((ranks - base_all[j0:j1, which]).view(unsigned) < width_all[j0:j1, which]).all(axis=0)
                    which, cand = which[inside], cand[inside]
                    if cand.size == 0:
                        break
                mask[docs] = False
                flat[docs[which] * m + cand] = True
        passed = mask[active]
        util[active] += passed
        alive[active] = passed.sum(axis=1)
        keep = alive[active] > 0
        active, prev_lo, prev_hi = active[keep], low[keep], high[keep]
        if active.size == 0:
            break
    unfinished = np.zeros(n, dtype=bool)
    unfinished[active] = ks[active] > levels
    return util.astype(np.float64), unfinished
