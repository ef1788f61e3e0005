"""Inversion of a trained encoder's representations: r(x) mapped back to the public encoder's space, then inverted.

A ``representations`` release (Coavoux et al. 2018: a model's hidden states r(x), trained with or without a privacy
objective) is not a MiniLM vector, and veil's inverter reads MiniLM vectors. An attacker who can query the released
encoder (the issue's threat model: the model is deployed, or its weights shipped) learns the way back:

1. it queries the encoder on public sentences (the inverter's own training sentences) and embeds the same
   sentences with the public encoder: pairs (r(p), e(p));
2. it fits a ridge regression from r to e (:class:`sklearn.linear_model.RidgeCV`, the penalty chosen by efficient
   leave-one-out over a grid). The features are r itself and ``arctanh`` of r clipped to (-1, 1): veil's
   representations are a tanh layer over a linear map of e, so ``arctanh(r)`` is linear in e where the tanh is not
   saturated (the attacker knows the architecture; LEACE's erasure is linear too);
3. it inverts the mapped vectors (normalised) with the inverter and correction by re-embedding
   (:class:`~veil.attacks.inversion.invert.Inversion`).

The attacker never sees a private text or a private r(x) other than the ones it inverts; the scorer sets each text
written back against the private text (:func:`veil.bench.cells.representations.representations_inversion_cell`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from veil.attacks.base import Observation, ThreatModel
from veil.attacks.inversion.invert import Inversion
from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["MappedInversion"]

#: the ridge penalties tried (efficient leave-one-out picks one)
ALPHAS = tuple(10.0 ** k for k in range(-6, 4))
_CLIP = 0.999


def _features(R: np.ndarray) -> np.ndarray:
    R = np.asarray(R, dtype=np.float64)
    return np.concatenate([R, np.arctanh(np.clip(R, -_CLIP, _CLIP))], axis=1)


class MappedInversion(Inversion):
    """:meth:`fit` the map from public pairs (r(p), e(p)), then :meth:`run` on released r(x) (``inverter``,
    ``steps``, ``beam`` and ``options`` as in :class:`~veil.attacks.inversion.invert.Inversion`)."""

    name: ClassVar[str] = "invert-representations"
    citation: ClassVar[str] = ("Li et al. 2023 (GEIA) and Morris et al. 2023 (Vec2Text) as veil's invert, after a "
                               "ridge map from the released encoder's r(x) to the public encoder's space, learnt from "
                               "queries on public text (Song and Raghunathan 2020, Sec. 4, map a model's embeddings "
                               "to another's the same way)")
    threat: ClassVar[ThreatModel] = ThreatModel(
        observes="r(x) of the private texts (a trained encoder's representations)",
        needs=("query access to the released encoder on public text", "the public encoder (MiniLM)",
               "the inverter trained on public text"), trains=True)
    observes: ClassVar[str] = "representations"
    bench_cell: ClassVar[str] = "veil.bench.cells.representations:representations_inversion_cell"

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        """Every representations release (the kind decides; :class:`Inversion`'s rule is for vectors)."""
        return True

    @classmethod
    def for_bench(cls, resources: Any) -> "MappedInversion":
        """The bench's inverter and correction steps (those of ``invert``)."""
        plain = Inversion.for_bench(resources)
        return cls(plain.inverter, steps=plain.steps, beam=plain.beam)

    def __init__(self, inverter: Any = "inverter", **kwargs: Any) -> None:
        super().__init__(inverter, **kwargs)
        self._map: Any = None
        self.fitted: dict[str, Any] = {}

    def fit(self, representations: Any, vectors: Any) -> "MappedInversion":
        """Learn the map from ``representations`` (n, width) of public sentences, as the released encoder gives them,
        to ``vectors`` (n, d), the public encoder's vectors of the same sentences."""
        from sklearn.linear_model import RidgeCV

        from veil.validation import as_vectors

        R = as_vectors("representations", representations)
        X = as_vectors("vectors", vectors, dim=self.inverter.dim)
        if len(R) != len(X) or len(R) < 2:
            raise DataFormatError(f"fit needs one representation per public vector (at least 2), got {len(R)} and "
                                  f"{len(X)}")
        self._map = RidgeCV(alphas=ALPHAS).fit(_features(R), np.asarray(X, dtype=np.float64))
        pred = self._map.predict(_features(R))
        cos = np.sum(pred * X, 1) / np.maximum(np.linalg.norm(pred, axis=1) * np.linalg.norm(X, axis=1), 1e-12)
        self.fitted = {"public_pairs": int(len(R)), "width": int(R.shape[1]), "alpha": float(self._map.alpha_),
                       "train_cosine": round(float(cos.mean()), 5)}
        return self

    def map(self, representations: Any) -> np.ndarray:
        """Released r(x) (an array, an :class:`~veil.attacks.base.Observation`, or the test split of an
        :class:`~veil.attacks.attribute.AttackerSplits`) mapped to the public encoder's space, float32 (n, d)."""
        from veil.validation import as_vectors

        if self._map is None:
            raise InvalidParameterError("the map is not fitted; call fit(r(public), e(public)) first")
        if hasattr(representations, "test") and isinstance(representations.test, Observation):
            representations = representations.test
        if isinstance(representations, Observation):
            representations = representations.vectors
        R = as_vectors("representations", representations)
        if R.shape[1] != self.fitted["width"]:
            raise DataFormatError(f"the representations are {R.shape[1]} wide; the map was fitted on "
                                  f"{self.fitted['width']}")
        return self._map.predict(_features(R)).astype(np.float32)

    def run(self, observation: Any) -> list[str]:
        """One text per released representation: mapped, then inverted."""
        return self.invert(self.map(observation))

    def config(self) -> dict[str, Any]:
        return {**super().config(), "map": {"model": "ridge on [r, arctanh(clip(r, 0.999))], RidgeCV over "
                                                     f"{list(ALPHAS)}", **self.fitted}}
