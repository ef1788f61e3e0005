"""The attributes page's Welch interval: equal to scipy's, and defined when one group is constant."""

from __future__ import annotations

import numpy as np
from scipy import stats

from veil.report.attributes import _welch


def test_welch_interval_matches_scipy():
    a, b = [0.30, 0.35, 0.41], [0.20, 0.22, 0.19, 0.25]
    ci = stats.ttest_ind(100 * np.asarray(a), 100 * np.asarray(b), equal_var=False).confidence_interval(0.95)
    assert _welch(a, b) == f"{100 * (np.mean(a) - np.mean(b)):+.1f} [{ci.low:+.1f}, {ci.high:+.1f}]"


def test_welch_with_a_constant_group_uses_the_other_groups_spread():
    """A main model at the majority class in every seed (3/7 each time) against one that varies: no warning
    (warnings are errors in this suite), and the interval is the one-sample t interval of the varying group."""
    const, varied = [3 / 7] * 3, [0.60, 0.70, 0.72]
    y = 100 * np.asarray(varied)
    half = stats.t.ppf(0.975, 2) * y.std(ddof=1) / np.sqrt(3)
    diff = 100 * 3 / 7 - y.mean()
    assert _welch(const, varied) == f"{diff:+.1f} [{diff - half:+.1f}, {diff + half:+.1f}]"
    assert _welch([0.5] * 3, [0.5] * 3) == "+0.0 (seeds agree exactly)"
