"""DP-MLM (Meisenbacher, Chevli, Vladika and Matthes, ACL Findings 2024): text rewritten word piece by word piece,
each drawn from a masked language model by the exponential mechanism.

The mechanism. A text is cut into the masked LM's word pieces x_1..x_n. For every position i the model reads the
original text and, after it, the same text with x_i masked (``[CLS] x [SEP] x_1..x_{i-1} [MASK] x_{i+1}..x_n
[SEP]``, the paper's context: the original sentence is shown in full so that the model can propose x_i itself or
a word that fits in its place). Its logits at the mask, over a fixed output vocabulary (every word piece of the
tokenizer but its special tokens and its ``[unused]`` slots), are clipped to ``[low, high]``, and the output word
piece y_i is drawn with probability proportional to ``exp(epsilon * u(y) / (2 (high - low)))``, u the clipped
logit: the exponential mechanism (McSherry and Talwar 2007) with utility range ``high - low``, that is sampling
the clipped logits at temperature ``2 (high - low) / epsilon``. The rewritten text is the decoded y_1..y_n.

What holds (:attr:`DPMLM.guarantee`, kind ``"epsilon-dp"``, unit one word piece): whatever the input text, every
clipped logit lies in ``[low, high]``, so for ANY two input texts x, x' and every output word piece y at one
position, ``P[y | x] <= exp(epsilon) P[y | x']``: each output word piece is epsilon-DP against a change of the
whole input, not only of its own word piece. A text of n word pieces releases n of them, drawn independently, so
by basic composition the rewritten text is ``n * epsilon``-DP against any other text of n word pieces. The NUMBER
of word pieces is released as it is (texts of different lengths are told apart outright), and so is the split into
chunks of a long text (below). Guarantees are stated for real arithmetic; the draws are inverse-CDF draws of 53-bit
uniforms from the OS CSPRNG (``rng=None``), like veil's other mechanisms.

The clipping bounds must not depend on the private text. :func:`clip_bounds` calibrates them on public text: ``low``
the median over positions of each position's median logit, ``high`` the median over positions of each position's
largest logit (the paper calibrates its bounds on public data too; the exact statistic is veil's). A text longer
than the model's window is rewritten in chunks of ``(max_length - 3) // 2`` word pieces, each chunk its own
context.

Departures from the paper: veil's own MiniLM-size masked LM (``veil models train mlm``; no registry package ships a
trained one) instead of RoBERTa-base; word pieces of an uncased vocabulary, so the output is lowercase; word pieces
are the unit (a word of k pieces costs k epsilon).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.defenses.base import Guarantee, TextDefense
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike, uniform
from veil.validation import check_int, check_real, seeded_rng

__all__ = ["DPMLM", "exponential_probabilities", "draw_categorical", "draw_repeated", "clip_bounds", "strongest_mlm",
           "output_vocabulary"]

#: the masked LMs veil makes, strongest first (:func:`strongest_mlm` takes the first one present)
STRONGEST_FIRST = ("mlm", "mlm-quick")


def _check_bounds(low: Any, high: Any) -> tuple[float, float]:
    low = check_real("low", low, low=-np.inf, high=np.inf, low_open=True, high_open=True,
                     hint="; the clipping bounds are finite logits")
    high = check_real("high", high, low=-np.inf, high=np.inf, low_open=True, high_open=True,
                      hint="; the clipping bounds are finite logits")
    if not high > low:
        raise InvalidParameterError(f"clip bounds inverted or empty: low={low:g} must be below high={high:g} "
                                    "(e.g. clip=(low, high) from veil.defenses.dp_mlm.clip_bounds(mlm, public))")
    return low, high


def _check_epsilon(epsilon: Any) -> float:
    return check_real("epsilon", epsilon, low=0.0, high=np.inf, low_open=True, high_open=True,
                      hint="; DP-MLM needs a finite epsilon > 0 per word piece")


def exponential_probabilities(logits: Any, *, low: float, high: float, epsilon: float) -> np.ndarray:
    """Each row of ``logits`` (m, V) as the exponential mechanism's output distribution: logits clipped to ``[low,
    high]``, probabilities proportional to ``exp(epsilon * u / (2 (high - low)))`` (float64, rows sum to 1)."""
    low, high = _check_bounds(low, high)
    epsilon = _check_epsilon(epsilon)
    u = np.asarray(logits, dtype=np.float64)
    if u.ndim != 2 or u.shape[1] < 2 or not np.isfinite(u).all():
        raise DataFormatError(f"logits must be a finite (m, V) array with V >= 2, got shape {u.shape}")
    z = np.clip(u, low, high) * (epsilon / (2.0 * (high - low)))
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def draw_categorical(probs: np.ndarray, rng: RngLike = None) -> np.ndarray:
    """One index per row of ``probs`` (m, V), by the inverse CDF of one uniform each (``rng`` None: 53-bit
    uniforms from the OS CSPRNG)."""
    probs = np.asarray(probs, dtype=np.float64)
    cdf = np.cumsum(probs, axis=1)
    u = uniform(rng, probs.shape[0]) * cdf[:, -1]
    idx = np.array([np.searchsorted(c, x, side="right") for c, x in zip(cdf, u)], dtype=np.int64)
    return np.minimum(idx, probs.shape[1] - 1)


def draw_repeated(probs: np.ndarray, n: int, rng: RngLike = None) -> np.ndarray:
    """``n`` independent indices from one distribution ``probs`` (V,), as :func:`draw_categorical` draws each."""
    cdf = np.cumsum(np.asarray(probs, dtype=np.float64))
    u = uniform(rng, check_int("n", n, minimum=0)) * cdf[-1]
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1).astype(np.int64)


_UNUSED = re.compile(r"^\[unused\d+\]$")


def output_vocabulary(tokenizer: Any) -> np.ndarray:
    """The word-piece ids DP-MLM may output: the tokenizer's whole vocabulary but its special tokens and its
    ``[unused]`` slots (a fixed set, whatever the input)."""
    special = set(tokenizer.all_special_ids)
    vocab = tokenizer.get_vocab()
    return np.array(sorted(i for t, i in vocab.items() if i not in special and not _UNUSED.match(t)), dtype=np.int64)


def strongest_mlm(names: Sequence[str] = STRONGEST_FIRST) -> str:
    """The first of ``names`` present in VEIL_HOME (the full ``mlm`` before ``mlm-quick``); a typed error naming the
    commands that make one when none is."""
    from veil.models.mlm import MANIFEST, mlm_dir
    from veil.errors import ResourceMissingError

    for name in names:
        if (mlm_dir(name) / MANIFEST).is_file():
            return name
    fix = "veil models train mlm --quick"
    raise ResourceMissingError(f"a masked LM in {mlm_dir(names[0]).parent}", fix,
                               message=f"DP-MLM samples from veil's own masked LM and VEIL_HOME has none: run `{fix}` "
                                       f"(about 6 minutes on 2 cores) or `veil models train mlm` (the full model)")


def _load(mlm: Any) -> Any:
    from veil.models.mlm import MaskedLM, load_mlm

    if mlm is None:
        return load_mlm(strongest_mlm())
    if isinstance(mlm, MaskedLM):
        return mlm
    if isinstance(mlm, (str, os.PathLike)):
        return load_mlm(mlm)
    raise InvalidTypeError(f"mlm must be a masked LM name (mlm, mlm-quick), a folder or a loaded "
                           f"veil.models.mlm.MaskedLM, not {type(mlm).__name__}")


class _Contexts:
    """The word pieces of texts and, for each position, the masked LM's logits over the output vocabulary there
    (module docstring: the original chunk, then the chunk with that position masked)."""

    def __init__(self, mlm: Any, vocab: np.ndarray, batch_size: int) -> None:
        self.mlm, self.vocab, self.batch_size = mlm, vocab, batch_size
        self.window = max(1, (mlm.max_length - 3) // 2)

    def pieces(self, text: str) -> list[int]:
        return list(self.mlm.tokenizer(text, add_special_tokens=False)["input_ids"])

    def row(self, ids: list[int], position: int) -> tuple[list[int], int]:
        """The masked sequence for ``position`` of ``ids`` and where its mask is: the position's chunk, then the
        chunk with that position masked."""
        tok = self.mlm.tokenizer
        start = (position // self.window) * self.window
        chunk, j = ids[start:start + self.window], position - start
        head = [tok.cls_token_id, *chunk, tok.sep_token_id]
        return head + chunk[:j] + [self.mlm.mask_id] + chunk[j + 1:] + [tok.sep_token_id], len(head) + j

    def logits(self, texts: list[list[int]]) -> list[np.ndarray]:
        """Per text (its word-piece ids): a (len(ids), |vocab|) float64 array of logits, one row per position;
        the masked sequences of all the texts share the forward passes."""
        out = self.logits_at([(ids, j) for ids in texts for j in range(len(ids))])
        cuts = np.cumsum([0] + [len(ids) for ids in texts])
        return [out[a:b] for a, b in zip(cuts[:-1], cuts[1:])]

    def logits_at(self, items: list[tuple[list[int], int]]) -> np.ndarray:
        """The logits (one row per item) at the given (word-piece ids, position) items."""
        import torch

        rows = [self.row(ids, j) for ids, j in items]
        out = np.empty((len(rows), len(self.vocab)), dtype=np.float64)
        vocab = torch.as_tensor(self.vocab)
        order = sorted(range(len(rows)), key=lambda r: len(rows[r][0]))  # similar lengths share a batch
        with torch.no_grad():
            for b in range(0, len(order), self.batch_size):
                part = order[b:b + self.batch_size]
                hidden = self.mlm.hidden([rows[r][0] for r in part])
                at = hidden[torch.arange(len(part)), torch.as_tensor([rows[r][1] for r in part])]
                out[part] = self.mlm.model.cls(at.float())[:, vocab].double().numpy()
        return out


def clip_bounds(mlm: Any, public: Sequence[str], *, positions: int = 2000, batch_size: int = 64) -> tuple[float,
                                                                                                        float]:
    """Clipping bounds calibrated on ``public`` text (never the private text; module docstring): the median over at
    most ``positions`` word-piece positions of each position's median logit (``low``) and of its largest
    (``high``)."""
    if isinstance(public, str) or not isinstance(public, Sequence) or not public:
        raise DataFormatError("clip_bounds needs public texts: a non-empty list of strings")
    positions = check_int("positions", positions, minimum=1)
    model = _load(mlm)
    ctx = _Contexts(model, output_vocabulary(model.tokenizer), check_int("batch_size", batch_size, minimum=1))
    med, top, seen = [], [], 0
    for text in public:
        if not isinstance(text, str):
            raise DataFormatError(f"public texts must be strings, got {type(text).__name__}")
        ids = ctx.pieces(text)[:positions - seen]
        if not ids:
            continue
        rows = ctx.logits([ids])[0]
        med.append(np.median(rows, axis=1))
        top.append(rows.max(axis=1))
        seen += len(ids)
        if seen >= positions:
            break
    if not med:
        raise DataFormatError("clip_bounds: the public texts hold no word piece")
    return float(np.median(np.concatenate(med))), float(np.median(np.concatenate(top)))


class DPMLM(TextDefense):
    """Rewrite texts with DP-MLM at ``epsilon`` per word piece (module docstring).

    Parameters (keyword-only)
    -------------------------
    epsilon: finite and > 0, per word piece (the paper runs 10 to 250).
    clip: ``(low, high)`` logit bounds (:func:`clip_bounds` on public text), or None with ``public`` texts to
        calibrate them on.
    mlm: a masked LM name (``mlm``, ``mlm-quick``), folder or loaded :class:`veil.models.mlm.MaskedLM`; None: the
        strongest in VEIL_HOME (:func:`strongest_mlm`).
    public: public texts for :func:`clip_bounds` when ``clip`` is None.
    rng: None (OS CSPRNG, the default: use it for anything you release), or a seed for experiments only (warns).
    batch_size: masked sequences per forward pass.
    """

    name = "dp-mlm"
    citation = ("Meisenbacher et al. 2024, DP-MLM: Differentially Private Text Rewriting Using Masked Language "
                "Models (ACL Findings)")
    guarantee = Guarantee("epsilon-dp", "epsilon-DP per word piece against any change of the input text; a text of "
                          "n word pieces is n*epsilon-DP (basic composition); its length in word pieces is released")
    tasks = ("document-classification",)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The full bench's points, epsilon per word piece (the paper reports 10 to 250). The quick bench has none
        yet: each cell rewrites every word piece of its private rows with one masked-LM pass per word piece, which
        takes minutes a cell on 2 cores (docs/rewriting.md)."""
        return [] if quick else [{"epsilon": e} for e in (10.0, 25.0, 50.0, 100.0)]

    @classmethod
    def bench_guarantee(cls, setting: dict[str, Any]) -> Guarantee:
        eps = float(setting["epsilon"])
        return Guarantee("epsilon-dp", f"DP-MLM, epsilon={eps:g} per word piece (a text of n word pieces: "
                         f"n*{eps:g}; its length in word pieces is released)", epsilon=eps)

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "DPMLM":
        """The quick bench's ``mlm-quick`` or the full bench's ``mlm`` (the masked LMs of the bench's word-recovery
        attacks), its bounds calibrated on the corpus' public (train) sentences; ``rng`` None: OS CSPRNG draws."""
        from veil.models.mlm import load_mlm

        name = "mlm-quick" if getattr(data, "quick", True) else "mlm"  # as the bench's masked-LM attacks
        key = ("dp-mlm", name)
        if key not in data._cache:  # the model and its bounds, once per corpus and process
            model = load_mlm(name)
            public = [s for i in data.splits["train"] for s in data.sentences[i]]
            data._cache[key] = (model, clip_bounds(model, public))
        model, clip = data._cache[key]
        return cls(epsilon=float(setting["epsilon"]), mlm=model, clip=clip, rng=rng)

    def __init__(self, *, epsilon: float, clip: tuple[float, float] | None = None, mlm: Any = None,
                 public: Sequence[str] | None = None, rng: RngLike = None, batch_size: int = 64) -> None:
        self.epsilon = _check_epsilon(epsilon)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        if clip is None and public is None:
            raise InvalidParameterError("DP-MLM needs its clipping bounds: give clip=(low, high) or public=[texts] "
                                        "to calibrate them on (never the private text)")
        if clip is not None:
            if isinstance(clip, (str, bytes)) or not isinstance(clip, Sequence) or len(clip) != 2:
                raise InvalidTypeError(f"clip must be a pair (low, high), got {clip!r}")
            clip = _check_bounds(*clip)
        self._rng = seeded_rng(rng, "DPMLM", "sampling")
        self.mlm = _load(mlm)
        self.vocab = output_vocabulary(self.mlm.tokenizer)
        self.low, self.high = clip if clip is not None else clip_bounds(self.mlm, list(public or []),
                                                                        batch_size=self.batch_size)
        self._ctx = _Contexts(self.mlm, self.vocab, self.batch_size)
        self.guarantee = Guarantee(
            "epsilon-dp", f"DP-MLM with epsilon={self.epsilon:g} per word piece: for any two input texts and every "
                          f"output word piece at one position, P[out | x] <= exp({self.epsilon:g}) P[out | x'] (the "
                          f"logits clipped to [{self.low:.4g}, {self.high:.4g}] whatever the input); a text of n "
                          f"word pieces is n*{self.epsilon:g}-DP against any other of n word pieces (basic "
                          f"composition); the number of word pieces is released", epsilon=self.epsilon)

    def __repr__(self) -> str:
        return (f"DPMLM(epsilon={self.epsilon:g}, clip=({self.low:.4g}, {self.high:.4g}), "
                f"mlm={self.mlm.manifest.get('name')!r})")

    @property
    def temperature(self) -> float:
        """The sampling temperature on the clipped logits: ``2 (high - low) / epsilon``."""
        return 2.0 * (self.high - self.low) / self.epsilon

    def config(self) -> dict[str, Any]:
        return {**super().config(), "epsilon": self.epsilon, "clip": [self.low, self.high],
                "temperature": self.temperature, "unit": "word piece", "mlm": self.mlm.identity(),
                "output_vocabulary": int(len(self.vocab)), "window": self._ctx.window,
                "seeded": self._rng is not None}

    # ------------------------------------------------------------ the mechanism
    def logits(self, texts: Sequence[str]) -> list[tuple[list[int], np.ndarray]]:
        """Per text: its word-piece ids and the masked LM's logits over :attr:`vocab` at each position (no privacy
        yet: what :meth:`rewrite_logits` draws from; they do not depend on epsilon, so one pass serves many)."""
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
            raise InvalidTypeError("texts must be a list of strings (pass [text] for one text)")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise DataFormatError(f"texts[{i}] is a {type(text).__name__}, not a str")
        ids = [self._ctx.pieces(t) for t in texts]
        return list(zip(ids, self._ctx.logits(ids)))

    def distributions(self, texts: Sequence[str]) -> list[tuple[list[int], np.ndarray]]:
        """Per text: its word-piece ids and, per position, the mechanism's output distribution over :attr:`vocab`
        (what the audit reads; the rewrite draws from exactly these)."""
        return [(i, self._probabilities(lg) if i else np.empty((0, len(self.vocab)))) for i, lg in self.logits(texts)]

    def _probabilities(self, logits: np.ndarray) -> np.ndarray:
        """The output distribution of each position given its logits (a negative control overrides this)."""
        return exponential_probabilities(logits, low=self.low, high=self.high, epsilon=self.epsilon)

    def position_sampler(self, text: str, position: int) -> Any:
        """A function ``n -> n`` independent runs of the mechanism on ``text``, each kept at one word-piece
        ``position`` only (the output word-piece ids there): the audit's runs. Word pieces are drawn independently,
        so the other positions do not change what this one shows; the distribution is computed once."""
        row = self.position_distributions([(text, position)])[0]
        return lambda n: self.vocab[draw_repeated(row, n, self._rng)]

    def position_distributions(self, items: Sequence[tuple[str, int]]) -> np.ndarray:
        """The output distribution (one row per item) at each (text, word-piece position): what :meth:`distributions`
        gives there, with one forward pass per item instead of one per word piece."""
        keyed = []
        for text, position in items:
            if not isinstance(text, str):
                raise InvalidTypeError(f"text must be a str, not {type(text).__name__}")
            ids = self._ctx.pieces(text)
            position = check_int("position", position, minimum=0)
            if position >= len(ids):
                raise InvalidParameterError(f"position {position}: the text has {len(ids)} word pieces")
            keyed.append((ids, position))
        if not keyed:
            return np.empty((0, len(self.vocab)))
        return self._probabilities(self._ctx.logits_at(keyed))

    def rewrite(self, text: str) -> str:
        """One text rewritten (a text with no word piece comes back unchanged)."""
        if not isinstance(text, str):
            raise InvalidTypeError(f"text must be a str, not {type(text).__name__}")
        return self.rewrite_many([text])[0]

    def transform(self, texts: Sequence[str]) -> list[str]:
        """The release verb of a text defense: :meth:`rewrite_many`."""
        return self.rewrite_many(texts)

    def rewrite_many(self, texts: Sequence[str], *, chunk: int = 256) -> list[str]:
        """Rewrite many texts, ``chunk`` texts to a group of forward passes."""
        chunk = check_int("chunk", chunk, minimum=1)
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
            raise InvalidTypeError("texts must be a list of strings (pass [text] for one text)")
        out: list[str] = []
        for start in range(0, len(texts), chunk):
            part = list(texts[start:start + chunk])
            out += self.rewrite_logits(part, self.logits(part))
        return out

    def rewrite_logits(self, texts: Sequence[str], logits: Sequence[tuple[list[int], np.ndarray]]) -> list[str]:
        """``texts`` rewritten from their :meth:`logits` (made by a DP-MLM with this masked LM): each position's
        output drawn from this mechanism's distribution; a text with no word piece comes back unchanged."""
        if len(texts) != len(logits):
            raise InvalidParameterError(f"give one (ids, logits) per text: {len(texts)} texts, {len(logits)} logits")
        out = []
        for text, (ids, rows) in zip(texts, logits):
            if not ids:
                out.append(text)
                continue
            drawn = self.vocab[draw_categorical(self._probabilities(rows), self._rng)]
            out.append(self.mlm.tokenizer.decode([int(i) for i in drawn]))
        return out
