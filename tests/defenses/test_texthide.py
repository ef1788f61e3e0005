"""veil.defenses.texthide.TextHide: Algorithm 1 (intra) and Sec. 3.3 (inter) of Huang et al. 2020.

Three kinds of tests (STYLE.md practice 7): invariants (incl. hypothesis
properties), an oracle test against a slow per-example loop written from the
paper, and statistical tests of the random choices, each with false-positive
rate alpha = 1e-6.
"""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from veil.defenses.texthide import mix as texthide_mix
from veil.defenses.texthide import Encrypted, MaskPool, TextHide
from veil.defenses.texthide.mix import (draw_coefficients, mix_labels, mix_representations, secure_half_normal,
                                        secure_permutations, secure_randint)
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning

ALPHA = 1e-6  # false-positive rate of each statistical test below


# ---------------------------------------------------------------- the oracle
def slow_texthide(e, y, details, public=None):
    """Algorithm 1 / Sec. 3.3, one example at a time in plain Python floats, given the one-time key.

    e: (b, d), y: (b, C) one-hot/soft or (b,) values or None. Returns (e~, y~) as nested lists.
    """
    e_rows, b, d = e.tolist(), e.shape[0], e.shape[1]
    perm = details.private_index.tolist()  # perm[i][j] = pi_{j+1}(i)
    lam = details.coefficients.double().tolist()
    pub = None if details.public_index is None else details.public_index.tolist()
    masks = None if details.masks is None else details.masks.tolist()
    pub_rows = None if public is None else public.tolist()
    kp, k = details.private_slots, details.k
    out_e, out_y = [], []
    for i in range(b):
        acc = [0.0] * d
        for j in range(k):
            src = e_rows[perm[i][j]] if j < kp else pub_rows[pub[i][j - kp]]
            for t in range(d):
                acc[t] += lam[i][j] * src[t]
        out_e.append([(1.0 if masks is None else masks[i][t]) * acc[t] for t in range(d)])
        if y is not None:
            ys = y.tolist()
            den = sum(lam[i][j] for j in range(kp))  # private coefficients only (paper's inter formula)
            if y.ndim == 1:
                out_y.append(sum(lam[i][j] * ys[perm[i][j]] for j in range(kp)) / den)
            else:
                out_y.append([sum(lam[i][j] * ys[perm[i][j]][c] for j in range(kp)) / den
                              for c in range(y.shape[1])])
    return out_e, (out_y if y is not None else None)


def seeded(**kw):
    """TextHide with a seeded mixing rng: reproducible, so it must warn (PrivacyLeakWarning)."""
    with pytest.warns(PrivacyLeakWarning, match="TextHide with a seeded rng"):
        return TextHide(**kw)


def make(k=4, m=8, d=16, public=None, rng=0, **kw):
    kw = dict(k=k, pool=MaskPool(m, d), public=public, rng=rng, record_details=True, **kw)
    return TextHide(**kw) if rng is None else seeded(**kw)


@pytest.mark.parametrize("inter", [False, True])
@pytest.mark.parametrize("m", [0, 8, None])
def test_oracle_float32(inter, m):
    """Vectorised output == slow loop to 1e-6: float32 rounding of k+1 terms of |x| <= 1 is < 5 * 2^-24 = 3e-7."""
    gen = torch.Generator().manual_seed(1)
    e = torch.rand(12, 10, generator=gen) * 2 - 1
    public = torch.rand(30, 10, generator=gen) * 2 - 1 if inter else None
    th = make(k=5, m=m, d=10, public=public)
    y = torch.randint(0, 3, (12,), generator=gen)
    e_t, y_t = th.encrypt(e, y, num_classes=3)
    ref_e, ref_y = slow_texthide(e.double(), torch.nn.functional.one_hot(y, 3).double(), th.last_details, public)
    np.testing.assert_allclose(e_t.numpy(), np.array(ref_e), rtol=0, atol=1e-6)
    np.testing.assert_allclose(y_t.numpy(), np.array(ref_y), rtol=0, atol=1e-6)


def test_oracle_float64_regression_inter():
    gen = torch.Generator().manual_seed(2)
    e, public = torch.randn(9, 7, dtype=torch.float64, generator=gen), torch.randn(50, 7, dtype=torch.float64)
    y = torch.randn(9, dtype=torch.float64, generator=gen)
    th = make(k=6, m=3, d=7, public=public)
    e_t, y_t = th.encrypt(e, y, task="regression")
    ref_e, ref_y = slow_texthide(e, y, th.last_details, public)
    assert e_t.dtype == y_t.dtype == torch.float64 and y_t.shape == (9,)
    np.testing.assert_allclose(e_t.numpy(), np.array(ref_e), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y_t.numpy(), np.array(ref_y), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- invariants (property tests)
@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 5), d=st.integers(1, 9), extra=st.integers(0, 6), m=st.sampled_from([0, 1, 3, None]),
       inter=st.booleans(), seed=st.integers(0, 2**32))
def test_invariants(k, d, extra, m, inter, seed):
    public = torch.randn(5, d, dtype=torch.float64) * 3 if inter else None
    th = make(k=k, m=m, d=d, public=public, rng=seed)
    b = th.min_batch_size + extra
    e = torch.randn(b, d, dtype=torch.float64)
    y = torch.randint(0, 4, (b,))
    e_t, y_t = th.encrypt(e, y, num_classes=4)
    det = th.last_details
    kp = math.ceil(k / 2) if inter else k
    assert th.mode == ("inter" if inter else "intra") and det.k == k and det.private_slots == kp
    lam = det.coefficients
    assert bool((lam >= 0).all()) and torch.allclose(lam.sum(1), torch.ones(b, dtype=lam.dtype), rtol=0, atol=1e-12)
    perms = det.permutations
    assert torch.equal(perms[0], torch.arange(b))
    assert all(torch.equal(p.sort().values, torch.arange(b)) for p in perms)
    if m == 0:
        assert det.masks is None and det.mask_index is None
    else:
        assert bool(((det.masks == 1) | (det.masks == -1)).all())
        assert (det.mask_index is None) == (m is None)
    # |e~_i| <= max_j |source_j(i)| coordinate-wise (a convex combination, then a sign flip)
    sources = e[det.private_index]
    if inter and k > 1:
        sources = torch.cat([sources, public[det.public_index]], dim=1)
    bound = sources.abs().amax(1)
    assert bool((e_t.abs() <= bound * (1 + 1e-12)).all())  # 1e-12: float64 rounding of <= 6 terms
    # soft labels: non-negative, sum to 1, supported on the private examples' classes only
    assert bool((y_t >= 0).all()) and torch.allclose(y_t.sum(1), torch.ones(b, dtype=y_t.dtype), atol=1e-6)
    for i in range(b):
        assert set(torch.nonzero(y_t[i] > 0).flatten().tolist()) <= set(y[det.private_index[i]].tolist())


@pytest.mark.parametrize("public", [None, torch.randn(4, 6)])
def test_m0_k1_is_exact_identity(public):
    e = torch.randn(5, 6)
    y = torch.tensor([0, 2, 1, 1, 0])
    th = TextHide(k=1, pool=MaskPool(0, 6), public=public)
    e_t, y_t = th.encrypt(e, y, num_classes=3)
    assert torch.equal(e_t, e) and torch.equal(y_t, torch.nn.functional.one_hot(y, 3).float())
    values = torch.randn(5)
    assert torch.equal(th.encrypt(e, values, task="regression").y, values)
    assert torch.equal(th.encrypt_inference(e), e)


def test_k1_with_masks_is_a_pure_mask():
    pool = MaskPool(4, 6)
    th = TextHide(k=1, pool=pool, record_details=True)
    e = torch.randn(7, 6)
    e_t, _ = th.encrypt(e)
    assert torch.equal(e_t, e * pool.masks[th.last_details.mask_index].float())


def test_inter_labels_mix_private_labels_only():
    """Paper's Sec. 3.3 formula: public slots carry weight in e~ but none in y~ (renormalised by private lambdas)."""
    y = torch.eye(3)  # three private examples, one per class
    private_index = torch.tensor([[0, 1], [1, 2], [2, 0]])
    lam = torch.tensor([[0.02, 0.01, 0.97], [0.01, 0.03, 0.96], [0.005, 0.005, 0.99]], dtype=torch.float64)
    y_t = mix_labels(y.double(), private_index, lam)
    expected = torch.tensor([[2 / 3, 1 / 3, 0], [0, 1 / 4, 3 / 4], [1 / 2, 0, 1 / 2]], dtype=torch.float64)
    torch.testing.assert_close(y_t, expected, rtol=0, atol=1e-12)
    # end to end: huge public vectors dominate e~ but never reach y~
    public = torch.full((10, 4), 1e6)
    th = make(k=4, m=0, d=4, public=public)
    e_t, y_t = th.encrypt(torch.randn(6, 4), torch.arange(6), num_classes=6)
    det = th.last_details
    w = det.coefficients[:, :2] / det.coefficients[:, :2].sum(1, keepdim=True)
    expected = torch.zeros(6, 6).scatter_add_(1, det.private_index, w.float())
    torch.testing.assert_close(y_t, expected, rtol=0, atol=1e-6)
    assert bool((e_t.abs() > 1e3).all())


def test_coefficient_bound_caps_the_largest_coefficient():
    th = make(k=3, coefficient_bound=0.5, d=4)
    th.encrypt(torch.randn(400, 4))
    assert float(th.last_details.coefficients.max()) <= 0.5
    with pytest.raises(InvalidParameterError, match=r"\(0.25, 1\]"):
        TextHide(k=4, pool=MaskPool(0, 4), coefficient_bound=0.25)
    with pytest.raises(InvalidParameterError, match="rejects almost every draw"):
        draw_coefficients(4, 8, torch.Generator().manual_seed(0), bound=0.1250001)


# ---------------------------------------------------------------- gradients
def test_gradients_flow_into_e_and_match_finite_differences():
    th = make(k=3, m=4, d=5, public=torch.randn(8, 5, dtype=torch.float64))
    e = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    th.encrypt(e.detach())
    det = th.last_details

    def f(x):
        return mix_representations(x, det.private_index, det.coefficients.double(), det.masks.double(),
                                   th._public, det.public_index)

    assert torch.autograd.gradcheck(f, (e,))


@pytest.mark.parametrize("public", [None, torch.randn(20, 8)])
def test_encoder_before_texthide_receives_gradients(public):
    encoder, head = torch.nn.Linear(12, 8), torch.nn.Linear(8, 2)
    th = TextHide(k=4, pool=MaskPool(16, 8), public=public)
    x, y = torch.randn(10, 12), torch.randint(0, 2, (10,))
    e_t, y_t = th.encrypt(encoder(x), y, num_classes=2)
    torch.nn.functional.cross_entropy(head(e_t), y_t).backward()
    assert encoder.weight.grad is not None and float(encoder.weight.grad.abs().sum()) > 0
    assert not y_t.requires_grad


# ---------------------------------------------------------------- randomness
def test_same_seed_reproduces_and_default_differs():
    pool = MaskPool(16, 8)
    e, y = torch.randn(10, 8), torch.randint(0, 3, (10,))
    runs = [seeded(k=4, pool=pool, rng=11).encrypt(e, y, num_classes=3) for _ in range(2)]
    assert torch.equal(runs[0].e, runs[1].e) and torch.equal(runs[0].y, runs[1].y)
    th = seeded(k=4, pool=pool, rng=np.random.default_rng(11))  # a numpy Generator is a seed too: it warns
    assert not torch.equal(th.encrypt(e).e, th.encrypt(e).e)  # the generator advances between calls
    # two OS-seeded instances agreeing on 9 permutations' worth of draws and 40 coefficients: probability ~0
    assert not torch.equal(TextHide(k=4, pool=pool).encrypt(e).e, TextHide(k=4, pool=pool).encrypt(e).e)


@pytest.mark.parametrize("m, rng", [(16, None), (10, None), (16, 3)])
def test_mask_indices_are_uniform_through_encrypt(m, rng):
    """Chi-square goodness of fit of per-example mask indices to Uniform{0..m-1}; false-positive rate alpha = 1e-6.

    rng=None reads the OS CSPRNG (m=10 exercises the rejection of the top partial block); rng=3 the seeded stream.
    """
    th = make(k=2, m=m, d=2, rng=rng)
    e = torch.randn(64, 2)
    idx = []
    for _ in range(800):
        th.encrypt(e)
        idx.append(th.last_details.mask_index)
    counts = np.bincount(torch.cat(idx).numpy(), minlength=m)
    assert len(counts) == m and stats.chisquare(counts).pvalue > ALPHA


@pytest.mark.parametrize("rng", [None, 4])
def test_permutations_and_public_rows_are_uniform(rng):
    """Chi-square tests that pi_2(0) ~ Uniform[b] and public rows ~ Uniform[N]; false-positive rate 1e-6 each."""
    th = make(k=4, m=0, d=2, public=torch.randn(10, 2), rng=rng)
    e = torch.randn(8, 2)
    first, public_rows = [], []
    for _ in range(4000):
        th.encrypt(e)
        first.append(int(th.last_details.private_index[0, 1]))
        public_rows.append(th.last_details.public_index)
    assert stats.chisquare(np.bincount(first, minlength=8)).pvalue > ALPHA
    assert stats.chisquare(np.bincount(torch.cat(public_rows).flatten().numpy(), minlength=10)).pvalue > ALPHA


@pytest.mark.parametrize("rng", [None, 5])
def test_coefficient_marginals_match_normalised_half_normals(rng):
    """KS tests, false-positive rate 1e-6 each.

    k = 2: lambda_1 = |Z1| / (|Z1| + |Z2|) has CDF (2/pi) arctan(t / (1 - t)) since |Z1|/|Z2| is half-Cauchy.
    k = 4: two-sample KS against lambda computed with numpy from the definition.
    """
    th2 = make(k=2, m=0, d=1, rng=rng)
    th4 = make(k=4, m=0, d=1, rng=None if rng is None else rng + 1)
    e = torch.zeros(5000, 1)
    th2.encrypt(e)
    th4.encrypt(e)
    lam2 = th2.last_details.coefficients[:, 0].double().numpy()
    assert stats.kstest(lam2, lambda t: 2 / np.pi * np.arctan(t / (1 - t))).pvalue > ALPHA
    z = np.abs(np.random.default_rng().standard_normal((5000, 4)))
    ref = (z / z.sum(1, keepdims=True))[:, 2]
    assert stats.ks_2samp(th4.last_details.coefficients[:, 2].double().numpy(), ref).pvalue > ALPHA


def test_csprng_draws_follow_their_laws():
    """The OS-CSPRNG primitives behind rng=None; chi-square / KS tests, false-positive rate 1e-6 each."""
    ints = secure_randint(10, (20_000,))  # 10 is not a power of two: the rejection step matters
    assert ints.dtype == torch.int64 and int(ints.min()) >= 0 and int(ints.max()) <= 9
    assert stats.chisquare(np.bincount(ints.numpy(), minlength=10)).pvalue > ALPHA
    perms = secure_permutations(24_000, 4)
    assert all(torch.equal(p.sort().values, torch.arange(4)) for p in perms[:50])
    codes = (perms * torch.tensor([64, 16, 4, 1])).sum(1).numpy()  # one code per permutation of 4
    counts = np.unique(codes, return_counts=True)[1]
    assert len(counts) == 24 and stats.chisquare(counts).pvalue > ALPHA
    z = secure_half_normal((5000,))
    assert z.dtype == torch.float64 and bool((z >= 0).all())
    assert stats.kstest(z.numpy(), stats.halfnorm.cdf).pvalue > ALPHA
    assert secure_permutations(0, 5).shape == (0, 5) and secure_randint(1, (3,)).tolist() == [0, 0, 0]


def test_unseeded_mixing_reads_the_os_csprng_and_never_torch(monkeypatch):
    """rng=None: permutations, coefficients and mask choices come from os.urandom, not from a torch generator."""
    pool = MaskPool(16, 4)
    calls = []
    real = texthide_mix.os.urandom

    def spy(n):  # the real CSPRNG, counted
        calls.append(n)
        return real(n)

    monkeypatch.setattr(texthide_mix.os, "urandom", spy)
    th = TextHide(k=3, pool=pool, record_details=True)
    assert th.config()["mixing_rng"] == "os-csprng" and not th.seeded
    torch.manual_seed(0)
    expected = torch.rand(4)
    torch.manual_seed(0)
    th.encrypt(torch.randn(6, 4, generator=torch.Generator().manual_seed(1)))
    assert torch.equal(torch.rand(4), expected)  # torch's global generator was not touched
    # 2 permutations of 6 (96 bytes), 6 x 3 coefficients (144 bytes), 6 mask indices (48 bytes)
    assert sorted(calls) == [48, 96, 144]
    calls.clear()
    th.encrypt_inference(torch.randn(5, 4))
    assert calls == [40]  # one mask index per example


def test_seeded_mixing_warns_and_reports_itself():
    th = make(k=2, m=4, d=3, rng=7)
    assert th.seeded and th.config()["mixing_rng"] == "seeded"
    with pytest.warns(PrivacyLeakWarning, match="reproducible by anyone who knows the seed"):
        TextHide(k=2, pool=MaskPool(0, 3), rng=np.random.default_rng(1))


# ---------------------------------------------------------------- secrecy and data
def test_guarantee_config_and_repr_hold_no_key_material():
    pool = MaskPool(4, 8)
    th = TextHide(k=4, pool=pool, record_details=True)
    th.encrypt(torch.randn(5, 8))
    assert str(th.guarantee).startswith("none: heuristic (no formal guarantee)") and not th.guarantee.formal
    cfg = json.loads(json.dumps(th.config()))
    assert cfg["defense"] == "texthide" and cfg["k"] == 4 and cfg["m"] == 4 and cfg["mask_key"] == "os-csprng"
    text = repr(th) + str(th) + repr(th.last_details) + json.dumps(cfg)
    assert "tensor" not in text and "-1" not in text
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(th)


def test_encrypt_inference_masks_without_mixing():
    pool = MaskPool(8, 6)
    th = TextHide(k=4, pool=pool, record_details=True)
    e = torch.randn(3, 6, requires_grad=True)  # any batch size, even < k
    out = th.encrypt_inference(e)
    assert torch.equal(out.detach().abs(), e.detach().abs())
    assert torch.equal(out.detach(), e.detach() * pool.masks[th.last_details.mask_index].float())
    out.sum().backward()
    assert e.grad is not None


def test_returns_named_tuple_and_call_alias():
    th = make(k=2, d=3)
    res = th(torch.randn(4, 3))
    assert isinstance(res, Encrypted) and res.y is None and res.e.shape == (4, 3)


def test_accepts_numpy_public_and_list_labels():
    th = TextHide(k=3, pool=MaskPool(2, 4), public=np.random.default_rng(0).standard_normal((9, 4)))
    assert th.mode == "inter" and th.private_slots == 2 and th.public_slots == 1
    _, y_t = th.encrypt(torch.randn(2, 4), [0, 1], num_classes=2)
    assert y_t.shape == (2, 2)
    _, y_soft = th.encrypt(torch.randn(2, 4), torch.tensor([[0.9, 0.1], [0.2, 0.8]]))
    assert torch.allclose(y_soft.sum(1), torch.ones(2))


# ---------------------------------------------------------------- validation
def _bad(**over):
    kw = {"k": 2, "pool": MaskPool(2, 4)} | over
    return TextHide(**kw)


@pytest.mark.parametrize("over, err, match", [
    ({"k": 0}, InvalidParameterError, "k must be in"),
    ({"k": 2.0}, InvalidTypeError, "k must be an int"),
    ({"k": True}, InvalidTypeError, "k must be an int"),
    ({"pool": None}, InvalidTypeError, "MaskPool"),
    ({"mode": "inter"}, InvalidParameterError, "public="),
    ({"mode": "intra", "public": torch.randn(3, 4)}, InvalidParameterError, "mode='inter'"),
    ({"mode": "both"}, InvalidParameterError, "'intra', 'inter'"),
    ({"public": torch.randn(3, 5)}, InvalidParameterError, "same encoder"),
    ({"public": torch.randn(3)}, InvalidParameterError, r"\(N, d\)"),
    ({"public": torch.ones(3, 4, dtype=torch.long)}, InvalidTypeError, "floats"),
    ({"public": [[1.0] * 4]}, InvalidTypeError, "public must be"),
    ({"public": torch.tensor([[1.0, float("nan"), 0, 0]])}, DataFormatError, "NaN"),
    ({"coefficient_bound": 1.5}, InvalidParameterError, "coefficient_bound"),
    ({"coefficient_bound": "0.6"}, InvalidTypeError, "coefficient_bound"),
    ({"rng": 1.5}, InvalidTypeError, "rng must be"),
    ({"record_details": 1}, InvalidTypeError, "record_details"),
])
def test_bad_construction(over, err, match):
    with pytest.raises(err, match=match):
        _bad(**over)


def test_bad_batches():
    th = TextHide(k=4, pool=MaskPool(2, 4))
    with pytest.raises(InvalidParameterError, match="batch size 3 is smaller than k=4.*drop_last"):
        th.encrypt(torch.randn(3, 4))
    inter = TextHide(k=4, pool=MaskPool(2, 4), public=torch.randn(5, 4))
    inter.encrypt(torch.randn(2, 4))  # ceil(4/2) = 2 private slots suffice
    with pytest.raises(InvalidParameterError, match="smaller than ceil"):
        inter.encrypt(torch.randn(1, 4))
    with pytest.raises(InvalidParameterError, match="mask pool has dim 4"):
        th.encrypt(torch.randn(8, 5))
    with pytest.raises(InvalidParameterError, match=r"\(batch, dim\)"):
        th.encrypt(torch.randn(8, 2, 4))
    for value in (float("nan"), float("inf")):
        e = torch.randn(8, 4)
        e[3, 1] = value
        with pytest.raises(DataFormatError, match="NaN or inf"):
            th.encrypt(e)
    with pytest.raises(InvalidTypeError, match="torch.as_tensor"):
        th.encrypt(np.zeros((8, 4)))
    with pytest.raises(InvalidTypeError, match="floating-point"):
        th.encrypt(torch.zeros(8, 4, dtype=torch.long))
    with pytest.raises(InvalidParameterError, match="task"):
        th.encrypt(torch.randn(8, 4), task="ranking")


@pytest.mark.parametrize("y, kw, err, match", [
    (torch.zeros(7, dtype=torch.long), {"num_classes": 2}, InvalidParameterError, "one label per row"),
    (torch.zeros(8, dtype=torch.long), {}, InvalidParameterError, "num_classes=C"),
    (torch.tensor([0, 1, 2, 0, 1, 2, 0, 3]), {"num_classes": 3}, InvalidParameterError, r"\[0, 3\]"),
    (torch.tensor([0, -1, 0, 0, 0, 0, 0, 0]), {"num_classes": 3}, InvalidParameterError, r"\[-1, 0\]"),
    (torch.rand(8), {"num_classes": 2}, InvalidParameterError, "task='regression'"),
    (torch.rand(8, 3), {"num_classes": 2}, InvalidParameterError, "3 columns"),
    (torch.zeros(8, dtype=torch.bool), {"num_classes": 2}, InvalidTypeError, "bool"),
    ("labels", {"num_classes": 2}, InvalidTypeError, "y must be"),
    (torch.rand(8, 1), {"task": "regression"}, InvalidParameterError, "reshape"),
    (torch.tensor([float("nan")] + [0.0] * 7), {"task": "regression"}, DataFormatError, "NaN"),
    (torch.zeros(8, dtype=torch.long), {"num_classes": 0}, InvalidParameterError, "num_classes"),
])
def test_bad_labels(y, kw, err, match):
    th = TextHide(k=4, pool=MaskPool(2, 4))
    with pytest.raises(err, match=match):
        th.encrypt(torch.randn(8, 4), y, **kw)


def test_set_public_swaps_the_public_rows_with_the_same_checks():
    pool = MaskPool(0, 4)
    th = seeded(k=2, pool=pool, public=torch.zeros(3, 4), rng=0, record_details=True)
    th.set_public(torch.full((5, 4), 7.0))
    e = torch.eye(4)
    out = th.encrypt(e)
    # k=2 inter, m=0: one private slot (identity permutation) and one public slot, all of whose rows are now 7s
    lam = th.last_details.coefficients
    assert torch.allclose(out.e, lam[:, :1] * e + lam[:, 1:] * 7.0)
    with pytest.raises(InvalidParameterError, match="dim 3"):
        th.set_public(torch.zeros(2, 3))
    with pytest.raises(DataFormatError):
        th.set_public(torch.full((2, 4), float("nan")))
    with pytest.raises(InvalidParameterError, match="inter-dataset"):
        TextHide(k=2, pool=pool).set_public(torch.zeros(2, 4))
