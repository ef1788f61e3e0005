"""The configuration of one federated TextHide run, shared by the Flower apps and the in-process reference loop.

:class:`FederatedConfig` is plain, validated data. It travels to Flower's
ClientApp and ServerApp as a flat ``ConfigRecord``/run config
(:meth:`FederatedConfig.to_run_config`, :meth:`FederatedConfig.from_run_config`),
so the same run is described identically in simulation, in a real
SuperLink/SuperNode deployment (``[tool.flwr.app.config]``) and in the
reference loop. It carries no secret: each client's mask pool lives on the
client only.

Client modes (Huang et al. 2020, Algorithm 2):

* ``alg2``: one plain SGD step per round on one batch of ``batch_size``
  encrypted examples (no momentum, no weight decay), so the client's update is
  exactly ``lr x gradient``: Flower's FedAvg averages weights, which for one
  SGD step from the same global weights equals averaging gradients, as
  Algorithm 2 does (weighted by ``num-examples``, the batch size).
* ``fedavg``: ``local_epochs`` epochs of AdamW over the client's whole
  partition per round (McMahan et al. 2017's FedAvg with a modern optimiser):
  more realistic, and harder to invert.

Differential privacy (``dp``, Flower's DP strategy wrappers and client mods,
with veil's noise from the OS CSPRNG): ``server`` (the server clips each
client's update to ``dp_clip`` and adds N(0, (dp_noise dp_clip / clients)^2) to
the average), ``client`` (each client clips its own update, the server adds the
same noise), ``local`` (each client clips its update and adds N(0, (dp_noise
dp_clip)^2) itself before sending). Central DP protects the released global
model; only ``local`` protects what the server reads (see veil.federated.dp).

Encoder: frozen by default (clients train and send the head only, on cached
MiniLM vectors). ``finetune=True`` (fedavg only) also trains MiniLM on every
client (AdamW at ``encoder_lr``), and the clients send the encoder's trainable
weights with the head's (about 22.7M parameters, 91 MB of float32 per reply).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["FederatedConfig", "CLIENT_MODES", "DP_MODES"]

CLIENT_MODES = ("alg2", "fedavg")
#: "" = no differential privacy
DP_MODES = ("", "server", "client", "local")


@dataclass(frozen=True)
class FederatedConfig:
    corpus: str = "rt-polarity"
    clients: int = 3
    rounds: int = 5
    client_mode: str = "alg2"
    m: int = 256  # pool size; 0 (with k = 1) is no defense
    k: int = 4
    mode: str = "intra"  # TextHide intra- or inter-dataset mixing
    alpha: float = 0.0  # per-class Dirichlet(alpha) non-IID partition; 0 = IID
    batch_size: int = 32
    lr: float = 0.0  # 0 = the mode's default: 0.5 (alg2, plain SGD) or 1e-3 (fedavg, AdamW)
    local_epochs: int = 1
    weight_decay: float = 0.01  # fedavg only (alg2 is plain SGD)
    hidden_layers: int = 1
    dropout: float = 0.0
    seed: int = 0  # partition, head init, data order, dropout; NEVER the clients' keys or mixing
    max_train: int = 0  # 0 = the whole train split; else an evenly spaced subset (seed-free)
    max_test: int = 0
    public: str = "health-tweets"  # inter mode: public sentences every client may mix in
    public_size: int = 5000
    finetune: bool = False  # also train the encoder (fedavg only): clients send encoder + head weights
    encoder_lr: float = 2e-5  # AdamW learning rate of the encoder's weights (finetune only)
    timeout: float = 600.0  # seconds to wait for clients to connect and to reply, per round
    dp: str = ""  # differential privacy: "" (none), "server", "client" or "local" (module docstring)
    dp_clip: float = 0.0  # the L2 bound on each client's update (dp only)
    dp_noise: float = 0.0  # the noise multiplier z (dp only)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            expected = type(f.default)
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, f.name, float(value))
            elif not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise InvalidTypeError(f"{f.name} must be {expected.__name__}, got {type(value).__name__} {value!r}")
            if expected is float and not math.isfinite(getattr(self, f.name)):
                raise InvalidParameterError(f"{f.name} must be a finite number, got {value!r}")
        if self.clients < 1 or self.rounds < 1:
            raise InvalidParameterError(f"clients and rounds must be >= 1, got {self.clients} and {self.rounds}")
        if self.client_mode not in CLIENT_MODES:
            raise InvalidParameterError(f"client_mode must be one of {CLIENT_MODES}, got {self.client_mode!r}")
        if self.mode not in ("intra", "inter"):
            raise InvalidParameterError(f"mode must be 'intra' or 'inter', got {self.mode!r}")
        if self.m < 0 or self.k < 1:
            raise InvalidParameterError(f"need m >= 0 and k >= 1, got m={self.m}, k={self.k}")
        if self.mode == "inter" and self.k < 2:
            raise InvalidParameterError("inter mode needs k >= 2 (floor(k/2) public slots)")
        if self.batch_size < self.k:
            raise InvalidParameterError(f"batch_size ({self.batch_size}) must be >= k ({self.k}): TextHide mixes k "
                                        "examples of one batch")
        if self.alpha < 0:
            raise InvalidParameterError(f"alpha must be > 0 (Dirichlet non-IID) or 0 (IID), got {self.alpha}")
        if self.lr < 0 or self.weight_decay < 0 or self.dropout < 0 or self.dropout >= 1:
            raise InvalidParameterError("need lr >= 0 (0 = default), weight_decay >= 0 and dropout in [0, 1)")
        if self.local_epochs < 1 or self.hidden_layers < 0 or self.seed < 0:
            raise InvalidParameterError("need local_epochs >= 1, hidden_layers >= 0 and seed >= 0")
        if self.max_train < 0 or self.max_test < 0 or self.public_size < 1 or self.timeout <= 0:
            raise InvalidParameterError("need max_train, max_test >= 0 (0 = all), public_size >= 1 and timeout > 0")
        if self.finetune and self.client_mode != "fedavg":
            raise InvalidParameterError("finetune=True trains the encoder with AdamW inside fedavg rounds; use "
                                        "client_mode='fedavg' (alg2 sends one SGD step of the head only)")
        if self.finetune and self.mode == "inter":
            raise InvalidParameterError("finetune=True supports intra mode only (inter mode's public rows would "
                                        "need re-encoding by every client's current encoder); use mode='intra'")
        if not self.encoder_lr > 0:
            raise InvalidParameterError(f"encoder_lr must be > 0, got {self.encoder_lr}")
        if self.dp not in DP_MODES:
            raise InvalidParameterError(f"dp must be one of server, client, local (or '' for none), got {self.dp!r}")
        if self.dp and not (self.dp_clip > 0 and self.dp_noise > 0):
            raise InvalidParameterError(f"dp={self.dp!r} needs a clip bound > 0 and a noise multiplier > 0, got "
                                        f"clip={self.dp_clip:g}, noise={self.dp_noise:g}")
        if not self.dp and (self.dp_clip or self.dp_noise):
            raise InvalidParameterError("a clip bound or noise multiplier without dp does nothing; pass dp='server', "
                                        "'client' or 'local' (--dp) or leave them out")
        if self.dp and self.finetune:
            raise InvalidParameterError("dp with finetune=True is not supported (the update would include the "
                                        "encoder's 22.7M weights); train the head only")

    @property
    def defended(self) -> bool:
        return not (self.m == 0 and self.k == 1)

    @property
    def learning_rate(self) -> float:
        if self.lr > 0:
            return self.lr
        return 0.5 if self.client_mode == "alg2" else 1e-3

    @property
    def name(self) -> str:
        setting = f"m{self.m}-k{self.k}-{self.mode}" if self.defended else "plain"
        part = "iid" if self.alpha == 0 else f"a{self.alpha:g}"
        tuned = "-ft" if self.finetune else ""
        dp = f"-dp{self.dp}-C{self.dp_clip:g}-z{self.dp_noise:g}" if self.dp else ""
        return (f"{self.corpus}-{self.client_mode}{tuned}-{setting}{dp}-c{self.clients}-{part}-r{self.rounds}"
                f"-b{self.batch_size}-seed{self.seed}")

    @property
    def run_name(self) -> str:
        """:attr:`name` plus every other setting that changes the run where it differs from the default, so two
        runs that differ in anything but ``timeout`` never share a result file name (``-lr0.1``, ``-n500`` for
        ``max_train``, ``-t100`` for ``max_test``, ...). The learning rate is named when it differs from the
        mode's default, so the default and an explicit ``lr`` equal to it name the same run."""
        default = FederatedConfig()
        parts = []
        if self.learning_rate != FederatedConfig(client_mode=self.client_mode).learning_rate:
            parts.append(f"lr{self.learning_rate:g}")
        for key, tag in (("max_train", "n"), ("max_test", "t"), ("local_epochs", "e"), ("hidden_layers", "h"),
                         ("dropout", "drop")):
            if getattr(self, key) != getattr(default, key):
                parts.append(f"{tag}{getattr(self, key):g}")
        if self.client_mode == "fedavg" and self.weight_decay != default.weight_decay:
            parts.append(f"wd{self.weight_decay:g}")
        if self.mode == "inter" and (self.public, self.public_size) != (default.public, default.public_size):
            parts.append(f"pub-{self.public}{self.public_size}")
        if self.finetune and self.encoder_lr != default.encoder_lr:
            parts.append(f"elr{self.encoder_lr:g}")
        return "-".join([self.name, *parts])

    def result_config(self) -> dict[str, Any]:
        """The settings that distinguish runs (everything but ``timeout``), as result records store them."""
        return {k: v for k, v in self.to_dict().items() if k != "timeout"}

    @property
    def dp_delta(self) -> float:
        """The delta of the run's guarantee: 1 / (10 clients) (the unit protected is a client)."""
        return 1.0 / (10 * self.clients)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_run_config(self) -> dict[str, bool | int | float | str]:
        """Flat keys with dashes, as Flower's run config and ConfigRecord want them."""
        return {k.replace("_", "-"): v for k, v in asdict(self).items()}

    @classmethod
    def from_run_config(cls, run_config: Any) -> FederatedConfig:
        """Inverse of :meth:`to_run_config`; unknown keys are an error (a typo must not fall back to a default)."""
        names = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in dict(run_config).items():
            if key in ("server-round", "veil-config", "clipping_norm"):  # clipping_norm: Flower's client-side DP
                continue  # wrapper adds it (veil's clients clip by dp-clip)
            name = str(key).replace("-", "_")
            if name not in names:
                raise InvalidParameterError(f"unknown federated setting {key!r}; valid: "
                                            f"{', '.join(sorted(n.replace('_', '-') for n in names))}")
            values[name] = value
        return cls(**values)
