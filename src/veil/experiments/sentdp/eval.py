"""SentDP utility experiments: the paper's Fig. 4 (macro-F1 against epsilon and against k) on veil's corpora.

One call of :func:`run_sentdp_eval` evaluates one document corpus:

* ``<corpus>-reference``: the non-private baseline (mean sentence embedding ->
  MLP classifier C_nonpriv, several classifier seeds), the same on recoded
  embeddings (C_dc), and the random guesser ``sum_i q_i^2`` (App. A.3);
* ``<corpus>-<method>-eps<e>`` for DeepCandidate, truncation and word-level
  metric DP at every epsilon: test macro-F1 over ``trials`` runs of the
  private mechanism (fresh OS-CSPRNG randomness each), dev macro-F1, and the
  test macro-F1 per sentence-count bin (Fig. 4 d-f).

Public/private split: the train split is public (recoder H, candidates F,
truncation box, classifiers, word vocabulary), dev is public (early
stopping, the number of projections p chosen per epsilon from ``p_grid`` as
the paper does), and test documents are the private ones. Documents with
fewer than 2 sentences are left out (App. A.4), and the count is recorded.
Seeds fix only public choices (candidate subset, network initialisation, the
quick-run subsample); the mechanisms' randomness is never seeded.

Like for like: every method runs on the same test documents (the whole test
split) with the same number of ``trials``, and each record says how many
(``config["test_docs"]``, ``config["trials"]``). Word-level metric DP has to
re-encode every rewritten sentence; a rewrite seen before at the same epsilon
is encoded once, and the record counts how many encodings that saved
(``extra["encodings"]``; few: on news-articles under 1.2% up to epsilon 15). The
recoder's own departures are in :mod:`veil.defenses.sentdp.recoder`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord
from veil.metrics.utility import macro_f1 as _macro_f1

__all__ = ["SentDPEval", "run_sentdp_eval", "planned_paths", "EPSILONS", "P_GRID", "K_BINS", "METHODS"]

EPSILONS = (1.0, 3.0, 6.0, 10.0, 15.0, 23.0, 30.0)
P_GRID = (10, 25, 50, 100)
K_BINS: tuple[tuple[int, int | None], ...] = ((2, 4), (5, 9), (10, 14), (15, 19), (20, 29), (30, None))
METHODS = ("deepcandidate", "truncation", "metric-dp")


@dataclass(frozen=True)
class SentDPEval:
    corpus: str = "news-articles"
    epsilons: tuple[float, ...] = EPSILONS
    methods: tuple[str, ...] = METHODS
    trials: int = 5
    p_grid: tuple[int, ...] = P_GRID
    p_trials: int = 2
    depth: str = "tukey-min"
    n_candidates: int = 5000
    min_sentences: int = 8
    classifier_seeds: tuple[int, ...] = (0, 1, 2)
    classifier_epochs: int = 40
    mdp_vocab: int = 10000
    n_clusters: int = 50
    recoder_epochs: int = 20
    max_documents: int | None = None  # per split, a seeded subsample (quick runs and tests)
    seed: int = 0

    def __post_init__(self) -> None:
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            raise InvalidParameterError(f"unknown method(s) {bad or '(none given)'}; use some of "
                                        f"{', '.join(METHODS)}")
        if not self.epsilons or any(not np.isfinite(e) or e <= 0 for e in self.epsilons):
            raise InvalidParameterError(f"epsilons must be finite and > 0, got {self.epsilons}")
        if self.trials < 1 or self.p_trials < 1 or not self.p_grid:
            raise InvalidParameterError("trials and p_trials must be >= 1 and p_grid non-empty")

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def eps_label(epsilon: float) -> str:
    return f"{epsilon:g}"


def _k_bins(counts: np.ndarray, y: np.ndarray, predictions: list[np.ndarray]) -> list[dict[str, Any]]:
    rows = []
    for low, high in K_BINS:
        sel = (counts >= low) & (counts <= (high if high is not None else np.iinfo(np.int64).max))
        if sel.sum() == 0:
            continue
        values = [_macro_f1(y[sel], pred[sel]) for pred in predictions]
        rows.append({"low": low, "high": high, "n_docs": int(sel.sum()),
                     "macro_f1": Metric.from_values(values).to_dict()})
    return rows


class _Data:
    """Sentence embeddings, labels and the public/private document split of one corpus."""

    def __init__(self, cfg: SentDPEval, progress: bool, log: Any = None) -> None:
        import veil.corpora as vc
        from veil.defenses.sentdp.recoder import document_means
        from veil.encoders import TextEncoder, encode_sentences
        from veil.encoders.plan import announce_encoding

        corpus = vc.load(cfg.corpus)
        if corpus.documents is None or corpus.task != "classification":
            raise InvalidParameterError(f"corpus {cfg.corpus!r} is not a labelled document corpus; use one of "
                                        f"news-articles, spam-assassin, hoc-speeches, brown")
        if cfg.max_documents is not None:
            rng = np.random.default_rng(cfg.seed)
            long_enough = np.asarray([len(d) >= 2 for d in corpus.documents])
            picks = [rng.permutation(idx[long_enough[idx]])[:cfg.max_documents] for idx in
                     (corpus.indices(s) for s in ("train", "dev", "test"))]
            corpus = corpus.select(np.sort(np.concatenate(picks)))
        self.corpus = corpus
        self.encoder = TextEncoder("minilm")
        scope = ("every split" if cfg.max_documents is None
                 else f"a seeded subsample of {cfg.max_documents} documents per split")
        announce_encoding(self.encoder, [t for doc in corpus.documents for t in doc],
                          what=f"sentences of {corpus.name} ({scope}: train/dev fit the public parts, test is "
                               "evaluated)", cache_as=(corpus.name, "sentences"), log=log)
        self.S, self.offsets = encode_sentences(self.encoder, corpus, progress=progress)
        self.counts = np.diff(self.offsets)
        keep = self.counts >= 2
        self.dropped_short = int((~keep).sum())
        self.split = {s: np.asarray([i for i in corpus.indices(s) if keep[i]], dtype=np.int64)
                      for s in ("train", "dev", "test")}
        self.y = np.asarray(corpus.labels, dtype=np.int64)
        self.num_classes = len(corpus.label_names)
        self.means = document_means(self.S, self.offsets)

    def blocks(self, X: np.ndarray, docs: np.ndarray) -> list[np.ndarray]:
        from veil.defenses.sentdp.pipeline import split_documents

        return split_documents(X, self.offsets, docs)


def _classifier(X_train, y_train, X_dev, y_dev, num_classes: int, seed: int, epochs: int):
    from veil.training import PlainHook, TrainConfig, train_head

    cfg = TrainConfig(epochs=epochs, hidden_layers=3, patience=8, seed=seed, lr=1e-3)
    res = train_head(X_train, y_train, X_dev, y_dev, task="classification", num_classes=num_classes,
                     hook_factory=lambda: PlainHook("classification", num_classes), config=cfg)
    return lambda X: res.predict(np.asarray(X, dtype=np.float32), PlainHook("classification", num_classes))


def _per_document(y_test: np.ndarray, predictions: list[np.ndarray]) -> dict[str, Any]:
    """Every trial's test predictions and the test labels, in test-split order: what a bootstrap over test
    documents (the results page's intervals) resamples. Every method of a run predicts the same documents."""
    return {"test_labels": np.asarray(y_test).astype(int).tolist(),
            "test_predictions": [np.asarray(p).astype(int).tolist() for p in predictions]}


def _collapsed(predictions: list[np.ndarray]) -> int:
    """How many trials' test predictions are a single class (a constant predictor: MCC 0, macro-F1 at its floor).

    At small epsilon this is an expected outcome of the noise, not a training failure, so it is recorded
    (``extra["collapsed_trials"]``) and shown, not warned about; the classifiers themselves warn when they
    collapse on clean dev data (:func:`veil.training.train_head`).
    """
    from veil.metrics.utility import collapsed_prediction

    return int(sum(collapsed_prediction("classification", np.asarray(p)) for p in predictions))


def _record(cfg: SentDPEval, name: str, config: dict[str, Any], metrics: dict[str, Metric], start: float,
            extra: dict[str, Any] | None = None) -> ResultRecord:
    return ResultRecord(method="sentdp", experiment=f"{cfg.corpus}-{name}",
                        config={"corpus": cfg.corpus, **config, "eval": _identity(cfg)}, metrics=metrics,
                        wall_time_s=time.perf_counter() - start, extra=extra or {})


def _file_name(cfg: SentDPEval, name: str) -> str:
    """``<corpus>-<name>-<trials, sizes, seed>.json``: a quick run never replaces a full one."""
    from veil.outputs import tag

    trials = None if name == "reference" else cfg.trials
    return f"{cfg.corpus}-{name}-{tag(t=trials, n=cfg.max_documents, seed=cfg.seed)}.json"


def _kept_record(path: Path, cfg: SentDPEval) -> ResultRecord | None:
    """The record at ``path`` if it was made under ``cfg``'s settings (the epsilon grid and methods aside, and for
    the reference record, which no private mechanism enters, the number of trials).

    A damaged record or one made under other settings is an error naming the file (never kept as done).
    """
    from veil.outputs import existing_record

    ignore = ("epsilons", "methods") + (("trials",) if path.name == _file_name(cfg, "reference") else ())
    return existing_record(path, _identity(cfg), part="eval", ignore=ignore)


def _identity(cfg: SentDPEval) -> dict[str, Any]:
    """A record's ``config["eval"]``, compared before it is kept: the settings, and the backend of the frozen
    MiniLM sentence and word encodings when it is not torch (``encoder_backend``; absent from every torch record),
    resolved as the run's ``TextEncoder`` will resolve it."""
    from veil.encoders.backends import backend_identity

    return {**cfg.to_dict(), **backend_identity(None)}


def planned_paths(cfg: SentDPEval, results_dir: str | Path) -> list[Path]:
    """Every file :func:`run_sentdp_eval` writes for ``cfg`` (known before the run)."""
    return [Path(results_dir) / _file_name(cfg, n) for n in _cell_names(cfg)]


def run_sentdp_eval(cfg: SentDPEval, *, results_dir: str | Path | None = None, progress: bool = True,
                    log: Any = print, force: bool = False) -> list[ResultRecord]:
    """Run the whole evaluation of one corpus; writes and returns the records (kept ones read back), in the order
    of :func:`planned_paths`.

    ``results_dir`` defaults to ``./veil-results/sentdp``; it is checked before any work. Resumable: a
    (method, epsilon) record whose file exists is kept and its cell skipped, unless ``force=True`` (then it is
    recomputed and replaced); a kept record made under other settings is an error, never passed off as this
    run's. The reference record is kept the same way, but its classifiers and pipeline are refitted (seeded)
    whenever a cell still has to run. The cells run on :mod:`veil.experiments._sweep`, sequentially: they share
    the encoded corpus, the fitted pipeline and the classifiers.
    """
    from functools import partial

    from veil.experiments._sweep import Sweep, run_records
    from veil.outputs import check_output_dir, default_results_dir

    results_dir = check_output_dir(results_dir if results_dir is not None else default_results_dir("sentdp"))
    planned = planned_paths(cfg, results_dir)
    kept = {} if force else {p.name: rec for p in planned if (rec := _kept_record(p, cfg)) is not None}
    if kept:
        log(f"{cfg.corpus}: {len(kept)} of {len(planned)} records exist and are kept (--force recomputes)")
    if len(kept) == len(planned):
        return [kept[p.name] for p in planned]
    t0 = time.perf_counter()
    cells = _Cells(cfg, progress, log)
    sweep = Sweep(name=f"sentdp eval on {cfg.corpus}", path=lambda name: results_dir / _file_name(cfg, name),
                  cell_id=partial(_cell_id, cfg), finished=lambda name, path: path.name in kept, run=cells.run,
                  summary=_summary, skip_log="none")
    run_records(sweep, _cell_names(cfg), results_dir, force=force, progress=False, log=log)
    log(f"{cfg.corpus}: done in {time.perf_counter() - t0:.0f} s")
    return [kept[p.name] if p.name in kept else ResultRecord.read(p) for p in planned]


def _cell_names(cfg: SentDPEval) -> list[str]:
    """The cells of :func:`planned_paths`, in its order: ``reference``, then ``<method>-eps<e>``."""
    return ["reference"] + [f"{m}-eps{eps_label(e)}" for m in METHODS if m in cfg.methods for e in cfg.epsilons]


def _cell_id(cfg: SentDPEval, name: str) -> str:
    return f"{cfg.corpus}-{name}"


def _summary(rec: ResultRecord) -> str:
    mean = rec.metrics.get("test_macro_f1") or rec.metrics.get("non_private_test_macro_f1")
    return (f"test macro-F1 {mean.mean:.3f}" + (f" +- {mean.std:.3f}" if mean.std else "")
            + (f" ({rec.extra['collapsed_trials']} trial(s) predicted a single class)"
               if rec.extra.get("collapsed_trials") else ""))


class _Cells:
    """The cells of one evaluation and what they share, each part built on the first cell that needs it: the
    encoded corpus, then the reference (the non-private classifiers, the fitted pipeline and C_dc), then each
    method's own public parts (truncation's box and classifier, metric DP's word vectors)."""

    def __init__(self, cfg: SentDPEval, progress: bool, log: Any) -> None:
        self.cfg, self.progress, self.log = cfg, progress, log
        self._data: _Data | None = None
        self._reference: dict[str, Any] | None = None
        self._parts: dict[str, Any] = {}

    def run(self, name: str) -> ResultRecord:
        if name == "reference":
            return self.reference()["record"]
        method, _, label = name.rpartition("-eps")
        eps = next(e for e in self.cfg.epsilons if eps_label(e) == label)
        return {"deepcandidate": self._deepcandidate, "truncation": self._truncation,
                "metric-dp": self._metric_dp}[method](eps)

    @property
    def data(self) -> _Data:
        if self._data is None:
            data = self._data = _Data(self.cfg, self.progress, self.log)
            tr, dv, te = data.split["train"], data.split["dev"], data.split["test"]
            self.log(f"{self.cfg.corpus}: {len(tr)}/{len(dv)}/{len(te)} train/dev/test documents with >= 2 sentences "
                     f"({data.dropped_short} shorter ones left out)")
        return self._data

    def reference(self) -> dict[str, Any]:
        """Reference: non-private and random guess; the pipeline and C_dc every DeepCandidate cell uses."""
        if self._reference is not None:
            return self._reference
        from veil.defenses.sentdp.pipeline import SentDPPipeline
        from veil.defenses.sentdp.recoder import RecoderConfig, document_means

        cfg, data = self.cfg, self.data
        tr, dv, te = data.split["train"], data.split["dev"], data.split["test"]
        y = data.y
        start = time.perf_counter()
        nonpriv = [_classifier(data.means[tr], y[tr], data.means[dv], y[dv], data.num_classes, s,
                               cfg.classifier_epochs) for s in cfg.classifier_seeds]
        np_preds = [c(data.means[te]) for c in nonpriv]
        np_f1 = [_macro_f1(y[te], p) for p in np_preds]
        pipe = SentDPPipeline.fit_vectors(data.S, data.offsets, tr, dv, n_candidates=cfg.n_candidates,
                                          min_sentences=cfg.min_sentences, seed=cfg.seed, progress=self.progress,
                                          recoder=RecoderConfig(n_clusters=cfg.n_clusters, epochs=cfg.recoder_epochs,
                                                                seed=cfg.seed))
        R = pipe.recode(data.S)
        rec_means = document_means(R, data.offsets)
        dcs = [_classifier(rec_means[tr], y[tr], rec_means[dv], y[dv], data.num_classes, s, cfg.classifier_epochs)
               for s in cfg.classifier_seeds]
        q = np.bincount(y[tr], minlength=data.num_classes) / len(tr)
        record = _record(cfg, "reference", {
            "task": "classification", "label_names": list(data.corpus.label_names), "n_train": len(tr),
            "n_dev": len(dv), "n_test": len(te), "dropped_short_documents": data.dropped_short,
            "encoder": f"minilm ({data.encoder.model_id}), mean pooling, L2-normalised sentence vectors",
            "document_embedding": "mean of sentence embeddings", "classifier": "MLP, 4 linear layers (3 hidden of d)",
            "pipeline": pipe.config()},
            {"non_private_test_macro_f1": Metric.from_values(np_f1),
             "non_private_recoded_test_macro_f1": Metric.from_values([_macro_f1(y[te], c(rec_means[te]))
                                                                      for c in dcs]),
             "random_guess": Metric(mean=float((q ** 2).sum()))}, start,
            extra={"recoder_history": pipe.recoder.history if pipe.recoder else [],
                   "non_private": _per_document(y[te], np_preds)})
        self._reference = {"record": record, "c_nonpriv": nonpriv[0], "c_dc": dcs[0], "pipe": pipe, "R": R}
        return self._reference

    def _deepcandidate(self, eps: float) -> ResultRecord:
        cfg, data, ref = self.cfg, self.data, self.reference()
        dv, te, y = data.split["dev"], data.split["test"], data.y
        if "deepcandidate" not in self._parts:
            self._parts["deepcandidate"] = (data.blocks(ref["R"], dv), data.blocks(ref["R"], te))
        dev_blocks, test_blocks = self._parts["deepcandidate"]
        pipe, c_dc = ref["pipe"], ref["c_dc"]
        start = time.perf_counter()
        p_sel = {}
        for p in cfg.p_grid:
            mech = pipe.mechanism(epsilon=eps, n_projections=p, depth=cfg.depth)
            p_sel[str(p)] = float(np.mean([_macro_f1(y[dv], c_dc(mech.release(dev_blocks).embeddings))
                                           for _ in range(cfg.p_trials)]))
        best_p = int(max(cfg.p_grid, key=lambda p: (p_sel[str(p)], -p)))
        mech = pipe.mechanism(epsilon=eps, n_projections=best_p, depth=cfg.depth)
        preds = [c_dc(mech.release(test_blocks).embeddings) for _ in range(cfg.trials)]
        return _record(cfg, f"deepcandidate-eps{eps_label(eps)}", {
            "method": "deepcandidate", "epsilon": eps, "trials": cfg.trials, "test_docs": int(len(te)),
            "n_projections": best_p,
            "depth": cfg.depth, "m": int(len(pipe.candidates)), "sampler": mech.config()["sampler"],
            "classifier": "C_dc on recoded means",
            "randomness": "OS CSPRNG (projections and sampling), fresh per trial"},
            {"test_macro_f1": Metric.from_values([_macro_f1(y[te], p) for p in preds]),
             "dev_macro_f1": Metric(mean=p_sel[str(best_p)])}, start,
            extra={"p_selection": p_sel, "k_bins": _k_bins(data.counts[te], y[te], preds),
                   "collapsed_trials": _collapsed(preds), **_per_document(y[te], preds)})

    def _truncation(self, eps: float) -> ResultRecord:
        """Truncation (Li & Clifton 2021)."""
        from veil.defenses.truncation import Truncation

        cfg, data = self.cfg, self.data
        self.reference()  # as every cell: the reference's classifiers are fitted first
        tr, dv, te, y = data.split["train"], data.split["dev"], data.split["test"], data.y
        if "truncation" not in self._parts:
            box = Truncation.fit(data.means[tr], epsilon=1.0)
            trunc_train = box.truncated_means(data.blocks(data.S, tr))
            trunc_dev = box.truncated_means(data.blocks(data.S, dv))
            c_trunc = _classifier(trunc_train, y[tr], trunc_dev, y[dv], data.num_classes, cfg.seed,
                                  cfg.classifier_epochs)
            self._parts["truncation"] = (c_trunc, data.blocks(data.S, te))
        c_trunc, test_blocks = self._parts["truncation"]
        start = time.perf_counter()
        mech = Truncation.fit(data.means[tr], epsilon=eps)
        preds = [c_trunc(mech.privatize_many(test_blocks)) for _ in range(cfg.trials)]
        dev_pred = c_trunc(mech.privatize_many(data.blocks(data.S, dv)))
        return _record(cfg, f"truncation-eps{eps_label(eps)}", {
            "method": "truncation", "epsilon": eps, "trials": cfg.trials, "test_docs": int(len(te)),
            "coverage": 0.75,
            "classifier": "C_trunc on truncated means", "randomness": "Laplace noise, OS CSPRNG"},
            {"test_macro_f1": Metric.from_values([_macro_f1(y[te], p) for p in preds]),
             "dev_macro_f1": Metric(mean=_macro_f1(y[dv], dev_pred))}, start,
            extra={"k_bins": _k_bins(data.counts[te], y[te], preds), "collapsed_trials": _collapsed(preds),
                   **_per_document(y[te], preds)})

    def _metric_dp_parts(self) -> dict[str, Any]:
        if "metric-dp" not in self._parts:
            from veil.defenses.defaults import word_vectors
            from veil.encoders.plan import announce_encoding

            cfg, data, log = self.cfg, self.data, self.log
            docs = [data.corpus.documents[i] for i in data.split["test"]]
            flat = [s for d in docs for s in d]
            offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
            train_texts = [s for i in data.split["train"] for s in data.corpus.documents[i]]
            vectors = word_vectors(train_texts, vocabulary=cfg.mdp_vocab, encoder=data.encoder,
                                   name=f"{cfg.corpus}-vocabulary", announce=lambda words: announce_encoding(
                                       data.encoder, words, what=f"vocabulary words of {cfg.corpus}'s train "
                                       "documents (metric DP's word vectors)",
                                       cache_as=(f"{cfg.corpus}-vocabulary", "words"), log=log))
            log(f"veil: metric DP then encodes its rewritten test sentences: at most {len(flat) * cfg.trials:,} per "
                f"epsilon ({len(flat):,} sentences x {cfg.trials} trials; repeats are encoded once)")
            self._parts["metric-dp"] = {"flat": flat, "offsets": offsets, "vectors": vectors}
        return self._parts["metric-dp"]

    def _metric_dp(self, eps: float) -> ResultRecord:
        """Word-level metric DP (Feyisetan et al. 2019)."""
        from veil.defenses.metric_dp import WordMetricDP
        from veil.defenses.sentdp.recoder import document_means

        cfg, data, c_nonpriv = self.cfg, self.data, self.reference()["c_nonpriv"]
        parts = self._metric_dp_parts()
        flat, offsets, vectors = parts["flat"], parts["offsets"], parts["vectors"]
        te = data.split["test"]
        y = data.y[te]
        start = time.perf_counter()
        mech = WordMetricDP(vectors=vectors, epsilon=eps)
        encode = _RewriteEncoder(data.encoder)
        preds = []
        for trial in range(cfg.trials):
            X = encode(mech.rewrite_many(flat))
            preds.append(c_nonpriv(document_means(X, offsets)))
            self.log(f"  metric-dp eps={eps_label(eps)}: trial {trial + 1}/{cfg.trials} "
                     f"({encode.encoded:,} of {encode.requested:,} rewritten sentences encoded so far)")
        return _record(cfg, f"metric-dp-eps{eps_label(eps)}", {
            "method": "metric-dp", "epsilon": eps, "trials": cfg.trials, "test_docs": int(len(te)),
            "vocabulary": int(len(vectors.words)), "word_vectors": "MiniLM static (each word encoded alone, raw)",
            "classifier": "C_nonpriv on the rewritten documents' mean embeddings",
            "guarantee": "epsilon-metric-DP per word (NOT SentDP)", "randomness": "OS CSPRNG"},
            {"test_macro_f1": Metric.from_values([_macro_f1(y, p) for p in preds])}, start,
            extra={"k_bins": _k_bins(data.counts[te], y, preds), "collapsed_trials": _collapsed(preds),
                   "encodings": {"requested": encode.requested, "encoded": encode.encoded},
                   **_per_document(y, preds)})


class _RewriteEncoder:
    """Sentence embeddings of rewritten texts, each distinct text encoded once (per epsilon: memory stays bounded).

    The encoder is deterministic, so a repeated rewrite has the same embedding; this only saves time.
    """

    def __init__(self, encoder: Any) -> None:
        self.encoder, self.memo = encoder, {}
        self.requested = self.encoded = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if new:
            self.memo.update(zip(new, self.encoder.encode(new, progress=False)))
        self.requested += len(texts)
        self.encoded += len(new)
        return np.stack([self.memo[t] for t in texts])
