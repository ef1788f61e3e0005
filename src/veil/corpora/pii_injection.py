"""A PII-injection corpus: real sentences with synthetic PII inserted at known character spans (exact ground truth).

What a redactor must find has no gold annotation in veil's corpora, so this corpus makes one. Each text is one real
sentence of a built-in corpus (``rt-polarity`` by default: cased, one-sentence review snippets; a document corpus
such as ``news-articles`` gives its spaCy sentences) with ONE value inserted by a short natural template ("According
to {v}, ...", "... Call {v}.", "SSN: {v}. ..."), at the start or the end, so ``text[start:end] == value`` exactly.

Values are drawn from public lists: the pinned ``faker`` package, seeded with the experiment seed (an evaluation
set, not a release). Entity classes (the ground-truth names; which detector types count as a match is the scorer's
business, :mod:`veil.experiments.redaction.detection`) and their variants, the hard cases users report:

* ``PERSON``: ``plain`` (Faker en_US first name + surname, the U.S. Census / SSA lists), ``allcaps``,
  ``lowercase``, ``hyphenated`` (a double-barrelled surname or first name from the same lists), ``non_english``
  (Faker's de_DE, es_ES, fr_FR, it_IT, pl_PL, tr_TR, nl_NL, pt_BR, cs_CZ, sv_SE, fi_FI, hu_HU, ro_RO, yo_NG, sw,
  zu_ZA, en_IN names; Latin script only: the host text is English), ``common_word`` (a curated list of first names
  and surnames that are also English words, "Hope Baker", "Will Price", each one in Faker's name lists);
* ``EMAIL_ADDRESS``: ``free`` (free-mail domains), ``company`` (company domains of several locales);
* ``PHONE_NUMBER``: ``us`` (Faker en_US formats without extensions), ``intl_plus`` (other countries, international
  ``+`` form), ``intl_national`` (other countries, national form); only numbers valid in their country
  (libphonenumber's metadata, as Presidio's own recognizer reads them: real numbers are allocated ones);
* ``STREET_ADDRESS``: ``us``, ``intl`` (Faker ``street_address``);
* ``US_SSN``: ``dashed``, ``spaced``, ``plain`` (9 digits);
* ``CREDIT_CARD``: Luhn-valid Faker numbers (Visa, Mastercard incl. its 2-series, Amex, Discover, JCB, Diners,
  Maestro), ``plain``, ``spaced`` or ``dashed`` (groups of 4; Amex 4-6-5, Diners 4-6-4);
* ``IBAN_CODE``: checksum-valid Faker IBANs of several countries, ``compact`` or ``spaced`` in groups of 4;
* ``IP_ADDRESS``: ``v4``, ``v6``.

Counts: every PERSON variant gets ``n_per_entity`` values (the hard cases are the point); every other class gets
``n_per_entity`` values split evenly over its variants. Values are distinct within a variant; each base sentence is
used once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError, InvalidTypeError
from veil.validation import check_int

__all__ = ["InjectedSpan", "InjectionCorpus", "build_injection", "base_sentences", "ENTITY_CLASSES", "VARIANTS",
           "TEMPLATES", "COMMON_WORD_FIRST_NAMES", "COMMON_WORD_SURNAMES", "NON_ENGLISH_LOCALES"]

ENTITY_CLASSES = ("PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "STREET_ADDRESS", "US_SSN", "CREDIT_CARD", "IBAN_CODE",
                  "IP_ADDRESS")
VARIANTS: dict[str, tuple[str, ...]] = {
    "PERSON": ("plain", "allcaps", "lowercase", "hyphenated", "non_english", "common_word"),
    "EMAIL_ADDRESS": ("free", "company"),
    "PHONE_NUMBER": ("us", "intl_plus", "intl_national"),
    "STREET_ADDRESS": ("us", "intl"),
    "US_SSN": ("dashed", "spaced", "plain"),
    "CREDIT_CARD": ("plain", "spaced", "dashed"),
    "IBAN_CODE": ("compact", "spaced"),
    "IP_ADDRESS": ("v4", "v6"),
}
#: ``{s}``: the base sentence; ``{sl}``: it with its first letter lower-cased (after a lead-in); ``{v}``: the value
TEMPLATES: dict[str, tuple[str, ...]] = {
    "PERSON": ("{v} wrote: {s}", "According to {v}, {sl}", "{s} That is what {v} told me.", "{s} Ask {v} about it.",
               "Hi {v}, {sl}"),
    "EMAIL_ADDRESS": ("Email {v} for details. {s}", "{s} Write to {v}.", "{s} (contact: {v})",
                      "{s} Send it to {v} please."),
    "PHONE_NUMBER": ("{s} Call {v}.", "Call me at {v}. {s}", "{s} (phone: {v})", "{s} My number is {v}."),
    "STREET_ADDRESS": ("{s} She lives at {v}.", "Send it to {v}. {s}", "{s} (address: {v})", "{s} We met at {v}."),
    "US_SSN": ("{s} My SSN is {v}.", "SSN: {v}. {s}", "{s} (social security number {v})", "{s} Reference {v}."),
    "CREDIT_CARD": ("{s} Card number: {v}.", "Pay with {v}. {s}", "{s} (card {v})", "{s} Charge it to {v}."),
    "IBAN_CODE": ("{s} IBAN: {v}.", "Transfer it to {v}. {s}", "{s} (account {v})"),
    "IP_ADDRESS": ("{s} Logged from {v}.", "Server {v} is down. {s}", "{s} (IP address {v})"),
}
COMMON_WORD_FIRST_NAMES = (
    "Rose", "Hope", "Bill", "Will", "Mark", "Grace", "Faith", "Joy", "May", "June", "Summer", "Hunter", "Frank",
    "Jack", "Pat", "Sandy", "Dawn", "Iris", "Ivy", "Holly", "Amber", "Crystal", "Autumn", "April", "Drew", "Chase",
    "Lance", "Guy", "Art", "Rusty", "Penny", "Ruby", "Pearl", "Daisy", "Heather", "Lily", "Violet", "Destiny", "Ray",
    "Rich", "Grant", "Miles", "Dean", "Cliff", "Chuck", "Max", "Sue", "Carol", "Glen", "Clay", "Sky", "Star", "Robin",
    "Hazel", "Olive", "Sunny", "Ginger", "Angel", "Brook", "River", "Sage", "Cherry", "Candy", "Charity", "Patience",
    "Melody", "Harmony", "Page", "Reed", "Rock", "Royal", "Sterling", "Wade", "Buck", "Earl", "Misty")
COMMON_WORD_SURNAMES = (
    "Baker", "Cook", "Rich", "Young", "Black", "White", "Brown", "Green", "Long", "King", "Price", "Rice", "Hill",
    "Wood", "Stone", "Bush", "Fox", "Lane", "Little", "Bell", "Fisher", "Carpenter", "Hunter", "Miller", "Mason",
    "Cooper", "Rose", "Bishop", "Knight", "Moss", "Rivers", "Banks", "Snow", "Frost", "Day", "Church", "Wolf",
    "Sharp", "Strong", "Love", "Short", "Hall", "Ford", "Walker", "Parker", "Turner", "Ward", "Page", "Reed", "Gray",
    "Grant", "Park", "Marsh", "Lamb", "Bird", "Fields", "Brooks", "Wells", "Hardy", "Noble", "Savage", "Wise", "Bond",
    "Golden", "Cross", "Booth", "Pope", "Summers", "Case", "Bass", "Bean", "Burns", "Hale", "Nash", "Dean")
NON_ENGLISH_LOCALES = ("de_DE", "es_ES", "fr_FR", "it_IT", "pl_PL", "tr_TR", "nl_NL", "pt_BR", "cs_CZ", "sv_SE",
                       "fi_FI", "hu_HU", "ro_RO", "yo_NG", "sw", "zu_ZA", "en_IN")
_OTHER_LOCALES = ("en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pl_PL", "pt_BR")  # phones, addresses, IBANs
_SENTENCE = re.compile(r"^[A-Z][^\n]*[.!?]$")
_MIN_CHARS, _MAX_CHARS = 30, 200


@dataclass(frozen=True)
class InjectedSpan:
    """One inserted value: ``text[start:end] == value``; ``source`` says which Faker locale/list it came from."""

    start: int
    end: int
    entity: str
    value: str
    variant: str
    template: int
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "entity": self.entity, "value": self.value,
                "variant": self.variant, "template": self.template, "source": self.source}


@dataclass(frozen=True)
class InjectionCorpus:
    """Texts with one injected value each: ``spans[i]`` the values in ``texts[i]``, ``base_texts[i]`` the real
    sentence it was made from (index ``base_index[i]`` among the base corpus' sentences)."""

    texts: tuple[str, ...]
    spans: tuple[tuple[InjectedSpan, ...], ...]
    base_texts: tuple[str, ...]
    base_index: tuple[int, ...]
    base: str
    n_per_entity: int
    seed: int
    base_sentences: int

    def __len__(self) -> int:
        return len(self.texts)

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {c: {v: 0 for v in VARIANTS[c]} for c in ENTITY_CLASSES}
        for spans in self.spans:
            for s in spans:
                out[s.entity][s.variant] += 1
        return out

    def describe(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"base": self.base,
                "base_sentences": f"{self.base_sentences} usable texts of {self.base} (its sentences for a document "
                                  f"corpus; {_MIN_CHARS}-{_MAX_CHARS} characters, starting with a capital, ending "
                                  "with . ! or ?, one line), each used once",
                "values": f"faker {version('faker')}, seeded with the experiment seed; one value per text; phone "
                          f"numbers valid per phonenumbers {version('phonenumbers')}",
                "n_per_entity": self.n_per_entity, "seed": self.seed, "n_values": sum(len(s) for s in self.spans),
                "counts": self.counts(), "templates": {c: list(t) for c, t in TEMPLATES.items()},
                "person_variants": "each PERSON variant gets n_per_entity values; other classes split n_per_entity "
                                   "over their variants"}


def base_sentences(base: Any) -> tuple[Any, list[str]]:
    """``base`` (a built-in corpus name or a loaded :class:`~veil.corpora.base.Corpus`) and the sentences of it a
    value may be inserted into (one-sentence texts of 30-200 characters, capitalised and ended): (corpus, sentences).
    The planted corpus of :mod:`veil.corpora.planted` draws its host sentences here too."""
    import veil.corpora as vc
    from veil.corpora.base import Corpus

    if isinstance(base, str):
        corpus = vc.load(base)
    elif isinstance(base, Corpus):
        corpus = base
    else:
        raise InvalidTypeError(f"base must be a corpus name or a veil Corpus, not {type(base).__name__}")
    return corpus, _base_sentences(corpus)


def _base_sentences(corpus: Any) -> list[str]:
    items = ([s for doc in corpus.documents for s in doc] if corpus.documents is not None else list(corpus.texts))
    return [s for s in items if _MIN_CHARS <= len(s) <= _MAX_CHARS and _SENTENCE.match(s)]


def _lower_first(sentence: str) -> str:
    """The sentence after a lead-in: its first word lower-cased when that is safe ("The movie" -> "the movie"; "I",
    acronyms and title-like starts such as "The Last Kiss" keep their case)."""
    words = sentence.split(" ", 2)
    first = words[0]
    if (first in ("I", "I'm", "I've", "I'd", "I'll") or not first.isalpha() or not first[1:].islower()
            or (len(words) > 1 and not words[1][:1].islower())):
        return sentence
    return sentence[0].lower() + sentence[1:]


def _fill(template: str, value: str, sentence: str) -> tuple[str, int]:
    """The text of ``template`` and where ``{v}`` begins in it."""
    out, start = [], -1
    for piece in re.split(r"(\{v\}|\{s\}|\{sl\})", template):
        if piece == "{v}":
            start = sum(len(p) for p in out)
            out.append(value)
        elif piece == "{s}":
            out.append(sentence)
        elif piece == "{sl}":
            out.append(_lower_first(sentence))
        else:
            out.append(piece)
    return "".join(out), start


def _grouped(digits: str, sep: str, card: bool = False) -> str:
    """Groups of 4 (IBANs, 16-digit cards); 4-6-5 and 4-6-4 for 15- and 14-digit cards (Amex, Diners)."""
    if card and len(digits) in (14, 15):
        return sep.join((digits[:4], digits[4:10], digits[10:]))
    return sep.join(digits[i:i + 4] for i in range(0, len(digits), 4))


class _Values:
    """The value generators: one seeded Faker per locale, made on first use."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._fakers: dict[str, Any] = {}

    def faker(self, locale: str) -> Any:
        if locale not in self._fakers:
            from faker import Faker

            fk = Faker(locale)
            fk.seed_instance(int(self.rng.integers(2 ** 32)))
            self._fakers[locale] = fk
        return self._fakers[locale]

    def pick(self, items: tuple[str, ...]) -> str:
        return items[int(self.rng.integers(len(items)))]

    def person(self, variant: str) -> tuple[str, str]:
        us = self.faker("en_US")
        if variant in ("plain", "allcaps", "lowercase"):
            name = f"{us.first_name()} {us.last_name()}"
            return {"plain": name, "allcaps": name.upper(), "lowercase": name.lower()}[variant], "en_US"
        if variant == "hyphenated":
            if self.rng.random() < 0.5:
                return f"{us.first_name()} {us.last_name()}-{us.last_name()}", "en_US, double surname"
            firsts = us.first_name_female if self.rng.random() < 0.5 else us.first_name_male
            return f"{firsts()}-{firsts()} {us.last_name()}", "en_US, double first name"
        if variant == "non_english":
            loc = self.pick(NON_ENGLISH_LOCALES)
            fk = self.faker(loc)
            return f"{fk.first_name()} {fk.last_name()}", loc
        return f"{self.pick(COMMON_WORD_FIRST_NAMES)} {self.pick(COMMON_WORD_SURNAMES)}", "common-word list"

    def value(self, entity: str, variant: str) -> tuple[str, str]:
        if entity == "PERSON":
            return self.person(variant)
        us = self.faker("en_US")
        if entity == "EMAIL_ADDRESS":
            if variant == "free":
                return us.free_email(), "en_US free_email"
            loc = self.pick(("en_US", *_OTHER_LOCALES))
            return self.faker(loc).company_email(), f"{loc} company_email"
        if entity == "PHONE_NUMBER":  # source: the locale, whose country the number must be valid in
            if variant == "us":
                return us.phone_number(), "en_US"
            loc = self.pick(_OTHER_LOCALES)
            return self.faker(loc).phone_number(), loc
        if entity == "STREET_ADDRESS":
            loc = "en_US" if variant == "us" else self.pick(_OTHER_LOCALES)
            return " ".join(self.faker(loc).street_address().split()), loc
        if entity == "US_SSN":
            ssn = us.ssn()
            return {"dashed": ssn, "spaced": ssn.replace("-", " "), "plain": ssn.replace("-", "")}[variant], "en_US"
        if entity == "CREDIT_CARD":
            kind = self.pick(("visa16", "mastercard", "amex", "discover", "jcb16", "diners", "maestro"))
            number = us.credit_card_number(card_type=kind)
            return {"plain": number, "spaced": _grouped(number, " ", True),
                    "dashed": _grouped(number, "-", True)}[variant], kind
        if entity == "IBAN_CODE":
            loc = self.pick(_OTHER_LOCALES)
            iban = self.faker(loc).iban()
            return (iban if variant == "compact" else _grouped(iban, " ")), loc
        return (us.ipv4_public() if variant == "v4" else us.ipv6()), "faker"

    def draw(self, entity: str, variant: str, seen: set[str]) -> tuple[str, str]:
        for _ in range(1000):
            value, source = self.value(entity, variant)
            if value in seen or not _fits(entity, variant, value, source):
                continue
            seen.add(value)
            return value, source
        raise InvalidParameterError(f"could not draw enough distinct {entity} values of variant {variant!r}; "
                                    "use a smaller n_per_entity")


def _fits(entity: str, variant: str, value: str, source: str) -> bool:
    """Phone numbers: no extension ("555-123-4567x890", not a format this corpus is about), the form the variant
    asks for, and a valid number of the locale's country (libphonenumber: Faker draws digits at random, a real
    number is an allocated one, as a real card number passes Luhn)."""
    if entity != "PHONE_NUMBER":
        return True
    if "x" in value.lower():
        return False
    if variant == "intl_plus" and not value.startswith("+"):
        return False
    if variant == "intl_national" and value.startswith(("+", "00")):
        return False
    import phonenumbers

    try:
        return bool(phonenumbers.is_valid_number(phonenumbers.parse(value, source.split("_")[-1])))
    except phonenumbers.NumberParseException:
        return False


def _plan(n_per_entity: int) -> list[tuple[str, str]]:
    plan = []
    for entity in ENTITY_CLASSES:
        variants = VARIANTS[entity]
        if entity == "PERSON":
            plan += [(entity, v) for v in variants for _ in range(n_per_entity)]
        else:
            plan += [(entity, variants[i % len(variants)]) for i in range(n_per_entity)]
    return plan


def build_injection(n_per_entity: int = 300, seed: int = 0, base: Any = "rt-polarity") -> InjectionCorpus:
    """The injection corpus (module docstring): ``base`` a built-in corpus name or a loaded
    :class:`~veil.corpora.base.Corpus`; reproducible from ``seed`` (and the pinned faker)."""
    n_per_entity = check_int("n_per_entity", n_per_entity, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    corpus, pool = base_sentences(base)
    plan = _plan(n_per_entity)
    if len(pool) < len(plan):
        raise InvalidParameterError(f"{corpus.name} has {len(pool)} usable sentences, fewer than the {len(plan)} "
                                    "values to inject; use a smaller n_per_entity or a larger base corpus")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(pool), size=len(plan), replace=False)
    gen = _Values(rng)
    seen: dict[tuple[str, str], set[str]] = {}
    texts, spans = [], []
    for (entity, variant), idx in zip(plan, chosen):
        value, source = gen.draw(entity, variant, seen.setdefault((entity, variant), set()))
        tid = int(rng.integers(len(TEMPLATES[entity])))
        text, start = _fill(TEMPLATES[entity][tid], value, pool[int(idx)])
        span = InjectedSpan(start, start + len(value), entity, value, variant, tid, source)
        if text[span.start:span.end] != value:  # pragma: no cover - _fill's contract
            raise RuntimeError(f"injected span off for {value!r} in {text!r}")
        texts.append(text)
        spans.append((span,))
    return InjectionCorpus(tuple(texts), tuple(spans), tuple(pool[int(i)] for i in chosen),
                           tuple(int(i) for i in chosen), corpus.name, n_per_entity, seed, len(pool))
