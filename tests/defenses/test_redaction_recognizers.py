"""The recognizers veil adds to Presidio (veil.defenses.redaction.recognizers): the hand-written values every
operator used to release verbatim are redacted on both spaCy pipelines; the SSN recognizer keeps what Presidio's
drops; sentences without an address or an ID stay untouched; Presidio's defaults alone remain available as the
baseline."""

from __future__ import annotations

import re

import pytest

from veil.defenses.redaction import Detector, PresidioRedaction, supported_entities
from veil.defenses.redaction.recognizers import EXTRA_ENTITIES, RedactingSsnRecognizer
from veil.errors import PrivacyLeakWarning, UnknownNameError

# the values of the 39 hand-written strings that survived every operator (sm; md: all but one), each in
# a sentence, and what must not survive of it
SURVIVORS = [
    ("Her SSN 123-45-6789 is on the form.", "123-45-6789"),
    ("He lives at 221B Baker Street, London.", "221B Baker Street"),
    ("The postcode is NW1 6XE, not NW1 5XE.", "NW1 6XE"),
    ("The shop is at 14 rue de Rivoli, near the Louvre.", "14 rue de Rivoli"),
    ("Send the parcel to via Roma 10, Milano.", "via Roma 10"),
    ("His codice fiscale is RSSGNN80A01H501U.", "RSSGNN80A01H501U"),
    ("She lives at ul. Marszałkowska 84/92 in Warsaw.", "ul. Marszałkowska 84/92"),
]


def _released(value: str, text: str) -> bool:
    """Whether any run of two or more of the value's letters and digits is still in the text."""
    parts = [p for p in re.split(r"[^\w]+", value) if len(p) >= 2]
    return any(re.search(rf"(?<!\w){re.escape(p)}(?!\w)", text) for p in parts)


@pytest.mark.parametrize("model", ["sm", "md"])
def test_the_values_that_survived_every_operator_are_redacted(model):
    texts = [t for t, _ in SURVIVORS]
    found = Detector(model=model).detect(texts)
    for operator in ("type", "mask", "hash", "pseudonym"):
        with pytest.warns(PrivacyLeakWarning):  # seeded: a surrogate digit group cannot match the real one by chance
            defense = PresidioRedaction(operator=operator, model=model, rng=0)
        out = defense.redact(texts, detections=found)
        for (text, value), red in zip(SURVIVORS, out):
            assert not _released(value, red.text), (model, operator, value, red.text)


@pytest.mark.parametrize("model", ["sm", "md"])
def test_presidio_alone_releases_them_the_baseline_the_additions_are_measured_against(model):
    texts = [t for t, _ in SURVIVORS]
    found = Detector(model=model, recognizers="presidio").detect(texts)
    out = PresidioRedaction(model=model).redact(texts, detections=found)
    assert sum(_released(v, r.text) for (_, v), r in zip(SURVIVORS, out)) == len(SURVIVORS)


def test_the_ssn_recognizer_keeps_what_presidio_drops_and_only_refuses_mixed_separators():
    from presidio_analyzer.predefined_recognizers import UsSsnRecognizer

    presidio, ours = UsSsnRecognizer(), RedactingSsnRecognizer()
    for number in ("123-45-6789", "078-05-1120", "000-12-3456", "666-12-3456", "123-00-4567", "123-45-0000",
                   "111-11-1111"):
        assert presidio.invalidate_result(number) and not ours.invalidate_result(number), number
    assert ours.invalidate_result("123-45.6789") and not ours.invalidate_result("536-22-8726")


@pytest.mark.parametrize("text", [
    "The movie came out in Spring 2012 and I saw it twice.",
    "It takes place Monday at the park.",
    "I flew via London to Rome with 2 friends.",
    "5 Easy Ways to sleep better, says the study.",
    "Engineering 101 starts at 9 in room B.",
    "You Haven't seen 4 Strange Things That happen.",
])
def test_sentences_without_an_address_or_an_id_get_none(text):
    assert not [d for d in Detector().detect([text])[0] if d.entity in EXTRA_ENTITIES], text


def test_the_entity_lists_name_the_additions_and_the_baseline_lacks_them():
    ours, theirs = set(supported_entities()), set(supported_entities("sm", "presidio"))
    assert set(EXTRA_ENTITIES) <= ours and not set(EXTRA_ENTITIES) & theirs and theirs < ours
    assert "STREET_ADDRESS" in Detector().config()["recognizers"]
    with pytest.raises(UnknownNameError, match="presidio"):
        Detector(recognizers="all")
    with pytest.raises(UnknownNameError, match="STREET_ADDRESS"):  # the baseline cannot be asked for them
        Detector(recognizers="presidio", entities=["STREET_ADDRESS"])
