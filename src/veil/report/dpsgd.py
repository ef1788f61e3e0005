"""``docs/results/dpsgd.md``, ``docs/results/membership.md`` and ``docs/results/dpsgd-audit.md``: DP-SGD's accuracy
at each target epsilon beside the non-private run of the same slice, the membership attacks against each trained
model, and the one-run audits of DP-SGD and its negative controls (from records only)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from veil.report.markdown import beats_majority, regenerate_section, register_renderer
from veil.results import ResultRecord

__all__ = ["dpsgd_page", "membership_page", "audit_page"]

#: the level of the binomial test of each membership target against the majority class
ALPHA = 0.05


def _folder(records: list[tuple[Path, ResultRecord]]) -> str:
    return f"results/{records[0][0].parent.name}" if records else "results"


def _ci(m) -> str:
    if m.ci_low is None:
        return f"{100 * m.mean:.1f}"
    return f"{100 * m.mean:.1f} [{100 * m.ci_low:.1f}, {100 * m.ci_high:.1f}]"


def _eps(value) -> str:
    return "none" if value is None else f"{float(value):g}"


#: the recipe of a record whose config names none (made before --optimizer existed): Adam at 1e-3
DEFAULT_RECIPE = ("adam", 1e-3)


def recipe(config: dict) -> tuple[str, float]:
    """(optimizer, learning rate) a DP-SGD or membership record was trained with."""
    return config.get("optimizer", DEFAULT_RECIPE[0]), float(config.get("lr", DEFAULT_RECIPE[1]))


def recipe_text(config: dict) -> str:
    """``"sgd, lr 0.1"``."""
    optimizer, lr = recipe(config)
    return f"{optimizer}, lr {lr:g}"


@register_renderer("dpsgd")
def dpsgd_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = [r for _, r in records]
    lines = ["# Results: DP-SGD (a head on frozen MiniLM; MiniLM's top layers)", "",
             "Test accuracy of a classifier trained with DP-SGD at each target epsilon (delta = 1/(10 n), Poisson "
             "lots and Gaussian noise from the OS CSPRNG), beside the non-private run of the same slice, recipe, "
             "epochs and initial weights (`none`). Setting `head`: an MLP head on frozen MiniLM embeddings; "
             "`top-layers`: MiniLM's last two layers trained with the head. Recipe: the optimizer on the noisy "
             "gradient and its learning rate. Accuracy: percent, Wilson 95% over the test examples per seed; the "
             "mean over seeds is the plain mean. Epsilon: what the accountants report for the run (PRV, the "
             "guarantee; RDP beside it). See docs/dpsgd.md for what the guarantee covers.", "",
             "| corpus | setting | recipe | epsilon (target) | seeds | accuracy per seed | mean accuracy | one class "
             "| epsilon PRV | epsilon RDP | delta | sigma | steps |",
             "|---|---|---|---|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    groups: dict[tuple, list[ResultRecord]] = defaultdict(list)
    for r in recs:
        c = r.config
        groups[(c["corpus"], c["setting"], *recipe(c), c["epochs"], c["batch_size"], c.get("max_train"),
                c.get("epsilon"))].append(r)
    for key in sorted(groups, key=lambda k: (k[:6], k[6] or 0, k[7] is not None, k[7] or 0, str(k))):
        rs = sorted(groups[key], key=lambda r: r.config["seed"])
        m0 = rs[0].metrics
        acc = ", ".join(_ci(r.metrics["accuracy"]) for r in rs)
        mean = 100 * float(np.mean([r.metrics["accuracy"].mean for r in rs]))
        dp = "epsilon_prv" in m0
        flags = [r.extra.get("one_class") for r in rs]
        one = "–" if any(f is None for f in flags) else f"{sum(bool(f) for f in flags)}/{len(flags)}"
        lines.append(f"| {key[0]} | {key[1]} | {key[2]}, lr {key[3]:g} | {_eps(key[7])} | {len(rs)} | {acc} | "
                     f"{mean:.1f} | {one} | "
                     + (f"{m0['epsilon_prv'].mean:.3f} | {m0['epsilon_rdp'].mean:.3f} | {m0['delta'].mean:.3g} | "
                        f"{m0['sigma'].mean:.3f} | {int(m0['steps'].mean)} |" if dp else
                        f"– | – | – | – | {int(m0['steps'].mean)} |"))
    lines.append("")
    majority = sorted({(r.config["corpus"], round(100 * r.metrics["majority_rate"].mean, 1)) for r in recs
                       if "majority_rate" in r.metrics})
    if majority:
        lines += ["The test split's most common class: " + "; ".join(f"{c} {m:.1f}%" for c, m in majority)
                  + ": a model that predicts one class for everything scores exactly that. 'One class' counts the "
                  "seeds whose model did (every test prediction the same class; '–': a record made before veil "
                  "kept it).", ""]
    from veil.report.dpsgd_choice import choice_section

    lines += choice_section(records[0][0].parent.parent) if records else []
    commits = sorted({r.git_commit for r in recs})
    lines.append(f"Commits: {', '.join(commits)}.")
    runs: dict[tuple, list[ResultRecord]] = defaultdict(list)
    for key, rs in groups.items():
        runs[key[:7]].extend(rs)
    cmds = []
    for (corpus, setting, optimizer, lr, epochs, batch, limit), rs in sorted(runs.items(), key=lambda kv: str(kv[0])):
        eps = sorted({float(r.config["epsilon"]) for r in rs if r.config.get("epsilon") is not None})
        seeds = sorted({int(r.config["seed"]) for r in rs})
        cmds.append(f"veil dpsgd train --corpus {corpus} --setting {setting} --epsilon "
                    f"{','.join(f'{e:g}' for e in eps)} --epochs {epochs} --batch-size {batch}"
                    + (f" --optimizer {optimizer}" if optimizer != DEFAULT_RECIPE[0] else "")
                    + (f" --lr {lr:g}" if lr != DEFAULT_RECIPE[1] else "")
                    + (f" --max-train {limit}" if limit else "") + f" --seeds {','.join(map(str, seeds))} --results "
                    f"{_folder(records)}")
    lines += regenerate_section(cmds, "dpsgd")
    return "\n".join(lines)


def _roc_plots(recs: list[ResultRecord], out_dir: Path) -> list[str]:
    """One log-log ROC plot per corpus: every attack against every target (the chance line is TPR = FPR)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil._io import atomic_write

    out = []
    for corpus in sorted({r.config["corpus"] for r in recs}):
        rs = [r for r in recs if r.config["corpus"] == corpus and r.extra.get("roc")]
        if not rs:
            continue
        targets = sorted({_target_key(r) for r in rs}, key=_target_order)
        cols = min(len(targets), 4)
        rows = -(-len(targets) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
        for ax, (model, epochs, defense, eps) in zip(axes.flat, targets):
            for r in sorted((r for r in rs if _target_key(r) == (model, epochs, defense, eps)),
                            key=lambda r: (r.config["method"], r.config.get("queries", 1))):
                fpr, tpr = np.asarray(r.extra["roc"]["fpr"]), np.asarray(r.extra["roc"]["tpr"])
                keep = fpr > 0
                queries = r.config.get("queries", 1)
                ax.plot(fpr[keep], np.maximum(tpr[keep], 1e-4), color=_COLORS.get(r.config["method"], "C4"),
                        ls="-" if queries == 1 else "--", label=f"{r.config['method']}"
                        + (f" x{queries}" if queries != 1 else "") + f" (AUC {100 * r.metrics['auc'].mean:.1f})")
            ax.plot([1e-4, 1], [1e-4, 1], "k:", lw=0.8)
            ax.set(xscale="log", yscale="log", xlim=(1e-4, 1), ylim=(1e-4, 1), xlabel="FPR",
                   title=(defense if eps is None else f"{defense} eps {_eps(eps)}") + f", {epochs} ep."
                   + ("" if model == "head" else " (top layers" + (", " + model.partition("; ")[2] if "; " in model
                                                                    else "") + ")"))
            ax.legend(fontsize=6, loc="lower right")
        for ax in axes.flat[len(targets):]:
            ax.set_visible(False)
        for row in axes:
            row[0].set_ylabel("TPR")
        fig.tight_layout()
        name = f"membership_{corpus}_roc.png"
        with atomic_write(out_dir / name, "wb") as fh:
            fig.savefig(fh, format="png", dpi=110)
        plt.close(fig)
        out += [f"![membership ROC on {corpus}, log-log]({name})", "",
                "Log-log ROC per target (its training epochs in the title; one colour per attack; dashed, 'x R': R "
                "queries per input, logits averaged): the low-FPR end is where an attack is dangerous (a guess that "
                "is rarely wrong); the dotted line is chance.", ""]
    return out


#: one colour per attack on every panel (dashed: the same attack with repeated queries)
_COLORS = {"lira": "C0", "lira-offline": "C1", "loss": "C2", "rmia": "C3"}


def _target_key(r: ResultRecord) -> tuple:
    """What was trained: (model, epochs, defense, epsilon); the model names its recipe where it is not the default
    (Adam at 1e-3), e.g. ``top-layers; sgd, lr 0.1``."""
    c = r.config
    return _model_label(c), int(c["epochs"]), c["defense"], c.get("epsilon")


def _model_label(c: dict) -> str:
    return c.get("model", "head") + ("" if recipe(c) == DEFAULT_RECIPE else f"; {recipe_text(c)}")


def _target_text(defense: str, model: str) -> str:
    """The target column: the defense, and what was trained where it is not the head (with a recipe not Adam's)."""
    if model == "head":
        return defense
    recipe = model.partition("; ")[2]
    return defense + f" (MiniLM's top layers{'; ' + recipe if recipe else ''})" if model.startswith("top-layers") \
        else f"{defense} ({model})"


def _target_order(key: tuple) -> tuple:
    """The order of targets on the membership page, its tables and its ROC panels: the head first, then by epochs,
    defense (``DEFENSES``' order), epsilon and, last, the model label (recipe included), so that two distinct targets
    never tie and the order never falls back on how the records or a set were listed."""
    model, epochs, defense, eps = key
    from veil.experiments.membership import DEFENSES

    return model != "head", epochs, DEFENSES.index(defense), eps is not None, eps or 0, model


def _attack_name(r: ResultRecord) -> str:
    queries = r.config.get("queries", 1)
    return r.config["method"] + (f" ({queries} queries)" if queries != 1 else "")


def _strongest(recs: list[ResultRecord]) -> list[str]:
    """Per target, the attack with the highest AUC and the one with the highest TPR at 1% FPR; for DP-SGD, whether
    every AUC interval holds 50 and the largest AUC its (epsilon, delta) allows."""
    from veil.attacks.membership.scoring import dp_auc_bound

    groups: dict[tuple, list[ResultRecord]] = defaultdict(list)
    for r in recs:
        groups[(r.config["corpus"], *_target_key(r))].append(r)
    lines = ["## The strongest attack per target", "",
             "Per target, the attack with the highest AUC and the one with the highest TPR at 1% FPR (the rows "
             "above, the same intervals). A target trained twice (once per number of queries) shows both "
             "accuracies.", "",
             "| corpus | target | epsilon | epochs | target test accuracy | learnt | highest AUC | highest TPR at 1% "
             "FPR |", "|---|---|---|---:|---|---|---|---|"]
    dp = []
    for key in sorted(groups, key=lambda k: (k[0], _target_order(k[1:]))):
        corpus, model, epochs, defense, eps = key
        rs = groups[key]
        accs = " / ".join(dict.fromkeys(f"{100 * r.metrics['test_accuracy'].mean:.1f}" for r in rs))
        learnt = " / ".join(dict.fromkeys(_learnt(r) for r in rs))
        top_auc = max(rs, key=lambda r: r.metrics["auc"].mean)
        top_tpr = max(rs, key=lambda r: r.metrics["tpr@1%fpr"].mean)
        target = _target_text(defense, model)
        lines.append(f"| {corpus} | {target} | {_eps(eps)} | {epochs} | {accs} | {learnt} | "
                     f"{_ci(top_auc.metrics['auc'])} ({_attack_name(top_auc)}) | "
                     f"{_ci(top_tpr.metrics['tpr@1%fpr'])} ({_attack_name(top_tpr)}) |")
        if eps is not None:
            above = [r for r in rs if r.metrics["auc"].ci_low is not None and r.metrics["auc"].ci_low > 0.5]
            delta = rs[0].metrics["delta"].mean if "delta" in rs[0].metrics else 0.0
            bound = dp_auc_bound(float(eps), delta)
            what = (f"every attack's AUC interval holds 50 ({len(rs)} attacks)" if not above else
                    f"{len(above)} of {len(rs)} attacks' AUC intervals lie above 50 ("
                    + ", ".join(f"{_attack_name(r)} {_ci(r.metrics['auc'])}" for r in above)
                    + "): the guarantee allows that (each interval is at 95% on its own, not over the attacks "
                    "together)")
            over = [r for r in rs if r.metrics["auc"].ci_low is not None and r.metrics["auc"].ci_low > bound]
            dp.append(f"- {corpus}, DP-SGD at epsilon {_eps(eps)} ({epochs} epochs"
                      + ("" if model == "head" else ", top layers") + f"): {what}. The largest AUC "
                      f"({_eps(eps)}, {delta:.2g})-DP allows is {100 * bound:.2f}"
                      + (f"; {len(over)} attacks' intervals lie above it: the guarantee does not hold as stated"
                         if over else "; no interval lies above it") + ".")
    lines.append("")
    if dp:
        lines += ["DP-SGD against its guarantee (an attack's TPR is at most e^epsilon FPR + delta, so its AUC is at "
                  "most the bound below; `veil.attacks.membership.scoring.dp_auc_bound`):", "", *dp, ""]
    return lines


def _learnt(r: ResultRecord) -> str:
    """Whether the target beats the test split's most common class: the exact one-sided binomial p-value."""
    verdict = beats_majority(r, ALPHA)
    if verdict is None:
        return "–"
    return f"{'yes' if verdict.reject else 'no'} (p {verdict.p_value:.2g})"


def _record_order(r: ResultRecord) -> tuple:
    """A membership record's place on the page: corpus, target, attack, queries, then what tells two runs of one
    attack on one target apart (seed, members, shadows), so the page does not depend on the order records come in."""
    c = r.config
    return (c["corpus"], _target_order(_target_key(r)), c["method"], c.get("queries", 1), c["seed"], c["members"],
            c.get("shadows") or 0, r.created)


@register_renderer("membership")
def membership_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = sorted((r for _, r in records), key=_record_order)
    lines = ["# Results: membership inference on released models", "",
             "Each target is an MLP head on frozen MiniLM trained on the game's members (half of the candidates, "
             "drawn with the seed); the attacker queries its outputs on every candidate and scores membership "
             "(docs/dpsgd.md). AUC and TPR at 1% and 0.1% FPR: percent, bootstrap 95% over the candidates; "
             "chance is AUC 50 and TPR equal to the FPR. A DP-SGD model at epsilon bounds every attack's TPR by "
             "e^epsilon FPR + delta; an AUC above 50 at epsilon 8 does not contradict it.", "",
             "A target that learnt nothing says nothing about what a useful model leaks: 'majority' is the test "
             "split's most common class (what predicting one class for everything scores), and 'learnt' is the "
             f"exact one-sided binomial test of the target's test accuracy against it (at {ALPHA:g}; '–': a record "
             "made before veil kept the majority rate). Compare targets at the same epochs.", "",
             "| corpus | target | epsilon | epochs | target test accuracy | majority | learnt | attack | shadows | AUC "
             "| TPR at 1% FPR | TPR at 0.1% FPR |", "|---|---|---|---:|---:|---:|---|---|---:|---|---|---|"]
    for r in recs:
        c, m = r.config, r.metrics
        target = _target_text(c["defense"], _model_label(c))
        majority = f"{100 * m['majority_rate'].mean:.1f}" if "majority_rate" in m else "–"
        lines.append(f"| {c['corpus']} | {target} | {_eps(c.get('epsilon'))} | {c['epochs']} | "
                     f"{100 * m['test_accuracy'].mean:.1f} | {majority} | {_learnt(r)} | {c['method']}"
                     + (f" ({c['queries']} queries)" if c.get("queries", 1) != 1 else "")
                     + f" | {c.get('shadows') or '–'} | "
                     f"{_ci(m['auc'])} | {_ci(m['tpr@1%fpr'])} | {_ci(m['tpr@0.1%fpr'])} |")
    lines.append("")
    lines += _strongest(recs)
    lines += _roc_plots(recs, out_dir)
    commits = sorted({r.git_commit for r in recs})
    lines.append(f"Commits: {', '.join(commits)}.")
    from veil.experiments.membership import DEFENSES

    cmds = []
    by = defaultdict(list)
    for r in recs:
        c = r.config
        by[(c["corpus"], c["members"], c["epochs"], c.get("shadows") or 16, c["seed"], c.get("queries", 1),
            c.get("model", "head"), *recipe(c))].append(r)
    for (corpus, members, epochs, shadows, seed, queries, model, optimizer, lr), rs in sorted(by.items()):
        # one command per set of methods: it writes exactly the targets (defense, epsilon) attacked by that set
        methods_of: dict[tuple, set] = defaultdict(set)
        for r in rs:
            methods_of[(r.config["defense"], r.config.get("epsilon"))].add(r.config["method"])
        by_methods: dict[frozenset, list[tuple]] = defaultdict(list)
        for target, chosen in methods_of.items():
            by_methods[frozenset(chosen)].append(target)
        for chosen, targets in sorted(by_methods.items(), key=lambda kv: (-len(kv[0]), sorted(kv[0]))):
            eps = sorted({float(e) for _, e in targets if e is not None})
            defenses = sorted({d for d, _ in targets}, key=DEFENSES.index)
            which = "all" if set(defenses) == set(DEFENSES) else ",".join(defenses)
            method = "all" if len(chosen) == 4 else ",".join(sorted(chosen))
            cmds.append(f"veil attack membership --corpus {corpus}"
                        + (f" --setting {model}" if model != "head" else "") + f" --defense {which} --method {method}"
                        + (f" --epsilon {','.join(f'{e:g}' for e in eps)}" if eps else "")
                        + f" --shadows {shadows} --members {members} --epochs {epochs} --seed {seed}"
                        + (f" --queries {queries}" if queries != 1 else "")
                        + (f" --optimizer {optimizer}" if optimizer != DEFAULT_RECIPE[0] else "")
                        + (f" --lr {lr:g}" if lr != DEFAULT_RECIPE[1] else "") + f" --results {_folder(records)}")
    lines += regenerate_section(cmds, "membership")
    return "\n".join(lines)


def _audit_plot(recs: list[ResultRecord], out_dir: Path) -> list[str]:
    """Lower bounds against the claimed epsilon, one panel per setting: DP-SGD's must stay under the diagonal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil._io import atomic_write

    settings = sorted({r.config["setting"] for r in recs})
    fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.6), squeeze=False)
    style = {"dpsgd": ("o", "C0"), "dpsgd-broken-half-noise": ("s", "C3"), "dpsgd-broken-no-clip": ("^", "C1")}
    top = max(max(r.metrics["epsilon_claimed"].mean, r.metrics["epsilon_lower_white"].mean) for r in recs) * 1.1
    for ax, setting in zip(axes[0], settings):
        for defense, (marker, color) in style.items():
            rs = [r for r in recs if r.config["setting"] == setting and r.config["defense"] == defense]
            if not rs:
                continue
            x = np.array([r.metrics["epsilon_claimed"].mean for r in rs])
            ax.scatter(x, [r.metrics["epsilon_lower_white"].mean for r in rs], marker=marker, color=color,
                       label=f"{defense}, white-box")
            ax.scatter(x, [r.metrics["epsilon_lower_black"].mean for r in rs], marker=marker, facecolors="none",
                       edgecolors=color, label=f"{defense}, black-box")
        ax.plot([0, top], [0, top], "k:", lw=0.8)
        ax.set(xlim=(0, top), ylim=(0, top), xlabel="claimed epsilon (accountant)", title=setting)
        ax.legend(fontsize=6, loc="lower right")
    axes[0][0].set_ylabel("one-run lower bound (95%)")
    fig.tight_layout()
    name = "dpsgd_audit_bounds.png"
    with atomic_write(out_dir / name, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)
    return [f"![one-run lower bounds against the claimed epsilon]({name})", "",
            "A point above the dotted diagonal rejects the claim. Filled: white-box (every step's noisy gradients); "
            "hollow: black-box (the released model's outputs).", ""]


@register_renderer("dpsgd-audit")
def audit_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = sorted((r for _, r in records), key=lambda r: (r.config["corpus"], r.config["setting"],
                                                          r.config["defense"] != "dpsgd",
                                                          r.config["defense"], r.config["epsilon"],
                                                          r.config["seed"]))
    lines = ["# Results: one-run audits of DP-SGD", "",
             "Each audit trains one head on the real examples plus m Dirac canaries, each included with probability "
             "1/2, and turns the auditor's guesses into a lower bound on epsilon at 95% confidence (Steinke, Nasr "
             "and Jagielski 2023; Bonferroni over the fixed guess counts). White-box: every step's noisy gradients; "
             "black-box: the released model's outputs; a perfect auditor: what a perfect white-box auditor would "
             "certify from the claimed mechanism at the same size (a simulation: the ceiling of one run here). The "
             "transcript checks test what the accountant assumes: the "
             "noise in the columns of excluded canaries (variance / accounted, two-sided chi-square) and the "
             "signal of included ones against what clipping allows (one-sided z), each at level 1e-6. An audit "
             "passes when neither bound exceeds the claimed epsilon and both checks pass; a negative control must "
             "fail. docs/dpsgd.md explains the settings and why a one-run bound stays far below the claim.", "",
             "| corpus | setting | defense | claimed epsilon | seed | canaries | white-box bound (guesses, right) | "
             "black-box bound | perfect auditor | noise variance ratio (p) | sensitivity z (p) | verdict |",
             "|---|---|---|---:|---:|---:|---|---:|---:|---|---|---|"]
    for r in recs:
        c, m, x = r.config, r.metrics, r.extra
        white = x["white"]
        control = c["defense"] != "dpsgd"
        passed = m["passed"].mean == 1.0
        verdict = ("PASS" if passed else "FAIL") + ("" if not control else
                                                   (" (caught)" if not passed else " (NOT caught)"))
        lines.append(f"| {c['corpus']} | {c['setting']} | {c['defense']} | {m['epsilon_claimed'].mean:.3f} | "
                     f"{c['seed']} | "
                     f"{c['canaries']} | {m['epsilon_lower_white'].mean:.3f} ({white['r']}, {white['correct']}) | "
                     f"{m['epsilon_lower_black'].mean:.3f} | {m['epsilon_lower_ideal'].mean:.3f} | "
                     f"{m['noise_variance_ratio'].mean:.4f} "
                     f"({m['noise_p_value'].mean:.2g}) | {m['sensitivity_z'].mean:.2f} "
                     f"({m['sensitivity_p_value'].mean:.2g}) | {verdict} |")
    lines.append("")
    lines += _audit_plot(recs, out_dir)
    commits = sorted({r.git_commit for r in recs})
    lines.append(f"Commits: {', '.join(commits)}.")
    by: dict[tuple, list[ResultRecord]] = defaultdict(list)
    for r in recs:
        c = r.config
        by[(c["corpus"], c["defense"], c["canaries"], c["max_train"], c["clip"])].append(r)
    controls = {"dpsgd-broken-half-noise": "half-noise", "dpsgd-broken-no-clip": "no-clip"}
    cmds = []
    for (corpus, defense, m, n, clip), rs in sorted(by.items(), key=lambda kv: (kv[0][1] != "dpsgd", kv[0])):
        eps = sorted({float(r.config["epsilon"]) for r in rs})
        sets = sorted({r.config["setting"] for r in rs}, reverse=True)
        seeds = sorted({int(r.config["seed"]) for r in rs})
        cmds.append(f"veil audit dpsgd --corpus {corpus} --epsilons {','.join(f'{e:g}' for e in eps)} --settings "
                    f"{','.join(sets)} --canaries {m} --max-train {n} --clip {clip:g} --seeds "
                    f"{','.join(map(str, seeds))}" + (f" --control {controls[defense]}" if defense in controls else "")
                    + f" --results {_folder(records)}")
    lines += regenerate_section(cmds, "dpsgd-audit")
    return "\n".join(lines)
