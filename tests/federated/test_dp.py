"""Differential privacy in federated runs (veil.federated.dp): the configuration, the accounting, clipping, the
client mod on real Flower messages, and real Flower runs on a small sms-spam slice whose recorded replies and
global models show exactly the clipping and noise each placement claims."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from veil.errors import InvalidParameterError
from veil.federated import FederatedConfig
from veil.federated.dp import accounting, clip_update, dp_mod

SMALL = dict(corpus="sms-spam", clients=3, rounds=2, max_train=240, max_test=90, batch_size=8, m=0, k=1)


def test_the_configuration_names_dp_runs_apart_and_refuses_half_settings():
    plain = FederatedConfig(**SMALL)
    dp = FederatedConfig(**SMALL, dp="server", dp_clip=1.0, dp_noise=0.5)
    assert "-dpserver-C1-z0.5-" in dp.name and "-dp" not in plain.name
    assert FederatedConfig.from_run_config(dp.to_run_config()) == dp
    for bad in (dict(dp="central", dp_clip=1.0, dp_noise=1.0), dict(dp="local", dp_clip=0.0, dp_noise=1.0),
                dict(dp="client", dp_clip=1.0, dp_noise=0.0), dict(dp_clip=1.0), dict(dp_noise=1.0)):
        with pytest.raises(InvalidParameterError):
            FederatedConfig(**SMALL, **bad)
    with pytest.raises(InvalidParameterError, match="finetune"):
        FederatedConfig(**{**SMALL, "m": 256, "k": 4}, client_mode="fedavg", finetune=True, dp="server",
                        dp_clip=1.0, dp_noise=1.0)


def test_accounting_is_the_gaussian_mechanism_over_the_rounds():
    from veil.defenses.dpsgd.accounting import account

    central = accounting(FederatedConfig(**SMALL, dp="server", dp_clip=1.0, dp_noise=1.0))
    local = accounting(FederatedConfig(**SMALL, dp="local", dp_clip=1.0, dp_noise=1.0))
    assert central["delta"] == pytest.approx(1 / 30)
    assert central["epsilon"] == pytest.approx(account(1.0, 1.0, 2, 1 / 30).epsilon)
    assert local["effective_multiplier"] == 0.5  # replacing a client's data moves its clipped update by 2C
    assert local["epsilon"] == pytest.approx(account(0.5, 1.0, 2, 1 / 30).epsilon) and local["epsilon"] > \
        central["epsilon"]
    assert "not the replies" in central["protects"] and "server" in local["protects"]
    assert accounting(FederatedConfig(**SMALL)) == {}


def test_clipping_bounds_the_update_and_keeps_its_direction():
    rng = np.random.default_rng(0)
    sent = [rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)]
    big = [s + 10 * rng.normal(size=s.shape).astype(np.float32) for s in sent]
    out = clip_update(big, sent, 1.0)
    upd = np.concatenate([(o - s).ravel() for o, s in zip(out, sent)])
    raw = np.concatenate([(b - s).ravel() for b, s in zip(big, sent)])
    assert np.linalg.norm(upd) == pytest.approx(1.0, rel=1e-5)
    assert np.dot(upd, raw) / np.linalg.norm(raw) == pytest.approx(1.0, rel=1e-5)
    small = [s + np.float32(1e-3) for s in sent]
    assert all(np.array_equal(a, b) for a, b in zip(clip_update(small, sent, 1.0), small))
    assert all(np.array_equal(a, b) for a, b in zip(clip_update(sent, sent, 1.0), sent))  # zero stays zero


def _message(mode: str, arrays: dict, clip: float = 1.0, noise: float = 2.0):
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

    config = ConfigRecord({"dp": mode, "dp-clip": clip, "dp-noise": noise, "server-round": 1})
    content = RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in arrays.items()}), "config": config})
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def _reply_with(update_scale: float):
    """The inner ClientApp: adds ``update_scale`` to every weight (an update of known norm)."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict

    def call_next(msg, context):
        got = {k: v.numpy() + np.float32(update_scale) for k, v in msg.content["arrays"].items()}
        return Message(content=RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in got.items()}),
                                           "metrics": MetricRecord({"num-examples": 8})}), reply_to=msg)
    return call_next


@pytest.fixture
def task(monkeypatch):
    """What a ClientApp process knows about its task (Flower sets it when it runs one; a reply needs it)."""
    from flwr.supercore.task_identity import TaskIdentity

    for key in ("_run_id", "_node_id", "_task_id"):
        monkeypatch.setattr(TaskIdentity, key, 1)


@pytest.mark.parametrize("mode", ["client", "local", ""])
def test_the_client_mod_clips_and_noises_as_its_mode_says(task, mode):
    w = {"w": np.zeros((200, 50), dtype=np.float32), "b": np.zeros(50, dtype=np.float32)}
    reply = dp_mod(_message(mode, w), None, _reply_with(1.0))
    out = {k: v.numpy() for k, v in reply.content["arrays"].items()}
    update = np.concatenate([out["w"].ravel(), out["b"].ravel()])
    if mode == "":
        assert np.all(update == 1.0)
    elif mode == "client":
        assert np.linalg.norm(update) == pytest.approx(1.0, rel=1e-5)
        assert np.allclose(update, update[0])  # the same direction, scaled down
    else:  # clip to 1, then N(0, (2 x 1)^2) per coordinate
        assert np.std(update) == pytest.approx(2.0, rel=0.03)
        assert abs(np.mean(update)) < 6 * 2.0 / math.sqrt(update.size)


def _tap(tap: Path) -> tuple[dict, dict]:
    glob, replies = {}, {}
    for path in sorted(tap.glob("round-*/global.npz")):
        with np.load(path) as z:
            glob[int(path.parent.name.split("-")[1])] = {k: z[k] for k in z.files}
    for path in sorted(tap.glob("round-*/client-*.npz")):
        with np.load(path) as z:
            replies.setdefault(int(path.parent.name.split("-")[1]), []).append({k: z[k] for k in z.files})
    return glob, replies


def _flat(arrays: dict) -> np.ndarray:
    return np.concatenate([arrays[k].astype(np.float64).ravel() for k in sorted(arrays)])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("mode", ["server", "client", "local"])
def test_a_flower_run_adds_exactly_the_noise_and_clipping_it_claims(builtin, tmp_path, mode):
    from veil.federated.run import run_federated

    builtin("sms-spam")
    clip, z = 0.05, 0.5
    cfg = FederatedConfig(**SMALL, dp=mode, dp_clip=clip, dp_noise=z)
    rec, history = run_federated(cfg, engine="flower", record=tmp_path / "tap")
    glob, replies = _tap(tmp_path / "tap")
    assert sorted(glob) == [1, 2] and all(len(r) == 3 for r in replies.values())
    g1, g2 = _flat(glob[1]), _flat(glob[2])
    updates = [_flat(r) - g1 for r in replies[1]]  # what the server read in round 1
    norms = [np.linalg.norm(u) for u in updates]
    if mode == "server":
        assert max(norms) > clip  # the server reads the raw updates: clipping happens after the tap
    elif mode == "client":
        assert max(norms) <= clip * (1 + 1e-5)  # clipped before they left the clients
    else:
        assert np.std(updates[0]) == pytest.approx(z * clip, rel=0.02)  # clip + N(0, (z C)^2), on the client
    if mode in ("server", "client"):
        clipped = [u * min(1.0, clip / n) if n > 0 else u for u, n in zip(updates, norms)]
        noise = g2 - g1 - np.mean(clipped, axis=0)  # the released global = average of clipped updates + noise
        assert np.std(noise) == pytest.approx(z * clip / 3, rel=0.02)
        assert abs(np.mean(noise)) < 6 * (z * clip / 3) / math.sqrt(noise.size)  # centred: within 6 standard errors
    else:
        assert np.allclose(g2 - g1, np.mean(updates, axis=0), atol=1e-6)  # no server noise on top
    assert np.allclose(_flat(history[0]), g2)  # the run's own history holds the released (noisy) model
    assert rec.metrics["epsilon"].mean == pytest.approx(accounting(cfg)["epsilon"])
    assert rec.config["differential_privacy"]["mode"] == mode
