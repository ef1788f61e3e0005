"""The vectorised core of TextHide's Algorithm 1 (Huang et al. 2020, Sec. 3.2-3.3), as pure functions.

:class:`~veil.defenses.texthide.TextHide` draws the one-time key (permutations,
public rows, coefficients, masks) and calls :func:`mix_representations` and
:func:`mix_labels`; attacks and tests can call them with a key of their own
(e.g. dummy masks, or a recorded :class:`TextHideDetails`).

Slot layout used throughout: for example i, slots ``0 .. kp-1`` are private
(slot 0 is i itself, slot j is pi_{j+1}(i)), slots ``kp .. k-1`` are rows of
the public set (inter-dataset mode only; ``kp = ceil(k/2)`` there, ``kp = k``
in intra mode). ``coefficients[i]`` has one entry per slot in that order.

Randomness: each ``draw_*`` function takes ``generator``, a CPU
``torch.Generator`` (reproducible: experiments and tests), or None, which reads
every draw directly from the OS CSPRNG (``os.urandom``) through
:func:`secure_randint`, :func:`secure_permutations` and
:func:`secure_half_normal`: unlike a PRNG stream, outputs then reveal nothing
about one another or about later draws.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from veil.errors import InvalidParameterError

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["TextHideDetails", "draw_private_index", "draw_public_index", "draw_coefficients",
           "mix_representations", "mix_labels", "secure_randint", "secure_permutations", "secure_half_normal",
           "MAX_RESAMPLE_ROUNDS"]

MAX_RESAMPLE_ROUNDS = 10_000


@dataclass(frozen=True, repr=False)
class TextHideDetails:
    """The one-time secret key of one encryption call. SECRET: for tests and attack evaluation; never log it.

    Attributes
    ----------
    private_index: int64 (b, kp); column 0 is ``arange(b)`` (pi_1 = identity), column j is pi_{j+1}.
    coefficients: (b, k) lambda_i, private slots first then public slots; each row sums to 1.
    mask_index: int64 (b,) index of each example's mask in the pool, or None (m=0 or m=None).
    masks: (b, d) the +-1 masks applied, or None when m=0 (no mask).
    public_index: int64 (b, k - kp) rows of the public set (inter mode), or None (intra mode).
    """

    private_index: torch.Tensor
    coefficients: torch.Tensor
    mask_index: torch.Tensor | None
    masks: torch.Tensor | None
    public_index: torch.Tensor | None

    @property
    def k(self) -> int:
        return int(self.coefficients.shape[1])

    @property
    def private_slots(self) -> int:
        return int(self.private_index.shape[1])

    @property
    def permutations(self) -> torch.Tensor:
        """(kp, b): row j is pi_{j+1} as an index array (row 0 is the identity)."""
        return self.private_index.T

    def __repr__(self) -> str:  # shapes only: the values are a secret key
        b, k = self.coefficients.shape
        return (f"TextHideDetails(b={b}, k={k}, private_slots={self.private_slots}, "
                f"masked={self.masks is not None})")


# ---------------------------------------------------------------- OS CSPRNG draws (generator=None)
def _urandom_words(n: int) -> np.ndarray:
    """``n`` uniform uint64 words read from the OS CSPRNG."""
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)


def secure_randint(high: int, shape: tuple[int, ...]) -> torch.Tensor:
    """int64 tensor of ``shape``, i.i.d. uniform on ``range(high)``, from ``os.urandom``.

    Unbiased: 64-bit words at or above the largest multiple of ``high`` below
    2^64 are rejected and redrawn (probability < high / 2^64 each).
    """
    import torch

    if high < 1:
        raise InvalidParameterError(f"high must be >= 1, got {high}")
    n = int(np.prod(shape, dtype=np.int64))
    limit = (2**64 // high) * high  # accept words < limit: each residue then has the same number of words
    words = _urandom_words(n)
    if limit < 2**64:
        while True:
            bad = np.flatnonzero(words >= np.uint64(limit))
            if bad.size == 0:
                break
            words = words.copy()  # frombuffer arrays are read-only
            words[bad] = _urandom_words(bad.size)
    return torch.from_numpy((words % np.uint64(high)).astype(np.int64)).reshape(shape)


def secure_permutations(count: int, n: int) -> torch.Tensor:
    """(count, n) int64: ``count`` independent uniformly random permutations of ``range(n)``, from ``os.urandom``.

    Each row is the argsort of n i.i.d. uniform 64-bit keys, which is a uniform
    permutation given that the keys are distinct; rows with a repeated key
    (probability < n^2 / 2^65) are redrawn.
    """
    import torch

    keys = _urandom_words(count * n).reshape(count, n)
    while True:
        order = np.argsort(keys, axis=1)
        srt = np.take_along_axis(keys, order, axis=1)
        tied = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
        if tied.size == 0:
            return torch.from_numpy(order.astype(np.int64, copy=False))
        keys = keys.copy()
        keys[tied] = _urandom_words(tied.size * n).reshape(tied.size, n)


def secure_half_normal(shape: tuple[int, ...]) -> torch.Tensor:
    """float64 tensor of ``shape``, i.i.d. |N(0, 1)|, from ``os.urandom`` by inversion.

    ``|Z| = -Phi^{-1}(u / 2)`` with ``u`` uniform on (0, 1] in steps of 2^-53
    (53 random bits per draw); the largest value is ~8.3, so the law is cut at
    the (2^-53)-quantile of the tail.
    """
    import torch

    n = int(np.prod(shape, dtype=np.int64))
    u = ((_urandom_words(n) >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53  # (0, 1]
    return torch.special.ndtri(torch.from_numpy(u * 0.5)).neg_().reshape(shape)


# ---------------------------------------------------------------- the one-time key
def draw_private_index(b: int, kp: int, generator: torch.Generator | None) -> torch.Tensor:
    """(b, kp) int64: identity, then kp-1 independent uniformly random permutations of range(b).

    ``generator`` None draws the permutations from the OS CSPRNG.
    """
    import torch

    if generator is None:
        return torch.cat([torch.arange(b).unsqueeze(1), secure_permutations(kp - 1, b).T], dim=1)
    cols = [torch.arange(b)] + [torch.randperm(b, generator=generator) for _ in range(kp - 1)]
    return torch.stack(cols, dim=1)


def draw_public_index(b: int, kq: int, n_public: int, generator: torch.Generator | None) -> torch.Tensor:
    """(b, kq) int64: public rows drawn i.i.d. uniformly (with replacement) from range(n_public).

    ``generator`` None draws them from the OS CSPRNG.
    """
    import torch

    if generator is None:
        return secure_randint(n_public, (b, kq))
    return torch.randint(n_public, (b, kq), generator=generator)


def _half_normal(shape: tuple[int, ...], generator: torch.Generator | None) -> torch.Tensor:
    import torch

    if generator is None:
        return secure_half_normal(shape)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).abs_()


def draw_coefficients(b: int, k: int, generator: torch.Generator | None, *, private_slots: int | None = None,
                      bound: float | None = None) -> torch.Tensor:
    """(b, k) float64 rows lambda_i ~ |N(0, I_k)| normalised to sum 1 (Alg. 1 line 9).

    Rows are redrawn (rejection sampling, so accepted rows follow the conditional
    law) when their private coefficients are all exactly zero (probability ~0;
    the label weights would be undefined) or, if ``bound`` is set, when their
    largest normalised coefficient exceeds ``bound`` (the InstaHide-style cap).
    ``k = 1`` gives exactly 1.0. ``generator`` None draws from the OS CSPRNG.
    """
    kp = k if private_slots is None else private_slots
    lam = _half_normal((b, k), generator)
    for _ in range(MAX_RESAMPLE_ROUNDS):
        bad = lam[:, :kp].sum(1) == 0
        if bound is not None:
            bad |= (lam / lam.sum(1, keepdim=True)).amax(1) > bound
        n_bad = int(bad.sum())
        if n_bad == 0:
            return lam / lam.sum(1, keepdim=True)
        lam[bad] = _half_normal((n_bad, k), generator)
    raise InvalidParameterError(f"coefficient_bound={bound} rejects almost every draw for k={k}; "
                                f"raise it further above 1/k = {1 / k:.4g}, or use coefficient_bound=None")


def mix_representations(e: torch.Tensor, private_index: torch.Tensor, coefficients: torch.Tensor,
                        masks: torch.Tensor | None = None, public: torch.Tensor | None = None,
                        public_index: torch.Tensor | None = None) -> torch.Tensor:
    """``e~_i = sigma_i o sum_j lambda_ij * source_j(i)`` for every i at once (Alg. 1 line 12).

    Differentiable in ``e`` (index_select + multiply-add, summed over slots in
    order j = 1..k). ``public`` may live on another device than ``e`` (only
    the rows used are moved).
    """
    index = private_index.to(e.device)
    coef = coefficients.to(device=e.device, dtype=e.dtype)
    # One (b, d) gather + multiply-add per slot (a loop over k, not over examples): each op stays below torch's
    # intra-op parallel grain at typical sizes, which avoids thread hand-offs that cost far more than the math.
    mixed = e.index_select(0, index[:, 0]) * coef[:, :1]
    for j in range(1, index.shape[1]):
        mixed = mixed + e.index_select(0, index[:, j]) * coef[:, j:j + 1]
    if public_index is not None:
        kp, rows_index = index.shape[1], public_index.to(public.device)
        for j in range(rows_index.shape[1]):
            rows = public.index_select(0, rows_index[:, j]).to(device=e.device, dtype=e.dtype)
            mixed = mixed + rows * coef[:, kp + j:kp + j + 1]
    return mixed if masks is None else mixed * masks.to(device=e.device, dtype=e.dtype)


def mix_labels(y: torch.Tensor, private_index: torch.Tensor, coefficients: torch.Tensor) -> torch.Tensor:
    """Mixed labels from the private slots only, renormalised by their coefficients (paper Sec. 3.3).

    ``y`` is (b,) (regression values) or (b, C) (one-hot / soft labels). In intra
    mode all slots are private and the weights already sum to 1, so this is
    Alg. 1 line 13; in inter mode it is the paper's formula
    ``sum_j lambda_ij y_pi_j(i) 1[private] / sum_j lambda_ij 1[private]``.
    """
    import torch

    kp = private_index.shape[1]
    w = coefficients[:, :kp].to(device=y.device, dtype=y.dtype)
    w = w / w.sum(1, keepdim=True)
    gathered = y[private_index.to(y.device)]  # (b, kp) or (b, kp, C)
    if y.ndim == 1:
        return (w * gathered).sum(1)
    return torch.bmm(w.unsqueeze(1), gathered).squeeze(1)
