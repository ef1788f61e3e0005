"""The eavesdropper's tap (veil.attacks.gradients.tap): round trip, validation, and the wall between the attack's
input and the ground truth. ``record_run`` (also used by the other gradient tests) trains a real MLPHead with
TextHide in between and records the run exactly as the format says."""

from __future__ import annotations

import inspect
import json
import math
import shutil

import numpy as np
import pytest
import torch

from veil.attacks.gradients.tap import TAP_FORMAT, ClientUpdate, Tap, TapMeta, write_tap_meta, write_tap_round
from veil.attacks.gradients.truth import TapTruth, read_truth, truth_dir, write_tap_truth
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, ResourceMissingError


def unit_vectors(n: int, d: int, seed: int) -> np.ndarray:
    """Anisotropic unit vectors (a shared mean direction, like MiniLM's)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) / math.sqrt(d) + 0.6 * np.where(rng.random(d) < 0.5, -1, 1) / math.sqrt(d)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def record_run(path, X, y, *, batch=4, k=2, m=16, hidden=(64,), lr=0.5, mode="alg2", epochs=1, examples=None,
               dropout=0.0, num_classes=2, clients=("0",), seed=0, truth=True, mix_seed=None):
    """Train ``MLPHead`` on TextHide-encrypted (k >= 1, m) or plain (k = 0) batches of ``X`` and record the tap.

    alg2: one SGD step on one batch; fedavg: ``epochs`` epochs of AdamW over ``examples`` rows. Returns the tap
    folder. The mask pool and mixing come from the OS CSPRNG (TextHide's default) unless ``mix_seed`` is given
    (reproducible; TextHide then warns with PrivacyLeakWarning, which the caller must expect)."""
    from veil.defenses.texthide import MaskPool, TextHide
    from veil.models.heads import MLPHead

    d = X.shape[1]
    scale = math.sqrt(d)
    write_tap_meta(path, {"model": {"in_dim": d, "out_dim": num_classes, "hidden": list(hidden), "dropout": dropout},
                          "rep_scale": scale, "task": "classification", "num_classes": num_classes,
                          "client_mode": mode, "optimizer": "sgd" if mode == "alg2" else "adamw", "lr": lr,
                          "weight_decay": 0.0 if mode == "alg2" else 0.01, "batch_size": batch,
                          "local_epochs": 0 if mode == "alg2" else epochs, "rounds": 1,
                          "defense": ({"name": "texthide", "m": m, "k": k, "mode": "intra"} if k else
                                      {"name": "none", "m": 0, "k": 1, "mode": "intra"}),
                          "clients": list(clients)})
    head = MLPHead(d, num_classes, hidden=hidden, dropout=dropout, rng=seed)
    start = {key: v.detach().numpy().copy() for key, v in head.state_dict().items()}
    replies = {}
    rng = np.random.default_rng(seed)
    for c in clients:
        head.load_state_dict({key: torch.from_numpy(v.copy()) for key, v in start.items()})
        head.train()
        th = None
        if k:
            pool = MaskPool(m, d, rng=None if mix_seed is None else mix_seed)
            th = TextHide(k=k, pool=pool, rng=None if mix_seed is None else mix_seed + 1, record_details=True)
        n = batch if mode == "alg2" else examples
        rows = rng.choice(len(X), size=n, replace=False)
        if mode == "alg2":
            opt = torch.optim.SGD(head.parameters(), lr=lr)
            batches = [rows]
        else:
            opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.01, fused=True)  # as the client does
            batches = [rows[i:i + batch] for _ in range(epochs) for i in range(0, n, batch)]
        inputs, labels, steps, sources = [], [], [], []
        for s, idx in enumerate(batches):
            e = torch.from_numpy(X[idx]) * scale
            yy = torch.nn.functional.one_hot(torch.from_numpy(y[idx]), num_classes).float()
            src = np.asarray(idx)[:, None]
            if th is not None:
                out = th.encrypt(e, yy)
                e, yy = out.e, out.y
                src = np.asarray(idx)[th.last_details.private_index.numpy()]  # rows of X mixed into each input
            loss = -(yy * torch.log_softmax(head(e), -1)).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            inputs.append(e.detach().numpy())
            labels.append(yy.numpy())
            steps.append(np.full(len(idx), s))
            sources.append(src)
        replies[c] = ({key: v.detach().numpy().copy() for key, v in head.state_dict().items()},
                      {"num-examples": int(n), "train_loss": float(loss.detach())})
        if truth:
            write_tap_truth(path, 1, c, inputs=np.concatenate(inputs), step=np.concatenate(steps),
                            sources=np.concatenate(sources), soft_labels=np.concatenate(labels))
    write_tap_round(path, 1, global_state=start, replies=replies)
    return path


@pytest.fixture(scope="module")
def small_tap(tmp_path_factory):
    path = tmp_path_factory.mktemp("taps") / "run"
    X = unit_vectors(64, 32, 0)
    y = np.arange(64) % 2
    return record_run(path, X, y, batch=4, k=2, m=8, hidden=(32,), clients=("0", "1"))


def test_round_trip_reads_what_was_written(small_tap):
    tap = Tap(small_tap)
    assert tap.rounds == (1,) and tap.clients(1) == ("0", "1")
    assert tap.meta.model.hidden == (32,) and tap.meta.defense["k"] == 2 and tap.meta.client_mode == "alg2"
    u = tap.update(1, "1")
    assert isinstance(u, ClientUpdate) and u.num_examples == 4 and u.rows(tap.meta) == 4
    assert set(u.global_state) == {"net.0.weight", "net.0.bias", "net.3.weight", "net.3.bias"}
    assert not u.client_state["net.0.weight"].flags.writeable  # the observation is read-only
    g = u.pseudo_gradient(tap.meta)
    assert np.allclose(g["net.3.bias"], (u.global_state["net.3.bias"] - u.client_state["net.3.bias"]) / 0.5)
    assert list(tap.updates()) == [(1, "0"), (1, "1")]
    truth = read_truth(small_tap, 1, "1")
    assert isinstance(truth, TapTruth) and truth.inputs.shape == (4, 32) and truth.soft_labels.shape == (4, 2)
    assert np.allclose(truth.soft_labels.sum(1), 1.0)
    raw = json.loads((small_tap / "tap.json").read_text())
    assert raw["format"] == TAP_FORMAT
    assert TapMeta.from_dict(raw).to_dict() == raw


def test_truth_lives_outside_the_tap_and_the_attack_api_cannot_take_it(small_tap, tmp_path):
    from veil.attacks.gradients.analytic import AnalyticInversion
    from veil.attacks.gradients.labels import leak_labels
    from veil.attacks.gradients.matching import EncodingMatch

    assert truth_dir(small_tap).is_dir() and not (small_tap / "truth").exists()
    assert not any(p.name.endswith(".truth") for p in small_tap.rglob("*"))
    tap = Tap(small_tap)
    public = [n for n in dir(tap) if not n.startswith("__")]
    assert not any("truth" in n for n in public)  # no field, method or path to the truth
    truth = read_truth(small_tap, 1, "0")
    for call in (lambda: AnalyticInversion(rng=0).recover(truth, 1, "0"),
                 lambda: AnalyticInversion(rng=0).recover_update(truth, tap.meta),
                 lambda: EncodingMatch(rng=0).recover(truth, 1, "0"),
                 lambda: leak_labels(truth, tap.meta)):
        with pytest.raises(InvalidTypeError, match="scoring only"):
            call()
    for fn in (AnalyticInversion.recover, AnalyticInversion.recover_update, EncodingMatch.recover, leak_labels):
        assert not any("truth" in p for p in inspect.signature(fn).parameters)
    with pytest.raises(InvalidParameterError, match="ground-truth folder"):
        Tap(truth_dir(small_tap))
    # the attack never opens DIR.truth: it runs the same on a copy of the tap with no truth beside it
    alone = tmp_path / "alone"
    shutil.copytree(small_tap, alone)
    rec = AnalyticInversion(match=False, rng=0).recover(Tap(alone), 1, "0")
    assert rec.expected_rows == 4 and not truth_dir(alone).exists()


def test_truth_files_are_owner_only_and_not_picklable(small_tap):
    import pickle
    import stat

    f = truth_dir(small_tap) / "round-0001" / "client-0.npz"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(read_truth(small_tap, 1, "0"))


def test_bad_taps_raise_typed_errors_that_say_what_to_do(small_tap, tmp_path):
    with pytest.raises(ResourceMissingError, match="--record"):
        Tap(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFormatError, match="no tap.json"):
        Tap(tmp_path / "empty")
    bad = tmp_path / "bad"
    shutil.copytree(small_tap, bad)
    meta = json.loads((bad / "tap.json").read_text())
    (bad / "tap.json").write_text(json.dumps({**meta, "format": "other/9"}))
    with pytest.raises(DataFormatError, match="veil-federated-tap/1"):
        Tap(bad)
    (bad / "tap.json").write_text(json.dumps({**meta, "client_mode": "magic"}))
    with pytest.raises(DataFormatError, match="client_mode"):
        Tap(bad)
    (bad / "tap.json").write_text(json.dumps(meta))
    np.savez(bad / "round-0001" / "client-0.npz", **{"net.0.weight": np.zeros((3, 3))})
    with pytest.raises(DataFormatError, match="re-record"):
        Tap(bad).update(1, "0")
    with pytest.raises(InvalidParameterError, match="did not reply"):
        Tap(small_tap).update(1, "7")
    with pytest.raises(InvalidParameterError, match="round 2"):
        Tap(small_tap).update(2, "0")
    with pytest.raises(InvalidParameterError, match="num-examples"):
        write_tap_round(tmp_path / "w", 1, replies={"0": ({}, {"train_loss": 0.1})})
    with pytest.raises(ResourceMissingError, match="--truth"):
        read_truth(tmp_path / "w", 1, "0")
