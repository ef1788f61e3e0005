"""Training loops with defense hooks, on small slices of real corpora and real MiniLM embeddings."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from veil.defenses.texthide import MaskPool, TextHide
from veil.errors import CollapsedModelWarning, InvalidParameterError, InvalidTypeError
from veil.training import PlainHook, TextHideHook, TrainConfig, finetune, train_head


@pytest.fixture(scope="module")
def encoder():
    from veil.encoders import TextEncoder

    return TextEncoder("minilm")


def _slice(corpus, split, n):
    idx = corpus.indices(split)[:n]
    return corpus.select(idx, name=f"{corpus.name}-{split}{n}")


def _collapse_reported_iff_flagged(run):
    """Run a tiny training whose head may or may not collapse (secret masks from the OS CSPRNG, very few steps).

    Whichever happens, a CollapsedModelWarning must come exactly when the result says ``collapsed``; any other
    warning still fails the test.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run()
    others = [w for w in caught if not issubclass(w.category, CollapsedModelWarning)]
    assert not others, [str(w.message) for w in others]
    assert len(caught) == int(res.collapsed)
    return res


def _weights(module):
    return [t.detach().clone() for t in module.state_dict().values()]


@pytest.fixture(scope="module")
def trec(builtin, encoder):
    c = builtin("trec-questions")
    tr, dv = _slice(c, "train", 1200), _slice(c, "dev", 300)
    return (encoder.encode(tr.texts, progress=False), tr.labels, encoder.encode(dv.texts, progress=False), dv.labels)


def test_baseline_head_learns_trec(trec):
    Xtr, ytr, Xdv, ydv = trec
    res = train_head(Xtr, ytr, Xdv, ydv, task="classification", num_classes=6,
                     hook_factory=lambda: PlainHook("classification", 6), config=TrainConfig(epochs=15, patience=5))
    majority = np.bincount(ydv).max() / len(ydv)
    assert res.dev_metrics["accuracy"] > majority + 0.3  # ~0.8 vs majority ~0.25
    # early stopping restored the best epoch, whose dev score is the reported one
    best = max(h["dev_accuracy"] for h in res.history)
    assert res.dev_metrics["accuracy"] == best == res.history[res.best_epoch - 1]["dev_accuracy"]
    assert res.predict(Xdv, PlainHook("classification", 6)).shape == ydv.shape
    assert not res.collapsed
    assert all(isinstance(h["train_loss"], float) for h in res.history)


def test_texthide_head_trains_on_masked_vectors_only(trec):
    Xtr, ytr, Xdv, ydv = trec
    hooks = []

    def factory():
        hooks.append(TextHideHook(TextHide(k=4, pool=MaskPool(16, 384)), "classification", 6))
        return hooks[-1]

    res = train_head(Xtr, ytr, Xdv, ydv, task="classification", num_classes=6, hook_factory=factory,
                     config=TrainConfig(epochs=25, patience=25))
    assert len(hooks) == 1
    masked = (res.predict(Xdv, hooks[0]) == ydv).mean()
    plain = (res.predict(Xdv, PlainHook("classification", 6)) == ydv).mean()
    majority = np.bincount(ydv).max() / len(ydv)
    assert masked > majority + 0.1  # it learned the task through the masks
    assert plain < masked  # and the head is useless on vectors without the secret masks


def test_regression_head(builtin, encoder):
    c = builtin("hutto-tweets")
    tr, dv = _slice(c, "train", 1000), _slice(c, "dev", 300)
    Xtr, Xdv = encoder.encode(tr.texts, progress=False), encoder.encode(dv.texts, progress=False)
    res = train_head(Xtr, tr.labels, Xdv, dv.labels, task="regression", num_classes=None,
                     hook_factory=lambda: PlainHook("regression", None), config=TrainConfig(epochs=15))
    assert res.dev_metrics["pearson"] > 0.5
    pred = res.predict(Xdv, PlainHook("regression", None))
    assert abs(pred.mean() - dv.labels.mean()) < 1.0  # de-standardised back to the [-4, 4] scale


def test_finetune_reaches_the_encoder_through_texthide(builtin):
    from veil.encoders import TextEncoder

    enc = TextEncoder("minilm")
    c = builtin("sms-spam")
    tr, dv = _slice(c, "train", 48), _slice(c, "dev", 16)
    before = enc.model_id
    w0 = enc.module.embeddings.word_embeddings.weight.detach().clone()
    res = _collapse_reported_iff_flagged(lambda: finetune(
        enc, tr.texts, tr.labels, dv.texts, dv.labels, task="classification", num_classes=2,
        hook_factory=lambda: TextHideHook(TextHide(k=4, pool=MaskPool(8, 384)), "classification", 2),
        config=TrainConfig(epochs=1, batch_size=16, patience=None)))
    assert res.best_epoch == 1 and "accuracy" in res.dev_metrics
    assert not torch.equal(w0, enc.module.embeddings.word_embeddings.weight)  # the encoder was updated
    assert enc.model_id != before  # so its cached embeddings are not reused


def test_finetune_head_warmup_keeps_the_warm_start_when_fine_tuning_hurts(builtin):
    from veil.encoders import TextEncoder

    enc = TextEncoder("minilm")
    c = builtin("rt-polarity")  # short sentences: nothing truncated
    tr, dv = _slice(c, "train", 160), _slice(c, "dev", 120)
    w0 = enc.module.embeddings.word_embeddings.weight.detach().clone()
    hooks = []

    def factory():  # no masks, so dev scores are deterministic given the weights
        hooks.append(PlainHook("classification", 2))
        return hooks[-1]

    # an absurd encoder learning rate wrecks the fine-tuned model, so the epoch-0 warm start must be what comes back
    res = finetune(enc, tr.texts, tr.labels, dv.texts, dv.labels, task="classification", num_classes=2,
                   hook_factory=factory, config=TrainConfig(epochs=1, batch_size=32, patience=None,
                                                            encoder_lr=5.0, head_warmup_epochs=4))
    assert len(hooks) == 1  # one hook (one secret pool) for the head-only stage, fine-tuning and evaluation
    assert [h["epoch"] for h in res.warmup_history] == list(range(1, 5))
    assert [h["epoch"] for h in res.history] == [0, 1]
    warm_best = max(h["dev_accuracy"] for h in res.warmup_history)
    assert res.history[0]["dev_accuracy"] == pytest.approx(warm_best)  # the best warm head on the same encoder
    majority = np.bincount(dv.labels).max() / len(dv.labels)
    assert warm_best > majority + 0.05  # the head-only stage learned something
    assert res.best_epoch == 0 and res.dev_metrics["accuracy"] == pytest.approx(warm_best)
    assert torch.equal(w0, enc.module.embeddings.word_embeddings.weight)  # pretrained encoder restored
    # epoch 0 ran no training step: its train loss is None (not NaN), so the history is valid JSON
    assert res.history[0]["train_loss"] is None and isinstance(res.history[1]["train_loss"], float)
    json.dumps(res.history, allow_nan=False)
    assert not res.collapsed  # the warm head beats the majority class, so it predicts both classes


def test_finetune_inter_reencodes_public_texts_with_the_current_encoder(builtin):
    from veil.encoders import TextEncoder

    enc = TextEncoder("minilm", backend="torch")  # fine-tuning re-encodes in float32 torch; start must match it
    c, pub = builtin("rt-polarity"), builtin("health-tweets")
    tr, dv = _slice(c, "train", 32), _slice(c, "dev", 16)
    public_texts = list(_slice(pub, "train", 20).texts)
    start = torch.as_tensor(enc.encode(public_texts, progress=False), dtype=torch.float32) * 384 ** 0.5
    seen = []

    class Spy(TextHideHook):
        def set_public(self, public):
            seen.append(public.clone())
            super().set_public(public)

    hook = Spy(TextHide(k=2, pool=MaskPool(4, 384), public=torch.zeros(20, 384)), "classification", 2)
    _collapse_reported_iff_flagged(lambda: finetune(
        enc, tr.texts, tr.labels, dv.texts, dv.labels, task="classification", num_classes=2,
        hook_factory=lambda: hook, public_texts=public_texts,
        config=TrainConfig(epochs=2, batch_size=16, patience=None, encoder_lr=1e-3)))
    assert len(seen) == 2  # before epoch 1 (pretrained encoder) and before epoch 2 (after one epoch of updates)
    assert torch.allclose(seen[0], start, atol=1e-4)
    assert not torch.allclose(seen[1], seen[0], atol=1e-3)  # re-encoded by the fine-tuned encoder
    with pytest.raises(InvalidParameterError, match="public_texts"):
        finetune(enc, tr.texts, tr.labels, dv.texts, dv.labels, task="classification", num_classes=2,
                 hook_factory=lambda: PlainHook("classification", 2), public_texts=public_texts,
                 config=TrainConfig(epochs=1, batch_size=16))


def test_too_few_examples_for_k():
    X = np.random.default_rng(0).normal(size=(3, 8)).astype(np.float32)
    with pytest.raises(InvalidParameterError, match="mixes 4"):
        train_head(X, np.array([0, 1, 0]), X, np.array([0, 1, 0]), task="classification", num_classes=2,
                   hook_factory=lambda: TextHideHook(TextHide(k=4, pool=MaskPool(0, 8)), "classification", 2),
                   config=TrainConfig(epochs=1))


@pytest.mark.parametrize("kwargs", [{"epochs": 0}, {"warmup": 1.0}, {"lr": 0}, {"patience": 0},
                                    {"head_warmup_epochs": -1}, {"seed": -1}])
def test_bad_config(kwargs):
    with pytest.raises(InvalidParameterError):
        TrainConfig(**kwargs)
    with pytest.raises(InvalidTypeError, match="seed must be an int"):
        TrainConfig(seed=1.5)


# ---------------------------------------------------------------- randomness: reproducible, never global
def test_train_head_is_reproducible_and_never_touches_the_global_generator(trec):
    Xtr, ytr, Xdv, ydv = trec

    def run(seed):
        return train_head(Xtr[:400], ytr[:400], Xdv, ydv, task="classification", num_classes=6,
                          hook_factory=lambda: PlainHook("classification", 6),
                          config=TrainConfig(epochs=3, patience=None, dropout=0.3, seed=seed))

    torch.manual_seed(123)
    expected = torch.rand(5)
    torch.manual_seed(123)
    first = run(4)
    assert torch.equal(torch.rand(5), expected)  # the caller's stream is exactly where it was
    torch.manual_seed(999)  # a different global state changes nothing inside train_head
    second = run(4)
    assert second.history == first.history and second.dev_metrics == first.dev_metrics
    assert all(torch.equal(a, b) for a, b in zip(_weights(first.head), _weights(second.head)))
    other = run(5)
    assert not torch.equal(_weights(other.head)[0], _weights(first.head)[0])  # the seed does matter


def test_finetune_is_reproducible_and_restores_the_global_generator(builtin):
    from veil.encoders import TextEncoder

    c = builtin("rt-polarity")
    tr, dv = _slice(c, "train", 32), _slice(c, "dev", 16)

    def run(global_seed):
        enc = TextEncoder("minilm")  # fresh pretrained weights every run
        torch.manual_seed(global_seed)
        expected = torch.rand(5)
        torch.manual_seed(global_seed)
        res = _collapse_reported_iff_flagged(lambda: finetune(
            enc, tr.texts, tr.labels, dv.texts, dv.labels, task="classification", num_classes=2,
            hook_factory=lambda: PlainHook("classification", 2),
            config=TrainConfig(epochs=1, batch_size=16, patience=None, encoder_lr=1e-4, seed=7)))
        assert torch.equal(torch.rand(5), expected)  # fork_rng restored the caller's generator exactly
        return res, _weights(enc.module)

    (a, enc_a), (b, enc_b) = run(1), run(2)
    # transformer dropout drew from the global generator, seeded from config.seed inside fork_rng: the
    # different global states before the two runs must not matter
    assert a.history == b.history and a.dev_metrics == b.dev_metrics
    assert all(torch.equal(x, y) for x, y in zip(_weights(a.head), _weights(b.head)))
    assert all(torch.equal(x, y) for x, y in zip(enc_a, enc_b))


def test_finetune_restores_the_global_generator_when_it_fails(builtin):
    from veil.encoders import TextEncoder

    c = builtin("rt-polarity")
    tr = _slice(c, "train", 8)
    enc = TextEncoder("minilm")
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    with pytest.raises(InvalidParameterError, match="mixes 4"):  # fails inside the forked region
        finetune(enc, tr.texts[:3], tr.labels[:3], tr.texts, tr.labels, task="classification", num_classes=2,
                 hook_factory=lambda: TextHideHook(TextHide(k=4, pool=MaskPool(0, 384)), "classification", 2),
                 config=TrainConfig(epochs=1))
    assert torch.equal(torch.rand(3), expected)


# ---------------------------------------------------------------- collapsed classifiers and progress
def test_a_collapsed_classifier_is_flagged_and_warned_about():
    # every input is the same vector, so the head gives every dev example the same logits: one class for all
    rng = np.random.default_rng(0)
    X = np.tile(rng.normal(size=(1, 8)).astype(np.float32), (60, 1))
    y = np.array([0, 1, 1] * 20)
    with pytest.warns(CollapsedModelWarning, match=r"predicts only class \d for all 60 dev examples.*epochs.*"
                                                   r"learning rate.*label balance") as record:
        res = train_head(X, y, X, y, task="classification", num_classes=2,
                         hook_factory=lambda: PlainHook("classification", 2), config=TrainConfig(epochs=2))
    assert res.collapsed and res.dev_metrics["mcc"] == 0.0
    assert len(record) == 1 and record[0].filename == __file__  # points at the caller
    # regression is never flagged, whatever it predicts
    reg = train_head(X, y.astype(np.float64), X, y.astype(np.float64), task="regression", num_classes=None,
                     hook_factory=lambda: PlainHook("regression", None), config=TrainConfig(epochs=2))
    assert not reg.collapsed


def test_progress_outside_a_terminal_logs_lines(trec, capsys):
    Xtr, ytr, Xdv, ydv = trec
    kwargs = dict(task="classification", num_classes=6, hook_factory=lambda: PlainHook("classification", 6),
                  config=TrainConfig(epochs=3, patience=None))
    train_head(Xtr[:200], ytr[:200], Xdv, ydv, progress=False, **kwargs)
    assert capsys.readouterr().err == ""
    train_head(Xtr[:200], ytr[:200], Xdv, ydv, progress=True, **kwargs)
    err = capsys.readouterr().err
    assert "veil: training head: started (3 steps)" in err and "veil: training head: done 3/3" in err

