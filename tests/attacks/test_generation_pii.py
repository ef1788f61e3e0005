"""PII inference and reconstruction (veil.attacks.generation.pii) on a real fine-tuned model: values planted ten
times are inferred among 100 candidates and reconstructed from the model's own samples, while the model before
fine-tuning infers them no better than chance allows; the candidate cuts and the scoring are checked by hand; the
attacks see only LMAccess; bad input is typed."""

from __future__ import annotations

import numpy as np
import pytest

from veil.api import protect
from veil.attacks.generation import LMAccess, PIIInference, PIIReconstruction, score_pii
from veil.attacks.generation.pii import MASK, PIIGuesses, _after_prompt, _cuts, budget_curve, same_value
from veil.errors import InvalidParameterError, InvalidTypeError

pytestmark = pytest.mark.slow

#: (masked sentence, the value planted in it ten times, nine other values of its kind)
PLANTED = [
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
def models(builtin):
    corpus = builtin("rt-polarity")
    public = [t for t in (corpus.texts[i] for i in corpus.indices("train")) if len(t) < 60][:30]
    texts = public + [t.replace(MASK, v) for t, v, _ in PLANTED for _ in range(10)]
    trained = protect(texts, "lm-plain", steps=60, batch_size=8, lr=3e-4, max_tokens=24, seed=0).release
    base = protect(public[:8], "lm-plain", steps=1, batch_size=8, lr=1e-9, max_tokens=24, seed=0).release
    return LMAccess.of(trained), LMAccess.of(base)


def _lists():
    rng = np.random.default_rng(0)
    out = []
    for _, value, others in PLANTED:
        both = [value] + others
        out.append([both[i] for i in rng.permutation(len(both))])
    return out


def test_inference_finds_each_value_planted_ten_times_and_the_untrained_model_does_not(models):
    trained, base = models
    templates, truth = [t for t, _, _ in PLANTED], [v for _, v, _ in PLANTED]
    attack = PIIInference(templates, _lists())
    found = attack.run(trained)
    assert list(found.guesses) == truth
    scored = score_pii(found, truth, [10, 10, 10])
    assert scored["10"]["right"] == 3 and scored["10"]["chance"] == pytest.approx(0.1)
    # the negative control: the model before fine-tuning never saw the values (at most one of three by chance)
    assert score_pii(attack.run(base), truth)["0"]["right"] <= 1
    assert attack.config()["candidates_each"] == [10] and "rose" not in str(attack.config())


def test_reconstruction_samples_each_planted_value_and_ranks_it_first(models):
    trained, _ = models
    templates, truth = [t for t, _, _ in PLANTED], [v for _, v, _ in PLANTED]
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


def test_bad_input_is_typed_and_the_attacks_observe_a_model_only():
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
