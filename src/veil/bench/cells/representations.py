"""Representations (Coavoux, Narayan & Cohen 2018): the attribute attackers on r(x), and the main task's utility.

A defense that releases ``representations`` changes how the main model trains (an objective added to the main
loss) or what it releases afterwards (LEACE erases linearly). One cell setting = one training of the main model
(frozen MiniLM + a 64-wide tanh projection r(x) + head, the defense's objective, dev-selected on main accuracy;
:class:`~veil.experiments.adversarial.attributes.AttributeRun`'s defaults: 16 epochs, batches of 32), followed by
the post-hoc eavesdroppers ``mlp`` (the paper's), ``mlp-wide`` and ``linear``
(:class:`~veil.attacks.attribute.AttributeAttack`) trained on the train split's r(x) and scored on test. It is the
run of :func:`~veil.experiments.adversarial.attributes.run_attribute` (both call
:func:`~veil.experiments.adversarial.attributes.train_attribute`), whose outcome also keeps what the run's record
does not: every attacker's per-test-example hits, for a paired test against the floor.

The utility cell and the attack cell of a setting share that one training: it is cached per process on the
corpus' bench data (``data._cache``), keyed by (defense, setting, seed); the sequential runner runs the two cells
back to back. Ray workers that each get one of the pair train it again, with the same numbers (one torch thread,
every random choice from the cell's seed: these defenses hold no secret key).

No representations defense is the undefended model (the ``none`` defense releases vectors and serves sentence
classification), so every record carries the undefended run's numbers as ``reference`` (the plain objective, same
seed and budget; trained once per process and seed).

The attack cell's success is the strongest post-hoc attacker's test score (mean per-variable accuracy for
attributes, micro-F for entity sets), the strongest chosen by each attacker's own DEV score (no selection on the
test split), tested against the floor (the best constant predictor on the attacker's training labels) with a
one-sided paired permutation test over test examples (:func:`paired_floor_test`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from veil.bench.cells.common import ALPHA, bench_block, finish
from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord

__all__ = ["attribute_cell", "representations_inversion_cell", "representations_utility", "paired_floor_test",
           "train_setting", "score_attribute", "SETTING_KEYS", "WIDTH"]

WIDTH = 64
#: the keys a representations defense's bench setting may hold: AttributeRun's objective parameters
SETTING_KEYS = ("alpha", "beta", "reduction", "max_chars")
SPLITS = ("train", "dev", "test")
#: the permutation test's resamples (its p-value is valid at any count: Phipson and Smyth 2010)
RESAMPLES = 9999


def _attribute_run(cell: Any, data: Any, defense: str, setting: dict[str, Any]) -> Any:
    from veil.experiments.adversarial.attributes import AttributeRun

    unknown = sorted(set(setting) - set(SETTING_KEYS))
    if unknown:
        raise InvalidParameterError(f"a representations setting takes {', '.join(SETTING_KEYS)}; got "
                                    f"{', '.join(unknown)} for defense {defense!r}")
    return AttributeRun(corpus=data.base, defense=defense, encoder="minilm", width=WIDTH, seed=cell.config.seed,
                        **setting)


def train_setting(cfg: Any, corpus: Any) -> Any:
    """The setting's training and attackers: :func:`~veil.experiments.adversarial.attributes.train_attribute`, the
    adversarial experiment's own phases 1-3, with every attacker's per-test-example rows."""
    from veil.experiments.adversarial.attributes import train_attribute

    return train_attribute(cfg, corpus)


def _outcome(cell: Any, data: Any, defense: str | None = None) -> tuple[Any, bool]:
    """(the trained setting, whether it was trained now): the cell's own (``defense`` None) or the undefended
    reference (``defense="none"``), from the corpus' per-process cache."""
    import torch

    setting = cell.setting if defense is None else {}
    defense = cell.defense if defense is None else defense
    cfg = _attribute_run(cell, data, defense, setting)
    key = ("representations", cfg)
    if key in data._cache:
        return data._cache[key], False
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: a seeded setting gives the same numbers in any worker
    try:
        data._cache[key] = train_setting(cfg, data.corpus)
    finally:
        torch.set_num_threads(threads)
    return data._cache[key], True


def paired_floor_test(rows: np.ndarray, floor: np.ndarray, kind: str, *, alpha: float = ALPHA,
                      resamples: int = RESAMPLES, rng: Any = 0) -> Any:
    """One-sided paired permutation test: does the attacker score higher than the floor on the same test examples?

    ``rows`` / ``floor``: per test example, the attacker's and the floor's (correct variables / V) for attributes or
    (TP, FP, FN) for entities. H0: on every example the two predictions are exchangeable. Each resample swaps the
    attacker's and the floor's row of each example with probability 1/2 and recomputes the statistic, the score
    difference (mean accuracy, or micro-F from the summed counts); p = (1 + #{resampled >= observed}) /
    (resamples + 1), valid at any number of resamples (Phipson and Smyth 2010). Paired, so the floor's own
    sampling error on the same examples cancels (unlike a two-sample test).
    """
    from veil.metrics.stats import Verdict, check_alpha
    from veil.random import as_generator

    alpha = check_alpha(alpha)
    a, b = np.asarray(rows, dtype=np.float64), np.asarray(floor, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or len(a) == 0:
        raise InvalidParameterError(f"rows and floor must be the same (n, m) per-example arrays, got {a.shape} and "
                                    f"{b.shape}")

    def score(sums: np.ndarray) -> np.ndarray:  # (..., m) summed rows -> the score
        if kind == "entities":
            tp, fp, fn = sums[..., 0], sums[..., 1], sums[..., 2]
            den = 2 * tp + fp + fn
            return np.where(den > 0, 2 * tp / np.where(den > 0, den, 1.0), 0.0)
        return sums[..., 0] / len(a)

    observed = float(score(a.sum(0)) - score(b.sum(0)))
    gen = as_generator(rng)
    d = b - a
    chunk = max(1, min(resamples, (1 << 21) // len(a)))
    extreme, done = 0, 0
    while done < resamples:
        c = min(chunk, resamples - done)
        swap = (gen.random((c, len(a))) < 0.5).astype(np.float64)
        moved = swap @ d  # (c, m): what swapping moves from the floor to the attacker
        stat = score(a.sum(0) + moved) - score(b.sum(0) - moved)
        extreme += int((stat >= observed - 1e-12).sum())
        done += c
    p = (1 + extreme) / (resamples + 1)
    what = "micro-F" if kind == "entities" else "mean per-variable accuracy"
    return Verdict(test=f"paired permutation (attacker and floor swapped per test example, {resamples} resamples), "
                        "one-sided", statistic=observed, p_value=float(p), alpha=alpha, reject=bool(p <= alpha),
                   null=f"per test example the attacker's and the best constant predictor's predictions are "
                        f"exchangeable ({what} no higher than the floor's)", n=len(a))


def _success(kind: str) -> str:
    return "entity micro-F" if kind == "entities" else "attribute accuracy"


def _reference(cell: Any, data: Any) -> dict[str, Any]:
    """The undefended run's utility and strongest attack (the bench's reference for this task)."""
    ref, _ = _outcome(cell, data, defense="none")
    arch = ref.strongest()
    verdict = paired_floor_test(ref.rows[arch], ref.rows["floor"], ref.kind, rng=cell.config.seed)
    return {"defense": "none (plain objective, same seed and budget)",
            "utility": ref.metrics["test_accuracy"].to_dict(), "success": _success(ref.kind),
            "success_metric": ref.attacks[arch].metrics["score"].to_dict(), "attacker": arch,
            "p_value": verdict.p_value}


def _record(cell: Any, out: Any, trained: bool, metrics: dict[str, Metric], what: str) -> ResultRecord:
    config = {what: "frozen MiniLM + a 64-wide tanh projection r(x) + MLP head, trained with the defense's objective "
                    "(dev-selected on main accuracy); Coavoux et al. 2018's setting",
              "run": out.run.to_dict(), "run_name": out.run.name, "objective": out.run.objective_params(),
              "n_train": out.n["train"], "n_dev": out.n["dev"], "n_test": out.n["test"],
              "randomness": "no secret key: the seed sets the model's and the attackers' initialisation, the batch "
                            "order and the defense's own draws"}
    extra = {"best_epoch": out.best_epoch, "train_seconds": out.train_seconds, "kind": out.kind,
             "defense_config": out.defense_config,
             "training": ("trained in this cell" if trained else
                          "shared: trained once in this process for the setting's cells (its seconds are those of "
                          "the cell that trained it)"),
             "setting_seconds": out.seconds}
    return ResultRecord(method="bench", experiment=cell.id, config=config, metrics=metrics, wall_time_s=0.0,
                        extra=extra)


def representations_utility(cell: Any, data: Any) -> ResultRecord:
    """The main task's test accuracy (Wilson 95% interval) of the model trained with the cell's defense; the
    majority rate is the training split's most frequent class on test."""
    start = time.perf_counter()
    out, trained = _outcome(cell, data)
    reference = _reference(cell, data)
    keep = ("test_accuracy", "majority_accuracy", "dev_accuracy")
    metrics = {"accuracy" if k == "test_accuracy" else k: out.metrics[k] for k in keep}
    rec = _record(cell, out, trained, metrics, "utility")
    bench = bench_block(utility="accuracy", utility_metric=out.metrics["test_accuracy"].to_dict(),
                        majority_rate=out.metrics["majority_accuracy"].mean, reference=reference)
    return finish(rec, cell, data, start, bench)


def score_attribute(attacks: dict[str, Any], rows: dict[str, np.ndarray], kind: str, floor: Metric, n_dev: int,
                    seed: int) -> tuple[dict[str, Metric], dict[str, Any], str, dict[str, Any]]:
    """The post-hoc attackers' results (:func:`~veil.experiments.adversarial.attributes.post_hoc_attackers`) scored
    as the bench's attribute cell scores them: the strongest by its own dev score, each tested against the floor
    (``floor``: the best constant predictor's score) by :func:`paired_floor_test`. Returns (metrics, each
    attacker's verdict as a dict, the strongest, the ``extra["bench"]`` entries). The bench cell and
    ``veil.attack`` on a ``representations`` release both score through this."""
    from veil.experiments.adversarial.attributes import ATTACKERS, strongest_attacker

    arch = strongest_attacker(attacks)
    verdicts = {a: paired_floor_test(rows[a], rows["floor"], kind, rng=seed) for a in ATTACKERS}
    metrics = {"score": attacks[arch].metrics["score"], "floor_score": floor}
    for a in ATTACKERS:
        res = attacks[a]
        metrics[f"score[{a}]"] = res.metrics["score"]
        metrics[f"advantage[{a}]"] = res.metrics["advantage"]
        metrics[f"dev_score[{a}]"] = Metric(float(res.config["dev_score"]), n=n_dev)
    score = ("micro-F over the private entity sets (which of the top people a passage names)" if kind == "entities"
             else "mean per-variable accuracy of the private attributes")
    bench = dict(success=_success(kind), success_metric=attacks[arch].metrics["score"].to_dict(),
                 comparable=True, random_rate=floor.mean, floor_success=floor.to_dict(),
                 test=verdicts[arch].to_dict(), attacker=arch, versus="the best constant predictor",
                 measure=f"attribute inference from r(x): {score}, by the strongest of the post-hoc attackers "
                         f"{', '.join(ATTACKERS)} chosen on its own dev split ({arch}); the floor is the best "
                         "constant predictor on the attacker's training labels")
    return metrics, {a: v.to_dict() for a, v in verdicts.items()}, arch, bench


def attribute_cell(cell: Any, data: Any) -> ResultRecord:
    """The strongest post-hoc attacker on the cell's r(x) (chosen on its dev split), tested against the floor
    (:func:`score_attribute`)."""
    from veil.experiments.adversarial.attributes import ATTACKERS

    start = time.perf_counter()
    out, trained = _outcome(cell, data)
    reference = _reference(cell, data)
    metrics, significance, arch, scored = score_attribute(out.attacks, out.rows, out.kind,
                                                          out.metrics["floor_score"], out.n["dev"], cell.config.seed)
    for k in ("score[adversary]", "paper_floor_privacy"):
        if k in out.metrics:
            metrics[k] = out.metrics[k]
    rec = _record(cell, out, trained, metrics, "attacked")
    rec.config["significance"] = significance
    rec.config["attackers"] = {a: out.attacks[a].to_dict()["config"] for a in ATTACKERS}
    tail = ("versus", "measure")  # the block's keys in the order the cell always wrote them
    bench = bench_block(**{k: v for k, v in scored.items() if k not in tail}, reference=reference,
                        **{k: scored[k] for k in tail})
    return finish(rec, cell, data, start, bench)


def _minilm(texts: list[str]) -> np.ndarray:
    """The frozen MiniLM vectors of ``texts`` as the representations cells read them (the projection's input)."""
    from veil.encoders import TextEncoder

    return TextEncoder("minilm").encode(texts, progress=False)


def representations_inversion_cell(cell: Any, data: Any) -> ResultRecord:
    """Embedding inversion of r(x) (:class:`~veil.attacks.inversion.mapped.MappedInversion`): the attacker queries
    the released encoder on the inverter's own public training sentences, learns the map back to MiniLM's space,
    and inverts the r(x) of at most :data:`~veil.bench.cells.vectors.INVERSION_QUERIES` test texts. Scored as the
    vectors' inversion cells are (token F1 and the rest against each private text, a paired permutation test
    against the floor: the same attack on the r(x) of uniformly drawn public sentences), with two references on
    the same texts: the same attack on the undefended model's r(x) (``undefended_*``: does the objective make r(x)
    harder to invert?) and the inverter on the texts' own MiniLM vectors (``minilm_*``: what the 64-wide model
    keeps of them at all)."""
    from veil.attacks.base import get_attack
    from veil.bench.cells.common import AttackResources, cell_queries
    from veil.bench.cells.vectors import INVERSION_QUERIES, inversion_record
    from veil.bench.inversion import public_sentences_of
    from veil.metrics.inversion import paired_difference, person_names, score_inversions

    start = time.perf_counter()
    out, trained = _outcome(cell, data)
    ref, _ = _outcome(cell, data, defense="none")
    if out.query is None or out.ids is None:
        raise InvalidParameterError("inverting r(x) needs the projection encoder over MiniLM vectors (encoder "
                                    "'minilm'), whose input an attacker can embed itself")
    test = np.asarray(out.ids["test"])
    cap = INVERSION_QUERIES[0 if cell.config.quick else 1]
    want = min(cap, cell.config.n_queries)
    n = want if want <= len(test) else cell_queries(cell, len(test), "test texts")
    sel = np.sort(np.random.default_rng(cell.config.seed).choice(len(test), size=n, replace=False))
    texts_all = data.corpus.texts
    refs = [texts_all[i] for i in test[sel]]
    X = _minilm(refs)  # the scorer's references, and the input of the released encoder for these texts
    resources = AttackResources(index=None, seed=cell.config.seed, data=data, cell=cell)
    _, public_vectors, _ = public_sentences_of(get_attack(cell.attack).for_bench(resources).inverter,
                                               log=lambda _: None)
    pick = np.random.default_rng([cell.config.seed, 1]).integers(0, len(public_vectors), size=n)

    def attack(outcome: Any) -> tuple[Any, list[str], list[str], np.ndarray]:
        attacker = get_attack(cell.attack).for_bench(resources).fit(outcome.query(public_vectors), public_vectors)
        released = outcome.query(X)  # the r(x) the model releases for the queried test texts
        floor = attacker.run(outcome.query(public_vectors[pick]))  # r(x) of public sentences: nothing private
        return attacker, attacker.run(released), floor, attacker.map(released)

    attacker, texts, floor, seen = attack(out)
    key = ("representations-inversion", ref.run, n, cell.config.seed)
    if key not in data._cache:  # the references: the undefended model's r(x), and the MiniLM vectors themselves
        _, plain, _, _ = attack(ref)
        data._cache[key] = (plain, attacker.invert(X))
    plain, direct = data._cache[key]
    names = person_names(refs)

    def score(hyps: list[str]) -> Any:
        return score_inversions(refs, hyps, reference_vectors=X, names=names, seed=cell.config.seed,
                                hypothesis_vectors=attacker.encoder.encode(hyps, progress=False))

    rec = inversion_record(
        cell, attacker, (refs, X), texts, seen, {"defense": cell.defense, **out.defense_config}, floor,
        "the same attack on the r(x) of uniformly drawn public sentences (the inverter's training sentences; numpy "
        f"default_rng([{cell.config.seed}, 1]))", cap, start, data,
        extra_config={"references": "the private test text", "training": "trained in this cell" if trained else
                      "shared with the setting's other cells in this process",
                      "undefended": "the same attack on the r(x) of the model trained with the plain objective (same "
                                    "seed and budget)",
                      "minilm": "the inverter on the texts' own MiniLM vectors (the projection's input)"})
    own = score(texts)
    for who, hyps in (("undefended", plain), ("minilm", direct)):
        theirs = score(hyps)
        rec.metrics.update({f"{who}_{k}": v for k, v in theirs.metrics().items()})
        rec.metrics[f"gain_over_{who}_token_f1"] = paired_difference(own, theirs)
    return rec
