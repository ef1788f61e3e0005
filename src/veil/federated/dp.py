"""Differential privacy for veil's federated runs (``veil federated run --dp server|client|local``).

Three placements of the Gaussian mechanism, on Flower 1.41's Message-API wrappers and mods:

* ``server``: :class:`ServerSideDP` (on Flower's ``DifferentialPrivacyServerSideFixedClipping``): the server clips
  every client's update (reply minus the global weights it sent) to L2 norm ``dp_clip``, averages the clipped
  updates with equal weights and adds N(0, (z C / clients)^2) to every coordinate of the average;
* ``client``: :class:`ClientSideDP` (``DifferentialPrivacyClientSideFixedClipping``): each client clips its own
  update (:func:`dp_mod`), the server averages and adds the same noise;
* ``local``: :func:`dp_mod` clips the update and adds N(0, (z C)^2) to every coordinate on the client, before the
  reply leaves it (local DP; Flower's ``LocalDpMod`` does the same with ``numpy.random``, which veil does not use
  for secret noise).

Noise comes from the OS CSPRNG (:func:`veil.defenses.dpsgd.noise.gaussian`), never from ``numpy.random`` (which
Flower's own wrappers use): the wrappers' noise step is replaced. So is clipping (:func:`clip_update`), on the
server and on the client: Flower's divides by the update's norm and fails on an all-zero update, which a client
whose model already fits its batch can send. The wrappers' configuration, reply checks and bookkeeping are
Flower's.

What is guaranteed (:func:`accounting`; the unit protected is one client's whole local data set):

* ``server`` and ``client`` protect the **released global models** (every round's): adding or removing one
  client changes the sum of clipped updates by at most C, the average's denominator is the public number of
  clients, and every client takes part in every round, so the run is the Gaussian mechanism with multiplier z
  composed ``rounds`` times: (epsilon, delta)-DP at delta = 1 / (10 clients), epsilon by the PRV accountant (RDP
  beside it). They do **not** protect the replies the server reads: those are the clients' raw updates
  (``server``) or their clipped updates (``client``), and an attack on them (``veil attack analytic``, the chain)
  works as without DP.
* ``local`` protects **every reply** from everyone, the server included: replacing a client's data moves its
  clipped update by at most 2C, so each client's replies are the Gaussian mechanism with multiplier z / 2,
  composed over the rounds.

Aggregation is unweighted under DP (the clients report ``dp-weight`` 1; FedAvg weights by it): the sensitivity
of a weighted average would depend on the clients' private data sizes. Floating point: as DP-SGD's noise
(veil.defenses.dpsgd): float64 noise on 53-bit uniforms, added to float32 arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from veil.federated.config import FederatedConfig

__all__ = ["accounting", "ServerSideDP", "ClientSideDP", "wrap_strategy", "dp_mod", "clip_update", "WEIGHT_KEY"]

#: the metric FedAvg weights by under DP (every client reports 1: an unweighted average)
WEIGHT_KEY = "dp-weight"


def accounting(cfg: FederatedConfig) -> dict[str, Any]:
    """The guarantee of a DP run (module docstring): epsilon (PRV) and RDP's beside it, at ``cfg.dp_delta``."""
    from veil.defenses.dpsgd.accounting import account

    if not cfg.dp:
        return {}
    sigma = cfg.dp_noise / 2.0 if cfg.dp == "local" else cfg.dp_noise
    acc = account(sigma, 1.0, cfg.rounds, cfg.dp_delta, accountant="prv")
    protects = ("every reply a client sends (local DP), from everyone including the server" if cfg.dp == "local"
                else "the global models the server releases (central DP); not the replies the server reads")
    return {"mode": cfg.dp, "clip": cfg.dp_clip, "noise_multiplier": cfg.dp_noise, "effective_multiplier": sigma,
            "rounds": cfg.rounds, "delta": acc.delta, "epsilon": acc.epsilon, "epsilon_prv": acc.epsilon_prv,
            "epsilon_rdp": acc.epsilon_rdp, "unit": "one client's whole local data set", "protects": protects,
            "accountant": "PRV (Opacus), Gaussian mechanism composed over rounds, no sampling amplification"}


def _noisy(arrays: list[np.ndarray], std: float) -> list[np.ndarray]:
    from veil.defenses.dpsgd.noise import gaussian

    return [(a + gaussian(None, a.size, std).reshape(a.shape)).astype(a.dtype) for a in arrays]


def _central_class(base: type) -> type:
    """``base`` (a Flower fixed-clipping wrapper) with veil's noise, strict checks and the raw-reply tap."""
    from flwr.app import Array, ArrayRecord

    class _Central(base):  # type: ignore[misc, valid-type]
        def _add_noise_to_aggregated_arrays(self, aggregated_arrays: ArrayRecord) -> ArrayRecord:
            std = self.noise_multiplier * self.clipping_norm / self.num_sampled_clients  # Flower's compute_stdv
            noisy = _noisy(aggregated_arrays.to_numpy_ndarrays(), std)
            return ArrayRecord({k: Array(np.asarray(v)) for k, v in zip(aggregated_arrays.keys(), noisy)})

        def aggregate_train(self, server_round: int, replies: Any):
            inner = self.strategy
            replies = list(replies)
            inner._check(server_round, replies, "training")  # veil's errors, before Flower's lenient skip
            inner.record_replies(server_round, replies)  # what the server reads: before any server-side clipping
            event = self._pop_pending_event(server_round)
            if self._clips_on_server:
                sent = self.current_arrays.to_numpy_ndarrays()
                for reply in replies:
                    got = reply.content["arrays"]
                    clipped = clip_update(got.to_numpy_ndarrays(), sent, self.clipping_norm)
                    reply.content["arrays"] = ArrayRecord({k: Array(np.asarray(v)) for k, v in zip(got.keys(),
                                                                                                 clipped)})
            inner.recorded_upstream = True
            try:
                arrays, metrics = inner.aggregate_train(server_round, replies)
            finally:
                inner.recorded_upstream = False
            if arrays is not None:
                from veil.federated.apps import from_record

                arrays = self._add_noise_to_aggregated_arrays(arrays)
                self._compose_release(event)
                inner.history[-1] = from_record(arrays)  # the released (noisy) global model
            return arrays, metrics

    _Central._clips_on_server = "ServerSide" in base.__name__
    _Central.__name__ = _Central.__qualname__ = f"Veil{base.__name__}"
    return _Central


_BUILT: dict[str, type] = {}


def __getattr__(name: str) -> Any:  # the wrappers subclass Flower classes: built on first use
    if name in ("ServerSideDP", "ClientSideDP"):
        if name not in _BUILT:
            from flwr.serverapp.strategy import (DifferentialPrivacyClientSideFixedClipping,
                                                 DifferentialPrivacyServerSideFixedClipping)

            base = DifferentialPrivacyServerSideFixedClipping if name == "ServerSideDP" else \
                DifferentialPrivacyClientSideFixedClipping
            _BUILT[name] = _central_class(base)
        return _BUILT[name]
    raise AttributeError(name)


def wrap_strategy(strategy: Any, cfg: FederatedConfig) -> Any:
    """``strategy`` wrapped for central DP (``server``/``client``), or as it is (none, ``local``)."""
    if cfg.dp not in ("server", "client"):
        return strategy
    cls = __getattr__("ServerSideDP" if cfg.dp == "server" else "ClientSideDP")
    return cls(strategy, noise_multiplier=cfg.dp_noise, clipping_norm=cfg.dp_clip, num_sampled_clients=cfg.clients)


def _clip(update: list[np.ndarray], bound: float) -> list[np.ndarray]:
    norm = float(np.sqrt(sum(float(np.sum(np.square(u, dtype=np.float64))) for u in update)))
    factor = min(1.0, bound / norm) if norm > 0 else 1.0
    return [u * factor for u in update]


def clip_update(reply: list[np.ndarray], sent: list[np.ndarray], bound: float) -> list[np.ndarray]:
    """``sent`` plus the update ``reply - sent`` scaled to L2 norm at most ``bound`` (all arrays together; float64
    arithmetic, then the reply's dtypes). An all-zero update stays zero."""
    if len(reply) != len(sent) or any(r.shape != s.shape for r, s in zip(reply, sent)):
        raise ValueError("clipping: the reply's arrays do not match the global model's")
    update = _clip([np.asarray(r, dtype=np.float64) - s for r, s in zip(reply, sent)], bound)
    return [(s + u).astype(r.dtype) for r, s, u in zip(reply, sent, update)]


def dp_mod(msg: Any, context: Any, call_next: Any) -> Any:
    """The client mod of veil's ClientApps: per the run's ``dp``, clipping of the update (``client``), clipping plus
    OS-CSPRNG Gaussian noise N(0, (z C)^2) on the update (``local``), or nothing."""
    from flwr.app import Array, ArrayRecord, MessageType

    if msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, context)
    config = msg.content["config"]
    mode = str(config["dp"]) if "dp" in config else ""
    if mode not in ("client", "local"):
        return call_next(msg, context)
    sent = msg.content["arrays"]
    base = [np.array(a) for a in sent.to_numpy_ndarrays()]  # a copy: the reply is built from these
    reply = call_next(msg, context)
    if reply.has_error():
        return reply
    got = reply.content["arrays"]
    if list(got.keys()) != list(sent.keys()):
        raise ValueError("DP: the reply's arrays do not match the global model's")
    clip = float(config["dp-clip"])
    out = clip_update(got.to_numpy_ndarrays(), base, clip)
    if mode == "local":
        update = [np.asarray(o, dtype=np.float64) - b for o, b in zip(out, base)]
        out = [(b + u).astype(b.dtype) for b, u in zip(base, _noisy(update, float(config["dp-noise"]) * clip))]
    reply.content["arrays"] = ArrayRecord({k: Array(np.asarray(v)) for k, v in zip(got.keys(), out)})
    return reply
