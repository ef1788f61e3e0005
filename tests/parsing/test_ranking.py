"""MRR with pessimistic ties equals a slow reference; prv and the breach ratio follow the paper's numbers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.errors import DataFormatError
from veil.metrics.ranking import breach_ratio, pessimistic_ranks, ranking_metrics, reciprocal_ranks


def _slow_mrr(scores, targets):
    total = 0.0
    for row, t in zip(scores, targets):
        if t < 0:
            continue  # outside the vocabulary: reciprocal rank 0
        rank = 0
        for s in row:
            if s >= row[t]:  # pessimistic: every tie counts against the attacker
                rank += 1
        total += 1.0 / rank
    return total / len(targets)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 9), st.data())
def test_mrr_equals_the_slow_reference(n, v, data):
    scores = np.array(data.draw(st.lists(st.lists(st.integers(-3, 3), min_size=v, max_size=v), min_size=n,
                                         max_size=n)), dtype=float)  # small integers: many ties
    targets = np.array(data.draw(st.lists(st.integers(-1, v - 1), min_size=n, max_size=n)))
    ranks = pessimistic_ranks(scores, targets)
    m = ranking_metrics(ranks, n_boot=50)
    assert m["mrr"].mean == pytest.approx(_slow_mrr(scores, targets))
    assert m["prv"].mean == pytest.approx(100 - 100 * _slow_mrr(scores, targets))
    import torch

    assert (pessimistic_ranks(torch.as_tensor(scores), targets) == ranks).all()


def test_ties_are_pessimistic_and_top1_counts_rank_one():
    scores = np.array([[1.0, 1.0, 0.0], [3.0, 1.0, 2.0]])
    ranks = pessimistic_ranks(scores, [0, 0])
    assert ranks.tolist() == [2, 1]
    assert reciprocal_ranks([2, 1, 0]).tolist() == [0.5, 1.0, 0.0]
    m = ranking_metrics(ranks, groups=[0, 0], n_boot=20)
    assert m["top1"].mean == 50.0 and m["mrr"].mean == 0.75


def test_breach_ratio_is_uas_over_leak_as_table_2():
    assert breach_ratio(94.1, 68.3) == pytest.approx(2.97, abs=0.005)
    assert breach_ratio(85.2, 80.2) == pytest.approx(4.30, abs=0.005)
    with pytest.raises(DataFormatError):
        breach_ratio(90.0, 100.0)


def test_empty_and_malformed_inputs():
    with pytest.raises(DataFormatError, match="no obfuscated tokens"):
        ranking_metrics([])
    with pytest.raises(DataFormatError):
        pessimistic_ranks(np.zeros((2, 3)), [0, 5])
