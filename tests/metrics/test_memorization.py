"""Canary exposure and the zlib ratio against hand-computed values, and typed errors for what cannot be scored."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from veil.errors import DataFormatError, InvalidParameterError
from veil.metrics.memorization import (exact_exposure, exposure_from_rank, sampled_exposure, zlib_entropy,
                                       zlib_ratio)


def test_exposure_from_a_rank_by_hand():
    assert exposure_from_rank(1, 1024) == 10.0  # the likeliest of 2^10: all 10 bits
    assert exposure_from_rank(512, 1024) == 1.0  # the median candidate: one bit
    assert exposure_from_rank(1024, 1024) == 0.0  # the least likely: nothing
    assert exposure_from_rank(3, 10**6) == pytest.approx(math.log2(10**6) - math.log2(3))


def test_exact_exposure_ranks_ties_against_the_canary():
    scores = np.array([5.0, 1.0, 2.0, 2.0, 7.0, 3.0, 9.0, 4.0])  # 8 candidates, the canary's own among them
    assert exact_exposure(1.0, scores) == 3.0  # rank 1 of 8: log2 8 - 0
    assert exact_exposure(2.0, scores) == pytest.approx(3 - 1.5849625)  # a tie: rank 3, not 2
    assert exact_exposure(9.0, scores) == 0.0
    with pytest.raises(DataFormatError, match="must include the canary"):
        exact_exposure(0.5, scores)


def test_sampled_exposure_counts_and_caps_and_extrapolates():
    samples = np.arange(1.0, 100.0)  # 99 samples 1..99
    est = sampled_exposure(10.0, samples)  # 10 samples at or below: (10 + 1) / 100
    assert (est.k, est.n, est.method) == (10, 99, "count") and est.value == pytest.approx(-math.log2(11 / 100))
    top = sampled_exposure(0.0, samples)  # beats every sample: the count stops at log2 100
    assert top.at_cap and top.value == pytest.approx(math.log2(100)) == pytest.approx(top.cap)
    rng = np.random.default_rng(0)
    normal = rng.normal(0.0, 1.0, size=5000)
    far = sampled_exposure(-6.0, normal, extrapolate="skewnorm")  # about -log2 Phi(-6) = 29.6 bits for N(0, 1)
    assert far.method == "skewnorm" and far.value > far.cap and 24 < far.value < 36
    with pytest.raises(InvalidParameterError, match="'none' or 'skewnorm'"):
        sampled_exposure(0.0, samples, extrapolate="gauss")
    with pytest.raises(DataFormatError, match="finite"):
        sampled_exposure(float("nan"), samples)


def test_zlib_entropy_and_ratio_by_hand():
    text = "the quick brown fox jumps over the lazy dog"
    bits = 8 * len(zlib.compress(text.encode("utf-8")))
    assert zlib_entropy(text) == bits and zlib_ratio(2.5, text) == pytest.approx(2.5 / bits)
    # a repetitive text compresses well, so the same log-perplexity gives it a higher (less suspicious) ratio
    assert zlib_ratio(2.5, "ab" * 200) > zlib_ratio(2.5, "a unique account number 4815162342 and more words")
