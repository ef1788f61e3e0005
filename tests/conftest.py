"""Shared fixtures.

Tests that need a built-in corpus use the corpora pulled by `make setup` into
the real cache (VEIL_HOME or ~/.cache/veil); if one is missing it is pulled
(never skipped). Tests that write to the cache point VEIL_HOME at a tmp dir.
"""

from __future__ import annotations

import contextlib
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _home():
    from veil._io import veil_home

    return veil_home()


REAL_HOME = _home()  # captured at import, before any test points VEIL_HOME elsewhere


@contextlib.contextmanager
def _real_home_env():
    old = os.environ.get("VEIL_HOME")
    os.environ["VEIL_HOME"] = str(REAL_HOME)
    try:
        yield
    finally:
        if old is None:
            del os.environ["VEIL_HOME"]
        else:
            os.environ["VEIL_HOME"] = old


@pytest.fixture(scope="session")
def real_home():
    """The cache folder holding the pulled corpora."""
    return REAL_HOME


@pytest.fixture(scope="session")
def builtin():
    """Load a built-in corpus from the real cache, pulling it first if needed."""
    import veil.corpora as vc

    cache = {}

    def get(name: str):
        if name not in cache:
            with _real_home_env():
                cache[name] = vc.load(name, pull_missing=True)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def train_tiny_parser():
    """``train(trees, steps) -> (parser, losses)``: a small biaffine parser fitted full-batch on real trees
    (seeded; a real parser, just small: word 16, tag 8, subword 8 x 500 buckets, one 24-unit BiLSTM layer)."""
    import torch

    from veil.models.biaffine import Batch, BiaffineParser, ParserConfig, ParserVocab

    config = ParserConfig(word_dim=16, tag_dim=8, sub_dim=8, sub_buckets=500, hidden=24, layers=1, arc_dim=32,
                          label_dim=16, dropout=0.1)

    def train(trees, steps: int = 25):
        vocab = ParserVocab.build([(t.words, t.tags, t.deprels) for t in trees], min_count=1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            net = BiaffineParser(vocab, config)
            opt = torch.optim.Adam(net.parameters(), lr=5e-3)
            batch = Batch.make(vocab, [t.words for t in trees], [t.tags for t in trees], [t.heads for t in trees],
                               [t.deprels for t in trees], buckets=config.sub_buckets)
            losses = []
            for _ in range(steps):
                loss = net.loss(batch)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return net, losses

    return train
