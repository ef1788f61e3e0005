"""Re-identification of Presidio-redacted documents among >= 100 candidates (docs/redaction.md).

One record per (corpus, operator): the original text (``none``), each redaction operator (``type``, ``mask``,
``hash``, ``pseudonym``), and the text releases set beside them (:mod:`veil.experiments.redaction.releases`:
word-level metric DP ``metric-dp-eps<E>``, random same-POS substitution ``random-P<k>``). The task is closed-world:

* candidates: the values of a corpus's source column (:data:`SOURCES`: the sender's e-mail address of a
  spam-assassin mail, the speaker of a House of Commons speech, ...) with at least ``min_texts`` texts; at most
  ``max_texts`` texts each (drawn with ``seed``), at most ``max_candidates`` candidates (drawn with ``seed``);
  identical texts are kept once in the whole corpus, each text is cut to ``max_chars`` characters;
* each candidate's texts are split (``seed``): ``n // 2`` are the owner's private documents, the other
  ``n - n // 2`` the attacker's public texts of that candidate;
* the owner releases the private documents redacted by :class:`~veil.defenses.redaction.PresidioRedaction` (the
  owner's hash key and pseudonyms from OS entropy, never from the seed), or rewritten by the other mechanism (its
  draws from the OS CSPRNG); the attacker
  (:class:`~veil.attacks.text.reidentify.Reidentification`) ranks the candidates for each released document,
  once trained on its public texts as they are (``plain``) and once on them redacted (rewritten) by its own copy
  of the mechanism, same public configuration, its own draws (``kerckhoffs``). The record's headline metrics are the stronger of the two by top-1 accuracy, with
  their floor tests Bonferroni-corrected for that choice (two tests); both attackers' metrics are kept
  (``top1[plain]``, ``top1[kerckhoffs]``, ...).

Presidio's analyzer runs once per corpus, over the private and the public texts: its detections are reused by
every operator (the anonymizer only rewrites the spans) and by the attacker's copy of the redactor (same public
configuration, same analyzer, same spans). Records are written atomically; an existing record of the same
configuration is reused, one of another configuration is refused (:class:`~veil.errors.StaleResultError`)
unless ``force``.
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import DataFormatError
from veil.results import Metric, ResultRecord

__all__ = ["SOURCES", "OPERATORS", "CandidateSplit", "candidate_split", "run_reidentification", "record_path",
           "METHOD"]

METHOD = "redaction"
#: "none" (the original text) and Presidio's operators
OPERATORS = ("none", "type", "mask", "hash", "pseudonym")
#: corpus -> (the attribute column naming each text's source, how a value becomes a candidate, default min_texts)
SOURCES: dict[str, tuple[str, str, int]] = {
    "spam-assassin": ("from", "address", 4),   # the From header's e-mail address (display name dropped)
    "hoc-speeches": ("speaker", "value", 2),  # the Member of Parliament
    "health-tweets": ("account", "value", 2),  # 16 news accounts only (fewer than 100 candidates)
    "debates-2016": ("speaker", "value", 2),  # 9 speakers only
}
_ADDRESS = re.compile(r"[\w.+=-]+@[\w-]+(?:\.[\w-]+)+")
_EMPTY = {"", "na", "none", "nan", "null"}
_ATTACK = {"char_ngrams": [2, 5], "word_ngrams": [1, 2], "min_df": 1, "C": 1.0}


def _candidate(value: Any, key: str) -> str:
    text = "" if value is None else str(value).strip()
    if key == "address":
        found = _ADDRESS.search(text)
        return found.group(0).lower() if found else text.lower()
    return text


@dataclass(frozen=True)
class CandidateSplit:
    """The closed world of one corpus: the attacker's public texts and the owner's private documents, each with
    its candidate (the private candidates are the truth: for the scorer only)."""

    public_texts: tuple[str, ...]
    public_candidates: tuple[str, ...]
    private_texts: tuple[str, ...]
    private_candidates: tuple[str, ...]

    @property
    def candidates(self) -> int:
        return len(set(self.public_candidates))

    def describe(self) -> dict[str, Any]:
        per = Counter(self.public_candidates) + Counter(self.private_candidates)
        return {"candidates": self.candidates, "public_texts": len(self.public_texts),
                "private_documents": len(self.private_texts),
                "texts_per_candidate": {"min": min(per.values()), "max": max(per.values()),
                                        "mean": round(sum(per.values()) / len(per), 3)},
                "private_chars": sum(map(len, self.private_texts)), "public_chars": sum(map(len, self.public_texts))}


def _check_sizes(min_texts: Any, max_texts: Any, max_candidates: Any, max_chars: Any) -> None:
    from veil.validation import check_int

    check_int("min_texts", min_texts, minimum=2, hint="; each candidate needs a public and a private text")
    check_int("max_texts", max_texts, minimum=2, hint="; each candidate needs a public and a private text")
    if max_candidates is not None:
        check_int("max_candidates", max_candidates, minimum=2)
    if max_chars is not None:
        check_int("max_chars", max_chars, minimum=1)


def candidate_split(texts: Sequence[str], sources: Sequence[Any], *, key: str = "value", min_texts: int = 2,
                    max_texts: int = 10, max_candidates: int | None = None, max_chars: int | None = 5000,
                    seed: int = 0) -> CandidateSplit:
    """The closed-world split of a corpus (module docstring); deterministic in ``seed``."""
    _check_sizes(min_texts, max_texts, max_candidates, max_chars)
    if len(texts) != len(sources):
        raise DataFormatError(f"{len(texts)} texts but {len(sources)} sources")
    by: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for text, source in zip(texts, sources):
        cand = _candidate(source, key)
        if text in seen or not text.strip() or cand.lower() in _EMPTY:
            continue  # an identical text is kept once (never both public and private); no text, no source: out
        seen.add(text)
        by[cand].append(text if max_chars is None else text[:max_chars])
    eligible = sorted(c for c, ts in by.items() if len(ts) >= min_texts)
    if len(eligible) < 2:
        raise DataFormatError(f"only {len(eligible)} candidates have >= {min_texts} texts; lower min_texts")
    g = np.random.default_rng(seed)
    if max_candidates is not None and len(eligible) > max_candidates:
        eligible = sorted(eligible[i] for i in g.choice(len(eligible), max_candidates, replace=False))
    pub_t, pub_c, priv_t, priv_c = [], [], [], []
    for cand in eligible:
        ts = by[cand]
        chosen = [ts[i] for i in g.permutation(len(ts))[:max_texts]]
        k = len(chosen) // 2
        priv_t += chosen[:k]
        priv_c += [cand] * k
        pub_t += chosen[k:]
        pub_c += [cand] * (len(chosen) - k)
    return CandidateSplit(tuple(pub_t), tuple(pub_c), tuple(priv_t), tuple(priv_c))


def record_path(root: str | Path, corpus: str, operator: str, *, model: str, min_texts: int, max_texts: int,
                max_candidates: int | None, seed: int) -> Path:
    from veil.outputs import tag

    sizes = tag(m=model, min=min_texts, max=max_texts, n=max_candidates, s=seed)
    return Path(root) / f"reidentify-{corpus}-{operator}-{sizes}.json"


class _SameAnalysis:
    """The attacker's redactor fed the detections of the same public analyzer (same configuration, same texts:
    the spans it would find itself), so that each text is analysed once per corpus; its anonymizer and its
    randomness (hash key, surrogates) are its own."""

    def __init__(self, redactor: Any, texts: Sequence[str], detections: Sequence[Any]) -> None:
        self.redactor, self._found = redactor, dict(zip(texts, detections))

    def transform(self, texts: Sequence[str]) -> list[str]:
        return [r.text for r in self.redactor.redact(list(texts), detections=[self._found[t] for t in texts])]


def _redaction_stats(redacted: Sequence[Any], texts: Sequence[str]) -> tuple[dict[str, Metric], dict[str, int]]:
    n = len(texts)
    spans = [len(r.spans) for r in redacted]
    chars = sum(s.end - s.start for r in redacted for s in r.spans)
    total = sum(map(len, texts))
    entities = Counter(s.entity for r in redacted for s in r.spans)
    return ({"spans_per_document": Metric(mean=float(np.mean(spans)), n=n),
             "redacted_char_share": Metric(mean=chars / total if total else 0.0, n=n),
             "documents_redacted": Metric(mean=float(np.mean([s > 0 for s in spans])), n=n)},
            dict(sorted(entities.items(), key=lambda kv: (-kv[1], kv[0]))))


def run_reidentification(results: str | Path, *, corpus: str, operators: Sequence[str] = OPERATORS,
                         model: str = "sm", min_texts: int | None = None, max_texts: int = 10,
                         max_candidates: int | None = None, max_chars: int | None = 5000, seed: int = 0,
                         force: bool = False, log: Callable[[str], None] | None = None) -> list[Path]:
    """Write (or reuse) one record per operator of ``corpus`` under ``results``; returns their paths.

    ``min_texts`` None: the corpus's default in :data:`SOURCES` (spam-assassin 4: 198 senders; hoc-speeches 2:
    209 speakers). ``log``: progress lines (None: print). Each record's metrics: the headline attacker's ``top1``,
    ``top5`` (Wilson 95%), ``mrr``, ``floor*`` / ``floor5*``, ``p_top1`` / ``p_top5`` and ``beats_floor`` /
    ``beats_floor5`` (:func:`~veil.attacks.text.reidentify.score_reidentification`, two tests when two attackers
    ran), ``candidates``; each attacker's ``top1[v]``, ``top5[v]``, ``mrr[v]``, ``p_top1[v]``, ``p_top5[v]``
    (``v`` in ``plain``, ``kerckhoffs``); and what was redacted in the private documents: ``spans_per_document``,
    ``redacted_char_share``, ``documents_redacted`` (entity counts in ``extra["entities"]``).
    """
    from veil.encoders.backends import with_stored_backend
    from veil.outputs import check_output_dir, existing_record
    from veil.validation import check_choice, check_int

    say = print if log is None else log
    check_choice("corpus", corpus, SOURCES)
    column, key, default_min = SOURCES[corpus]
    min_texts = default_min if min_texts is None else min_texts
    check_int("seed", seed, minimum=0)
    _check_sizes(min_texts, max_texts, max_candidates, max_chars)
    check_choice("model", model, ("sm", "md"))
    from veil.experiments.redaction.releases import check_releases

    releases = {r.name: r for r in check_releases(operators, vectors=False)}
    operators = tuple(releases)
    root = check_output_dir(results)
    base = {"corpus": corpus, "column": column, "candidate": key, "model": model, "min_texts": min_texts,
            "max_texts": max_texts, "max_candidates": max_candidates, "max_chars": max_chars, "seed": seed,
            "attack": dict(_ATTACK)}
    paths = {op: record_path(root, corpus, op, model=model, min_texts=min_texts, max_texts=max_texts,
                             max_candidates=max_candidates, seed=seed) for op in operators}
    wanted = {op: {**base, "operator": op, **_backend(releases[op])} for op in operators}
    todo = [op for op in operators
            if existing_record(paths[op], wanted[op], force=force, view=with_stored_backend(wanted[op])) is None]
    for op in operators:
        if op not in todo:
            say(f"reidentify {corpus} {op}: {paths[op]} (kept: same configuration)")
    if not todo:
        return [paths[op] for op in operators]

    import veil.corpora as vc

    data = vc.load(corpus)
    split = candidate_split(list(data.texts), list(data.attributes[column]), key=key, min_texts=min_texts,
                            max_texts=max_texts, max_candidates=max_candidates, max_chars=max_chars, seed=seed)
    info = split.describe()
    redacting = [op for op in todo if releases[op].family == "redaction"]
    say(f"reidentify {corpus}: {info['candidates']} candidates ({column} with >= {min_texts} texts), "
        f"{info['public_texts']} public texts / {info['private_documents']} private documents; "
        f"{len(todo)} records ({', '.join(todo)}), {2 * len(todo) - ('none' in todo)} attacker fits"
        + (f"; Presidio ({model}) analyses {len(split.public_texts) + len(split.private_texts)} texts "
           f"({(info['public_chars'] + info['private_chars']) / 1e6:.2f}M characters) once" if redacting else ""))
    found_public: list[Any] = []
    found_private: list[Any] = []
    detect_s = 0.0
    if redacting:
        from veil.defenses.redaction import Detector

        start = time.perf_counter()
        detector = Detector(model=model)
        found_private = detector.detect(list(split.private_texts))
        found_public = detector.detect(list(split.public_texts))
        detect_s = time.perf_counter() - start
        say(f"reidentify {corpus}: Presidio analysed {len(found_private) + len(found_public)} texts in "
            f"{detect_s:.0f} s ({sum(map(len, found_private))} spans in the private documents)")
    out = []
    for op in operators:
        if op in todo:
            rec = _one(releases[op], split, info, base, found_private, found_public, detect_s, model, seed)
            rec.write(paths[op])
            m = rec.metrics
            say(f"reidentify {corpus} {op}: top-1 {m['top1']} (floor {m['floor'].mean:.4f}), top-5 {m['top5']}, "
                f"MRR {m['mrr']} [{rec.config['chosen']}] in {rec.wall_time_s:.0f} s -> {paths[op]}")
        out.append(paths[op])
    return out


def _backend(release: Any) -> dict[str, str]:
    """The backend of the frozen MiniLM encodings a release depends on, when it is not torch (``{}`` for torch, as
    every record made before backends existed): metric DP's word vectors (``public_word_vectors`` of
    :mod:`veil.experiments.redaction.releases`); the other releases and the TF-IDF attackers encode nothing."""
    from veil.encoders.backends import backend_identity

    return backend_identity(None) if release.family == "metric-dp" else {}


def _one(release: Any, split: CandidateSplit, info: Mapping[str, Any], base: Mapping[str, Any], found_private: Any,
         found_public: Any, detect_s: float, model: str, seed: int) -> ResultRecord:
    """Release the private documents under ``release`` (:class:`~veil.experiments.redaction.releases.Release`), run
    both attackers, score them: one record."""
    from veil.attacks.text import observe_text
    from veil.attacks.text.reidentify import (PublicTexts, Reidentification, mechanism_for,
                                              score_reidentification)

    op = release.name
    start = time.perf_counter()
    public = PublicTexts(split.public_texts, split.public_candidates)
    extra: dict[str, Any] = {}
    attacker_copy: Any = None  # the attacker's own mechanism, for a release other than none and redaction
    if release.family == "none":
        obs = observe_text(list(split.private_texts))
        stats = {name: Metric(mean=0.0, n=len(obs))
                 for name in ("spans_per_document", "redacted_char_share", "documents_redacted")}
        variants = ("plain",)
    elif release.family == "redaction":
        from veil.defenses.redaction import PresidioRedaction

        owner = PresidioRedaction(operator=op, model=model)  # the owner's secret randomness: OS entropy
        redacted = owner.redact(list(split.private_texts), detections=found_private)
        obs = observe_text([r.text for r in redacted], owner)
        stats, extra["entities"] = _redaction_stats(redacted, split.private_texts)
        variants = ("plain", "kerckhoffs")
    else:
        from veil.experiments.redaction.releases import make_text_mechanism, public_word_vectors

        vectors = public_word_vectors() if release.family == "metric-dp" else None
        owner = make_text_mechanism(release, vectors=vectors)  # the owner's draws: OS CSPRNG
        obs = observe_text(owner.transform(list(split.private_texts)), owner)
        stats = {}
        attacker_copy = make_text_mechanism(  # Kerckhoffs: the same public configuration, the attacker's draws
            release, int(np.random.SeedSequence([seed, 7, 1]).generate_state(1)[0]), vectors=vectors)
        variants = ("plain", "kerckhoffs")
    seeds = np.random.SeedSequence([seed, 7]).generate_state(2)
    results = {}
    for variant in variants:
        redactor = None
        if variant == "kerckhoffs":
            redactor = attacker_copy if attacker_copy is not None else _SameAnalysis(
                mechanism_for(obs.defense, int(seeds[1])), split.public_texts, found_public)
        attack = Reidentification(public=public, variant=variant, redactor=redactor, rng=int(seeds[0]),
                                  char_ngrams=tuple(base["attack"]["char_ngrams"]),
                                  word_ngrams=tuple(base["attack"]["word_ngrams"]), min_df=base["attack"]["min_df"],
                                  C=base["attack"]["C"])
        ranking = attack.run(obs)
        results[variant] = (ranking, score_reidentification(ranking, split.private_candidates))
    chosen = max(variants, key=lambda v: (results[v][1].metrics["top1"].mean, v == "kerckhoffs"))
    headline = score_reidentification(results[chosen][0], split.private_candidates, tests=len(variants))
    metrics = dict(headline.metrics)
    for variant, (_, res) in results.items():
        for name in ("top1", "top5", "mrr", "p_top1", "p_top5"):
            metrics[f"{name}[{variant}]"] = res.metrics[name]
    metrics.update(stats)
    config = {**base, "operator": op, **_backend(release), **info, "chosen": chosen, "variants": list(variants),
              "attacker": {k: results[chosen][1].config[k] for k in ("attack", "citation", "threat", "features",
                                                                       "classifier", "rng")},
              "features_dim": {v: res.config["features_dim"] for v, (_, res) in results.items()},
              "defense": dict(obs.defense),
              "owner_randomness": ("os-entropy (never the experiment seed)"
                                   if op in ("hash", "pseudonym") or release.family not in ("none", "redaction")
                                   else "none"),
              "headline": "the stronger variant by top-1; its p-values Bonferroni-corrected for the choice"}
    extra.update({"detect_seconds_shared": round(detect_s, 3), "examples": [dict(e) for e in headline.examples]})
    return ResultRecord(method=METHOD, experiment=f"reidentify-{base['corpus']}-{op}", config=config,
                        metrics=metrics, wall_time_s=time.perf_counter() - start, extra=extra)
