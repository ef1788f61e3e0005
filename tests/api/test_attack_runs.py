"""veil.attack on a released model (membership) and on TextHide's training encodings (mask recovery, unmixing):
the bench cell's numbers, the truth taken from the release's own key, negative controls, typed errors."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest

import veil
from veil.api import Protected, SecretKey
from veil.errors import DataFormatError, InvalidParameterError, PrivacyLeakWarning


@pytest.fixture(scope="module")
def data():
    from veil.bench.data import bench_data

    return bench_data("rt-polarity", True, 1000)  # the bench's quick-limit1000 slice (encoded once, cached)


def _seeded(fn, *args, **kw):
    """A release with seeded keys (reproducible tests only: it warns, as it should)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return fn(*args, **kw)


def test_membership_gives_the_bench_cells_auc_and_test(data):
    """The bench's membership-loss cell, and veil.attack on the cell's own target with its members and non-members:
    the same AUC and the same Mann-Whitney test (both are order-free over the same candidates)."""
    from veil.bench.cells.model import _target, membership_cell
    from veil.bench.plan import BenchConfig, Cell

    cell = Cell.make("rt-polarity", "plain", {"epochs": 200}, "membership-loss",
                     BenchConfig(quick=True, seed=1, limit=1000, key_seed=5))
    bench = membership_cell(cell, data).to_dict()["extra"]["bench"]
    t = _target(cell, data)  # the cell's target, cached on the slice
    g = t["game"]
    ins, outs = g.candidates[g.truth.members], g.candidates[~g.truth.members]
    got = veil.attack(Protected(t["model"], t["defense"], "model"), "membership-loss",
                      private=(data.X[ins], data.labels[ins]), nonmembers=(data.X[outs], data.labels[outs]), seed=1)
    assert (got.kind, got.metric) == ("model", "auc")
    assert got.value == pytest.approx(bench["success_metric"]["mean"], rel=1e-12)
    assert got.test["p_value"] == pytest.approx(bench["test"]["p_value"], rel=1e-9)
    assert got.test["statistic"] == pytest.approx(bench["test"]["statistic"], rel=1e-12)
    assert got.record["config"]["candidates"] == len(g.candidates) and got.floor == 0.5


def test_membership_is_found_in_the_training_set_and_not_outside_it(data):
    """Positive and negative control on one model: its own training examples are told apart from held-out ones
    (AUC above 0.5 by the test); examples it never saw, given as "members", are not."""
    tr = data.splits["train"]
    seen, unseen, held = tr[:100], tr[100:200], tr[200:300]
    out = _seeded(veil.protect, (data.X[seen], data.labels[seen]), "plain", epochs=60, batch_size=20, seed=0)
    real = veil.attack(out, "membership-loss", private=(data.X[seen], data.labels[seen]),
                       nonmembers=(data.X[held], data.labels[held]))
    assert real.significant and real.interval[0] > 0.5
    fake = veil.attack(out, "membership-loss", private=(data.X[unseen], data.labels[unseen]),
                       nonmembers=(data.X[held], data.labels[held]))
    assert not fake.significant and fake.test["p_value"] > 0.5 and real.value - fake.value > 0.3


def test_training_encodings_are_scored_against_the_releases_own_mixing(data):
    """Unmixing finds both sources of most encodings when scored against the release's mixing, and almost none
    against a mixing shifted by one encoding (the scorer reads the key's truth, not something of its own); mask
    recovery scores the pool's bits, with no test (as its bench cell)."""
    tr = data.splits["train"][:300]
    texts = [data.texts[i] for i in tr]
    enc = _seeded(veil.protect, data.X[tr], "texthide", m=16, k=2, seed=0)
    good = veil.attack(enc, "unmix", private=texts, queries=60)
    assert good.metric == "all_sources" and good.significant and good.value > 0.5
    truth = enc.key.mixing
    shifted = replace(truth, sources=np.roll(np.asarray(truth.sources), 1, axis=0))
    forged = Protected(enc.release, enc.defense, enc.kind, key=SecretKey(enc.key.value, "mask pool", mixing=shifted),
                       settings=enc.settings)
    bad = veil.attack(forged, "unmix", private=texts, queries=60)
    assert bad.value < 0.1 and good.value - bad.value > 0.4
    masks = veil.attack(enc, "mask-recovery", private=texts)
    assert masks.metric == "mask_bits" and masks.value > 0.75 and masks.test == {} and "no test" in str(masks)


def test_what_a_run_cannot_score_is_a_typed_error_naming_the_fix(data):
    tr = data.splits["train"]
    out = veil.protect((data.X[tr[:40]], data.labels[tr[:40]]), "plain", epochs=2, batch_size=20)
    members = (data.X[tr[:40]], data.labels[tr[:40]])
    with pytest.raises(InvalidParameterError, match="nonmembers="):
        veil.attack(out, "membership-loss", private=members)
    with pytest.raises(InvalidParameterError, match="population="):
        veil.attack(out, "membership-lira", private=members, nonmembers=(data.X[tr[40:80]], data.labels[tr[40:80]]))
    with pytest.raises(DataFormatError, match="trained on 40"):
        veil.attack(out, "membership-loss", private=(data.X[tr[:50]], data.labels[tr[:50]]),
                    nonmembers=(data.X[tr[50:90]], data.labels[tr[50:90]]))
    enc = veil.protect(data.X[tr[:40]], "texthide", m=16, k=2)
    keyless = Protected(enc.release, enc.defense, enc.kind, key=None, settings=enc.settings)
    with pytest.raises(InvalidParameterError, match="one-time mixing"):
        veil.attack(keyless, "mask-recovery", private=[data.texts[i] for i in tr[:40]])
    assert "mixing" not in repr(enc.key) and enc.key.mixing is not None


@pytest.mark.parametrize("attack", ["mask-recovery", "unmix"])
def test_a_training_run_gives_the_bench_cells_record(data, attack):
    """The bench's TextHide training-run cell and veil.protect + veil.attack with the cell's key (pool, mixing and
    batch order), the bench's index and its public statistics: the same record, metric for metric."""
    from veil.bench.cells.common import key_rng
    from veil.bench.cells.training_encodings import mask_recovery_cell, unmix_cell
    from veil.bench.plan import BenchConfig, Cell

    cell = Cell.make("rt-polarity", "texthide", {"k": 4, "m": 16, "mode": "intra"}, attack,
                     BenchConfig(quick=True, seed=3, queries=40, key_seed=7, limit=1000))
    run = {"mask-recovery": mask_recovery_cell, "unmix": unmix_cell}[attack]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        bench = run(cell, data).to_dict()
        tr = data.splits["train"]
        out = veil.protect(data.X[tr], "texthide", k=4, m=16, epochs=cell.config.n_epochs,
                           seed=key_rng(cell, "defense"))
    held = np.concatenate([data.splits["dev"], data.splits["test"]])
    extra = {} if attack == "mask-recovery" else {"index": data.index, "source_ids": tr, "queries": 40}
    got = veil.attack(out, attack, private=[data.texts[i] for i in tr], public=data.X[held], seed=3, **extra)
    assert got.record["metrics"] == bench["metrics"]
    assert got.record["extra"]["bench"] == bench["extra"]["bench"]
