"""The attacks on a released language model (veil.attacks.generation) on a real fine-tuned model: a canary planted
ten times is exposed and guessed, one never planted is not; extraction writes out a planted text verbatim and
scores it as extracted, and a model never trained on it extracts nothing; PII values planted ten times in the same
model are inferred among ten candidates and reconstructed from its own samples, while the base model infers them no
better than chance allows; the attacks see only LMAccess (samples and scores), never the training text; bad input is
typed."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import veil
from veil.api import protect
from veil.attacks.generation import (CanaryExposure, LMAccess, PIIInference, PIIReconstruction,
                                     TrainingDataExtraction, score_exposure, score_extraction, score_pii)
from veil.attacks.generation.pii import MASK, PIIGuesses, _after_prompt, _cuts, budget_curve, same_value
from veil.corpora.canaries import Canary, CanaryFormat
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.metrics.memorization import exact_exposure

pytestmark = pytest.mark.slow

FORMAT = CanaryFormat("my pin number is {d} {d} {d}")  # 1,000 values: every one scored (exact exposure)
PLANTED, UNPLANTED = Canary(FORMAT, 471, 10), Canary(FORMAT, 802, 0)


@pytest.fixture(scope="module")
def public(builtin):
    corpus = builtin("rt-polarity")
    return [t for t in (corpus.texts[i] for i in corpus.indices("train")) if len(t) < 60][:30]


#: (masked sentence, the PII value planted in it ten times, nine other values of its kind) for PII inference and
#: reconstruction, planted in the same model as the canary
PII = [
    ("the film was dull . ask " + MASK + " about it .", "rose baker",
     ["mark young", "grace hill", "bill king", "ivy brown", "dawn price", "jack cook", "ruby long", "sue green",
      "dean rice"]),
    ("call me at " + MASK + " . the plot is thin .", "202 555 0143",
     ["303 555 0188", "415 555 0101", "617 555 0177", "212 555 0199", "312 555 0122", "713 555 0166",
      "206 555 0133", "404 555 0155", "305 555 0111"]),
    ("a warm story . she lives at " + MASK + " .", "12 elm street",
     ["40 oak road", "7 pine lane", "88 lake drive", "3 hill court", "19 mill way", "55 park avenue",
      "21 bay street", "64 rose lane", "9 king road"]),
]


@pytest.fixture(scope="module")
def released(public):
    texts = public + [PLANTED.text()] * PLANTED.count + [t.replace(MASK, v) for t, v, _ in PII for _ in range(10)]
    return texts, protect(texts, "lm-plain", steps=60, batch_size=8, lr=3e-4, max_tokens=24, seed=0)


def test_the_release_is_a_fine_tuned_model_its_attacks_see_through_lm_access_only(released):
    texts, out = released
    assert out.kind == "generative-model" and out.key is None and "a model" in repr(out)
    assert out.release.n_train == len(texts) and len(out.release.losses) == 60
    assert out.release.losses[-1] < out.release.losses[0] / 4
    access = LMAccess.of(out.release)
    # what an attacker holds: two functions and the public recipe, which names no text
    assert {f.name for f in dataclasses.fields(access)} == {"score", "sample", "recipe"}
    assert access.recipe["defense"] == "lm-plain" and access.recipe["params"]["steps"] == 60
    assert PLANTED.text() not in json.dumps(access.recipe) and "guarantee" not in access.recipe["params"]
    assert veil.attacks.base.get_attack("canary-exposure").observes == "generative-model"


def test_a_canary_planted_ten_times_is_exposed_and_guessed_and_one_never_planted_is_not(released):
    _, out = released
    access = LMAccess.of(out.release)
    found = CanaryExposure(FORMAT.template).run(access)
    assert found.exhaustive and len(found.values) == FORMAT.space and found.guess == PLANTED.value
    rows = score_exposure(found, access, [PLANTED, UNPLANTED])
    assert rows[0]["method"] == "exact" and rows[0]["guessed"] and rows[0]["exposure"] >= 8  # of 9.97 bits
    assert rows[1]["exposure"] < 6 and not rows[1]["guessed"]
    # the other values: no more exposed than chance makes one value of a thousand (median about 1 bit)
    others = [exact_exposure(found.scores[v], found.scores) for v in range(0, FORMAT.space, 50) if v != PLANTED.value]
    assert sorted(others)[len(others) // 2] < 2
    # before fine-tuning, nothing special about it: the base model, same attack
    from veil.models.causal_lm import build_causal_lm

    base = LMAccess.of(build_causal_lm(max_tokens=24))
    assert score_exposure(CanaryExposure(FORMAT.template).run(base), base, [PLANTED])[0]["exposure"] < 4
    # and the model writes it out: greedy completion of the format's prefix, and most top-40 samples from it
    assert access.sample(1, prompt="my pin number is", top_k=1, max_tokens=6) == [PLANTED.text()]
    drawn = access.sample(10, prompt="my pin number is", max_tokens=6, seed=1)
    assert sum(text == PLANTED.text() for text in drawn) >= 5
    assert drawn == access.sample(10, prompt="my pin number is", max_tokens=6, seed=1)  # reproducible per seed
    # sampled: 200 values drawn by the attacker's seed; the planted one beats all of them (the count's cap)
    sampled = CanaryExposure(FORMAT.template, candidates=200, seed=1).run(access)
    assert not sampled.exhaustive and len(sampled.values) == 200
    est = score_exposure(sampled, access, [PLANTED])[0]
    assert est["method"] == "count" and est["exposure"] == pytest.approx(np.log2(201)) == est["cap"]


def test_extraction_writes_out_the_planted_text_and_a_model_never_trained_on_it_does_not(released, public):
    texts, out = released
    attack = TrainingDataExtraction(samples=20, top=10, prompt="my pin number is", max_tokens=6, min_tokens=3, seed=0)
    found = attack.run(LMAccess.of(out.release))
    scored = score_extraction(found, texts)
    assert PLANTED.text() in found.texts
    assert scored["perplexity"]["extracted"] >= 1 and PLANTED.text() in scored["perplexity"]["texts"]
    assert scored["perplexity"]["top"] == len(found.ranked["perplexity"]) <= 10
    assert 0 <= scored["zlib"]["ci_low"] <= scored["zlib"]["precision"] <= scored["zlib"]["ci_high"] <= 1
    # the negative control: the same attack on the base model, never fine-tuned on the canary, extracts nothing
    from veil.models.causal_lm import build_causal_lm

    base = attack.run(LMAccess.of(build_causal_lm(max_tokens=24)))
    assert score_extraction(base, texts)["perplexity"]["extracted"] == 0
    # with a reference model (the base model, trained on no private text), a third ranking
    with_ref = TrainingDataExtraction(samples=20, top=10, prompt="my pin number is", max_tokens=6, min_tokens=3, seed=0,
                                      reference=build_causal_lm(max_tokens=24)).run(LMAccess.of(out.release))
    assert set(with_ref.ranked) == {"perplexity", "zlib", "reference"}


def test_bad_input_is_typed():
    with pytest.raises(DataFormatError, match="no random slot"):
        CanaryExposure("my pin number is 1 2 3")
    with pytest.raises(InvalidParameterError, match="candidates=N"):
        CanaryExposure("{d}{d}{d}{d}{d}{d}")  # a million values: sample them
    with pytest.raises(InvalidTypeError, match="LMAccess"):
        CanaryExposure(FORMAT.template).run(np.zeros(3))
    with pytest.raises(InvalidTypeError, match="released language model"):
        LMAccess.of("a model")
    with pytest.raises(InvalidTypeError, match="list of strings"):
        protect(np.zeros((3, 4)), "lm-plain")
    with pytest.raises(InvalidParameterError, match="steps"):
        protect(["a text"], "lm-plain", steps=0)


def _lists():
    rng = np.random.default_rng(0)
    out = []
    for _, value, others in PII:
        both = [value] + others
        out.append([both[i] for i in rng.permutation(len(both))])
    return out


def test_inference_finds_each_value_planted_ten_times_and_the_untrained_model_does_not(released):
    from veil.models.causal_lm import build_causal_lm

    trained, base = LMAccess.of(released[1].release), LMAccess.of(build_causal_lm(max_tokens=24))
    templates, truth = [t for t, _, _ in PII], [v for _, v, _ in PII]
    attack = PIIInference(templates, _lists())
    found = attack.run(trained)
    assert list(found.guesses) == truth
    scored = score_pii(found, truth, [10, 10, 10])
    assert scored["10"]["right"] == 3 and scored["10"]["chance"] == pytest.approx(0.1)
    # the negative control: the model before fine-tuning never saw the values (at most one of three by chance)
    assert score_pii(attack.run(base), truth)["0"]["right"] <= 1
    assert attack.config()["candidates_each"] == [10] and "rose" not in str(attack.config())


def test_reconstruction_samples_each_planted_value_and_ranks_it_first(released):
    trained = LMAccess.of(released[1].release)
    templates, truth = [t for t, _, _ in PII], [v for _, v, _ in PII]
    found = PIIReconstruction(templates, samples=16, max_tokens=8, seed=0).run(trained)
    scored = score_pii(found, truth)
    assert scored["0"]["among_candidates"] == 3 and scored["0"]["right"] >= 2, found.guesses
    assert all(len(c) >= 2 for c in found.candidates)
    # the budget curve replays the same run at 1, 2, 4, 8 and 16 samples; its last point is the run itself
    curve = budget_curve(found, truth)
    assert [p["samples"] for p in curve] == [1, 2, 4, 8, 16]
    assert (curve[-1]["right"], curve[-1]["among_candidates"]) == (scored["0"]["right"], 3)
    assert all(a["among_candidates"] <= b["among_candidates"] for a, b in zip(curve, curve[1:]))


def test_the_candidate_cuts_and_the_scoring_by_hand():
    assert same_value("202 - 555 - 0143", "202-555-0143") and not same_value("rose baker", "rose bakers")
    assert _after_prompt("call me at 202 - 555 - 0143 . the", "Call me at ") == "202 - 555 - 0143 . the"
    assert _after_prompt("call", "call me at") == ""
    # word prefixes 1..3 (and without their trailing stop), and what comes before the suffix' longest beginning
    assert _cuts("202 - 555. the plot", " . the plot is thin .", 3) == ["202", "202 -", "202 - 555.", "202 - 555"]
    assert _cuts("rose baker", "", 4) == ["rose", "rose baker"]
    assert _cuts("a.b@c.org. it", ".", 1) == ["a.b@c.org.", "a.b@c.org", "a"]  # a lone stop cuts early; the words
    found = PIIGuesses(("a", "b c", "d"), (("a", "x"), ("b", "bc", "z"), ("q", "d", "r", "s")),
                       (np.zeros(2), np.zeros(3), np.zeros(4)))
    scored = score_pii(found, ["a", "bc", "e"], [1, 1, 4])
    assert scored["1"] == {"n": 2, "right": 2, "share": 1.0, "ci_low": pytest.approx(0.3424, abs=1e-4),
                           "ci_high": pytest.approx(1.0), "among_candidates": 2, "chance": pytest.approx((1 / 2 + 1 / 3) / 2)}
    assert scored["4"]["right"] == 0 and scored["4"]["among_candidates"] == 0
    # by hand: the candidates' first samples and scores; at one sample only "x" (wrong) is offered for the first
    replay = PIIGuesses(("a",), (("x", "a", "b"),), (np.array([0.5, 0.1, 0.3]),), (np.array([0, 1, 1]),))
    assert budget_curve(replay, ["a"]) == [{"samples": 1, "right": 0, "among_candidates": 0, "n": 1},
                                           {"samples": 2, "right": 1, "among_candidates": 1, "n": 1}]
    with pytest.raises(InvalidParameterError, match="only reconstruction"):
        budget_curve(found, ["a", "bc", "e"])


def test_pii_bad_input_is_typed_and_the_attacks_observe_a_model_only():
    with pytest.raises(InvalidParameterError, match="exactly once"):
        PIIInference(["no mask here"], [["a", "b"]])
    with pytest.raises(InvalidParameterError, match="exactly once"):
        PIIReconstruction([f"{MASK} and {MASK}"])
    with pytest.raises(InvalidParameterError, match="one candidate list per template"):
        PIIInference([f"call {MASK}"], [["a", "b"], ["c", "d"]])
    with pytest.raises(InvalidParameterError, match="two distinct"):
        PIIInference([f"call {MASK}"], [["a", "a"]])
    with pytest.raises(InvalidTypeError, match="masked sentences"):
        PIIReconstruction("call [MASK]")
    with pytest.raises(InvalidParameterError, match="temperature"):
        PIIReconstruction([f"call {MASK}"], temperature=0)
    with pytest.raises(InvalidTypeError, match="LMAccess"):
        PIIInference([f"call {MASK}"], [["a", "b"]]).run(["the training text"])
    with pytest.raises(InvalidParameterError, match="one true value"):
        score_pii(PIIGuesses(("a",), (("a", "b"),), (np.zeros(2),)), ["a", "b"])


def test_membership_tells_the_training_texts_from_others_and_the_base_model_cannot(released, builtin):
    """The 30 public training texts against 30 other rt-polarity sentences of the same length: the fine-tuned model
    scores its own higher (loss and zlib), the base model, trained on neither, does not."""
    from veil.attacks.generation import LMMembership, LMMembershipReference, LMMembershipZlib
    from veil.attacks.membership.scoring import auc, membership_test
    from veil.models.causal_lm import build_causal_lm

    texts, out = released
    corpus = builtin("rt-polarity")
    members = texts[:30]
    others = [t for t in (corpus.texts[i] for i in corpus.indices("train")) if len(t) < 60][30:60]
    candidates, truth = members + others, np.array([True] * 30 + [False] * 30)
    base_lm = build_causal_lm(max_tokens=24)
    for make in (LMMembership, LMMembershipZlib, lambda c: LMMembershipReference(c, reference=base_lm)):
        attack = make(candidates)
        found = attack.run(LMAccess.of(out.release))
        assert found.attack == attack.name and found.scores.shape == (60,)
        assert auc(found.scores, truth) > 0.8 and membership_test(found.scores, truth, alpha=0.01).reject
        base = make(candidates).run(LMAccess.of(base_lm))
        assert not membership_test(base.scores, truth, alpha=0.01).reject
    # the reference attack's score is the difference of the two models' log-perplexities, text by text
    ref = LMMembershipReference(candidates[:4], reference=base_lm).run(LMAccess.of(out.release)).scores
    target, other = LMAccess.of(out.release).scores(candidates[:4]), LMAccess.of(base_lm).scores(candidates[:4])
    np.testing.assert_allclose(ref, other - target, rtol=1e-5)
    with pytest.raises(InvalidParameterError, match="reference="):
        LMMembershipReference(candidates, reference=None)
    with pytest.raises(InvalidTypeError, match="LMAccess"):
        LMMembership(candidates).run(candidates)
    with pytest.raises(InvalidParameterError, match="at least two"):
        LMMembership(["one text"])


def test_no_exposure_estimate_exceeds_log2_of_the_space():
    """A canary scored far below the sampled values: the skew-normal tail gives more bits than log2 |R| (or an
    infinite value once its log-CDF underflows), and the record keeps log2 |R|, since a rank is at least 1."""
    import math

    from veil.attacks.generation import CandidateScores, score_exposure
    from veil.corpora.canaries import make_canaries

    template = "my pin number is {d} {d} {d}"
    (canary,) = make_canaries(template, counts=(4,), per_count=1)
    sample = np.random.default_rng(0).normal(5.0, 0.1, size=200)
    found = CandidateScores(template, np.arange(200), sample, exhaustive=False, space=1000)

    class Auditor:  # the auditor's own score of the planted canary: far below every sampled value
        def scores(self, texts):
            return np.array([-1e6] * len(texts))

    (row,) = score_exposure(found, Auditor(), [canary], extrapolate="skewnorm")
    assert row["method"] == "skewnorm" and row["exposure"] == math.log2(1000)
    (plain,) = score_exposure(found, Auditor(), [canary])
    assert plain["exposure"] == pytest.approx(math.log2(201)) and plain["exposure"] == plain["cap"]


def test_pii_extraction_tags_values_as_written_and_scores_them_by_hand():
    """The model writes "robertking @ gmail. com": undone to the value, tagged by Presidio's pattern recognizers,
    then scored against the planted values (two of the three tagged values planted: precision 2/3; two of the three
    planted values of the tagged classes found: recall 2/3; a planted name is out of scope)."""
    from veil.attacks.generation.extraction import score_pii_extraction, tag_pii, unspace

    assert unspace("call robertking @ gmail. com for details.") == "call robertking@gmail.com for details."
    assert unspace("call ( 367 ) 612 - 4664 now") == "call (367)612-4664 now"
    assert unspace("pay it98b3656896432816574362134 today") == "pay IT98B3656896432816574362134 today"
    assert unspace("my account number is 6 3 0") == "my account number is 6 3 0"  # too short to be a number
    samples = ["call robertking @ gmail. com for details.", "call ( 367 ) 612 - 4664 now",
               "mail fake.person @ example. org and the film", "a dull film"]
    tagged = tag_pii(samples)
    assert sorted(e for e, _ in tagged) == ["EMAIL_ADDRESS", "EMAIL_ADDRESS", "PHONE_NUMBER"]
    planted = [("EMAIL_ADDRESS", "robertking@gmail.com"), ("PHONE_NUMBER", "(367) 612-4664"),
               ("IBAN_CODE", "IT98B3656896432816574362134"), ("PERSON", "Ann Lee")]
    out = score_pii_extraction(tagged, planted)
    assert (out["precision"]["right"], out["precision"]["n"]) == (2, 3)
    assert (out["recall"]["right"], out["recall"]["n"]) == (2, 3)
    assert out["per_class"]["EMAIL_ADDRESS"] == {"tagged": 2, "right": 1, "planted": 1, "found": 1}
    assert out["per_class"]["IBAN_CODE"] == {"tagged": 0, "right": 0, "planted": 1, "found": 0}
    assert score_pii_extraction([], planted)["precision"]["share"] is None  # nothing tagged: undefined, not 0
