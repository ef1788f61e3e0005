"""veil.defenses.rewriting.dp_mlm: DP-MLM (Meisenbacher et al. 2024), the exponential mechanism over a masked LM's
clipped logits, epsilon per word piece; and its negative control (no clipping)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from veil.defenses import defense_names, get_defense, make_defense
from veil.defenses.rewriting import dp_mlm
from veil.defenses.rewriting.dp_mlm import (DPMLM, clip_bounds, draw_categorical, draw_repeated,
                                            exponential_probabilities, output_vocabulary)
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning

ALPHA = 1e-6  # the false-positive rate of every statistical test in this file

SENTENCES = ["the film is a charming and often affecting journey .",
             "it is a gorgeous , witty , seductive movie .",
             "an utterly incompetent conclusion to a dull story ."]


# ------------------------------------------------------------ the closed form, on a toy vocabulary
def _closed_form(logits, low, high, eps):
    w = [math.exp(eps * min(max(u, low), high) / (2 * (high - low))) for u in logits]
    return np.array(w) / sum(w)


def test_probabilities_are_the_exponential_mechanism_on_clipped_logits():
    logits = np.array([[-9.0, -1.0, 0.0, 2.5, 7.0, 30.0]])
    p = exponential_probabilities(logits, low=-1.0, high=5.0, epsilon=3.0)
    assert np.allclose(p[0], _closed_form(logits[0], -1.0, 5.0, 3.0), rtol=1e-12)
    assert p[0][0] == p[0][1] and p[0][4] == p[0][5]  # clipped: below low and above high are alike
    # the guarantee in its own terms: for ANY two logit rows every output's ratio is at most e^epsilon
    other = np.array([[40.0, 6.0, -3.0, -8.0, -1.0, -20.0]])
    q = exponential_probabilities(other, low=-1.0, high=5.0, epsilon=3.0)
    assert np.max(np.abs(np.log(p) - np.log(q))) <= 3.0 + 1e-12


@pytest.mark.parametrize("rng", [None, 7], ids=["os-csprng", "seeded"])
def test_draws_follow_the_closed_form_and_a_wrong_temperature_is_rejected(rng):
    """Chi-square of 200,000 draws against the closed form on a toy vocabulary of 6; the same draws against the
    distribution at twice the epsilon must be rejected (the test can fail)."""
    logits = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0])
    expected = _closed_form(logits, -1.5, 2.5, 4.0)
    p = exponential_probabilities(logits[None], low=-1.5, high=2.5, epsilon=4.0)[0]
    counts = np.bincount(draw_repeated(p, 200_000, rng), minlength=6)
    assert stats.chisquare(counts, 200_000 * expected).pvalue > ALPHA
    wrong = _closed_form(logits, -1.5, 2.5, 8.0)
    assert stats.chisquare(counts, 200_000 * wrong).pvalue < ALPHA
    rows = draw_categorical(np.repeat(p[None], 50_000, axis=0), rng)  # the rewrite's per-position draws
    assert stats.chisquare(np.bincount(rows, minlength=6), 50_000 * expected).pvalue > ALPHA


def test_unseeded_draws_read_the_os_csprng(monkeypatch):
    import os

    calls = []
    real = os.urandom

    def spy(n):
        calls.append(n)
        return real(n)

    monkeypatch.setattr(os, "urandom", spy)
    draw_repeated(np.full(4, 0.25), 10, None)
    draw_categorical(np.full((3, 4), 0.25), None)
    assert calls == [80, 24]  # 53-bit uniforms: 8 bytes a draw
    calls.clear()
    draw_repeated(np.full(4, 0.25), 10, 1)
    assert calls == []


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf"), True])
def test_bad_epsilon_is_refused_before_any_work(eps):
    with pytest.raises((InvalidParameterError, InvalidTypeError), match="epsilon"):
        DPMLM(epsilon=eps, clip=(0.0, 1.0), mlm="/no/such/model")  # refused before the model is looked for
    with pytest.raises((InvalidParameterError, InvalidTypeError), match="epsilon"):
        exponential_probabilities([[0.0, 1.0]], low=0.0, high=1.0, epsilon=eps)


@pytest.mark.parametrize("clip", [(2.0, 1.0), (1.0, 1.0), (float("nan"), 1.0), (0.0, float("inf"))])
def test_bad_clip_bounds_are_refused_before_any_work(clip):
    with pytest.raises(InvalidParameterError, match="inverted|low|high"):
        DPMLM(epsilon=10.0, clip=clip, mlm="/no/such/model")


def test_other_bad_arguments_are_typed_errors():
    with pytest.raises(InvalidParameterError, match="clip=.*public="):
        DPMLM(epsilon=10.0, mlm="/no/such/model")
    with pytest.raises(InvalidTypeError, match="pair"):
        DPMLM(epsilon=10.0, clip=3.0, mlm="/no/such/model")
    with pytest.raises(DataFormatError, match="finite"):
        exponential_probabilities([[0.0, float("nan")]], low=0.0, high=1.0, epsilon=1.0)


def test_registered_as_a_text_defense_with_its_control():
    assert "dp-mlm" in defense_names("text")
    assert get_defense("dp-mlm") is DPMLM
    assert "dp-mlm-broken-greedy" in defense_names(controls=True)
    assert "dp-mlm-broken-greedy" not in defense_names()
    assert DPMLM.bench_settings(True) == []
    assert [s["epsilon"] for s in DPMLM.bench_settings(False)] == [10.0, 25.0, 50.0, 100.0]
    g = DPMLM.bench_guarantee({"epsilon": 25.0})
    assert g.kind == "epsilon-dp" and g.epsilon == 25.0 and "per word piece" in g.statement


def test_no_masked_lm_is_a_typed_error_naming_the_command(tmp_path, monkeypatch):
    from veil.errors import ResourceMissingError

    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    with pytest.raises(ResourceMissingError, match="veil models train mlm --quick"):
        DPMLM(epsilon=10.0, clip=(0.0, 1.0))


# ------------------------------------------------------------ on veil's quick masked LM
@pytest.fixture(scope="module")
def mechanism(quick_mlm):
    return DPMLM(epsilon=50.0, mlm=quick_mlm, public=SENTENCES)


def test_output_vocabulary_leaves_out_special_and_unused_pieces(quick_mlm):
    vocab = output_vocabulary(quick_mlm.tokenizer)
    tokens = set(quick_mlm.tokenizer.convert_ids_to_tokens(vocab.tolist()))
    assert not tokens & {"[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"} and not any(t.startswith("[unused")
                                                                                  for t in tokens)
    assert "film" in tokens and "##s" in tokens and len(vocab) > 25_000


def test_clip_bounds_come_from_public_text_and_are_ordered(quick_mlm, mechanism):
    low, high = clip_bounds(quick_mlm, SENTENCES)
    assert low < high and (mechanism.low, mechanism.high) == (low, high)
    assert mechanism.temperature == pytest.approx(2 * (high - low) / 50.0)
    with pytest.raises(DataFormatError, match="public"):
        clip_bounds(quick_mlm, [])


def test_every_position_is_within_its_guarantee_for_any_two_texts(mechanism, quick_mlm):
    """The exact output distributions of two different texts of the same length: every output word piece's
    probability ratio at every position is at most e^epsilon; the greedy control breaks that."""
    from veil.controls import make_control

    a, b = SENTENCES[0], "the war is a boring and rarely moving journey ."
    (ia, pa), (ib, pb) = mechanism.distributions([a, b])
    assert len(ia) == len(ib) and pa.shape == (len(ia), len(mechanism.vocab))
    assert np.allclose(pa.sum(axis=1), 1.0)
    assert np.abs(np.log(pa) - np.log(pb)).max() <= mechanism.epsilon + 1e-9
    with pytest.warns(PrivacyLeakWarning):
        broken = make_control("dp-mlm-broken-greedy", epsilon=50.0, mlm=quick_mlm,
                              clip=(mechanism.low, mechanism.high))
    assert "BROKEN" in repr(broken)
    (_, qa), (_, qb) = broken.distributions([a, b])
    assert set(np.unique(qa)) == {0.0, 1.0} and (qa.argmax(axis=1) != qb.argmax(axis=1)).any()


def test_large_epsilon_draws_a_top_word_piece_and_tiny_epsilon_almost_anything(quick_mlm, mechanism):
    """At epsilon 10,000 per word piece every output is one of its position's top clipped logits (several tie at
    the upper bound); at 0.001 the draws spread over the vocabulary (the chance of keeping a word piece is about one
    in the vocabulary's size). Same length in word pieces either way; a text with no word piece comes back as is."""
    texts = SENTENCES * 2
    big = DPMLM(epsilon=1e4, mlm=quick_mlm, clip=(mechanism.low, mechanism.high))
    for (ids, rows), out in zip(big.logits(texts), big.rewrite_many(texts)):
        got = big._ctx.pieces(out)
        if len(got) != len(ids):  # a drawn piece that decodes and re-tokenises differently: rare, skip the text
            continue
        top = np.clip(rows, big.low, big.high).max(axis=1)
        col = np.searchsorted(big.vocab, got)
        assert np.array_equal(np.clip(rows[np.arange(len(ids)), col], big.low, big.high), top)
    tiny = DPMLM(epsilon=1e-3, mlm=quick_mlm, clip=(mechanism.low, mechanism.high))
    pairs = [(x, y) for t, o in zip(texts, tiny.rewrite_many(texts))
             for x, y in zip(tiny._ctx.pieces(t), tiny._ctx.pieces(o))]
    assert sum(x == y for x, y in pairs) <= 2 and len({y for _, y in pairs}) > 0.9 * len(pairs)
    assert mechanism.rewrite_many(["", "  "]) == ["", "  "]
    cfg = mechanism.config()
    assert cfg["unit"] == "word piece" and cfg["mlm"]["name"] == "mlm-quick" and not cfg["seeded"]
    with pytest.raises(InvalidTypeError):
        mechanism.rewrite_many("a text, not a list")


def test_make_defense_builds_it_and_the_front_door_refuses_the_control(quick_mlm, mechanism):
    d = make_defense("dp-mlm", epsilon=10.0, mlm=quick_mlm, clip=(mechanism.low, mechanism.high))
    assert isinstance(d, DPMLM) and d.guarantee.epsilon == 10.0
    with pytest.raises(InvalidParameterError, match="negative control"):
        make_defense("dp-mlm-broken-greedy", epsilon=10.0, mlm=quick_mlm, clip=(0.0, 1.0))
    assert dp_mlm.strongest_mlm(("mlm-quick",)) == "mlm-quick"
