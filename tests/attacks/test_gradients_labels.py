"""Label leakage from the last layer (veil.attacks.gradients.labels): exact without a defense, exact per row for
TextHide's mixed labels once the inputs are recovered, and the iDLG rule that needs nothing but the gradient."""

from __future__ import annotations

import numpy as np
import pytest

from veil.attacks.gradients.analytic import AnalyticInversion
from veil.attacks.gradients.labels import LeakedLabels, head_forward_np, leak_labels, score_labels
from veil.attacks.gradients.tap import Tap
from veil.attacks.gradients.truth import read_truth
from veil.errors import DataFormatError, InvalidTypeError

from .test_gradients_tap import record_run, unit_vectors

SEED = 0  # the seeded key and mixing
ROWS = 1  # the example rows (seeded) of a batch that holds both classes


@pytest.mark.parametrize("batch", [1, 4])
def test_no_defense_labels_leak_exactly(tmp_path, batch):
    X = unit_vectors(128, 32, 11)
    y = np.arange(128) % 3
    path = record_run(tmp_path / "tap", X, y, batch=batch, k=0, hidden=(256,), lr=0.5, num_classes=3)
    tap = Tap(path)
    update, truth = tap.update(1, "0"), read_truth(path, 1, "0")
    rec = AnalyticInversion(match=False, rng=0).recover(tap, 1, "0")
    assert len(rec) == batch
    leaked = leak_labels(update, tap.meta, inputs=rec.vectors)
    assert leaked.exact and leaked.per_row is not None
    np.testing.assert_allclose(leaked.mean_label, truth.soft_labels.mean(0), atol=1e-5)
    scores = score_labels(leaked, truth, inputs=rec.vectors)
    assert scores["per_row_matched"] == batch and scores["per_row_error"] < 1e-4
    assert scores["mean_label_error"] < 1e-5 and scores["precision"] == 1.0 and scores["recall"] == 1.0
    if batch == 1:  # iDLG: the one class with a negative bias gradient, without any input
        blind = leak_labels(update, tap.meta)
        assert blind.negative_classes == (int(np.argmax(truth.soft_labels[0])),)
        assert not blind.exact and blind.per_row is None


def test_texthide_mixed_labels_leak_per_row(tmp_path):
    """Each encoding's soft label sum_j lambda_j y_j (the mixing coefficients of its classes) comes out exactly."""
    from veil.errors import PrivacyLeakWarning

    X = unit_vectors(128, 48, 12)
    y = np.arange(128) % 2
    with pytest.warns(PrivacyLeakWarning):  # a seeded key and mixing, so that this batch surely mixes classes
        path = record_run(tmp_path / "tap", X, y, batch=4, k=2, m=16, hidden=(256,), lr=0.5, mix_seed=SEED, seed=ROWS)
    tap = Tap(path)
    truth = read_truth(path, 1, "0")
    assert (truth.soft_labels.max(1) < 1).any()  # mixed labels, not one-hot
    rec = AnalyticInversion(match=False, rng=0).recover(tap, 1, "0")
    leaked = leak_labels(tap.update(1, "0"), tap.meta, inputs=rec.vectors)
    scores = score_labels(leaked, truth, inputs=rec.vectors)
    assert scores["per_row_matched"] == 4 and scores["per_row_error"] < 1e-4


def test_without_inputs_the_mean_label_is_an_approximation(tmp_path):
    X = unit_vectors(64, 16, 13)
    y = np.zeros(64, dtype=np.int64)  # one class only
    path = record_run(tmp_path / "tap", X, y, batch=8, k=0, hidden=(16,), lr=0.5)
    tap = Tap(path)
    leaked = leak_labels(tap.update(1, "0"), tap.meta)
    scores = score_labels(leaked, read_truth(path, 1, "0"))
    assert leaked.negative_classes == (0,) and scores["negative_precision"] == 1.0
    assert scores["mean_label_error"] < 0.5 and not leaked.exact


def test_head_forward_matches_the_torch_head():
    import torch

    from veil.models.heads import MLPHead

    head = MLPHead(6, 3, hidden=(5, 4), dropout=0.0, rng=0).eval()
    x = np.random.default_rng(0).standard_normal((7, 6)).astype(np.float32)
    state = {k: v.detach().numpy() for k, v in head.state_dict().items()}
    p, h = head_forward_np(state, 2, x)
    with torch.no_grad():
        ref = torch.softmax(head(torch.from_numpy(x)).double(), -1).numpy()
    np.testing.assert_allclose(p, ref, atol=1e-6)
    assert h.shape == (7, 4)


def test_bad_input(tmp_path):
    X = unit_vectors(16, 8, 14)
    path = record_run(tmp_path / "tap", X, np.arange(16) % 2, batch=2, k=0, hidden=(4,))
    tap = Tap(path)
    with pytest.raises(DataFormatError, match=r"\(n, 8\)"):
        leak_labels(tap.update(1, "0"), tap.meta, inputs=np.zeros((2, 5)))
    with pytest.raises(InvalidTypeError, match="LeakedLabels"):
        score_labels(read_truth(path, 1, "0"), read_truth(path, 1, "0"))
    assert "per_row" in repr(LeakedLabels(np.zeros(2), (), (), np.zeros((1, 2))))
