"""veil.attacks.audit.rewriting: DP-MLM's empirical epsilon lower bound, per word piece. The mechanism stays within
its claim, and its negative control (no clipping) is caught: its bound exceeds its claim."""

from __future__ import annotations

import warnings

import pytest

from veil.attacks.audit.rewriting import audit_dp_mlm, dp_mlm_pairs
from veil.defenses.rewriting.dp_mlm import DPMLM
from veil.errors import DataFormatError, InvalidTypeError, PrivacyLeakWarning

PUBLIC = ["a gorgeous , witty , seductive movie .", "the story is too predictable to be moving .",
          "an utterly incompetent conclusion .", "it is a charming and often affecting journey ."]
AUDITED = ["the film is funny and smart .", "a dull , plodding picture .", "the story is bright and kind .",
           "the cast is good and warm ."]
EPS = 2.0
SIZE = {"trials": 200_000, "selection_trials": 50_000, "replacements": 3, "keep": 2}


@pytest.fixture(scope="module")
def clip(quick_mlm):
    from veil.defenses.rewriting.dp_mlm import clip_bounds

    return clip_bounds(quick_mlm, PUBLIC)


def test_dp_mlm_stays_within_its_claim(quick_mlm, clip):
    out = audit_dp_mlm(DPMLM(epsilon=EPS, mlm=quick_mlm, clip=clip), AUDITED, **SIZE)
    assert out["claimed_epsilon"] == EPS and out["unit"] == "word piece"
    assert 0.0 <= out["epsilon_lower_bound"] <= out["realized_epsilon"] <= EPS and not out["violation"]
    assert out["pair"]["x"] != out["pair"]["x2"] and out["n_x"] == SIZE["trials"]


def test_the_greedy_control_is_caught(quick_mlm, clip):
    from veil.controls import make_control

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        broken = make_control("dp-mlm-broken-greedy", epsilon=EPS, mlm=quick_mlm, clip=clip)
    out = audit_dp_mlm(broken, AUDITED, **SIZE)
    assert out["violation"] and out["epsilon_lower_bound"] > EPS


def test_bad_input_is_refused(quick_mlm, clip):
    mech = DPMLM(epsilon=EPS, mlm=quick_mlm, clip=clip)
    with pytest.raises(InvalidTypeError, match="DPMLM"):
        dp_mlm_pairs(object(), AUDITED)
    with pytest.raises(DataFormatError, match="public sentences"):
        dp_mlm_pairs(mech, [])
    with pytest.raises(DataFormatError, match="word piece"):
        dp_mlm_pairs(mech, ["", "  "])
