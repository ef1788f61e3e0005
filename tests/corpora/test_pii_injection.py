"""The PII-injection corpus: exact spans, reproducible draws, the counts and the hard-case variants."""

from __future__ import annotations

import re

import pytest

from veil.corpora.pii_injection import (COMMON_WORD_FIRST_NAMES, COMMON_WORD_SURNAMES, ENTITY_CLASSES,
                                        NON_ENGLISH_LOCALES, TEMPLATES, VARIANTS, _lower_first, build_injection)
from veil.errors import InvalidParameterError, InvalidTypeError


@pytest.fixture(scope="module")
def small(builtin):
    return build_injection(n_per_entity=12, seed=3, base=builtin("rt-polarity"))


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _iban_ok(iban: str) -> bool:
    s = iban.replace(" ", "")
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def test_spans_are_exact_and_one_per_text(small):
    assert len(small) == len(small.spans) == len(small.base_texts) == len(small.base_index)
    for text, spans, base in zip(small.texts, small.spans, small.base_texts):
        assert len(spans) == 1
        s = spans[0]
        assert text[s.start:s.end] == s.value and s.value.strip() == s.value
        template = TEMPLATES[s.entity][s.template]
        # the rest of the text is the template around the base sentence (possibly lower-cased first letter)
        rest = text[:s.start] + "{v}" + text[s.end:]
        assert rest == template.replace("{s}", base).replace("{sl}", _lower_first(base))
    assert len(set(small.base_index)) == len(small)  # each base sentence used once


def test_counts_per_class_and_variant(small):
    counts = small.counts()
    assert counts["PERSON"] == {v: 12 for v in VARIANTS["PERSON"]}
    for cls in ENTITY_CLASSES[1:]:
        assert sum(counts[cls].values()) == 12
        assert max(counts[cls].values()) - min(counts[cls].values()) <= 1
    assert len(small) == 12 * len(VARIANTS["PERSON"]) + 12 * (len(ENTITY_CLASSES) - 1)
    d = small.describe()
    assert d["n_values"] == len(small) and d["base"] == "rt-polarity" and d["counts"] == counts


def test_defaults_inject_at_least_2000_values():
    corpus = build_injection()
    assert len(corpus) == 3900 >= 2000
    assert all(v == 300 for v in corpus.counts()["PERSON"].values())


def test_reproducible_by_seed(builtin, small):
    again = build_injection(n_per_entity=12, seed=3, base=builtin("rt-polarity"))
    assert again.texts == small.texts and again.spans == small.spans
    other = build_injection(n_per_entity=12, seed=4, base=builtin("rt-polarity"))
    assert other.texts != small.texts


def test_hard_case_variants_are_what_they_say(small):
    firsts, lasts = set(COMMON_WORD_FIRST_NAMES), set(COMMON_WORD_SURNAMES)
    seen = set()
    for (s,) in small.spans:
        seen.add((s.entity, s.variant))
        v = s.value
        if s.entity != "PERSON":
            continue
        if s.variant == "allcaps":
            assert v.isupper()
        elif s.variant == "lowercase":
            assert v.islower()
        elif s.variant == "hyphenated":
            assert "-" in v and " " in v
        elif s.variant == "non_english":
            assert s.source in NON_ENGLISH_LOCALES
        elif s.variant == "common_word":
            first, last = v.split(" ")
            assert first in firsts and last in lasts
    assert seen == {(c, v) for c in ENTITY_CLASSES for v in VARIANTS[c]}


def test_common_word_names_come_from_public_name_lists():
    from faker.providers.person.en import Provider as En
    from faker.providers.person.en_US import Provider as EnUS

    first = set(En.first_names) | set(EnUS.first_names)
    last = set(EnUS.last_names) | set(En.last_names)
    assert [n for n in COMMON_WORD_FIRST_NAMES if n not in first] == []
    assert [n for n in COMMON_WORD_SURNAMES if n not in last] == []


def test_ids_are_valid(small):
    import phonenumbers

    for (s,) in small.spans:
        digits = re.sub(r"\D", "", s.value)
        if s.entity == "CREDIT_CARD":
            assert _luhn(digits), s.value
            assert {"plain": digits, "spaced": s.value.replace(" ", ""), "dashed": s.value.replace("-", "")}[
                s.variant] == digits
        elif s.entity == "IBAN_CODE":
            assert _iban_ok(s.value), s.value
        elif s.entity == "US_SSN":
            assert len(digits) == 9 and not digits.startswith(("000", "666")) and digits[3:5] != "00"
        elif s.entity == "PHONE_NUMBER":
            region = s.source.split("_")[-1]
            assert phonenumbers.is_valid_number(phonenumbers.parse(s.value, region)), s.value
            assert s.value.startswith("+") == (s.variant == "intl_plus") or s.variant == "us"
        elif s.entity == "EMAIL_ADDRESS":
            assert re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]+", s.value)


def test_lower_first():
    assert _lower_first("The movie is long.") == "the movie is long."
    assert _lower_first("The Last Kiss will never be popular.") == "The Last Kiss will never be popular."
    assert _lower_first("I liked it.") == "I liked it."
    assert _lower_first("IMAX is big.") == "IMAX is big."


def test_document_corpus_gives_its_sentences(builtin):
    news = builtin("news-articles")
    corpus = build_injection(n_per_entity=2, seed=0, base=news)
    sentences = {s for doc in news.documents for s in doc}
    assert all(b in sentences for b in corpus.base_texts)
    assert corpus.describe()["base"] == "news-articles"


def test_bad_arguments(builtin):
    with pytest.raises(InvalidParameterError):
        build_injection(n_per_entity=0)
    with pytest.raises(InvalidTypeError):
        build_injection(n_per_entity=2, base=42)
    with pytest.raises(InvalidParameterError, match="usable sentences"):
        build_injection(n_per_entity=5000, base=builtin("rt-polarity"))
