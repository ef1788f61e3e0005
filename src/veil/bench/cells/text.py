"""Released text read in its own form: infilling of redacted spans (:class:`~veil.attacks.text.infilling.Infilling`).

The private items are the corpus' test documents (at most the cell's query count), released sentence by sentence
as :func:`veil.bench.cells.vectors.release_vectors` releases them (one transform of every sentence, so pseudonyms
and hashes are consistent over the whole release). The attacker's candidates are the PERSON values its own run
of the same Presidio analyzer finds in the public (train) documents, with their counts; it scores with veil's
masked LM (``mlm-quick`` in the quick bench, ``mlm`` in the full one) at weight 1 against the log public frequency
(the bench does not calibrate the weight; ``veil redaction infill`` does). Success is top-1 recovery of the
redacted PERSON values (Wilson 95% interval); the reference is the most-frequent-value floor on the same targets,
and the test an exact one-sided McNemar test against it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from veil.bench.cells.common import ALPHA, bench_block, cell_queries, finish, make_defense
from veil.results import Metric, ResultRecord

__all__ = ["infill_cell", "MLM"]

#: veil's masked LM the infilling cells use: (quick bench, full bench)
MLM = ("mlm-quick", "mlm")
ENTITY = "PERSON"


def _candidates(data: Any, model: str) -> list[str]:
    key = ("redaction-public-values", model)
    if key not in data._cache:
        from veil.defenses.redaction import Detector

        public = [s for i in data.splits["train"] for s in data.sentences[i]]
        found = Detector(model=model).detect(public)
        data._cache[key] = [t[d.start:d.end] for t, ds in zip(public, found) for d in ds if d.entity == ENTITY]
    return data._cache[key]


def infill_cell(cell: Any, data: Any) -> ResultRecord:
    """Infilling of the redacted PERSON spans of the private documents (module docstring)."""
    from veil.attacks.text import observe_text
    from veil.attacks.text.infilling import Infilling
    from veil.metrics.leakage import wilson_interval
    from veil.metrics.stats import paired_hits_test
    from veil.models.mlm import load_mlm

    start = time.perf_counter()
    defense = make_defense(cell, data)
    n = cell_queries(cell, len(data.splits["test"]), "private test documents")
    rows = np.sort(np.random.default_rng(cell.config.seed).choice(data.splits["test"], size=n, replace=False))
    sentences = [s for i in rows for s in data.sentences[i]]
    red = defense.redact(sentences)
    obs = observe_text([r.text for r in red], defense)
    candidates = _candidates(data, defense.detector.model)
    mlm = MLM[0 if cell.config.quick else 1]
    metrics: dict[str, Metric] = {}
    config: dict[str, Any] = {"defense": defense.config(), "documents": int(n), "sentences": len(sentences),
                              "entity": ENTITY, "mlm": mlm, "public_mentions": len(candidates)}
    slots, values = [], []
    if len(set(candidates)) >= 2:
        from veil.experiments.redaction.infilling import _targets  # the slot of each redacted span (scorer side)

        attack = Infilling(candidates, entity=ENTITY, model=load_mlm(mlm))
        slots, values = _targets(red, obs, ENTITY, defense.operator)
        config["attack"] = attack.config()
    if slots:
        ranks = attack.rank(obs, slots, values)
        hits = ranks == 1
        floor_hits = np.asarray([attack.index(v) == 0 for v in values])
        test = paired_hits_test(hits.astype(float), floor_hits.astype(float), alpha=ALPHA).to_dict()
        lo, hi = wilson_interval(float(hits.sum()), len(hits))
        metrics["top1"] = Metric(mean=float(hits.mean()), n=len(hits), ci_low=lo, ci_high=hi, ci_level=0.95)
        metrics["top10"] = Metric(mean=float(((ranks >= 1) & (ranks <= 10)).mean()), n=len(hits))
        metrics["floor_top1"] = Metric(mean=float(floor_hits.mean()), n=len(hits))
        metrics["coverage"] = Metric(mean=float(np.mean([attack.index(v) is not None for v in values])),
                                     n=len(hits))
        floor_rate = float(floor_hits.mean())
    else:  # nothing to recover here: said so, never scored as a success
        metrics["top1"] = Metric(mean=0.0, n=0)
        test = {"test": "none", "p_value": 1.0, "alpha": ALPHA, "reject": False, "n": 0,
                "null": f"no redacted {ENTITY} span with public candidates in these documents"}
        floor_rate = 0.0
    rec = ResultRecord(method="bench", experiment=cell.id, config=config, metrics=metrics, wall_time_s=0.0)
    bench = bench_block(success="top1", success_metric=metrics["top1"].to_dict(), comparable=False,
                        random_rate=floor_rate, test=test,
                        floor_success=metrics["floor_top1"].to_dict() if "floor_top1" in metrics else None,
                        measure=f"infilling: the share of redacted {ENTITY} values the attacker ranks first",
                        versus="the most frequent public value")
    return finish(rec, cell, data, start, bench)
