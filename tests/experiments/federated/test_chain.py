"""The end-to-end chain on recorded runs: updates -> encodings -> each client's masks -> sentences.

Small in-process runs (the reference loop writes the same tap and truth as Flower; Flower == reference is
tested in tests/federated). rt-polarity slice of 240 training examples; the attacker's index is the whole corpus.
"""

import numpy as np
import pytest

from veil.errors import InvalidTypeError
from veil.federated import FederatedConfig

pytestmark = pytest.mark.slow

SMALL = dict(corpus="rt-polarity", clients=3, rounds=2, max_train=240, max_test=60, client_mode="alg2")


@pytest.fixture(scope="module")
def resources():
    from veil.experiments.federated.chain import chain_resources

    return chain_resources("rt-polarity")


def _record(tmp_path, **kw):
    from veil.federated.run import run_federated

    cfg = FederatedConfig(**{**SMALL, **kw})
    run_federated(cfg, engine="reference", record=tmp_path / "tap", truth=True)
    return tmp_path / "tap"


def test_without_a_defense_every_recovered_row_is_its_own_sentence(tmp_path, resources):
    from veil.experiments.federated.chain import run_chain

    rec = run_chain(_record(tmp_path, m=0, k=1, batch_size=4), resources=resources)
    m = rec.metrics
    assert m["encodings_recovered"].mean == 1.0 and m["encodings_recovered"].n == 3 * 2 * 4
    # a plain embedding is its own index entry: every row, every sentence, and nothing else is named
    assert m["encodings_unmixed"].mean == 1.0 and m["own_sentence_recovered"].mean == 1.0
    assert m["sentences_recovered"].mean == 1.0 and m["sentence_precision"].mean == 1.0
    assert rec.extra["mask_source"] == {"none": 24}


def test_texthide_k2_batch4_rows_are_unmixed_without_the_key(tmp_path, resources):
    from veil.attacks.gradients.chain import ChainRecovery, UpdateChain
    from veil.attacks.gradients.tap import Tap
    from veil.experiments.federated.chain import score_chain

    tap = _record(tmp_path, m=16, k=2, batch_size=4)
    index, stats = resources
    out = UpdateChain(index, stats, rng=0).attack(Tap(tap))
    assert isinstance(out, ChainRecovery) and len(out) == 24 and out.ids.shape == (24, 2)
    assert set(out.mask_source) <= {"pool", "key-free", "abs-rss", "unexplained"}
    metrics, per_update = score_chain(out, tap, index)
    # almost every encoding is read off exactly; now and then one of the 24 is not (the pool's masks and the
    # mixing come from the OS CSPRNG, so the run differs every time): 22 is a floor, not an expectation
    assert metrics["encodings_recovered"].mean >= 22 / 24
    assert sum(u["rows"] for u in per_update) == 24
    # issue 11 measured the key-free path at 79% of k=2 encodings, the abs-RSS pass adds to it: with 24 rows a
    # chain that unmixed at most half of them would be a regression (P(<= 12 of 24 | p = 0.79) < 1e-3)
    assert metrics["encodings_unmixed"].mean > 0.5
    assert 0 < metrics["sentence_precision"].mean <= 1


def test_the_chain_refuses_the_truth(tmp_path, resources):
    from veil.attacks.gradients.chain import UpdateChain
    from veil.attacks.gradients.truth import read_truth

    tap = _record(tmp_path, m=16, k=2, batch_size=4, rounds=1)
    index, stats = resources
    with pytest.raises(InvalidTypeError, match="truth is for scoring only"):
        UpdateChain(index, stats, rng=0).attack(read_truth(tap, 1, "0"))


def test_keyfree_masks_are_signs():
    from veil.attacks.gradients.chain import keyfree_masks

    E = np.array([[1.0, -2.0, 0.0], [-1.0, 0.5, 3.0]])
    mu = np.array([1.0, 1.0, -1.0])
    np.testing.assert_array_equal(keyfree_masks(E, mu), [[1, -1, 1], [-1, 1, -1]])
