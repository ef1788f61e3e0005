"""DeepCandidate's batched, level-by-level depth (veil.defenses.sentdp.levels) against the App. A.1 loop.

Oracle tests: every utility of the fast path equals ``depth_reference`` (the line-by-line loop) or
``depth_histogram`` (the per-projection counts, itself checked against the loop in test_sentdp.py), bit
for bit, for documents computed alone or in batches of any size, on both ways of checking a level.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import veil.defenses.sentdp.levels as levels
from veil.defenses.sentdp import DeepCandidate
from veil.defenses.sentdp.depth import (DEPTHS, ProjectionSet, depth_fast, depth_histogram, depth_reference,
                                        project_sentences)
from veil.defenses.sentdp.levels import FIRST_LEVELS, depth_batch, iter_depths
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning


@st.composite
def batches(draw):
    """(documents, F, V): 1-6 documents of 1-12 sentences (some deeper than FIRST_LEVELS), with exact ties."""
    n, m, p, d = (draw(st.integers(1, 6)), draw(st.integers(1, 12)), draw(st.integers(1, 4)),
                  draw(st.integers(1, 4)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):  # small integers: exact projections, many exact ties
        def sample(*shape):
            return rng.integers(-2, 3, size=shape).astype(np.float64)
        V = sample(p, d)
        V[np.all(V == 0, axis=1), 0] = 1.0
    else:
        def sample(*shape):
            return rng.standard_normal(shape)
        V = rng.standard_normal((p, d))
        V /= np.linalg.norm(V, axis=1, keepdims=True)
    docs = [sample(int(rng.integers(1, 13)), d) for _ in range(n)]
    F = sample(m, d)
    for _ in range(draw(st.integers(0, 4))):  # candidates equal to sentences, duplicated sentences
        S = docs[rng.integers(n)]
        F[rng.integers(m)] = S[rng.integers(len(S))]
        S[rng.integers(len(S))] = S[rng.integers(len(S))]
    return docs, F, V


@pytest.mark.parametrize("depth", DEPTHS)
@settings(max_examples=150, deadline=None)
@given(case=batches())
def test_batches_match_the_reference_loop(depth, case):
    docs, F, V = case
    P = ProjectionSet.build(V, F)
    ref = np.stack([depth_reference(S, F, V, depth) for S in docs])
    np.testing.assert_array_equal(depth_batch(docs, P, depth), ref)
    for S, row in zip(docs, ref):
        np.testing.assert_array_equal(depth_fast(S, P, depth), row)
    mech = DeepCandidate(candidates=F, epsilon=3.0, depth=depth)
    for S, row in zip(docs, ref):  # the released distribution: identical log-probabilities
        np.testing.assert_array_equal(mech.log_probabilities(S, mech.projections(V)), mech.log_probabilities_of(row))


def clouds(seed: int, n_docs: int, m: int, d: int = 16, k: int = 20):
    """Documents of k sentences from one of 8 topic clouds; candidates: means of 8 sentences of a topic."""
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((8, d))

    def sentences(count):
        s = topics[rng.integers(8)] + 1.5 * rng.standard_normal((count, d))
        return s / np.linalg.norm(s, axis=1, keepdims=True)

    docs = [sentences(k).astype(np.float32) for _ in range(n_docs)]
    F = np.stack([sentences(8).mean(axis=0) for _ in range(m)])
    return docs, F


@pytest.mark.parametrize("strike_cost", [0.0, levels.STRIKE_COST, np.inf])
def test_striking_and_dense_checks_give_the_same_depths(monkeypatch, strike_cost):
    """STRIKE_COST 0: every level struck out band by band; inf: every level checked densely; default: mixed."""
    docs, F = clouds(0, 40, 600)
    P = ProjectionSet.build(np.random.default_rng(1).standard_normal((30, 16)), F)
    monkeypatch.setattr(levels, "STRIKE_COST", strike_cost)
    fast = depth_batch(docs, P, "tukey-min")
    np.testing.assert_array_equal(fast, np.stack([depth_histogram(S, P, "tukey-min") for S in docs]))
    assert len(np.unique(fast)) >= 3  # several levels, so both ways of checking a level have work
    for S, row in zip(docs[:2], fast[:2]):
        np.testing.assert_array_equal(row, depth_reference(S, F, P.vectors, "tukey-min"))


def test_deep_documents_take_the_histogram_path():
    """Depths above FIRST_LEVELS (candidates at the centre of 40 sentences in 2-D) are counted in full."""
    rng = np.random.default_rng(2)
    docs = [rng.standard_normal((40, 2)) for _ in range(3)] + [rng.standard_normal((5, 2))]
    F = np.vstack([0.05 * rng.standard_normal((6, 2)), 3 * rng.standard_normal((20, 2))])
    V = rng.standard_normal((4, 2))
    P = ProjectionSet.build(V, F)
    fast = depth_batch(docs, P, "tukey-min")
    assert fast.max() > FIRST_LEVELS
    np.testing.assert_array_equal(fast, np.stack([depth_reference(S, F, V, "tukey-min") for S in docs]))


def test_a_document_gets_the_same_utilities_in_any_batch():
    docs, F = clouds(3, 30, 300)
    docs[4] = docs[4][:7]  # several sentence counts
    docs[9] = docs[9].astype(np.float64)
    docs[11] = np.rint(docs[11] * 8).astype(np.int64)  # integer embeddings are cast like floats
    P = ProjectionSet.build(np.random.default_rng(4).standard_normal((25, 16)), F)
    alone = np.stack([depth_fast(S, P, "tukey-min") for S in docs])
    np.testing.assert_array_equal(depth_batch(docs, P, "tukey-min"), alone)
    np.testing.assert_array_equal(np.stack(list(iter_depths(docs, P, "tukey-min", batch=7))), alone)
    # the sentence projections themselves: each row from its own sentence only
    together = project_sentences(np.concatenate([S.astype(np.float64) for S in docs]), P.vectors)
    np.testing.assert_array_equal(together, np.concatenate([project_sentences(S, P.vectors) for S in docs]))


def test_release_draws_from_the_same_utilities_as_sample():
    docs, F = clouds(5, 25, 400)
    with pytest.warns(PrivacyLeakWarning):
        a = DeepCandidate(candidates=F, epsilon=4.0, n_projections=20, rng=9)
    with pytest.warns(PrivacyLeakWarning):
        b = DeepCandidate(candidates=F, epsilon=4.0, n_projections=20, rng=9)
    pa, pb = a.projections(), b.projections()
    released = a.release(docs, pa, workers=1).indices
    assert released.tolist() == [b.sample(S, pb).index for S in docs]  # same bits, same order, same utilities


def test_threads_change_nothing(monkeypatch):
    """Batches computed by several threads: the same utilities in document order, the same seeded releases."""
    monkeypatch.setattr(levels, "THREAD_WORK", 1)  # small batches are worth a thread here
    docs, F = clouds(8, 70, 300)
    P = ProjectionSet.build(np.random.default_rng(9).standard_normal((20, 16)), F)
    alone = np.stack([depth_fast(S, P, "tukey-min") for S in docs])
    for workers, batch in ((2, 256), (3, 5)):
        rows = iter_depths(docs, P, "tukey-min", batch=batch, workers=workers)
        first = next(rows)
        assert any(t.name.startswith("veil-depth") for t in threading.enumerate())  # computed in threads
        np.testing.assert_array_equal(np.stack([first, *rows]), alone)
    with pytest.warns(PrivacyLeakWarning):
        mechs = [DeepCandidate(candidates=F, epsilon=4.0, rng=10) for _ in range(3)]
    runs = [mech.release(docs, P, workers=w).indices.tolist() for mech, w in zip(mechs, (1, 2, 4))]
    assert runs[0] == runs[1] == runs[2]
    for bad, error in ((0, InvalidParameterError), (1.5, InvalidTypeError)):
        with pytest.raises(error, match="workers"):
            mechs[0].release(docs, P, workers=bad)


def test_more_than_32766_candidates_use_int32_ranks():
    rng = np.random.default_rng(6)
    F = rng.standard_normal((33_000, 2))
    V = rng.standard_normal((2, 2))
    P = ProjectionSet.build(V, F)
    assert P.rank_small.dtype == np.int32
    docs = [rng.standard_normal((5, 2)), 0.3 * rng.standard_normal((9, 2))]
    fast = depth_batch(docs, P, "tukey-min")
    assert fast.max() >= 2
    np.testing.assert_array_equal(fast, np.stack([depth_histogram(S, P, "tukey-min") for S in docs]))
    np.testing.assert_array_equal(fast[0], depth_reference(docs[0], F, V, "tukey-min"))


def test_batch_validation():
    F = np.random.default_rng(7).standard_normal((5, 3))
    P = ProjectionSet.build(np.eye(3), F)
    with pytest.raises(InvalidParameterError, match="depth must be one of"):
        depth_batch([np.ones((2, 3))], P, "median")
    with pytest.raises(DataFormatError, match="at least one sentence"):
        depth_batch([np.ones((2, 3)), np.ones((0, 3))], P, "tukey-min")
    assert depth_batch([], P, "tukey-min").shape == (0, 5)


def test_default_workers_follow_the_usable_cpus_and_omp_num_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert levels.default_workers() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert levels.default_workers() == max(1, min(levels.MAX_WORKERS, len(os.sched_getaffinity(0))))


def test_small_work_stays_in_the_calling_thread():
    docs, F = clouds(11, 40, 50)
    P = ProjectionSet.build(np.random.default_rng(12).standard_normal((5, 16)), F)
    rows = iter_depths(docs, P, "tukey-min", workers=4)
    next(rows)
    assert not any(t.name.startswith("veil-depth") for t in threading.enumerate())
    assert len(list(rows)) == len(docs) - 1
