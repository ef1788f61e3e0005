"""The biaffine parser: a short training run on the tiny treebank, trees out, soft inputs, saving and loading."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from veil.errors import DataFormatError
from veil.models.arborescence import is_tree
from veil.models.biaffine import Batch, BiaffineParser
from veil.parsing.treebank import load_treebank



@pytest.fixture(scope="module")
def trained(tiny_treebank, train_tiny_parser):
    return train_tiny_parser(load_treebank("train", tiny_treebank), steps=25)


def test_training_lowers_the_loss_and_beats_chance(trained, tiny_treebank):
    from veil.parsing.evaluate import attachment_scores, predict_biaffine

    net, losses = trained
    assert losses[-1] < 0.8 * losses[0]
    test = load_treebank("test", tiny_treebank)
    pred = predict_biaffine(net, test, batch_size=7)
    assert all(is_tree(np.array(h)) for h, _ in pred)
    scores = attachment_scores(test, pred, n_boot=50)
    assert scores["uas"].mean > 100 / np.mean([len(t) for t in test])  # far above a random head
    assert scores["uas"].ci_low <= scores["uas"].mean <= scores["uas"].ci_high


def test_soft_one_hot_inputs_equal_the_lookup(trained, tiny_treebank):
    net, _ = trained
    net.eval()
    trees = load_treebank("dev", tiny_treebank, limit=4)
    batch = Batch.make(net.vocab, [t.words for t in trees], [t.tags for t in trees], buckets=net.config.sub_buckets)
    ids = torch.arange(len(net.vocab.words))
    one_hot = torch.nn.functional.one_hot(batch.words, len(ids)).float().requires_grad_(True)
    soft = net.word.mix(one_hot, ids)
    arc_soft = net(batch, word_vectors=soft)[0]
    arc_hard = net(batch)[0]
    finite = torch.isfinite(arc_hard)
    assert torch.allclose(arc_soft[finite], arc_hard[finite], atol=1e-5)
    arc_soft[finite].sum().backward()
    assert one_hot.grad is not None and one_hot.grad.abs().sum() > 0  # gradients reach the distribution


def test_save_and_load_round_trip(trained, tmp_path, tiny_treebank):
    net, _ = trained
    net.save(tmp_path / "p.pt")
    back = BiaffineParser.load(tmp_path / "p.pt")
    trees = load_treebank("test", tiny_treebank, limit=5)
    batch = Batch.make(net.vocab, [t.words for t in trees], [t.tags for t in trees], buckets=net.config.sub_buckets)
    assert net.predict(batch) == back.predict(batch)


def test_empty_sentence_in_a_batch_is_refused(trained):
    net, _ = trained
    with pytest.raises(DataFormatError, match="empty"):
        Batch.make(net.vocab, [["a"], []], [["DT"], []])
