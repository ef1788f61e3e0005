"""Inversion after unmasking: TextHide's encodings written back as text, with no index of the private text.

TextHide releases ``e~ = sigma o z``: ``z`` a sentence vector (inference, k = 1) or a convex mixture of k of them
(a training run), ``sigma`` one of m secret sign masks. The index-free chain:

1. **Unmask.** :class:`~veil.attacks.texthide.mask_recovery.MaskRecovery` recovers the pool and each encoding's
   mask from the encodings alone (public statistics only). An encoding the recovery leaves unassigned takes the
   recovered mask closest to its soft mask estimate; when no mask is found at all, an encoding takes the signs of
   its own soft estimate (``|e~| o sign(mu)``, the anisotropy guess). A mask and its negation explain an encoding
   equally (``sigma o z = (-sigma) o (-z)``); between ``z`` and ``-z`` the attacker keeps the one with the larger
   dot product with the public mean ``mu`` (sentence vectors are anisotropic: MiniLM's mean has norm about 0.46).
   **Flip repair** (given the public covariance): public statistics from another domain whose mean has the other
   sign on a coordinate flip that bit in every recovered mask (the encodings cannot tell, mask_recovery's step 5),
   so the unmasked vectors are ``z o f`` for one unknown sign vector ``f``. Their covariance is then
   ``diag(f) Cov diag(f)``: where the public covariance ``C`` is a fair guess of the private one, ``f_i f_j`` is
   the sign of ``Cu_ij C_ij``, and ``f`` is read off the top eigenvector of that matrix (diagonal zeroed), its
   global sign set by the public mean. With in-domain statistics every product is a square and ``f`` is all
   ones. Measured on rt-polarity's MiniLM vectors with health-tweets statistics (173 of 384 mean signs differ):
   cosine to the true vectors 0.104 before the repair, 0.961 after it (98.4% of the flips found).
2. **Invert** the unmasked vectors with veil's inverter and correction by re-embedding
   (:class:`~veil.attacks.inversion.invert.Inversion`). A mixture gives one text back; the scorer sets it against
   the mixture's largest private source (:func:`veil.bench.cells.vectors.unmasked_inversion_cell`).

Threat model: the eavesdropper sees every encoding (it recovers the pool from all of them and inverts those it
picks), knows the public encoder and the mechanism (Kerckhoffs), and holds public text (the statistics' corpus,
the inverter's training sentences); never the key, an index of the private text, or an original.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from veil.attacks.base import Observation, ThreatModel
from veil.attacks.inversion.invert import Inversion
from veil.errors import InvalidTypeError

__all__ = ["UnmaskedInversion", "unmask", "recover_and_unmask"]


def unmask(vectors: Any, masks: Any, assignment: Any, mean: Any, cov: Any = None) -> np.ndarray:
    """float32 (n, d): each encoding times its mask (module docstring, step 1), the sign chosen by the public mean.

    ``masks`` (m', d) of +-1 (m' may be 0), ``assignment`` (n,) with -1 for an encoding no mask was assigned to,
    ``mean`` (d,) the public mean, ``cov`` (d, d) the public covariance (None: no flip repair)."""
    from veil.attacks.texthide.mask_recovery import soft_mask_estimates

    E = np.ascontiguousarray(vectors, dtype=np.float32)
    M = np.asarray(masks, dtype=np.float32).reshape(-1, E.shape[1])
    a = np.asarray(assignment, dtype=np.int64).copy()
    mu = np.asarray(mean, dtype=np.float64)
    free = np.flatnonzero(a < 0)
    signs = np.empty_like(E)
    if len(free):
        T = soft_mask_estimates(E[free], mu)
        if len(M):  # the closest recovered mask (a mask and its negation are the same: absolute cosine)
            a[free] = np.abs(T @ M.T).argmax(axis=1)
        else:
            signs[free] = np.where(T >= 0, 1.0, -1.0)
    found = a >= 0
    if found.any():
        signs[found] = M[a[found]]
    Z = E * signs
    if cov is not None and len(Z) > 2:  # flip repair (module docstring)
        W = np.cov(Z.astype(np.float64), rowvar=False) * np.asarray(cov, dtype=np.float64)
        np.fill_diagonal(W, 0.0)
        f = np.where(np.linalg.eigh(W)[1][:, -1] >= 0, 1.0, -1.0)
        if (Z.astype(np.float64) * f).mean(axis=0) @ mu < 0:
            f = -f
        Z = (Z * f).astype(np.float32)
    flip = (Z.astype(np.float64) @ mu) < 0
    Z[flip] *= -1.0
    return Z


def recover_and_unmask(recovery: Any, observation: Observation) -> tuple[np.ndarray, dict[str, Any]]:
    """``recovery`` (a :class:`~veil.attacks.texthide.mask_recovery.MaskRecovery`) run on every observed encoding,
    then each encoding :func:`unmask`-ed with the recovery's public mean and covariance: (float32 (n, d), what was
    found: masks recovered, encodings assigned, seconds; counts only, no key material)."""
    rec = recovery.recover(observation)
    found = {"masks_found": rec.m_estimate, "encodings": int(len(rec.assignment)),
             "assigned": int((rec.assignment >= 0).sum()), "seconds": round(rec.wall_time_s, 3)}
    return unmask(observation.vectors, rec.masks, rec.assignment, recovery.stats.mean, recovery.stats.cov), found


class UnmaskedInversion(Inversion):
    """Recover TextHide's masks (``recovery``: a :class:`~veil.attacks.texthide.mask_recovery.MaskRecovery`), unmask
    every observed encoding, invert them (``inverter``, ``steps``, ``beam`` and ``options`` as in
    :class:`~veil.attacks.inversion.invert.Inversion`)."""

    name: ClassVar[str] = "invert-unmasked"
    citation: ClassVar[str] = ("Carlini et al. 2021 (An Attack on InstaHide) for the masks, as veil's mask-recovery; "
                               "then Li et al. 2023 (GEIA) and Morris et al. 2023 (Vec2Text) as veil's invert")
    threat: ClassVar[ThreatModel] = ThreatModel(
        observes="TextHide encodings (inference queries or a training run's encodings), all of them",
        needs=("mean and covariance of original representations of a public corpus", "the public encoder",
               "the inverter trained on public text"))
    observes: ClassVar[str] = "vectors"
    bench_cell: ClassVar[str] = "veil.bench.cells.vectors:unmasked_inversion_cell"

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        """TextHide's releases (inference vectors, training encodings) with a finite pool of at least one mask: with
        m = 0 nothing is masked (``invert`` reads those vectors as they are), an infinite pool has no mask to learn."""
        from veil.defenses.base import get_defense
        from veil.defenses.texthide import TextHide
        from veil.defenses.texthide.inference import TextHideInference

        return (issubclass(get_defense(defense), (TextHide, TextHideInference))
                and setting.get("m") not in (0, "inf", None))

    @classmethod
    def for_bench(cls, resources: Any) -> "UnmaskedInversion":
        """The bench's mask recovery (in-domain held-out statistics) and the bench's inverter and steps."""
        from veil.attacks.texthide.mask_recovery import MaskRecovery

        plain = Inversion.for_bench(resources)
        return cls(MaskRecovery.for_bench(resources), plain.inverter, steps=plain.steps, beam=plain.beam)

    def __init__(self, recovery: Any, inverter: Any = "inverter", **kwargs: Any) -> None:
        from veil.attacks.texthide.mask_recovery import MaskRecovery

        if not isinstance(recovery, MaskRecovery):
            raise InvalidTypeError(f"recovery must be a MaskRecovery (MaskRecovery.from_public(public_vectors)), not "
                                   f"{type(recovery).__name__}")
        super().__init__(inverter, **kwargs)
        self.recovery = recovery
        #: what the last :meth:`unmask` found: masks recovered, encodings assigned (counts only: no key material)
        self.last_unmask: dict[str, Any] = {}

    def unmask(self, observation: Observation) -> np.ndarray:
        """Every observed encoding unmasked (float32 (n, d)); :attr:`last_unmask` says how."""
        Z, self.last_unmask = recover_and_unmask(self.recovery, observation)
        return Z

    def run(self, observation: Any) -> list[str]:
        """One text per observed encoding: unmasked, then inverted."""
        if not isinstance(observation, Observation):
            raise InvalidTypeError(f"observation must be an Observation of TextHide encodings, not "
                                   f"{type(observation).__name__}")
        return self.invert(self.unmask(observation))

    def config(self) -> dict[str, Any]:
        return {**super().config(), "mask_recovery": self.recovery.config()}
