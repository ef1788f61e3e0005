"""Training-data extraction (Carlini et al. 2021, *Extracting Training Data from Large Language Models*, Sec. 4-5)
against a released language model.

The attack draws ``samples`` texts from the model (top-k sampling at a temperature, each at least ``min_tokens``
word pieces long, after an optional prompt), drops repeats, and ranks what is left by how much the model prefers it,
three ways (the paper's membership metrics): its log-perplexity (lower first), its zlib ratio (the log-perplexity
over the text's zlib entropy in bits: likely for the model yet not merely repetitive;
:func:`veil.metrics.memorization.zlib_ratio`) and, given a ``reference`` model trained on public text only, the
ratio of the two models' log-perplexities (likelier under the released model than a model that never saw the
private text predicts). It never reads the training text.

Scoring holds the truth (:func:`score_extraction`): a sample counts as extracted when it has at least
``min_words`` words and occurs verbatim in one training text, compared lowercased with whitespace collapsed (veil's
causal LM writes lowercase word pieces, as MiniLM's uncased vocabulary does). The precision of each ranking's top
``top`` samples is reported with its Wilson interval, with the extracted texts.

**PII extraction** (Lukas et al. 2023, Sec. 4): the attacker tags the PII its samples contain and keeps each
distinct value (:func:`tag_pii`). veil's causal LM writes lowercase word pieces with spaces around punctuation
("ann @ example. org"), so the spacing inside e-mail addresses, phone numbers and IBANs is undone first
(:func:`unspace`) and Presidio's pattern recognizers tag those three classes (:data:`TAGGED`); names and street
addresses need a NER model that reads case, which these samples lack, so they are not tagged. The scorer
(:func:`score_pii_extraction`) counts the tagged values that are a planted value of their class: precision over the
tagged values, recall over the planted ones of the tagged classes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["TrainingDataExtraction", "Extracted", "score_extraction", "RANKINGS", "TAGGED", "unspace", "tag_pii",
           "score_pii_extraction"]

#: the rankings the attack makes (``reference`` only with a reference model)
RANKINGS = ("perplexity", "zlib", "reference")


@dataclass(frozen=True, repr=False)
class Extracted:
    """What the attack recovers: the distinct ``texts`` it sampled, their ``scores`` (log-perplexities under the
    released model), ``zlib`` ratios, ``reference`` log-perplexities (None without a reference model) and, per
    ranking, the indices of its ``top`` texts (most likely memorised first)."""

    texts: tuple[str, ...]
    scores: np.ndarray
    zlib: np.ndarray
    reference: np.ndarray | None
    ranked: dict[str, np.ndarray] = field(default_factory=dict)

    def top_texts(self, ranking: str) -> list[str]:
        if ranking not in self.ranked:
            raise InvalidParameterError(f"no {ranking!r} ranking; the attack made {', '.join(self.ranked)}")
        return [self.texts[i] for i in self.ranked[ranking]]

    def __repr__(self) -> str:
        return f"Extracted({len(self.texts)} distinct samples; rankings {', '.join(self.ranked)})"


class TrainingDataExtraction(Attack):
    """Sample the released model and rank its samples as likely memorised (module docstring)."""

    name = "extraction"
    observes = "generative-model"
    bench_cell = "veil.bench.cells.generative_model:extraction_cell"
    citation = ("Carlini et al. 2021, Extracting Training Data from Large Language Models (USENIX Security), Sec. 4-5: "
                "sample, then rank by perplexity, zlib ratio and the ratio to a reference model")
    threat = ThreatModel(observes="samples drawn from the released model and its likelihood of given texts "
                                  "(black-box)",
                         needs=("optionally a reference language model trained on public text only",),
                         knows_key=False, trains=False)

    def __init__(self, *, samples: int = 200, top: int = 100, max_tokens: int = 32, min_tokens: int = 8,
                 top_k: int = 40, temperature: float = 1.0, prompt: str = "", seed: int = 0,
                 reference: Any = None) -> None:
        from veil.attacks.generation.observe import LMAccess
        from veil.validation import check_int

        self.samples = check_int("samples", samples, minimum=1)
        self.top = check_int("top", top, minimum=1)
        self.max_tokens = check_int("max_tokens", max_tokens, minimum=1)
        self.min_tokens = check_int("min_tokens", min_tokens, minimum=0, maximum=self.max_tokens)
        self.top_k = check_int("top_k", top_k, minimum=1)
        self.seed = check_int("seed", seed, minimum=0)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
            raise InvalidParameterError(f"temperature must be a number > 0, got {temperature!r}")
        self.temperature = float(temperature)
        if not isinstance(prompt, str):
            raise InvalidTypeError(f"prompt must be a str, got {type(prompt).__name__}")
        self.prompt = prompt
        if reference is not None and not isinstance(reference, LMAccess):
            reference = LMAccess.of(reference)
        self.reference = reference

    def config(self) -> dict[str, Any]:
        return {**super().config(), "samples": self.samples, "top": self.top, "max_tokens": self.max_tokens,
                "min_tokens": self.min_tokens, "top_k": self.top_k, "temperature": self.temperature,
                "prompt": self.prompt, "seed": self.seed,
                "reference": None if self.reference is None else dict(self.reference.recipe)}

    def run(self, observation: Any) -> Extracted:
        """Sample ``observation`` (an :class:`LMAccess`), drop repeats and rank what is left."""
        from veil.attacks.generation.observe import LMAccess
        from veil.metrics.memorization import zlib_ratio

        if not isinstance(observation, LMAccess):
            raise InvalidTypeError(f"extraction observes a released language model (LMAccess.of(model)), not "
                                   f"{type(observation).__name__}")
        drawn = observation.sample(self.samples, prompt=self.prompt, max_tokens=self.max_tokens,
                                   min_tokens=self.min_tokens, top_k=self.top_k, temperature=self.temperature,
                                   seed=self.seed)
        texts = tuple(t for t in dict.fromkeys(drawn) if t.strip())
        if not texts:
            raise InvalidParameterError("every sample was empty; raise max_tokens or min_tokens")
        scores = observation.scores(list(texts))
        zlib = np.array([zlib_ratio(s, t) for s, t in zip(scores, texts)])
        ref = None if self.reference is None else self.reference.scores(list(texts))
        k = min(self.top, len(texts))
        ranked = {"perplexity": np.argsort(scores, kind="stable")[:k], "zlib": np.argsort(zlib, kind="stable")[:k]}
        if ref is not None:
            ranked["reference"] = np.argsort(scores / ref, kind="stable")[:k]
        return Extracted(texts, scores, zlib, ref, ranked)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def score_extraction(found: Extracted, training_texts: Any, *, min_words: int = 6) -> dict[str, dict[str, Any]]:
    """Per ranking: how many of its top samples occur verbatim in a training text (module docstring), their share
    with a Wilson 95% interval, and the extracted texts. ``training_texts`` is the truth (the scorer's only)."""
    from veil.metrics.leakage import wilson_interval
    from veil.validation import check_int

    min_words = check_int("min_words", min_words, minimum=1)
    if isinstance(training_texts, str) or not isinstance(training_texts, (list, tuple)):
        raise InvalidTypeError("training_texts must be the list of texts the model was trained on")
    corpus = [_norm(t) for t in training_texts]
    hit = [len(_norm(t).split()) >= min_words and any(_norm(t) in c for c in corpus) for t in found.texts]
    out = {}
    for ranking, idx in found.ranked.items():
        hits = [bool(hit[i]) for i in idx]
        n, k = len(hits), int(sum(hits))
        low, high = wilson_interval(k, n)
        out[ranking] = {"top": n, "extracted": k, "precision": k / n, "ci_low": low, "ci_high": high,
                        "texts": [found.texts[i] for i, h in zip(idx, hits) if h]}
    return out


#: the PII classes tagged in samples (module docstring)
TAGGED = ("EMAIL_ADDRESS", "PHONE_NUMBER", "IBAN_CODE")
_EMAIL = re.compile(r"([\w.+-]+)\s*@\s*([\w-]+(?:\s*\.\s*[a-z]{2,6}\b)+)", re.IGNORECASE)
_DIGITS = re.compile(r"(?<![\w])(?:[+(]\s*)?\d[\d\s().+\-]{5,}\d")
_IBAN = re.compile(r"\b([a-z]{2}\d{2}[a-z0-9]{11,30})\b")


def unspace(text: str) -> str:
    """``text`` with values written as values: the tokenizer's spaces inside e-mail addresses (``"ann @ example.
    org"``) and runs of digits and phone punctuation (``"( 212 ) 555 - 0187"``) removed, an IBAN's letters
    upper-cased (``"de89..."`` -> ``"DE89..."``)."""
    text = _EMAIL.sub(lambda m: m.group(1) + "@" + re.sub(r"\s+", "", m.group(2)), text)
    text = _DIGITS.sub(lambda m: re.sub(r"\s+", "", m.group()), text)
    return _IBAN.sub(lambda m: m.group(1).upper(), text)


def tag_pii(texts: Any, *, entities: Any = TAGGED, detector: Any = None) -> list[tuple[str, str]]:
    """The distinct ``(entity, value)`` pairs Presidio's recognizers find in ``texts`` after :func:`unspace`, in
    the order first found (``detector``: a :class:`veil.defenses.redaction.Detector` to reuse)."""
    from veil.defenses.redaction import Detector

    if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
        raise InvalidTypeError("texts must be a list of sampled texts")
    written = [unspace(t) for t in texts]
    detector = detector or Detector(model="sm", entities=list(entities))
    found: dict[tuple[str, str], None] = {}
    for text, spans in zip(written, detector.detect(written)):
        for d in spans:
            if d.entity in entities:
                found.setdefault((d.entity, text[d.start:d.end]), None)
    return list(found)


def score_pii_extraction(tagged: Any, planted: Any) -> dict[str, Any]:
    """Precision and recall of PII extraction: ``tagged`` the attack's ``(entity, value)`` pairs, ``planted`` the
    truth's (the scorer's only). A tagged value is right when it is a planted value of its class, compared
    lowercased with every space removed. Precision is over the tagged values, recall over the planted values of the
    tagged classes; each with a Wilson 95% interval (None when there is nothing to count), and per class."""
    from veil.attacks.generation.pii import same_value
    from veil.metrics.leakage import wilson_interval

    tagged, planted = list(tagged), list(planted)
    classes = sorted({e for e, _ in planted} & set(TAGGED) | {e for e, _ in tagged})

    def share(k: int, n: int) -> dict[str, Any]:
        if n == 0:
            return {"n": 0, "right": 0, "share": None, "ci_low": None, "ci_high": None}
        low, high = wilson_interval(k, n)
        return {"n": n, "right": k, "share": k / n, "ci_low": low, "ci_high": high}

    def right(e: str, v: str) -> bool:
        return any(pe == e and same_value(v, pv) for pe, pv in planted)

    def found(e: str, v: str) -> bool:
        return any(te == e and same_value(v, tv) for te, tv in tagged)

    out: dict[str, Any] = {"precision": share(sum(right(e, v) for e, v in tagged), len(tagged))}
    in_scope = [(e, v) for e, v in planted if e in TAGGED]
    out["recall"] = share(sum(found(e, v) for e, v in in_scope), len(in_scope))
    out["per_class"] = {c: {"tagged": sum(e == c for e, _ in tagged),
                            "right": sum(e == c and right(e, v) for e, v in tagged),
                            "planted": sum(e == c for e, _ in in_scope),
                            "found": sum(e == c and found(e, v) for e, v in in_scope)} for c in classes}
    return out
