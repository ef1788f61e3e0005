"""Training loops with defense hooks, on small slices of real corpora and real MiniLM embeddings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from veil.defenses.texthide import MaskPool, TextHide
from veil.errors import InvalidParameterError
from veil.training import PlainHook, TextHideHook, TrainConfig, finetune, train_head


@pytest.fixture(scope="module")
def encoder():
    from veil.encoders import TextEncoder

    return TextEncoder("minilm")


def _slice(corpus, split, n):
    idx = corpus.indices(split)[:n]
    return corpus.select(idx, name=f"{corpus.name}-{split}{n}")


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
    res = finetune(enc, tr.texts, tr.labels, dv.texts, dv.labels, task="classification", num_classes=2,
                   hook_factory=lambda: TextHideHook(TextHide(k=4, pool=MaskPool(8, 384)), "classification", 2),
                   config=TrainConfig(epochs=1, batch_size=16, patience=None))
    assert res.best_epoch == 1 and "accuracy" in res.dev_metrics
    assert not torch.equal(w0, enc.module.embeddings.word_embeddings.weight)  # the encoder was updated
    assert enc.model_id != before  # so its cached embeddings are not reused


def test_finetune_head_warmup_keeps_the_warm_start_when_fine_tuning_hurts(builtin):
    from veil.encoders import TextEncoder

    enc = TextEncoder("minilm")
    c = builtin("rt-polarity")  # short sentences: nothing truncated
    tr, dv = _slice(c, "train", 400), _slice(c, "dev", 200)
    w0 = enc.module.embeddings.word_embeddings.weight.detach().clone()
    hooks = []

    def factory():  # no masks, so dev scores are deterministic given the weights
        hooks.append(PlainHook("classification", 2))
        return hooks[-1]

    # an absurd encoder learning rate wrecks the fine-tuned model, so the epoch-0 warm start must be what comes back
    res = finetune(enc, tr.texts, tr.labels, dv.texts, dv.labels, task="classification", num_classes=2,
                   hook_factory=factory, config=TrainConfig(epochs=2, batch_size=32, patience=None,
                                                            encoder_lr=5.0, head_warmup_epochs=8))
    assert len(hooks) == 1  # one hook (one secret pool) for the head-only stage, fine-tuning and evaluation
    assert [h["epoch"] for h in res.warmup_history] == list(range(1, 9))
    assert [h["epoch"] for h in res.history] == [0, 1, 2]
    warm_best = max(h["dev_accuracy"] for h in res.warmup_history)
    assert res.history[0]["dev_accuracy"] == pytest.approx(warm_best)  # the best warm head on the same encoder
    majority = np.bincount(dv.labels).max() / len(dv.labels)
    assert warm_best > majority + 0.05  # the head-only stage learned something
    assert res.best_epoch == 0 and res.dev_metrics["accuracy"] == pytest.approx(warm_best)
    assert torch.equal(w0, enc.module.embeddings.word_embeddings.weight)  # pretrained encoder restored


def test_finetune_inter_reencodes_public_texts_with_the_current_encoder(builtin):
    from veil.encoders import TextEncoder

    enc = TextEncoder("minilm")
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
    finetune(enc, tr.texts, tr.labels, dv.texts, dv.labels, task="classification", num_classes=2,
             hook_factory=lambda: hook, public_texts=public_texts,
             config=TrainConfig(epochs=2, batch_size=16, patience=None, encoder_lr=1e-3))
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
                                    {"head_warmup_epochs": -1}])
def test_bad_config(kwargs):
    with pytest.raises(InvalidParameterError):
        TrainConfig(**kwargs)
