"""Privacy accounting of DP-SGD: Opacus' PRV accountant (the default) with its RDP accountant reported beside it.

Both bound the same mechanism: ``steps`` compositions of the Poisson-subsampled Gaussian mechanism (each example
in a lot independently with probability ``q``; the lot's sum of per-example gradients clipped to L2 norm ``clip``
gets N(0, (sigma * clip)^2) noise per coordinate), under add/remove-one adjacency of the training set.

* ``"prv"``: the privacy-loss random variable accountant (Gopi, Lee and Wutschitz, NeurIPS 2021), as Opacus
  implements it. veil reports its ``eps_upper`` (``eps_error`` 0.01, ``delta_error`` = delta / 1000): an upper
  bound on epsilon at ``delta`` that includes the numerical (discretisation and FFT) error, provided the
  floating-point computation of that error bound is itself correct.
* ``"rdp"``: Renyi-DP (Mironov 2017; Mironov, Talwar and Zhang 2019 for the subsampled Gaussian) converted to
  (epsilon, delta) at the best of Opacus' orders; an analytic upper bound, looser than PRV (about 8% more noise
  for the same epsilon).

Opacus' ``gdp`` accountant is not offered: it underestimates epsilon (and fails at epsilon 8).

Both accountants emit ``UserWarning("Optimal order is the largest (or smallest) alpha ...")`` while they search,
and torch warns "Full backward hook is firing when gradients are computed with respect to module outputs ..." on
the first clipped backward pass (the embeddings need no gradient); veil silences exactly these messages, inside its
own calls (:func:`quiet_opacus`), nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from veil.errors import InvalidParameterError

__all__ = ["ACCOUNTANTS", "EPS_ERROR", "Accounting", "account", "calibrate_sigma", "quiet_opacus"]

ACCOUNTANTS = ("prv", "rdp")
EPS_ERROR = 0.01  # PRV's epsilon error (Opacus' default); also the tolerance of the sigma search
#: points of PRV's discretised domain beyond which veil does not run it (each array of it is 8 bytes a point)
MAX_PRV_POINTS = 2 ** 24

#: Opacus' warnings that veil expects and silences by message (pytest runs with ``-W error``)
_EXPECTED = ("Optimal order is the largest alpha", "Optimal order is the smallest alpha",
             "Full backward hook is firing when gradients are computed with respect to module outputs")


@contextlib.contextmanager
def quiet_opacus() -> Iterator[None]:
    """Silence exactly the warnings Opacus (and torch's full backward hooks) emit in normal DP-SGD use."""
    with warnings.catch_warnings():
        for message in _EXPECTED:
            warnings.filterwarnings("ignore", message=message)
        yield


def _one_blas_thread() -> Any:
    """numpy's BLAS on one thread while the accountants run.

    PRV's discretisation takes dot products over millions of points, which OpenBLAS hands to its thread pool. Called
    from the Flower server app's thread during a simulation (Ray workers alive), that hand-off once never returned:
    the thread spun in OpenBLAS' ``exec_blas`` for over a quarter of an hour on a call that takes seconds alone. On one
    thread OpenBLAS runs the kernels in the caller, with no pool to wait on; the sums are memory-bound, so this costs
    little. The limit is process-wide and restored on exit (threadpoolctl).
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _full_lots(q: float) -> Any:
    """q = 1 (every example in every lot): Opacus' PRV takes log(1 - q) = -inf, which is right but makes numpy
    warn "divide by zero"; silenced for q = 1 only."""
    import numpy as np

    return np.errstate(divide="ignore") if q == 1.0 else contextlib.nullcontext()


@dataclass(frozen=True)
class Accounting:
    """What one DP-SGD run spends: ``epsilon`` (from ``accountant``) at ``delta``, both accountants' values,
    and the mechanism they were computed for (``sigma``, ``sample_rate`` q, ``steps``)."""

    accountant: str
    epsilon: float
    delta: float
    epsilon_prv: float | None
    epsilon_rdp: float
    sigma: float
    sample_rate: float
    steps: int
    eps_error: float = EPS_ERROR

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _prv_epsilon(sigma: float, q: float, steps: int, delta: float) -> float | None:
    """PRV's ``eps_upper``; inf for sigma 0; None when its domain would exceed :data:`MAX_PRV_POINTS` (tiny sigma:
    Opacus would try to allocate terabytes)."""
    from opacus.accountants import PRVAccountant
    from opacus.accountants.analysis.prv import PoissonSubsampledGaussianPRV

    if sigma == 0.0:
        return math.inf
    acct = PRVAccountant()
    acct.history = [(sigma, q, steps)]
    delta_error = delta / 1000
    domain = acct._get_domain(prvs=[PoissonSubsampledGaussianPRV(q, sigma)], num_self_compositions=[steps],
                              eps_error=EPS_ERROR, delta_error=delta_error)
    if domain.size > MAX_PRV_POINTS:
        return None
    with _full_lots(q):
        return float(acct.get_epsilon(delta, eps_error=EPS_ERROR, delta_error=delta_error))


def _rdp_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    from opacus.accountants import RDPAccountant

    acct = RDPAccountant()
    acct.history = [(sigma, q, steps)]
    return float(acct.get_epsilon(delta))


def _check(sigma: float, q: float, steps: int, delta: float) -> None:
    if not (math.isfinite(sigma) and sigma >= 0):
        raise InvalidParameterError(f"sigma (the noise multiplier) must be finite and >= 0, got {sigma!r}")
    if not 0 < q <= 1:
        raise InvalidParameterError(f"the sampling rate must be in (0, 1], got {q!r}")
    if not (isinstance(steps, int) and steps >= 1):
        raise InvalidParameterError(f"steps must be an int >= 1, got {steps!r}")
    if not 0 < delta < 1:
        raise InvalidParameterError(f"delta must be in (0, 1), got {delta!r}")


def account(sigma: float, q: float, steps: int, delta: float, *, accountant: str = "prv") -> Accounting:
    """Epsilon at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps (rate ``q``, noise multiplier
    ``sigma``), by both accountants; ``epsilon`` is ``accountant``'s. Sigma 0 (no noise) gives infinite epsilon
    under both. PRV is None (and cannot be the chosen accountant) when sigma is so small that its domain would not
    fit in memory; RDP then still bounds epsilon."""
    if accountant not in ACCOUNTANTS:
        raise InvalidParameterError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {accountant!r} "
                                    "(Opacus' gdp underestimates epsilon and is not offered)")
    sigma, q, delta = float(sigma), float(q), float(delta)
    _check(sigma, q, steps, delta)
    with quiet_opacus(), _one_blas_thread():
        rdp = _rdp_epsilon(sigma, q, steps, delta)
        prv = _prv_epsilon(sigma, q, steps, delta)
    if accountant == "prv" and prv is None:
        raise InvalidParameterError(f"sigma={sigma:g} is too small for the PRV accountant (its domain would not fit "
                                    f"in memory; RDP gives epsilon {rdp:.4g}); use accountant='rdp' or more noise")
    return Accounting(accountant=accountant, epsilon=prv if accountant == "prv" else rdp, delta=delta,
                      epsilon_prv=prv, epsilon_rdp=rdp, sigma=sigma, sample_rate=q, steps=steps)


def calibrate_sigma(epsilon: float, delta: float, q: float, steps: int, *, accountant: str = "prv") -> float:
    """The smallest noise multiplier (to Opacus' search tolerance, :data:`EPS_ERROR` in epsilon) whose
    ``accountant`` epsilon is at most ``epsilon`` (``opacus.accountants.utils.get_noise_multiplier`` with exactly
    this q and number of steps, not Opacus' ``1 / len(data_loader)`` rate)."""
    if accountant not in ACCOUNTANTS:
        raise InvalidParameterError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {accountant!r}")
    _check(1.0, q, steps, delta)
    return _calibrated(float(epsilon), float(delta), float(q), int(steps), accountant)


@functools.lru_cache(maxsize=256)
def _calibrated(epsilon: float, delta: float, q: float, steps: int, accountant: str) -> float:
    """:func:`calibrate_sigma`'s search, once per setting and process: a deterministic function of its arguments,
    and a few seconds each (a membership attack's shadow models all share the target's setting)."""
    from opacus.accountants.utils import get_noise_multiplier

    kwargs = {"eps_error": EPS_ERROR} if accountant == "prv" else {}
    with quiet_opacus(), _full_lots(float(q)):
        try:
            return float(get_noise_multiplier(target_epsilon=float(epsilon), target_delta=float(delta),
                                              sample_rate=float(q), steps=int(steps), accountant=accountant,
                                              epsilon_tolerance=EPS_ERROR, **kwargs))
        except ValueError as exc:  # "The privacy budget is too low." (sigma above Opacus' MAX_SIGMA)
            raise InvalidParameterError(f"no noise level reaches epsilon={epsilon:g} at delta={delta:.3g} in {steps} "
                                        f"steps at sampling rate {q:.4g} ({exc}); raise epsilon, or train fewer "
                                        "steps or with a smaller batch") from None
