"""Infilling: how many redacted names veil's masked LM puts back (docs/redaction.md).

One record per (corpus, operator), operators ``type``, ``mask`` and ``hash`` (the ones whose placeholders show where
a span was; pseudonyms hide it: :mod:`~veil.experiments.redaction.reidentify` attacks them). Per corpus:

* the attacker's public texts: the corpus' train split (at most ``max_public`` texts, the first ones). Its own run
  of the same Presidio analyzer over them gives the candidate values (every ``entity`` span it finds, with its
  count): the candidate set is stated in each record (its size, and ``coverage``: the share of targets in it);
* calibration: the dev split (at most ``max_calibration`` texts), redacted by the attacker's own copy of the
  redactor: the weight of the masked-LM term against the prior is chosen there from :data:`WEIGHTS` (by top-1, then
  top-10; 0 = frequency alone, where the masked LM does not help), never on the targets;
* targets: the test split (at most ``max_documents`` texts, drawn with ``seed``) redacted by the owner (key and
  randomness from OS entropy); every redacted span Presidio labelled ``entity`` is a target, its original value
  the truth. Texts are cut to ``max_chars`` characters.

Metrics (Wilson 95% intervals over targets; ``n`` = targets): ``top1``, ``top10`` of the attack; ``top1_prior`` /
``top10_prior`` (the same attack without the masked LM: public frequency and what the operator gives away, e.g. a
masked value's length); ``floor_top1`` / ``floor_top10`` (the most frequent public value / the ten most frequent,
whatever the slot); ``coverage``; ``p_floor`` (exact one-sided McNemar, the attack's top-1 hits against the floor's
on the same targets) and ``p_prior`` (the same against the attack without the masked LM: what the context adds).

Corpora (:data:`CORPORA`): ``news-articles`` (3-sentence passages of the news articles, veil's attribute corpus:
the masked LM was trained on the same corpus' train split, never on its test split) and any built-in document
corpus with PERSON names (``debates-2016``, ``spam-assassin``: texts the masked LM never saw).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord

__all__ = ["CORPORA", "OPERATORS", "WEIGHTS", "run_infilling", "record_path"]

METHOD = "redaction"
OPERATORS = ("type", "mask", "hash")
CORPORA = ("news-articles", "debates-2016", "spam-assassin")
#: the masked-LM weights tried on the attacker's calibration texts (0: public frequency and the operator's facts
#: alone, when the masked LM does not help on the attacker's own data)
WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


def record_path(root: str | Path, corpus: str, operator: str, *, model: str, entity: str, max_documents: int,
                seed: int) -> Path:
    return Path(root) / f"infill-{corpus}-{operator}-{entity.lower()}-m{model}-n{max_documents}-s{seed}.json"


def _texts(corpus: str, max_chars: int) -> tuple[list[str], np.ndarray]:
    if corpus == "news-articles":
        from veil.corpora.attributes import load_attributes

        c = load_attributes("news-articles")
        texts, splits = list(c.texts), np.asarray(c.splits)
    else:
        import veil.corpora as vc

        c = vc.load(corpus)
        texts, splits = list(c.texts), np.asarray(c.splits)
    return [t[:max_chars] for t in texts], splits


def _targets(red: Sequence[Any], obs: Any, entity: str, op: str) -> tuple[list[Any], list[str]]:
    """The attacker's slot at each redacted ``entity`` span, and the span's true value (scorer side)."""
    from veil.attacks.text.infilling import find_slots

    at = {(s.doc, s.start): s for s in find_slots(obs, entity if op == "type" else None)}
    slots, values = [], []
    for d, r in enumerate(red):
        for sp in r.spans:
            if sp.entity == entity and (d, sp.new_start) in at:
                slots.append(at[(d, sp.new_start)])
                values.append(sp.value)
    return slots, values


def _ranks(scores: np.ndarray, rows: Sequence[int | None]) -> np.ndarray:
    out = np.zeros(len(rows), dtype=np.int64)
    for i, j in enumerate(rows):
        if j is not None and np.isfinite(scores[i, j]):
            out[i] = int((scores[i] >= scores[i, j]).sum())
    return out


def _combine(lm: np.ndarray, prior: np.ndarray, weight: float) -> np.ndarray:
    """``weight`` x the masked-LM scores + the log prior; a candidate the operator rules out (-inf, e.g. another
    length under ``mask``) stays ruled out at every weight, 0 included."""
    finite = np.isfinite(lm)
    return np.where(finite, weight * np.where(finite, lm, 0.0), -np.inf) + prior[None, :]


def _rate(hits: np.ndarray) -> Metric:
    from veil.metrics.leakage import wilson_interval

    n = len(hits)
    if n == 0:
        return Metric(mean=0.0, n=0)
    lo, hi = wilson_interval(float(hits.sum()), n)
    return Metric(mean=float(hits.mean()), n=n, ci_low=lo, ci_high=hi, ci_level=0.95)


def run_infilling(results: str | Path, *, corpus: str = "news-articles", operators: Sequence[str] = OPERATORS,
                  entity: str = "PERSON", model: str = "sm", mlm: str = "mlm", max_documents: int = 1000,
                  max_public: int = 5000, max_calibration: int = 300, max_chars: int = 5000, seed: int = 0,
                  force: bool = False, log: Callable[[str], None] | None = None) -> list[Path]:
    """Write (or reuse) one record per operator of ``corpus`` under ``results``; returns their paths."""
    from veil.outputs import check_output_dir, existing_record
    from veil.validation import check_choice, check_int

    say = print if log is None else log
    check_choice("corpus", corpus, CORPORA)
    check_choice("model", model, ("sm", "md"))
    for name, value in (("max_documents", max_documents), ("max_public", max_public),
                        ("max_calibration", max_calibration), ("max_chars", max_chars)):
        check_int(name, value, minimum=1)
    check_int("seed", seed, minimum=0)
    operators = tuple(operators)
    if not operators:
        raise InvalidParameterError(f"operators is empty; give some of {', '.join(OPERATORS)}")
    for op in operators:
        check_choice("operator", op, OPERATORS)
    from veil.models.mlm import MLM_NAMES, read_manifest, mlm_dir

    check_choice("mlm", mlm, MLM_NAMES)
    manifest = read_manifest(mlm_dir(mlm), mlm)  # a missing model is a typed error naming the command, before work
    root = check_output_dir(results)
    base = {"corpus": corpus, "entity": entity, "model": model, "mlm": mlm, "mlm_sha256": manifest.get("sha256"),
            "max_documents": max_documents, "max_public": max_public, "max_calibration": max_calibration,
            "max_chars": max_chars, "seed": seed, "weights": list(WEIGHTS)}
    paths = {op: record_path(root, corpus, op, model=model, entity=entity, max_documents=max_documents, seed=seed)
             for op in operators}
    todo = [op for op in operators if existing_record(paths[op], {**base, "operator": op}, force=force) is None]
    for op in operators:
        if op not in todo:
            say(f"infill {corpus} {op}: {paths[op]} (kept: same configuration)")
    if not todo:
        return [paths[op] for op in operators]

    from veil.defenses.redaction import Detector

    texts, splits = _texts(corpus, max_chars)
    public = [texts[i] for i in np.flatnonzero(splits == "train")[:max_public]]
    calib = [texts[i] for i in np.flatnonzero(splits == "dev")[:max_calibration]]
    test = np.flatnonzero(splits == "test")
    if len(test) > max_documents:
        test = np.sort(np.random.default_rng(seed).choice(test, size=max_documents, replace=False))
    private = [texts[i] for i in test]
    say(f"infill {corpus}: Presidio ({model}) analyses {len(public)} public, {len(calib)} calibration and "
        f"{len(private)} private texts ({sum(map(len, public + calib + private)) / 1e6:.2f}M characters, about "
        f"20k characters/s on one core); then veil's masked LM scores every {entity} slot "
        f"{len(WEIGHTS) and 6} times per operator ({', '.join(todo)})")
    start = time.perf_counter()
    detector = Detector(model=model)
    found_public = detector.detect(public)
    found_calib = detector.detect(calib)
    found_private = detector.detect(private)
    detect_s = time.perf_counter() - start
    candidates = [t[d.start:d.end] for t, ds in zip(public, found_public) for d in ds if d.entity == entity]
    say(f"infill {corpus}: {len(candidates)} public {entity} mentions ({len(set(candidates))} distinct values) in "
        f"{detect_s:.0f} s")
    if len(set(candidates)) < 2:
        raise InvalidParameterError(f"{corpus}: the public split has fewer than 2 distinct {entity} values; "
                                    "infilling has nothing to rank")
    from veil.attacks.word_recovery.veil_mlm import _model

    loaded = _model(mlm)
    out = []
    for op in operators:
        if op in todo:
            rec = _one(op, base, candidates, loaded, calib, found_calib, private, found_private, model, entity,
                       detect_s, say)
            rec.write(paths[op])
            m = rec.metrics
            say(f"infill {corpus} {op}: top-1 {m['top1'].mean:.3f} (without the LM {m['top1_prior'].mean:.3f}, "
                f"floor {m['floor_top1'].mean:.3f}), top-10 {m['top10'].mean:.3f} over {m['top1'].n} targets in "
                f"{rec.wall_time_s:.0f} s -> {paths[op]}")
        out.append(paths[op])
    return out


def _one(op: str, base: dict[str, Any], candidates: list[str], loaded: Any, calib: list[str], found_calib: Any,
         private: list[str], found_private: Any, model: str, entity: str, detect_s: float,
         say: Callable[[str], None]) -> ResultRecord:
    from veil.attacks.text import observe_text
    from veil.attacks.text.infilling import Infilling
    from veil.defenses.redaction import PresidioRedaction
    from veil.metrics.stats import paired_hits_test

    start = time.perf_counter()
    # the attacker's calibration: its own redactor (same public configuration, its own key) on public dev texts
    mine = PresidioRedaction(operator=op, model=model)
    red_c = mine.redact(calib, detections=found_calib)
    obs_c = observe_text([r.text for r in red_c], mine)
    slots_c, values_c = _targets(red_c, obs_c, entity, op)
    attack = Infilling(candidates, entity=entity, model=loaded, prior=False)
    rows_c = [attack.index(v) for v in values_c]
    lm_c = attack.scores(obs_c, slots_c) if slots_c else np.zeros((0, len(attack.keys)))
    grid = []
    for w in WEIGHTS:
        r = _ranks(_combine(lm_c, attack.prior, w), rows_c)
        grid.append({"weight": w, "top1": float((r == 1).mean()) if len(r) else 0.0,
                     "top10": float(((r >= 1) & (r <= 10)).mean()) if len(r) else 0.0, "n": int(len(r))})
    best = max(grid, key=lambda g: (g["top1"], g["top10"], -abs(np.log(max(g["weight"], 1e-3)))))
    weight = best["weight"]
    tried = ", ".join("{:g}: {:.3f}".format(g["weight"], g["top1"]) for g in grid)
    say(f"infill {base['corpus']} {op}: weight {weight:g} chosen on {len(slots_c)} calibration slots ({tried})")

    # the release
    owner = PresidioRedaction(operator=op, model=model)  # the owner's key and randomness: OS entropy
    red = owner.redact(private, detections=found_private)
    obs = observe_text([r.text for r in red], owner)
    slots, values = _targets(red, obs, entity, op)
    rows = [attack.index(v) for v in values]
    lm = attack.scores(obs, slots) if slots else np.zeros((0, len(attack.keys)))
    ranks = _ranks(_combine(lm, attack.prior, weight), rows)
    ranks_prior = _ranks(_combine(lm, attack.prior, 0.0), rows)  # no LM: prior + the operator's facts
    top1, top10 = ranks == 1, (ranks >= 1) & (ranks <= 10)
    p1, p10 = ranks_prior == 1, (ranks_prior >= 1) & (ranks_prior <= 10)
    f1 = np.asarray([r == 0 for r in rows], dtype=bool)  # candidate row 0: the most frequent public value
    f10 = np.asarray([r is not None and r < 10 for r in rows], dtype=bool)
    v_floor = paired_hits_test(top1.astype(float), f1.astype(float)) if len(slots) else None
    v_prior = paired_hits_test(top1.astype(float), p1.astype(float)) if len(slots) else None
    metrics = {"top1": _rate(top1), "top10": _rate(top10), "top1_prior": _rate(p1), "top10_prior": _rate(p10),
               "floor_top1": _rate(f1), "floor_top10": _rate(f10),
               "coverage": _rate(np.asarray([r is not None for r in rows], dtype=bool)),
               "targets": Metric(mean=float(len(slots)), n=len(private)),
               "documents_with_targets": Metric(mean=float(len({s.doc for s in slots})), n=len(private))}
    if v_floor is not None:
        metrics["p_floor"] = Metric(mean=v_floor.p_value, n=v_floor.n)
        metrics["p_prior"] = Metric(mean=v_prior.p_value, n=v_prior.n)
    examples = []
    for i in range(min(8, len(slots))):
        s = slots[i]
        text = obs.texts[s.doc]
        order = np.argsort(-_combine(lm[i:i + 1], attack.prior, weight)[0], kind="stable")[:5]
        examples.append({"context": text[max(0, s.start - 80):s.end + 80], "slot": s.text, "truth": values[i],
                         "rank": int(ranks[i]), "guesses": [attack.values[j] for j in order]})
    config = {**base, "operator": op, "weight": weight, "calibration": grid, "attack": attack.config(),
              "defense": dict(obs.defense), "candidates": len(attack.keys), "private_documents": len(private),
              "tests": {"p_floor": None if v_floor is None else v_floor.to_dict(),
                        "p_prior": None if v_prior is None else v_prior.to_dict()},
              "owner_randomness": "os-entropy (never the experiment seed)"}
    return ResultRecord(method=METHOD, experiment=f"infill-{base['corpus']}-{op}", config=config, metrics=metrics,
                        wall_time_s=time.perf_counter() - start,
                        extra={"detect_seconds_shared": round(detect_s, 3), "examples": examples,
                               "most_frequent": attack.values[:10]})
