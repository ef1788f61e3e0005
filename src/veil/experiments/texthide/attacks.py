"""TextHide under adaptive attack: RSS, abs-RSS, mask-pool recovery and unmixing on one harness (issue 11).

One cell = (corpus, attack, m, k, mode, encodings observed per example, index, queries). Every cell draws a
fresh secret pool AND fresh mixing (permutations, coefficients, which pool mask each example gets, the
order of the simulated training run) from the OS CSPRNG: the mixing is part of the key, so it is never
derived from the experiment seed. The seed selects the queries (and the attacker's own choices, e.g.
mask-recovery's cluster seeds, and the random-guess floor) only.

* ``rss`` / ``abs-rss``: each query (an example of the corpus) is encrypted once with its batch of 64
  other queries (intra) or with public rows (inter); the attacker searches an index. ``index="private"``
  is the paper's worst case (the index holds the private texts; Identity is scored, slot 0 as the paper
  and any private source); ``index="public:CORPUS"`` gives the attacker only a corpus it owns, scored by
  the semantic metrics against the random floor.
* ``mask-recovery``: the eavesdropper collects every encoding of a training run over the corpus' train
  split (``epochs`` encodings per example) and recovers the pool from them, given public statistics (the
  mean and covariance of representations of texts it can get: by default a held-out in-domain sample,
  the corpus' dev and test splits, which are never encrypted here; ``stats="public"`` uses the public
  corpus, another domain).
* ``unmix``: the same, then each of ``queries`` observed encodings is unmasked with a RECOVERED mask and
  split into its k sources over the private index (plus the public corpus in inter mode).

Verdicts come from exact tests against the known random rates (:mod:`veil.metrics.stats`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError
from veil.results import ResultRecord
from veil.defenses.none import is_no_defense

__all__ = ["AttackCell", "ATTACKS", "run_cell", "run_cells", "headline_cells", "grid_cells", "result_path",
           "existing_cell", "identity"]

ATTACKS = ("rss", "abs-rss", "mask-recovery", "unmix")
GRID_M: tuple[int | None, ...] = (1, 16, 256, 1024, None)
GRID_K = (1, 2, 4, 8)
GRID_EPOCHS = (1, 5, 20)
HEADLINE_CORPORA = ("rt-polarity", "trec-questions", "sms-spam")


def _m_label(m: int | None) -> str:
    return "inf" if m is None else str(m)


@dataclass(frozen=True)
class AttackCell:
    corpus: str = "rt-polarity"
    attack: str = "abs-rss"
    m: int | None = 256
    k: int = 4
    mode: str = "intra"
    epochs: int = 1  # encodings observed per training example (mask-recovery, unmix); 1 for rss / abs-rss
    index: str = "private"  # or "public:CORPUS"
    queries: int = 1000
    seed: int = 0  # selects the queries and the attacker's own choices; never the key
    public: str = "health-tweets"  # inter mode's public set, and the attacker's public statistics
    public_size: int = 20000
    stats: str = "heldout"  # mask-recovery's public statistics: "heldout" (the corpus' dev+test) or "public"

    def __post_init__(self) -> None:
        if self.attack not in ATTACKS:
            raise InvalidParameterError(f"unknown attack {self.attack!r}; use one of {', '.join(ATTACKS)}")
        if self.mode not in ("intra", "inter"):
            raise InvalidParameterError(f"mode must be intra or inter, got {self.mode!r}")
        if self.m is not None and self.m < 0:
            raise InvalidParameterError(f"m must be >= 0 or None (infinite pool), got {self.m}")
        if self.k < 1 or (self.mode == "inter" and self.k < 2):
            raise InvalidParameterError(f"k must be >= 1 (>= 2 in inter mode), got {self.k}")
        for name in ("epochs", "queries", "public_size"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.seed < 0:
            raise InvalidParameterError(f"seed must be >= 0, got {self.seed}")
        if self.stats not in ("heldout", "public"):
            raise InvalidParameterError(f"stats must be 'heldout' or 'public', got {self.stats!r}")
        if self.index != "private" and not self.index.startswith("public:"):
            raise InvalidParameterError(f"index must be 'private' or 'public:CORPUS', got {self.index!r}")
        if self.index != "private" and self.attack in ("mask-recovery", "unmix"):
            raise InvalidParameterError(f"{self.attack} runs on the private index only")
        if self.attack in ("mask-recovery", "unmix") and (self.m == 0 or self.m is None):
            raise InvalidParameterError(f"{self.attack} needs a finite pool: m >= 1 (m=0 has no mask, m=inf no "
                                        "pool to recover; use abs-rss there)")

    @property
    def name(self) -> str:
        idx = "" if self.index == "private" else "-" + self.index.replace(":", "_")
        idx += f"-stats_{self.public}" if self.stats == "public" and self.attack in ("mask-recovery", "unmix") else ""
        return (f"{self.corpus}-{self.attack}-{self.mode}-m{_m_label(self.m)}-k{self.k}-e{self.epochs}{idx}"
                f"-q{self.queries}-seed{self.seed}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "m": _m_label(self.m)}


def result_path(cell: AttackCell, root: str | Path) -> Path:
    return Path(root) / f"{cell.name}.json"


def existing_cell(cell: AttackCell, root: str | Path, *, force: bool = False, keep: bool = True
                  ) -> ResultRecord | None:
    """The record of ``cell`` in ``root`` if one exists and was made under this cell's configuration (None if
    absent or ``force``); damaged or another configuration: an error naming the file and the fix."""
    from veil.outputs import existing_record

    return existing_record(result_path(cell, root), identity(cell), part="cell", force=force, keep=keep)


def identity(cell: AttackCell) -> dict[str, Any]:
    """What a record's ``config["cell"]`` holds and is compared on: the cell, and the backend of its frozen MiniLM
    encodings when it is not torch (``encoder_backend``; absent from every torch record), resolved as this
    process's encoders resolve it."""
    from veil.encoders.backends import backend_identity

    return {**cell.to_dict(), **backend_identity(None)}


# ---------------------------------------------------------------- data shared by cells of one process
_CACHE: dict[tuple[str, ...], Any] = {}


def _corpus(name: str):
    from veil.encoders.backends import resolve_backend

    backend = resolve_backend(None)  # cached per backend: a record's encodings are those its identity names
    key = ("corpus", name, backend)
    if key not in _CACHE:
        import veil.corpora as vc
        from veil.encoders import TextEncoder

        from veil.encoders.plan import announce_corpus

        corpus = vc.load(name)
        encoder = TextEncoder("minilm", backend=backend)
        announce_corpus(encoder, corpus, what=f"texts of {name} (every split: the private data and its search index)")
        X = encoder.encode_corpus(corpus, None, progress=True)
        _CACHE[key] = (corpus, np.ascontiguousarray(X, dtype=np.float32))
    return _CACHE[key]


def _public(name: str, size: int):
    from veil.encoders.backends import resolve_backend

    backend = resolve_backend(None)
    key = ("public", name, str(size), backend)
    if key not in _CACHE:
        import veil.corpora as vc
        from veil.encoders import TextEncoder

        pub = vc.load(name)
        idx = pub.indices("train")[:size]
        sel = pub.select(idx, name=f"{name}-train{len(idx)}")
        from veil.encoders.plan import announce_corpus

        encoder = TextEncoder("minilm", backend=backend)
        announce_corpus(encoder, sel, what=f"public texts of {name} (the first {len(idx)} of its train split)")
        X = encoder.encode_corpus(sel, None, progress=True)
        _CACHE[key] = (list(sel.texts), np.ascontiguousarray(X, dtype=np.float32))
    return _CACHE[key]


def _private_index(name: str):
    """The corpus' own search index and its TF-IDF scorer, built once per process (a grid reuses them)."""
    from veil.encoders.backends import resolve_backend

    key = ("index", name, resolve_backend(None))
    if key not in _CACHE:
        from veil.attacks.retrieval import SimilaritySearch
        from veil.metrics.leakage import TfidfScorer

        corpus, X = _corpus(name)
        labels = corpus.labels if corpus.task == "classification" else None
        index = SimilaritySearch(corpus.texts, X, labels=labels)
        _CACHE[key] = (index, TfidfScorer(list(index.texts)))
    return _CACHE[key]


def _texthide(cell: AttackCell, dim: int, public_vectors: np.ndarray | None):
    from veil.defenses.texthide import TextHide

    from veil.defenses.defaults import mask_pool

    pool = mask_pool(cell.m, dim)  # secret: OS CSPRNG
    pub = public_vectors if cell.mode == "inter" else None
    return TextHide(k=cell.k, pool=pool, public=pub, record_details=True)  # rng=None: mixing from the OS CSPRNG


def _pub_for(cell: AttackCell) -> tuple[list[str], np.ndarray] | None:
    return _public(cell.public, cell.public_size) if cell.mode == "inter" else None


def _capped(cell: AttackCell, available: int, what: str) -> int:
    """``cell.queries``, or ``available`` with a one-line warning when fewer are there (drawn without replacement);
    the record's ``n_queries`` says how many were attacked."""
    if cell.queries <= available:
        return cell.queries
    import warnings

    from veil.errors import DataWarning

    warnings.warn(f"{cell.name}: {cell.queries} queries asked but only {what}; attacking all {available} "
                  f"(the record says n_queries={available})", DataWarning, stacklevel=3)
    return available


# ---------------------------------------------------------------- retrieval cells
def _retrieval(cell: AttackCell, progress: bool) -> ResultRecord:
    from veil.attacks import get_attack
    from veil.attacks.retrieval import RandomGuess, evaluate_retrieval, observe_original, sample_queries
    from veil.attacks.retrieval.observe import protect_with_truth
    from veil.attacks.retrieval.rss import compare_to_random

    corpus, X = _corpus(cell.corpus)
    pub = _pub_for(cell)
    q = sample_queries(len(X), _capped(cell, len(X), f"the {len(X)} examples of {cell.corpus}"), rng=cell.seed)
    if is_no_defense((cell.m, cell.k)):
        obs, truth = observe_original(X[q]), None
    else:
        obs, truth = protect_with_truth(X[q], _texthide(cell, X.shape[1], None if pub is None else pub[1]))
    if cell.index == "private":
        index, tfidf = _private_index(cell.corpus)
        attacker = get_attack(cell.attack)(index)
        res = evaluate_retrieval(attacker, obs, q, truth=truth, tfidf=tfidf, text_embeddings=X,
                                 setting=cell.name)
        rand = evaluate_retrieval(RandomGuess(index, rng=cell.seed), observe_original(X[q]), q, tfidf=tfidf,
                                  text_embeddings=X, setting="random")
        res = compare_to_random(res, rand, rng=cell.seed)
        rec = res.to_record("texthide-attacks", cell.name)
        rec.metrics.update({f"random_{k}": v for k, v in rand.metrics.items()})
        return rec
    return _public_index(cell, corpus, X, q, obs, get_attack)


def _public_index(cell: AttackCell, corpus: Any, X: np.ndarray, q: np.ndarray, obs: Any, get_attack: Any):
    """The attacker owns only another corpus: how close (in meaning) are its answers to the private texts?"""
    from veil.attacks.retrieval import SimilaritySearch
    from veil.metrics.leakage import TfidfScorer, leakage_scores, summarize_scores
    from veil.metrics.stats import two_sample_test

    texts, P = _public(cell.index.split(":", 1)[1], cell.public_size)
    index = SimilaritySearch(texts, P)
    start = time.perf_counter()
    ids = np.asarray(get_attack(cell.attack)(index).retrieve(obs).top1)
    attack_s = time.perf_counter() - start
    rnd = np.random.default_rng(cell.seed).integers(0, len(texts), size=len(q))
    query_texts = [corpus.texts[i] for i in q]
    tfidf = TfidfScorer(list(texts) + query_texts)
    scores = leakage_scores(query_texts, [texts[i] for i in ids], tfidf=tfidf, query_emb=X[q], returned_emb=P[ids])
    floor = leakage_scores(query_texts, [texts[i] for i in rnd], tfidf=tfidf, query_emb=X[q], returned_emb=P[rnd])
    metrics = summarize_scores(scores)
    metrics.update({f"random_{k}": v for k, v in summarize_scores(floor).items()})
    tests = {name: two_sample_test(scores[name], floor[name], rng=cell.seed).to_dict()
             for name in ("jaccard", "tfidf_cosine", "sbert_cosine")}
    return ResultRecord(method="texthide-attacks", experiment=cell.name,
                        config={"attack": {"attack": cell.attack}, "defense": dict(obs.defense), "n_queries": len(q),
                                "significance": tests, "index_size": len(texts)},
                        metrics=metrics, wall_time_s=attack_s)


# ---------------------------------------------------------------- mask recovery and unmixing
def _training_run(cell: AttackCell):
    from veil.attacks.texthide.observe import observe_training_run

    corpus, X = _corpus(cell.corpus)
    tr = corpus.indices("train")
    pub = _pub_for(cell)
    th = _texthide(cell, X.shape[1], None if pub is None else pub[1])
    obs, truth = observe_training_run(X[tr], th, epochs=cell.epochs, rng=None)  # the run's order: OS entropy too
    return corpus, X, tr, obs, truth


def _stats(cell: AttackCell):
    """The attacker's public statistics: a held-out in-domain sample (the corpus' dev and test splits, never the
    attacked training examples) by default, or the public corpus (another domain)."""
    from veil.attacks.texthide.observe import PublicStats

    if cell.stats == "heldout":
        corpus, X = _corpus(cell.corpus)
        held = np.concatenate([corpus.indices("dev"), corpus.indices("test")])
        return PublicStats.from_vectors(X[held], source=f"{cell.corpus} dev+test ({len(held)} held-out texts)")
    _, P = _public(cell.public, cell.public_size)
    return PublicStats.from_vectors(P, source=f"{cell.public} (train, first {len(P)})")


def _mask_recovery(cell: AttackCell, progress: bool) -> ResultRecord:
    from veil.attacks.texthide.mask_recovery import MaskRecovery, evaluate_mask_recovery

    _, _, _, obs, truth = _training_run(cell)
    res = evaluate_mask_recovery(MaskRecovery(_stats(cell), rng=cell.seed), obs, truth)
    rec = res.to_record("texthide-attacks", cell.name)
    rec.extra.update({"per_mask_encodings": list(res.per_mask_encodings), "per_mask_bits": list(res.per_mask_bits)})
    return rec


def _unmix(cell: AttackCell, progress: bool) -> ResultRecord:
    from veil.attacks.base import Observation
    from veil.attacks.retrieval import SimilaritySearch
    from veil.attacks.texthide.mask_recovery import MaskRecovery, score_mask_recovery
    from veil.attacks.texthide.unmix import Unmix, evaluate_unmix

    corpus, X, tr, obs, truth = _training_run(cell)
    start = time.perf_counter()
    recovered = MaskRecovery(_stats(cell), rng=cell.seed).recover(obs)
    recovery = score_mask_recovery(recovered, truth, observation=obs)
    texts, vectors = list(corpus.texts), X
    if cell.mode == "inter":
        ptexts, P = _public(cell.public, cell.public_size)
        texts, vectors = texts + list(ptexts), np.concatenate([X, P])
    index = SimilaritySearch(texts, vectors)
    n = _capped(cell, len(obs), f"the {len(obs)} encodings observed")
    sel = np.sort(np.random.default_rng(cell.seed).choice(len(obs), size=n, replace=False))
    seen = Observation(obs.vectors[sel], defense=dict(obs.defense), source=obs.source)
    true_sources = tr[np.asarray(truth.sources)[sel]]  # private sources as index ids
    res = evaluate_unmix(Unmix(index, recovered.masks, k=cell.k), seen, true_sources)
    rec = res.to_record("texthide-attacks", cell.name)
    rec.metrics.update({f"mask_{k}": v for k, v in recovery.metrics.items()})
    rec.wall_time_s = time.perf_counter() - start
    return rec


_RUNNERS = {"rss": _retrieval, "abs-rss": _retrieval, "mask-recovery": _mask_recovery, "unmix": _unmix}


def run_cell(cell: AttackCell, *, progress: bool = True) -> ResultRecord:
    """Run one cell; returns its record (not written)."""
    start = time.perf_counter()
    rec = _RUNNERS[cell.attack](cell, progress)
    rec.config.update({"cell": identity(cell), "corpus": cell.corpus,
                       "secret_randomness": "OS CSPRNG per cell: mask pool, mixing, training-run order; the seed "
                                            "selects queries and the attacker's own choices only"})
    rec.extra["total_wall_time_s"] = time.perf_counter() - start
    return rec


def run_cells(cells: list[AttackCell], root: str | Path, *, force: bool = False, log: Any = print,
              workers: int = 1, ray_address: str | None = None) -> list[Path]:
    """Run every cell not yet done (resumable, :mod:`veil.experiments._sweep`); each record is written atomically
    as soon as it is done. Every existing record is checked before the first cell runs: damaged or made under
    another configuration stops the sweep there, never "skip". Cells are independent: ``workers`` > 1 or
    ``ray_address`` runs them as Ray tasks (each worker caches a corpus' vectors once)."""
    from functools import partial

    from veil.experiments._sweep import Sweep, run_records
    from veil.outputs import check_output_dir

    root = check_output_dir(root)
    sweep = Sweep(name="texthide attacks", path=partial(result_path, root=root), finished=_finished,
                  cell_id=_cell_name, run=partial(run_cell, progress=False), summary=_summary)
    return run_records(sweep, cells, root, workers=workers, ray_address=ray_address, force=force,
                       progress=workers > 1 or ray_address is not None, log=log)


def _cell_name(cell: AttackCell) -> str:
    return cell.name


def _finished(cell: AttackCell, path: Path) -> bool:
    return existing_cell(cell, path.parent) is not None


def _summary(rec: ResultRecord) -> str:
    shown = {k: v for k, v in rec.metrics.items() if k in ("identity", "identity_any", "mask_bits", "all_sources",
                                                             "source_recall", "sbert_cosine")}
    return ", ".join(f"{k}={v}" for k, v in shown.items())


def headline_cells(*, queries: int = 1000, seed: int = 0) -> list[AttackCell]:
    """The headline settings, training (256,4) and inference (256,1), on three corpora, every attack."""
    out = []
    for corpus in HEADLINE_CORPORA:
        base = AttackCell(corpus=corpus, queries=queries, seed=seed)
        for m, k in ((256, 4), (256, 1), (0, 4), (0, 1)):
            for attack in ("rss", "abs-rss"):
                if is_no_defense((m, k)) and attack == "abs-rss":
                    continue
                out.append(replace(base, attack=attack, m=m, k=k))
        out.append(replace(base, attack="mask-recovery", m=256, k=4, epochs=5))
        out.append(replace(base, attack="mask-recovery", m=256, k=1, epochs=5))
        out.append(replace(base, attack="unmix", m=256, k=4, epochs=5))
    return out


def grid_cells(*, corpus: str = "rt-polarity", queries: int = 1000, seed: int = 0,
               modes: tuple[str, ...] = ("intra", "inter")) -> list[AttackCell]:
    """The issue's grid on one corpus: m x k x epochs x mode for every attack that applies."""
    out = []
    for mode in modes:
        for m in GRID_M:
            for k in GRID_K:
                if mode == "inter" and k < 2:
                    continue
                base = AttackCell(corpus=corpus, m=m, k=k, mode=mode, queries=queries, seed=seed)
                out += [replace(base, attack="rss"), replace(base, attack="abs-rss")]
                if m is not None:
                    for e in GRID_EPOCHS:
                        out += [replace(base, attack="mask-recovery", epochs=e), replace(base, attack="unmix", epochs=e)]
    return out

