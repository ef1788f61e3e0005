"""Re-identification of released text (veil.attacks.text.reidentify): real mails, a shuffled-label control, scoring
against a slow reference, and the threat model's separation of observation and truth."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict

import numpy as np
import pytest

from veil.attacks.text import ReleasedText, observe_text
from veil.attacks.text.reidentify import (PublicTexts, Ranking, Reidentification, mechanism_for,
                                          reidentification_floors, score_reidentification)
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

#: the stated false-positive rate of every statistical assertion below (one-sided exact binomial tests)
ALPHA = 1e-6


@pytest.fixture(scope="module")
def mails(builtin):
    """30 spam-assassin senders (by e-mail address) with 4 distinct mails each: 2 public, 2 private (balanced, so
    chance and the most-frequent-candidate floor are both exactly 1/30)."""
    corpus = builtin("spam-assassin")
    by: dict[str, list[str]] = defaultdict(list)
    for text, sender in zip(corpus.texts, corpus.attributes["from"]):
        found = re.search(r"[\w.+=-]+@[\w-]+(?:\.[\w-]+)+", str(sender))
        if found and text not in by[found.group(0).lower()]:
            by[found.group(0).lower()].append(text[:2000])
    senders = sorted(a for a, ts in by.items() if len(ts) >= 4)[:30]
    pub_t, pub_c, priv_t, priv_c = [], [], [], []
    for a in senders:
        pub_t += by[a][:2]
        pub_c += [a, a]
        priv_t += by[a][2:4]
        priv_c += [a, a]
    return PublicTexts(tuple(pub_t), tuple(pub_c)), priv_t, priv_c


def test_beats_both_floors_on_original_mails(mails):
    public, texts, truth = mails
    ranking = Reidentification(public=public, variant="plain", rng=0).run(observe_text(texts))
    result = score_reidentification(ranking, truth, alpha=ALPHA)
    m = result.metrics
    assert m["candidates"].mean == 30 and result.n_queries == 60
    assert m["floor"].mean == pytest.approx(1 / 30) and m["floor_majority"].mean == pytest.approx(1 / 30)
    assert m["beats_floor"].mean == 1.0 and m["p_top1"].mean <= ALPHA, m["top1"]
    assert m["top1"].ci_low <= m["top1"].mean <= m["top1"].ci_high
    assert m["top1"].mean <= m["top5"].mean and m["top1"].mean <= m["mrr"].mean <= 1.0


def test_shuffled_training_labels_give_chance(mails):
    """Negative control: the same attack trained on the public texts with their candidates shuffled has no link
    to learn; its top-1 hit count must not beat 1/30 at alpha = 1e-6 (false alarm probability <= 1e-6)."""
    public, texts, truth = mails
    shuffled = PublicTexts(public.texts, tuple(np.random.default_rng(5).permutation(public.candidates)))
    ranking = Reidentification(public=shuffled, variant="plain", rng=0).run(observe_text(texts))
    m = score_reidentification(ranking, truth, alpha=ALPHA).metrics
    assert m["beats_floor"].mean == 0.0, m["top1"]
    assert m["top1"].mean < 0.2  # the unshuffled attack is far above this (previous test)


def test_observation_and_ranking_hold_no_truth(mails):
    public, texts, truth = mails
    assert {f.name for f in dataclasses.fields(ReleasedText)} == {"texts", "defense"}
    assert {f.name for f in dataclasses.fields(Ranking)} == {"candidates", "scores", "train_counts", "defense",
                                                             "config", "wall_time_s"}
    with pytest.raises(InvalidTypeError):  # no arrays or objects (keys, mappings) in the defense description
        ReleasedText(("a",), {"defense": "redaction", "key": np.zeros(3)})
    obs = observe_text(texts[:6])
    ranking = Reidentification(public=public, variant="plain", rng=0).run(obs)
    assert ranking.scores.shape == (6, 30) and not ranking.scores.flags.writeable
    assert dict(ranking.train_counts) == public.counts()
    # the candidates the ranking knows are the attacker's own (public); nothing per document but its scores
    assert set(ranking.candidates) == set(public.candidates)


def _slow_ranks(scores: np.ndarray, candidates: list[str], truth: list[str]) -> list[int]:
    out = []
    for row, t in zip(scores, truth):
        own = row[candidates.index(t)]
        out.append(sum(1 for s in row if s >= own))  # ties count against the attack
    return out


def test_ranks_and_metrics_against_a_slow_reference():
    g = np.random.default_rng(0)
    cands = [f"c{i}" for i in range(8)]
    scores = g.integers(0, 4, size=(40, 8)).astype(float)  # many ties
    truth = [cands[i] for i in g.integers(0, 8, size=40)]
    ranking = Ranking(tuple(cands), scores, {c: 1 + (c == "c3") * 4 for c in cands})
    ref = _slow_ranks(scores, cands, truth)
    assert ranking.ranks(truth).tolist() == ref
    m = score_reidentification(ranking, truth).metrics
    assert m["top1"].mean == pytest.approx(np.mean([r == 1 for r in ref]))
    assert m["top5"].mean == pytest.approx(np.mean([r <= 5 for r in ref]))
    assert m["mrr"].mean == pytest.approx(np.mean([1 / r for r in ref]))
    floors = reidentification_floors(ranking.train_counts, truth)
    assert floors == {"chance": 1 / 8, "majority": truth.count("c3") / 40}
    assert m["floor"].mean == max(floors.values())
    # the floors' own best guesses score exactly their floor
    always = Ranking(tuple(cands), np.tile([float(c == "c3") for c in cands], (40, 1)), ranking.train_counts)
    assert score_reidentification(always, truth).metrics["top1"].mean == floors["majority"]


def test_bonferroni_multiplies_the_p_value(mails):
    public, texts, truth = mails
    ranking = Reidentification(public=public, variant="plain", rng=0).run(observe_text(texts[:8]))
    one = score_reidentification(ranking, truth[:8]).metrics["p_top1"].mean
    two = score_reidentification(ranking, truth[:8], tests=2).metrics["p_top1"].mean
    assert two == pytest.approx(min(1.0, 2 * one))


def test_kerckhoffs_rebuilds_the_public_mechanism_with_its_own_key():
    from veil.defenses.redaction import PresidioRedaction

    owner = PresidioRedaction(operator="hash", entities=["PERSON", "EMAIL_ADDRESS"])
    mine = mechanism_for(observe_text(["x"], owner).defense, rng=1)
    assert {k: v for k, v in mine.config().items() if k != "secret_randomness"} == \
        {k: v for k, v in owner.config().items() if k != "secret_randomness"}
    text = ["Write to Alice Smith at alice.smith@example.com today."]
    assert owner.transform(text) != mine.transform(text)  # same spans, another key: other hashes
    assert mechanism_for({"defense": "none"}) is None
    with pytest.raises(InvalidParameterError, match="redactor="):
        mechanism_for({"defense": "metric-dp"})


def test_kerckhoffs_trains_on_redacted_public_texts():
    from veil.defenses.redaction import PresidioRedaction

    public = PublicTexts(("Alice Smith wrote this.", "Bob Jones wrote that."), ("a", "b"))
    owner = PresidioRedaction(operator="type", entities=["PERSON"])
    obs = observe_text(owner.transform(["Carol Brown wrote this."]), owner)
    k = Reidentification(public=public, variant="kerckhoffs", rng=0)
    assert k.training_texts(obs) == ["<PERSON> wrote this.", "<PERSON> wrote that."]
    assert Reidentification(public=public, variant="plain").training_texts(obs) == list(public.texts)
    assert k.training_texts(observe_text(["x"])) == list(public.texts)  # no defense observed: nothing to re-run


def test_validation():
    with pytest.raises(DataFormatError, match="fewer than two"):
        PublicTexts(("a", "b"), ("x", "x"))
    with pytest.raises(DataFormatError, match="one candidate per text"):
        PublicTexts(("a", "b"), ("x",))
    public = PublicTexts(("a a", "b b"), ("x", "y"))
    with pytest.raises(InvalidParameterError):
        Reidentification(public=public, variant="oracle")
    with pytest.raises(InvalidTypeError):
        Reidentification(public=("a", "b"))
    with pytest.raises(InvalidTypeError):
        Reidentification(public=public).run(["a a"])
    ranking = Reidentification(public=public, variant="plain", rng=0).run(observe_text(["a a", "b b"]))
    assert ranking.scores.shape == (2, 2)  # two candidates: both columns, not sklearn's one margin
    assert ranking.top(1) == [("x",), ("y",)]
    with pytest.raises(DataFormatError, match="closed-world"):
        ranking.ranks(["x", "z"])
