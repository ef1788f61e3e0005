"""(m, k)-TextHide: Huang, Song, Chen, Li, Arora. TextHide: Tackling Data Privacy in Language
Understanding Tasks. Findings of EMNLP 2020.

Implements Algorithm 1 (Sec. 3.2, intra-dataset TextHide) and inter-dataset
TextHide (Sec. 3.3) on a batch of sentence representations e (b, d) produced
by an encoder f_theta1 (e.g. the [CLS] / pooled output), as used in Alg. 2
(federated fine-tuning: each client encrypts its own batches with its own
mask pool, then computes gradients on the hidden batch):

    e~_i = sigma_i o sum_{j=1..k} lambda_ij e_{pi_j(i)},   y~_i = sum_j lambda_ij y_{pi_j(i)}

with pi_1 = identity, pi_2..pi_k independent uniformly random permutations of
the batch, lambda_i ~ |N(0, I_k)| normalised to sum 1, and sigma_i drawn
uniformly from the secret mask pool (:class:`MaskPool`) for every example at
every call (so masks change every epoch, Sec. 3.4). Inter mode mixes
ceil(k/2) private representations (identity + random permutations) with
floor(k/2) rows drawn uniformly from a large public set, and mixes only the
private labels, renormalised by the private coefficients.

Everything is vectorised (gather + bmm, no loop over examples) and
differentiable in e, so gradients reach the encoder. (m=0, k=1) is the exact
identity (output == input bit for bit, labels one-hot): one code path serves
the whole (m, k) grid of the paper's Fig. 2.

Departures from the paper and the authors' code (github.com/Hazelsuko07/TextHide):

* Masks come from the OS CSPRNG (``MaskPool(m, d)``), not from the authors'
  fixed-seed pool that anyone knowing the defaults can rebuild. Seeded pools
  exist for experiments and warn (PrivacyLeakWarning).
* The mixing randomness (permutations, coefficients, public rows, which pool
  mask each example gets) is read from the OS CSPRNG (``os.urandom``) at every
  call by default (``rng=None``), not from a PRNG stream.
* The secret pool and the experiment seed are kept apart: ``TextHide(rng=...)``
  seeds only the mixing randomness (one CPU ``torch.Generator`` derived from
  the seed, advancing across calls) and warns (PrivacyLeakWarning); it never
  determines the masks. An infinite pool (m=None) draws its fresh masks from
  the pool's own key source.
* Inter-mode labels follow the paper's formula (Sec. 3.3), not the authors'
  code, which gives public slots the label of a random private example.
* Public rows are drawn i.i.d. uniformly with replacement, independently per
  example and slot (the paper says "randomly chooses").
* Optional ``coefficient_bound`` (InstaHide-style cap on the largest
  coefficient, by rejection sampling); off by default as in the paper.
* Inference is explicit: :meth:`TextHide.encrypt_inference` applies a pool
  mask with no mixing (k = 1), as the authors do (the classifier is trained
  and tested on masked vectors).
* As in the paper, independent permutations may put the same example in two
  slots of one mixture; nothing is resampled.

Usage in a training loop (soft targets work with ``F.cross_entropy``)::

    pool = MaskPool(256, 384)                 # secret key; pool.save(path) -> 0o600 file
    th = TextHide(k=4, pool=pool)             # or public=public_vectors for inter mode
    e = encoder(batch)                        # (b, 384), requires grad
    e_t, y_t = th.encrypt(e, labels, num_classes=2)
    loss = F.cross_entropy(head(e_t), y_t)    # gradients flow through the mixing into the encoder
    logits = head(th.encrypt_inference(encoder(dev_batch)))
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from veil.defenses.base import Guarantee, TrainingEncodingsDefense
from veil.validation import check_choice, check_int, check_real, seeded_rng
from veil.defenses.texthide.masks import MaskPool
from veil.defenses.texthide.mix import (TextHideDetails, draw_coefficients, draw_private_index, draw_public_index,
                                        mix_labels, mix_representations)
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.defenses.none import is_no_defense

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["TextHide", "Encrypted", "MaskPool", "TextHideDetails", "TEXTHIDE_GUARANTEE"]

TEXTHIDE_GUARANTEE = Guarantee(
    "none", "heuristic (no formal guarantee): security rests on the conjectured hardness of recovering k-vector "
    "mixtures under secret sign masks (paper Sec. 3.4, App. A) and is only checked empirically by attacks")
TASKS = ("classification", "regression")


class Encrypted(NamedTuple):
    """A hidden batch: representations (b, d) and labels ((b, C) soft labels, (b,) values, or None)."""

    e: torch.Tensor
    y: torch.Tensor | None


def _check_representations(e: Any, dim: int, what: str = "e") -> int:
    """Validate a (b, d) float tensor; returns b."""
    import torch

    if not isinstance(e, torch.Tensor):
        raise InvalidTypeError(f"{what} must be a torch.Tensor of shape (batch, dim), got {type(e).__name__}; "
                               "convert with torch.as_tensor(x, dtype=torch.float32)")
    if not e.is_floating_point():
        raise InvalidTypeError(f"{what} must be a floating-point tensor, got {e.dtype}; use e.float()")
    if e.ndim != 2:
        raise InvalidParameterError(f"{what} must have shape (batch, dim), got {tuple(e.shape)}; pool token "
                                    "representations into one vector per example first")
    if e.shape[1] != dim:
        raise InvalidParameterError(f"{what} has dim {e.shape[1]} but the mask pool has dim {dim}; build the "
                                    f"pool with MaskPool(m, {e.shape[1]}) for this encoder")
    if not bool(torch.isfinite(e.detach()).all()):
        raise DataFormatError(f"{what} contains NaN or inf; fix the encoder output (e.g. check for overflow "
                              "in half precision) before encrypting")
    return int(e.shape[0])


class TextHide(TrainingEncodingsDefense):
    """(m, k)-TextHide, intra- or inter-dataset (Huang et al. 2020, Alg. 1 and Sec. 3.3).

    Parameters (keyword-only)
    -------------------------
    k: number of representations mixed per example (>= 1; the paper uses 4).
    pool: the client's secret :class:`MaskPool` (``MaskPool(0, d)`` = no mask).
    public: (N, d) float tensor or array of public representations; turns on
        inter-dataset mode (ceil(k/2) private + floor(k/2) public slots).
    mode: ``"intra"`` or ``"inter"``; None infers it from ``public``. Must agree with it.
    coefficient_bound: None (default, as in the paper) or a cap in (1/k, 1] on
        the largest coefficient; rows above it are redrawn.
    rng: None (default): the permutations, public rows, coefficients and mask
        choices are read from the OS CSPRNG (``os.urandom``) at every call. An
        int seed or numpy Generator makes the mixing reproducible (experiments
        and tests only; emits PrivacyLeakWarning): one CPU ``torch.Generator``
        per instance, derived from it and advancing across calls, draws them.
        Never affects the masks.
    record_details: keep the last call's one-time key (a :class:`TextHideDetails`:
        permutations, public rows, coefficients, mask indices and masks) in
        :attr:`last_details` (for tests and attack evaluation only; it is
        secret, never log it). Off by default: nothing is kept.

    ``guarantee`` is "none: heuristic (no formal guarantee) ...".
    """

    name = "texthide"
    guarantee = TEXTHIDE_GUARANTEE
    citation = "Huang, Song, Chen, Li & Arora 2020, TextHide (Findings of EMNLP)"
    paper_attack = "rss"  # Huang et al. 2020, Tables 3-4
    tasks = ("sentence-classification",)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """Mix-only, inference-time masking (256,1), the paper's (256,4) intra and inter; the full bench adds the
        (m, k) grid."""
        if quick:
            pairs = [(0, 4, "intra"), (256, 1, "intra"), (256, 4, "intra"), (256, 4, "inter")]
        else:
            pairs = [(m, k, "intra") for m in (0, 16, 256, 1024, "inf") for k in (1, 4, 8) if not is_no_defense((m, k))]
            pairs += [(m, k, "inter") for m in (256, 1024, "inf") for k in (4, 8)]
        return [{"m": m, "k": k, "mode": mode} for m, k, mode in pairs]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "TextHide":
        """A fresh pool and mixing for one setting; ``data.public_vectors`` feed inter mode (times
        ``options["scale"]`` when the training loop scales representations)."""
        from veil.defenses.defaults import key_seeds, mask_pool

        seeds = key_seeds(rng)
        pool = mask_pool(setting["m"], data.dim, rng=seeds[0])  # "inf": an infinite pool
        public = None
        if setting.get("mode", "intra") == "inter":
            public = data.public_vectors * float(options.get("scale", 1.0))
        return cls(k=int(setting["k"]), pool=pool, public=public, rng=seeds[1],
                   record_details=bool(options.get("record_details", False)))

    def __init__(self, *, k: int, pool: MaskPool, public: Any = None, mode: str | None = None,
                 coefficient_bound: float | None = None, rng: Any = None, record_details: bool = False):
        import torch

        from veil.random import torch_generator

        self._k = check_int("k", k, minimum=1, hint=" (k = number of examples mixed; k=1 means no mixing)")
        if not isinstance(pool, MaskPool):
            raise InvalidTypeError(f"pool must be a MaskPool, got {type(pool).__name__}; "
                                   "build one with MaskPool(m, dim) (m=0 for no mask)")
        self._pool = pool
        if mode is not None:
            check_choice("mode", mode, ("intra", "inter"))
        if mode == "inter" and public is None:
            raise InvalidParameterError("mode='inter' needs public representations: pass public=<(N, d) tensor of "
                                        "encoded public sentences> (the paper uses unlabeled MNLI), or use "
                                        "mode='intra'")
        if mode == "intra" and public is not None:
            raise InvalidParameterError("public= is only used by inter-dataset TextHide; drop public= or pass "
                                        "mode='inter'")
        self._public = None if public is None else self._check_public(public)
        self._mode = "inter" if self._public is not None else "intra"
        self._kp = math.ceil(self._k / 2) if self._mode == "inter" else self._k
        if coefficient_bound is not None:
            coefficient_bound = check_real("coefficient_bound", coefficient_bound, low=1 / self._k, high=1.0,
                                           low_open=True, hint=f" (it caps the largest of k={self._k} coefficients "
                                           "summing to 1; None turns the cap off)")
        self._bound = coefficient_bound
        seeded = seeded_rng(rng, "TextHide", "mixing (permutations, coefficients, public rows, mask choice)")
        self._seeded = seeded is not None
        # None = every draw straight from the OS CSPRNG (see veil.defenses.texthide.mix); else a reproducible torch stream
        self._generator: torch.Generator | None = None if seeded is None else torch_generator(seeded)
        if not isinstance(record_details, bool):
            raise InvalidTypeError(f"record_details must be a bool, got {type(record_details).__name__}")
        self._record = record_details
        self.last_details: TextHideDetails | None = None

    def _check_public(self, public: Any) -> torch.Tensor:
        import torch

        if isinstance(public, np.ndarray):
            public = torch.from_numpy(public)
        if not isinstance(public, torch.Tensor):
            raise InvalidTypeError(f"public must be a (N, d) torch tensor or numpy array, got {type(public).__name__}")
        if not public.is_floating_point():
            raise InvalidTypeError(f"public must hold floats, got {public.dtype}")
        if public.ndim != 2 or public.shape[0] < 1:
            raise InvalidParameterError(f"public must have shape (N, d) with N >= 1, got {tuple(public.shape)}")
        if public.shape[1] != self._pool.dim:
            raise InvalidParameterError(f"public vectors have dim {public.shape[1]} but the mask pool has dim "
                                        f"{self._pool.dim}; encode the public corpus with the same encoder")
        if not bool(torch.isfinite(public).all()):
            raise DataFormatError("public contains NaN or inf; drop or re-encode those rows")
        return public.detach()

    # ------------------------------------------------------------ properties
    def set_public(self, public: Any) -> None:
        """Replace the public representations of an inter-mode TextHide (same checks as ``public=``).

        Fine-tuning changes the encoder, so public vectors encoded before it go
        stale; Algorithm 2 encodes public inputs with the current encoder, which
        :func:`veil.training.finetune` does once per epoch through this method.
        """
        if self._mode != "inter":
            raise InvalidParameterError("set_public only applies to inter-dataset TextHide (built with public=); "
                                        "intra mode mixes private representations only")
        self._public = self._check_public(public)

    @property
    def k(self) -> int:
        return self._k

    @property
    def pool(self) -> MaskPool:
        return self._pool

    @property
    def mode(self) -> str:
        """``"intra"`` or ``"inter"``."""
        return self._mode

    @property
    def private_slots(self) -> int:
        """Private representations per mixture: k (intra) or ceil(k/2) (inter)."""
        return self._kp

    @property
    def public_slots(self) -> int:
        return self._k - self._kp

    @property
    def min_batch_size(self) -> int:
        """The smallest batch :meth:`encrypt` accepts (= private_slots)."""
        return self._kp

    @property
    def coefficient_bound(self) -> float | None:
        return self._bound

    @property
    def seeded(self) -> bool:
        return self._seeded

    def __repr__(self) -> str:
        bound = "" if self._bound is None else f", coefficient_bound={self._bound}"
        public = "" if self._public is None else f", public_size={self._public.shape[0]}"
        return f"TextHide(k={self._k}, pool={self._pool!r}, mode={self._mode!r}{public}{bound})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("TextHide holds a secret mask pool and cannot be pickled; save the pool with "
                        "pool.save(path) and rebuild TextHide from MaskPool.load(path)")

    def config(self) -> dict[str, Any]:
        """Public configuration (no key material)."""
        return {**super().config(), "k": self._k, "m": self._pool.m, "dim": self._pool.dim, "mode": self._mode,
                "private_slots": self._kp, "public_slots": self.public_slots,
                "public_size": None if self._public is None else int(self._public.shape[0]),
                "coefficient_bound": self._bound, "mask_key": "seeded" if self._pool.seeded else "os-csprng",
                "mixing_rng": "seeded" if self._seeded else "os-csprng"}

    # ------------------------------------------------------------ encryption
    def hook(self, task: str = "classification", num_classes: int | None = None) -> Any:
        """The release verb of a training-encodings defense: this TextHide as a training hook (``train(e, y)``
        mixes and masks each batch, ``infer(e)`` masks with the pool)."""
        from veil.defenses.texthide.hook import TextHideHook

        return TextHideHook(self, task, num_classes)

    def encrypt(self, e: torch.Tensor, y: Any = None, *, task: str = "classification",
                num_classes: int | None = None) -> Encrypted:
        """Encrypt a training batch: returns ``Encrypted(e_tilde (b, d), y_tilde)``.

        ``y`` (optional): classification -> int class ids (b,) with ``num_classes``,
        or (b, C) one-hot/soft float labels; y_tilde is (b, C) soft labels.
        Regression -> float values (b,); y_tilde is (b,). Labels come back in
        ``e``'s dtype (at least float32) on ``e``'s device. Needs b >= k (intra)
        or b >= ceil(k/2) (inter); use ``drop_last=True`` for the last batch.
        """
        check_choice("task", task, TASKS)
        b = _check_representations(e, self._pool.dim)
        if b < self._kp:
            what = "k" if self._mode == "intra" else f"ceil(k/2) = {self._kp} private slots for k"
            raise InvalidParameterError(
                f"batch size {b} is smaller than {what}={self._k}: each example is mixed with others from the "
                "same batch; use larger batches (drop_last=True in the DataLoader) or a smaller k")
        y_soft = None if y is None else self._labels(y, b, task, num_classes, e)
        gen = self._generator
        private_index = draw_private_index(b, self._kp, gen)
        public_index = None if self._mode == "intra" else draw_public_index(b, self.public_slots,
                                                                              self._public.shape[0], gen)
        coefficients = draw_coefficients(b, self._k, gen, private_slots=self._kp, bound=self._bound).to(e.dtype)
        mask_index, masks = self._pool.sample(b, gen, dtype=e.dtype, device=e.device)
        if self._pool.m == 0:
            masks = None
        e_tilde = mix_representations(e, private_index, coefficients, masks, self._public, public_index)
        y_tilde = None if y_soft is None else mix_labels(y_soft, private_index, coefficients)
        if self._record:
            self.last_details = TextHideDetails(private_index, coefficients, mask_index, masks, public_index)
        return Encrypted(e_tilde, y_tilde)

    __call__ = encrypt

    def encrypt_inference(self, e: torch.Tensor) -> torch.Tensor:
        """Inference-time TextHide: no mixing (k = 1), but a fresh pool mask per example.

        This is what the authors do at test time: the classifier is trained and
        evaluated on masked vectors. With m=0 it returns ``e`` unchanged.
        """
        import torch

        b = _check_representations(e, self._pool.dim)
        mask_index, masks = self._pool.sample(b, self._generator, dtype=e.dtype, device=e.device)
        if self._pool.m == 0:
            masks = None
        if self._record:
            self.last_details = TextHideDetails(torch.arange(b).unsqueeze(1), torch.ones(b, 1, dtype=e.dtype),
                                                mask_index, masks, None)
        return e if masks is None else e * masks

    def _labels(self, y: Any, b: int, task: str, num_classes: int | None, e: torch.Tensor) -> torch.Tensor:
        """Labels as (b, C) one-hot/soft (classification) or (b,) floats (regression), validated."""
        import torch

        dtype = torch.promote_types(e.dtype, torch.float32)
        if isinstance(y, (list, tuple)):
            y = np.asarray(y)
        if isinstance(y, np.ndarray):
            if y.dtype == object or y.dtype.kind not in "iuf":
                raise InvalidTypeError(f"labels must be ints (class ids) or floats, got numpy dtype {y.dtype}")
            y = torch.from_numpy(y)
        if not isinstance(y, torch.Tensor):
            raise InvalidTypeError(f"y must be a torch tensor, numpy array or list, got {type(y).__name__}")
        if y.dtype == torch.bool or y.is_complex():
            raise InvalidTypeError(f"labels must be int class ids or float values, got {y.dtype}")
        if y.ndim == 0 or y.shape[0] != b:
            raise InvalidParameterError(f"y has shape {tuple(y.shape)} but the batch has {b} examples; pass one "
                                        "label per row of e")
        y = y.detach().to(e.device)
        if task == "regression":
            if y.ndim != 1:
                raise InvalidParameterError(f"regression labels must have shape ({b},), got {tuple(y.shape)}; "
                                            "use y.reshape(-1)")
            y = y.to(dtype)
            if not bool(torch.isfinite(y).all()):
                raise DataFormatError("regression labels contain NaN or inf")
            return y
        if num_classes is not None:
            num_classes = check_int("num_classes", num_classes, minimum=1)
        if y.ndim == 2 and y.is_floating_point():  # one-hot or soft labels
            if num_classes is not None and y.shape[1] != num_classes:
                raise InvalidParameterError(f"soft labels have {y.shape[1]} columns but num_classes={num_classes}")
            if not bool(torch.isfinite(y).all()):
                raise DataFormatError("soft labels contain NaN or inf")
            return y.to(dtype)
        if y.ndim != 1 or y.is_floating_point():
            raise InvalidParameterError(
                f"classification labels must be int class ids of shape ({b},) or float soft labels of shape "
                f"({b}, C), got {y.dtype} {tuple(y.shape)}; for real-valued targets pass task='regression'")
        if num_classes is None:
            raise InvalidParameterError("pass num_classes=C with integer class ids (the batch may not contain "
                                        "every class, so C cannot be inferred from it)")
        lo, hi = int(y.min()), int(y.max())
        if lo < 0 or hi >= num_classes:
            raise InvalidParameterError(f"class ids must be in [0, {num_classes - 1}], got values in [{lo}, {hi}]; "
                                        "check num_classes or re-code the labels")
        return torch.nn.functional.one_hot(y.long(), num_classes).to(dtype)
