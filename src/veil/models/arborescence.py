"""Well-formed dependency trees from arc scores: the maximum spanning arborescence with a single root.

``scores[d, h]`` is the score of word ``d``'s head being ``h`` (index 0 is the artificial root; rows and
columns 0..n). :func:`decode_tree` returns heads ``(n,)`` (1-based positions, 0 = root) of the highest-scoring
tree in which exactly one word hangs from the root and there is no cycle.

* When the per-word argmax already forms such a tree it is the answer (it maximises the score over all head
  assignments, so also over trees); this is the common case for a trained parser and costs no graph search.
* Otherwise Chu-Liu-Edmonds (:func:`chu_liu_edmonds`, numpy, recursive contraction; tested against
  networkx's ``maximum_spanning_arborescence`` and brute force) runs on the complete graph with a penalty
  larger than any score difference on every root arc, so the optimum uses one root arc and, among
  single-root trees, has the highest score.
"""

from __future__ import annotations

import numpy as np

from veil.errors import DataFormatError

__all__ = ["decode_tree", "is_tree", "chu_liu_edmonds"]


def is_tree(heads: np.ndarray) -> bool:
    """True when ``heads`` (1-based, 0 = root) has exactly one root word and no cycle."""
    heads = np.asarray(heads)
    n = len(heads)
    if n == 0 or int((heads == 0).sum()) != 1 or ((heads < 0) | (heads > n)).any():
        return False
    if (heads == np.arange(1, n + 1)).any():
        return False
    # every word reaches the root in at most n steps
    state = np.arange(1, n + 1)
    for _ in range(n):
        state = np.where(state == 0, 0, heads[np.maximum(state - 1, 0)])
    return bool((state == 0).all())


def _cycle(heads: np.ndarray) -> np.ndarray | None:
    """The nodes of one cycle of the head function (node 0 is the root and has no head), or None."""
    n = len(heads)
    color = np.zeros(n, dtype=np.int8)  # 0 new, 1 on the current path, 2 done
    color[0] = 2
    for start in range(1, n):
        path, v = [], start
        while color[v] == 0:
            color[v] = 1
            path.append(v)
            v = heads[v]
        if color[v] == 1:  # came back to the current path: a cycle from v
            return np.array(path[path.index(v):], dtype=np.int64)
        color[path] = 2
    return None


def chu_liu_edmonds(scores: np.ndarray) -> np.ndarray:
    """Maximum spanning arborescence rooted at node 0 (Chu-Liu-Edmonds, recursive contraction).

    ``scores[d, h]`` for nodes 0..n (-inf: no arc); returns ``heads`` (n + 1,) with ``heads[0] = 0``.
    """
    s = np.array(scores, dtype=np.float64)
    np.fill_diagonal(s, -np.inf)
    s[0] = -np.inf
    heads = s.argmax(axis=1)
    heads[0] = 0
    cycle = _cycle(heads)
    if cycle is None:
        return heads
    rest = np.array([v for v in range(len(s)) if v not in set(cycle.tolist())], dtype=np.int64)  # rest[0] == 0
    m = len(rest)
    sub = np.full((m + 1, m + 1), -np.inf)
    sub[:m, :m] = s[np.ix_(rest, rest)]
    enter = s[np.ix_(cycle, rest)] - s[cycle, heads[cycle]][:, None]  # cycle node v takes head u instead
    sub[m, :m] = enter.max(axis=0)
    enter_at = cycle[enter.argmax(axis=0)]
    leave = s[np.ix_(rest, cycle)]  # an outside word hangs from a cycle node
    sub[:m, m] = leave.max(axis=1)
    leave_from = cycle[leave.argmax(axis=1)]
    sub_heads = chu_liu_edmonds(sub)
    out = heads.copy()
    for i in range(1, m):
        h = sub_heads[i]
        out[rest[i]] = leave_from[i] if h == m else rest[h]
    u = sub_heads[m]
    out[enter_at[u]] = rest[u]
    return out


def decode_tree(scores: np.ndarray) -> np.ndarray:
    """Heads of the best single-root tree for the ``(n + 1, n + 1)`` score matrix (rows: dependents)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1] or s.shape[0] < 2:
        raise DataFormatError(f"arc scores must be a square (n + 1, n + 1) matrix with n >= 1 words, got {s.shape}")
    if not np.isfinite(s[1:]).all():
        raise DataFormatError("arc scores contain NaN or infinite values")
    n = s.shape[0] - 1
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    cand = s[1:].copy()
    cand[np.arange(n), np.arange(1, n + 1)] = -np.inf  # no self-loops
    heads = cand.argmax(axis=1)
    if is_tree(heads):
        return heads.astype(np.int64)
    finite = cand[np.isfinite(cand)]
    penalty = (float(finite.max() - finite.min()) + 1.0) * (n + 1)
    pen = s.copy()
    pen[1:, 0] -= penalty
    return chu_liu_edmonds(pen)[1:].astype(np.int64)
