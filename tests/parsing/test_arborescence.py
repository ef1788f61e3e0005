"""The decoder always returns a tree (one root, no cycle), and the best one: checked against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from veil.errors import DataFormatError
from veil.models.arborescence import decode_tree, is_tree


def _slow_is_tree(heads):
    """Follow head links from every word; a tree reaches the root from each without revisiting a word."""
    n = len(heads)
    if sum(h == 0 for h in heads) != 1:
        return False
    for d in range(1, n + 1):
        seen, cur = set(), d
        while cur != 0:
            if cur in seen or not 0 <= heads[cur - 1] <= n:
                return False
            seen.add(cur)
            cur = heads[cur - 1]
    return True


def _brute_force(scores):
    n = scores.shape[0] - 1
    best, arg = -np.inf, None
    for heads in itertools.product(range(n + 1), repeat=n):
        if any(h == d + 1 for d, h in enumerate(heads)) or not _slow_is_tree(heads):
            continue
        total = sum(scores[d + 1, h] for d, h in enumerate(heads))
        if total > best:
            best, arg = total, heads
    return best


def _scores(n):
    return arrays(np.float64, (n + 1, n + 1), elements=st.floats(-20, 20, allow_nan=False, width=32))


@settings(max_examples=120, deadline=None)
@given(st.integers(1, 14).flatmap(_scores))
def test_decoder_always_returns_a_tree(scores):
    heads = decode_tree(scores)
    assert _slow_is_tree(list(heads)) and is_tree(heads)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5).flatmap(_scores))
def test_decoder_finds_the_best_single_root_tree(scores):
    heads = decode_tree(scores)
    total = sum(scores[d + 1, h] for d, h in enumerate(heads))
    assert total == pytest.approx(_brute_force(scores), abs=1e-6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=8))
def test_is_tree_matches_the_slow_check(heads):
    assert is_tree(np.array(heads)) == (_slow_is_tree(heads) and all(h != d + 1 for d, h in enumerate(heads)))


def test_argmax_cycle_and_many_roots_are_repaired():
    s = np.full((4, 4), -5.0)
    s[1, 2], s[2, 1], s[3, 0] = 10, 10, 1  # words 1 and 2 prefer each other (a cycle)
    assert is_tree(decode_tree(s))
    s = np.zeros((4, 4))
    s[1:, 0] = 10  # every word prefers the root
    assert (decode_tree(s) == 0).sum() == 1


def test_bad_scores_are_typed_errors():
    with pytest.raises(DataFormatError, match="square"):
        decode_tree(np.zeros((3, 2)))
    with pytest.raises(DataFormatError, match="NaN"):
        decode_tree(np.full((3, 3), np.nan))


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 12).flatmap(_scores))
def test_chu_liu_edmonds_matches_networkx(scores):
    import networkx as nx

    from veil.models.arborescence import chu_liu_edmonds

    n = scores.shape[0] - 1
    g = nx.DiGraph()
    for d in range(1, n + 1):
        for h in range(n + 1):
            if h != d:
                g.add_edge(h, d, weight=float(scores[d, h]))
    ref = nx.maximum_spanning_arborescence(g, attr="weight")
    ref_total = sum(scores[d, h] for h, d in ref.edges())
    heads = chu_liu_edmonds(scores)
    assert heads[0] == 0
    assert sum(scores[d, heads[d]] for d in range(1, n + 1)) == pytest.approx(ref_total, abs=1e-6)
