"""``docs/results/generation.md``: what a language model fine-tuned on a corpus with planted secrets gives away
(records of ``veil lm train`` and ``veil lm attack``, :mod:`veil.experiments.generation`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from veil.report.markdown import regenerate_section, register_renderer
from veil.results import ResultRecord

__all__ = ["generation_page"]


def _ci(m: Any, scale: float = 1.0, digits: int = 1) -> str:
    if m.ci_low is None or m.ci_high is None:
        return f"{scale * m.mean:.{digits}f}"
    return f"{scale * m.mean:.{digits}f} [{scale * m.ci_low:.{digits}f}, {scale * m.ci_high:.{digits}f}]"


def _label(run: dict[str, Any]) -> str:
    extra = "".join(f", {k}={v}" for k, v in sorted((run.get("settings") or {}).items()))
    return f"{run['defense']}{extra}, {run['steps']} steps"


def _size(run: dict[str, Any]) -> str | None:
    """``"--quick"`` or ``""`` when the run has the sizes of QUICK or of the default run (the CLI's two; corpus,
    defense, steps and seed are options of their own), else None: a run made through the Python API."""
    from veil.experiments.generation import QUICK, LMRun

    own = ("corpus", "defense", "steps", "seed", "settings", "lr")  # lr and settings follow from the defense
    for flag, sizes in ((" --quick", QUICK), ("", LMRun())):
        if all(run.get(k) == v for k, v in sizes.training().items() if k not in own) and \
                all(run.get(k) == getattr(sizes, k) for k in ("candidates", "samples", "top")):
            return flag
    return None


def _commands(recs: list[ResultRecord], results: str) -> tuple[list[str], list[str]]:
    """The commands that rerun the CLI's runs, and the labels of the runs made otherwise."""
    out, other = [], []
    for rec in recs:
        run = rec.config["run"]
        flag = _size(run)
        if flag is None:
            other.append(_label(run))
            continue
        eps = "".join(f" --epsilon {v:g}" for k, v in (run.get("settings") or {}).items() if k == "epsilon")
        base = (f"--corpus {run['corpus']} --defense {run['defense']}{eps} --steps {run['steps']} "
                f"--seed {run['seed']}{flag} --results {results}")
        out += [f"veil lm train {base}", f"veil lm attack {base}"]
    return out, other


def _exposure_plot(exposure: list[ResultRecord], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil._io import atomic_write

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for i, rec in enumerate(exposure):
        counts = sorted(int(k.split("@")[1]) for k in rec.metrics)
        ms = [rec.metrics[f"exposure@{c}"] for c in counts]
        err = [[m.mean - m.ci_low for m in ms], [m.ci_high - m.mean for m in ms]]
        ax.errorbar(counts, [m.mean for m in ms], yerr=err, marker="o", capsize=3, color=f"C{i}",
                    label=_label(rec.config["run"]))
        for c in counts:
            ax.scatter([c] * len(rec.metrics[f"exposure@{c}"].values), rec.metrics[f"exposure@{c}"].values, s=8,
                       color=f"C{i}", alpha=0.35)
        ax.axhline(rec.extra["cap_bits"], color=f"C{i}", ls=":", lw=0.8)
    ax.axhline(1.0, color="black", ls=(0, (1, 3)), lw=0.8)
    ax.annotate("a value never planted: about 1 bit", (1, 1.0), fontsize=7, va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("copies of the canary in the training text")
    ax.set_ylabel("exposure (bits)")
    ax.set_title("Canary exposure against insertion count (dotted: the estimate's cap)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / "generation_exposure.png"
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)
    return [f"![canary exposure against insertion count]({path.name})", ""]


@register_renderer("generation")
def generation_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = [r for _, r in records]
    by = {e: [r for r in recs if r.experiment == e] for e in ("utility", "canary-exposure", "extraction",
                                                               "pii-inference", "pii-reconstruction", "membership")}
    lines = ["# Results: a language model fine-tuned on private text with planted secrets", "",
             "veil's causal LM (MiniLM's weights as a decoder) fine-tuned on a corpus' sentences with planted PII "
             "values and Secret Sharer canaries, each at controlled insertion counts "
             "([docs/generation.md](../generation.md) says how the corpus, the model and the attacks are made). "
             "Intervals are 95%: bootstrap over held-out texts (perplexity) or over the canaries of one count "
             "(exposure), Wilson over samples or values (extraction, PII recall).", ""]
    if by["utility"]:
        lines += ["## The runs and their utility", "",
                  "| corpus | defense | train texts | words | planted texts | steps | held-out texts | held-out "
                  "perplexity | before fine-tuning | guarantee |", "|---|---|---:|---:|---:|---:|---:|---|---|---|"]
        for rec in by["utility"]:
            run, about = rec.config["run"], rec.extra["corpus"]
            said = _guarantee(rec)
            lines.append(f"| {run['corpus']} | {run['defense']} | {about['train_texts']:,} | "
                         f"{about['train_words']:,} | {about['planted_texts']:,} | {run['steps']:,} | "
                         f"{about['heldout_texts']:,} | {_ci(rec.metrics['heldout_perplexity'])} | "
                         f"{_ci(rec.metrics['base_perplexity'], digits=0)} | {said} |")
        lines += [""]
    lines += _side_by_side(by)
    if by["canary-exposure"]:
        lines += ["## Canary exposure", "",
                  "Exposure = log2 |R| - log2 rank of the canary among the values of its format, estimated from "
                  "values drawn uniformly (the plain estimate counts them, so it cannot exceed the cap; the "
                  "skew-normal extrapolation, a model of the scores, is in the records). A value the model never saw "
                  "scores about 1 bit.", ""]
        for rec in by["canary-exposure"]:
            run, att = rec.config["run"], rec.config["attack"]
            counts = sorted(int(k.split("@")[1]) for k in rec.metrics)
            dp = all("dp_bound_bits" in rec.extra["per_count"][str(c)] for c in counts)
            lines += [f"**{_label(run)}**: format `{att['template']}`, |R| = {att['space']:,}, "
                      f"{att['candidates']:,} values scored (cap {rec.extra['cap_bits']:.1f} bits).", "",
                      "| copies | canaries | exposure (bits) | each canary | guessed outright |"
                      + (" DP bound (bits) | above the bound |" if dp else ""),
                      "|---:|---:|---|---|---:|" + ("---:|---|" if dp else "")]
            for c in counts:
                m, row = rec.metrics[f"exposure@{c}"], rec.extra["per_count"][str(c)]
                each = ", ".join(f"{v:.1f}" for v in row["exposures"])
                above = "yes: the guarantee is broken" if dp and row["exceeds_dp_bound"] else "no"
                bound = f" {row['dp_bound_bits']:.1f} | {above} |" if dp else ""
                lines.append(f"| {c} | {m.n} | {_ci(m)} | {each} | {row['guessed']} |{bound}")
            if dp:
                lines += ["", "DP bound: the most expected exposure the run's (epsilon, delta) allows a canary planted "
                              "that many times (group privacy: k epsilon; `veil.defenses.lm.exposure_bound`); above "
                              "it means the mean's 95% interval lies wholly above the bound."]
            test = rec.extra.get("test")
            if test:
                lines += ["", f"{test['name']}: {test['hypothesis']}: difference of means "
                              f"{test['difference_of_means']:.1f} bits, p = {test['p_value']:.2g}."]
            lines.append("")
        lines += _exposure_plot(by["canary-exposure"], out_dir)
    if by["extraction"]:
        lines += ["## Training-data extraction and PII", ""]
        for rec in by["extraction"]:
            att = rec.config["attack"]
            lines += [f"**{_label(rec.config['run'])}**: {att['samples']:,} samples of at most {att['max_tokens']} "
                      f"word pieces (top-{att['top_k']}, temperature {att['temperature']:g}); "
                      f"{rec.extra['distinct_samples']:,} distinct. Criterion: {rec.extra['criterion']}.", "",
                      "| ranking | top samples | found in the training text |", "|---|---:|---|"]
            for name, m in rec.metrics.items():
                if name.startswith("precision@"):
                    lines.append(f"| {name.split('@')[1]} | {m.n} | {_ci(m, 100)} % |")
            ref = rec.extra.get("reference") or {}
            if ref.get("model"):
                lines += ["", f"Reference ranking: the ratio of the released model's log-perplexity to that of the "
                              f"attacker's reference model (the released model's recipe, {ref['model']}, "
                              f"{ref['steps']} steps, on {ref['public_texts']:,} public texts of the corpus, none of "
                              "them trained on or held out)."]
            elif ref.get("why"):
                lines += ["", f"No reference ranking: {ref['why']}."]
            lines += ["", "| copies of each PII value | values planted | written out in a sample |", "|---:|---:|---|"]
            for c, row in sorted(rec.extra["pii"].items(), key=lambda kv: int(kv[0])):
                m = rec.metrics.get(f"pii_recall@{c}")
                shown = _ci(m, 100) + " %" if m is not None else "–"
                lines.append(f"| {c} | {row['planted']} | {row['written']} ({shown}) |")
            by_entity = rec.extra.get("pii_by_entity")
            if by_entity:
                lines += ["", "| PII class | values planted (all counts) | written out in a sample |", "|---|---:|---|"]
                for entity, row in by_entity.items():
                    m = rec.metrics.get(f"pii_recall[{entity}]")
                    shown = _ci(m, 100) + " %" if m is not None else "–"
                    lines.append(f"| {entity} | {row['planted']} | {row['written']} ({shown}) |")
            tagged = rec.extra.get("pii_extraction")
            if tagged:
                prec, rec_ = rec.metrics.get("pii_extraction_precision"), rec.metrics.get("pii_extraction_recall")
                lines += ["", f"PII extraction (Lukas et al.): {tagged['tagged']} distinct values of "
                              f"{', '.join(tagged['classes'])} tagged in the samples, {tagged['right']} of them "
                              f"planted values (precision {_ci(prec, 100) + ' %' if prec else 'undefined'}); "
                              f"{tagged['found']} of the {tagged['planted']} planted values of these classes found "
                              f"(recall {_ci(rec_, 100) + ' %' if rec_ else 'undefined'}). {tagged['criterion']}."]
            lines += ["", f"Canaries written out whole in a sample: {rec.extra['canaries_written']}.", ""]
            found = sum(len(ts) for ts in rec.extra["extracted"].values())
            if not found:
                lines += ["No top sample was found in the training text under either ranking: this model does not "
                          "write its training text out verbatim; what it memorised shows in the other attacks on "
                          "this page, not as extractable text.", ""]
            shown = [(r, t) for r, ts in rec.extra["extracted"].items() for t in ts[:5]]
            if shown:
                lines += ["Examples of top samples found in the training text (a canary's secret is withheld):", ""]
                lines += [f"- ({r}) `{t}`" for r, t in shown] + [""]
    lines += _pii_section(by["pii-inference"], by["pii-reconstruction"])
    lines += _membership_section(by["membership"])
    commits = sorted({r.git_commit for r in recs})
    lines += [f"Commits: {', '.join(commits)}."]
    commands, other = _commands(by["utility"], f"results/{method}")
    if other:
        lines += ["", f"Made through the Python API (`veil.experiments.generation.LMRun` with other sizes than the "
                      f"CLI's), so no command below reruns them: {'; '.join(other)}."]
    lines += regenerate_section(commands, method)
    return "\n".join(lines)


def _pii_section(inference: list[ResultRecord], reconstruction: list[ResultRecord]) -> list[str]:
    """PII inference and reconstruction per run: the share guessed right per insertion count, chance, the tests."""
    if not inference and not reconstruction:
        return []
    lines = ["## PII inference and reconstruction", "",
             "Lukas et al.'s attacks, given a training sentence with one planted PII value masked: inference fills "
             "it with each of a list of candidates (the true value among values of its class and variant, none of "
             "them planted) and guesses the likeliest filled sentence; reconstruction ranks cuts of what the model "
             "writes after the text before the mask. Right: the guess equals the value, lowercased with spaces "
             "removed.", ""]
    runs = {json.dumps(r.config["run"], sort_keys=True): r.config["run"] for r in inference + reconstruction}
    for run in runs.values():
        inf, rec = _of_run(inference, run), _of_run(reconstruction, run)
        counts = sorted({int(c) for r in (inf, rec) if r is not None for c in r.extra["per_count"]})
        lines += [f"**{_label(run)}**", "",
                  "| copies | values | inference: right | chance | p (binomial, > chance) | reconstruction: right | "
                  "true value among its candidates |", "|---:|---:|---|---:|---:|---|---:|"]
        for c in counts:
            a = inf.extra["per_count"].get(str(c)) if inf else None
            b = rec.extra["per_count"].get(str(c)) if rec else None
            n = (a or b)["n"]
            p = inf.extra["tests"].get(str(c), {}).get("p_value") if inf else None
            chance = f"{a['chance']:.0%}" if a else "–"
            shown_p = f"{p:.2g}" if p is not None else "–"
            among = b["among_candidates"] if b else "–"
            lines.append(f"| {c} | {n} | {_share(a)} | {chance} | {shown_p} | {_share(b)} | {among} |")
        lines.append("")
        for name, r in (("inference", inf), ("reconstruction", rec)):
            test = r.extra["tests"].get("duplication") if r else None
            if test:
                lines.append(f"- {name}: {test['name']}, {test['hypothesis']}: p = {test['p_value']:.2g}.")
            if r:
                each = ", ".join(f"{e} {v['right']}/{v['n']}" for e, v in r.extra["per_entity"].items())
                lines.append(f"- {name}, right per class: {each}.")
            if r and r.extra.get("budget"):
                curve = "; ".join(f"{p['samples']}: {p['right']} right, true value offered {p['among_candidates']}"
                                  for p in r.extra["budget"])
                lines.append(f"- {name} replayed at smaller sample budgets (of {r.extra['budget'][0]['n']} values; "
                             f"samples: right, true value among the candidates): {curve}.")
                if len(r.extra["budget"]) > 1:
                    lines.append(f"- {name}: {_budget_verdict(r.extra['budget'])}")
        lines.append("")
    return lines


def _share(row: dict | None) -> str:
    if row is None:
        return "–"
    return f"{row['right']} ({100 * row['share']:.1f} [{100 * row['ci_low']:.1f}, {100 * row['ci_high']:.1f}] %)"


def _side_by_side(by: dict[str, list[ResultRecord]]) -> list[str]:
    """The defenses of runs of the same size in one table: utility and each attack at the largest insertion count
    beside the smallest (groups of a single run are left to the sections below)."""
    def key(run: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in run.items() if k not in ("defense", "settings", "lr")}, sort_keys=True)

    def find(part: str, run: dict[str, Any]) -> ResultRecord | None:
        return _of_run(by[part], run)

    groups: dict[str, list[dict[str, Any]]] = {}
    for rec in by["utility"]:
        groups.setdefault(key(rec.config["run"]), []).append(rec.config["run"])
    lines: list[str] = []
    for runs in groups.values():
        if len(runs) < 2:
            continue
        low, high = min(runs[0]["counts"]), max(runs[0]["counts"])
        if not lines:
            lines += ["## Defenses side by side", "",
                      "Runs of the same corpus, sizes, steps and seed, one row per defense: utility, then each "
                      f"attack on what was planted {low} and {high} times (intervals as in the sections below; "
                      "PII: share of values guessed right).", ""]
        first = runs[0]
        lines += [f"**{first['corpus']}, {first['steps']} steps, {first['n_train'] or 'all'} plain training texts, "
                  f"seed {first['seed']}**", "",
                  f"| defense | guarantee | held-out perplexity | exposure ×{low} (bits) | exposure ×{high} (bits) | "
                  f"PII inference ×{low} | PII inference ×{high} | PII reconstruction ×{high} | "
                  f"top-{first['top']} verbatim (perplexity) | membership AUC (loss) | membership AUC (reference) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for run in sorted(runs, key=lambda r: (r["defense"] != "lm-plain", r["defense"])):
            util, exp = find("utility", run), find("canary-exposure", run)
            inf, rec, ext = find("pii-inference", run), find("pii-reconstruction", run), find("extraction", run)
            mem = find("membership", run)
            said = _guarantee(util)

            def metric(r: ResultRecord | None, name: str, scale: float = 1.0, unit: str = "", digits: int = 1) -> str:
                m = r.metrics.get(name) if r is not None else None
                return "–" if m is None else _ci(m, scale, digits) + unit

            lines.append(f"| {_label(run)} | {said} | {_ci(util.metrics['heldout_perplexity'])} | "
                         f"{metric(exp, f'exposure@{low}')} | {metric(exp, f'exposure@{high}')} | "
                         f"{metric(inf, f'pii_inference@{low}', 100, ' %')} | "
                         f"{metric(inf, f'pii_inference@{high}', 100, ' %')} | "
                         f"{metric(rec, f'pii_reconstruction@{high}', 100, ' %')} | "
                         f"{metric(ext, 'precision@perplexity', 100, ' %')} | {metric(mem, 'loss_auc', digits=2)} | "
                         f"{metric(mem, 'reference_auc', digits=2)} |")
        lines.append("")
        lines += _against_plain(runs, find, high)
    return lines


def _against_plain(runs: list[dict[str, Any]], find: Callable[[str, dict[str, Any]], Any], high: int) -> list[str]:
    """Each defense's PII inference at the largest count against plain fine-tuning's, by a one-sided Fisher exact
    test (the defense guesses fewer values right), when the group holds an lm-plain run."""
    from scipy.stats import fisher_exact

    plain = next((r for r in runs if r["defense"] == "lm-plain"), None)
    base = find("pii-inference", plain) if plain is not None else None
    if base is None or str(high) not in base.extra["per_count"]:
        return []
    b = base.extra["per_count"][str(high)]
    out = []
    for run in sorted(runs, key=lambda r: r["defense"]):
        rec = find("pii-inference", run)
        if run is plain or rec is None or str(high) not in rec.extra["per_count"]:
            continue
        a = rec.extra["per_count"][str(high)]
        p = fisher_exact([[a["right"], a["n"] - a["right"]], [b["right"], b["n"] - b["right"]]], alternative="less")[1]
        out.append(f"- {_label(run)}: {a['right']} of {a['n']} values planted {high} times inferred, against "
                   f"{b['right']} of {b['n']} under plain fine-tuning; one-sided Fisher exact test that the defense "
                   f"lets fewer be inferred: p = {p:.2g}.")
    if not out:
        return []
    return ["PII inference against plain fine-tuning (the same run otherwise):", "", *out, ""]


def _membership_section(records: list[ResultRecord]) -> list[str]:
    """Membership inference per run: AUC and TPR at low FPR of both scores, with the one-sided test."""
    if not records:
        return []
    lines = ["## Membership inference", "",
             "Was a text in the training set? Candidates: the held-out texts (non-members) and as many plain training "
             "texts drawn at random (members; the planted texts left out, so both come from one randomly split pool "
             "and the test is exact). Score: minus the log-perplexity (loss), minus the zlib ratio, or minus the "
             "log-perplexity's excess over the attacker's reference model (reference: the released model's recipe, "
             "trained on public texts of the corpus; a run that trains on every sentence leaves none, and has no "
             "reference row). AUC 0.5 is chance; intervals are stratified bootstrap over candidates.", "",
             "| run | score | members | AUC | TPR at 1% FPR | TPR at 0.1% FPR | p (Mann-Whitney, one-sided) |",
             "|---|---|---:|---|---|---|---:|"]
    for rec in records:
        for short in ("loss", "zlib", "reference"):
            if f"{short}_auc" not in rec.metrics:
                continue
            m = rec.metrics
            lines.append(f"| {_label(rec.config['run'])} | {short} | {rec.extra['members']:,} | "
                         f"{_ci(m[f'{short}_auc'], digits=3)} | {_ci(m[f'{short}_tpr@1%fpr'], 100)} % | "
                         f"{_ci(m[f'{short}_tpr@0.1%fpr'], 100)} % | {rec.extra['tests'][short]['p_value']:.2g} |")
    return lines + [""]


def _of_run(records: list[ResultRecord], run: dict[str, Any]) -> ResultRecord | None:
    """The record of ``run`` among ``records`` (one attack's), if there is one."""
    return next((r for r in records if r.config["run"] == run), None)


def _guarantee(utility: ResultRecord) -> Any:
    """The guarantee a run's utility record states: ``none`` for every data defense, the accounted (epsilon,
    delta) per training text for DP-SGD."""
    guarantee = utility.extra.get("guarantee")
    if isinstance(guarantee, dict) and guarantee.get("epsilon") is not None:
        return f"({guarantee['epsilon']:.2f}, {guarantee['delta']:.1e})-DP per text"
    return guarantee.get("kind", guarantee) if isinstance(guarantee, dict) else guarantee


def _budget_verdict(budget: list[dict[str, Any]]) -> str:
    """What reconstruction's budget curve says over its last doubling of samples: still rising (not a verdict),
    flat at zero, or flat; and whether the ranking failed the true values the sampling did offer."""
    half, full = budget[-2], budget[-1]
    if full["among_candidates"] > half["among_candidates"] or full["right"] > half["right"]:
        said = (f"the curve has not flattened (doubling the samples from {half['samples']} to {full['samples']} "
                f"still found more): this budget is not a verdict, and more samples would offer more true values.")
    elif full["among_candidates"] == 0:
        said = (f"no budget up to {full['samples']} samples offered a single true value: the curve is flat at zero, "
                f"which does not show what a much larger budget would find.")
    else:
        said = f"the curve is flat over the last doubling of samples ({half['samples']} to {full['samples']})."
    if full["among_candidates"] > full["right"]:
        said += (f" Where the true value was among the candidates ({full['among_candidates']} of {full['n']}), the "
                 f"ranking put it first {full['right']} times: the ranking, not only the sampling, is where this "
                 f"attack fails.")
    return said
