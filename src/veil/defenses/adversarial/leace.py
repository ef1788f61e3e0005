"""LEACE linear concept erasure of the private variables from r(x): a library baseline beyond the paper.

Belrose et al. (2023), "LEACE: Perfect linear concept erasure in closed form", implemented by the
``concept-erasure`` package (EleutherAI; pinned in pyproject.toml). Fitted on the training split's
representations R and private variables Z, the eraser is the affine map

    r' = r - W^+ P W (r - E[r]),   W = Cov(R)^{-1/2} (whitening),  P = projection onto the column space of W Cov(R, Z)

which makes Cov(r', Z) = 0 with the least change in squared Mahalanobis norm: afterwards NO linear classifier can
predict Z from r' better than a constant (on the fitting distribution). That is a guarantee about linear probes
only: the non-linear attackers of :mod:`veil.attacks.attribute` may still recover Z, and they are always run.

In veil the eraser is applied after the undefended main model is trained (a representation transform): the
released vectors are eraser(r(x)) and the main-task head is retrained on the erased training vectors.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from veil.defenses.base import Guarantee, RepresentationsDefense
from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["LeaceErasure"]


class LeaceErasure(RepresentationsDefense):
    """Fit with :meth:`fit` (train R, private variables), then :meth:`protect` any R (vectors in, vectors out)."""

    name = "leace"
    citation: ClassVar[str] = "Belrose et al. 2023, LEACE (a baseline beside Coavoux et al. 2018)"
    tasks: ClassVar[tuple[str, ...]] = ("private-attributes",)
    guarantee = Guarantee("linear-erasure", "no linear probe predicts the private variables better than a constant "
                          "on the fitting distribution (LEACE); nothing against non-linear attackers")
    uses_private: ClassVar[bool] = True

    def __init__(self) -> None:
        self._eraser: Any = None

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        return [{}]

    def objective(self) -> None:
        """The release verb of a representations defense: None, LEACE trains the main model plainly and erases
        afterwards (:meth:`fit` on the training representations, then :meth:`protect`)."""
        return None

    def fit(self, R: np.ndarray, private: Any) -> "LeaceErasure":
        import warnings

        import torch

        with warnings.catch_warnings():  # concept_erasure's import calls torch.jit.script (deprecated in torch 2.13)
            warnings.simplefilter("ignore", DeprecationWarning)
            from concept_erasure import LeaceEraser

        R = np.asarray(R, dtype=np.float32)
        Z = np.asarray(private.Z, dtype=np.float32)
        if R.ndim != 2 or len(R) != len(Z):
            raise DataFormatError(f"LEACE needs R (n, d) and Z (n, K) with the same n, got {R.shape} and {Z.shape}")
        self._eraser = LeaceEraser.fit(torch.from_numpy(R).double(), torch.from_numpy(Z).double())
        return self

    def protect(self, R: np.ndarray) -> np.ndarray:
        import torch

        if self._eraser is None:
            raise InvalidParameterError("LeaceErasure.protect before fit: call fit(R_train, private) first")
        out = self._eraser(torch.from_numpy(np.asarray(R, dtype=np.float64)))
        return out.float().numpy()

    def config(self) -> dict[str, Any]:
        return {**super().config(), "package": "concept-erasure==0.2.4", "method": "leace"}
