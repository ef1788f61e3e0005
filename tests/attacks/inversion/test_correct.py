"""Correction by re-embedding with a small real inverter, the quick masked LM and MiniLM: the cosine of every text never
decreases, step 0 is the closest of the beam's hypotheses (recomputed here), the reported cosines are those of the
texts, correction raises the mean cosine on held-out sentences, the word edits against a by-hand count and the
inverter-ranked fillers against a slow reference, the attack takes no text, and bad input gives typed errors."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from veil.attacks.inversion.correct import SOURCES, THREAT_MODEL, Correction, _Edits, correct
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

pytestmark = pytest.mark.slow

N = 16


@pytest.fixture(scope="module")
def models(tiny_inverter_home):
    """A small real inverter (the conftest's, trained once per session on 80 public news sentences) and MiniLM:
    these tests check the search, which must hold for any inverter; how good the quick and full inverters are is
    what the inversion records measure. (The quick inverter itself takes about 11 minutes to train on 2 cores.)"""
    from veil.encoders import TextEncoder
    from veil.models.inverter import load_inverter

    return load_inverter("inverter-quick"), TextEncoder("minilm")


@pytest.fixture(scope="module")
def targets(models, builtin):
    """MiniLM vectors of rt-polarity test sentences (a corpus the quick inverter never trained on)."""
    _, encoder = models
    texts = [t for t in builtin("rt-polarity").split("test").texts if len(t.split()) <= 25][:N]
    return encoder.encode(texts, progress=False)


@pytest.fixture(scope="module")
def run(models, targets):
    inverter, encoder = models
    return correct(inverter, encoder, targets, steps=2, beam=4, n_best=4, alphas=(1.0,), fillers=4)


def _cos(encoder, texts, targets):
    e = encoder.encode(texts, progress=False)
    return np.sum(e * targets, axis=1) / np.linalg.norm(targets, axis=1)


def test_cosines_never_decrease_and_are_the_texts_cosines(run, models, targets):
    _, encoder = models
    assert isinstance(run, Correction) and run.steps == 2 and run.cosines.shape == (3, N)
    assert np.all(np.diff(run.cosines, axis=0) >= 0)
    for t in range(3):
        np.testing.assert_allclose(_cos(encoder, run.texts[t], targets), run.cosines[t], atol=1e-4)
        assert set(run.sources[t]) <= set(SOURCES)
    for t in (1, 2):  # a text changes exactly when a proposal was closer
        moved = np.array([a != b for a, b in zip(run.texts[t - 1], run.texts[t])])
        assert np.array_equal(moved, np.array([s != "kept" for s in run.sources[t]]))
        assert np.all(run.cosines[t][moved] > run.cosines[t - 1][moved])
    assert np.all(np.diff(run.seconds) >= 0) and run.seconds[0] > 0 and run.candidates[1] > 0
    assert run.config["edits"] == "inverter" and run.config["mlm"] is None and run.config["alphas"] == [1.0]


def test_step_zero_is_the_closest_beam_hypothesis(run, models, targets):
    inverter, encoder = models
    pools = [[h for h in hyps + [g] if h]  # an empty hypothesis is never a candidate (a small inverter writes some)
             for hyps, g in zip(inverter.hypotheses(targets, beam=4, n_best=4), inverter.generate(targets))]
    for i, pool in enumerate(pools):
        c = _cos(encoder, pool, np.repeat(targets[i:i + 1], len(pool), 0))
        assert run.cosines[0, i] == pytest.approx(c.max(), abs=1e-4)
        assert run.texts[0][i] in pool and c[pool.index(run.texts[0][i])] >= c.max() - 1e-4


def test_correction_raises_the_mean_cosine_on_held_out_sentences(run):
    mean = run.mean_cosine()
    assert mean[2] > mean[0], mean  # must be able to fail: the edits and the feedback have to find closer texts


def test_without_proposals_the_steps_keep_the_reranked_texts(models, targets):
    inverter, encoder = models
    plain = correct(inverter, encoder, targets[:4], steps=2, alphas=(), edits="none")
    assert plain.texts[1] == plain.texts[2] == plain.texts[0]
    assert plain.candidates[1:].tolist() == [0, 0] and set(plain.sources[2]) == {"kept"}
    assert np.array_equal(plain.cosines[0], plain.cosines[2])


def test_word_edits_by_hand(quick_mlm):
    tok = quick_mlm.tokenizer
    text = "the cat sat on the overwrought mat"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    words = text.split()
    assert len(ids) == len(words) + 3  # "overwrought" is four pieces
    edits = _Edits(tok, mlm=quick_mlm, inverter=None, positions=64, fillers=3, deletions=True, insertions=True,
                   batch_size=5)
    (props,) = edits.propose([text], np.zeros((1, 384)))
    subs = [t for t, k in props if k == "substitution"]
    dels = [t for t, k in props if k == "deletion"]
    ins = [t for t, k in props if k == "insertion"]
    assert len(subs) == 3 * len(ids) and len(ins) == 3 * (len(ids) + 1)
    assert dels == [" ".join(words[:j] + words[j + 1:]) for j in range(len(words))]
    assert all(s != text and "[" not in s for s in subs + ins)  # never the same text, never a special token
    capped = _Edits(tok, mlm=quick_mlm, inverter=None, positions=2, fillers=3, deletions=False, insertions=False)
    (few,) = capped.propose([text], np.zeros((1, 384)))
    assert len(few) == 6 and {k for _, k in few} == {"substitution"}
    assert capped.propose([""], np.zeros((1, 384))) == [[]]


def test_inverter_ranked_fillers_against_a_slow_reference(models, targets):
    """The batched, teacher-forced fillers are the inverter's best next tokens given the target vector and the
    tokens to the left, recomputed one prefix at a time (to bf16 rounding: a filler's reference log-probability is
    within 0.05 of the reference's own third best)."""
    import torch

    inverter, _ = models
    tok, net = inverter.tokenizer, inverter.net
    texts = ["the film is a great ride", "a dull movie"]
    v = targets[:2] / np.linalg.norm(targets[:2], axis=1, keepdims=True)
    edits = _Edits(tok, mlm=None, inverter=inverter, positions=64, fillers=3, deletions=False, insertions=False)
    props = edits.propose(texts, v)
    banned = [i for t, i in tok.get_vocab().items() if t.startswith("[unused") or i in tok.all_special_ids]
    for text, vec, pool in zip(texts, v, props):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert len(pool) == 3 * len(ids)
        for j in range(len(ids)):
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
                x = torch.as_tensor(vec[None], dtype=torch.float32)
                h = net.start(x, torch.tensor([[tok.cls_token_id] + ids[:j]])).last_hidden_state[:, -1]
                ref = torch.log_softmax(net.logits(h, net.output_shift(x)), -1)[0]
            ref = ref.clone()  # out of inference mode
            ref[ids[j]] = -np.inf
            ref[banned] = -np.inf
            third = float(ref.topk(3).values[-1])
            for cand, _ in pool[3 * j:3 * j + 3]:
                new = tok(cand, add_special_tokens=False)["input_ids"]
                assert new[:j] == ids[:j] and new[j] != ids[j]
                assert float(ref[new[j]]) >= third - 0.05


def test_masked_lm_edits_run_through_correct(models, targets, quick_mlm):
    inverter, encoder = models
    out = correct(inverter, encoder, targets[:4], steps=1, edits="mlm", mlm=quick_mlm, fillers=2)
    assert out.candidates[1] > 0 and np.all(out.cosines[1] >= out.cosines[0])
    assert out.config["mlm"]["name"] == "mlm-quick" and out.config["edits"] == "mlm"


def test_the_attack_sees_vectors_never_text(models):
    inverter, encoder = models
    params = inspect.signature(correct).parameters
    assert list(params)[:3] == ["inverter", "encoder", "vectors"]
    assert not any("text" in p or "original" in p or "reference" in p for p in params)
    assert "vectors" in THREAT_MODEL.observes and "no text" in THREAT_MODEL.observes
    with pytest.raises(InvalidTypeError, match="numpy array"):
        correct(inverter, encoder, ["the original sentence"])


def test_bad_input_is_a_typed_error(models, targets):
    from veil.encoders import TextEncoder
    from veil.models.inverter import encoder_identity

    inverter, encoder = models
    v = targets[:2]
    with pytest.raises(DataFormatError, match="dimension 383"):
        correct(inverter, encoder, v[:, :383])
    bad = v.copy()
    bad[0, 3] = np.nan
    with pytest.raises(DataFormatError, match="NaN"):
        correct(inverter, encoder, bad)
    bad[0] = np.inf
    with pytest.raises(DataFormatError, match="inf"):
        correct(inverter, encoder, bad)
    with pytest.raises(DataFormatError, match="zero"):
        correct(inverter, encoder, np.zeros_like(v))
    with pytest.raises(InvalidParameterError, match="steps"):
        correct(inverter, encoder, v, steps=-1)
    with pytest.raises(InvalidParameterError, match="n_best"):
        correct(inverter, encoder, v, beam=2, n_best=3)
    with pytest.raises(InvalidParameterError, match="alphas"):
        correct(inverter, encoder, v, alphas=(0.0,))
    with pytest.raises(InvalidTypeError, match="alphas"):
        correct(inverter, encoder, v, alphas=1.0)
    with pytest.raises(InvalidTypeError, match="mlm"):
        correct(inverter, encoder, v, edits="mlm", mlm=3)
    with pytest.raises(InvalidParameterError, match="needs mlm"):
        correct(inverter, encoder, v, edits="mlm")
    with pytest.raises(InvalidParameterError, match="edits"):
        correct(inverter, encoder, v, edits="gradient")
    with pytest.raises(InvalidTypeError, match="inverter"):
        correct("inverter-quick", encoder, v)
    with pytest.raises(InvalidTypeError, match="encoder"):
        correct(inverter, encoder_identity(encoder), v)  # an identity cannot re-embed the guesses
    with pytest.raises(InvalidParameterError, match="trained for"):
        correct(inverter, TextEncoder("minilm", normalize=False), v)  # another encoder's vectors


def test_the_shortlist_gradient_matches_finite_differences(models, targets):
    """The first-order estimate's gradient is the cosine's: along a random direction of the input word embeddings,
    g . d matches the central difference of the cosine (float64 module copy, eps 1e-4)."""
    import copy

    import torch

    from veil.attacks.inversion.correct import _Shortlist
    from veil.encoders.pooling import pool

    inverter, encoder = models
    short = _Shortlist(encoder, inverter.tokenizer, 8)
    seq = inverter.tokenizer("a gripping , funny and moving film", add_special_tokens=False)["input_ids"]
    grad, table = short._gradients([seq], targets[:1])
    module = copy.deepcopy(encoder.module).double().eval()
    ids = torch.as_tensor([[short.cls_id, *seq, short.sep_id]])
    att = torch.ones_like(ids)
    x0 = module.get_input_embeddings()(ids).detach()
    d = torch.randn(x0.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    t = torch.as_tensor(targets[:1], dtype=torch.float64)

    def cos(x):
        with torch.no_grad():
            return float((pool(encoder.pooling, module(inputs_embeds=x, attention_mask=att).last_hidden_state, att,
                               normalize=True) * t).sum())

    eps = 1e-4
    numeric = (cos(x0 + eps * d) - cos(x0 - eps * d)) / (2 * eps)
    analytic = float((grad.double() * d).sum())
    assert analytic == pytest.approx(numeric, rel=2e-2, abs=1e-5)
    assert table.shape[0] == len(inverter.tokenizer)


def test_the_shortlist_bounds_the_re_embedded_edits_and_keeps_the_search_monotone(models, targets):
    inverter, encoder = models
    # every edit re-embedded: one step is all the comparison reads (its step 0 and the edits of step 1)
    full = correct(inverter, encoder, targets[:8], steps=1, beam=2, n_best=2)
    short = correct(inverter, encoder, targets[:8], steps=2, beam=2, n_best=2, shortlist=5)
    assert short.config["shortlist"] == 5 and "shortlist" not in full.config
    assert short.candidates[0] == full.candidates[0]  # step 0 is the same reranked beam
    assert all(c <= 5 * 8 for c in short.candidates[1:]) and full.candidates[1] > 5 * 8
    assert np.all(np.diff(short.cosines, axis=0) >= -1e-6)
    with pytest.raises(InvalidParameterError, match="shortlist"):
        correct(inverter, encoder, targets[:2], steps=1, shortlist=0)
