"""The bench's language-modeling corpus: a base corpus' sentences with planted secrets, for the cells of defenses that
release a ``generative-model`` (a causal language model fine-tuned on the private text, issue 52).

* ``rt-polarity-planted``: rt-polarity's sentences, PII values and Secret Sharer canaries planted at 1 and 16
  copies (:func:`veil.corpora.planted.build_planted`), as ``veil lm train`` builds it.

A setting's run (:func:`bench_lm_run`) is the generation experiment's own (:mod:`veil.experiments.generation.run`):
quick, its :data:`~veil.experiments.generation.run.QUICK` run (300 plain training texts, 60 steps); full, its default
run (1,000 steps) on 5,000 plain training texts, so that the attacker has public text of the domain for its reference
model. The trained models are the experiment's, cached in ``VEIL_HOME/lm/<run key>/``: ``veil lm train`` and the
bench share them. ``limit`` (smoke runs and tests) caps the plain training and held-out texts, the steps and the
samples at ``limit`` (the top samples at half of it, the candidates, of canaries and of PII values, at four times it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from veil.errors import InvalidParameterError

__all__ = ["PlantedBenchData", "planted_data", "bench_lm_run", "PLANTED_CORPORA", "FULL_TRAIN"]

#: bench corpus name -> the built-in corpus whose sentences it plants secrets in
PLANTED_CORPORA = {"rt-polarity-planted": "rt-polarity"}
#: the full bench's plain training texts (the rest of rt-polarity, less the held-out texts, is the attacker's public
#: text)
FULL_TRAIN = 5000


@dataclass
class PlantedBenchData:
    """Everything the generative-model cells of one corpus share (built once per process by
    :func:`veil.bench.data.bench_data`); ``_cache`` holds the loaded models and the records the cells share."""

    name: str
    base: str
    task: str
    quick: bool
    limit: int | None = None
    provenance: list[dict[str, Any]] = field(default_factory=list)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    def describe(self) -> dict[str, Any]:
        run = bench_lm_run(self, "lm-plain", {})
        splits = {"train (plain, before planting)": run.n_train, "held-out": run.n_heldout}
        return {"corpus": self.name, "task": self.task, "slice": "quick" if self.quick else "full",
                "n": (run.n_train or 0) + run.n_heldout, "splits": splits, "base": self.base, "n_train": run.n_train,
                "n_heldout": run.n_heldout, "counts": list(run.counts),
                "canaries_per_count": run.canaries_per_count, "pii_per_count": run.pii_per_count,
                "provenance": self.provenance, "limit": self.limit}


def planted_data(name: str, quick: bool, limit: int | None = None) -> PlantedBenchData:
    """The bench corpus ``name`` (:data:`PLANTED_CORPORA`); its base corpus must be pulled (``veil corpora pull
    rt-polarity``)."""
    import veil.corpora as vc
    from veil.bench.data import provenance_of

    if name not in PLANTED_CORPORA:
        raise InvalidParameterError(f"{name!r} is not a language-modeling bench corpus; choose from "
                                    f"{', '.join(PLANTED_CORPORA)}")
    if limit is not None:
        from veil.validation import check_int

        limit = check_int("limit", limit, minimum=10)
    base = PLANTED_CORPORA[name]
    return PlantedBenchData(name=name, base=base, task="language-modeling", quick=bool(quick), limit=limit,
                            provenance=provenance_of(vc.load(base)))


def bench_lm_run(data: Any, defense: str, setting: dict[str, Any], seed: int = 0) -> Any:
    """The :class:`~veil.experiments.generation.run.LMRun` of one setting of ``defense`` on ``data`` (module
    docstring): the generation experiment's quick or default run, with the setting's epsilon for ``lm-dpsgd``."""
    from veil.experiments.generation.run import lm_run

    unknown = sorted(set(setting) - {"epsilon"})
    if unknown:
        raise InvalidParameterError(f"a generative-model bench setting takes only epsilon (lm-dpsgd), not "
                                    f"{', '.join(unknown)}")
    run = lm_run(corpus=data.base, defense=defense, seed=seed, quick=data.quick, epsilon=setting.get("epsilon"))
    if not data.quick:
        run = dataclasses.replace(run, n_train=FULL_TRAIN)
    if data.limit is not None:
        cap = data.limit
        run = dataclasses.replace(run, n_train=min(run.n_train or cap, cap), n_heldout=min(run.n_heldout, cap),
                                  steps=min(run.steps, cap), candidates=min(run.candidates, 4 * cap),
                                  samples=min(run.samples, cap), top=min(run.top, cap // 2))
    return run
