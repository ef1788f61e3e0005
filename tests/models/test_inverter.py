"""veil's embedding inverter: the oracle (trained on exact pairs, it writes them back), cached greedy decoding
and the beam's n best hypotheses against slow references, token F1 against hand-computed values, typed errors for
bad vectors, another encoder, and a damaged or missing model."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from veil.errors import CacheCorruptError, DataFormatError, InvalidParameterError, ResourceMissingError
from veil.models.inverter import (MANIFEST, WEIGHTS, InversionPairs, beam_hypotheses, beam_ids, encoder_identity,
                                  greedy_ids, load_inverter, mean_token_f1, token_f1, word_tokens)
from veil.training.inverter import InverterConfig, train_inverter

pytestmark = pytest.mark.slow

PAIRS = ["the cat sat on the mat near the old house.", "stocks fell sharply on monday after the report."]


@pytest.fixture(scope="module")
def encoder():
    from veil.encoders import TextEncoder

    return TextEncoder("minilm", backend="torch")


@pytest.fixture(scope="module")
def oracle(encoder, tmp_path_factory):
    """An inverter trained 20 steps on two exact (MiniLM vector, sentence) pairs."""
    vectors = encoder.encode(PAIRS, progress=False)
    pairs = InversionPairs(list(PAIRS), vectors, encoder_identity(encoder))
    config = InverterConfig(name="inverter-quick", sources=(("news-articles", 2),), epochs=20, batch_size=2, warmup=3,
                            lr=1e-3, head_lr=3e-3, eval_every=20, heldout=2, max_tokens=16, threads=1, seed=1)
    folder = tmp_path_factory.mktemp("inverter") / "oracle"
    train_inverter(config, pairs, pairs, out=folder, log=lambda _: None)
    return load_inverter(folder), vectors


def test_the_oracle_writes_its_training_pairs_back(oracle, encoder):
    inverter, vectors = oracle
    assert inverter.generate(vectors) == PAIRS  # greedy
    assert inverter.generate(vectors, beam=3, encoder=encoder) == PAIRS
    m = inverter.manifest
    assert m["heldout"]["token_f1"] == 100.0 and m["heldout"]["start_token_f1"] < 50.0
    assert m["encoder"] == encoder_identity(encoder) and m["kind"] == "inverter"
    assert inverter.identity()["sha256"] == m["sha256"] and inverter.identity()["heldout_token_f1"] == 100.0
    decoder = inverter.net.decoder
    assert decoder.config.is_decoder  # causal
    assert decoder.cls.predictions.decoder.weight.data_ptr() == decoder.bert.embeddings.word_embeddings.weight.data_ptr()


def _slow_greedy(net, vectors, start_id, end_id, max_tokens):
    """The obviously-correct greedy decode: the whole sequence again at every step, no cache."""
    out = []
    for v in vectors:
        ids = [start_id]
        for _ in range(max_tokens):
            hidden = net.start(v[None], torch.tensor([ids])).last_hidden_state[:, -1]
            nxt = int(net.logits(hidden, net.output_shift(v[None])).argmax(-1))
            if nxt == end_id:
                break
            ids.append(nxt)
        out.append(ids[1:])
    return out


def test_cached_greedy_and_beam_one_equal_the_slow_reference(oracle):
    inverter, vectors = oracle
    rng = np.random.default_rng(0)
    noisy = vectors + rng.normal(0, 0.05, vectors.shape).astype(np.float32)  # off the training points too
    x = torch.as_tensor(np.concatenate([vectors, noisy]))
    ids = dict(start_id=inverter.tokenizer.cls_token_id, end_id=inverter.tokenizer.sep_token_id, max_tokens=12)
    with torch.inference_mode():
        slow = _slow_greedy(inverter.net, x, **ids)
        assert greedy_ids(inverter.net, x, bf16=False, **ids) == slow
        assert beam_ids(inverter.net, x, beam=1, bf16=False, **ids) == slow
        assert all(len(r) <= 12 for r in beam_ids(inverter.net, x, beam=4, bf16=False, **ids))


def _slow_score(net, v, row, start_id, end_id, max_tokens):
    """The beam's score of one hypothesis, recomputed without cache: its summed log-probabilities (``[SEP]`` too
    when it finished, i.e. is shorter than ``max_tokens``) divided by that many tokens."""
    target = list(row) + ([end_id] if len(row) < max_tokens else [])
    hidden = net.start(v[None], torch.tensor([[start_id] + target[:-1]])).last_hidden_state[0, net.prefix_tokens:]
    logp = torch.log_softmax(net.logits(hidden, net.output_shift(v[None]).expand(len(target), -1)), -1)
    return float(logp[torch.arange(len(target)), torch.tensor(target)].sum()) / len(target)


def test_n_best_hypotheses_are_the_beams_best_distinct_rows_in_score_order(oracle):
    inverter, vectors = oracle
    rng = np.random.default_rng(1)
    noisy = vectors + rng.normal(0, 0.2, vectors.shape).astype(np.float32)
    x = torch.as_tensor(np.concatenate([vectors, noisy]))
    ids = dict(start_id=inverter.tokenizer.cls_token_id, end_id=inverter.tokenizer.sep_token_id, max_tokens=12)
    with torch.inference_mode():
        best = beam_ids(inverter.net, x, beam=4, bf16=False, **ids)
        hyps = beam_hypotheses(inverter.net, x, beam=4, n_best=4, bf16=False, **ids)
        assert [h[0] for h in hyps] == best
        for v, rows in zip(x, hyps):
            assert len(rows) == 4 and len({tuple(r) for r in rows}) == 4
            scores = [_slow_score(inverter.net, v, r, **ids) for r in rows]
            assert all(a >= b - 1e-4 for a, b in zip(scores, scores[1:])), scores
    texts = inverter.hypotheses(vectors, beam=3, n_best=2)
    assert [t[0] for t in texts] == inverter.generate(vectors, beam=3) == PAIRS
    with pytest.raises(InvalidParameterError, match="n_best"):
        inverter.hypotheses(vectors, beam=2, n_best=3)
    with pytest.raises(DataFormatError, match="dimension 383"):
        inverter.hypotheses(vectors[:, :383], beam=2, n_best=2)


def test_token_f1_by_hand():
    assert word_tokens("Café, naïve DON'T!") == ["cafe", "naive", "don", "t"]
    assert token_f1("The cat sat.", "the cat") == pytest.approx(0.8)  # P 2/2, R 2/3
    assert token_f1("the the cat", "the dog the") == pytest.approx(2 / 3)  # 2 common of 3 and 3
    assert token_f1("a b", "c d") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("a", "") == 0.0 and token_f1("...", "a") == 0.0
    assert mean_token_f1(["a b", "a"], ["a b", "b"]) == pytest.approx(50.0)
    with pytest.raises(DataFormatError):
        mean_token_f1(["a"], [])


def test_bad_vectors_and_another_encoder_are_typed_errors(oracle, encoder):
    inverter, vectors = oracle
    with pytest.raises(DataFormatError, match="dimension 383"):
        inverter.generate(vectors[:, :383])
    bad = vectors.copy()
    bad[1, 7] = np.nan
    with pytest.raises(DataFormatError, match="NaN"):
        inverter.generate(bad)
    with pytest.raises(InvalidParameterError, match="beam"):
        inverter.generate(vectors, beam=0)
    other = {**encoder_identity(encoder), "model_id": "minilm-0123456789ab-tuned-ffffffffffff"}
    with pytest.raises(InvalidParameterError, match="trained for"):
        inverter.generate(vectors, encoder=other)
    with pytest.raises(InvalidParameterError, match="pooling"):
        inverter.check_encoder({**encoder_identity(encoder), "pooling": "cls"})
    inverter.check_encoder(encoder)  # the encoder it was trained for


def test_a_damaged_or_missing_model_is_refused(oracle, tmp_path):
    inverter, vectors = oracle
    folder = tmp_path / "copy"
    shutil.copytree(inverter.folder, folder)
    assert load_inverter(folder).generate(vectors) == PAIRS
    data = bytearray((folder / WEIGHTS).read_bytes())
    data[-100] ^= 0xFF
    (folder / WEIGHTS).write_bytes(bytes(data))
    with pytest.raises(CacheCorruptError, match="veil models train inverter"):
        load_inverter(folder)
    shutil.copy(inverter.folder / WEIGHTS, folder / WEIGHTS)
    manifest = json.loads((folder / MANIFEST).read_text())
    del manifest["encoder"]
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CacheCorruptError, match="veil models train inverter"):
        load_inverter(folder)
    (folder / MANIFEST).write_text("{")
    with pytest.raises(DataFormatError, match="veil models train inverter"):
        load_inverter(folder)
    with pytest.raises(ResourceMissingError, match="veil models train inverter"):
        load_inverter(tmp_path / "nothing-here")
