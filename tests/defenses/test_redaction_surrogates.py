"""Pseudonyms of a span typed PERSON that also holds digits (overlapping detections merged into one, e.g. a
street name and its house number tagged as a name by spaCy): the digits are replaced too, consistently."""

from __future__ import annotations

import re

from veil.defenses.redaction.surrogates import Pseudonymizer


def test_digits_inside_a_person_span_are_never_kept():
    p = Pseudonymizer(rng=0)
    value = "ul. Marszałkowska 84/92"
    out = p("PERSON", value)
    assert not re.search(r"(?<!\d)(84|92)(?!\d)", out) and "Marszałkowska" not in out, out
    assert re.fullmatch(r"\w+\. \w+ \d\d/\d\d", out), out  # the shape is kept
    assert p("PERSON", value) == out  # consistent within the scope
    name = p("PERSON", "John Smith")
    assert name.count(" ") == 1 and not re.search(r"\d", name)
