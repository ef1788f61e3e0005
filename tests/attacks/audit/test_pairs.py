"""The SentDP neighbour pairs of the empirical audit (veil.attacks.audit.pairs), on synthetic vectors.

Statistical assertions state their false-positive rate: a bound at confidence 1 - alpha exceeds
the true epsilon with probability at most alpha, and the tests that rely on that use
alpha = 1e-6 (seeded, so each is deterministic; the rate says how unlikely a failure would be
for another seed).
"""

from __future__ import annotations

import numpy as np
import pytest

from veil.attacks.audit.empirical import DistinguishingGame, predicted_bounds
from veil.attacks.audit.pairs import (CachedEmbedder, deepcandidate_pairs, exact_predicted_bound, metric_dp_neighbour,
                                      metric_dp_pairs, truncation_neighbours, truncation_pairs)
from veil.errors import InvalidParameterError

ALPHA = 1e-6  # false-positive rate of every "bound <= true epsilon" assertion below


# ---------------------------------------------------------------- the SentDP pairs (synthetic vectors)
def _synthetic(seed=0, m=60, d=8, k=6):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, d)) * 0.3, [rng.standard_normal((k, d)) for _ in range(2)]


def test_exact_predicted_bound_matches_a_direct_computation():
    p = np.log(np.array([0.5, 0.3, 0.2]))
    q = np.log(np.array([0.2, 0.3, 0.5]))
    # the likelihood-ratio regions are {2}, {2, 1}, {2, 1, 0}: the first is best here
    direct = max(predicted_bounds(np.array([0.2, 0.5]), np.array([0.5, 0.8]), 1000, 0.05))
    assert exact_predicted_bound(p, q, 1000, 0.05) == pytest.approx(direct)


def test_deepcandidate_game_respects_epsilon():
    from veil.defenses.sentdp import DeepCandidate

    F, docs = _synthetic()
    mech = DeepCandidate(candidates=F, epsilon=2.0, n_projections=5)
    pairs = deepcandidate_pairs(mech, docs, kind="reflect", neighbours_per_document=4, keep=2, trials=3000,
                                alpha=ALPHA, document_ids=[10, 11], rng=0)
    assert len(pairs) == 2 and {s.name for s in pairs[0].statistics} == {"utility-gap", "projection", "histogram"}
    scores = [p.info["screening_score"] for p in pairs]
    assert scores == sorted(scores, reverse=True) and all(0 <= p.info["exact_max_abs_log_ratio"] <= 2 + 1e-9
                                                           for p in pairs)
    res = DistinguishingGame(pairs, trials=3000, alpha=ALPHA).run()
    assert 0.0 <= res.epsilon_lower_bound <= 2.0
    with pytest.raises(InvalidParameterError, match="neighbour kind"):
        deepcandidate_pairs(mech, docs, kind="corner", neighbours_per_document=1, keep=1, trials=10, alpha=0.05,
                            document_ids=[0, 1])


def test_truncation_corner_neighbour_spends_the_whole_epsilon():
    from veil.defenses.truncation import Truncation

    rng = np.random.default_rng(5)
    mech = Truncation(lower=-np.ones(4), upper=np.ones(4), epsilon=3.0)
    S = rng.uniform(-0.5, 0.5, size=(5, 4))
    S[2] = [1.0, -1.0, 1.0, 1.0]  # a sentence at a corner of the box
    (nb,) = truncation_neighbours(mech, S, kind="corner", n=1)
    assert nb.position == 2 and list(nb.vector) == [-1.0, 1.0, -1.0, -1.0]
    pairs = truncation_pairs(mech, [S], kind="corner", neighbours_per_document=1, keep=1, document_ids=[0])
    assert pairs[0].info["privacy_loss_bound"] == pytest.approx(3.0)  # sum_j delta_j / b_j = epsilon exactly
    extreme = truncation_neighbours(mech, S, kind="extreme", n=3, rng=0)
    assert len(extreme) == 3 and all(np.abs(mech.clip(nb.vector[None, :])).min() == 1.0 for nb in extreme)
    res = DistinguishingGame(pairs, trials=20000, alpha=ALPHA).run()
    # d = 4 Laplace coordinates, each spending epsilon / 4: the likelihood-ratio test gets a good part of it
    assert res.statistic == "log-likelihood-ratio" and 1.0 < res.epsilon_lower_bound <= 3.0


def test_metric_dp_neighbours_and_their_sentence_level_epsilon():
    from veil.defenses.metric_dp import WordMetricDP
    from veil.encoders.word_vectors import WordVectors

    words = ["red", "blue", "green", "cat", "dog", "far"]
    matrix = np.array([[0, 0], [0.5, 0], [0, 0.5], [3, 3], [3, 3.5], [10, 0]], dtype=np.float32)
    mech = WordMetricDP(vectors=WordVectors(words=words, matrix=matrix), epsilon=2.0)
    one = metric_dp_neighbour(mech, "Red cat, blue dog.", kind="one-word")
    assert one["positions"] == [0] and one["text"] == "far cat, blue dog."  # red is 10 from far, the most
    assert one["distance_sum"] == pytest.approx(10.0) and one["formal_epsilon"] == pytest.approx(20.0)
    every = metric_dp_neighbour(mech, "Red cat, blue dog.", kind="all-words")
    assert every["positions"] == [0, 1, 2, 3] and every["text"].count(",") == 1 and every["words"] == 4
    assert every["formal_epsilon"] == pytest.approx(2.0 * every["distance_sum"])
    assert every["formal_epsilon"] > one["formal_epsilon"]
    assert metric_dp_neighbour(mech, "1, 2, 3.", kind="one-word") is None

    class Encoder:  # stands in for MiniLM: a fixed random embedding per text
        calls = 0

        def encode(self, texts, progress=False):
            Encoder.calls += len(texts)
            return np.stack([np.random.default_rng(sum(map(ord, t))).standard_normal(3) for t in texts])

    embed = CachedEmbedder(Encoder())
    pairs = metric_dp_pairs(mech, [(0, 0, "Red cat."), (0, 1, "Blue dog, green cat.")], kind="one-word", keep=1,
                            embed=embed)
    assert len(pairs) == 1 and [s.name for s in pairs[0].statistics] == ["words", "embedding"]
    res = DistinguishingGame(pairs, trials=500, alpha=ALPHA).run()
    assert 0.0 <= res.epsilon_lower_bound <= pairs[0].info["formal_epsilon"]
    # rewrites of a six-word vocabulary repeat: each distinct text was encoded once
    assert embed.misses == Encoder.calls <= 6 ** 4 and embed.hits > embed.misses
