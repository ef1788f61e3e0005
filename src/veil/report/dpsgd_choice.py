"""TextHide or DP-SGD? The section of ``docs/results/dpsgd.md`` that joins the records of several experiments.

Per corpus, the three kinds of head that ``veil attack membership`` trains on the same members with one recipe
(plain training, a head trained on TextHide encodings, DP-SGD at each epsilon) at the largest epochs budget where all
three were recorded. Each is put under the strongest attack veil recorded for what it releases:

- the model (all three): the membership attack with the highest AUC (``results/membership``);
- TextHide's training encodings, released at every step of training: the attack with the highest success on
  encodings of the same (m, k) in the same mode on the same corpus (``results/texthide-attacks``);
- DP-SGD's guarantee: the largest AUC its (epsilon, delta) allows, and the one-run audits at the same target
  epsilon on the same corpus (``results/dpsgd-audit``).

DP-SGD "at the same utility" is the smallest recorded epsilon whose target is at least as accurate as the TextHide
target (accuracies are single test-split measurements with Wilson intervals; the rule is stated on the page).

Each row is judged by the two rules of the bench's "What to use" (:mod:`veil.report.bench_use`), at ``ALPHA``:
useful when every training of the target beats the majority class (exact one-sided binomial); private when no
recorded attack on what the row releases beats random guessing, or, for DP-SGD, when every membership AUC's upper
interval end stays within :func:`~veil.attacks.membership.scoring.dp_auc_bound` of its (epsilon, delta) and no
one-run audit at that epsilon failed. Against random guessing: a membership AUC whose 95% bootstrap interval lies
above 0.5; an attack on the encodings by the exact one-sided binomial test against the chance of a guess among at
least its n queried private texts (1/n for a text itself or all its sources, k/n for any one of k sources), an
upper bound on the true chance, so the test errs towards calling the encodings private. TextHide passes only when
both its releases (the encodings and the model) do. Nothing here is typed by hand: each sentence is computed from
those records.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from veil.report.bench_use import Check, both_releases, why_not
from veil.report.dpsgd import ALPHA, DEFAULT_RECIPE, recipe
from veil.report.markdown import beats_majority, percent, read_record
from veil.results import Metric, ResultRecord

__all__ = ["choice_section"]


def _records(folder: Path) -> list[ResultRecord]:
    return [read_record(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def _accuracy(rs: list[ResultRecord]) -> float:
    """The target's test accuracy: the mean over the distinct trainings behind its records (each call of the
    experiment trains its own target)."""
    accs = list(dict.fromkeys(r.metrics["test_accuracy"].mean for r in rs))
    return sum(accs) / len(accs)


def _accuracy_text(rs: list[ResultRecord]) -> str:
    return " / ".join(dict.fromkeys(f"{100 * r.metrics['test_accuracy'].mean:.1f}" for r in rs))


def _learnt(rs: list[ResultRecord]) -> str:
    verdicts = [beats_majority(r, ALPHA) for r in rs]
    if any(v is None for v in verdicts):
        return "–"
    return " / ".join(dict.fromkeys("yes" if v.reject else "no" for v in verdicts))


def _attack(r: ResultRecord) -> str:
    queries = r.config.get("queries", 1)
    return r.config["method"] + (f", {queries} queries" if queries != 1 else "")


def _membership(rs: list[ResultRecord]) -> str:
    top = max(rs, key=lambda r: r.metrics["auc"].mean)
    return (f"membership ({_attack(top)}): AUC {percent(top.metrics['auc'])}, TPR at 1% FPR "
            f"{percent(top.metrics['tpr@1%fpr'])}")


def _useful(rs: list[ResultRecord]) -> Check:
    """Rule 1: every training of the target beats the majority class (None: a record without its majority rate)."""
    verdicts = [beats_majority(r, ALPHA) for r in rs]
    if any(v is None for v in verdicts):
        return Check(None, "its records keep no majority rate to test against")
    if all(v.reject for v in verdicts):
        return Check(True, "beats the majority class")
    worst = max(v.p_value for v in verdicts)
    return Check(False, f"test accuracy does not beat the majority class ({_p(worst)}, exact one-sided binomial)")


def _p(p: float) -> str:
    return "p<1e-4" if p < 1e-4 else f"p={p:.2g}"


def _membership_private(rs: list[ResultRecord], bound: float | None = None) -> Check:
    """Rule 2 on a model: without a bound, no membership AUC's 95% interval lies above 0.5; with the DP bound
    ``bound``, every AUC's interval ends within it."""
    if bound is None:
        over = [r for r in rs if r.metrics["auc"].ci_low is not None and r.metrics["auc"].ci_low > 0.5]
        if over:
            top = max(over, key=lambda r: r.metrics["auc"].ci_low)
            return Check(False, f"membership ({_attack(top)}) AUC {percent(top.metrics['auc'])}: its interval lies "
                                "above 50 (random guessing)")
        return Check(True, "no membership AUC's interval lies above 50 (random guessing)")
    high = max(rs, key=lambda r: r.metrics["auc"].ci_high if r.metrics["auc"].ci_high is not None
               else r.metrics["auc"].mean)
    auc = high.metrics["auc"]
    ok = (auc.ci_high if auc.ci_high is not None else auc.mean) <= bound
    return Check(ok, f"membership ({_attack(high)}) AUC {percent(auc)} {'within' if ok else 'reaches above'} the "
                     f"{100 * bound:.2f} its guarantee allows")


def _verdict(useful: Check, private: Check) -> str:
    """The rules' column: yes, or no with the rule(s) that fail."""
    return "yes" if useful.passed and private.passed else f"no ({why_not(useful, private)})"


def _passing(verdicts: dict[float, str]) -> str:
    """The sentence naming the DP-SGD heads that pass both rules."""
    ok = [f"{eps:g}" for eps, v in sorted(verdicts.items()) if v == "yes"]
    return f"DP-SGD heads that pass both rules: epsilon {', '.join(ok)}." if ok else \
        "No DP-SGD head passes both rules."


def _encodings(recs: list[ResultRecord], corpus: str, m: int, k: int
               ) -> tuple[Metric, str, Check] | None:
    """The strongest recorded attack on the training encodings of (m, k)-TextHide (intra) on ``corpus`` and what it
    did: unmixing's share of encodings with all k sources recovered, a retrieval attack's share of queries with one
    of their private sources found (its own text where it has no any-source score); with rule 2's verdict on it
    (the exact binomial test against the chance of a guess among at least its n queried texts)."""
    from veil.metrics.stats import binomial_test

    best = None
    for r in recs:
        c = r.config.get("cell") or {}
        if (c.get("corpus") != corpus or c.get("mode") != "intra" or c.get("index", "private") != "private"
                or str(c.get("m")) != str(m) or int(c.get("k", -1)) != int(k)):
            continue
        seen = f"{c['attack']} ({c.get('epochs', '?')} epochs of encodings observed)"
        if c.get("attack") == "unmix" and "all_sources" in r.metrics:
            metric, chance = r.metrics["all_sources"], 1
            what = f"{seen} recovers all {k} private sources of {percent(metric, unit='%')} of {metric.n} encodings"
        elif "identity_any" in r.metrics:
            metric, chance = r.metrics["identity_any"], int(k)
            what = f"{seen} finds one of the private sources of {percent(metric, unit='%')} of {metric.n} queries"
        elif "identity" in r.metrics:
            metric, chance = r.metrics["identity"], 1
            what = f"{seen} finds the own text of {percent(metric, unit='%')} of {metric.n} queries"
        else:
            continue
        if best is None or metric.mean > best[0].mean:
            n = int(metric.n)
            v = binomial_test(min(n, round(metric.mean * n)), n, min(1.0, chance / n), alpha=ALPHA)
            rule = Check(not v.reject, f"{c['attack']} {percent(metric, unit='%')} "
                                       f"{'beats' if v.reject else 'is not distinguishable from'} random guessing "
                                       f"({_p(v.p_value)}, exact one-sided binomial against {chance}/{n})")
            best = (metric, what, rule)
    return best


def _audit_records(recs: list[ResultRecord], corpus: str, eps: float) -> list[ResultRecord]:
    return [r for r in recs if r.config.get("corpus") == corpus and r.config.get("defense") == "dpsgd"
            and float(r.config.get("epsilon", -1)) == float(eps)]


def _audits(recs: list[ResultRecord], corpus: str, eps: float) -> str:
    rs = _audit_records(recs, corpus, eps)
    if not rs:
        return "no one-run audit recorded at this epsilon"
    top = max(rs, key=lambda r: max(r.metrics["epsilon_lower_white"].mean, r.metrics["epsilon_lower_black"].mean))
    lower = max(top.metrics["epsilon_lower_white"].mean, top.metrics["epsilon_lower_black"].mean)
    passed = sum(r.metrics["passed"].mean == 1.0 for r in rs)
    return (f"one-run audit: highest lower bound {lower:.2f} against the claimed "
            f"{top.metrics['epsilon_claimed'].mean:.2f} ({top.config['setting']}); {passed} of {len(rs)} audits pass")


def _targets(recs: list[ResultRecord]) -> dict[str, dict[tuple, dict[tuple, list[ResultRecord]]]]:
    """corpus -> (epochs, members) -> (defense, epsilon, m, k) -> records, heads of the one recipe (Adam at 1e-3)
    only."""
    out: dict[str, dict[tuple, dict[tuple, list[ResultRecord]]]] = defaultdict(lambda: defaultdict(dict))
    for r in recs:
        c = r.config
        if c.get("model", "head") != "head" or "test_accuracy" not in r.metrics or recipe(c) != DEFAULT_RECIPE:
            continue
        key = (c["defense"], c.get("epsilon"), c.get("texthide_m"), c.get("texthide_k"))
        out[c["corpus"]][(int(c["epochs"]), int(c["members"]))].setdefault(key, []).append(r)
    return out


def _complete(targets: dict[tuple, list[ResultRecord]]) -> bool:
    kinds = {d for d, *_ in targets}
    return {"plain", "texthide", "dpsgd"} <= kinds


def choice_section(root: Path) -> list[str]:
    """The section's lines, from the record folders under ``root`` (the results folder); empty when no corpus has
    membership records of all three kinds of target at one budget (epochs and members)."""
    from veil.attacks.membership.scoring import dp_auc_bound

    by_corpus = _targets(_records(root / "membership"))
    encodings = _records(root / "texthide-attacks")
    audits = _records(root / "dpsgd-audit")
    rows: list[str] = []
    said: list[str] = []
    for corpus in sorted(by_corpus):
        budgets = [e for e, t in by_corpus[corpus].items() if _complete(t)]
        if not budgets:
            continue
        epochs, members = max(budgets)
        targets = by_corpus[corpus][(epochs, members)]
        where = f"{corpus} ({members} members, {epochs} epochs)"
        plain = [rs for (d, *_), rs in targets.items() if d == "plain"][0]
        hides = {(m, k): rs for (d, _, m, k), rs in targets.items() if d == "texthide"}
        (m, k), hide = max(hides.items(), key=lambda kv: _accuracy(kv[1]))
        dps = sorted(((float(e), rs) for (d, e, *_), rs in targets.items() if d == "dpsgd"), key=lambda t: t[0])
        rows.append(f"| {where} | none (plain training) | model | {_accuracy_text(plain)} | {_learnt(plain)} | "
                    f"{_membership(plain)} | none | {_verdict(_useful(plain), _membership_private(plain))} |")
        enc = _encodings(encodings, corpus, m, k)
        enc_text = "no attack on these encodings recorded" if enc is None else enc[1]
        enc_rule = Check(None, "no attack on its training encodings recorded") if enc is None else enc[2]
        hide_rule = _membership_private(hide)
        rows.append(f"| {where} | TextHide ({m}, {k}) | training encodings, every step | {_accuracy_text(hide)} | "
                    f"{_learnt(hide)} | {enc_text} | heuristic | {_verdict(_useful(hide), enc_rule)} |")
        rows.append(f"| {where} | TextHide ({m}, {k}) | model | {_accuracy_text(hide)} | {_learnt(hide)} | "
                    f"{_membership(hide)} | heuristic | {_verdict(_useful(hide), hide_rule)} |")
        hide_verdict = _verdict(_useful(hide), both_releases(hide_rule, enc_rule))
        dp_verdicts: dict[float, str] = {}
        goal = _accuracy(hide)
        equal = next((e for e, rs in dps if _accuracy(rs) >= goal), None)
        for eps, rs in dps:
            delta = rs[0].metrics["delta"].mean if "delta" in rs[0].metrics else 0.0
            bound = dp_auc_bound(eps, delta)
            mark = " (same utility)" if eps == equal else ""
            failed = [a for a in _audit_records(audits, corpus, eps) if a.metrics["passed"].mean != 1.0]
            rule = (Check(False, f"{len(failed)} one-run audit(s) at this epsilon failed") if failed else
                    _membership_private(rs, bound))
            dp_verdicts[eps] = _verdict(_useful(rs), rule)
            rows.append(f"| {where} | DP-SGD, epsilon {eps:g}{mark} | model | {_accuracy_text(rs)} | {_learnt(rs)} | "
                        f"{_membership(rs)}; {_audits(audits, corpus, eps)} | ({eps:g}, {delta:.2g})-DP: AUC at "
                        f"most {100 * bound:.2f} | {dp_verdicts[eps]} |")
        if equal is None:
            best_eps, best = max(dps, key=lambda t: _accuracy(t[1]))
            said.append(f"- {corpus}: no recorded epsilon reaches the TextHide head's accuracy "
                        f"({100 * goal:.1f}); the most accurate DP-SGD head (epsilon {best_eps:g}) reaches "
                        f"{100 * _accuracy(best):.1f}. By the rules, TextHide ({m}, {k}), both releases together: "
                        f"{hide_verdict}; DP-SGD at epsilon {best_eps:g}: {dp_verdicts[best_eps]}. "
                        f"{_passing(dp_verdicts)}")
            continue
        rs = dict(dps)[equal]
        top = max(rs, key=lambda r: r.metrics["auc"].mean)
        line = (f"- {corpus}: DP-SGD reaches the TextHide head's accuracy ({100 * goal:.1f}) at epsilon {equal:g} "
                f"({100 * _accuracy(rs):.1f}). There, its strongest recorded membership attack reaches AUC "
                f"{percent(top.metrics['auc'])} ({_attack(top)}), and its guarantee caps every attack's AUC at "
                f"{100 * dp_auc_bound(equal, rs[0].metrics['delta'].mean):.2f}.")
        if enc is not None:
            broken = enc[0].ci_low is not None and enc[0].ci_low > 0.5
            line += (f" TextHide's training encodings, which leave the owner at every step"
                     f"{', are broken' if broken else ''}: {enc[1]}.")
        line += (f" By the rules, DP-SGD at epsilon {equal:g}: {dp_verdicts[equal]}; TextHide ({m}, {k}), both "
                 f"releases together: {hide_verdict}. {_passing(dp_verdicts)}")
        said.append(line)
    if not rows:
        return []
    return ["## TextHide or DP-SGD?", "",
            "The three ways to train a classifier on private text, trained by `veil attack membership` on the same "
            "members of the same corpus with one recipe (an MLP head on frozen MiniLM, the same epochs, batch "
            "size and learning rate), at the largest epochs budget where all three were recorded. Each is put "
            "under the strongest attack veil recorded for what it releases. A TextHide user releases two things: "
            "the training encodings at every step (to the server that trains on them; docs/results/"
            "texthide-attacks.md), and the trained model. A DP-SGD user releases only the model "
            "(docs/results/membership.md, docs/results/dpsgd-audit.md). 'Same utility' marks the smallest "
            "recorded epsilon whose head is at least as accurate as the TextHide head (one test-split measurement "
            "each; their Wilson intervals are on the membership page). Accuracy: percent on the test split, one "
            "value per training (each experiment call trains its own target). 'Learnt': the exact one-sided "
            f"binomial test against the majority class at {ALPHA:g}. 'Useful and private': the two rules of the "
            "bench's What to use (docs/results/bench.md), each at the same level. Useful: every training of the "
            "target is learnt. Private: no recorded attack on what the row releases beats random guessing (a "
            "membership AUC whose 95% bootstrap interval lies above 50; an attack on the encodings by the exact "
            "one-sided binomial test against the chance of a guess among at least its n queried private texts, 1/n "
            "for a text or all its sources, k/n for any one of k), or, for DP-SGD, every membership AUC's interval "
            "ends within what its (epsilon, delta) allows and no one-run audit at that epsilon failed. TextHide "
            "passes only when both its releases do.", "",
            "| corpus | target | what it releases | test accuracy | learnt | strongest attack recorded on it | "
            "what bounds it | useful and private? |", "|---|---|---|---|---|---|---|---|", *rows, "", *said, ""]
