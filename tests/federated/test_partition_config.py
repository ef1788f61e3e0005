"""Partitions and the run configuration (no Flower, no model)."""

import numpy as np
import pytest

from veil.errors import InvalidParameterError, InvalidTypeError
from veil.federated import FederatedConfig, partition_indices


def _labels(n=1000, classes=2, seed=0):
    return np.random.default_rng(seed).integers(0, classes, n)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 1.0, 100.0])
def test_partitions_are_disjoint_and_cover_everything(alpha):
    y = _labels()
    parts = partition_indices(y, 3, alpha=alpha, seed=3, min_size=16)
    allidx = np.concatenate(parts)
    assert len(allidx) == len(y) and len(np.unique(allidx)) == len(y)
    assert min(len(p) for p in parts) >= 16
    again = partition_indices(y, 3, alpha=alpha, seed=3, min_size=16)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_small_alpha_skews_labels_and_large_alpha_does_not():
    y = _labels(4000)

    def spread(alpha):  # mean over seeds of the largest |positive share - overall share| across clients
        out = []
        for seed in range(5):
            parts = partition_indices(y, 5, alpha=alpha, seed=seed, min_size=10)
            out.append(max(abs(y[p].mean() - y.mean()) for p in parts))
        return np.mean(out)

    assert spread(0.1) > 0.3
    assert spread(1000.0) < 0.05


def test_iid_sizes_differ_by_at_most_one():
    sizes = [len(p) for p in partition_indices(_labels(1003), 4)]
    assert max(sizes) - min(sizes) <= 1


def test_impossible_partition_says_what_to_change():
    with pytest.raises(InvalidParameterError, match="fewer clients"):
        partition_indices(_labels(40), 5, min_size=16)
    with pytest.raises(InvalidParameterError, match="raise alpha"):
        partition_indices(_labels(300), 50, alpha=0.01, min_size=5, tries=3)


def test_config_round_trips_through_flower_run_config():
    cfg = FederatedConfig(clients=4, alpha=0.5, client_mode="fedavg", k=2, batch_size=8)
    assert FederatedConfig.from_run_config(cfg.to_run_config()) == cfg
    assert FederatedConfig.from_run_config({**cfg.to_run_config(), "server-round": 3}) == cfg


def test_config_rejects_typos_and_bad_values():
    with pytest.raises(InvalidParameterError, match="unknown federated setting 'roudns'"):
        FederatedConfig.from_run_config({"roudns": 3})
    with pytest.raises(InvalidParameterError, match="batch_size"):
        FederatedConfig(k=8, batch_size=4)
    with pytest.raises(InvalidParameterError, match="client_mode"):
        FederatedConfig(client_mode="sgd")
    with pytest.raises(InvalidTypeError, match="clients must be int"):
        FederatedConfig(clients=2.5)
    with pytest.raises(InvalidParameterError, match="inter mode needs k >= 2"):
        FederatedConfig(mode="inter", k=1, m=16)


def test_finetune_settings_are_checked():
    from veil.errors import InvalidParameterError
    from veil.federated import FederatedConfig

    assert FederatedConfig(client_mode="fedavg", finetune=True).name.startswith("rt-polarity-fedavg-ft-")
    with pytest.raises(InvalidParameterError, match="client_mode='fedavg'"):
        FederatedConfig(client_mode="alg2", finetune=True)
    with pytest.raises(InvalidParameterError, match="intra mode only"):
        FederatedConfig(client_mode="fedavg", finetune=True, mode="inter")
    with pytest.raises(InvalidParameterError, match="encoder_lr"):
        FederatedConfig(client_mode="fedavg", finetune=True, encoder_lr=0.0)
