"""The negative controls (veil.defenses.sentdp.controls): broken exactly as they say, and caught by the exact audit.

The exact audit catches them: tests/attacks/audit/test_exact.py (and on real documents, through the experiment
runner, tests/experiments).
"""

from __future__ import annotations

import numpy as np
import pytest

from veil.defenses.sentdp import DeepCandidate
from veil.defenses.sentdp.controls import NEGATIVE_CONTROLS, DoubledEpsilon, DoubledSensitivity
from veil.defenses.sentdp.depth import depth_fast
from veil.errors import PrivacyLeakWarning

from .test_sentdp_levels import clouds


def test_controls_are_marked_and_keep_their_names():
    """The names are what audit records carry as their ``defense``; ``control`` keeps them apart from real defenses."""
    assert dict(NEGATIVE_CONTROLS) == {"doubled-sensitivity": DoubledSensitivity, "doubled-epsilon": DoubledEpsilon}
    assert DoubledSensitivity.name == "deepcandidate-broken-doubled-sensitivity"
    assert DoubledEpsilon.name == "deepcandidate-broken-doubled-epsilon"
    assert all(cls.control is True and issubclass(cls, DeepCandidate) for cls in NEGATIVE_CONTROLS.values())
    assert getattr(DeepCandidate, "control", False) is False
    _, F = clouds(0, 1, 50)
    assert DoubledEpsilon(candidates=F, epsilon=3.0).config()["defense"] == "deepcandidate-broken-doubled-epsilon"


def test_the_doubled_sensitivity_control_releases_what_it_is_audited_as():
    """The negative control doubles the utilities in release() too, not only in utilities() (which the audit reads)."""
    docs, F = clouds(6, 25, 400)
    with pytest.warns(PrivacyLeakWarning):
        a = DoubledSensitivity(candidates=F, epsilon=4.0, n_projections=20, rng=9)
    with pytest.warns(PrivacyLeakWarning):
        b = DoubledSensitivity(candidates=F, epsilon=4.0, n_projections=20, rng=9)
    pa, pb = a.projections(), b.projections()
    np.testing.assert_array_equal(b.utilities(docs[0], pb), 2.0 * depth_fast(docs[0], pb, "tukey-min"))
    released = a.release(docs, pa, workers=1).indices
    assert released.tolist() == [b.sample(S, pb).index for S in docs]
