"""A released language model (``generative-model``, issue 52): its utility, and every attack on it.

One setting = one run of the generation experiment (:func:`veil.bench.data_generation.bench_lm_run`): the model
fine-tuned on the planted corpus, cached in ``VEIL_HOME/lm/`` (:func:`veil.bench.runner.ensure_models` trains it,
and the attacker's reference model, before any cell), and the records of
:func:`veil.experiments.generation.run.attack_record` read into bench blocks:

* **utility**: held-out next-token accuracy (the share of held-out tokens that are the model's top-1 guess, with a
  95% bootstrap interval over texts), against its one-class value: always guessing the token most frequent in the
  training texts. Held-out perplexity (fine-tuned and base) is beside it in the record.
* **lm-membership-loss / -zlib / -reference**: AUC over the held-out texts and as many plain training texts, tested
  against 0.5 by a one-sided Mann-Whitney U test; comparable with each other (the kind's strongest attack is the
  highest AUC); a DP model is held to the AUC its (epsilon, delta) allows.
* **canary-exposure**: the mean exposure (bits) of the canaries planted the most times, against a value never
  planted (rank uniform: about 1.44 bits expected), by Fisher's combination of the canaries' rank p-values
  (``u = 2^-exposure``; exact for the counted estimate); a DP model is held to
  :func:`~veil.defenses.lm.exposure_bound` (group privacy over the copies).
* **pii-inference**: the share of PII values planted the most times that the model ranks first among the candidates,
  tested against chance (one-sided binomial); a DP model is held to e^(k epsilon) / N + k e^((k-1) epsilon) delta
  (group privacy over k copies, N candidates).
* **pii-reconstruction**: the same share from the model's own samples; no floor to test against (shown, not ruled).
* **extraction**: the share of the top samples (zlib ranking) found verbatim in a training text, against the same
  attack on the attacker's reference model (a model of the domain that never saw the private text), by a one-sided
  Fisher exact test.

AUC, bits and shares of PII are on different scales: only the membership AUCs are ``comparable``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from veil.bench.cells.common import ALPHA, bench_block, finish
from veil.results import Metric, ResultRecord

__all__ = ["lm_utility", "lm_membership_cell", "exposure_cell", "pii_cell", "extraction_cell", "lm_model_name",
           "group_top1_bound"]

_BOOT = 2000
#: expected exposure (bits) of a value never planted: E[-log2 U] for U uniform on (0, 1]
UNPLANTED_BITS = 1.0 / math.log(2.0)


def lm_model_name(cell: Any) -> str:
    """The name :func:`veil.bench.runner.ensure_models` gives the setting's language model (``lm:<run key>``)."""
    return f"lm:{_run(cell, None).key}"


def _run(cell: Any, data: Any) -> Any:
    from veil.bench.data import bench_data
    from veil.bench.data_generation import bench_lm_run

    data = data if data is not None else bench_data(cell.corpus, cell.config.quick, cell.config.limit)
    return bench_lm_run(data, cell.defense, cell.setting, seed=cell.config.seed)


def ensure_cell_lm(cell: Any, log: Any = print) -> None:
    """Train (or find) the setting's model and its attacker's reference model (:func:`ensure_models`)."""
    from veil.experiments.generation.run import ensure_lm, ensure_reference

    run = _run(cell, None)
    _, _, planted = ensure_lm(run, log=log)
    ensure_reference(run, planted, log)


def _state(cell: Any, data: Any) -> dict[str, Any]:
    """The setting's run, model, planted corpus and reference model (loaded once per process on ``data``)."""
    from veil.experiments.generation.run import ensure_lm, ensure_reference

    run = _run(cell, data)
    key = ("lm", run.key)
    if key not in data._cache:
        lm, manifest, planted = ensure_lm(run)
        data._cache[key] = {"run": run, "lm": lm, "manifest": manifest, "planted": planted,
                            "ref": ensure_reference(run, planted)}
    return data._cache[key]


def _record(cell: Any, data: Any, attack: str) -> ResultRecord:
    """The experiment's record of ``attack`` on the setting's model (made once per process on ``data``)."""
    from veil.experiments.generation.run import attack_record

    s = _state(cell, data)
    key = ("lm-record", s["run"].key, attack)
    if key not in data._cache:
        data._cache[key] = attack_record(s["run"], attack, s["lm"], s["planted"], s["manifest"], s["ref"])
    return data._cache[key]


def _stamp(rec: ResultRecord, cell: Any, data: Any, start: float, bench: dict[str, Any]) -> ResultRecord:
    """A bench record built from an experiment record: its config, metrics and extra (a copy), and the model's
    guarantee as trained (DP-SGD's accounted epsilon and delta)."""
    s = _state(cell, data)
    out = ResultRecord(method="bench", experiment=cell.id,
                       config={**rec.config, "guarantee": s["manifest"].get("guarantee"),
                               "randomness": "the model's training noise and lots (DP-SGD) from the OS CSPRNG; the "
                                             "seed selects the planted corpus and the attacks' own choices"},
                       metrics=dict(rec.metrics), wall_time_s=0.0, extra=dict(rec.extra))
    return finish(out, cell, data, start, bench)


def _guarantee(cell: Any, data: Any) -> dict[str, Any]:
    g = _state(cell, data)["manifest"].get("guarantee")
    return g if isinstance(g, dict) else {}


# ---------------------------------------------------------------- utility
def lm_utility(cell: Any, data: Any) -> ResultRecord:
    """Held-out next-token accuracy [bootstrap 95% over texts] against always guessing the training texts' most
    frequent token; held-out perplexity (fine-tuned and base) beside it."""
    from veil.experiments.generation.run import _perplexity
    from veil.models.causal_lm import build_causal_lm, predicted_tokens, token_hits

    start = time.perf_counter()
    s = _state(cell, data)
    run, lm, planted = s["run"], s["lm"], s["planted"]
    heldout = list(planted.heldout)
    hits, count = token_hits(lm, heldout)
    rng = np.random.default_rng([run.seed, 17])
    idx = rng.integers(0, len(heldout), size=(_BOOT, len(heldout)))
    boot = hits[idx].sum(1) / count[idx].sum(1)
    low, high = np.percentile(boot, [2.5, 97.5])
    accuracy = Metric(mean=float(hits.sum() / count.sum()), n=int(count.sum()), ci_low=float(low),
                      ci_high=float(high), ci_level=0.95)
    train_tokens = np.concatenate(predicted_tokens(lm, list(planted.train)))
    top = int(np.bincount(train_tokens).argmax())
    held_tokens = np.concatenate(predicted_tokens(lm, heldout))
    majority = float((held_tokens == top).mean())
    base = build_causal_lm(max_tokens=run.max_tokens, seed=0)
    metrics = {"next_token_accuracy": accuracy, "heldout_perplexity": _perplexity(lm, heldout, run.seed),
               "base_perplexity": _perplexity(base, heldout, run.seed)}
    rec = ResultRecord(method="bench", experiment=cell.id,
                       config={"utility": "held-out next-token accuracy (top-1) of the released language model on "
                                          f"the {len(heldout)} held-out texts; the one-class value always guesses "
                                          f"the training texts' most frequent token "
                                          f"({lm.tokenizer.convert_ids_to_tokens(top)!r})",
                               "run": run.identity(), "model_sha256": s["manifest"]["sha256"],
                               "guarantee": s["manifest"].get("guarantee"), "n_test": len(heldout)},
                       metrics=metrics, wall_time_s=0.0,
                       extra={"corpus": planted.describe(), "train_seconds": s["manifest"].get("seconds")})
    bench = bench_block(utility="next-token accuracy", utility_metric=accuracy.to_dict(), majority_rate=majority,
                        perplexity=metrics["heldout_perplexity"].to_dict(),
                        base_perplexity=metrics["base_perplexity"].to_dict())
    return finish(rec, cell, data, start, bench)


# ---------------------------------------------------------------- membership
def lm_membership_cell(cell: Any, data: Any) -> ResultRecord:
    """The cell's membership attack (loss, zlib or reference): AUC [bootstrap 95%] tested against 0.5."""
    start = time.perf_counter()
    rec = _record(cell, data, "membership")
    short = cell.attack.removeprefix("lm-membership-")
    test = rec.extra["tests"].get(short)
    if test is None:  # the reference attack on a run without public text
        why = (rec.extra.get("reference") or {}).get("why", "it did not run")
        from veil.errors import InvalidParameterError

        raise InvalidParameterError(f"{cell.attack} did not run on this setting: {why}")
    auc = rec.metrics[f"{short}_auc"]
    tpr = rec.metrics.get(f"{short}_tpr@1%fpr")
    n = int(rec.extra["members"]) + int(rec.extra["non_members"])
    verdict = {"test": test["name"], "statistic": test["auc"], "p_value": test["p_value"],
               "reject": bool(test["p_value"] < ALPHA), "alpha": ALPHA}
    bench = bench_block(success="auc", success_metric=auc.to_dict(), comparable=True, random_rate=0.5,
                        floor_success=Metric(mean=0.5).to_dict(), test=verdict, versus="random guessing",
                        measure=f"membership inference on the language model: AUC over {n} texts (half trained "
                                "on)" + (f", TPR at 1% FPR {tpr.mean:.3f}" if tpr is not None else "")
                                + "; 0.5 is random guessing")
    return _stamp(rec, cell, data, start, bench)


# ---------------------------------------------------------------- canary exposure
def fisher_exposure_test(exposures: Any) -> dict[str, Any]:
    """One-sided test that canaries are more exposed than values never planted: each canary's rank p-value is
    ``u = 2^-exposure`` (uniform, or conservative, under the null), combined by Fisher's method
    (``-2 sum ln u`` against chi-square with 2m degrees of freedom)."""
    from scipy.stats import chi2

    e = np.asarray(exposures, dtype=float)
    statistic = float(2.0 * math.log(2.0) * e.sum())
    p = float(chi2.sf(statistic, 2 * len(e)))
    return {"test": "Fisher's combination of rank p-values (u = 2^-exposure), one-sided", "statistic": statistic,
            "p_value": p, "reject": bool(p < ALPHA), "alpha": ALPHA}


def exposure_cell(cell: Any, data: Any) -> ResultRecord:
    """Exposure of the canaries planted the most times (bits), against a never-planted value; held to the DP bound
    where there is one."""
    from veil.defenses.lm import exposure_bound

    start = time.perf_counter()
    rec = _record(cell, data, "canary-exposure")
    run = _state(cell, data)["run"]
    top = max(run.counts)
    m = rec.metrics[f"exposure@{top}"]
    values = rec.extra["per_count"][str(top)]["exposures"]
    g = _guarantee(cell, data)
    bound = None
    if g.get("epsilon") is not None:
        bound = exposure_bound(float(g["epsilon"]), float(g.get("delta") or 0.0), top, int(round(2 ** rec.extra[
            "space_bits"])))
    bench = bench_block(success="exposure", success_metric={**m.to_dict(), "unit": "bits"}, comparable=False,
                        versus_success={"mean": UNPLANTED_BITS, "unit": "bits"}, test=fisher_exposure_test(values),
                        versus="a value never planted", dp_bound=bound,
                        dp_bound_what=None if bound is None else f"expected exposure of a canary planted {top} "
                        f"times its {g.get('kind')} guarantee allows (group privacy over the copies)",
                        measure=f"canary exposure: the mean over the {len(values)} canaries planted {top} times "
                                f"(bits; at most {rec.extra['cap_bits']:.1f} with {run.candidates} sampled "
                                f"values); a value never planted scores about {UNPLANTED_BITS:.2f} bits")
    return _stamp(rec, cell, data, start, bench)


# ---------------------------------------------------------------- PII
def group_top1_bound(epsilon: float, delta: float, copies: int, candidates: int) -> float:
    """The most probability of ranking the true value first among ``candidates`` (a uniform prior) that
    (``epsilon``, ``delta``)-DP per text allows for a value written in ``copies`` texts: group privacy gives
    (k epsilon, k e^((k-1) epsilon) delta)-DP, so e^(k epsilon) / N + k e^((k-1) epsilon) delta, at most 1."""
    k = int(copies)
    try:
        bound = math.exp(k * epsilon) / candidates + k * math.exp((k - 1) * epsilon) * delta
    except OverflowError:
        return 1.0
    return min(1.0, bound)


def pii_cell(cell: Any, data: Any) -> ResultRecord:
    """PII inference (ranked among candidates; tested against chance) or reconstruction (from the model's own
    samples; no floor), on the values planted the most times."""
    start = time.perf_counter()
    rec = _record(cell, data, cell.attack)
    run = _state(cell, data)["run"]
    top = max(run.counts)
    short = cell.attack.split("-")[1]
    m = rec.metrics[f"pii_{short}@{top}"]
    row = rec.extra["per_count"][str(top)]
    if cell.attack == "pii-inference":
        test = rec.extra["tests"][str(top)]
        chance = float(test["chance"])
        g = _guarantee(cell, data)
        bound = None
        if g.get("epsilon") is not None:
            bound = group_top1_bound(float(g["epsilon"]), float(g.get("delta") or 0.0), top, round(1 / chance))
        bench = bench_block(success="pii_inference", success_metric=m.to_dict(), comparable=False,
                            random_rate=chance, versus_success=Metric(mean=chance).to_dict(),
                            test={"test": test["name"], "p_value": test["p_value"],
                                  "reject": bool(test["p_value"] < ALPHA), "alpha": ALPHA},
                            versus="chance", dp_bound=bound,
                            dp_bound_what=None if bound is None else f"top-1 among {round(1 / chance)} candidates "
                            f"for a value planted {top} times its {g.get('kind')} guarantee allows (group privacy)",
                            measure=f"PII inference: the share of the {row['n']} values planted {top} times the "
                                    f"model ranks first among {round(1 / chance)} candidates")
    else:
        bench = bench_block(success="pii_reconstruction", success_metric=m.to_dict(), comparable=False,
                            measure=f"PII reconstruction: the share of the {row['n']} values planted {top} times "
                                    "the model's most frequent sample after the text before the mask gets right "
                                    "(no floor to test against: shown, not ruled)")
    return _stamp(rec, cell, data, start, bench)


# ---------------------------------------------------------------- extraction
def extraction_cell(cell: Any, data: Any) -> ResultRecord:
    """The share of the top samples found verbatim in a training text, against the same attack on the attacker's
    reference model (one-sided Fisher exact test)."""
    from scipy.stats import fisher_exact

    from veil.experiments.generation.run import _extraction

    start = time.perf_counter()
    rec = _record(cell, data, "extraction")
    s = _state(cell, data)
    ranking = "zlib"  # the floor's ranking too (the reference ranking of the reference model is degenerate)
    m = rec.metrics[f"precision@{ranking}"]
    test = None
    floor = None
    if s["ref"] is not None:
        key = ("lm-record", s["run"].key, "extraction-floor")
        if key not in data._cache:  # the same attack on the reference model (its own reference: itself)
            ref_lm, ref_manifest = s["ref"]
            data._cache[key] = _extraction(s["run"], ref_lm, s["planted"], ref_manifest, None)
        fm = data._cache[key].metrics[f"precision@{ranking}"]
        floor = fm
        a, b = round(m.mean * m.n), round(fm.mean * fm.n)
        res = fisher_exact([[a, m.n - a], [b, fm.n - b]], alternative="greater")
        p = float(res.pvalue)
        test = {"test": "one-sided Fisher exact test against the reference model's samples", "p_value": p,
                "reject": bool(p < ALPHA), "alpha": ALPHA}
    bench = bench_block(success="extraction_precision", success_metric=m.to_dict(), comparable=False,
                        versus_success=None if floor is None else floor.to_dict(), test=test,
                        versus="the attacker's reference model (never trained on the private text)",
                        measure=f"training-data extraction: the share of the top {m.n} samples ({ranking} ranking) "
                                "found verbatim in a training text (at least 6 words)")
    return _stamp(rec, cell, data, start, bench)
