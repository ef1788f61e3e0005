"""Infilling on redacted text: it finds the placeholders the operator leaves, uses what the operator gives away
(a masked value's length, linked hashes), ranks candidates by veil's masked LM plus public frequency, and reads the
context: a name written out elsewhere in the text is ranked higher than frequency alone ranks it."""

from __future__ import annotations

import numpy as np
import pytest

from veil.attacks.text import ReleasedText
from veil.attacks.text.infilling import Infilling, find_slots, normalise
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

NAMES = ["Alice Walker", "Omar Haddad", "Chen Wei", "Maria Lopez", "Ivan Petrov", "Grace Hopper", "Tom Baker",
         "Nina Simone", "Kofi Annan", "Ada Lovelace", "Pablo Neruda", "Yuki Tanaka"]


def _release(texts, operator="type"):
    return ReleasedText(tuple(texts), {"defense": "redaction", "operator": operator})


def test_slots_follow_the_operator_and_pseudonyms_are_refused():
    obs = _release(["<PERSON> met <LOCATION> and <PERSON>.", "none here"])
    assert [(s.doc, s.start, s.entity) for s in find_slots(obs)] == [(0, 0, "PERSON"), (0, 13, "LOCATION"),
                                                                      (0, 28, "PERSON")]
    assert len(find_slots(obs, "PERSON")) == 2
    masked = find_slots(_release(["Hi ***** and ********* *"], "mask"))
    assert [s.text for s in masked] == ["*****", "*********"]
    h = "ab" * 32
    assert [s.text for s in find_slots(_release([f"x {h} y {h}"], "hash"))] == [h, h]
    with pytest.raises(InvalidParameterError, match="reidentify"):
        find_slots(_release(["Bob met Ann."], "pseudonym"))
    with pytest.raises(InvalidTypeError):
        find_slots(["<PERSON>"])


def test_the_prior_alone_ranks_by_public_frequency_and_ties_count_against_the_attack():
    atk = Infilling(["Ann Lee"] * 3 + ["Bo Chen"] * 2 + ["Cy Dorn", "Di Ek"], use_model=False)
    assert atk.values[:2] == ["Ann Lee", "Bo Chen"] and atk.index("  ann   LEE ") == 0
    obs = _release(["<PERSON> spoke.", "<PERSON> left."])
    slots = find_slots(obs)
    assert list(atk.rank(obs, slots, ["Ann Lee", "Di Ek"])) == [1, 4]  # Cy Dorn and Di Ek tie: rank 4
    assert list(atk.rank(obs, slots, ["Bo Chen", "Zed Unknown"])) == [2, 0]
    with pytest.raises(DataFormatError):
        atk.rank(obs, slots, ["Ann Lee"])


def test_mask_rules_out_every_candidate_of_another_length():
    atk = Infilling(["Ann Leeson"] * 5 + ["Bo Chen", "Cy Dornan"], use_model=False)
    obs = _release(["Then " + "*" * len("Bo Chen") + " left."], "mask")
    slots = find_slots(obs)
    sc = atk.scores(obs, slots)
    assert np.isneginf(sc[0, atk.index("Ann Leeson")]) and np.isneginf(sc[0, atk.index("Cy Dornan")])
    assert list(atk.rank(obs, slots, ["Bo Chen"])) == [1]  # the length alone gives it away here
    assert list(atk.rank(obs, slots, ["Ann Leeson"])) == [0]
    assert normalise(" Ann   Leeson") == "ann leeson"


def test_hash_pools_the_linked_mentions(quick_mlm):
    h1, h2 = "1f" * 32, "2e" * 32
    obs = _release([f"{h1} wrote a poem.", f"Later {h1} read it to {h2}."], "hash")
    atk = Infilling(NAMES, model=quick_mlm, max_pieces=4)
    slots = find_slots(obs)
    sc = atk.scores(obs, slots)
    linked = [i for i, s in enumerate(slots) if s.text == h1]
    assert len(linked) == 2 and np.allclose(sc[linked[0]], sc[linked[1]])
    assert not np.allclose(sc[linked[0]], sc[[i for i, s in enumerate(slots) if s.text == h2][0]])


def test_the_masked_lm_reads_the_context(quick_mlm):
    """A name written out earlier in the text is ranked far higher than frequency alone ranks it (all candidates
    are equally frequent here, so the prior ranks every one last: ties count against the attack; its mean
    reciprocal rank is 1/12). The masked LM is a weak copier of names (the full model puts 3 of these 12 first),
    so the test asks for twice the prior's MRR, not for top-1 hits."""
    texts = [f"Yesterday {n} gave a long speech in the hall. After the speech, <PERSON> answered questions."
             for n in NAMES]
    obs = _release(texts)
    slots = find_slots(obs)
    with_lm = Infilling(NAMES, model=quick_mlm, max_pieces=4).rank(obs, slots, NAMES)
    prior = Infilling(NAMES, use_model=False).rank(obs, slots, NAMES)
    assert (prior == len(NAMES)).all()
    assert (1.0 / with_lm).mean() >= 2.0 / len(NAMES), with_lm


def test_bad_arguments_are_typed_errors():
    with pytest.raises(InvalidParameterError):
        Infilling(["Ann"] * 3)
    with pytest.raises(InvalidTypeError):
        Infilling("Ann Lee")
    with pytest.raises(InvalidParameterError):
        Infilling(NAMES, use_model=False, prior=False)
    with pytest.raises(InvalidParameterError):
        Infilling(NAMES, use_model=False, weight=0)
