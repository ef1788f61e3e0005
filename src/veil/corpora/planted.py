"""A private corpus with planted secrets, to train a language model on and measure what it memorises (issue 52).

Built from a real corpus' sentences (``rt-polarity`` by default), split once with ``seed`` into:

* **held-out** texts (``n_heldout``), untouched: the model's utility is its perplexity on them;
* **training** texts: the other sentences (at most ``n_train``), plus every planted copy, shuffled together;
* **public** texts: with ``n_train`` set, the sentences left over (in neither of the two above), which an attacker
  may hold without holding any private text: its reference model trains on them.

Two kinds of secret are planted, each at controlled insertion counts (``counts``, default 1, 2, 4, 8 and 16 copies:
memorisation grows with duplication, and the count is what exposure and extraction are read against):

* **PII** (Lukas et al. 2023): ``pii_per_count`` values of each entity class in ``entities`` per count, drawn as the
  PII-injection corpus draws them (:mod:`veil.corpora.pii_injection`: the pinned Faker, seeded; phone numbers
  valid in their country). A value planted ``c`` times is inserted into ``c`` different host sentences by the
  injection corpus' own templates ("... Call {v}.", "Email {v} for details. ..."), so ``c`` training texts hold it;
* **canaries** (Carlini et al. 2019): ``canaries_per_count`` canaries of ``canary_format`` per count
  (:func:`veil.corpora.canaries.make_canaries`: secrets from the OS CSPRNG, so the canaries are fresh on every build
  and only the auditor holding the :class:`PlantedCorpus` knows them), each inserted ``c`` times as its own text.

Everything but the canaries' secrets is reproducible from ``seed``. The corpus' repr and :meth:`describe` never
show a planted value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.corpora.canaries import Canary, CanaryFormat, make_canaries
from veil.errors import DataFormatError, InvalidParameterError
from veil.validation import check_int

__all__ = ["PlantedPII", "PlantedCorpus", "build_planted", "DEFAULT_CANARY", "DEFAULT_ENTITIES"]

#: the canary format planted by default: six random digits (a space of a million values)
DEFAULT_CANARY = "my account number is {d} {d} {d} {d} {d} {d}"
#: the PII classes planted by default (the injection corpus' classes a language model writes as words)
DEFAULT_ENTITIES = ("PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "STREET_ADDRESS", "IBAN_CODE")


@dataclass(frozen=True, repr=False)
class PlantedPII:
    """One planted PII value: its ``entity`` class and ``variant``, the ``value``, and how many training texts hold
    it (``count``)."""

    entity: str
    variant: str
    value: str
    count: int

    def __repr__(self) -> str:
        return f"PlantedPII({self.entity}/{self.variant}, count={self.count}, value=hidden)"


@dataclass(frozen=True, repr=False)
class PlantedCorpus:
    """The training and held-out texts and what was planted in the training texts (module docstring)."""

    train: tuple[str, ...]
    heldout: tuple[str, ...]
    pii: tuple[PlantedPII, ...]
    canaries: tuple[Canary, ...]
    base: str
    counts: tuple[int, ...]
    seed: int
    #: the base sentences this corpus left out of both its training and held-out texts (none when ``n_train`` is
    #: None: every one is trained on): public text, for an attacker's reference model
    public: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (f"PlantedCorpus({self.base}: {len(self.train):,} training texts, {len(self.heldout):,} held out; "
                f"{len(self.pii)} PII values and {len(self.canaries)} canaries planted, counts {list(self.counts)})")

    def describe(self) -> dict[str, Any]:
        """What the corpus is, without any planted value: sizes, words, and what was planted at each count."""
        planted_texts = sum(p.count for p in self.pii) + sum(c.count for c in self.canaries)
        return {"base": self.base, "seed": self.seed, "counts": list(self.counts),
                "train_texts": len(self.train), "heldout_texts": len(self.heldout),
                "train_words": sum(len(t.split()) for t in self.train),
                "heldout_words": sum(len(t.split()) for t in self.heldout),
                "planted_texts": planted_texts,
                "pii": {str(c): sorted({p.entity for p in self.pii if p.count == c}) for c in self.counts},
                "pii_per_count": {str(c): sum(p.count == c for p in self.pii) for c in self.counts},
                "canaries_per_count": {str(c): sum(k.count == c for k in self.canaries) for c in self.counts},
                "canary_format": self.canaries[0].format.template if self.canaries else None}


def _counts(counts: Any) -> tuple[int, ...]:
    out = tuple(counts) if isinstance(counts, (list, tuple)) else None
    if not out or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1 for c in out):
        raise InvalidParameterError(f"counts must be insertion counts >= 1, e.g. (1, 2, 4, 8, 16); got {counts!r}")
    if len(set(out)) != len(out):
        raise InvalidParameterError(f"counts must be distinct, got {counts!r}")
    return tuple(int(c) for c in out)


def build_planted(base: Any = "rt-polarity", *, counts: Any = (1, 2, 4, 8, 16), pii_per_count: int = 4,
                  entities: Any = DEFAULT_ENTITIES, canary_format: str = DEFAULT_CANARY, canaries_per_count: int = 10,
                  n_heldout: int = 500, n_train: int | None = None, seed: int = 0,
                  canaries: Any = None) -> PlantedCorpus:
    """The planted corpus (module docstring). ``base``: a built-in corpus name or a loaded
    :class:`~veil.corpora.base.Corpus`; ``pii_per_count`` or ``canaries_per_count`` 0 plants none of that kind.
    ``canaries``: the canaries to plant instead of fresh ones (a resumed run's, which the auditor kept): as many of
    ``canary_format`` at each count as ``canaries_per_count`` asks, so the same call builds the same corpus."""
    from veil.corpora.pii_injection import ENTITY_CLASSES, TEMPLATES, VARIANTS, _fill, _Values, base_sentences

    counts = _counts(counts)
    pii_per_count = check_int("pii_per_count", pii_per_count, minimum=0)
    canaries_per_count = check_int("canaries_per_count", canaries_per_count, minimum=0)
    n_heldout = check_int("n_heldout", n_heldout, minimum=1)
    if n_train is not None:
        n_train = check_int("n_train", n_train, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    entities = tuple(entities) if isinstance(entities, (list, tuple)) else None
    if entities is None or any(e not in ENTITY_CLASSES for e in entities):
        raise InvalidParameterError(f"entities must be a list of the injection corpus' classes "
                                    f"({', '.join(ENTITY_CLASSES)}); got {entities!r}")
    fmt = CanaryFormat(canary_format)  # a format without randomness is refused here, before any work
    corpus, pool = base_sentences(base)
    hosts_needed = pii_per_count * len(entities) * sum(counts)
    if len(pool) < n_heldout + hosts_needed + 1:
        raise DataFormatError(f"{corpus.name} has {len(pool):,} usable sentences: too few for {n_heldout:,} held out, "
                              f"{hosts_needed:,} host sentences for the PII copies and some plain training text; "
                              "lower n_heldout or pii_per_count, or use a larger base corpus")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pool))
    heldout = tuple(pool[i] for i in order[:n_heldout])
    hosts = iter(pool[i] for i in order[n_heldout:n_heldout + hosts_needed])
    plain = [pool[i] for i in order[n_heldout + hosts_needed:]]
    left: list[str] = []
    if n_train is not None:
        plain, left = plain[:n_train], plain[n_train:]
    planted_texts: list[str] = []
    pii: list[PlantedPII] = []
    values = _Values(rng)
    seen: dict[tuple[str, str], set[str]] = {}
    for count in counts:
        for entity in entities:
            for i in range(pii_per_count):
                variant = VARIANTS[entity][i % len(VARIANTS[entity])]
                value, _ = values.draw(entity, variant, seen.setdefault((entity, variant), set()))
                for _ in range(count):
                    template = TEMPLATES[entity][int(rng.integers(len(TEMPLATES[entity])))]
                    planted_texts.append(_fill(template, value, next(hosts))[0])
                pii.append(PlantedPII(entity, variant, value, count))
    if canaries is None:
        canaries = make_canaries(fmt.template, counts, canaries_per_count) if canaries_per_count else []
    else:
        canaries = _given(canaries, fmt, counts, canaries_per_count)
    for canary in canaries:
        planted_texts += [canary.text()] * canary.count
    train = plain + planted_texts
    train = [train[i] for i in rng.permutation(len(train))]
    used = set(train) | set(heldout)  # a sentence the base corpus holds twice may be both trained on and left
    public = tuple(t for t in left if t not in used)
    return PlantedCorpus(tuple(train), heldout, tuple(pii), tuple(canaries), corpus.name, counts, seed, public)


def _given(canaries: Any, fmt: CanaryFormat, counts: tuple[int, ...], per_count: int) -> list[Canary]:
    out = list(canaries) if isinstance(canaries, (list, tuple)) else None
    if out is None or not all(isinstance(c, Canary) for c in out):
        raise InvalidParameterError("canaries must be a list of veil.corpora.canaries.Canary (the ones planted before)")
    if any(c.format != fmt for c in out) or len({c.value for c in out}) != len(out):
        raise InvalidParameterError(f"every given canary must be of the format {fmt.template!r}, each value distinct")
    if sorted(c.count for c in out) != sorted(c for c in counts for _ in range(per_count)):
        raise InvalidParameterError(f"give {per_count} canaries at each count of {list(counts)}, as planted before")
    return out
