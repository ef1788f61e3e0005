"""Gradient matching with dummy masks: Algorithm 3 of TextHide (Huang et al., Findings of EMNLP 2020, App. C.1).

Zhu et al. (2019, "Deep Leakage from Gradients") recover a client's input from its gradient by optimising dummy
inputs until their gradient matches: ``min D_g = ||g(dummy) - g_observed||^2``. TextHide's Alg. 3 adds the secret
mask to the unknowns: dummy input(s) x', dummy mask sigma' (and, at k > 1, dummy mixing coefficients lambda')
are optimised together; the true label is GIVEN to the attacker (App. C.1). Table 2 reports the fraction of 50
attacks whose recovered input has MSE <= 1e-3 against the original.

The mimic (App. C.1): the network's hidden layer of width d_m is the "TextHide representation"; it is mixed
with the hidden representations of k - 1 other examples, masked by sigma in {-1, +1}^{d_m}, and fed to the
output layer. Here ``placement="hidden"`` builds exactly that around veil's head:
``x (MiniLM vector) -> Linear(384, d) -> act -> [sigma o sum_j lambda_j h(x_j)] -> Linear(d, C)``; the mask
dimension d is the hidden width, and the attacker recovers the k MiniLM vectors x_j. ``placement="input"`` is
veil's own TextHide (the mask on the head's input, Alg. 1-2 with a frozen encoder): then the gradient depends
on (sigma, x, lambda) only through the encoding ``e~ = sigma o sum_j lambda_j x_j``, so no gradient can tell
the mask from the representation; the attack matches e~ exactly and "fails" only by Table 2's scoring (see
``encoding_recovered`` in :func:`score_gradmatch`, and :mod:`veil.attacks.gradients.analytic`, which reads e~
off the first layer without any optimisation).

Departures from the paper, all deliberate:

* Data and network: real MiniLM sentence vectors of rt-polarity (times sqrt(384), veil's ``rep_scale``, so
  coordinates have mean square ~1), not CIFAR-10 through LeNet-5. The head is veil's MLPHead initialisation;
  the activation defaults to sigmoid, as in the DLG code the paper used (ReLU, veil's default, is available
  with ``activation="relu"``: dead units stall matching, PRIOR-ART B.1).
* Parametrisation: lambda' = softmax(a) (on the simplex, as TextHide's coefficients are) and
  sigma' = tanh(s) (relaxed to [-1, 1]); a, s, x' start from N(0, 1) (Alg. 3 line 9). The paper's line 14
  writes grad_y for sigma; we follow its text (grad_sigma).
* Optimiser: L-BFGS with lr 1, history 100, max_iter 20 per step (App. C.1), but with a strong-Wolfe line
  search (without it L-BFGS diverged in most of our runs, baseline included) and a budget of ``max_evals``
  loss evaluations (the paper ran 1,200 steps, up to 24,000 evaluations, 97 s per run on a V100). The
  distance is divided by ||g_observed||^2 (scale-free stopping at ``tol``); this does not move the optimum.
* Batch size 1 with k > 1: the observed gradient is that of ONE encrypted row mixing k distinct private
  examples (rows that drew an example twice are skipped); all k contribute to the first layer's gradient.
  The paper's attack code is not public, so this detail is ours.
* Float64 throughout (the paper's threshold 1e-3 is far above float64 noise).
* Scoring (:func:`score_gradmatch`): the k dummies are matched to the k sources by the Hungarian algorithm on
  MSE; a mask and its negation explain the same encoding in ``placement="input"``, so MSE is also taken
  against -x' (sign-corrected) and reported both ways. Success = every source matched with MSE <= 1e-3.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel, rng_description
from veil.attacks.gradients._net import ACTIVATIONS, forward, gradient_distance, layers_from_state, \
    loss_gradients, minimise_distance, soft_cross_entropy
from veil.attacks.gradients.tap import ModelSpec, _frozen
from veil.validation import check_choice, check_int, check_real, check_rng
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike, torch_generator

__all__ = ["PLACEMENTS", "GradientObservation", "Alg3Truth", "Alg3Recovery", "GradMatch", "simulate_step",
           "score_gradmatch", "SUCCESS_MSE", "MAX_MIXED", "check_mixed"]

PLACEMENTS = ("hidden", "input")
SUCCESS_MSE = 1e-3  # Sec. 4.3: "an attack is said to be successful if the MSE ... is <= 0.001"
#: :func:`simulate_step` redraws TextHide's mixing of the k examples (at most this many times) until a row mixes k
#: distinct ones, which a row does with probability k! / k^k (its k - 1 permutations all miss the examples already in
#: it)
MIX_DRAWS = 10_000
#: the largest k :func:`simulate_step` takes: up to k = 11 the k rows of MIX_DRAWS draws find such a row except with
#: probability ~2e-7 (k = 12: ~2e-3; k = 16: ~0.8; k = 64: ~1); the paper's Table 2 has k = 1, 2, 4
MAX_MIXED = 11


def check_mixed(k: int, name: str = "k") -> int:
    """``k`` as an int in 1..:data:`MAX_MIXED`, or a typed error saying why a larger k cannot be simulated."""
    k = check_int(name, k, minimum=1)
    if k > MAX_MIXED:
        raise InvalidParameterError(
            f"{name}={k}: one observed step mixes k distinct examples in one row, and TextHide's random mixing draws "
            f"such a row with probability k!/k^k per row (about 10^{_log10_distinct(k):.0f} at k={k}), so "
            f"{MIX_DRAWS:,} redraws may find none; use k <= {MAX_MIXED}, for which they do except with probability "
            "< 1e-6 (the paper's Table 2: k = 1, 2, 4)")
    return k


def _log10_distinct(k: int) -> float:
    """log10(k! / k^k): the chance that one mixed row holds k distinct examples."""
    import math

    return (math.lgamma(k + 1) - k * math.log(k)) / math.log(10)


def _hook_at(placement: str) -> int:
    return 1 if placement == "hidden" else 0


@dataclass(frozen=True, repr=False)
class GradientObservation:
    """What the server sees of one client step (batch size 1): the public model, the gradient, the given label.

    ``weights`` / ``gradients``: MLPHead state_dict keys -> arrays. ``label``: the (soft) label the loss used,
    given to the attacker as in App. C.1 (None: the attacker learns it). ``defense``: public configuration
    only: ``{"name": "texthide"|"none", "k", "m", "placement", "mask_dim"}``.
    """

    spec: ModelSpec
    weights: Mapping[str, np.ndarray]
    gradients: Mapping[str, np.ndarray]
    label: np.ndarray | None
    defense: Mapping[str, Any]
    activation: str = "sigmoid"

    def __post_init__(self) -> None:
        if not isinstance(self.spec, ModelSpec):
            raise InvalidTypeError(f"spec must be a ModelSpec, not {type(self.spec).__name__}")
        shapes = self.spec.shapes()
        for name in ("weights", "gradients"):
            arrays = getattr(self, name)
            if not isinstance(arrays, Mapping) or set(arrays) != set(shapes):
                raise DataFormatError(f"{name} must map exactly the keys {sorted(shapes)} to arrays")
            for key, shape in shapes.items():
                if np.shape(arrays[key]) != shape:
                    raise DataFormatError(f"{name}[{key!r}] has shape {np.shape(arrays[key])}, expected {shape}")
            object.__setattr__(self, name, MappingProxyType({k: _frozen(v, np.float64) for k, v in arrays.items()}))
        if self.label is not None:
            lab = np.asarray(self.label, dtype=np.float64).reshape(-1)
            if lab.shape != (self.spec.out_dim,):
                raise DataFormatError(f"label must have {self.spec.out_dim} entries, got {lab.shape}")
            object.__setattr__(self, "label", _frozen(lab))
        object.__setattr__(self, "defense", MappingProxyType(dict(self.defense)))
        check_choice("activation", self.activation, ACTIVATIONS)
        check_choice("defense placement", self.placement, PLACEMENTS)
        if self.placement == "hidden" and not self.spec.hidden:
            raise InvalidParameterError("placement='hidden' needs a head with a hidden layer")

    @property
    def placement(self) -> str:
        return str(self.defense.get("placement", "input"))

    @property
    def k(self) -> int:
        return int(self.defense.get("k", 1)) if self.defense.get("name", "none") != "none" else 1

    @property
    def masked(self) -> bool:
        return self.defense.get("name", "none") == "texthide" and self.defense.get("m", 1) not in (0, "0")

    def __repr__(self) -> str:
        return f"GradientObservation(spec={self.spec}, defense={dict(self.defense)})"


@dataclass(frozen=True, repr=False)
class Alg3Truth:
    """The secret behind one observed gradient. SCORING ONLY.

    ``sources`` (k, in_dim): the private inputs mixed; ``coefficients`` (k,); ``mask`` (mask_dim,) or None;
    ``encoding`` (mask_dim,): sigma o sum_j lambda_j h(x_j), the vector at the mask.
    """

    sources: np.ndarray
    coefficients: np.ndarray
    mask: np.ndarray | None
    encoding: np.ndarray

    def __post_init__(self) -> None:
        for name in ("sources", "coefficients", "encoding"):
            object.__setattr__(self, name, _frozen(getattr(self, name), np.float64))
        if self.mask is not None:
            object.__setattr__(self, "mask", _frozen(self.mask, np.float64))

    def __repr__(self) -> str:
        return f"Alg3Truth(k={len(self.sources)}, masked={self.mask is not None})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("Alg3Truth holds a secret mask and private inputs; it cannot be pickled")


@dataclass(frozen=True, repr=False)
class Alg3Recovery:
    """The attacker's output: dummies (k, in_dim), coefficients (k,), relaxed mask or None, and the matching log."""

    inputs: np.ndarray
    coefficients: np.ndarray
    mask: np.ndarray | None
    encoding: np.ndarray
    loss: float
    evaluations: int
    wall_time_s: float
    placement: str = "hidden"
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("inputs", "coefficients", "encoding"):
            object.__setattr__(self, name, _frozen(getattr(self, name), np.float64))
        if self.mask is not None:
            object.__setattr__(self, "mask", _frozen(self.mask, np.float64))
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))

    def __repr__(self) -> str:
        return f"Alg3Recovery(k={len(self.inputs)}, loss={self.loss:.3g}, evaluations={self.evaluations})"


def _at_hook(layers: Any, x: Any, hook_at: int, activation: str) -> Any:
    """The vector TextHide acts on: the head's input (hook_at 0) or the first hidden layer's activations (1)."""
    import torch

    if hook_at == 0:
        return x
    h = x @ layers[0][0].T + layers[0][1]
    return torch.relu(h) if activation == "relu" else torch.sigmoid(h)


def _mixer(index: Any, coefficients: Any, mask: Any):
    """TextHide's mix-and-mask of one row (veil.defenses.texthide.mix.mix_representations) as a forward hook."""
    from veil.defenses.texthide.mix import mix_representations

    def hook(h: Any) -> Any:
        return mix_representations(h, index, coefficients, mask)

    return hook


def simulate_step(x: np.ndarray, y: np.ndarray, spec: ModelSpec, weights: Mapping[str, np.ndarray], *,
                  defense: Mapping[str, Any], activation: str = "sigmoid") -> tuple[GradientObservation, Alg3Truth]:
    """One client step at batch size 1 (experiments and tests): its observation and, separately, the truth.

    ``x`` (k, in_dim): the private examples (k = 1 without mixing); ``y`` (k, C) one-hot or soft labels;
    ``defense``: ``{"name": "none"}`` or ``{"name": "texthide", "k", "m", "placement"}``. The secret (mask
    pool of size m, here m = 1 as in the paper's upper-bound setting, the mixing coefficients and permutation)
    is drawn by :class:`~veil.defenses.texthide.TextHide` from the OS CSPRNG: no seed reaches it.
    """
    import torch

    from veil.defenses.texthide import TextHide

    defense = dict(defense)
    name = check_choice("defense name", defense.get("name", "none"), ("none", "texthide"))
    placement = check_choice("placement", defense.get("placement", "hidden"), PLACEMENTS)
    defense["placement"] = placement
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    k = 1 if name == "none" else check_mixed(int(defense.get("k", 1)))
    if x.ndim != 2 or x.shape[0] != k or x.shape[1] != spec.in_dim or y.shape != (k, spec.out_dim):
        raise DataFormatError(f"x must be ({k}, {spec.in_dim}) and y ({k}, {spec.out_dim}), got {x.shape}, {y.shape}")
    layers = layers_from_state(weights, len(spec.hidden), requires_grad=True)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    hook_at = _hook_at(placement)
    mask_dim = spec.in_dim if hook_at == 0 else spec.hidden[0]
    if name == "none":
        index, coef, mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.float64), None
    else:
        m = defense.get("m", 1)
        m = None if m in (None, "inf") else int(m)
        from veil.defenses.defaults import mask_pool

        th = TextHide(k=k, pool=mask_pool(m, mask_dim), record_details=True)  # OS CSPRNG: pool and mixing
        with torch.no_grad():
            h = _at_hook(layers, xt, hook_at, activation)
        for _ in range(MIX_DRAWS):
            th.encrypt(h.float())
            d = th.last_details
            rows = [i for i in range(k) if len(set(d.private_index[i].tolist())) == k]
            if rows:
                break
        else:  # pragma: no cover - probability ~0
            raise InvalidParameterError("could not draw a row mixing k distinct examples")
        r = rows[0]
        index = d.private_index[r:r + 1]
        coef = d.coefficients[r:r + 1].to(torch.float64)
        mask = None if d.masks is None else d.masks[r:r + 1].to(torch.float64)
    hook = _mixer(index, coef, mask)
    label = (coef.T * yt[index[0]]).sum(0, keepdim=True)  # y~ = sum_j lambda_j y_pi_j (Alg. 1 line 13)
    logits = forward(layers, xt, activation=activation, hook_at=hook_at, hook=hook)
    grads = loss_gradients(layers, soft_cross_entropy(logits, label))
    keys = [k_ for pair in spec.keys for k_ in pair]
    obs = GradientObservation(spec=spec, weights=dict(weights),
                              gradients={key: g.detach().numpy() for key, g in zip(keys, grads)},
                              label=label[0].numpy(),
                              defense={**defense, "k": k, "mask_dim": mask_dim}, activation=activation)
    with torch.no_grad():
        enc = hook(_at_hook(layers, xt, hook_at, activation))
    order = index[0].numpy()
    truth = Alg3Truth(sources=x[order], coefficients=coef[0].numpy(),
                      mask=None if mask is None else mask[0].numpy(), encoding=enc[0].numpy())
    return obs, truth


class GradMatch(Attack):
    """Algorithm 3: Zhu et al.'s gradient matching with dummy masks and mixing coefficients (TextHide App. C.1).

    Parameters
    ----------
    max_evals: budget of loss (and gradient) evaluations per attack.
    tol: stop once the scaled gradient distance falls below this.
    history_size, max_iter: L-BFGS settings (App. C.1: 100 and 20); lr is 1.
    rng: the dummies' initialisation. None = OS entropy; an int seed for reproducible experiments.
    """

    name = "gradmatch"
    citation = ("Huang et al., TextHide, Findings of EMNLP 2020, Alg. 3 and App. C.1 (after Zhu et al., Deep Leakage "
                "from Gradients, NeurIPS 2019)")
    threat = ThreatModel(observes="one client's gradient (batch size 1) and the public model weights",
                         needs=("the model architecture", "the true (mixed) label, given as in App. C.1",
                                "TextHide's public k and mask dimension"))
    observes = "updates"

    def run(self, observation: Any) -> Any:
        """The attack's one verb: :meth:`recover` the inputs from one observed gradient."""
        return self.recover(observation)

    def __init__(self, *, max_evals: int = 1000, tol: float = 1e-10, history_size: int = 100, max_iter: int = 20,
                 rng: RngLike = None) -> None:
        self.max_evals = check_int("max_evals", max_evals, minimum=1)
        self.tol = check_real("tol", tol, low=0.0, high=1.0)
        self.history_size = check_int("history_size", history_size, minimum=1)
        self.max_iter = check_int("max_iter", max_iter, minimum=1)
        check_rng(rng)
        self._rng_desc = rng_description(rng)
        self._gen = torch_generator(rng)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "max_evals": self.max_evals, "tol": self.tol, "optimizer": "L-BFGS",
                "lr": 1.0, "history_size": self.history_size, "max_iter": self.max_iter,
                "line_search": "strong_wolfe", "rng": self._rng_desc,
                "parametrisation": "lambda' = softmax(a), sigma' = tanh(s); a, s, x' ~ N(0, 1)"}

    def recover(self, observation: GradientObservation) -> Alg3Recovery:
        """Run the matching on ``observation`` alone -> :class:`Alg3Recovery`."""
        import torch

        if not isinstance(observation, GradientObservation):
            hint = " (the truth is for scoring only)" if isinstance(observation, Alg3Truth) else ""
            raise InvalidTypeError(f"observation must be a GradientObservation{hint}, not "
                                   f"{type(observation).__name__}")
        start = time.perf_counter()
        obs, spec = observation, observation.spec
        layers = layers_from_state(obs.weights, len(spec.hidden), requires_grad=True)
        target = [torch.from_numpy(np.array(obs.gradients[key])) for pair in spec.keys for key in pair]
        norm = sum(float((t ** 2).sum()) for t in target) or 1.0
        k, hook_at = obs.k, _hook_at(obs.placement)
        mask_dim = spec.in_dim if hook_at == 0 else spec.hidden[0]
        gen, dt = self._gen, torch.float64
        x = torch.randn(k, spec.in_dim, generator=gen, dtype=dt).requires_grad_()
        a = torch.randn(k, generator=gen, dtype=dt).requires_grad_()
        s = torch.randn(mask_dim, generator=gen, dtype=dt).requires_grad_()
        ylog = torch.randn(spec.out_dim, generator=gen, dtype=dt).requires_grad_()
        params = [x] + ([a] if k > 1 else []) + ([s] if obs.masked else []) + ([ylog] if obs.label is None else [])
        label = None if obs.label is None else torch.from_numpy(np.array(obs.label))[None, :]

        def encode_hook(lam: Any, sig: Any):
            def hook(h: Any) -> Any:
                mixed = (lam[:, None] * h).sum(0, keepdim=True)
                return mixed if sig is None else mixed * sig
            return hook

        def current() -> tuple[Any, Any, Any]:
            lam = torch.softmax(a, 0) if k > 1 else torch.ones(1, dtype=dt)
            sig = torch.tanh(s) if obs.masked else None
            y = label if label is not None else torch.softmax(ylog, 0)[None, :]
            return lam, sig, y

        def distance() -> Any:
            lam, sig, y = current()
            logits = forward(layers, x, activation=obs.activation, hook_at=hook_at, hook=encode_hook(lam, sig))
            return gradient_distance(loss_gradients(layers, soft_cross_entropy(logits, y), create_graph=True),
                                     target, norm)

        loss, evaluations = minimise_distance(params, distance, max_evals=self.max_evals, tol=self.tol,
                                              history_size=self.history_size, max_iter=self.max_iter)
        with torch.no_grad():
            lam, sig, _ = current()
            enc = encode_hook(lam, sig)(_at_hook(layers, x, hook_at, obs.activation))[0]
        return Alg3Recovery(inputs=x.detach().numpy(), coefficients=lam.detach().numpy(),
                            mask=None if sig is None else sig.detach().numpy(), encoding=enc.numpy(),
                            loss=loss, evaluations=evaluations, wall_time_s=time.perf_counter() - start,
                            placement=obs.placement, config=self.config())


def score_gradmatch(recovery: Alg3Recovery, truth: Alg3Truth, *, threshold: float = SUCCESS_MSE) -> dict[str, Any]:
    """One attack's scores (plain data; :mod:`veil.experiments.federated.table2` aggregates them with Wilson CIs).

    * ``mse`` / ``mse_raw``: the largest MSE over the k Hungarian-matched (dummy, source) pairs, with and without
      the sign correction (min of MSE against x' and -x');
    * ``success`` (all k sources within ``threshold``), ``success_any`` (at least one), ``success_raw``;
    * ``mask_bits``: fraction of mask coordinates whose sign the dummy mask got right (sign-symmetric in the
      input placement, where sigma and -sigma are indistinguishable), None without a mask;
    * ``encoding_recovered``: the vector at the mask, sigma' o sum lambda' h(x'), within relative squared error
      ``threshold`` of the true one (what the gradient actually determines);
    * ``coefficient_error``: max |lambda' - lambda| after matching; ``loss``, ``evaluations``.
    """
    from scipy.optimize import linear_sum_assignment

    if not isinstance(recovery, Alg3Recovery) or not isinstance(truth, Alg3Truth):
        raise InvalidTypeError("score_gradmatch takes an Alg3Recovery and the Alg3Truth of the same step")
    R, T = recovery.inputs, truth.sources
    if R.shape != T.shape:
        raise DataFormatError(f"recovered inputs {R.shape} and sources {T.shape} differ in shape")
    raw = ((R[:, None, :] - T[None, :, :]) ** 2).mean(-1)
    flipped = ((-R[:, None, :] - T[None, :, :]) ** 2).mean(-1)
    both = np.minimum(raw, flipped)
    rows, cols = linear_sum_assignment(both)
    matched = both[rows, cols]
    rr, rc = linear_sum_assignment(raw)
    mask_bits = None
    if truth.mask is not None and recovery.mask is not None:
        agree = float((np.sign(recovery.mask) == np.sign(truth.mask)).mean())
        # input placement: sigma and -sigma explain the same encoding (with x and -x); in the hidden placement
        # the activations are >= 0, so the sign is identifiable and counted as is
        mask_bits = max(agree, 1 - agree) if recovery.placement == "input" else agree
    enc_err = float(((recovery.encoding - truth.encoding) ** 2).sum() / max((truth.encoding ** 2).sum(), 1e-300))
    coef_err = float(np.abs(recovery.coefficients[rows] - truth.coefficients[cols]).max())
    return {"mse": float(matched.max()), "mse_raw": float(raw[rr, rc].max()),
            "success": bool(matched.max() <= threshold), "success_any": bool(matched.min() <= threshold),
            "success_raw": bool(raw[rr, rc].max() <= threshold), "mask_bits": mask_bits,
            "encoding_error": enc_err, "encoding_recovered": bool(enc_err <= threshold),
            "coefficient_error": coef_err, "loss": float(recovery.loss), "evaluations": int(recovery.evaluations)}

