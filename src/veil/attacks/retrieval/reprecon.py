"""RepRecon: TextHide (Huang et al. 2020), App. C.3 (Tables 7 and 8).

The attacker trains a network f: R^d~ -> R^d on pairs (protected e~, original
e) of a corpus's train split so that ||e - f(e~)||_2 is small, reconstructs
the original representations of protected dev queries, and maps each
reconstruction to its closest sentence with RSS (the index's most similar
entry).

As in the paper: an MLP with hidden layers (1024, 1024) and ReLU, trained for
20 epochs. Departures / choices the paper does not state:

* loss: mean squared error per coordinate (the squared L2 objective up to a
  constant), Adam with lr 1e-3, batch 64, no weight decay, no dropout;
* inputs and targets are divided by their root-mean-square coordinate on the
  training pairs (one scalar each) for training, and outputs scaled back; the
  reported losses are in the original units;
* ``rng`` (an int seed for experiments, None = OS entropy) draws the
  initialisation (torch's default Linear init, from a derived
  ``torch.Generator``; nothing global is seeded) and the shuffling.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.attacks.base import Attack, Observation, ThreatModel, rng_description
from veil.validation import as_vectors
from veil.attacks.retrieval.index import Retrieved, SimilaritySearch
from veil.validation import check_int, check_real, check_rng
from veil.errors import InvalidParameterError, InvalidTypeError
from veil.random import RngLike

__all__ = ["RepRecon"]


class RepRecon(Attack):
    """Reconstruct original representations from protected ones with an MLP, then search the index.

    Parameters (keyword-only except ``index``)
    -------------------------------------------
    index: the attacker's :class:`~veil.attacks.retrieval.index.SimilaritySearch`.
    hidden: hidden layer sizes (paper: (1024, 1024)).
    epochs, batch_size, lr: Adam training (paper: 20 epochs).
    rng: None (OS entropy) or an int seed / numpy Generator (experiments).
    progress: draw a progress bar over epochs.

    >>> rr = RepRecon(index, rng=0).fit(protected_train, original_train)
    >>> rr.reconstruct(protected_dev)            # (n, d) float32
    >>> rr.retrieve(observation)                 # Retrieved(indices, scores)
    """

    name = "reprecon"
    citation = "Huang et al. 2020, TextHide, App. C.3 (RepRecon, Tables 7-8)"
    threat = ThreatModel(observes="protected query representations",
                         needs=("a search index of (text, original representation) pairs of the corpus",
                                "(protected, original) representation pairs of the train split"),
                         trains=True)
    observes = "vectors"
    bench_cell = "veil.bench.cells.vectors:retrieval_cell"

    def run(self, observation: Observation) -> Any:
        """The attack's one verb: :meth:`retrieve` (top-1) on the observation."""
        return self.retrieve(observation)

    @classmethod
    def for_bench(cls, resources: Any) -> "RepRecon":
        protected, original = resources.known_pairs()
        return cls(resources.index, epochs=resources.train_epochs, rng=resources.seed).fit(protected, original)

    def __init__(self, index: SimilaritySearch, *, hidden: Sequence[int] = (1024, 1024), epochs: int = 20,
                 batch_size: int = 64, lr: float = 1e-3, rng: RngLike = None, progress: bool = False) -> None:
        if not isinstance(index, SimilaritySearch):
            raise InvalidTypeError(f"index must be a SimilaritySearch, not {type(index).__name__}")
        if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence):
            raise InvalidTypeError(f"hidden must be a sequence of layer sizes, not {type(hidden).__name__}")
        self.index = index
        self.hidden = tuple(check_int("hidden layer size", h, minimum=1) for h in hidden)
        self.epochs = check_int("epochs", epochs, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.lr = check_real("lr", lr, low=0.0, high=math.inf, low_open=True, high_open=True)
        check_rng(rng)
        if not isinstance(progress, bool):
            raise InvalidTypeError(f"progress must be a bool, not {type(progress).__name__}")
        self._rng, self._progress = rng, progress
        self._model: Any = None
        self._scales = (1.0, 1.0)
        self.init_loss: float | None = None
        self.history: tuple[float, ...] = ()
        self.n_train = 0

    @property
    def fitted(self) -> bool:
        return self._model is not None

    def config(self) -> dict[str, Any]:
        return {**super().config(), "hidden": list(self.hidden), "epochs": self.epochs,
                "batch_size": self.batch_size, "lr": self.lr, "optimizer": "adam", "loss": "mse",
                "rng": rng_description(self._rng), "n_train": self.n_train, "index": self.index.config(),
                "final_train_mse": self.history[-1] if self.history else None, "init_train_mse": self.init_loss}

    def _build(self, d_in: int, d_out: int, gen: Any) -> Any:
        import torch

        from veil.models.heads import MLPHead

        model = MLPHead(d_in, d_out, hidden=self.hidden, dropout=0.0)
        with torch.no_grad():
            for layer in model.modules():
                if isinstance(layer, torch.nn.Linear):  # torch's default init, drawn from our generator
                    torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=gen)
                    bound = 1.0 / math.sqrt(layer.weight.shape[1])
                    torch.nn.init.uniform_(layer.bias, -bound, bound, generator=gen)
        return model

    def fit(self, protected: Any, original: Any) -> "RepRecon":
        """Train on pairs ``protected`` (n, d~) -> ``original`` (n, d) (d = the index's dimension)."""
        import torch

        from veil.encoders._inputs import progress_bar
        from veil.random import torch_generator

        x = as_vectors("protected", protected).astype(np.float32)
        y = as_vectors("original", original, dim=self.index.dim).astype(np.float32)
        if x.shape[0] != y.shape[0]:
            raise InvalidParameterError(f"{x.shape[0]} protected vectors but {y.shape[0]} originals; pass pairs")
        sx = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) or 1.0
        sy = float(np.sqrt(np.mean(np.square(y, dtype=np.float64)))) or 1.0
        gen = torch_generator(self._rng)
        model = self._build(x.shape[1], y.shape[1], gen)
        xt, yt = torch.from_numpy(x / sx), torch.from_numpy(y / sy)
        opt = torch.optim.Adam(model.parameters(), lr=self.lr)
        unit = sy * sy
        with torch.no_grad():
            self.init_loss = float(torch.nn.functional.mse_loss(model(xt), yt)) * unit
        history = []
        model.train()
        with progress_bar(self.epochs, "RepRecon", self._progress) as advance:
            for _ in range(self.epochs):
                total = 0.0
                for idx in torch.split(torch.randperm(len(xt), generator=gen), self.batch_size):
                    loss = torch.nn.functional.mse_loss(model(xt[idx]), yt[idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * len(idx)
                history.append(total / len(xt) * unit)
                advance(1)
        model.eval()
        self._model, self._scales, self.history, self.n_train = model, (sx, sy), tuple(history), int(len(x))
        return self

    def reconstruct(self, protected: Any, *, batch_size: int = 4096) -> np.ndarray:
        """Reconstructed original representations (n, d) float32 of protected vectors (n, d~)."""
        import torch

        if self._model is None:
            raise InvalidParameterError("RepRecon is not trained; call fit(protected_train, original_train) first")
        d_in = self._model.in_dim
        x = as_vectors("protected", protected, dim=d_in, allow_empty=True).astype(np.float32)
        sx, sy = self._scales
        out = np.empty((len(x), self._model.out_dim), dtype=np.float32)
        with torch.inference_mode():
            for s in range(0, len(x), batch_size):
                out[s:s + batch_size] = (self._model(torch.from_numpy(x[s:s + batch_size] / sx)) * sy).numpy()
        return out

    def reconstruction_error(self, protected: Any, original: Any) -> float:
        """Mean squared error per coordinate of the reconstructions of ``protected`` against ``original``."""
        rec = self.reconstruct(protected)
        y = as_vectors("original", original, dim=rec.shape[1]).astype(np.float64)
        if y.shape[0] != rec.shape[0]:
            raise InvalidParameterError(f"{rec.shape[0]} protected vectors but {y.shape[0]} originals")
        return float(np.mean((rec - y) ** 2))

    def retrieve(self, observation: Observation, top_k: int = 1) -> Retrieved:
        """Reconstruct the observed vectors and return the index's most similar entries."""
        if not isinstance(observation, Observation):
            raise InvalidTypeError(f"observation must be an Observation, not {type(observation).__name__}")
        return Retrieved(*self.index.query(self.reconstruct(observation.vectors), top_k=top_k))
