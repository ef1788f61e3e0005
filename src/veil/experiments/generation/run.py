"""Generation leakage on the planted corpus (issue 52): a causal language model fine-tuned on private text with
planted secrets, its utility, and what the attacks get out of it.

A run (:class:`LMRun`) is a corpus, a ``generative-model`` defense with its settings, the planted corpus' sizes, the
training steps and a seed. :func:`train_lm_run` (``veil lm train``):

1. builds the planted corpus (:func:`veil.corpora.planted.build_planted`): the base corpus' sentences split into
   held-out and training texts, PII values and Secret Sharer canaries planted at each insertion count;
2. fine-tunes the defense's model on the training texts, for a fixed number of steps from the run's seed, saving its
   state every 50 steps (a run stopped by Ctrl-C resumes there and ends where an uninterrupted run ends);
3. keeps the trained model in the run's cache folder, ``VEIL_HOME/lm/<run key>/``: the weights with their sha256,
   and the canaries' secrets (owner-only: the auditor's, needed to score exposure later; never in a record);
4. writes the ``utility`` record: held-out perplexity (per predicted token, over the held-out texts, with a 95%
   bootstrap interval over texts) beside the base model's before fine-tuning.

:func:`attack_lm_run` (``veil lm attack``) reads the cached model and writes one record per attack:

* ``canary-exposure``: every canary's exposure (:class:`~veil.attacks.generation.CanaryExposure` over
  ``candidates`` values drawn uniformly from the format's space; the plain estimate, capped at log2 (n + 1)),
  summarised per insertion count (mean, 95% bootstrap interval over the canaries; each canary's skew-normal
  extrapolation beside it), with a one-sided Mann-Whitney test that canaries planted at the largest count are more
  exposed than those planted once;
* ``extraction``: :class:`~veil.attacks.generation.TrainingDataExtraction` with ``samples`` samples; per ranking
  the share of the top ``top`` found verbatim in a training text (Wilson 95%), the texts found; and PII recall:
  the share of planted PII values, per insertion count and per PII class, written out anywhere in the samples;
  and PII extraction as Lukas et al. score it: the e-mail addresses, phone numbers and IBANs Presidio tags in the
  samples, their precision (the share that are planted values) and recall;
* ``pii-inference`` and ``pii-reconstruction`` (:mod:`veil.attacks.generation.pii`, Lukas et al. 2023): for every
  planted PII value, a training text that holds it with the value masked; inference ranks
  :data:`PII_CANDIDATES` values of the same class and variant (the true one and others drawn as the corpus draws
  them, none of them planted), reconstruction ranks what it samples after the text before the mask
  (:data:`PII_SAMPLES` samples, replayed at every smaller power of two: its budget curve); the share guessed right
  per insertion count (Wilson 95%), with a one-sided binomial test against chance (inference) and a one-sided Fisher
  test of the largest count against one copy;
* ``membership``: the loss, zlib and reference membership attacks (:mod:`veil.attacks.generation.membership`) on
  the held-out texts (non-members) and as many plain training texts drawn at random (members; the planted texts are
  left out, so both sides come from one randomly split pool and the one-sided Mann-Whitney test is exact): AUC and
  TPR at low FPR with bootstrap intervals, and the test.

**The attacker's reference model.** Extraction's third ranking and the reference membership attack compare the
released model with a model the attacker trains itself on public text of the same domain: the released model's own
recipe (:func:`reference_run`: its defense, settings and training budget, public in its ``LMAccess`` recipe), on
the base corpus' sentences that the run neither trains on nor holds out
(:attr:`~veil.corpora.planted.PlantedCorpus.public`, as many as the run's training texts), as LiRA trains its
shadow models. It is trained once per run and cached in ``VEIL_HOME/lm/reference-<run key>/``. A run with ``n_train`` unset
trains on every sentence and leaves no public text: its attacks run without the reference, and the records say so.

Records go to ``<results>/<run id>.<part>.json``; one of the same configuration, the same trained model and the same
reference model (their sha256) is kept, one of another configuration is refused unless ``force``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError, ResourceMissingError
from veil.results import Metric, ResultRecord

__all__ = ["METHOD", "ATTACKS", "LMRun", "QUICK", "lm_run", "train_lm_run", "attack_lm_run", "load_run_model",
           "run_folder", "record_path", "pii_targets", "pii_candidates", "PII_CANDIDATES", "PII_SAMPLES",
           "membership_candidates", "DP_LR", "reference_run", "reference_folder", "REFERENCED", "MIN_PUBLIC",
           "ensure_lm", "ensure_reference", "attack_record"]

METHOD = "generation"
#: the attacks ``veil lm attack`` runs on a trained model
ATTACKS = ("canary-exposure", "extraction", "pii-inference", "pii-reconstruction", "membership")
_BOOT = 2000
#: PII inference: candidate values per masked sentence, the true one among them (Lukas et al.'s 100; at most the
#: run's ``candidates``)
PII_CANDIDATES = 100
#: PII reconstruction: continuations sampled after the text before each mask (at most the run's ``samples``)
PII_SAMPLES = 256
#: the attacks that use the attacker's reference model (trained on public text), when the run leaves some
REFERENCED = ("extraction", "membership")
#: the fewest public texts a reference model is trained on
MIN_PUBLIC = 100


@dataclass(frozen=True)
class LMRun:
    """One run's configuration (module docstring). ``settings``: the defense's parameters other than its training
    budget (``steps``, ``batch_size``, ``lr``, ``max_tokens``, which are fields here); ``n_train``: at most this
    many plain training sentences besides the planted ones (None: every one left)."""

    corpus: str = "rt-polarity"
    defense: str = "lm-plain"
    settings: Mapping[str, Any] = field(default_factory=dict)
    steps: int = 1000
    batch_size: int = 16
    lr: float = 1e-4
    max_tokens: int = 48
    n_train: int | None = None
    n_heldout: int = 500
    counts: tuple[int, ...] = (1, 2, 4, 8, 16)
    canaries_per_count: int = 10
    pii_per_count: int = 4
    seed: int = 0
    candidates: int = 20000
    samples: int = 1000
    top: int = 100

    def training(self) -> dict[str, Any]:
        """What decides the trained model (the cache key): every field but the attacks' budgets."""
        out = {k: v for k, v in asdict(self).items() if k not in ("candidates", "samples", "top")}
        out["settings"] = dict(sorted(dict(self.settings).items()))
        out["counts"] = list(self.counts)
        return out

    def identity(self) -> dict[str, Any]:
        return {**self.training(), "candidates": self.candidates, "samples": self.samples, "top": self.top}

    @property
    def key(self) -> str:
        blob = json.dumps(self.training(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    @property
    def run_id(self) -> str:
        extra = "".join(f"-{k}{v:g}" if isinstance(v, float) else f"-{k}{v}"
                        for k, v in sorted(dict(self.settings).items()))
        return f"{self.corpus}-{self.defense}{extra}-s{self.steps}-seed{self.seed}"


#: DP-SGD's learning rate (Adam on the top layers, under noise); the other defenses train at :class:`LMRun`'s lr
DP_LR = 1e-3

#: the quick run (tests, the quick bench): a small slice, few steps
QUICK = LMRun(steps=60, n_train=300, n_heldout=100, counts=(1, 16), canaries_per_count=4, pii_per_count=1,
              candidates=2000, samples=64, top=32, max_tokens=32)


def lm_run(*, corpus: str = "rt-polarity", defense: str = "lm-plain", steps: int | None = None, seed: int = 0,
           quick: bool = False, epsilon: float | None = None) -> LMRun:
    """The run ``veil lm train`` and ``veil lm attack`` name: the full configuration (:class:`LMRun`'s defaults) or
    :data:`QUICK`, with this corpus, defense, seed and (None: the configuration's) steps; names checked first.

    ``epsilon``: ``lm-dpsgd``'s target (None: 8), refused for any other defense. DP-SGD trains at its own
    learning rate, :data:`DP_LR` (the top layers under noise; the same steps and expected lot as the others)."""
    import dataclasses

    import veil.corpora as vc
    from veil.defenses import defense_names
    from veil.errors import UnknownNameError
    from veil.validation import check_epsilon, check_int

    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    if defense not in defense_names("generative-model"):
        raise UnknownNameError("generative-model defense", defense, defense_names("generative-model"))
    base = QUICK if quick else LMRun()
    extra: dict[str, Any] = {}
    if defense == "lm-dpsgd":
        extra = {"settings": {"epsilon": 8.0 if epsilon is None else check_epsilon(epsilon, what="DP-SGD")},
                 "lr": DP_LR}
    elif epsilon is not None:
        raise InvalidParameterError(f"--epsilon is lm-dpsgd's target; {defense} has none (use --defense lm-dpsgd "
                                    "or leave --epsilon out)")
    return dataclasses.replace(base, corpus=corpus, defense=defense, seed=check_int("seed", seed, minimum=0),
                               steps=base.steps if steps is None else check_int("steps", steps, minimum=1), **extra)


def run_folder(run: LMRun) -> Path:
    """The run's cache folder: its trained model, training state and canaries (``VEIL_HOME/lm/<key>``)."""
    from veil._io import veil_home

    return veil_home() / "lm" / run.key


def record_path(results: str | os.PathLike, run: LMRun, part: str) -> Path:
    """``<results>/<run id>.<part>.json`` (``part``: ``utility`` or an attack's name)."""
    return Path(results) / f"{run.run_id}.{part}.json"


def _defense(run: LMRun) -> Any:
    from veil.defenses.base import get_defense

    cls = get_defense(run.defense)
    if getattr(cls, "releases", None) != "generative-model":
        from veil.defenses import defense_names

        raise InvalidParameterError(f"defense {run.defense!r} releases {cls.releases!r}, not a language model; use "
                                    f"one of {', '.join(defense_names('generative-model'))}")
    # a defense drawing secret randomness (DP-SGD's lots and noise) takes it from the OS CSPRNG, never the seed
    rng = None if getattr(cls, "secret_randomness", False) else run.seed
    return cls(**dict(run.settings), steps=run.steps, batch_size=run.batch_size, lr=run.lr,
               max_tokens=run.max_tokens, rng=rng)


def _planted(run: LMRun, canaries: Any = None) -> Any:
    from veil.corpora.planted import build_planted

    return build_planted(run.corpus, counts=run.counts, pii_per_count=run.pii_per_count,
                         canaries_per_count=run.canaries_per_count, n_heldout=run.n_heldout, n_train=run.n_train,
                         seed=run.seed, canaries=canaries)


def _canaries_file(folder: Path) -> Path:
    return folder / "canaries.secret.json"


def _load_canaries(folder: Path) -> list[Any] | None:
    from veil.corpora.canaries import Canary, CanaryFormat

    path = _canaries_file(folder)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    fmt = CanaryFormat(data["format"])
    return [Canary(fmt, int(v), int(c)) for v, c in data["canaries"]]


def _save_canaries(folder: Path, canaries: list[Any]) -> None:
    from veil._io import atomic_write

    data = {"format": canaries[0].format.template if canaries else None,
            "canaries": [[c.value, c.count] for c in canaries],
            "note": "the auditor's secrets planted in this run's training text; never copied into a record"}
    with atomic_write(_canaries_file(folder), "w", perms=0o600) as fh:
        json.dump(data, fh)


def _manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _save_model(folder: Path, lm: Any, run: LMRun, released: Any) -> dict[str, Any]:
    from safetensors.torch import save_model

    from veil._io import atomic_write_json, sha256_file

    weights = folder / "model.safetensors"
    tmp = folder / ".model.safetensors.tmp"
    save_model(lm.net, str(tmp))  # the tied output layer is saved once
    os.replace(tmp, weights)
    manifest = {"run": run.training(), "key": run.key, "base": lm.base, "sha256": sha256_file(weights),
                "size": weights.stat().st_size, "losses": [round(x, 5) for x in released.losses],
                "seconds": round(released.seconds, 2), "guarantee": released.guarantee.to_dict()
                if hasattr(released.guarantee, "to_dict") else str(released.guarantee),
                "defense_config": released.config,
                "accounting": None if released.accounting is None else released.accounting.to_dict()}
    atomic_write_json(folder / "manifest.json", manifest)
    return manifest


def load_run_model(run: LMRun) -> tuple[Any, dict[str, Any]]:
    """The run's trained model (a :class:`~veil.models.causal_lm.CausalLM`) and its manifest, checked against the
    sha256 it was saved with; a typed error saying what to run when there is none."""
    folder = run_folder(run)
    manifest = _manifest(folder)
    eps = "".join(f" --epsilon {v:g}" for k, v in run.settings.items() if k == "epsilon")
    fix = f"run `veil lm train --corpus {run.corpus} --defense {run.defense}{eps} --steps {run.steps}` first"
    if manifest is None:
        raise ResourceMissingError("trained language model", fix,
                                   message=f"no trained model for this run in {folder}; {fix}")
    return _load_model(folder, manifest, run, fix), manifest


def _load_model(folder: Path, manifest: dict[str, Any], run: LMRun, fix: str) -> Any:
    from safetensors.torch import load_model

    from veil.errors import DataFormatError
    from veil.models.causal_lm import build_causal_lm
    from veil.models.files import file_problem

    problem = file_problem(folder / "model.safetensors", sha256=manifest.get("sha256"), size=manifest.get("size"))
    if problem:
        raise DataFormatError(f"the trained model in {folder} is damaged ({problem}); delete the folder and {fix}")
    lm = build_causal_lm(max_tokens=run.max_tokens, seed=0)
    load_model(lm.net, str(folder / "model.safetensors"))
    lm.net.eval()
    return lm


def reference_run(run: LMRun) -> LMRun:
    """The attacker's reference model's configuration: the released model's own recipe (its defense, settings,
    steps, lot size, learning rate and length, all public in its :class:`~veil.attacks.generation.LMAccess`
    recipe), trained on the run's public texts instead of the private ones, as LiRA trains its shadow models."""
    return run


def reference_folder(run: LMRun) -> Path:
    """``VEIL_HOME/lm/reference-<run key>``: the reference model of one run's recipe and corpus split."""
    from veil._io import veil_home

    return veil_home() / "lm" / f"reference-{reference_run(run).key}"


def ensure_reference(run: LMRun, planted: Any, log: Callable[[str], None] = lambda _: None
                     ) -> tuple[Any, dict[str, Any]] | None:
    """The attacker's reference model, trained (once, cached) on the run's public texts, as many as the run trains
    on: none of them is a training or held-out text. None when the run leaves fewer than
    :data:`MIN_PUBLIC` public texts (``n_train`` unset: every sentence is trained on)."""
    from veil._io import writable_dir

    if len(planted.public) < MIN_PUBLIC:
        return None
    ref = reference_run(run)
    texts = list(planted.public[:len(planted.train)])
    folder = reference_folder(run)
    manifest = _manifest(folder)
    if manifest is None:
        writable_dir(folder)
        log(f"training the attacker's reference model ({ref.defense}, {ref.steps} steps, the released model's "
            f"recipe) on {len(texts):,} public texts (once per run; no private text)")
        defense = _defense(ref)
        released = defense.train_lm(texts, checkpoint=folder / "state.pt" if defense.resumable else None, log=log)
        manifest = _save_model(folder, released.lm, ref, released)
        return released.lm, {**manifest, "public_texts": len(texts)}
    fix = "run `veil lm attack` again to train it anew"
    return _load_model(folder, manifest, ref, fix), {**manifest, "public_texts": len(texts)}


def _reference_note(run: LMRun, ref: tuple[Any, dict[str, Any]] | None, public: int) -> dict[str, Any]:
    if ref is None:
        why = ("this run trains on every sentence of its corpus (n_train unset), so the attacker has no public text "
               "of the domain" if run.n_train is None else
               f"the run leaves {public} public texts of its corpus, fewer than the {MIN_PUBLIC} a reference needs")
        return {"model": None, "why": why}
    return {"model": ref[1]["run"]["defense"], "settings": ref[1]["run"]["settings"],
            "public_texts": ref[1]["public_texts"], "steps": ref[1]["run"]["steps"], "lr": ref[1]["run"]["lr"],
            "sha256": ref[1]["sha256"],
            "note": "the attacker's own model: the released model's recipe, trained on public texts of the corpus "
                    "(none of them a training or held-out text)"}


def _perplexity(lm: Any, texts: list[str], seed: int) -> Metric:
    """Per-token perplexity over ``texts`` with a 95% bootstrap interval over texts."""
    from veil.models.causal_lm import token_nll

    nll, count = token_nll(lm, texts)
    rng = np.random.default_rng([seed, 7])
    idx = rng.integers(0, len(texts), size=(_BOOT, len(texts)))
    boot = np.exp(nll[idx].sum(1) / count[idx].sum(1))
    low, high = np.percentile(boot, [2.5, 97.5])
    return Metric(mean=float(np.exp(nll.sum() / count.sum())), n=len(texts), ci_low=float(low),
                  ci_high=float(high), ci_level=0.95)


def _budget(run: LMRun, attack: str) -> dict[str, Any]:
    """The attack budgets that are not fields of the run, as each attack's record states them."""
    if attack == "pii-inference":
        return {"candidates_each": [min(PII_CANDIDATES, run.candidates)]}
    if attack == "pii-reconstruction":
        return {"samples": min(PII_SAMPLES, run.samples)}
    return {}


def _reuse(path: Path, run: LMRun, sha: str | None, force: bool, attack: str,
           reference: str | None = None) -> ResultRecord | None:
    """The kept record of this run, model, reference model and attack budget, if there is one (another is refused
    unless force)."""
    from veil.outputs import existing_record

    budget = _budget(run, attack)
    requested = {"run": run.identity(), "model_sha256": sha, **budget}
    if attack in REFERENCED:
        requested["reference_sha256"] = reference

    def view(config: Mapping[str, Any]) -> dict[str, Any]:
        stated = config.get("attack") or {}
        out = {"run": config.get("run"), "model_sha256": config.get("model_sha256"),
               **{k: stated.get(k) for k in budget}}
        if attack in REFERENCED:
            out["reference_sha256"] = config.get("reference_sha256")
        return out

    return existing_record(path, requested, force=force, view=view)


def ensure_lm(run: LMRun, *, log: Callable[[str], None] = lambda _: None) -> tuple[Any, dict[str, Any], Any]:
    """The run's trained model, its manifest and its planted corpus: trained here (resumably, its canaries saved
    first) unless the cache folder holds it; ``veil lm train`` and the bench's generative-model cells share it."""
    from veil._io import writable_dir

    defense = _defense(run)  # a bad name or setting is refused before any work
    folder = run_folder(run)
    writable_dir(folder)
    canaries = _load_canaries(folder)
    planted = _planted(run, canaries)
    if canaries is None:
        _save_canaries(folder, list(planted.canaries))
    if _manifest(folder) is not None:
        lm, manifest = load_run_model(run)
        log(f"using the trained model in {folder}")
        return lm, manifest, planted
    about = planted.describe()
    log(f"training {run.defense} on {about['train_texts']:,} texts ({about['train_words']:,} words, "
        f"{about['planted_texts']:,} of them planted) for {run.steps} steps")
    if not defense.resumable:
        log("not resumable: its lots and noise come from the OS CSPRNG, so an interrupted run starts again")
    released = defense.train_lm(list(planted.train), checkpoint=folder / "state.pt" if defense.resumable else None,
                                log=log)
    return released.lm, _save_model(folder, released.lm, run, released), planted


def train_lm_run(run: LMRun, results: str | os.PathLike, *, force: bool = False,
                 log: Callable[[str], None] = lambda _: None) -> ResultRecord:
    """Train the run's model (or reuse the cached one) and write its ``utility`` record (module docstring)."""
    from veil.models.causal_lm import build_causal_lm
    from veil.outputs import existing_record

    _defense(run)  # a bad name or setting is refused before any work
    path = record_path(results, run, "utility")
    manifest = _manifest(run_folder(run))
    kept = existing_record(path, {"run": run.identity()}, force=force)  # another configuration: refused here
    if kept is not None and manifest is not None and kept.config.get("model_sha256") == manifest.get("sha256"):
        log(f"kept {path} (same configuration, same trained model)")
        return kept
    start = time.perf_counter()
    lm, manifest, planted = ensure_lm(run, log=log)
    heldout = list(planted.heldout)
    base = build_causal_lm(max_tokens=run.max_tokens, seed=0)
    metrics = {"heldout_perplexity": _perplexity(lm, heldout, run.seed),
               "base_perplexity": _perplexity(base, heldout, run.seed)}
    rec = ResultRecord(METHOD, "utility", {"run": run.identity(), "model_sha256": manifest["sha256"]}, metrics,
                       time.perf_counter() - start,
                       extra={"corpus": planted.describe(), "losses": manifest["losses"],
                              "train_seconds": manifest["seconds"], "guarantee": manifest["guarantee"],
                              "defense": manifest["defense_config"], "model_folder": str(run_folder(run))})
    rec.write(path)
    return rec


def attack_lm_run(run: LMRun, results: str | os.PathLike, attacks: Any = ATTACKS, *, force: bool = False,
                  log: Callable[[str], None] = lambda _: None) -> list[ResultRecord]:
    """Run ``attacks`` on the run's trained model and write one record each (module docstring)."""
    attacks = [attacks] if isinstance(attacks, str) else list(attacks)
    unknown = [a for a in attacks if a not in ATTACKS]
    if unknown or not attacks:
        raise InvalidParameterError(f"unknown attack(s) {', '.join(unknown) or '(none given)'}; the language-model "
                                    f"attacks are {', '.join(ATTACKS)}")
    lm, manifest = load_run_model(run)
    canaries = _load_canaries(run_folder(run))
    planted = _planted(run, canaries)
    ref = ensure_reference(run, planted, log) if set(REFERENCED) & set(attacks) else None
    ref_sha = None if ref is None else ref[1]["sha256"]
    out = []
    for attack in attacks:
        path = record_path(results, run, attack)
        kept = _reuse(path, run, manifest["sha256"], force, attack, ref_sha)
        if kept is not None:
            log(f"kept {path}")
            out.append(kept)
            continue
        log(f"{attack}: running")
        rec = attack_record(run, attack, lm, planted, manifest, ref)
        rec.write(path)
        out.append(rec)
    return out


def attack_record(run: LMRun, attack: str, lm: Any, planted: Any, manifest: dict[str, Any],
                  ref: tuple[Any, dict[str, Any]] | None = None) -> ResultRecord:
    """One attack's record (not written) on the run's trained ``lm`` (with its ``manifest``) and its ``planted``
    corpus; ``ref``: the attacker's reference model and its manifest (:func:`ensure_reference`), or None."""
    if attack == "canary-exposure":
        return _exposure(run, lm, planted, manifest)
    if attack == "extraction":
        return _extraction(run, lm, planted, manifest, ref)
    if attack == "membership":
        return _membership(run, lm, planted, manifest, ref)
    if attack in ("pii-inference", "pii-reconstruction"):
        return _pii(run, lm, planted, manifest, attack)
    raise InvalidParameterError(f"unknown attack {attack!r}; the language-model attacks are {', '.join(ATTACKS)}")


def _access(lm: Any, manifest: dict[str, Any]) -> Any:
    from veil.attacks.generation import LMAccess
    from veil.models.causal_lm import log_perplexities, sample

    config = dict(manifest.get("defense_config") or {})
    recipe = {"defense": config.pop("defense", "unknown"), "params": config}
    return LMAccess(score=lambda texts: log_perplexities(lm, texts), sample=lambda n, **kw: sample(lm, n, **kw),
                    recipe=recipe)


def _boot_mean(values: np.ndarray, seed: int) -> Metric:
    rng = np.random.default_rng([seed, 11])
    boot = values[rng.integers(0, len(values), size=(_BOOT, len(values)))].mean(1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return Metric(mean=float(values.mean()), n=len(values), ci_low=float(low), ci_high=float(high), ci_level=0.95,
                  values=tuple(float(v) for v in values))


def _exposure(run: LMRun, lm: Any, planted: Any, manifest: dict[str, Any]) -> ResultRecord:
    from scipy.stats import mannwhitneyu

    from veil.attacks.generation import CanaryExposure, score_exposure

    start = time.perf_counter()
    if not planted.canaries:
        raise InvalidParameterError("this run planted no canary (canaries_per_count 0): nothing to expose")
    access = _access(lm, manifest)
    attack = CanaryExposure(planted.canaries[0].format.template, candidates=run.candidates, seed=run.seed)
    found = attack.run(access)
    rows = score_exposure(found, access, planted.canaries)
    fitted = (score_exposure(found, access, planted.canaries, extrapolate="skewnorm") if not found.exhaustive
              else rows)
    from veil.defenses.lm import exposure_bound

    guarantee = manifest.get("guarantee") if isinstance(manifest.get("guarantee"), dict) else {}
    metrics = {}
    per_count = {}
    for count in run.counts:
        values = np.array([r["exposure"] for r in rows if r["count"] == count])
        metrics[f"exposure@{count}"] = _boot_mean(values, run.seed)
        per_count[str(count)] = {"exposures": [round(float(v), 4) for v in values],
                                 "skewnorm": [round(float(r["exposure"]), 4) for r in fitted if r["count"] == count],
                                 "guessed": int(sum(r["guessed"] for r in rows if r["count"] == count))}
        if guarantee.get("epsilon") is not None:  # a DP model: the most exposure its guarantee allows
            bound = exposure_bound(float(guarantee["epsilon"]), float(guarantee.get("delta") or 0.0), count,
                                   found.space)
            per_count[str(count)]["dp_bound_bits"] = round(bound, 4)
            per_count[str(count)]["exceeds_dp_bound"] = bool(metrics[f"exposure@{count}"].ci_low > bound)
    low, high = min(run.counts), max(run.counts)
    test = None
    if low != high:
        a = np.array([r["exposure"] for r in rows if r["count"] == high])
        b = np.array([r["exposure"] for r in rows if r["count"] == low])
        res = mannwhitneyu(a, b, alternative="greater")
        test = {"name": "one-sided Mann-Whitney U", "hypothesis": f"canaries planted {high}x are more exposed "
                f"than canaries planted {low}x", "statistic": float(res.statistic), "p_value": float(res.pvalue),
                "difference_of_means": float(a.mean() - b.mean())}
    cap = rows[0].get("cap")
    return ResultRecord(METHOD, "canary-exposure", {"run": run.identity(), "model_sha256": manifest["sha256"],
                                                    "attack": attack.config()},
                        metrics, time.perf_counter() - start,
                        extra={"per_count": per_count, "test": test, "cap_bits": cap,
                               "space_bits": float(np.log2(found.space)), "estimate": rows[0]["method"],
                               "note": "exposure = log2 |R| - log2 rank; a canary no likelier than a random value "
                                       "scores about 1 bit; the plain sampled estimate cannot exceed cap_bits; "
                                       "skewnorm: the paper's extrapolation from a skew-normal fit of the sampled "
                                       "scores (a model of the scores, not a count); dp_bound_bits (a DP model "
                                       "only): the most expected exposure its (epsilon, delta) allows a canary "
                                       "planted that many times (veil.defenses.lm.exposure_bound), exceeded when "
                                       "the mean's 95% bootstrap interval lies wholly above it"})


def _extraction(run: LMRun, lm: Any, planted: Any, manifest: dict[str, Any],
                ref: tuple[Any, dict[str, Any]] | None = None) -> ResultRecord:
    from veil.attacks.generation import TrainingDataExtraction, score_extraction
    from veil.metrics.leakage import wilson_interval

    start = time.perf_counter()
    attack = TrainingDataExtraction(samples=run.samples, top=run.top, max_tokens=run.max_tokens, seed=run.seed,
                                    reference=None if ref is None else _access(*ref))
    found = attack.run(_access(lm, manifest))
    scored = score_extraction(found, list(planted.train))
    metrics = {}
    for ranking, row in scored.items():
        metrics[f"precision@{ranking}"] = Metric(mean=row["precision"], n=row["top"], ci_low=row["ci_low"],
                                                 ci_high=row["ci_high"], ci_level=0.95)
    written = " \n ".join(t.lower() for t in found.texts)
    squashed = written.replace(" ", "")

    def written_out(values: list[Any]) -> int:  # planted values found anywhere in the samples, spaces ignored
        return sum(p.value.lower().replace(" ", "") in squashed for p in values)
    pii = {}
    for count in run.counts:
        values = [p for p in planted.pii if p.count == count]
        hits = written_out(values)
        if values:
            low, high = wilson_interval(hits, len(values))
            metrics[f"pii_recall@{count}"] = Metric(mean=hits / len(values), n=len(values), ci_low=low,
                                                    ci_high=high, ci_level=0.95)
        pii[str(count)] = {"planted": len(values), "written": int(hits)}
    by_entity = {}  # what survives a defense, per PII class (scrubbing catches some classes and misses others)
    for entity in dict.fromkeys(p.entity for p in planted.pii):
        values = [p for p in planted.pii if p.entity == entity]
        hits = written_out(values)
        low, high = wilson_interval(hits, len(values))
        metrics[f"pii_recall[{entity}]"] = Metric(mean=hits / len(values), n=len(values), ci_low=low, ci_high=high,
                                                  ci_level=0.95)
        by_entity[entity] = {"planted": len(values), "written": int(hits),
                             "counts": sorted({p.count for p in values})}
    from veil.attacks.generation.extraction import TAGGED, score_pii_extraction, tag_pii

    tagged = score_pii_extraction(tag_pii(list(found.texts)), [(p.entity, p.value) for p in planted.pii])
    for name in ("precision", "recall"):
        row = tagged[name]
        if row["n"]:
            metrics[f"pii_extraction_{name}"] = Metric(mean=row["share"], n=row["n"], ci_low=row["ci_low"],
                                                       ci_high=row["ci_high"], ci_level=0.95)
    canaries = sum(c.text().lower() in written for c in planted.canaries)
    examples = {r: [_withhold(t, planted.canaries) for t in row["texts"][:10]] for r, row in scored.items()}
    return ResultRecord(METHOD, "extraction", {"run": run.identity(), "model_sha256": manifest["sha256"],
                                               "reference_sha256": None if ref is None else ref[1]["sha256"],
                                               "attack": attack.config()},
                        metrics, time.perf_counter() - start,
                        extra={"distinct_samples": len(found.texts), "pii": pii, "pii_by_entity": by_entity,
                               "pii_extraction": {"classes": list(TAGGED),
                                                  "tagged": tagged["precision"]["n"],
                                                  "right": tagged["precision"]["right"],
                                                  "planted": tagged["recall"]["n"],
                                                  "found": tagged["recall"]["right"],
                                                  "per_class": tagged["per_class"],
                                                  "criterion": "Presidio's pattern recognizers on the samples "
                                                               "with their spacing undone; a tagged value is "
                                                               "right when it is a planted value of its class "
                                                               "(lowercased, spaces removed); names and street "
                                                               "addresses are not tagged (the samples are "
                                                               "lowercase)"},
                               "canaries_written": int(canaries),
                               "reference": _reference_note(run, ref, len(planted.public)),
                               "extracted": examples,
                               "criterion": "a top sample of at least 6 words found verbatim (lowercased, "
                                            "whitespace collapsed) in a training text; PII recall: a planted value "
                                            "written anywhere in the samples (spaces ignored)"})


def _withhold(text: str, canaries: Any) -> str:
    """``text``, with any planted canary in it written as its format (the secret never goes into a record)."""
    for canary in canaries:
        secret = canary.text().lower()
        if secret in text.lower():
            at = text.lower().index(secret)
            text = text[:at] + canary.format.template + " (a planted canary; its secret withheld)" + \
                text[at + len(secret):]
    return text


def pii_targets(run: LMRun, planted: Any) -> tuple[list[str], list[Any]]:
    """The auditor's masked sentences: for each planted PII value, the first training text that holds it with the
    value replaced by :data:`~veil.attacks.generation.pii.MASK`, and the values (the truth)."""
    from veil.attacks.generation.pii import MASK

    templates, values = [], []
    for p in planted.pii:
        text = next(t for t in planted.train if p.value in t)
        templates.append(text.replace(p.value, MASK, 1))
        values.append(p)
    return templates, values


def pii_candidates(run: LMRun, planted: Any, values: list[Any], n: int = PII_CANDIDATES) -> list[list[str]]:
    """Per planted value, ``n`` candidates in a shuffled order: the value and ``n - 1`` others of its class and
    variant, drawn as the corpus draws values (from the run's seed, another stream), none of them planted."""
    from veil.corpora.pii_injection import _Values

    rng = np.random.default_rng([run.seed, 99])
    draw = _Values(rng)
    planted_values = {p.value for p in planted.pii}
    out = []
    for p in values:
        seen = set(planted_values)
        others = [draw.draw(p.entity, p.variant, seen)[0] for _ in range(n - 1)]
        both = [p.value] + others
        out.append([both[i] for i in rng.permutation(len(both))])
    return out


def _pii(run: LMRun, lm: Any, planted: Any, manifest: dict[str, Any], attack: str) -> ResultRecord:
    from scipy.stats import binomtest, fisher_exact

    from veil.attacks.generation.pii import PIIInference, PIIReconstruction, budget_curve, score_pii

    start = time.perf_counter()
    if not planted.pii:
        raise InvalidParameterError("this run planted no PII value (pii_per_count 0): nothing to infer")
    templates, values = pii_targets(run, planted)
    if attack == "pii-inference":
        n = _budget(run, attack)["candidates_each"][0]
        made = PIIInference(templates, pii_candidates(run, planted, values, n=n))
    else:
        made = PIIReconstruction(templates, samples=_budget(run, attack)["samples"], seed=run.seed)
    found = made.run(_access(lm, manifest))
    counts = [p.count for p in values]
    scored = score_pii(found, [p.value for p in values], counts)
    metrics, tests = {}, {}
    for c, row in scored.items():
        metrics[f"pii_{attack.split('-')[1]}@{c}"] = Metric(mean=row["share"], n=row["n"], ci_low=row["ci_low"],
                                                            ci_high=row["ci_high"], ci_level=0.95)
    by_class = score_pii(found, [p.value for p in values], [p.entity for p in values])  # the same grouping by class
    by_entity = {entity: {"n": row["n"], "right": row["right"]} for entity, row in by_class.items()}
    if attack == "pii-inference":
        for c, row in scored.items():
            res = binomtest(row["right"], row["n"], row["chance"], alternative="greater")
            tests[c] = {"name": "one-sided binomial test against chance", "chance": row["chance"],
                        "p_value": float(res.pvalue)}
    low, high = str(min(run.counts)), str(max(run.counts))
    if low != high:
        a, b = scored[high], scored[low]
        res = fisher_exact([[a["right"], a["n"] - a["right"]], [b["right"], b["n"] - b["right"]]],
                           alternative="greater")
        tests["duplication"] = {"name": "one-sided Fisher exact test", "hypothesis": f"values planted {high}x are "
                                f"guessed right more often than values planted {low}x", "p_value": float(res.pvalue)}
    return ResultRecord(METHOD, attack, {"run": run.identity(), "model_sha256": manifest["sha256"],
                                         "attack": made.config()},
                        metrics, time.perf_counter() - start,
                        extra={"per_count": scored, "per_entity": by_entity, "tests": tests,
                               "criterion": "a guess equal to the planted value, lowercased with every space removed",
                               "candidates_per_sentence": [len(c) for c in found.candidates],
                               "budget": None if found.origins is None else
                               budget_curve(found, [p.value for p in values])})


def membership_candidates(run: LMRun, planted: Any) -> tuple[list[str], np.ndarray]:
    """The candidates and the truth: every held-out text (non-members) and as many of the plain training texts
    (members, drawn from the run's seed; planted texts left out), shuffled together."""
    from veil.corpora.pii_injection import base_sentences

    _, pool = base_sentences(run.corpus)
    pool, heldout, train = set(pool), set(planted.heldout), set(planted.train)
    plain = [t for t in dict.fromkeys(planted.train) if t in pool and t not in heldout]
    unseen = [t for t in dict.fromkeys(planted.heldout) if t not in train]  # a sentence the corpus holds twice: out
    rng = np.random.default_rng([run.seed, 13])
    n = min(len(unseen), len(plain))
    members = [plain[i] for i in np.sort(rng.choice(len(plain), size=n, replace=False))]
    outside = unseen[:n]
    texts = members + outside
    truth = np.array([True] * n + [False] * n)
    order = rng.permutation(len(texts))
    return [texts[i] for i in order], truth[order]


def _membership(run: LMRun, lm: Any, planted: Any, manifest: dict[str, Any],
                ref: tuple[Any, dict[str, Any]] | None = None) -> ResultRecord:
    from veil.attacks.generation import LMMembership, LMMembershipReference, LMMembershipZlib
    from veil.attacks.membership.scoring import membership_test, score_membership

    start = time.perf_counter()
    from veil.attacks.generation import LMAccess

    texts, truth = membership_candidates(run, planted)
    plain = _access(lm, manifest)
    scored_once = plain.scores(texts)  # both attacks score the same candidates: the model runs on them once
    known = dict(zip(texts, scored_once))
    access = LMAccess(score=lambda batch: np.array([known[t] for t in batch]), sample=plain.sample,
                      recipe=plain.recipe)
    metrics, tests, configs = {}, {}, {}
    made = [LMMembership(texts), LMMembershipZlib(texts)]
    if ref is not None:
        made.append(LMMembershipReference(texts, reference=_access(*ref)))
    for attack in made:
        found = attack.run(access)
        scored = score_membership(found, truth, resamples=1000, rng=run.seed)
        short = attack.name.removeprefix("lm-membership-")
        for k, m in scored.result.metrics.items():
            metrics[f"{short}_{k}"] = m
        verdict = membership_test(found.scores, truth)
        tests[short] = {"name": verdict.test, "auc": verdict.statistic, "p_value": verdict.p_value}
        configs[short] = attack.config()
    return ResultRecord(METHOD, "membership", {"run": run.identity(), "model_sha256": manifest["sha256"],
                                               "reference_sha256": None if ref is None else ref[1]["sha256"],
                                               "attack": configs},
                        metrics, time.perf_counter() - start,
                        extra={"tests": tests, "members": int(truth.sum()), "non_members": int((~truth).sum()),
                               "reference": _reference_note(run, ref, len(planted.public)),
                               "note": "members: plain training texts drawn at random; non-members: the held-out "
                                       "texts; both from one randomly split pool"})
