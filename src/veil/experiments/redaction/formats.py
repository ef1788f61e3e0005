"""Recall of the formats veil's added recognizers target (:mod:`veil.defenses.redaction.recognizers`), on an
injection set held apart from the one they were written on, against Presidio's English defaults alone.

The set (:func:`build_formats`) is made like the PII-injection corpus (:mod:`veil.corpora.pii_injection`): one real
rt-polarity sentence per text, one value inserted by a short template at a known span, values from the pinned
``faker`` package seeded with the experiment seed. Classes and variants:

* ``STREET_ADDRESS``, one variant per Faker locale: ``en_US``, ``en_GB``, ``fr_FR``, ``it_IT``, ``es_ES``,
  ``de_DE``, ``pl_PL``, ``nl_NL``, ``pt_BR`` (``street_address``, whitespace collapsed);
* ``UK_POSTCODE`` (en_GB ``postcode``), ``IT_FISCAL_CODE`` (it_IT ``ssn``: a codice fiscale with its check
  character), ``ES_NIF`` and ``ES_NIE`` (es_ES ``nif`` / ``nie``), ``PL_PESEL`` (pl_PL ``pesel``);
* ``US_SSN``: ``valid`` (en_US ``ssn``) and ``presidio_rejects`` (a number in an SSN's layout that Presidio's own
  recognizer throws away: a published sample, an area 000, 666 or all-equal digits, a group 00 or a serial 0000).

Held out: the recognizers' patterns were written looking at the hand-written strings of the issue that asked for
them and at draws of seed 0 of this set; the record veil keeps (``results/redaction/formats-*-seed1.json``) is seed
1: other values (base sentences are drawn anew, so a few may recur). Not held out: the rate on base sentences below,
as the address patterns' false positives were checked on the built-in corpora (rt-polarity among them) while they
were written. Every value is scored as in :mod:`veil.experiments.redaction.detection`
(``covered``: every letter and digit inside a detection, the recall; ``typed``: by detections of the class' type,
``STREET_ADDRESS`` also by ``LOCATION``), with 95% Wilson intervals, for veil's recognizers (``recall_<CLASS>``,
``recall_<CLASS>_<variant>``) and for Presidio's English defaults alone (``presidio_recall_<CLASS>``). What the
additions cost: the share of the un-injected base sentences in which veil's detector finds a type that Presidio's
defaults cannot (``base_rate_<TYPE>``: a false positive unless the review itself holds an address or an ID).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil.corpora.pii_injection import InjectedSpan
from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord
from veil.validation import check_int

__all__ = ["FORMAT_CLASSES", "FORMAT_TEMPLATES", "FormatSet", "build_formats", "run_formats", "formats_file_name",
           "HELD_OUT_SEED"]

#: the seed of the kept record; seed 0 is the draw the recognizers were written on
HELD_OUT_SEED = 1
ADDRESS_LOCALES = ("en_US", "en_GB", "fr_FR", "it_IT", "es_ES", "de_DE", "pl_PL", "nl_NL", "pt_BR")
FORMAT_CLASSES: dict[str, tuple[str, ...]] = {
    "STREET_ADDRESS": ADDRESS_LOCALES, "UK_POSTCODE": ("en_GB",), "IT_FISCAL_CODE": ("it_IT",),
    "ES_NIF": ("es_ES",), "ES_NIE": ("es_ES",), "PL_PESEL": ("pl_PL",), "US_SSN": ("valid", "presidio_rejects")}
FORMAT_TEMPLATES: dict[str, tuple[str, ...]] = {
    "STREET_ADDRESS": ("{s} She lives at {v}.", "Send it to {v}. {s}", "{s} (address: {v})", "{s} We met at {v}."),
    "UK_POSTCODE": ("{s} Postcode: {v}.", "{s} We moved to {v} last year.", "{s} (post code {v})", "{s} Ref {v}."),
    "IT_FISCAL_CODE": ("{s} My codice fiscale is {v}.", "Tax code: {v}. {s}", "{s} (fiscal code {v})",
                       "{s} Reference {v}."),
    "ES_NIF": ("{s} My DNI is {v}.", "NIF: {v}. {s}", "{s} (ID number {v})", "{s} Reference {v}."),
    "ES_NIE": ("{s} My NIE is {v}.", "NIE: {v}. {s}", "{s} (ID number {v})", "{s} Reference {v}."),
    "PL_PESEL": ("{s} My PESEL is {v}.", "PESEL: {v}. {s}", "{s} (ID number {v})", "{s} Reference {v}."),
    "US_SSN": ("{s} My SSN is {v}.", "SSN: {v}. {s}", "{s} (social security number {v})", "{s} SSN {v}."),
}
TYPE_MATCH: dict[str, tuple[str, ...]] = {"STREET_ADDRESS": ("STREET_ADDRESS", "LOCATION")}
_SAMPLES = ("123-45-6789", "078-05-1120", "987-65-4320")  # the published sample numbers Presidio drops
_CHUNK = 500


@dataclass(frozen=True)
class FormatSet:
    """Texts with one injected value each (``spans[i]``), made from ``base_texts[i]``."""

    texts: tuple[str, ...]
    spans: tuple[InjectedSpan, ...]
    base_texts: tuple[str, ...]
    n_per_variant: int
    seed: int

    def __len__(self) -> int:
        return len(self.texts)


def _presidio_reject(rng: np.random.Generator) -> str:
    """A number in the SSN layout that Presidio's ``UsSsnRecognizer.invalidate_result`` rejects."""
    kind = int(rng.integers(5))
    d = [str(int(x)) for x in rng.integers(0, 10, size=9)]
    if kind == 0:
        return _SAMPLES[int(rng.integers(len(_SAMPLES)))]
    if kind == 1:
        d[:3] = list(("000", "666")[int(rng.integers(2))])
    elif kind == 2:
        d[3:5] = ["0", "0"]
    elif kind == 3:
        d[5:] = ["0"] * 4
    else:
        d = [d[0]] * 9
    return f"{''.join(d[:3])}-{''.join(d[3:5])}-{''.join(d[5:])}"


def _value(fakers: Callable[[str], Any], rng: np.random.Generator, cls: str, variant: str) -> str:
    if cls == "STREET_ADDRESS":
        return " ".join(fakers(variant).street_address().split())
    if cls == "US_SSN":
        return fakers("en_US").ssn() if variant == "valid" else _presidio_reject(rng)
    fk = fakers(variant)
    return {"UK_POSTCODE": fk.postcode, "IT_FISCAL_CODE": fk.ssn, "ES_NIF": getattr(fk, "nif", None),
            "ES_NIE": getattr(fk, "nie", None), "PL_PESEL": getattr(fk, "pesel", None)}[cls]()


def build_formats(n_per_variant: int = 100, seed: int = HELD_OUT_SEED, base: Any = "rt-polarity") -> FormatSet:
    """The injection set of the module docstring: ``n_per_variant`` values per class and variant, each in its own
    base sentence (drawn without replacement), reproducible from ``seed`` and the pinned faker."""
    import veil.corpora as vc
    from veil.corpora.pii_injection import _base_sentences, _fill

    n_per_variant = check_int("n_per_variant", n_per_variant, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    corpus = vc.load(base) if isinstance(base, str) else base
    pool = _base_sentences(corpus)
    plan = [(c, v) for c, variants in FORMAT_CLASSES.items() for v in variants for _ in range(n_per_variant)]
    if len(pool) < len(plan):
        raise InvalidParameterError(f"{corpus.name} has {len(pool)} usable sentences, fewer than the {len(plan)} "
                                    "values to inject; use a smaller n_per_variant")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(pool), size=len(plan), replace=False)
    made: dict[str, Any] = {}

    def fakers(locale: str) -> Any:
        if locale not in made:
            from faker import Faker

            made[locale] = Faker(locale)
            made[locale].seed_instance(int(rng.integers(2 ** 32)))
        return made[locale]

    texts, spans, bases = [], [], []
    for (cls, variant), idx in zip(plan, chosen):
        value = _value(fakers, rng, cls, variant)
        tid = int(rng.integers(len(FORMAT_TEMPLATES[cls])))
        text, start = _fill(FORMAT_TEMPLATES[cls][tid], value, pool[int(idx)])
        texts.append(text)
        spans.append(InjectedSpan(start, start + len(value), cls, value, variant, tid, variant))
        bases.append(pool[int(idx)])
    return FormatSet(tuple(texts), tuple(spans), tuple(bases), n_per_variant, seed)


def score_formats(fs: FormatSet, veil_found: Sequence[Sequence[Any]], presidio_found: Sequence[Sequence[Any]],
                  base_found: Sequence[Sequence[Any]], new_types: Sequence[str]
                  ) -> tuple[dict[str, Metric], dict[str, Any]]:
    """Metrics and tables (module docstring) from the detections of veil's and Presidio's detectors on
    ``fs.texts`` and of veil's on ``fs.base_texts``; ``new_types``: the types veil finds and Presidio's defaults
    cannot (each gets its ``base_rate``, zero included)."""
    from veil.experiments.redaction.detection import EXAMPLES, _dets, _row, rate, span_outcome

    outcomes: dict[tuple[str, str, str], list[Any]] = defaultdict(list)  # (detector, class, variant)
    missed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for text, s, mine, theirs in zip(fs.texts, fs.spans, veil_found, presidio_found):
        match = TYPE_MATCH.get(s.entity, (s.entity,))
        for who, dets in (("veil", mine), ("presidio", theirs)):
            o = span_outcome(text, s.start, s.end, dets, match)
            outcomes[(who, s.entity, s.variant)].append(o)
            if who == "veil" and not o.covered and len(missed[f"{s.entity}/{s.variant}"]) < EXAMPLES:
                missed[f"{s.entity}/{s.variant}"].append({"text": text, "value": s.value,
                                                          "detections": _dets(text, dets)})
    metrics: dict[str, Metric] = {}
    tables: dict[str, Any] = {}
    for cls, variants in FORMAT_CLASSES.items():
        for who, prefix in (("veil", ""), ("presidio", "presidio_")):
            every = [o for v in variants for o in outcomes[(who, cls, v)]]
            metrics[f"{prefix}recall_{cls}"] = rate(sum(o.covered for o in every), len(every))
            metrics[f"{prefix}typed_{cls}"] = rate(sum(o.typed for o in every), len(every))
            for v in variants:
                group = outcomes[(who, cls, v)]
                metrics[f"{prefix}recall_{cls}_{v}"] = rate(sum(o.covered for o in group), len(group))
            tables.setdefault(cls, {})[who] = {**_row(every), "variants": {v: _row(outcomes[(who, cls, v)])
                                                                          for v in variants}}
    new_types = sorted(new_types)
    base_examples: dict[str, list[str]] = defaultdict(list)
    for text, dets in zip(fs.base_texts, base_found):
        for d in dets:
            if d.entity in new_types and len(base_examples[d.entity]) < EXAMPLES:
                base_examples[d.entity].append(text[d.start:d.end])
    for t in new_types:
        metrics[f"base_rate_{t}"] = rate(sum(any(d.entity == t for d in dets) for dets in base_found),
                                         len(base_found))
    extra = {"recall": tables, "missed_examples": dict(missed),
             "base_sentences": {"texts": len(fs.base_texts), "types_presidio_cannot_find": new_types,
                                "examples": dict(base_examples),
                                "note": "detections of veil's added types in the un-injected base sentences: false "
                                        "positives unless the review itself holds such a value"}}
    return metrics, extra


def formats_file_name(model: str, n_per_variant: int, seed: int) -> str:
    return f"formats-{model}-n{n_per_variant}-seed{seed}.json"


def run_formats(results: str | Path, *, model: str = "sm", n_per_variant: int = 100, seed: int = HELD_OUT_SEED,
                force: bool = False, log: Callable[[str], None] | None = None) -> Path:
    """Score veil's detector and Presidio's English defaults on :func:`build_formats` (``model``, ``n_per_variant``,
    ``seed``) and write ``results/formats-<model>-n<n>-seed<seed>.json`` (method ``redaction``); an existing record
    of the same configuration is kept unless ``force``; one of another configuration raises
    :class:`~veil.errors.StaleResultError`."""
    from veil.defenses.redaction.engine import Detector, supported_entities
    from veil.experiments.redaction.detection import _check_model, _detect, _finish, _say
    from veil.outputs import check_output_dir, existing_record

    say = _say(log)
    model = _check_model(model)
    n_per_variant = check_int("n_per_variant", n_per_variant, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    root = check_output_dir(results)
    path = root / formats_file_name(model, n_per_variant, seed)
    start = time.perf_counter()
    ours, theirs = Detector(model=model), Detector(model=model, recognizers="presidio")
    config = {"model": model, "n_per_variant": n_per_variant, "seed": seed, "base": "rt-polarity",
              "detector": ours.config(), "baseline": theirs.config(),
              "classes": {c: list(v) for c, v in FORMAT_CLASSES.items()},
              "templates": {c: list(t) for c, t in FORMAT_TEMPLATES.items()},
              "held_out": "the recognizers were written on seed 0 of this set and the issue's hand-written strings"
                          + ("; THIS RUN IS SEED 0: not a held-out measurement" if seed == 0 else ""),
              "scoring": "covered: every letter/digit of the value inside a detection; typed: by detections of the "
                         "class' type (STREET_ADDRESS: or LOCATION); 95% Wilson intervals"}
    if existing_record(path, config, force=force) is not None:
        say(f"kept {path} (a record of this configuration)")
        return path
    fs = build_formats(n_per_variant, seed)
    say(f"format injection set: {len(fs)} texts; detectors: veil's and Presidio's defaults ({model})")
    mine = _detect(ours, fs.texts, "injected texts (veil)", say)
    base = _detect(ours, fs.base_texts, "base texts (veil)", say)
    presidio = _detect(theirs, fs.texts, "injected texts (Presidio's defaults)", say)
    added = set(supported_entities(model)) - set(supported_entities(model, "presidio"))
    metrics, extra = score_formats(fs, mine, presidio, base, sorted(added))
    record = ResultRecord(method="redaction", experiment=path.stem, config=config, metrics=metrics,
                          wall_time_s=time.perf_counter() - start, extra=extra)
    return _finish(path, record, say)
