"""PII redaction with Microsoft Presidio: the defense practitioners deploy (release kind ``text``).

The owner runs Presidio's analyzer (:class:`~veil.defenses.redaction.engine.Detector`: offline, on veil's spaCy
``sm`` or ``md``) on each text and Presidio's anonymizer on what it found, with one operator:

* ``type``: each detected span becomes ``<ENTITY>`` (Presidio's ``replace``; the most common setting);
* ``mask``: each character of the span becomes ``*`` (Presidio's ``mask``: the span's length is released);
* ``hash``: each span becomes ``sha256(value || key)`` in hex (Presidio's ``hash`` with the secret key as its salt:
  a keyed hash; equal values give equal hashes within a release, so mentions stay linkable, and without the key
  no dictionary of names can be hashed to match them); the 32-byte key comes from the OS CSPRNG and is never
  written or logged;
* ``pseudonym``: consistent surrogates (:class:`~veil.defenses.redaction.surrogates.Pseudonymizer`, through
  Presidio's ``custom`` operator): the same real value gets the same surrogate within one text
  (``scope="document"``) or within everything this defense releases (``scope="release"``).

What it guarantees: nothing formal. A span Presidio misses is released verbatim, and everything around a redacted
span (the context, the writing style, the length under ``mask``) is released too; veil's attacks on ``text``
measure how much that gives away.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from veil.defenses.base import Guarantee, TextDefense
from veil.defenses.redaction.engine import MODELS, Detection, Detector
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, UnknownNameError
from veil.validation import check_rng

__all__ = ["PresidioRedaction", "Redacted", "RedactedSpan", "OPERATORS", "SCOPES"]

#: the operators (Presidio's replace, mask, hash, and veil's consistent pseudonyms through its custom operator)
OPERATORS = ("type", "mask", "hash", "pseudonym")
SCOPES = ("document", "release")


@dataclass(frozen=True)
class RedactedSpan:
    """One redacted span: where it was in the original text, what it was, and where its replacement is."""

    start: int
    end: int
    entity: str
    value: str
    new_start: int
    new_end: int

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "entity": self.entity, "value": self.value,
                "new_start": self.new_start, "new_end": self.new_end}


@dataclass(frozen=True)
class Redacted:
    """The owner's view of one redacted text: the released ``text`` and the spans it replaced (private: the
    ``value`` of each span is the original)."""

    text: str
    spans: tuple[RedactedSpan, ...]


def _join_spaced(text: str, spans: Sequence[Detection]) -> list[Detection]:
    """Detections of the same entity separated only by spaces, joined (Presidio's anonymizer does the same by
    default, ``merge_entities_with_spaces``): "John" + "Smith" become one "John Smith" span."""
    import re

    out: list[Detection] = []
    for d in spans:
        if out and out[-1].entity == d.entity and re.fullmatch(r" +", text[out[-1].end:d.start]):
            last = out.pop()
            d = Detection(last.start, d.end, d.entity, max(last.score, d.score))
        out.append(d)
    return out


class PresidioRedaction(TextDefense):
    """Redact PII with Presidio (see the module docstring).

    Parameters (keyword-only)
    -------------------------
    operator: one of :data:`OPERATORS` (default ``type``).
    entities: Presidio entity types to redact (None: every type the analyzer supports, Presidio's default).
    model: ``sm`` (default) or ``md``: the spaCy pipeline behind the NER recognizer.
    threshold: drop detections scoring below it (0: Presidio's default, every detection).
    scope: ``document`` or ``release``, the scope in which pseudonyms are consistent (``release`` needs
    ``operator="pseudonym"``: with another operator it would be ignored, so it is refused).
    rng: None (OS CSPRNG: the hash key and the pseudonyms; the default) or an int seed (experiments only; warns).
    """

    name = "redaction"
    citation = "Microsoft Presidio (presidio-analyzer / presidio-anonymizer 2.2.366), the PII redactor in wide use"
    guarantee = Guarantee("none", "heuristic (no formal guarantee): removes the spans Presidio detects; missed spans "
                          "and everything around the redacted ones are released")
    tasks: ClassVar[tuple[str, ...]] = ("document-classification",)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """Each operator (quick: the two most deployed, entity types and consistent pseudonyms)."""
        return [{"operator": op} for op in (("type", "pseudonym") if quick else OPERATORS)]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "PresidioRedaction":
        """Presidio's default entities on spaCy sm; pseudonyms consistent over the whole release (the bench releases
        a corpus sentence by sentence); ``rng`` None: OS CSPRNG key and surrogates."""
        operator = str(setting["operator"])
        return cls(operator=operator, scope="release" if operator == "pseudonym" else "document", rng=rng)

    def __init__(self, *, operator: str = "type", entities: Sequence[str] | None = None, model: str = "sm",
                 threshold: float = 0.0, scope: str = "document", rng: Any = None) -> None:
        if operator not in OPERATORS:
            raise UnknownNameError("redaction operator", str(operator), OPERATORS)
        if scope not in SCOPES:
            raise UnknownNameError("pseudonym scope", str(scope), SCOPES)
        if scope != "document" and operator != "pseudonym":
            raise InvalidParameterError(f"scope={scope!r} sets where pseudonyms are consistent: it needs "
                                        f"operator='pseudonym' (the {operator!r} operator keeps no mapping); leave "
                                        "scope out, or use operator='pseudonym'")
        if model not in MODELS:
            raise UnknownNameError("spaCy model for redaction", str(model), MODELS)
        check_rng(rng)
        self.operator, self.scope = operator, scope
        self.detector = Detector(model=model, entities=entities, threshold=threshold)
        self._seeded = rng is not None
        if rng is not None:
            import warnings

            import numpy as np

            from veil.errors import PrivacyLeakWarning

            warnings.warn("PresidioRedaction with a seeded rng: its hash key and pseudonyms are reproducible by "
                          "anyone who knows the seed; use rng=None for releases", PrivacyLeakWarning, stacklevel=2)
            gen = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
            self._key = gen.bytes(32)
        else:
            gen = None
            self._key = os.urandom(32)
        from veil.defenses.redaction.surrogates import Pseudonymizer

        self._pseudonyms = Pseudonymizer(gen) if operator == "pseudonym" else None

    def __repr__(self) -> str:
        return f"PresidioRedaction(operator={self.operator!r}, model={self.detector.model!r})"

    def config(self) -> dict[str, Any]:
        out = {**super().config(), "operator": self.operator, **self.detector.config(),
               "secret_randomness": "seeded (not private)" if self._seeded else "os-entropy"}
        if self.operator == "pseudonym":
            out["scope"] = self.scope
            out["surrogates"] = "Faker en_US first names and surnames (pinned faker), drawn uniformly"
        if self.operator == "hash":
            out["hash"] = "sha256(value || 32-byte secret key), hex (Presidio's hash operator)"
        return out

    # ------------------------------------------------------------ the release
    def _operators(self) -> dict[str, Any]:
        from presidio_anonymizer.entities import OperatorConfig

        if self.operator == "type":
            return {"DEFAULT": OperatorConfig("replace")}
        if self.operator == "mask":
            return {"DEFAULT": OperatorConfig("mask", {"masking_char": "*", "chars_to_mask": 10 ** 9,
                                                        "from_end": False})}
        if self.operator == "hash":
            return {"DEFAULT": OperatorConfig("hash", {"hash_type": "sha256", "salt": self._key})}
        return {}  # pseudonym: one custom operator per entity type (the lambda must know the type)

    def redact(self, texts: Sequence[str], detections: Sequence[Sequence[Detection]] | None = None, *,
               progress: bool = False) -> list[Redacted]:
        """The owner's view: each text redacted, with its spans (``detections``: reuse an earlier
        :meth:`Detector.detect` of the same texts, e.g. to apply several operators to one analysis)."""
        from presidio_anonymizer import AnonymizerEngine
        from presidio_anonymizer.entities import OperatorConfig, RecognizerResult

        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
            raise InvalidTypeError("texts must be a list of strings (pass [text] for one text)")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise DataFormatError(f"texts[{i}] is a {type(t).__name__}, not a str")
        found = self.detector.detect(texts, progress=progress) if detections is None else detections
        if len(found) != len(texts):
            raise InvalidParameterError(f"detections has {len(found)} entries for {len(texts)} texts")
        engine = AnonymizerEngine()
        base = self._operators()
        if self.operator == "pseudonym" and self.scope == "release":  # no surrogate is a real name of the release
            self._pseudonyms.reserve(t[d.start:d.end] for t, spans in zip(texts, found) for d in spans)
        out = []
        for text, spans in zip(texts, found):
            if not spans:
                out.append(Redacted(text, ()))
                continue
            if self.operator == "pseudonym":
                if self.scope == "document":
                    self._pseudonyms.reset()
                    self._pseudonyms.reserve(text[d.start:d.end] for d in spans)
                ops = {e: OperatorConfig("custom", {"lambda": (lambda v, e=e: self._pseudonyms(e, v))})
                       for e in {s.entity for s in spans}}
            else:
                ops = base
            spans = _join_spaced(text, spans)  # what Presidio's anonymizer would merge, merged first: spans <-> items
            results = [RecognizerResult(s.entity, s.start, s.end, s.score) for s in spans]
            done = engine.anonymize(text=text, analyzer_results=results, operators=ops)
            items = sorted(done.items, key=lambda it: it.start)
            if len(items) != len(spans):  # pragma: no cover - a change in Presidio's merging rules
                raise RuntimeError(f"Presidio's anonymizer replaced {len(items)} spans for {len(spans)} detections; "
                                   "veil's span record would not line up (please report this with the text)")
            red = tuple(RedactedSpan(s.start, s.end, s.entity, text[s.start:s.end], it.start, it.end)
                        for s, it in zip(spans, items))
            out.append(Redacted(done.text, red))
        return out

    def transform(self, texts: Sequence[str]) -> list[str]:
        """The release verb of a text defense: the redacted texts."""
        return [r.text for r in self.redact(texts)]
