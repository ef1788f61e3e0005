"""End to end: what a federated server reads of the clients' private sentences from their recorded updates.

One cell = one recorded federated TextHide run on Flower (``veil federated run --record DIR --truth``), attacked
by :class:`~veil.attacks.gradients.chain.UpdateChain` (analytic inversion -> per-client mask recovery ->
unmixing over an index of the whole corpus) and scored against the clients' ground truth (``DIR.truth``).

Scores (Wilson 95% intervals; ids whose stored vectors are bit-identical count as one source, since no attack on
representations can tell such texts apart):

* ``encodings_recovered``: head inputs (rows) read off the updates within relative squared error 1e-3;
* ``encodings_unmixed``: rows whose every private source is among the k ids the chain gave the recovered
  vector closest to that row (end to end, per encoding);
* ``own_sentence_recovered``: rows whose own example (slot 0: the one it was encrypted for) is among them;
* ``sentences_recovered``: distinct private training sentences mixed into any recorded step that the chain
  names, over all such sentences. The chain names the ids it gives a recovered vector with a coefficient of at
  least 1e-3 (the attacker's rule, no truth involved: an exact fit of a row with fewer distinct sources than k
  gives its spare slots coefficients below 1e-5, while a TextHide coefficient (half-normal, normalised) falls
  below 1e-3 with probability about 0.2% per slot at k = 4);
* ``sentence_precision``: the share of the distinct ids the chain names that are such sentences, next to
  ``sentence_precision_chance``, the share of such sentences among the index's distinct entries (what naming
  entries at random would score).

The index holds the whole corpus (every split: the attacker does not know which texts are in training); the
public statistics come from the corpus' dev and test splits, as in the adaptive-attack grid (issue 11).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError
from veil.experiments.federated.taps import analytic_grid, tap_name
from veil.federated.config import FederatedConfig
from veil.results import Metric, ResultRecord

CLAIM_MIN = 1e-3  # coefficient from which the attacker names an index entry as a source

__all__ = ["dp_grid", "chain_grid", "chain_resources", "score_chain", "run_chain", "run_chain_cells",
           "chain_result_path"]


def chain_resources(corpus: str) -> tuple[Any, Any]:
    """(index of the whole corpus' MiniLM vectors, public statistics of its dev and test splits)."""
    from veil.attacks.retrieval import SimilaritySearch
    from veil.attacks.texthide.observe import PublicStats
    from veil.experiments.texthide.attacks import _corpus

    c, X = _corpus(corpus)
    held = np.concatenate([c.indices("dev"), c.indices("test")])
    stats = PublicStats.from_vectors(X[held], source=f"{corpus} dev+test ({len(held)} held-out texts)")
    return SimilaritySearch(c.texts, X), stats


def _train_ids(run: dict[str, Any]) -> np.ndarray:
    """Corpus row ids of the run's (possibly subsampled) train split: truth rows index into it."""
    import veil.corpora as vc
    from veil.federated.data import _subsample

    return _subsample(vc.load(run["corpus"]).indices("train"), int(run.get("max_train", 0)))


def _rate(num: int, den: int) -> Metric:
    from veil.metrics.leakage import wilson_interval

    if den == 0:
        return Metric(mean=0.0, n=0)
    lo, hi = wilson_interval(num, den)
    return Metric(mean=num / den, n=den, ci_low=lo, ci_high=hi, ci_level=0.95)


def score_chain(recovery: Any, tap_dir: str | Path, index: Any) -> tuple[dict[str, Metric], list[dict[str, Any]]]:
    """Score a :class:`ChainRecovery` against ``DIR.truth`` (see the module docstring); returns (metrics, per
    update rows)."""
    from veil.attacks.gradients.analytic import RECOVERY_REL_MSE, match_rows
    from veil.attacks.gradients.tap import Tap
    from veil.attacks.gradients.truth import read_truth, truth_dir

    tap = Tap(tap_dir)
    run_file = truth_dir(tap.path) / "run.json"
    if not run_file.exists():
        raise DataFormatError(f"{run_file} is missing: record the run with this veil's `veil federated run --record "
                              "DIR --truth` (scoring maps truth rows to corpus rows with it)")
    from veil._io import read_json

    train_ids = _train_ids(read_json(run_file, what="run configuration",
                                     fix="record the run again with `veil federated run --record DIR --truth`"))
    canon = np.unique(index.vectors, axis=0, return_inverse=True)[1].reshape(-1)
    scale = tap.meta.rep_scale
    rows = unmixed = own = recovered = 0
    true_sentences: set[int] = set()
    per_update = []
    for r, c in tap.updates():
        t = read_truth(tap, r, c)
        src = np.asarray(t.sources)
        private = [canon[train_ids[s[s >= 0]]] for s in src]
        for p in private:
            true_sentences.update(int(v) for v in p)
        pos = recovery.rows_of(r, c)
        ok = np.zeros(len(t), dtype=bool)
        full = np.zeros(len(t), dtype=bool)
        mine = np.zeros(len(t), dtype=bool)
        if len(pos):
            best, rel, _ = match_rows(np.asarray(recovery.vectors[pos], dtype=np.float64) * scale, t.inputs)
            ok = rel <= RECOVERY_REL_MSE
            for i in np.flatnonzero(ok):
                claimed = set(canon[recovery.ids[pos[best[i]]]].tolist())
                full[i] = set(private[i].tolist()) <= claimed
                mine[i] = int(private[i][0]) in claimed
        rows += len(t)
        recovered += int(ok.sum())
        unmixed += int(full.sum())
        own += int(mine.sum())
        per_update.append({"round": int(r), "client": str(c), "rows": int(len(t)), "vectors": int(len(pos)),
                           "recovered": int(ok.sum()), "unmixed": int(full.sum())})
    claims = set()
    total = np.maximum(recovery.weights.sum(axis=1, keepdims=True), 1e-300)
    for ids, c in zip(recovery.ids, recovery.weights / total):
        claims.update(int(v) for v in canon[ids[c >= CLAIM_MIN]])
    hits = len(claims & true_sentences)
    metrics = {"encodings_recovered": _rate(recovered, rows), "encodings_unmixed": _rate(unmixed, rows),
               "own_sentence_recovered": _rate(own, rows),
               "sentences_recovered": _rate(hits, len(true_sentences)),
               "sentence_precision": _rate(hits, len(claims)),
               # what a claim drawn at random from the index would score: the floor for sentence_precision
               "sentence_precision_chance": Metric(mean=len(true_sentences) / int(canon.max() + 1),
                                                   n=int(canon.max() + 1))}
    return metrics, per_update


def run_chain(tap_dir: str | Path, *, seed: int = 0, pool_recovery: bool = True, progress: bool = False,
              resources: tuple[Any, Any] | None = None) -> ResultRecord:
    """Attack a recorded run with the whole chain and score it (needs ``DIR.truth``)."""
    from veil.attacks.gradients.chain import UpdateChain
    from veil.attacks.gradients.tap import Tap
    from veil._threads import torch_threads

    tap = Tap(tap_dir)
    corpus = tap.meta.extra.get("corpus")
    if not isinstance(corpus, str):
        raise DataFormatError(f"{tap.path}/tap.json names no corpus; record the run with `veil federated run`")
    start = time.perf_counter()
    index, stats = resources if resources is not None else chain_resources(corpus)
    attack = UpdateChain(index, stats, pool_recovery=pool_recovery, rng=seed)
    with torch_threads(1):
        recovery = attack.attack(tap, progress=progress)
    metrics, per_update = score_chain(recovery, tap.path, index)
    sources: dict[str, int] = {}
    for s in recovery.mask_source:
        sources[s] = sources.get(s, 0) + 1
    config = {"tap": str(tap.path), "attack": attack.config(), "corpus": corpus,
              "run": {k: v for k, v in tap.meta.to_dict().items() if k != "format"},
              "defense": dict(tap.meta.defense), "batch_size": tap.meta.batch_size,
              "client_mode": tap.meta.client_mode, "dropout": tap.meta.model.dropout, "index_size": len(index),
              "scoring": "Wilson 95% over rows (encodings) or distinct sentences; identical index vectors = one "
                         "source; a row counts as recovered at relative squared error <= 1e-3"}
    extra = {"updates": per_update, "per_client": dict(recovery.per_client), "mask_source": sources,
             "vectors": len(recovery), "attack_wall_time_s": recovery.wall_time_s}
    return ResultRecord(method="gradients", experiment="tap-chain", config=config, metrics=metrics,
                        wall_time_s=time.perf_counter() - start, extra=extra)


def chain_grid(*, corpus: str = "rt-polarity", batch_sizes: Sequence[int] = (1, 2, 4, 8, 16, 32), rounds: int = 5,
               m: int = 256, k: int = 4, seed: int = 0) -> list[FederatedConfig]:
    """Recorded runs: ``alg2`` (one SGD step per round) at every batch size (k = min(k, batch)), and at batch 8:
    dropout 0.1, a ``fedavg`` client (one local AdamW epoch: many steps) and no defense."""
    if rounds < 1:
        raise InvalidParameterError(f"rounds must be >= 1, got {rounds}")
    cells = analytic_grid(corpus=corpus, batch_sizes=batch_sizes, m=m, k=k, seed=seed, rounds=rounds)
    cells.append(replace(cells[0], batch_size=8, m=0, k=1, dropout=0.0, client_mode="alg2", lr=0.0))
    return cells


def dp_grid(*, corpus: str = "sms-spam", rounds: int = 2, batch_size: int = 8, clip: float = 1.0,
            noise: float = 1.0, seed: int = 0) -> list[FederatedConfig]:
    """Recorded runs for the chain under differential privacy: ``alg2`` without TextHide, 3 clients, at
    ``batch_size``, without DP and with each of ``server``, ``client`` and ``local`` DP (clip, noise): what the
    server can read off the updates when the run is DP (veil.federated.dp says what each placement protects)."""
    if rounds < 1:
        raise InvalidParameterError(f"rounds must be >= 1, got {rounds}")
    base = FederatedConfig(corpus=corpus, clients=3, rounds=rounds, client_mode="alg2", m=0, k=1,
                           batch_size=batch_size, max_train=3000, max_test=300, seed=seed)
    return [base] + [replace(base, dp=mode, dp_clip=float(clip), dp_noise=float(noise))
                     for mode in ("server", "client", "local")]


def chain_result_path(cfg: FederatedConfig, root: str | Path, seed: int = 0) -> Path:
    return Path(root) / f"chain-{tap_name(cfg)}-seed{seed}.json"


def run_chain_cells(cells: Sequence[FederatedConfig], root: str | Path, taps: str | Path, *, engine: str = "flower",
                    force: bool = False, log: Any = print) -> list[Path]:
    """Record each run (tap + truth under ``taps``), run the chain on it, write ``root/chain-<run>-seed0.json``.
    Resumable per cell (a finished record is reused only when made on a run of the same configuration; a damaged
    one is a typed error); the taps are data (never committed). The runner is :mod:`veil.experiments._sweep`,
    sequential only (Flower's simulation starts a Ray cluster of its own; the corpus index is built once)."""
    from functools import partial

    from veil.experiments.federated.taps import run_tap_sweep
    from veil.outputs import check_output_dir

    root = check_output_dir(root)
    taps = check_output_dir(taps, option="--taps")
    run = partial(_chain_cell, taps=taps, engine=engine, resources={})
    return run_tap_sweep(cells, root, taps, chain_result_path, run, name="chain sweep", summary=_summary,
                         force=force, log=log)


def _chain_cell(cfg: FederatedConfig, *, taps: Path, engine: str, resources: dict[str, Any]) -> ResultRecord:
    from veil.federated.run import run_federated

    tap = taps / tap_name(cfg)
    run_federated(cfg, engine=engine, record=tap, truth=True, force=True)  # replaces veil's own tap only
    if cfg.corpus not in resources:
        resources[cfg.corpus] = chain_resources(cfg.corpus)
    return run_chain(tap, resources=resources[cfg.corpus])


def _summary(rec: ResultRecord) -> str:
    return (f"encodings recovered {rec.metrics['encodings_recovered'].mean:.3f}, sentences recovered "
            f"{rec.metrics['sentences_recovered'].mean:.3f} (precision {rec.metrics['sentence_precision'].mean:.3f})")
