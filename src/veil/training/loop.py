"""Train a task head (frozen encoder) or fine-tune encoder + head, with a defense hook.

The TextHide paper (Sec. 4.1) trains a 3-hidden-layer MLP of the encoder's
width with AdamW and a linear schedule with 10% warmup, more epochs than the
baseline because masks slow convergence, soft-label cross-entropy for
classification and MSE for regression, keeping the best dev checkpoint.

Two settings:

* :func:`train_head` (fast path): the encoder is frozen; the head trains on
  cached embeddings, so an (m, k) grid runs on 2 CPU cores in minutes.
* :func:`finetune` (the paper's headline setting): gradients go through the
  hook into the encoder, optionally from a head warm-started on the frozen
  encoder (``head_warmup_epochs``).

Randomness. The ``seed`` in :class:`TrainConfig` controls head
initialisation, the head's dropout masks and the data order, through local
``torch.Generator`` objects derived from it (``numpy.random.SeedSequence(seed)``
spawned into independent streams); the same seed gives the same run. The
defense's secret randomness (masks, mixing) comes from the hook, whose default
is the OS CSPRNG, never from the seed. Neither function seeds torch's global
generator for the caller:

* :func:`train_head` never reads or changes torch's global generator.
* :func:`finetune`: the transformer's own dropout layers draw from torch's
  global generator and take no generator argument. So the whole of
  :func:`finetune` runs inside ``torch.random.fork_rng`` (the CPU generator,
  plus the encoder's CUDA device if it is on one; other accelerators' generators
  are not covered): on entry the global
  generator is seeded with a value derived from ``seed`` (reproducible
  dropout), and on exit, normal or by exception, its previous state is
  restored exactly. What the caller draws from torch afterwards is therefore
  the same as if :func:`finetune` had not run, and does not depend on the
  seed. Caveat: other threads drawing from torch's global generator while
  :func:`finetune` runs see the seeded state (fork_rng is not thread-local).

Collapse. A classifier whose best-epoch dev predictions are all one class is
flagged (:attr:`TrainResult.collapsed`) and reported with a
:class:`~veil.errors.CollapsedModelWarning`
(:func:`veil.metrics.utility.collapsed_prediction` applies the same test to
test predictions).
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from veil.errors import CollapsedModelWarning, InvalidParameterError, InvalidTypeError
from veil.metrics.utility import collapsed_prediction, utility_metrics
from veil.models.heads import MLPHead
from veil.progress import progress_bar

__all__ = ["TrainConfig", "TrainResult", "train_head", "finetune", "predict_head", "primary_metric"]


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 20
    batch_size: int = 64
    lr: float = 1e-3
    encoder_lr: float = 2e-5
    weight_decay: float = 0.01
    warmup: float = 0.1
    hidden_layers: int = 3
    dropout: float = 0.1
    patience: int | None = 5
    seed: int = 0  # head init and dropout, data order, finetune's transformer dropout; never the defense's secrets
    rep_scale: float | None = None  # multiply representations by this before the hook; None = sqrt(dim)
    # fine-tuning only: first train the head alone on frozen-encoder embeddings for this many epochs (same hook, same
    # secret pool), then fine-tune encoder + head from there (linear probing then fine-tuning, Kumar et al. 2022)
    head_warmup_epochs: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.hidden_layers < 0:
            raise InvalidParameterError("epochs and batch_size must be >= 1 and hidden_layers >= 0")
        if not 0 <= self.warmup < 1:
            raise InvalidParameterError(f"warmup is a fraction of the steps in [0, 1), got {self.warmup}")
        if self.lr <= 0 or self.encoder_lr <= 0:
            raise InvalidParameterError("learning rates must be > 0")
        if self.patience is not None and self.patience < 1:
            raise InvalidParameterError("patience must be >= 1 or None (no early stopping)")
        if self.head_warmup_epochs < 0:
            raise InvalidParameterError(f"head_warmup_epochs must be >= 0, got {self.head_warmup_epochs}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise InvalidTypeError(f"seed must be an int, got {type(self.seed).__name__} {self.seed!r}")
        if self.seed < 0:
            raise InvalidParameterError(f"seed must be >= 0, got {self.seed}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TrainResult:
    """A trained head and its training record.

    ``history`` has one row per epoch: ``epoch``, ``train_loss`` (None where no
    training step ran: epoch 0 of a warm start) and ``dev_<metric>``.
    ``collapsed`` is True when the head, at its best dev epoch, predicts one
    class for every dev example (classification only; see
    :func:`veil.metrics.utility.collapsed_prediction`).
    """

    head: MLPHead
    task: str
    best_epoch: int
    dev_metrics: dict[str, float]
    history: list[dict[str, float | None]] = field(default_factory=list)
    seconds: float = 0.0
    label_scale: tuple[float, float] = (0.0, 1.0)  # regression: (mean, std) used to standardise targets
    rep_scale: float = 1.0  # representations are multiplied by this before the hook
    warmup_history: list[dict[str, float | None]] = field(default_factory=list)  # fine-tuning: the head-only stage
    collapsed: bool = False  # classification: every best-epoch dev prediction is the same class

    def predict(self, X: np.ndarray | torch.Tensor, hook: Any) -> np.ndarray:
        """Predictions on (unscaled) representations ``X`` through ``hook.infer``."""
        return predict_head(self.head, torch.as_tensor(X, dtype=torch.float32) * self.rep_scale, hook, self.task,
                            self.label_scale)


def primary_metric(task: str) -> str:
    return "accuracy" if task == "classification" else "pearson"


def _batches(n: int, batch_size: int, min_batch: int, gen: torch.Generator) -> list[torch.Tensor]:
    """Shuffled batches; a short remainder is merged into the previous batch (nothing dropped)."""
    order = torch.randperm(n, generator=gen)
    parts = list(torch.split(order, batch_size))
    if len(parts) > 1 and len(parts[-1]) < max(min_batch, 1):
        parts[-2] = torch.cat([parts[-2], parts.pop()])
    if len(parts[0]) < min_batch:
        raise InvalidParameterError(f"only {n} training examples but the defense mixes {min_batch} per encryption")
    return parts


def _schedule(optimizer: torch.optim.Optimizer, total: int, warmup: float) -> torch.optim.lr_scheduler.LambdaLR:
    warm = max(1, int(round(warmup * total)))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _loss(task: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if task == "classification":
        return -(target * F.log_softmax(logits, dim=-1)).sum(-1).mean()
    return F.mse_loss(logits.squeeze(-1), target)


def _decode(task: str, out: torch.Tensor, scale: tuple[float, float]) -> np.ndarray:
    if task == "classification":
        return out.argmax(-1).cpu().numpy()
    return out.squeeze(-1).cpu().numpy() * scale[1] + scale[0]


def _scale(task: str, y: np.ndarray) -> tuple[float, float]:
    if task != "regression":
        return (0.0, 1.0)
    std = float(np.std(y))
    return (float(np.mean(y)), std if std > 0 else 1.0)


def _rep_scale(config: TrainConfig, dim: int) -> float:
    """Unit-norm sentence vectors have coordinates of size ~1/sqrt(d); rescaling them to ~1 (a linear map, so
    it commutes with TextHide's mixing and masking) lets the head train at ordinary learning rates."""
    return math.sqrt(dim) if config.rep_scale is None else float(config.rep_scale)


class _Streams:
    """Independent local generators derived from ``config.seed`` (SeedSequence spawning, no global state)."""

    def __init__(self, seed: int) -> None:
        order, head, global_ = np.random.SeedSequence(int(seed)).spawn(3)
        self.order = torch.Generator().manual_seed(int(order.generate_state(1, np.uint64)[0] >> np.uint64(1)))
        self.head = torch.Generator().manual_seed(int(head.generate_state(1, np.uint64)[0] >> np.uint64(1)))
        self.global_seed = int(global_.generate_state(1, np.uint64)[0] >> np.uint64(1))


@contextlib.contextmanager
def _forked_global_rng(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch's global CPU generator (and ``device``'s, if CUDA) inside ``fork_rng``; restore them on exit."""
    cuda: list[int] = []
    if device.type == "cuda":
        cuda = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=cuda):
        torch.default_generator.manual_seed(seed)
        for index in cuda:
            torch.cuda.default_generators[index].manual_seed(seed)
        yield


def _make_head(dim: int, task: str, num_classes: int | None, config: TrainConfig,
               generator: torch.Generator) -> MLPHead:
    out = num_classes if task == "classification" else 1
    if task == "classification" and (num_classes is None or num_classes < 2):
        raise InvalidParameterError(f"classification needs num_classes >= 2, got {num_classes}")
    return MLPHead(dim, out, hidden=(dim,) * config.hidden_layers, dropout=config.dropout, rng=generator)


@torch.no_grad()
def predict_head(head: MLPHead, X: np.ndarray | torch.Tensor, hook: Any, task: str,
                 scale: tuple[float, float] = (0.0, 1.0), batch_size: int = 1024) -> np.ndarray:
    """Predictions of ``head`` on representations ``X`` after ``hook.infer``."""
    was = head.training
    head.eval()
    X = torch.as_tensor(X, dtype=torch.float32)
    outs = [_decode(task, head(hook.infer(X[i:i + batch_size])), scale) for i in range(0, len(X), batch_size)]
    head.train(was)
    return np.concatenate(outs) if outs else np.zeros(0)


class _EarlyStopping:
    """Per-epoch dev history, the best epoch's weights (deep copies) and dev predictions, and the patience counter."""

    def __init__(self, key: str, patience: int | None) -> None:
        self.key, self.patience = key, patience
        self.best, self.best_epoch, self.best_state, self.stale = -math.inf, 0, None, 0
        self.best_pred: np.ndarray | None = None
        self.history: list[dict[str, float | None]] = []

    def update(self, epoch: int, losses: list[float], y_dev: np.ndarray, pred: np.ndarray, task: str,
               state: Callable[[], Any]) -> bool:
        """Score and record an epoch's dev predictions; returns True when training should stop."""
        dev = utility_metrics(task, y_dev, pred)
        self.history.append({"epoch": epoch, "train_loss": float(np.mean(losses)) if losses else None,
                             **{f"dev_{k}": v for k, v in dev.items()}})
        if dev[self.key] > self.best:
            self.best, self.best_epoch, self.best_state, self.stale = dev[self.key], epoch, copy.deepcopy(state()), 0
            self.best_pred = pred
            return False
        self.stale += 1
        return self.patience is not None and self.stale >= self.patience

    def best_dev(self) -> dict[str, float]:
        row = next(r for r in self.history if r["epoch"] == self.best_epoch)
        return {k.removeprefix("dev_"): v for k, v in row.items() if k.startswith("dev_")}


def _step(opt: torch.optim.Optimizer, sched: Any, loss: torch.Tensor) -> float:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    return loss.item()


def _check_collapse(task: str, pred: np.ndarray, y_dev: np.ndarray, best_epoch: int) -> bool:
    """True (and a CollapsedModelWarning) when the best epoch's dev predictions are all one class."""
    if not collapsed_prediction(task, pred):
        return False
    cls = pred[0].item()
    share = float(np.mean(np.asarray(y_dev) == cls))
    warnings.warn(f"the trained classifier predicts only class {cls} for all {len(pred)} dev examples (best epoch "
                  f"{best_epoch}; class {cls} is {share:.0%} of the dev labels): a collapsed model with MCC 0. "
                  "Train longer (more epochs), lower the learning rate, or check the label balance of the "
                  "training data", CollapsedModelWarning, stacklevel=3)
    return True


def train_head(X_train: np.ndarray, y_train: np.ndarray, X_dev: np.ndarray, y_dev: np.ndarray, *, task: str,
               num_classes: int | None, hook_factory: Callable[[], Any], config: TrainConfig = TrainConfig(),
               progress: bool = False) -> TrainResult:
    """Frozen-encoder fast path: train an MLP head on (protected) cached embeddings.

    ``hook_factory()`` builds the defense hook (called once); the head is
    evaluated on dev after every epoch through ``hook.infer`` and the best
    epoch's weights are kept (early stopping with ``config.patience``). A
    classifier whose best dev predictions are all one class comes back with
    ``collapsed=True`` and a :class:`~veil.errors.CollapsedModelWarning`.
    Torch's global generator is neither read nor changed.
    """
    res, best_pred = _train_head(X_train, y_train, X_dev, y_dev, task=task, num_classes=num_classes,
                                 hook_factory=hook_factory, config=config, progress=progress)
    if res.collapsed:
        _check_collapse(task, best_pred, y_dev, res.best_epoch)
    return res


def _train_head(X_train: np.ndarray, y_train: np.ndarray, X_dev: np.ndarray, y_dev: np.ndarray, *, task: str,
                num_classes: int | None, hook_factory: Callable[[], Any], config: TrainConfig,
                progress: bool) -> tuple[TrainResult, np.ndarray]:
    """:func:`train_head` without the warning; also returns the best epoch's dev predictions."""
    start = time.perf_counter()
    streams = _Streams(config.seed)
    rep_scale = _rep_scale(config, np.shape(X_train)[1])
    Xtr = torch.as_tensor(X_train, dtype=torch.float32) * rep_scale
    Xdv = torch.as_tensor(X_dev, dtype=torch.float32) * rep_scale
    scale = _scale(task, np.asarray(y_train, dtype=np.float64))
    ytr = torch.as_tensor(y_train) if task == "classification" else \
        torch.as_tensor((np.asarray(y_train, dtype=np.float64) - scale[0]) / scale[1], dtype=torch.float32)
    hook = hook_factory()
    head = _make_head(Xtr.shape[1], task, num_classes, config, streams.head)
    opt = torch.optim.AdamW(head.parameters(), lr=config.lr, weight_decay=config.weight_decay,
                            fused=True)  # one kernel per step (see veil.training.inverter)
    steps = len(_batches(len(Xtr), config.batch_size, hook.min_batch_size, torch.Generator().manual_seed(0)))
    sched = _schedule(opt, steps * config.epochs, config.warmup)
    stopper = _EarlyStopping(primary_metric(task), config.patience)
    with progress_bar(config.epochs, "training head", progress) as advance:
        for epoch in range(1, config.epochs + 1):
            head.train()
            losses = []
            for idx in _batches(len(Xtr), config.batch_size, hook.min_batch_size, streams.order):
                e_t, y_t = hook.train(Xtr[idx], ytr[idx])
                losses.append(_step(opt, sched, _loss(task, head(e_t), y_t)))
            advance(1)
            if stopper.update(epoch, losses, y_dev, predict_head(head, Xdv, hook, task, scale), task,
                              head.state_dict):
                break
    head.load_state_dict(stopper.best_state)
    res = TrainResult(head=head, task=task, best_epoch=stopper.best_epoch, dev_metrics=stopper.best_dev(),
                      history=stopper.history, seconds=time.perf_counter() - start, label_scale=scale,
                      rep_scale=rep_scale, collapsed=collapsed_prediction(task, stopper.best_pred))
    return res, stopper.best_pred


def _encode_batches(encoder: Any, texts: Sequence[str], batch_size: int) -> torch.Tensor:
    outs = []
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            outs.append(encoder.forward_tokens(encoder.tokenize(texts[i:i + batch_size])))
    return torch.cat(outs)


def finetune(encoder: Any, texts_train: Sequence[str], y_train: np.ndarray, texts_dev: Sequence[str],
             y_dev: np.ndarray, *, task: str, num_classes: int | None, hook_factory: Callable[[], Any],
             config: TrainConfig = TrainConfig(epochs=4), progress: bool = False,
             public_texts: Sequence[str] | None = None) -> TrainResult:
    """Fine-tune ``encoder`` (a :class:`veil.encoders.TextEncoder`) and a head with the hook in between.

    The encoder is updated in place (its ``model_id`` changes, so its cached
    embeddings are not reused); the best dev epoch's encoder and head weights
    are restored at the end. Returns the head; the encoder is the one passed in.

    With ``config.head_warmup_epochs > 0`` the head first trains alone on the
    frozen encoder's embeddings through the same hook (the best dev epoch of
    that stage is kept), and that warm start is recorded as epoch 0 (with
    ``train_loss`` None): fine-tuning must beat it on dev, or the warm head and
    the pretrained encoder come back.

    ``public_texts`` (inter-mode TextHide): the public sentences, re-encoded by
    the current encoder at the start of every epoch and handed to
    ``hook.set_public``, so public slots never come from a stale encoder.

    Runs inside ``torch.random.fork_rng`` with the global generator seeded from
    ``config.seed`` (the transformer's dropout has no generator argument); the
    caller's global generator state is restored on return (module docstring).
    A collapsed classifier gives ``collapsed=True`` and a CollapsedModelWarning.
    """
    streams = _Streams(config.seed)
    device = next(iter(encoder.module.parameters())).device
    with _forked_global_rng(streams.global_seed, device):
        res, best_pred = _finetune(encoder, texts_train, y_train, texts_dev, y_dev, task=task,
                                   num_classes=num_classes, hook_factory=hook_factory, config=config,
                                   progress=progress, public_texts=public_texts, streams=streams)
    if res.collapsed:
        _check_collapse(task, best_pred, y_dev, res.best_epoch)
    return res


def _finetune(encoder: Any, texts_train: Sequence[str], y_train: np.ndarray, texts_dev: Sequence[str],
              y_dev: np.ndarray, *, task: str, num_classes: int | None, hook_factory: Callable[[], Any],
              config: TrainConfig, progress: bool, public_texts: Sequence[str] | None,
              streams: _Streams) -> tuple[TrainResult, np.ndarray]:
    start = time.perf_counter()
    scale = _scale(task, np.asarray(y_train, dtype=np.float64))
    ytr = torch.as_tensor(y_train) if task == "classification" else \
        torch.as_tensor((np.asarray(y_train, dtype=np.float64) - scale[0]) / scale[1], dtype=torch.float32)
    hook = hook_factory()
    rep_scale = _rep_scale(config, encoder.dim)
    module = encoder.module
    if public_texts is not None and not hasattr(hook, "set_public"):
        raise InvalidParameterError(f"public_texts needs an inter-mode TextHide hook; {type(hook).__name__} has no "
                                    "public slots (drop public_texts)")

    def refresh_public() -> None:
        if public_texts is not None:
            module.eval()
            hook.set_public(_encode_batches(encoder, public_texts, 128) * rep_scale)

    refresh_public()
    stopper = _EarlyStopping(primary_metric(task), config.patience)
    warmup_history: list[dict[str, float | None]] = []
    if config.head_warmup_epochs:
        module.eval()
        X_dev = _encode_batches(encoder, texts_dev, 128)
        warm, _ = _train_head(_encode_batches(encoder, texts_train, 128), y_train, X_dev, y_dev, task=task,
                           num_classes=num_classes, hook_factory=lambda: hook,
                           config=replace(config, epochs=config.head_warmup_epochs, patience=None),
                           progress=progress)
        head, warmup_history = warm.head, warm.history
        # epoch 0 = the warm head on the pretrained encoder; fine-tuning must beat it on dev to replace it
        stopper.update(0, [], y_dev, predict_head(head, X_dev * rep_scale, hook, task, scale), task,
                       lambda: (module.state_dict(), head.state_dict()))
    else:
        head = _make_head(encoder.dim, task, num_classes, config, streams.head)
    params = [{"params": [p for p in module.parameters() if p.requires_grad], "lr": config.encoder_lr},
              {"params": list(head.parameters()), "lr": config.lr}]
    opt = torch.optim.AdamW(params, weight_decay=config.weight_decay, fused=True)
    n_batches = len(_batches(len(texts_train), config.batch_size, hook.min_batch_size, torch.Generator().manual_seed(0)))
    sched = _schedule(opt, n_batches * config.epochs, config.warmup)
    with progress_bar(config.epochs * n_batches, "fine-tuning", progress) as advance:
        for epoch in range(1, config.epochs + 1):
            if epoch > 1:
                refresh_public()
            module.train()
            head.train()
            losses = []
            for idx in _batches(len(texts_train), config.batch_size, hook.min_batch_size, streams.order):
                e = encoder.forward_tokens(encoder.tokenize([texts_train[i] for i in idx.tolist()])) * rep_scale
                e_t, y_t = hook.train(e, ytr[idx])
                losses.append(_step(opt, sched, _loss(task, head(e_t), y_t)))
                advance(1)
            module.eval()
            pred = predict_head(head, _encode_batches(encoder, texts_dev, 128) * rep_scale, hook, task, scale)
            if stopper.update(epoch, losses, y_dev, pred, task, lambda: (module.state_dict(), head.state_dict())):
                break
    module.load_state_dict(stopper.best_state[0])
    head.load_state_dict(stopper.best_state[1])
    module.eval()
    res = TrainResult(head=head, task=task, best_epoch=stopper.best_epoch, dev_metrics=stopper.best_dev(),
                      history=stopper.history, seconds=time.perf_counter() - start, label_scale=scale,
                      rep_scale=rep_scale, warmup_history=warmup_history,
                      collapsed=collapsed_prediction(task, stopper.best_pred))
    return res, stopper.best_pred
