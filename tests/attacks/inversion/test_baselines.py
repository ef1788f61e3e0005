"""The inversion baselines (veil.attacks.inversion.baselines) on real public sentences and real MiniLM vectors:
the nearest public sentence (an oracle: a public sentence's own vector gives it back; it never answers outside
the public set) and the bag-of-words predictor (beats the "most frequent words" guess on held-out sentences)."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from veil.attacks.base import Observation
from veil.attacks.inversion.baselines import BagOfWords, NearestPublic
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError


@pytest.fixture(scope="module")
def news(builtin, real_home):
    """2000 news-articles train sentences and 100 dev sentences (public sentences: test split never read), encoded
    by MiniLM through the embedding cache (keyed by the texts, so re-runs read it)."""
    import os

    from veil._threads import torch_threads
    from veil.corpora.public_sentences import public_sentences
    from veil.encoders import TextEncoder
    from veil.encoders.cache import encode_cached

    builtin("news-articles")  # pulled into the real cache when missing
    old = os.environ.get("VEIL_HOME")
    os.environ["VEIL_HOME"] = str(real_home)
    try:
        train, dev = public_sentences("news-articles", "train"), public_sentences("news-articles", "dev")
        rng = np.random.default_rng(0)
        tr = [train[i] for i in np.sort(rng.choice(len(train), 2000, replace=False))]
        te = [dev[i] for i in np.sort(rng.choice(len(dev), 100, replace=False))]
        enc = TextEncoder("minilm")
        with torch_threads(1):
            Xtr = encode_cached(enc, tr, "news-articles", "test-baselines-train", progress=False)
            Xte = encode_cached(enc, te, "news-articles", "test-baselines-heldout", progress=False)
    finally:
        if old is None:
            del os.environ["VEIL_HOME"]
        else:
            os.environ["VEIL_HOME"] = old
    return enc, tr, Xtr, te, Xte


def test_nearest_public_oracle_and_never_outside_the_public_set(news):
    _, tr, Xtr, te, Xte = news
    attack = NearestPublic(tr, Xtr)
    rows = np.arange(0, 2000, 7)
    assert attack.run(Xtr[rows]) == [tr[i] for i in rows]  # a public sentence's own vector: that sentence
    assert attack.run(Observation(Xtr[rows] * 3.0)) == [tr[i] for i in rows]  # cosine: the scale does not matter
    public = set(tr)
    held = attack.run(Xte)
    assert len(held) == 100 and set(held) <= public
    noise = np.random.default_rng(0).normal(size=(20, Xtr.shape[1]))
    assert set(attack.run(noise)) <= public
    assert attack.config()["public_sentences"] == 2000 and attack.threat.observes


def test_nearest_public_encodes_the_public_sentences_itself(news):
    enc, tr = news[0], news[1][:6]
    attack = NearestPublic(tr, encoder=enc, cache=False)
    assert attack.run(enc.encode(tr, progress=False)[::-1]) == tr[::-1]


def test_bag_of_words_beats_the_most_frequent_words(news):
    from veil._threads import torch_threads
    from veil.metrics.inversion import paired_difference, score_inversions
    from veil.models.inverter import word_tokens

    _, tr, Xtr, te, Xte = news
    with torch_threads(1):
        bow = BagOfWords(tr, Xtr, vocab_size=3000, lr=3e-2, batch_size=64, eval_every=50, patience=4,
                         max_steps=1500, rng=0)
        out = bow.run(Xte)
    # the trivial guess, built independently: the k words most sentences hold, k = round(expected distinct words)
    df = Counter(w for t in tr for w in set(word_tokens(t)))
    k = int(np.floor(sum(c / len(tr) for c in df.values()) + 0.5))
    trivial = " ".join(sorted(df, key=lambda w: (-df[w], w))[:k])
    ours = score_inversions(te, out, seed=0)
    floor = score_inversions(te, [trivial] * len(te), seed=0)
    gain = paired_difference(ours, floor, "token_f1")
    assert gain.ci_low > 2.0, (gain, ours.metrics()["token_f1"], floor.metrics()["token_f1"])
    # a bag: every word is a vocabulary word, once, in descending probability
    probs = bow.probabilities(Xte[:5])
    for row, text in zip(probs, out[:5]):
        words = text.split()
        assert len(words) == len(set(words)) == max(1, int(np.floor(row.sum() + 0.5)))
        p = [row[bow.vocab.index(w)] for w in words]
        assert p == sorted(p, reverse=True) and min(p) >= np.sort(row)[-len(words)]
    c = bow.config()
    assert c["curve"][0]["step"] == 0 and c["selected_step"] in [r["step"] for r in c["curve"]]
    assert {"step", "dev_loss", "dev_token_f1"} <= set(c["curve"][-1]) and c["stopped"] in ("patience", "max_steps")
    best = max(r["dev_token_f1"] for r in c["curve"])
    assert best > c["curve"][0]["dev_token_f1"]  # training from the vector improved on the step-0 frequency prior
    assert c["dev_sentences"] == 200 and c["train_sentences"] == 1800 and c["rng"] == "seed 0"


def test_bag_of_words_is_reproducible_for_a_seed(news):
    from veil._threads import torch_threads

    _, tr, Xtr, _, Xte = news
    with torch_threads(1):
        lines: list[str] = []
        runs = [BagOfWords(tr[:300], Xtr[:300], vocab_size=500, max_steps=20, eval_every=10, rng=5, log=lines.append)
                for _ in range(2)]
    assert len(lines) == 6 and lines[0].startswith("bag of words: step 0/20, dev token F1 ")  # progress, per evaluation
    # from the first steps on, how long the rest takes at most at the rate so far (nothing at step 0 or at the cap)
    assert "more at this rate" not in lines[0] and "more at this rate" not in lines[2]
    assert re.search(r"; at most about \d+ min more at this rate \(less if it stops early\)$", lines[1])
    curves = [[{k: v for k, v in row.items() if k != "minutes"} for row in r.config()["curve"]] for r in runs]
    assert runs[0].run(Xte[:10]) == runs[1].run(Xte[:10]) and curves[0] == curves[1] and len(curves[0]) == 3
    assert runs[0].config()["stopped"] == "max_steps" and runs[0].config()["steps"] == 20
    timed = BagOfWords(tr[:300], Xtr[:300], vocab_size=500, max_minutes=1e-9, rng=5).config()
    assert timed["stopped"] == "max_minutes" and timed["steps"] == 0 and len(timed["curve"]) == 1


def test_bag_of_words_stops_on_patience_the_same_with_or_without_progress_lines(news):
    """Early stopping does not depend on whether anyone reads the progress: a fit with ``log`` and one without
    stop at the same step, on their patience, with the same predictor."""
    from veil._threads import torch_threads

    _, tr, Xtr, _, Xte = news
    lines: list[str] = []
    with torch_threads(1):
        quiet, told = (BagOfWords(tr[:300], Xtr[:300], vocab_size=500, lr=0.3, max_steps=3000, eval_every=5,
                                  patience=2, rng=5, log=log) for log in (None, lines.append))
    assert quiet.config()["stopped"] == told.config()["stopped"] == "patience"
    assert quiet.config()["steps"] == told.config()["steps"] < 3000 and quiet.run(Xte[:10]) == told.run(Xte[:10])
    assert len(lines) == len(told.config()["curve"]) and "2/2 evaluations without a gain" in lines[-1]


def test_bad_inputs_are_typed_errors(news):
    _, tr, Xtr, _, _ = news
    attack = NearestPublic(tr[:50], Xtr[:50])
    with pytest.raises(DataFormatError, match="dimension"):
        attack.run(np.ones((2, 10)))
    bad = Xtr[:3].copy()
    bad[1, 0] = np.nan
    with pytest.raises(DataFormatError, match="NaN"):
        attack.run(bad)
    bad[1, 0] = np.inf
    with pytest.raises(DataFormatError, match="NaN or inf"):
        attack.run(bad)
    with pytest.raises(DataFormatError, match="empty"):
        NearestPublic([], np.zeros((0, 384)))
    with pytest.raises(DataFormatError, match="one vector per sentence"):
        NearestPublic(tr[:5], Xtr[:4])
    with pytest.raises(InvalidParameterError, match="exactly one"):
        NearestPublic(tr[:5])
    with pytest.raises(InvalidTypeError):
        NearestPublic("one sentence", Xtr[:1])
    with pytest.raises(InvalidTypeError):
        NearestPublic([1, 2], Xtr[:2])
    with pytest.raises(DataFormatError, match="empty"):
        BagOfWords([], np.zeros((0, 384)))
    with pytest.raises(InvalidParameterError, match="vocab_size"):
        BagOfWords(tr[:5], Xtr[:5], vocab_size=0)
    with pytest.raises(InvalidParameterError, match="dev_share"):
        BagOfWords(tr[:5], Xtr[:5], dev_share=1.0)
    with pytest.raises(DataFormatError, match="NaN"):
        BagOfWords(tr[:3], bad)
    bow = BagOfWords(tr[:20], Xtr[:20], vocab_size=50, max_steps=2, eval_every=1, rng=0)
    with pytest.raises(DataFormatError, match="dimension"):
        bow.run(np.ones((2, 10)))
    with pytest.raises(DataFormatError, match="NaN"):
        bow.run(np.full((1, 384), np.nan))


def test_bag_of_words_saves_and_loads_bit_for_bit_and_refuses_a_damaged_file(news, tmp_path):
    from veil._threads import torch_threads
    from veil.errors import CacheCorruptError

    _, tr, Xtr, _, Xte = news
    with torch_threads(1):
        bow = BagOfWords(tr[:300], Xtr[:300], vocab_size=500, max_steps=20, eval_every=10, rng=5)
    path = bow.save(tmp_path / "bow.pt")
    back = BagOfWords.load(path)
    assert back.run(Xte[:10]) == bow.run(Xte[:10])
    assert np.array_equal(back.probabilities(Xte[:10]), bow.probabilities(Xte[:10]))
    assert back.config() == bow.config()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside the weights
    bad = tmp_path / "bad.pt"
    bad.write_bytes(bytes(data))
    with pytest.raises(CacheCorruptError, match="bad.pt"):
        BagOfWords.load(bad)
    (tmp_path / "foreign.pt").write_bytes(b"not a torch file")
    with pytest.raises(CacheCorruptError, match="foreign.pt"):
        BagOfWords.load(tmp_path / "foreign.pt")
