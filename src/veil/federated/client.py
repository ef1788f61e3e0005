"""One federated client's local work, with no Flower in it: the Flower ClientApp (:mod:`veil.federated.apps`) and
the in-process reference loop (:mod:`veil.federated.reference`) both call these functions, so the two can be
compared weight for weight.

A client holds its partition (frozen MiniLM vectors and labels) and its own
secret :class:`~veil.defenses.texthide.MaskPool`. Every batch it trains on is
encrypted with TextHide under that pool (Huang et al. 2020, Algorithm 2: the
head's input is the encrypted vector); only the head's weights leave it. With
``cfg.finetune`` the client also holds its texts, encodes every batch with the
current global MiniLM (in train mode), trains encoder and head together, and
sends both (the encoder's trainable weights under ``encoder.<name>``).

Randomness. Batch choice, data order and the head's dropout come from a
``torch.Generator`` derived from (experiment seed, partition, round), so a
run is reproducible. TextHide's mixing (permutations, coefficients, which pool
mask) comes from the OS CSPRNG unless a ``mixing_seed`` is given (tests that
compare two engines only; it warns with PrivacyLeakWarning); the pool itself
is never derived from any seed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError
from veil.federated.config import FederatedConfig
from veil.federated.data import ClientData

__all__ = ["LocalResult", "local_train", "local_evaluate", "initial_state", "make_head", "rep_scale",
           "ENCODER_PREFIX"]

ENCODER_PREFIX = "encoder."


@dataclass(frozen=True)
class LocalResult:
    arrays: dict[str, np.ndarray]  # the head's weights after local training: what the client sends
    num_examples: int
    train_loss: float
    truth: dict[str, np.ndarray] | None  # ground truth of this round's head inputs (only when asked; experiments)


def rep_scale(dim: int) -> float:
    """Unit-norm vectors are scaled by sqrt(d) before the hook, as veil's centralised training does."""
    return math.sqrt(dim)


def make_head(cfg: FederatedConfig, dim: int, num_classes: int, generator: Any) -> Any:
    from veil.models.heads import MLPHead

    return MLPHead(dim, num_classes, hidden=(dim,) * cfg.hidden_layers, dropout=cfg.dropout, rng=generator)


def initial_state(cfg: FederatedConfig, dim: int, num_classes: int) -> dict[str, np.ndarray]:
    """The server's initial global weights (seeded by the experiment seed: weights are not secret)."""
    import torch

    head = make_head(cfg, dim, num_classes, torch.Generator().manual_seed(_derive(cfg.seed, -1, 0)))
    state = {k: v.detach().numpy().copy() for k, v in head.state_dict().items()}
    if cfg.finetune:
        state.update(_encoder()[1])  # the public pretrained MiniLM
    return state


@functools.lru_cache(maxsize=1)
def _encoder() -> tuple[Any, dict[str, np.ndarray]]:
    """This process's working MiniLM (its weights are overwritten from the global state before every use) and
    a copy of its pretrained trainable weights, taken before anything could change them."""
    from veil.encoders import TextEncoder

    enc = TextEncoder("minilm", backend="torch")  # fine-tuned: gradients run in torch
    return enc, _encoder_state(enc)


def _encoder_state(enc: Any) -> dict[str, np.ndarray]:
    return {ENCODER_PREFIX + n: p.detach().cpu().numpy().copy() for n, p in enc.module.named_parameters()
            if p.requires_grad}


def _split(state: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    head = {k: v for k, v in state.items() if not k.startswith(ENCODER_PREFIX)}
    return head, {k[len(ENCODER_PREFIX):]: v for k, v in state.items() if k.startswith(ENCODER_PREFIX)}


def _load_encoder(enc: Any, weights: dict[str, np.ndarray]) -> None:
    import torch

    own = {n: p for n, p in enc.module.named_parameters() if p.requires_grad}
    if set(own) != set(weights):
        missing, extra = sorted(set(own) - set(weights))[:3], sorted(set(weights) - set(own))[:3]
        raise InvalidParameterError(f"the global encoder weights do not match this client's MiniLM (missing "
                                    f"{missing}, unexpected {extra}); client and server must run the same "
                                    "configuration and encoder")
    with torch.no_grad():
        for n, p in own.items():
            p.copy_(torch.as_tensor(np.asarray(weights[n])).reshape(p.shape))


def _derive(seed: int, partition: int, server_round: int) -> int:
    ss = np.random.SeedSequence([int(seed), int(partition) + 1, int(server_round)])
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))


def _hook(cfg: FederatedConfig, data: ClientData, pool: Any, mixing_seed: int | None, record: bool) -> Any:
    from veil.defenses.texthide import TextHide
    from veil.training import PlainHook, TextHideHook

    if not cfg.defended:
        return PlainHook("classification", data.num_classes)
    if pool is None:
        raise InvalidParameterError("a defended client needs its MaskPool; pass pool=MaskPool(m, dim) or a loaded key")
    if pool.dim != data.dim or pool.m != cfg.m:
        raise InvalidParameterError(f"the client's key holds m={pool.m} masks of dim {pool.dim}, but the run asks "
                                    f"for m={cfg.m} on {data.dim}-dimensional vectors; use a key made with "
                                    f"MaskPool({cfg.m}, {data.dim}).save(path)")
    public = None
    if cfg.mode == "inter":
        import torch

        public = torch.as_tensor(data.public, dtype=torch.float32) * rep_scale(data.dim)
    th = TextHide(k=cfg.k, pool=pool, public=public, rng=mixing_seed, record_details=record)
    return TextHideHook(th, "classification", data.num_classes)


def _load(head: Any, state: dict[str, np.ndarray]) -> None:
    import torch

    state = _split(state)[0]
    own = head.state_dict()
    if set(own) != set(state):
        raise InvalidParameterError(f"the global weights have keys {sorted(state)}, the client's head {sorted(own)}; "
                                    "client and server must run the same configuration")
    head.load_state_dict({k: torch.as_tensor(np.asarray(v)).reshape(own[k].shape) for k, v in state.items()})


def _truth_rows(hook: Any, cfg: FederatedConfig, data: ClientData, idx: Any, e_t: Any, y_t: Any,
                step: int) -> dict[str, np.ndarray]:
    """Ground truth of one step (which train examples were mixed into each head input, the soft labels)."""
    n = int(e_t.shape[0])
    if cfg.defended:
        d = hook.texthide.last_details
        private = idx[d.private_index].numpy()  # batch positions -> partition positions
        sources = data.train_index[private]
        if d.public_index is not None:
            sources = np.concatenate([sources, np.full(d.public_index.shape, -1)], axis=1)
    else:
        sources = data.train_index[idx.numpy()][:, None]
    return {"inputs": e_t.detach().numpy().astype(np.float32), "step": np.full(n, step, dtype=np.int64),
            "sources": sources.astype(np.int64), "soft_labels": y_t.detach().numpy().astype(np.float32)}


def local_train(global_state: dict[str, np.ndarray], data: ClientData, cfg: FederatedConfig, pool: Any, *,
                server_round: int, mixing_seed: int | None = None, record_truth: bool = False) -> LocalResult:
    """Train the global head (and, with ``cfg.finetune``, the encoder) on this client's encrypted data; returns
    the new weights (and the truth if asked)."""
    import torch

    gen = torch.Generator().manual_seed(_derive(cfg.seed, data.partition, server_round))
    head = make_head(cfg, data.dim, data.num_classes, gen)
    _load(head, global_state)
    head.train()
    if mixing_seed is not None:  # tests comparing engines: one stream per (client, round), never the default
        mixing_seed = _derive(mixing_seed, data.partition, server_round)
    hook = _hook(cfg, data, pool, mixing_seed, record_truth)
    X = torch.as_tensor(data.X_train, dtype=torch.float32) * rep_scale(data.dim)
    y = torch.as_tensor(data.y_train)
    n = len(X)
    if n < cfg.batch_size:
        raise InvalidParameterError(f"client {data.partition} holds {n} examples, fewer than batch_size "
                                    f"{cfg.batch_size}; use a smaller batch or fewer clients")
    params: list[Any] = [{"params": list(head.parameters()), "lr": cfg.learning_rate}]
    encode = None
    if cfg.finetune:
        enc = _tuned_encoder(global_state, data)
        enc.module.train()
        params.append({"params": [p for p in enc.module.parameters() if p.requires_grad], "lr": cfg.encoder_lr})

        def encode(idx: Any) -> Any:
            return enc.forward_tokens(enc.tokenize([data.texts_train[i] for i in idx.tolist()])) * \
                rep_scale(data.dim)
    if cfg.client_mode == "alg2":
        opt = torch.optim.SGD(params, lr=cfg.learning_rate, momentum=0.0, weight_decay=0.0)
        batches = [torch.randperm(n, generator=gen)[: cfg.batch_size]]
        num_examples = cfg.batch_size
    else:
        opt = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay, fused=True)
        batches = []
        for _ in range(cfg.local_epochs):
            parts = list(torch.split(torch.randperm(n, generator=gen), cfg.batch_size))
            if len(parts) > 1 and len(parts[-1]) < hook.min_batch_size:
                parts[-2] = torch.cat([parts[-2], parts.pop()])  # nothing dropped
            batches += parts
        num_examples = n
    losses, truth = [], []
    # the transformer's dropout draws from torch's global generator (it takes none): seed it inside fork_rng, so
    # a run is reproducible and the caller's global state is untouched
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_derive(cfg.seed, data.partition, server_round) ^ 0x5EED)
        for step, idx in enumerate(batches):
            e_t, y_t = hook.train(X[idx] if encode is None else encode(idx), y[idx])
            loss = -(y_t * torch.nn.functional.log_softmax(head(e_t), dim=-1)).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            if record_truth:
                truth.append(_truth_rows(hook, cfg, data, idx, e_t, y_t, step))
    arrays = {k: v.detach().numpy().copy() for k, v in head.state_dict().items()}
    if cfg.finetune:
        arrays.update(_encoder_state(enc))
    merged = {key: np.concatenate([t[key] for t in truth]) for key in truth[0]} if truth else None
    if merged is not None and pool is not None:  # lets a test check the key stays the same across rounds
        import hashlib

        merged["pool_sha256"] = np.array(hashlib.sha256(pool.masks.numpy().tobytes()).hexdigest())
    return LocalResult(arrays=arrays, num_examples=num_examples, train_loss=float(np.mean(losses)), truth=merged)


def _tuned_encoder(state: dict[str, np.ndarray], data: ClientData) -> Any:
    """This process's MiniLM holding the global encoder weights of ``state`` (finetune runs)."""
    if data.texts_train is None or data.texts_test is None:
        raise InvalidParameterError("a fine-tuning client needs its texts; build its data with client_data(cfg, "
                                    "partition) from a FederatedConfig with finetune=True")
    enc = _encoder()[0]
    _load_encoder(enc, _split(state)[1])
    return enc


def local_evaluate(state: dict[str, np.ndarray], data: ClientData, cfg: FederatedConfig, pool: Any) -> dict[str, float]:
    """Accuracy of the global model on this client's test share, encrypted with the client's own pool (k = 1)."""
    import torch

    from veil.training.loop import predict_head

    head = make_head(cfg, data.dim, data.num_classes, torch.Generator().manual_seed(0))
    _load(head, state)
    hook = _hook(cfg, data, pool, None, False)
    if cfg.finetune:
        enc = _tuned_encoder(state, data)
        enc.module.eval()
        with torch.no_grad():
            X = torch.cat([enc.forward_tokens(enc.tokenize(list(data.texts_test[i:i + 128])))
                           for i in range(0, len(data.texts_test), 128)]) * rep_scale(data.dim)
    else:
        X = torch.as_tensor(data.X_test, dtype=torch.float32) * rep_scale(data.dim)
    pred = predict_head(head, X, hook, "classification")
    correct = int((pred == data.y_test).sum())
    # per-class counts of predictions and of true labels (aggregates only): the server can then tell a head that
    # predicts one class for everything (accuracy = that class's share) from one that learned something
    counts = {f"pred-{c}": float((pred == c).sum()) for c in range(data.num_classes)}
    counts |= {f"label-{c}": float((data.y_test == c).sum()) for c in range(data.num_classes)}
    return {"correct": float(correct), "num-examples": float(len(data.y_test)),
            "accuracy": correct / max(1, len(data.y_test)), **counts}
