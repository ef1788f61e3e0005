"""Train the main model (encoder + task head) with an adversarial objective (Coavoux et al. 2018, Phase 1).

The adversary step lives here, in the training loop; the objectives (what the adversary and the encoder minimise,
the paper's equations) are the defenses of :mod:`veil.defenses.adversarial`, each reached through its release verb
``defense.objective()``. ``objective=None`` trains plainly (the paper's 'Standard' columns; :class:`PlainObjective`).

The paper's protocol (Sec. 4.2): the head is an MLP with one hidden layer of 64 ReLU units; Adam at its default
learning rate (1e-3); the authors' code clips gradients at 5; a fixed number of epochs (8 sentiment, 16 topic) and
the epoch with the best dev accuracy is kept ("we select the models that implement defenses on their accuracy").
Departure: mini-batches (default 32) instead of one example per update.

Per batch: (1) if the objective has an adversary (multidetasking's duplicate attacker, the generation LM), one
adversary step on the detached r(x); (2) one main step on ``main_weight * CE(y) + objective.encoder_loss(r)``.
Randomness (init, batch order, dropout, the adversary's init and declustering's pairs) comes from local generators
derived from ``seed``; torch's global generator is never read or changed.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from veil.errors import InvalidParameterError

__all__ = ["MainConfig", "MainModel", "PlainObjective", "train_main", "representations"]


class PlainObjective:
    """No defense: the main model minimises -log P(y | x) only. The no-op of the objective interface (as
    :class:`~veil.training.hooks.PlainHook` is of the hook interface); records call it defense "none"."""

    name = "none"
    uses_private = False
    main_weight = 1.0

    def attach(self, *, width: int, private: Any, texts: list[str] | None = None, rng: Any = None) -> None:
        self.width = width

    def adversary_parameters(self) -> list[nn.Parameter]:
        return []

    def joint_parameters(self) -> list[nn.Parameter]:
        return []

    def adversary_loss(self, r_detached: torch.Tensor, rows: np.ndarray) -> None:
        return None

    def encoder_loss(self, r: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        return r.new_zeros(())

    def config(self) -> dict[str, Any]:
        from veil.defenses.base import NO_GUARANTEE

        return {"defense": self.name, "guarantee": NO_GUARANTEE.to_dict(), "main_weight": self.main_weight}


@dataclass(frozen=True)
class MainConfig:
    epochs: int = 16
    batch_size: int = 32
    lr: float = 1e-3
    clip: float = 5.0
    hidden: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "hidden"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidParameterError(f"{name} must be an int >= 1, got {v!r}")
        if not (np.isfinite(self.lr) and self.lr > 0 and np.isfinite(self.clip) and self.clip > 0):
            raise InvalidParameterError(f"lr and clip must be finite and > 0, got {self.lr}, {self.clip}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MainModel:
    """The trained encoder and head, with the dev curve and what was kept."""

    encoder: nn.Module
    head: nn.Module
    best_epoch: int
    dev_accuracy: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    examples_per_second: float = 0.0


@torch.no_grad()
def representations(encoder: nn.Module, inputs: Any, *, batch_size: int = 256) -> np.ndarray:
    """r(x) for every row of ``inputs`` with the frozen encoder in eval mode: float32 (n, width)."""
    was = encoder.training
    encoder.eval()
    try:
        out = [encoder(inputs.batch(np.arange(s, min(s + batch_size, len(inputs)))))
               for s in range(0, len(inputs), batch_size)]
    finally:
        encoder.train(was)
    return torch.cat(out).float().numpy() if out else np.zeros((0, encoder.width), dtype=np.float32)


def _accuracy(encoder: nn.Module, head: nn.Module, inputs: Any, labels: np.ndarray) -> float:
    R = torch.from_numpy(representations(encoder, inputs))
    with torch.no_grad():
        head.eval()
        pred = head(R).argmax(dim=1).numpy()
    return float((pred == labels).mean()) if len(labels) else 0.0


def train_main(encoder: nn.Module, train: Any, y_train: np.ndarray, dev: Any, y_dev: np.ndarray, *,
               n_classes: int, objective: Any = None, config: MainConfig = MainConfig(),
               private_train: Any = None, texts_train: list[str] | None = None,
               progress: Any = None) -> MainModel:
    """Train ``encoder`` + a new head on (train, y_train) with ``objective`` (None: plain); keep the best dev epoch.

    ``train``/``dev``: :class:`~veil.models.lstm.EncoderInputs`; ``private_train``: the training split's
    :class:`~veil.corpora.attributes.PrivateVariables` (for objectives that use z); ``texts_train``: for
    adversarial generation. ``progress``: an ``advance(k)`` callable, called once per epoch.
    """
    from veil.models.heads import MLPHead

    if len(train) != len(y_train) or len(dev) != len(y_dev):
        raise InvalidParameterError(f"inputs and labels differ in length: train {len(train)} vs {len(y_train)}, "
                                    f"dev {len(dev)} vs {len(y_dev)}")
    if private_train is not None and len(private_train) != len(train):
        raise InvalidParameterError(f"{len(private_train)} private rows for {len(train)} training examples")
    objective = PlainObjective() if objective is None else objective
    seeds = np.random.SeedSequence(config.seed).spawn(3)
    order_rng = np.random.default_rng(seeds[0])
    head_gen = torch.Generator().manual_seed(int(seeds[1].generate_state(1)[0]))
    adv_seed = int(seeds[2].generate_state(1)[0])
    head = MLPHead(encoder.width, n_classes, hidden=(config.hidden,), dropout=0.0, rng=head_gen)
    objective.attach(width=encoder.width, private=private_train, texts=texts_train, rng=adv_seed)
    main_params = [*encoder.parameters(), *head.parameters(), *objective.joint_parameters()]
    opt = torch.optim.Adam(main_params, lr=config.lr)
    adv_params = objective.adversary_parameters()
    adv_opt = torch.optim.Adam(adv_params, lr=getattr(objective, "lr", config.lr)) if adv_params else None
    y = torch.as_tensor(np.asarray(y_train, dtype=np.int64))
    best, best_acc, curve, seen = None, -1.0, [], 0
    start = time.perf_counter()
    for epoch in range(config.epochs):
        encoder.train()
        head.train()
        perm = order_rng.permutation(len(train))
        for s in range(0, len(perm), config.batch_size):
            rows = perm[s:s + config.batch_size]
            r = encoder(train.batch(rows))
            if adv_opt is not None:
                adv_loss = objective.adversary_loss(r.detach(), rows)
                adv_opt.zero_grad(set_to_none=True)
                adv_loss.backward()
                nn.utils.clip_grad_norm_(adv_params, config.clip)
                adv_opt.step()
            loss = objective.main_weight * F.cross_entropy(head(r), y[torch.as_tensor(rows)])
            loss = loss + objective.encoder_loss(r, rows)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(main_params, config.clip)
            opt.step()
            seen += len(rows)
        acc = _accuracy(encoder, head, dev, np.asarray(y_dev))
        curve.append(acc)
        if acc > best_acc:
            best_acc, best = acc, (epoch, copy.deepcopy(encoder.state_dict()), copy.deepcopy(head.state_dict()))
        if progress is not None:
            progress(1)
    seconds = time.perf_counter() - start
    epoch, enc_state, head_state = best
    encoder.load_state_dict(enc_state)
    head.load_state_dict(head_state)
    encoder.eval()
    head.eval()
    return MainModel(encoder, head, epoch, curve, seconds, seen / seconds if seconds > 0 else 0.0)
