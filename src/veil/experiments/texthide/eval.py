"""TextHide utility experiments: the paper's Table 1 and Fig. 2 on veil's offline corpora.

One run = one (corpus, m, k, mode, setting) cell, trained and tested over
several seeds. The seeds control head initialisation and data order; every
seed gets a fresh secret mask pool and mixing randomness from the OS CSPRNG
(never from the seed), so the reported spread includes the key's randomness.

* ``m=0, k=1`` is the baseline (no defense), ``m=None`` an infinite pool.
* ``finetune=False``: the frozen-encoder fast path (MLP head on cached
  MiniLM embeddings). ``finetune=True``: encoder + head fine-tuned with
  TextHide in between (the paper's headline setting), optionally on a subset
  of the training split (``max_train``) to fit a CPU budget.
* Inter mode draws its public vectors from ``public`` (default health-tweets,
  train split, first ``public_size`` texts), encoded by the same encoder.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord
from veil.defenses.none import is_no_defense

__all__ = ["TextHideEval", "run_texthide_eval", "result_path", "existing_result", "identity", "TABLE1_TASKS",
           "GRID_M", "GRID_K"]

TABLE1_TASKS = ("rt-polarity", "trec-questions", "sms-spam", "hutto-tweets")
GRID_M: tuple[int | None, ...] = (0, 1, 16, 64, 256, 1024, None)
GRID_K = (1, 2, 4, 8)


def m_label(m: int | None) -> str:
    return "inf" if m is None else str(m)


@dataclass(frozen=True)
class TextHideEval:
    corpus: str = "rt-polarity"
    m: int | None = 256
    k: int = 4
    mode: str = "intra"
    finetune: bool = False
    seeds: tuple[int, ...] = (0, 1, 2)
    public: str = "health-tweets"
    public_size: int | None = None  # default: 20000 frozen, 5000 fine-tuned (re-encoded every epoch)
    epochs: int | None = None  # default: 300 frozen (masked heads converge slowly), 4 fine-tuned
    patience: int | None = None  # default: 50 frozen, 2 fine-tuned
    max_train: int | None = None
    batch_size: int | None = None  # default: 64 frozen, 32 fine-tuned (the paper's {16, 32})
    head_warmup: int | None = None  # fine-tuned only: head-only epochs on the frozen encoder first; default 60
    encoder_lr: float = 2e-5

    def __post_init__(self) -> None:
        if self.mode not in ("intra", "inter"):
            raise InvalidParameterError(f"mode must be 'intra' or 'inter', got {self.mode!r}")
        if self.m is not None and self.m < 0:
            raise InvalidParameterError(f"m must be >= 0 or None (infinite pool), got {self.m}")
        if self.k < 1:
            raise InvalidParameterError(f"k must be >= 1, got {self.k}")
        if not self.seeds:
            raise InvalidParameterError("give at least one seed")
        for name in ("epochs", "patience", "batch_size", "public_size", "max_train"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidParameterError(f"{name} must be >= 1 (or left out for the default), got {value}")
        if self.head_warmup is not None and self.head_warmup < 0:
            raise InvalidParameterError(f"head_warmup must be >= 0 (0 = no warm start), got {self.head_warmup}")
        if not np.isfinite(self.encoder_lr) or self.encoder_lr <= 0:
            raise InvalidParameterError(f"encoder_lr must be finite and > 0, got {self.encoder_lr}")
        if any(s < 0 for s in self.seeds) or len(set(self.seeds)) != len(self.seeds):
            raise InvalidParameterError(f"seeds must be distinct integers >= 0, got {list(self.seeds)}")
        if self.mode == "inter" and self.k < 2:
            raise InvalidParameterError("inter mode needs k >= 2 (floor(k/2) public slots)")
        batch = self.train_config(0).batch_size
        if self.k > batch:
            raise InvalidParameterError(f"k={self.k} is larger than the batch size {batch}: TextHide mixes each "
                                        f"example with k-1 others of its batch; use --batch-size >= {self.k}")

    @property
    def setting(self) -> str:
        return "finetuned" if self.finetune else "frozen"

    @property
    def name(self) -> str:
        base = "baseline" if is_no_defense((self.m, self.k)) else f"{self.mode}-m{m_label(self.m)}-k{self.k}"
        return f"{self.corpus}-{base}-{self.setting}"

    def train_config(self, seed: int):
        from veil.training import TrainConfig

        epochs = self.epochs or (4 if self.finetune else 300)
        patience = self.patience or (2 if self.finetune else 50)
        batch_size = self.batch_size or (32 if self.finetune else 64)
        warm = (60 if self.head_warmup is None else self.head_warmup) if self.finetune else 0
        return TrainConfig(epochs=epochs, patience=patience, seed=seed, batch_size=batch_size,
                           head_warmup_epochs=warm, encoder_lr=self.encoder_lr)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["m"] = m_label(self.m)
        d["seeds"] = list(self.seeds)
        d["setting"] = self.setting
        return d


def run_tag(cfg: TextHideEval) -> str:
    """What tells two runs of the same cell apart: training budget, training size and seeds."""
    from veil.outputs import tag

    tc = cfg.train_config(0)
    d = TextHideEval
    inter = cfg.mode == "inter"  # the public set matters in inter mode only; the encoder lr when fine-tuning
    return tag(ep=tc.epochs, pat=tc.patience, bs=tc.batch_size, warm=tc.head_warmup_epochs or None,
               n=cfg.max_train, elr=cfg.encoder_lr if cfg.finetune and cfg.encoder_lr != d.encoder_lr else None,
               pub=cfg.public if inter and cfg.public != d.public else None,
               pubn=cfg.public_size if inter else None, seeds=cfg.seeds)


def identity(cfg: TextHideEval) -> dict[str, Any]:
    """The settings a result depends on, with the effective training budget (compared with a stored record's
    before it is reused or replaced). The encoder learning rate and head warm-up matter only when fine-tuning,
    the public set only in inter mode, the encoder backend only when it is not torch (``encoder_backend``)."""
    tc = cfg.train_config(0)
    out = {k: v for k, v in cfg.to_dict().items() if k in _IDENTITY}
    out.update(epochs=tc.epochs, patience=tc.patience, batch_size=tc.batch_size)
    if cfg.finetune:
        out.update(head_warmup=tc.head_warmup_epochs, encoder_lr=cfg.encoder_lr)
    if cfg.mode == "inter":
        out.update(public=cfg.public, public_size=cfg.public_size)
    out.update(_backend(cfg))
    return out


def _backend(cfg: TextHideEval) -> dict[str, str]:
    """The frozen encodings' backend as records hold it (``{}`` for torch, as every record made before backends
    existed): a fine-tuned run encodes in torch only; a frozen run resolves it as its ``TextEncoder`` will."""
    from veil.encoders.backends import backend_identity

    return backend_identity("torch" if cfg.finetune else None)


_IDENTITY = ("corpus", "m", "k", "mode", "finetune", "seeds", "max_train", "setting")


def _stored_identity(stored: Any) -> dict[str, Any]:
    """:func:`identity` of a stored record's config (its effective budget is in ``config["train"]``)."""
    from veil.encoders.backends import stored_backend_identity

    train = stored.get("train") or {}
    out = {k: stored[k] for k in _IDENTITY if k in stored}
    out.update({k: train[k] for k in ("epochs", "patience", "batch_size") if k in train})
    if stored.get("finetune"):
        out.update({"encoder_lr": train.get("encoder_lr", stored.get("encoder_lr")),
                    "head_warmup": train.get("head_warmup_epochs")})
    if stored.get("mode") == "inter":
        out.update({k: stored.get(k) for k in ("public", "public_size")})
    out.update(stored_backend_identity(stored))
    return out


def existing_result(cfg: TextHideEval, path: str | Path, *, force: bool = False, keep: bool = True
                    ) -> ResultRecord | None:
    """The record at ``path`` if it holds ``cfg``'s result (None if absent or ``force``); a damaged record or one
    made under another configuration is an error naming it (see :func:`veil.outputs.existing_record`)."""
    from veil.outputs import existing_record

    return existing_record(path, identity(cfg), force=force, keep=keep, view=_stored_identity)


def result_path(cfg: TextHideEval, root: str | Path | None = None) -> Path:
    """``<root>/<cell>-<budget, size, seeds>.json``; ``root`` defaults to ``./veil-results/texthide``."""
    from veil.outputs import default_results_dir

    return Path(root if root is not None else default_results_dir("texthide")) / f"{cfg.name}-{run_tag(cfg)}.json"


def _subsample(idx: np.ndarray, limit: int | None) -> np.ndarray:
    if limit is None or len(idx) <= limit:
        return idx
    # a fixed, seed-free choice (every k-th example) so all configurations share the subset
    return idx[np.linspace(0, len(idx) - 1, limit).round().astype(int)]


def _hook_factory(cfg: TextHideEval, task: str, num_classes: int | None, dim: int, public: Any, scale: float):
    from veil.defenses.texthide import TextHide
    from veil.training import PlainHook, TextHideHook

    if cfg.m == 0 and cfg.k == 1:
        return lambda: PlainHook(task, num_classes)

    def make():
        from veil.defenses.defaults import mask_pool

        pool = mask_pool(cfg.m, dim)  # secret: OS CSPRNG, fresh for every seed
        pub = None if cfg.mode == "intra" else public * scale
        return TextHideHook(TextHide(k=cfg.k, pool=pool, public=pub), task, num_classes)

    return make


def _public(cfg: TextHideEval, encoder: Any) -> tuple[np.ndarray | None, list[str] | None]:
    """Inter mode: the public vectors (pretrained encoder, cached) and texts (re-encoded when fine-tuning)."""
    if cfg.mode != "inter":
        return None, None
    import veil.corpora as vc

    pub = vc.load(cfg.public)
    idx = pub.indices("train")[: cfg.public_size or (5000 if cfg.finetune else 20000)]
    sel = pub.select(idx, name=f"{cfg.public}-train{len(idx)}")
    from veil.encoders.plan import announce_corpus

    announce_corpus(encoder, sel, what=f"public texts of {cfg.public} (the first {len(idx)} of its train split, "
                                       "the mixing pool)")
    return encoder.encode_corpus(sel, None, progress=True), list(sel.texts)


def run_texthide_eval(cfg: TextHideEval, *, progress: bool = True, log: Any = None) -> ResultRecord:
    """Train and test one configuration over ``cfg.seeds``; returns a result record (not written)."""
    import torch

    import veil.corpora as vc
    from veil.encoders import TextEncoder, backend_identity
    from veil.metrics.utility import utility_metrics
    from veil.training import finetune, train_head

    start = time.perf_counter()
    corpus = vc.load(cfg.corpus)
    if corpus.task is None:
        raise InvalidParameterError(f"corpus {cfg.corpus!r} is unlabelled; TextHide utility needs a labelled task")
    task, num_classes = corpus.task, corpus.num_classes
    tr, dv, te = (corpus.indices(s) for s in ("train", "dev", "test"))
    if cfg.max_train is not None and cfg.max_train > len(tr):
        import warnings

        from veil.errors import DataWarning

        warnings.warn(f"max_train {cfg.max_train} is more than the {len(tr)} training examples of {cfg.corpus}; "
                      f"training on all {len(tr)} (the record says n_train)", DataWarning, stacklevel=2)
    tr = _subsample(tr, cfg.max_train)
    # fine-tuning trains through torch, so everything of a fine-tuned run (public encodings too) stays in torch;
    # frozen runs use the default (fastest) backend, named in the record
    encoder = TextEncoder("minilm", backend="torch" if cfg.finetune else None)
    public, public_texts = _public(cfg, encoder)
    scale = float(np.sqrt(encoder.dim))
    per_seed: list[dict[str, float]] = []
    extra: dict[str, Any] = {"best_epochs": [], "n_train": int(len(tr)), "n_dev": int(len(dv)), "n_test": int(len(te)),
                             "collapsed_dev": [], "collapsed_test": []}  # per seed: predicts a single class
    if not cfg.finetune:
        from veil.encoders.plan import announce_corpus

        parts = {name: corpus.select(idx, name=f"{cfg.corpus}-{name}{len(idx)}")
                 for name, idx in (("train", tr), ("dev", dv), ("test", te))}
        for name, part in parts.items():
            sub = "" if name != "train" or cfg.max_train is None else f", at most --max-train {cfg.max_train}"
            announce_corpus(encoder, part, what=f"{name} texts of {cfg.corpus}{sub}", log=log)
        X = {name: encoder.encode_corpus(part, None, progress=progress) for name, part in parts.items()}
    for seed in cfg.seeds:
        once = _Once(_hook_factory(cfg, task, num_classes, encoder.dim, public, scale))
        tc = cfg.train_config(seed)
        if cfg.finetune:
            enc = TextEncoder("minilm", backend="torch")  # fresh pretrained weights for every seed
            res = finetune(enc, [corpus.texts[i] for i in tr], corpus.labels[tr], [corpus.texts[i] for i in dv],
                           corpus.labels[dv], task=task, num_classes=num_classes, hook_factory=once,
                           config=tc, progress=progress, public_texts=public_texts)
            with torch.no_grad():
                X_test = torch.cat([enc.forward_tokens(enc.tokenize([corpus.texts[i] for i in te[j:j + 128]]))
                                    for j in range(0, len(te), 128)])
        else:
            res = train_head(X["train"], corpus.labels[tr], X["dev"], corpus.labels[dv], task=task,
                             num_classes=num_classes, hook_factory=once, config=tc, progress=progress)
            X_test = X["test"]
        hook = once.last  # the hook trained with: same secret pool at test time
        pred = res.predict(X_test, hook)
        test = utility_metrics(task, corpus.labels[te], pred)
        extra["collapsed_dev"].append(bool(res.collapsed))  # train_head/finetune warned already
        extra["collapsed_test"].append(_collapsed_on_test(task, pred, cfg.name, seed))
        per_seed.append({**{f"test_{k}": v for k, v in test.items()}, **{f"dev_{k}": v for k, v in res.dev_metrics.items()}})
        extra["best_epochs"].append(res.best_epoch)
        if cfg.finetune:  # small: one row per epoch; epoch 0 is the warm head on the pretrained encoder
            extra.setdefault("histories", []).append(res.history)
        if log is not None:
            log(f"{cfg.name} seed {seed}: " + ", ".join(f"{k}={v:.4f}" for k, v in per_seed[-1].items()))
    metrics = {key: Metric.from_values([r[key] for r in per_seed]) for key in per_seed[0]}
    config = {**cfg.to_dict(), **backend_identity(encoder), "task": task,
              "encoder": "minilm (all-MiniLM-L6-v2), mean pooling, L2-normalised" + encoder.backend_note,
              "train": cfg.train_config(0).to_dict() | {"seed": "per run"},
              "secret_randomness": "OS CSPRNG per seed (mask pool and mixing); seeds set head init and data order"}
    return ResultRecord(method="texthide", experiment=cfg.name, config=config, metrics=metrics,
                        wall_time_s=time.perf_counter() - start, extra=extra)


def _collapsed_on_test(task: str, pred: Any, name: str, seed: int) -> bool:
    """True (with a CollapsedModelWarning) when every test prediction is one class."""
    import warnings

    from veil.errors import CollapsedModelWarning
    from veil.metrics.utility import collapsed_prediction

    collapsed = collapsed_prediction(task, np.asarray(pred))
    if collapsed:
        warnings.warn(f"{name} seed {seed}: the classifier predicts a single class for every test example "
                      f"(MCC 0); its accuracy is the majority-class rate, not evidence of learning. Train longer "
                      f"(--epochs) or check the setting", CollapsedModelWarning, stacklevel=3)
    return collapsed


class _Once:
    """Wrap a hook factory so the runner can reuse the hook (same secret pool) at test time."""

    def __init__(self, factory: Any) -> None:
        self.factory = factory
        self.last: Any = None

    def __call__(self) -> Any:
        self.last = self.factory()
        return self.last


def table1_configs(*, finetune: bool = False, seeds: Sequence[int] = (0, 1, 2), smallest: str = "hutto-tweets",
                   **overrides: Any) -> list[TextHideEval]:
    """Table 1 analogue: baseline, intra (256,4), inter (256,4) on every task, plus (16,4) on the smallest task."""
    out = []
    for corpus in TABLE1_TASKS:
        base = TextHideEval(corpus=corpus, finetune=finetune, seeds=tuple(seeds), **overrides)
        out += [replace(base, m=0, k=1), replace(base, m=256, k=4, mode="intra"), replace(base, m=256, k=4, mode="inter")]
        if corpus == smallest:
            out += [replace(base, m=16, k=4, mode="intra"), replace(base, m=16, k=4, mode="inter")]
    return out


def grid_configs(*, corpus: str = "rt-polarity", seeds: Sequence[int] = (0, 1), **overrides: Any) -> list[TextHideEval]:
    """Fig. 2 analogue: every (m, k) in GRID_M x GRID_K, intra mode, frozen encoder.

    The 28 cells train for at most 60 epochs (patience 15), a CPU budget shorter than Table 1's 300 (patience
    50): large-m cells are still improving at epoch 60, so the grid understates them (see the results page).
    """
    overrides = {"epochs": 60, "patience": 15, **{k: v for k, v in overrides.items() if v is not None}}
    return [TextHideEval(corpus=corpus, m=m, k=k, seeds=tuple(seeds), **overrides) for m in GRID_M for k in GRID_K]


def run_sweep(configs: Sequence[TextHideEval], root: str | Path | None = None, *, skip_existing: bool = True,
              log: Any = print, workers: int = 1, ray_address: str | None = None) -> list[Path]:
    """Run and write every configuration (each result file written atomically as soon as it is done; the runner
    is :mod:`veil.experiments._sweep`).

    Resumable: a configuration whose record exists (made under the same configuration) is skipped unless
    ``skip_existing=False``; a damaged record or one made under another configuration stops the sweep before the
    first run. ``root`` defaults to ``./veil-results/texthide``; it is checked before the first run. The
    configurations are independent: ``workers`` > 1 or ``ray_address`` runs them as Ray tasks.
    """
    from functools import partial

    from veil.experiments._sweep import Sweep, run_records
    from veil.outputs import check_output_dir, default_results_dir

    root = check_output_dir(root if root is not None else default_results_dir("texthide"))
    sequential = workers == 1 and ray_address is None
    sweep = Sweep(name="texthide sweep", path=partial(result_path, root=root), finished=_finished,
                  cell_id=_cell_id, run=partial(run_texthide_eval, progress=False, log=log if sequential else None),
                  summary=_summary)
    return run_records(sweep, configs, root, workers=workers, ray_address=ray_address, force=not skip_existing,
                       progress=not sequential, log=log)


def _cell_id(cfg: TextHideEval) -> str:
    return f"{cfg.name}-{run_tag(cfg)}"


def _finished(cfg: TextHideEval, path: Path) -> bool:
    return existing_result(cfg, path) is not None


def _summary(rec: ResultRecord) -> str:
    return ", ".join(f"{k}={rec.metrics[k]}" for k in ("test_accuracy", "test_macro_f1", "test_pearson") if k in rec.metrics)
