"""The exact SentDP audit (veil.attacks.audit.exact): DeepCandidate never exceeds epsilon; broken mechanisms are caught.

The library's named negative controls (veil.defenses.sentdp.controls) are tested in
tests/defenses/test_sentdp_controls.py; here they are audited through the experiment runner on real text.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.attacks.audit.exact import (NEIGHBOUR_KINDS, ExactAudit, Neighbour, SentDPAudit, audit_document,
                                      audit_sentdp, make_neighbours)
from veil.defenses.sentdp import DeepCandidate
from veil.defenses.sentdp.controls import NEGATIVE_CONTROLS
from veil.defenses.sentdp.depth import DEPTHS, ProjectionSet, depth_fast, draw_projections
from veil.errors import InvalidParameterError, InvalidTypeError


class DoubledUtility(DeepCandidate):
    """Negative control: the utility is doubled (sensitivity 2) but epsilon is not adjusted."""

    def utilities(self, S, projections=None):
        return 2.0 * super().utilities(S, projections)


class DocumentProjections(DeepCandidate):
    """Negative control: the projections are derived from the document (the given ones are ignored)."""

    def utilities(self, S, projections=None):
        seed = int.from_bytes(hashlib.sha256(np.ascontiguousarray(S, dtype=np.float64).tobytes()).digest()[:8], "big")
        vectors = draw_projections(self.n_projections, self.dim, np.random.default_rng(seed))
        return depth_fast(np.asarray(S, dtype=np.float64), ProjectionSet.build(vectors, self.candidates), self.depth)


class UnscaledExponent(DeepCandidate):
    """Negative control: P ∝ exp(epsilon * u), i.e. the 1/2 of the exponential mechanism forgotten."""

    def log_probabilities(self, S, projections=None):
        scores = self.epsilon * self.utilities(S, projections)
        return scores - (scores.max() + np.log(np.exp(scores - scores.max()).sum()))


@st.composite
def audit_cases(draw):
    k, m, d = draw(st.integers(1, 8)), draw(st.integers(1, 30)), draw(st.integers(1, 6))
    p = draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    integer = draw(st.booleans())  # small integer coordinates: many exact ties
    if integer:
        S = rng.integers(-2, 3, size=(k, d)).astype(np.float64)
        F = rng.integers(-2, 3, size=(m, d)).astype(np.float64)
    else:
        S, F = rng.standard_normal((k, d)), rng.standard_normal((m, d))
    for _ in range(draw(st.integers(0, 2))):
        F[rng.integers(m)] = S[rng.integers(k)]
    pool = rng.standard_normal((10, d))
    eps = draw(st.sampled_from([1e-3, 0.1, 1.0, 3.0, 10.0, 30.0, 200.0]))
    return S, F, pool, eps, p, draw(st.sampled_from(DEPTHS)), int(rng.integers(2**31))


@pytest.mark.filterwarnings("ignore:epsilon=.* is above:veil.errors.PrivacyLeakWarning")  # huge epsilon on purpose
@settings(max_examples=120, deadline=None)
@given(case=audit_cases())
def test_audit_never_exceeds_epsilon(case):
    S, F, pool, eps, p, depth, seed = case
    mech = DeepCandidate(candidates=F, epsilon=eps, n_projections=p, depth=depth)
    res = audit_document(mech, S, neighbours=30, pool=pool, rng=seed)
    assert isinstance(res, SentDPAudit) and res.n_pairs == 30
    assert res.max_abs_log_ratio <= eps + 1e-9, res.worst.describe()
    assert res.passed and res.max_utility_change <= 1
    sweep = audit_sentdp(mech, [S, S[::-1]], epsilons=(eps, 2 * eps), neighbours_per_document=10, pool=pool,
                         rng=seed)
    assert sweep.passed and sweep.n_pairs == 20
    for a in sweep.audits:
        assert a.max_abs_log_ratio <= a.epsilon + 1e-9 and a.derivation_error <= 1e-9


def _corpus(seed=0, m=300, d=16, n_docs=12):
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((m, d)) * 0.3
    docs = [rng.standard_normal((int(rng.integers(3, 15)), d)) for _ in range(n_docs)]
    pool = rng.standard_normal((200, d))
    return F, docs, pool


def test_sweep_result_is_typed_and_serialisable():
    F, docs, pool = _corpus()
    mech = DeepCandidate(candidates=F, epsilon=3.0, n_projections=10)
    sweep = audit_sentdp(mech, docs, epsilons=(1, 3, 10), neighbours_per_document=2 * len(NEIGHBOUR_KINDS),
                         pool=pool, document_ids=list(range(100, 112)), rng=0)
    assert sweep.passed and sweep.n_pairs == 12 * 14 and sweep.n_documents == 12
    a = sweep.audit(10)
    assert set(a.max_by_kind) == set(NEIGHBOUR_KINDS) and all(n == 24 for n in a.pairs_by_kind.values())
    assert 0 < a.max_abs_log_ratio <= 10 and a.slack == 10 - a.max_abs_log_ratio
    assert a.worst is not None and 100 <= a.worst.document < 112 and "candidate" in a.worst.describe()
    assert a.max_utility_change == 1
    stats = sweep.utility_stats
    assert stats["mean_candidates_at_top"] >= 1 and 0 <= stats["mean_fraction_zero_utility"] <= 1
    with pytest.raises(InvalidParameterError):
        sweep.audit(2)
    with pytest.raises(AttributeError):
        a.epsilon = 1.0  # frozen
    data = json.loads(json.dumps(sweep.to_dict()))
    assert data["passed"] is True and len(data["audits"]) == 3
    # the same seed reproduces the audit
    again = audit_sentdp(mech, docs, epsilons=(1, 3, 10), neighbours_per_document=14, pool=pool,
                         document_ids=list(range(100, 112)), rng=0)
    assert [x.max_abs_log_ratio for x in again.audits] == [x.max_abs_log_ratio for x in sweep.audits]


def test_sweep_agrees_with_the_direct_audit():
    """The derived log-probabilities equal those of mechanism.log_probabilities on the same pairs."""
    F, docs, pool = _corpus(1)
    S = docs[0]
    mech = DeepCandidate(candidates=F, epsilon=3.0, n_projections=10)
    P = mech.projections(draw_projections(10, F.shape[1], np.random.default_rng(4)))
    nbs = make_neighbours(S, P, F, mech.utilities(S, P), n=28, pool=pool, rng=5)
    direct = audit_document(mech, S, P, neighbours=nbs)
    assert direct.n_pairs == 28 and direct.passed
    for nb in nbs:
        S2 = nb.apply(S)
        assert S2.shape == S.shape and np.sum(np.any(S2 != S, axis=1)) <= 1  # a neighbour: one row replaced
    assert {nb.kind for nb in nbs} == set(NEIGHBOUR_KINDS)


def test_reflect_neighbours_cross_the_candidate():
    F, docs, _ = _corpus(2)
    S = docs[1]
    mech = DeepCandidate(candidates=F, epsilon=1.0, n_projections=6)
    P = mech.projections()
    for nb in make_neighbours(S, P, F, mech.utilities(S, P), n=20, kinds=("reflect",), rng=3):
        i, j = (int(x) for x in nb.note.replace("reflected through candidate ", "").split(" on projection "))
        f = F[i] @ P.vectors[j]
        before, after = S[nb.position] @ P.vectors[j] - f, nb.vector @ P.vectors[j] - f
        np.testing.assert_allclose(after, -before, atol=1e-9)


@pytest.mark.parametrize("broken", [DoubledUtility, DocumentProjections])
def test_broken_mechanisms_fail_the_audit(broken):
    F, docs, pool = _corpus(3)
    mech = broken(candidates=F, epsilon=3.0, n_projections=10)
    sweep = audit_sentdp(mech, docs, epsilons=(1, 3, 10), neighbours_per_document=28, pool=pool, rng=0)
    assert not sweep.passed
    worst = max(sweep.audits, key=lambda a: a.max_abs_log_ratio - a.epsilon)
    assert worst.max_abs_log_ratio > worst.epsilon + 1e-9 and not worst.passed and worst.slack < 0
    assert worst.max_utility_change > 1
    # the same pairs on the correct mechanism pass
    ok = audit_sentdp(DeepCandidate(candidates=F, epsilon=3.0, n_projections=10), docs, epsilons=(1, 3, 10),
                      neighbours_per_document=28, pool=pool, rng=0)
    assert ok.passed


def test_wrong_exponent_fails_both_audits():
    F, docs, pool = _corpus(4)
    mech = UnscaledExponent(candidates=F, epsilon=3.0, n_projections=10)
    res = audit_document(mech, docs[0], neighbours=60, pool=pool, rng=1)
    assert not res.passed and res.max_abs_log_ratio > 3.0
    # the sweep derives log-probabilities from the utilities, and catches the mismatch with log_probabilities
    sweep = audit_sentdp(mech, docs[:3], neighbours_per_document=5, pool=pool, rng=1)
    assert not sweep.passed and sweep.audits[0].derivation_error > 1e-9


def test_bad_arguments():
    F, docs, pool = _corpus()
    mech = DeepCandidate(candidates=F, epsilon=1.0, n_projections=5)
    with pytest.raises(InvalidTypeError):
        audit_sentdp(object(), docs)
    with pytest.raises(InvalidTypeError):
        audit_sentdp(mech, docs[0])
    with pytest.raises(InvalidParameterError, match="pool"):
        audit_sentdp(mech, docs, kinds=("random",))
    with pytest.raises(InvalidParameterError, match="unknown neighbour kinds"):
        audit_sentdp(mech, docs, kinds=("swap",), pool=pool)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        audit_sentdp(mech, docs, epsilons=(1.0, 0.0))
    with pytest.raises(InvalidParameterError):
        audit_sentdp(mech, docs, neighbours_per_document=0)
    with pytest.raises(InvalidParameterError, match="empty"):
        audit_sentdp(mech, [])
    with pytest.raises(InvalidParameterError, match="document_ids"):
        audit_sentdp(mech, docs, document_ids=[1, 2])
    with pytest.raises(InvalidTypeError):
        audit_document(mech, docs[0], neighbours="many")
    single = audit_document(mech, docs[0][:1], neighbours=12, rng=0)  # k = 1: no 'duplicate' neighbours
    assert single.passed and "duplicate" not in single.max_by_kind
    assert isinstance(make_neighbours(docs[0], mech.projections(), F, np.zeros(len(F)), n=3, rng=0)[0], Neighbour)


# ---------------------------------------------------------------- the package, the registry
def test_the_package_and_the_attack_registry_reach_the_exact_audit():
    """`veil.attacks.audit` re-exports the exact audit and the controls; the registry entry resolves to it."""
    import veil.attacks.audit as package
    from veil.attacks import get_attack
    from veil.defenses.sentdp import controls

    assert get_attack("exact-audit") is ExactAudit and package.ExactAudit is ExactAudit
    assert package.audit_sentdp is audit_sentdp and package.NEIGHBOUR_KINDS is NEIGHBOUR_KINDS
    assert package.NEGATIVE_CONTROLS is controls.NEGATIVE_CONTROLS
    assert (package.DoubledSensitivity, package.DoubledEpsilon) == (controls.DoubledSensitivity,
                                                                    controls.DoubledEpsilon)


# ---------------------------------------------------------------- negative controls and the pipeline, on real text
@pytest.fixture(scope="module")
def news_pipeline(builtin, tmp_path_factory):
    """A real slice of news-articles (16 train, 4 dev, 4 test documents) and a SentDP pipeline with a small recoder."""
    import os

    from veil.defenses.sentdp.pipeline import SentDPPipeline
    from veil.defenses.sentdp.recoder import RecoderConfig
    from veil.encoders import TextEncoder, encode_sentences

    corpus = builtin("news-articles")
    counts = np.array([len(doc) for doc in corpus.documents])
    pick = {s: [i for i in corpus.indices(s) if (8 if s == "train" else 2) <= counts[i] <= 20] for s in
            ("train", "dev", "test")}
    part = corpus.select(np.array(pick["train"][:16] + pick["dev"][:4] + pick["test"][:4]), name="news-audit-slice")
    old = os.environ.get("VEIL_HOME")
    os.environ["VEIL_HOME"] = str(tmp_path_factory.mktemp("home"))  # the slice's embeddings are cached there
    try:
        # the float32 reference: whether this small slice has a neighbour whose utility moves by 2 (what the
        # doubled-sensitivity control needs to be caught) depends on the exact vectors; bf16's rounding can remove it
        enc = TextEncoder("minilm", backend="torch")
        S, offsets = encode_sentences(enc, part, progress=False)
        pipe = SentDPPipeline.fit(part, encoder=enc, recoder=RecoderConfig(n_clusters=4, epochs=3), progress=False)
        yield part, enc, pipe, S, offsets
    finally:
        if old is None:
            del os.environ["VEIL_HOME"]
        else:
            os.environ["VEIL_HOME"] = old


def test_real_corpus_negative_control_fails_and_the_pipeline_passes(news_pipeline):
    from veil.experiments.sentdp.audit import run_sentdp_audit

    part, enc, pipe, S, offsets = news_pipeline
    common = dict(epsilons=(1, 3), neighbours_per_document=14, n_projections=10, seed=1, encoder=enc, pipeline=pipe,
                  progress=False)
    good = run_sentdp_audit(part, **common)
    assert good.metrics["passed"].mean == 1.0 and good.config["recoder"] is True and good.config["control"] is None
    assert good.config["m"] == len(pipe.candidates) and good.extra["mechanism"]["m"] == len(pipe.candidates)
    broken = run_sentdp_audit(part, control="doubled-sensitivity", **common)
    assert broken.experiment == "audit-news-audit-slice-control-doubled-sensitivity"
    assert broken.metrics["passed"].mean == 0.0 and broken.metrics["control_caught"].mean == 1.0
    assert broken.metrics["max_abs_log_ratio_eps1"].mean > 1.0 + 1e-9
    assert broken.metrics["max_utility_change"].mean == 2.0
    # doubled epsilon: the utilities are honest, so only the ratios read through the control's own
    # log_probabilities_of can show it (a table identical to the honest one was a bug: the audit derived them itself)
    doubled = run_sentdp_audit(part, control="doubled-epsilon", **common)
    assert doubled.metrics["control_caught"].mean == 1.0 and doubled.metrics["max_utility_change"].mean == 1.0
    at_twice = run_sentdp_audit(part, **{**common, "epsilons": (2, 6)})  # the honest mechanism at 2 epsilon
    for e in (1, 3):
        seen = doubled.metrics[f"max_abs_log_ratio_eps{e}"].mean
        assert seen > e + 1e-9 and seen > good.metrics[f"max_abs_log_ratio_eps{e}"].mean
        assert seen == pytest.approx(at_twice.metrics[f"max_abs_log_ratio_eps{2 * e}"].mean, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="negative control"):
        run_sentdp_audit(part, control="halved", **common)


def test_runner_audits_the_pipelines_own_candidates_and_recoded_sentences(news_pipeline):
    """Oracle: the runner's numbers equal audit_sentdp on pipe.mechanism() over H-recoded sentences."""
    from veil.experiments.sentdp.audit import run_sentdp_audit

    part, enc, pipe, S, offsets = news_pipeline
    rec = run_sentdp_audit(part, epsilons=(1, 10), neighbours_per_document=7, n_projections=10, seed=2, encoder=enc,
                           pipeline=pipe, progress=False)
    R = pipe.recode(S)
    test = [int(i) for i in part.indices("test")]
    pool = R[np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in part.indices("train")])]
    direct = audit_sentdp(pipe.mechanism(epsilon=10.0, n_projections=10), [R[offsets[i]:offsets[i + 1]] for i in test],
                          epsilons=(1, 10), neighbours_per_document=7, pool=pool, document_ids=test,
                          rng=np.random.default_rng(2))
    for a in direct.audits:
        assert rec.metrics[f"max_abs_log_ratio_eps{a.epsilon:g}"].mean == a.max_abs_log_ratio
    assert not np.allclose(R, S)  # the recoder is applied: the audited space is not the encoder's


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
