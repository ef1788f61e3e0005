"""The negative controls (veil.defenses.sentdp.controls): broken exactly as they say, and caught by the exact audit.

On real documents, through the experiment runner, they are audited in tests/attacks/audit/test_exact.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from veil.attacks.audit.exact import audit_document, audit_sentdp
from veil.defenses.sentdp import DeepCandidate
from veil.defenses.sentdp.controls import NEGATIVE_CONTROLS, DoubledEpsilon, DoubledSensitivity
from veil.defenses.sentdp.depth import depth_fast
from veil.errors import PrivacyLeakWarning


def _corpus(seed=0, m=300, d=16, n_docs=12):
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((m, d)) * 0.3
    docs = [rng.standard_normal((int(rng.integers(3, 15)), d)) for _ in range(n_docs)]
    pool = rng.standard_normal((200, d))
    return F, docs, pool


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


def test_controls_are_marked_and_keep_their_names():
    """The names are what audit records carry as their ``defense``; ``control`` keeps them apart from real defenses."""
    assert dict(NEGATIVE_CONTROLS) == {"doubled-sensitivity": DoubledSensitivity, "doubled-epsilon": DoubledEpsilon}
    assert DoubledSensitivity.name == "deepcandidate-broken-doubled-sensitivity"
    assert DoubledEpsilon.name == "deepcandidate-broken-doubled-epsilon"
    assert all(cls.control is True and issubclass(cls, DeepCandidate) for cls in NEGATIVE_CONTROLS.values())
    assert getattr(DeepCandidate, "control", False) is False
    F, _, _ = _corpus()
    assert DoubledEpsilon(candidates=F, epsilon=3.0).config()["defense"] == "deepcandidate-broken-doubled-epsilon"


@pytest.mark.parametrize("name", ["doubled-sensitivity", "doubled-epsilon"])
def test_library_negative_controls_fail(name):
    F, docs, pool = _corpus(5)
    mech = NEGATIVE_CONTROLS[name](candidates=F, epsilon=3.0, n_projections=10)
    sweep = audit_sentdp(mech, docs, epsilons=(1, 3), neighbours_per_document=14, pool=pool, rng=0)
    assert not sweep.passed
    # the ratio check alone catches both controls (not only the derivation check), at every audited epsilon:
    # each is the honest mechanism at twice the epsilon, on the very same neighbours
    honest = audit_sentdp(DeepCandidate(candidates=F, epsilon=3.0, n_projections=10), docs, epsilons=(2, 6),
                          neighbours_per_document=14, pool=pool, rng=0)
    for a, h in zip(sweep.audits, honest.audits):
        assert a.max_abs_log_ratio > a.epsilon + 1e-9
        assert a.max_abs_log_ratio == pytest.approx(h.max_abs_log_ratio, rel=1e-12)
    direct = audit_document(mech, docs[0], neighbours=40, pool=pool, rng=0)
    assert not direct.passed and direct.max_abs_log_ratio > 3.0 + 1e-9
    # the same through the registry's front door: the exact audit observes the mechanism white-box
    from veil import run_attack
    from veil.attacks.audit import WhiteBox

    assert not run_attack("exact-audit", WhiteBox(mech, docs), neighbours_per_document=14, pool=pool, rng=0).passed
    honest_run = run_attack("exact-audit", WhiteBox(DeepCandidate(candidates=F, epsilon=3.0, n_projections=10), docs),
                            neighbours_per_document=14, pool=pool, rng=0)
    assert honest_run.passed


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
