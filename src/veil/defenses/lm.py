"""Defenses that release a language model fine-tuned on private text (the ``generative-model`` kind, issue 52).

``lm-plain`` is the undefended reference: veil's causal LM (:mod:`veil.models.causal_lm`: MiniLM's weights as a
decoder) fine-tuned on the private texts as they are, for a fixed number of optimiser steps (the same model on a
busy or an idle machine). Two data defenses change only what it is trained on:

* ``lm-scrub``: every text scrubbed by Presidio (:class:`veil.defenses.redaction.PresidioRedaction`, with its
  operator) before training, as Lukas et al. 2023 scrub before fine-tuning; what Presidio misses stays;
* ``lm-dedup``: exact duplicate texts (lowercased, whitespace collapsed) kept once (Kandpal et al. 2022); a secret
  repeated inside different texts stays as often as it was written.

Neither gives a formal guarantee. ``lm-dpsgd`` does: DP-SGD fine-tuning (:class:`DPFineTuning`; Opacus' ghost
clipping on the top transformer layers, one text as the unit), (epsilon, delta)-DP under adding or removing one
training text. A secret written in k texts is protected as a group of k: :func:`exposure_bound` turns the
guarantee into the most exposure a canary inserted k times can have in expectation.

What is released is a :class:`TrainedLM`: the model and how it was trained. An attack observes it only through
:class:`veil.attacks.generation.observe.LMAccess` (samples and the likelihood of given texts), never the texts it
was trained on.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from veil.defenses.base import GenerativeModelDefense, Guarantee
from veil.errors import InvalidParameterError

__all__ = ["PlainFineTuning", "ScrubbedFineTuning", "DeduplicatedFineTuning", "DPFineTuning", "TrainedLM",
           "deduplicate", "exposure_bound"]


@dataclass(frozen=True, repr=False)
class TrainedLM:
    """A released language model: ``lm`` (a :class:`veil.models.causal_lm.CausalLM`), the ``guarantee`` it was
    trained under, the public ``config`` of its training, its training ``losses`` per step, ``n_train`` (texts),
    the wall ``seconds`` it took and, for DP-SGD, its ``accounting`` (a
    :class:`veil.defenses.dpsgd.Accounting`; None otherwise)."""

    lm: Any
    guarantee: Guarantee
    config: dict[str, Any] = field(default_factory=dict)
    losses: tuple[float, ...] = ()
    n_train: int = 0
    seconds: float = 0.0
    accounting: Any = None

    def __repr__(self) -> str:
        return (f"TrainedLM({self.config.get('defense', '?')}, {len(self.losses)} steps on {self.n_train} texts, "
                f"base={getattr(self.lm, 'base', '?')!r})")


class PlainFineTuning(GenerativeModelDefense):
    """Fine-tune veil's causal LM on the private texts with no protection (the kind's undefended reference).

    ``steps`` AdamW steps at ``lr`` on batches of ``batch_size`` texts drawn uniformly (texts cut to ``max_tokens``
    word pieces); ``init_seed`` seeds the layers the base model does not ship trained; ``rng`` (an int) seeds the
    batch order and dropout, None draws that seed from OS entropy (nothing secret depends on it)."""

    name = "lm-plain"
    undefended = True
    citation = ("plain causal-LM fine-tuning: the undefended reference of the generation-leakage defenses (the "
                "models Carlini et al. 2019 and 2021 attack)")
    guarantee = Guarantee("none", "no formal guarantee: fine-tuned on the private text as it is")
    #: True where the training draws secret randomness (DP noise): an experiment then gives no seed (OS CSPRNG)
    secret_randomness: ClassVar[bool] = False

    def __init__(self, *, steps: int = 200, batch_size: int = 16, lr: float = 1e-4, max_tokens: int = 64,
                 init_seed: int = 0, rng: int | None = None) -> None:
        from veil.validation import check_int

        self.steps = check_int("steps", steps, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.max_tokens = check_int("max_tokens", max_tokens, minimum=4)
        self.init_seed = check_int("init_seed", init_seed, minimum=0)
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 1:
            raise InvalidParameterError(f"lr must be a number in (0, 1], got {lr!r}")
        self.lr = float(lr)
        if rng is not None:
            rng = check_int("rng", rng, minimum=0)
        self._seed = rng

    def __repr__(self) -> str:
        return f"PlainFineTuning(steps={self.steps}, batch_size={self.batch_size}, lr={self.lr:g})"

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The undefended reference runs in the quick bench and the full one (its run: the bench's
        :func:`~veil.bench.data_generation.bench_lm_run`, not these parameters)."""
        return [{}]

    @property
    def resumable(self) -> bool:
        """Whether :meth:`train_lm` can take a checkpoint: only with a seeded order (``rng``)."""
        return self._seed is not None

    def config(self) -> dict[str, Any]:
        return {**super().config(), "steps": self.steps, "batch_size": self.batch_size, "lr": self.lr,
                "max_tokens": self.max_tokens, "init_seed": self.init_seed,
                "order": "os-entropy" if self._seed is None else f"seed {self._seed}"}

    def train_lm(self, texts: Any, *, checkpoint: Any = None, log: Any = None) -> TrainedLM:
        """Fine-tune a fresh causal LM on ``texts`` (a list of strings) for ``steps`` steps; the released model.
        ``checkpoint`` (a file) makes the run resumable; it needs a seeded order (``rng``), since a run drawn from
        OS entropy cannot be resumed to the same model."""
        from veil.models.causal_lm import build_causal_lm, train_steps

        if checkpoint is not None and self._seed is None:
            raise InvalidParameterError("a resumable run (checkpoint=...) needs a seeded batch order: give rng=SEED")
        start = time.perf_counter()
        trained_on = self.prepare(texts, log=log)
        lm = build_causal_lm(max_tokens=self.max_tokens, seed=self.init_seed)
        seed = secrets.randbits(31) if self._seed is None else self._seed
        losses = train_steps(lm, trained_on, steps=self.steps, batch_size=self.batch_size, lr=self.lr, seed=seed,
                             checkpoint=checkpoint, log=log)
        return TrainedLM(lm=lm, guarantee=self.guarantee, config=self.config(), losses=tuple(losses),
                         n_train=len(trained_on), seconds=time.perf_counter() - start)

    def prepare(self, texts: Any, *, log: Any = None) -> list[str]:
        """What the model is trained on, made from the owner's ``texts`` (here: the texts as they are; a data
        defense overrides this)."""
        from veil.models.causal_lm import _texts

        return _texts(texts, "texts")


class ScrubbedFineTuning(PlainFineTuning):
    """Scrub the texts with Presidio, then fine-tune as ``lm-plain`` does (module docstring). ``operator``: what a
    detected span becomes (:data:`veil.defenses.redaction.OPERATORS`; ``type`` writes ``<PERSON>``); ``model``: the
    spaCy pipeline Presidio's NER runs on. The other parameters are :class:`PlainFineTuning`'s."""

    name = "lm-scrub"
    undefended = False
    citation = ("Lukas et al. 2023, Analyzing Leakage of PII in Language Models (IEEE S&P): scrubbing PII "
                "with a NER tagger before fine-tuning (Presidio here)")
    guarantee = Guarantee("none", "no formal guarantee: the PII Presidio detects is replaced before training; what "
                                  "it misses is trained on as it is")

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The full bench only (the quick one runs the undefended reference and DP-SGD at epsilon 8)."""
        return [] if quick else [{}]

    def __init__(self, *, operator: str = "type", model: str = "sm", steps: int = 200, batch_size: int = 16,
                 lr: float = 1e-4, max_tokens: int = 64, init_seed: int = 0, rng: int | None = None) -> None:
        from veil.defenses.redaction import PresidioRedaction

        super().__init__(steps=steps, batch_size=batch_size, lr=lr, max_tokens=max_tokens, init_seed=init_seed,
                         rng=rng)
        scope = "release" if operator == "pseudonym" else "document"  # one consistent pseudonym per value
        self.redaction = PresidioRedaction(operator=operator, model=model, scope=scope)

    def __repr__(self) -> str:
        return f"ScrubbedFineTuning(operator={self.redaction.operator!r}, steps={self.steps})"

    def config(self) -> dict[str, Any]:
        red = self.redaction.config()
        return {**super().config(), "operator": red["operator"],
                "scrubber": {k: v for k, v in red.items() if k not in ("defense", "operator", "citation", "guarantee")}}

    def train_lm(self, texts: Any, *, checkpoint: Any = None, log: Any = None) -> TrainedLM:
        """:meth:`PlainFineTuning.train_lm` on the scrubbed texts. A resumable run (``checkpoint``) must scrub the
        same way again when it resumes: the ``type`` and ``mask`` operators do; ``hash`` and ``pseudonym`` draw a
        fresh secret key or fresh pseudonyms from the OS CSPRNG, so they are refused there."""
        if checkpoint is not None and self.redaction.operator in ("hash", "pseudonym"):
            raise InvalidParameterError(f"a resumable run scrubs its texts again when it resumes, and the "
                                        f"{self.redaction.operator!r} operator draws fresh secrets each time; use "
                                        "operator='type' or 'mask', or train without a checkpoint")
        return super().train_lm(texts, checkpoint=checkpoint, log=log)

    def prepare(self, texts: Any, *, log: Any = None) -> list[str]:
        texts = super().prepare(texts)
        if log is not None:
            log(f"scrubbing {len(texts):,} texts with Presidio ({self.redaction.operator})")
        done = self.redaction.redact(texts)
        if log is not None:
            log(f"scrubbed {sum(len(r.spans) for r in done):,} spans in {sum(bool(r.spans) for r in done):,} texts")
        return [r.text for r in done]


def deduplicate(texts: Any) -> list[str]:
    """``texts`` with every exact duplicate after the first dropped (compared lowercased, whitespace collapsed);
    the first copy keeps its place."""
    import re

    seen: set[str] = set()
    out = []
    for text in texts:
        key = re.sub(r"\s+", " ", text.lower()).strip()
        if key not in seen:
            seen.add(key)
            out.append(text)
    return out


class DeduplicatedFineTuning(PlainFineTuning):
    """Keep one copy of each text, then fine-tune as ``lm-plain`` does (module docstring; :func:`deduplicate`)."""

    name = "lm-dedup"
    undefended = False
    citation = ("Kandpal et al. 2022, Deduplicating Training Data Mitigates Privacy Risks in Language Models (ICML): "
                "exact duplicates removed before training")
    guarantee = Guarantee("none", "no formal guarantee: each distinct text is trained on once; a secret written in "
                                  "several different texts stays as often as it was written")

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The full bench only (the quick one runs the undefended reference and DP-SGD at epsilon 8)."""
        return [] if quick else [{}]

    def prepare(self, texts: Any, *, log: Any = None) -> list[str]:
        texts = super().prepare(texts)
        kept = deduplicate(texts)
        if log is not None:
            log(f"deduplicated: {len(kept):,} distinct texts of {len(texts):,}")
        return kept


class DPFineTuning(PlainFineTuning):
    """Fine-tune veil's causal LM with DP-SGD: (epsilon, delta)-DP under adding or removing one training text.

    The mechanism is :func:`veil.defenses.dpsgd.sequences.fit_sequences`: ``steps`` Poisson lots of expected size
    ``batch_size`` (q = batch_size / n), each text's gradient over the top ``layers`` transformer layers and the
    output transform clipped to L2 norm ``clip``, Gaussian noise of multiplier sigma from the OS CSPRNG, Adam at
    ``lr``. Sigma is the smallest whose ``accountant`` epsilon (PRV by default, RDP beside it) is at most
    ``epsilon`` at ``delta`` (None: 1/(10 n)). Every other parameter is the public base model's, frozen.

    What is public (not protected): n, the base model, the architecture and every hyperparameter; a run seeded
    with ``rng`` (experiments) draws its lots and noise from that seed (warns
    :class:`~veil.errors.PrivacyLeakWarning`); None draws them from the OS CSPRNG. A secret written in k texts is
    protected as a group of k (:func:`exposure_bound`). Real arithmetic, as :mod:`veil.defenses.dpsgd` states.
    The released :class:`TrainedLM` holds no training losses (``losses`` is empty): they are computed from the
    private lots outside the guarantee, so only the owner's ``log`` shows them. Its wall ``seconds`` are not
    covered either (a timing channel is outside what the accounting covers)."""

    name = "lm-dpsgd"
    undefended = False
    citation = ("Abadi et al. 2016 (DP-SGD); Li et al. 2022, Large Language Models Can Be Strong Differentially "
                "Private Learners (ICLR; ghost clipping, per-sequence units); Opacus 1.6; PRV accountant")
    guarantee = Guarantee("epsilon-delta-dp", "(epsilon, delta)-DP of the released model under adding or removing "
                          "one training text, for the epsilon it is built with and delta = 1/(10 n) by default")
    secret_randomness: ClassVar[bool] = True
    #: the noise actually drawn, as a multiple of the accounted noise (1 except in a negative control)
    _noise_scale: ClassVar[float] = 1.0

    def __init__(self, *, epsilon: float = 8.0, delta: float | None = None, clip: float = 1.0, layers: int = 2,
                 accountant: str = "prv", optimizer: str = "adam", steps: int = 200, batch_size: int = 16,
                 lr: float = 1e-3, max_tokens: int = 64, init_seed: int = 0, rng: int | None = None) -> None:
        import math

        from veil.defenses.dpsgd import ACCOUNTANTS
        from veil.defenses.dpsgd.engine import OPTIMIZERS
        from veil.validation import check_choice, check_epsilon, check_int, check_real, seeded_rng

        super().__init__(steps=steps, batch_size=batch_size, lr=lr, max_tokens=max_tokens, init_seed=init_seed)
        self.epsilon = check_epsilon(epsilon, what="DP-SGD")
        self.delta = None if delta is None else check_real("delta", delta, low=0.0, high=1.0, low_open=True,
                                                           high_open=True, hint="; None gives 1/(10 n)")
        self.clip = check_real("clip", clip, low=0.0, high=math.inf, low_open=True, high_open=True,
                               hint="; clip is the L2 bound on each text's gradient")
        self.layers = check_int("layers", layers, minimum=1)
        self.accountant = check_choice("accountant", accountant, ACCOUNTANTS)
        self.optimizer = check_choice("optimizer", optimizer, OPTIMIZERS)
        if rng is not None:
            rng = check_int("rng", rng, minimum=0)
        self._seed = rng
        self._rng = seeded_rng(rng, "DPFineTuning", "Poisson lots and gradient noise")

    def __repr__(self) -> str:
        return (f"DPFineTuning(epsilon={self.epsilon:g}, clip={self.clip:g}, layers={self.layers}, "
                f"steps={self.steps}, batch_size={self.batch_size})")

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """Epsilon 8 in the quick bench; 1, 3 and 8 in the full one."""
        return [{"epsilon": 8.0}] if quick else [{"epsilon": e} for e in (1.0, 3.0, 8.0)]

    @classmethod
    def bench_guarantee(cls, setting: dict[str, Any]) -> Guarantee:
        e = float(setting["epsilon"])
        return Guarantee("epsilon-delta-dp", f"(epsilon <= {e:g}, delta = 1/(10 n))-DP of the released language "
                         "model under adding or removing one training text (PRV accountant); a secret in k texts "
                         "is protected as a group of k", epsilon=e)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "epsilon": self.epsilon, "delta": self.delta, "clip": self.clip,
                "layers": self.layers, "accountant": self.accountant, "optimizer": self.optimizer, "dropout": False,
                "noise": "OS CSPRNG" if self._seed is None else "seeded (reproducible, not private)"}

    @property
    def resumable(self) -> bool:
        """Never: lots and noise from the OS CSPRNG cannot be replayed, and a seeded run is for tests only."""
        return False

    def plan(self, n: int) -> Any:
        """The accounting of a run on ``n`` texts (sigma calibrated to the target), before any training."""
        from veil.defenses.dpsgd import account, calibrate_sigma
        from veil.defenses.dpsgd.noise import sampling_rate
        from veil.errors import VeilError
        from veil.validation import check_int

        n = check_int("n", n, minimum=1)
        if self.batch_size > n:
            raise InvalidParameterError(f"batch_size={self.batch_size} (the expected lot) is more than the {n} "
                                        f"training texts; use batch_size <= {n}")
        if self.delta is not None and self.delta >= 1.0 / n:
            raise InvalidParameterError(f"delta={self.delta:.3g} is >= 1/n = {1 / n:.3g}; use delta < 1/n (None "
                                        f"gives 1/(10 n) = {1 / (10 * n):.3g})")
        delta = 1.0 / (10 * n) if self.delta is None else self.delta
        q = sampling_rate(self.batch_size / n)
        sigma = calibrate_sigma(self.epsilon, delta, q, self.steps, accountant=self.accountant)
        acc = account(sigma, q, self.steps, delta, accountant=self.accountant)
        if not acc.epsilon <= self.epsilon:
            raise VeilError(f"internal error: sigma={sigma} accounts to epsilon {acc.epsilon} above the target "
                            f"{self.epsilon}; nothing was trained")
        return acc

    def train_lm(self, texts: Any, *, checkpoint: Any = None, log: Any = None) -> TrainedLM:
        """Fine-tune a fresh causal LM on ``texts`` with DP-SGD; the released model and its accounting. The
        accountant's history read from the optimizer's step hook must be exactly the accounted (sigma, q, steps),
        else :class:`~veil.errors.VeilError` and nothing is released. Not resumable: ``checkpoint`` must be None."""
        from veil.defenses.dpsgd.sequences import fit_sequences, top_layer_parameters
        from veil.errors import VeilError
        from veil.models.causal_lm import build_causal_lm

        if checkpoint is not None:
            raise InvalidParameterError("a DP-SGD run is not resumable (its lots and noise cannot be replayed): "
                                        "give no checkpoint")
        start = time.perf_counter()
        trained_on = self.prepare(texts, log=log)
        acc = self.plan(len(trained_on))
        if log is not None:
            log(f"DP-SGD: epsilon {acc.epsilon:.3g} at delta {acc.delta:.3g} ({acc.accountant.upper()}; RDP "
                f"{acc.epsilon_rdp:.3g}), sigma {acc.sigma:.4g}, q {acc.sample_rate:.4g}, {acc.steps} steps, "
                f"clip {self.clip:g}, top {self.layers} layers")
        lm = build_causal_lm(max_tokens=self.max_tokens, seed=self.init_seed, dropout=False)
        sampling, noise = (None, None) if self._rng is None else self._rng.spawn(2)
        fitted = fit_sequences(lm, trained_on, trainable=top_layer_parameters(lm.net, self.layers), sigma=acc.sigma,
                               clip=self.clip, q=self.batch_size / len(trained_on), accounted_q=acc.sample_rate,
                               steps=acc.steps, lr=self.lr, optimizer=self.optimizer, sampling_rng=sampling,
                               noise_rng=noise, noise_scale=self._noise_scale, log=log)
        expected = [(acc.sigma, acc.sample_rate, acc.steps)]
        if fitted.history != expected:
            raise VeilError(f"internal error: the optimizer stepped {fitted.history}, not the accounted {expected}; "
                            "the model is not released")
        g = Guarantee("epsilon-delta-dp", f"(epsilon={acc.epsilon:.4g}, delta={acc.delta:.3g})-DP by the "
                      f"{acc.accountant.upper()} accountant (RDP: {acc.epsilon_rdp:.4g}); sigma={acc.sigma:.4g}, "
                      f"q={acc.sample_rate:.6g}, {acc.steps} steps, clip={self.clip:g}, top {self.layers} layers; "
                      "adding or removing one training text; a secret in k texts is protected as a group of k",
                      epsilon=acc.epsilon, delta=acc.delta)
        # the per-step training losses are computed from the private lots outside the guarantee: they are shown to
        # the owner in ``log`` and never released with the model
        return TrainedLM(lm=lm, guarantee=g, config=self.config(), losses=(), n_train=len(trained_on),
                         seconds=time.perf_counter() - start, accounting=acc)


def exposure_bound(epsilon: float, delta: float, copies: int, space: int) -> float:
    """The most expected exposure (bits) a canary inserted ``copies`` times can have in a model that is
    (``epsilon``, ``delta``)-DP per text, its value drawn uniformly from a space of ``space`` values.

    Group privacy makes the model (k epsilon, k e^((k-1) epsilon) delta)-DP for the k = ``copies`` texts. Without
    them the canary's rank among the space is uniform, so P[exposure >= x] = 2^-x; with them it is at most
    e^(k epsilon) 2^-x + delta_k. Integrating over x in [0, log2 space]: E[exposure] <= k epsilon log2 e + 1 / ln 2
    + delta_k log2 space, capped at log2 space (group privacy applied to exposure's definition). At epsilon 0
    this is 1 / ln 2 = 1.44 bits, the exposure of a canary the model never saw."""
    import math

    from veil.validation import check_int

    copies = check_int("copies", copies, minimum=1)
    space = check_int("space", space, minimum=2)
    if not (math.isfinite(epsilon) and epsilon >= 0 and 0 <= delta < 1):
        raise InvalidParameterError(f"epsilon must be finite and >= 0 and delta in [0, 1), got {epsilon}, {delta}")
    top = math.log2(space)
    eps_k = copies * epsilon
    if eps_k * math.log2(math.e) >= top:
        return top
    delta_k = min(1.0, copies * math.exp((copies - 1) * epsilon) * delta)
    return min(top, eps_k * math.log2(math.e) + 1 / math.log(2) + delta_k * top)
