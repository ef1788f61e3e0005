"""How one bench cell is run and scored, per observation kind (and the utility of each task).

A cell function takes a :class:`~veil.bench.plan.Cell` and the corpus' :class:`~veil.bench.data.BenchData` and
returns a :class:`~veil.results.ResultRecord` whose ``extra["bench"]`` block says what the bench needs: the
attack's ``success`` (a named metric with its CI), whether that success is a re-identification rate comparable
across attacks, the random rate and the test against it, or the utility of the setting.

Separation of what is seen from what is scored: the defense's release is made here, the attack is built with
:meth:`~veil.attacks.base.Attack.for_bench` from :class:`AttackResources` (the index, public statistics, its own
seed, known pairs where its threat model grants them) and gets only the :class:`~veil.attacks.base.Observation`;
the ground truth (query ids, mixing details) goes to the scorer only.

Keys: every defense key (TextHide's pool and mixing, DP noise and sampling) comes from the OS CSPRNG unless the
bench was given ``key_seed`` (checks that two runs agree); the experiment seed selects queries and the attacker's
own choices only.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord

__all__ = ["AttackResources", "retrieval_cell", "mask_recovery_cell", "unmix_cell", "audit_cell",
           "sentence_utility_cell", "document_utility_cell", "UTILITY_CELLS", "RUNNABLE_RELEASES", "key_rng",
           "make_defense", "release_vectors"]

#: task -> "module:function" measuring a defense's utility on it
UTILITY_CELLS = {"sentence-classification": "veil.bench.cells:sentence_utility_cell",
                 "document-classification": "veil.bench.cells:document_utility_cell"}
ALPHA = 0.05
#: the release kinds whose bench cells are built (what the defense lets out, made here, and read as vectors); the
#: plan still lists cells of the other kinds (``veil bench --list``), and ``veil bench`` says which it cannot run
RUNNABLE_RELEASES = ("vectors", "training-encodings", "document-embeddings")


def key_rng(cell: Any, purpose: str) -> int | None:
    """None (OS CSPRNG: the default) or, with the bench's ``key_seed``, an int derived from it and the cell."""
    if cell.config.key_seed is None:
        return None
    digest = hashlib.sha256(f"{cell.config.key_seed}|{cell.id}|{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def make_defense(cell: Any, data: Any, **options: Any) -> Any:
    """The cell's defense, built by the defense itself from the corpus' public data and a key source."""
    import warnings

    from veil.defenses.base import get_defense
    from veil.errors import PrivacyLeakWarning

    with warnings.catch_warnings():
        if cell.config.key_seed is not None:  # asked for; recorded in every record as "secret_randomness"
            warnings.simplefilter("ignore", PrivacyLeakWarning)
        return get_defense(cell.defense).bench_make(cell.setting, data, rng=key_rng(cell, "defense"), **options)


def _secret_note(cell: Any) -> str:
    if cell.config.key_seed is None:
        return "OS CSPRNG per cell (keys, mixing, DP noise); the seed selects queries and attacker choices only"
    return (f"SEEDED from key_seed={cell.config.key_seed} (reproducible, for checks; not private); the seed "
            "selects queries and attacker choices")


def _queries(cell: Any, available: int, what: str) -> int:
    """The cell's queries, or all ``available`` with a one-line warning (kept in the record and the outcome)."""
    n = cell.config.n_queries
    if n <= available:
        return n
    import warnings

    from veil.errors import DataWarning

    warnings.warn(f"{n} queries asked but only {available} {what}; all {available} attacked (queries are drawn "
                  f"without replacement)", DataWarning, stacklevel=3)
    return available


def release_vectors(cell: Any, data: Any, rows: np.ndarray) -> tuple[Any, Any]:
    """What an eavesdropper sees of the private items ``rows``, read as vectors, by the defense's release kind
    (through the kind's one verb): (Observation, mixing truth or None). The truth is for the scorer only."""
    from veil.attacks.base import Observation
    from veil.attacks.retrieval import observe_original
    from veil.attacks.retrieval.observe import protect_with_truth

    defense = make_defense(cell, data, record_details=True)
    kind = type(defense).releases
    if cell.defense == "none":
        return observe_original(data.X[rows]), None
    if kind == "vectors":
        return Observation(defense.protect(data.X[rows]), defense=defense.config(), source="defense"), None
    if kind == "training-encodings":
        obs, truth = protect_with_truth(data.X[rows], defense)
        return obs, truth
    if kind == "document-embeddings":
        emb = defense.release_embeddings([data.documents[i] for i in rows])
        return Observation(emb, defense=defense.config(), source="defense"), None
    raise InvalidParameterError(f"defense {cell.defense!r} releases {kind!r}, which the bench cannot make yet "
                                f"(built: {', '.join(RUNNABLE_RELEASES)})")


@dataclass
class AttackResources:
    """What an attack in one bench cell may use: its threat model picks from these."""

    index: Any
    seed: int
    data: Any
    cell: Any
    train_epochs: int = 5
    k: int | None = None
    _lazy: dict[str, Callable[[], Any]] = field(default_factory=dict, repr=False)

    @property
    def stats(self) -> Any:
        """Public statistics: a held-out in-domain sample (the corpus' dev + test split, never encrypted)."""
        from veil.attacks.texthide.observe import PublicStats

        d = self.data
        held = np.concatenate([d.splits["dev"], d.splits["test"]])
        return PublicStats.from_vectors(d.X[held], source=f"{d.name} dev+test ({len(held)} held-out texts)")

    def known_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(protected, original) pairs of texts the attacker owns, protected with the same key (RepRecon's
        known-plaintext threat model): public sentences, or the public train documents."""
        return self._lazy["known_pairs"]()

    def recovered_masks(self) -> np.ndarray:
        return self._lazy["recovered_masks"]()


def _bench_block(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


def _finish(rec: ResultRecord, cell: Any, data: Any, start: float, bench: dict[str, Any]) -> ResultRecord:
    rec.method, rec.experiment = "bench", cell.id
    rec.config.update({"cell": cell.to_dict(), "corpus": data.describe(), "secret_randomness": _secret_note(cell)})
    rec.extra["bench"] = bench
    rec.wall_time_s = time.perf_counter() - start
    return rec


# ---------------------------------------------------------------- vectors: retrieval attacks
def retrieval_cell(cell: Any, data: Any) -> ResultRecord:
    """Any attack that retrieves from an index: the release of ``queries`` private items, scored by Identity
    (the query itself, and any of its mixed private sources) with exact tests against the random rate."""
    from veil.attacks.base import get_attack
    from veil.attacks.retrieval import evaluate_retrieval, sample_queries

    start = time.perf_counter()
    index, ids = data.index, data.private_ids
    q = sample_queries(len(index), _queries(cell, len(index), "index entries"), rng=cell.config.seed)
    obs, truth = release_vectors(cell, data, ids[q])
    resources = AttackResources(index=index, seed=cell.config.seed, data=data, cell=cell,
                                train_epochs=5 if cell.config.quick else 20)
    resources._lazy["known_pairs"] = lambda: _known_pairs(cell, data)
    attacker = get_attack(cell.attack).for_bench(resources)
    res = evaluate_retrieval(attacker, obs, q, truth=truth, tfidf=data.tfidf, text_embeddings=data.X[ids],
                             setting=cell.id, alpha=ALPHA)
    rec = res.to_record("bench", cell.id)
    name = "identity_any" if "identity_any" in res.metrics else "identity"
    verdict = res.significance[name]
    floor = bool(getattr(attacker, "floor", False))
    bench = _bench_block(success=name, success_metric=res.metrics[name].to_dict(), comparable=not floor,
                         floor=floor or None,
                         random_rate=1.0 / len(index), test=verdict.to_dict(),
                         measure="re-identification: the attacker's answer is the private text itself"
                                 + (" or one of the texts mixed into it" if name == "identity_any" else ""))
    rec.config["significance"] = {k: v.to_dict() for k, v in res.significance.items()}
    return _finish(rec, cell, data, start, bench)


def _known_pairs(cell: Any, data: Any) -> tuple[np.ndarray, np.ndarray]:
    if data.documents is not None:
        rows = data.splits["train"]
        obs, _ = release_vectors(cell, data, rows)
        return obs.vectors, data.X[rows]
    P = data.public_vectors
    defense = make_defense(cell, data)
    if cell.defense == "none":
        return P, P
    if type(defense).releases == "training-encodings":
        from veil.attacks.retrieval.observe import protect

        return protect(P, defense).vectors, P
    if type(defense).releases == "vectors":
        return defense.protect(P), P
    raise InvalidParameterError(f"no known pairs for a release of kind {type(defense).releases!r}")


# ---------------------------------------------------------------- training encodings: TextHide
def _training_run(cell: Any, data: Any) -> tuple[Any, Any, np.ndarray]:
    from veil.attacks.texthide.observe import observe_training_run

    tr = data.splits["train"]
    th = make_defense(cell, data, record_details=True)
    obs, truth = observe_training_run(data.X[tr], th, epochs=cell.config.n_epochs, rng=key_rng(cell, "order"))
    return obs, truth, tr


def mask_recovery_cell(cell: Any, data: Any) -> ResultRecord:
    """Recover the secret pool from every encoding of a training run (``epochs`` per example)."""
    from veil.attacks.base import get_attack
    from veil.attacks.texthide.mask_recovery import evaluate_mask_recovery

    start = time.perf_counter()
    obs, truth, tr = _training_run(cell, data)
    resources = AttackResources(index=data.index, seed=cell.config.seed, data=data, cell=cell)
    res = evaluate_mask_recovery(get_attack(cell.attack).for_bench(resources), obs, truth)
    rec = res.to_record("bench", cell.id)
    bench = _bench_block(success="mask_bits", success_metric=res.metrics["mask_bits"].to_dict(), comparable=False,
                         random_rate=0.5, measure="share of the secret pool's bits recovered (sign-symmetric); "
                                                  "a step towards re-identification, not one itself")
    return _finish(rec, cell, data, start, bench)


def unmix_cell(cell: Any, data: Any) -> ResultRecord:
    """Recover the pool (as mask-recovery), then split ``queries`` observed encodings into their k sources."""
    from veil.attacks.base import Observation, get_attack
    from veil.attacks.retrieval import SimilaritySearch
    from veil.attacks.texthide.mask_recovery import MaskRecovery, score_mask_recovery
    from veil.attacks.texthide.unmix import evaluate_unmix

    start = time.perf_counter()
    obs, truth, tr = _training_run(cell, data)
    resources = AttackResources(index=data.index, seed=cell.config.seed, data=data, cell=cell)
    recovered = MaskRecovery.for_bench(resources).recover(obs)
    recovery = score_mask_recovery(recovered, truth, observation=obs)
    texts, vectors = list(data.texts), data.X
    if cell.setting.get("mode") == "inter":
        texts, vectors = texts + data.public_texts, np.concatenate([data.X, data.public_vectors])
    resources.index = SimilaritySearch(texts, vectors)
    resources.k = int(cell.setting["k"])
    resources._lazy["recovered_masks"] = lambda: recovered.masks
    sel = np.sort(np.random.default_rng(cell.config.seed).choice(len(obs), size=_queries(cell, len(obs), "encodings"),
                                                                 replace=False))
    seen = Observation(obs.vectors[sel], defense=dict(obs.defense), source=obs.source)
    true_sources = tr[np.asarray(truth.sources)[sel]]
    res = evaluate_unmix(get_attack(cell.attack).for_bench(resources), seen, true_sources)
    rec = res.to_record("bench", cell.id)
    rec.metrics.update({f"mask_{k}": v for k, v in recovery.metrics.items()})
    from veil.metrics.stats import binomial_test

    hits = int(round(res.metrics["all_sources"].mean * len(sel)))
    verdict = binomial_test(hits, len(sel), 1.0 / len(data.texts), alpha=ALPHA)
    bench = _bench_block(success="all_sources", success_metric=res.metrics["all_sources"].to_dict(), comparable=True,
                         random_rate=1.0 / len(data.texts), test=verdict.to_dict(),
                         measure="re-identification of every private text mixed into an encoding (all k sources; "
                                 "tested against 1/n, the rate of guessing even one of them)")
    return _finish(rec, cell, data, start, bench)


# ---------------------------------------------------------------- document-embeddings: the exact audit (white-box)
def audit_cell(cell: Any, data: Any) -> ResultRecord:
    """Check the SentDP bound exactly on test documents and their one-sentence neighbours."""
    from veil.attacks.audit import audit_sentdp

    start = time.perf_counter()
    mech = make_defense(cell, data)
    test = [int(i) for i in data.splits["test"] if len(data.documents[i]) >= 2]
    n_docs = 8 if cell.config.quick else 40
    gen = np.random.default_rng(cell.config.seed)
    picked = sorted(int(i) for i in gen.choice(test, size=min(n_docs, len(test)), replace=False))
    pool = np.concatenate([data.documents[i] for i in data.splits["train"]])
    sweep = audit_sentdp(mech, [data.documents[i] for i in picked], epsilons=(mech.epsilon,),
                         neighbours_per_document=10 if cell.config.quick else 35, pool=pool, document_ids=picked,
                         rng=gen)
    a = sweep.audits[0]
    metrics = {"passed": Metric(mean=float(sweep.passed), n=sweep.n_pairs),
               "max_ratio_over_epsilon": Metric(mean=a.max_abs_log_ratio / a.epsilon, n=a.n_pairs),
               "max_abs_log_ratio": Metric(mean=a.max_abs_log_ratio, n=a.n_pairs),
               "violation": Metric(mean=0.0 if sweep.passed else 1.0, n=sweep.n_pairs)}
    rec = ResultRecord(method="bench", experiment=cell.id,
                       config={"attack": {"attack": cell.attack}, "defense": mech.config(), "documents": len(picked),
                               "pairs": sweep.n_pairs, "tolerance": a.tolerance},
                       metrics=metrics, wall_time_s=0.0)
    bench = _bench_block(success="violation", success_metric=metrics["violation"].to_dict(), comparable=False,
                         measure=f"exact audit: 1 if any of {sweep.n_pairs} neighbouring pairs breaks the "
                                 f"e^epsilon bound (max |log ratio| / epsilon = {a.max_abs_log_ratio / a.epsilon:.4f})")
    return _finish(rec, cell, data, start, bench)


# ---------------------------------------------------------------- utility
def _accuracy_metric(y: np.ndarray, pred: np.ndarray) -> Metric:
    from veil.metrics.leakage import wilson_interval

    hits = float((np.asarray(y) == np.asarray(pred)).sum())
    lo, hi = wilson_interval(hits, len(y), 0.95)
    return Metric(mean=hits / len(y), n=len(y), ci_low=lo, ci_high=hi, ci_level=0.95)


def sentence_utility_cell(cell: Any, data: Any) -> ResultRecord:
    """Frozen-encoder task accuracy: an MLP head trained through the defense's hook on the train split (early
    stopping on dev), tested on the test split through the same hook (same secret pool)."""
    from veil.defenses.base import get_defense
    from veil.defenses.none import is_no_defense
    from veil.metrics.utility import utility_metrics
    from veil.training import PlainHook, TrainConfig, train_head

    start = time.perf_counter()
    tr, dv, te = (data.splits[s] for s in ("train", "dev", "test"))
    y = data.labels
    hooks: list[Any] = []
    kind = get_defense(cell.defense).releases
    if kind not in ("vectors", "training-encodings"):
        raise InvalidParameterError(f"defense {cell.defense!r} releases {kind!r}: no sentence-classification "
                                    "utility cell for it yet")

    def factory() -> Any:
        if kind == "vectors" or is_no_defense(cell.setting):
            hooks.append(PlainHook("classification", data.num_classes))
        else:  # a training hook: the defense's one verb
            hooks.append(make_defense(cell, data, scale=float(np.sqrt(data.dim))).hook("classification",
                                                                                       data.num_classes))
        return hooks[-1]

    X = data.X  # a vectors defense trains and tests on what it releases
    if kind == "vectors" and cell.defense != "none":
        X = make_defense(cell, data).protect(data.X)

    import torch

    epochs, patience = (30, 10) if cell.config.quick else (300, 50)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a small head: one thread, so a seeded cell gives the same numbers on any worker
    try:
        res = train_head(X[tr], y[tr], X[dv], y[dv], task="classification", num_classes=data.num_classes,
                         hook_factory=factory, config=TrainConfig(epochs=epochs, patience=patience,
                                                                  seed=cell.config.seed, batch_size=64))
    finally:
        torch.set_num_threads(threads)
    pred = res.predict(X[te], hooks[-1])
    other = utility_metrics("classification", y[te], pred)
    metrics = {"accuracy": _accuracy_metric(y[te], pred), "macro_f1": Metric(mean=other["macro_f1"], n=len(te))}
    majority = float(np.bincount(y[te]).max() / len(te))
    rec = ResultRecord(method="bench", experiment=cell.id,
                       config={"utility": "frozen MiniLM encoder + MLP head through the defense's training hook",
                               "train": {"epochs": epochs, "patience": patience, "batch_size": 64,
                                         "best_epoch": res.best_epoch},
                               "n_train": len(tr), "n_dev": len(dv), "n_test": len(te)},
                       metrics=metrics, wall_time_s=0.0, extra={"collapsed": bool(res.collapsed)})
    bench = {"utility": "accuracy", "utility_metric": metrics["accuracy"].to_dict(), "majority_rate": majority}
    return _finish(rec, cell, data, start, bench)


def document_utility_cell(cell: Any, data: Any) -> ResultRecord:
    """Document classification as in SentDP (Meehan et al. 2022, Sec. 5): a classifier trained on the public
    train documents' non-private embeddings, tested on the private test documents' releases."""
    from sklearn.linear_model import LogisticRegression

    from veil.metrics.utility import utility_metrics

    start = time.perf_counter()
    tr, te = data.splits["train"], data.splits["test"]
    y = data.labels
    clf = LogisticRegression(max_iter=2000, random_state=cell.config.seed).fit(data.X[tr], y[tr])
    obs, _ = release_vectors(cell, data, te)
    pred = clf.predict(obs.vectors)
    other = utility_metrics("classification", y[te], pred)
    metrics = {"accuracy": _accuracy_metric(y[te], pred), "macro_f1": Metric(mean=other["macro_f1"], n=len(te))}
    majority = float(np.bincount(y[te]).max() / len(te))
    rec = ResultRecord(method="bench", experiment=cell.id,
                       config={"utility": "logistic regression on public (train) mean embeddings, tested on the "
                                          "private (test) documents' releases",
                               "n_train": len(tr), "n_test": len(te)},
                       metrics=metrics, wall_time_s=0.0)
    bench = {"utility": "accuracy", "utility_metric": metrics["accuracy"].to_dict(), "majority_rate": majority}
    return _finish(rec, cell, data, start, bench)
