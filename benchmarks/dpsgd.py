"""DP-SGD step time against the non-private step, and LiRA's shadow-model throughput (head on frozen MiniLM).

On real data: the frozen MiniLM embeddings of rt-polarity's train split (all-MiniLM-L6-v2, mean pooling,
L2-normalised, torch backend, from veil's embedding cache, loaded as ``veil dpsgd train`` loads them; the first
run on a machine encodes the corpus once, not timed), ``--max-train`` an evenly spaced subset of it. In one process:

* step time: the loop :meth:`DPSGD.train <veil.defenses.dpsgd.DPSGD.train>` runs once sigma is calibrated
  (``_fit``: Opacus' ghost clipping, Gaussian noise from ``os.urandom``) against the loop of
  :class:`~veil.defenses.dpsgd.PlainTraining` (the same loop without clipping and noise): the same head (Scale +
  MLPHead 384-128-classes, no dropout, the same initial weights), Poisson lots of expected size ``--batch-size``,
  Adam lr 1e-3, the same number of steps (``--epochs`` epochs), lots and noise from the OS CSPRNG as in real runs.
  Each loop is warmed up on a few steps, then timed ``--reps`` times; the order of the four measurements rotates
  every run and the step times are medians. Beside them, measured alone at the same sizes: the Poisson lot (``n``
  53-bit uniforms from ``os.urandom``, both loops draw one per step) and DP-SGD's Gaussian noise for every
  parameter (Box-Muller on ``os.urandom`` uniforms, four draws per coordinate); ghost clipping and Opacus'
  bookkeeping are the rest (DP step - plain step - noise: a difference of medians, noisy on a busy machine). Sigma's
  calibration (PRV, once per ``DPSGD.train``, not part of the steps) is timed once. Checked in the same run: the
  accountant's history after every timed DP-SGD loop is exactly the (sigma, q, steps) accounted.
* LiRA throughput: the membership experiments' game and recipe (:func:`~veil.attacks.membership.membership_game`
  with ``--members`` members, as many non-members and the rest as the attacker's population; the target trained
  with :data:`~veil.defenses.dpsgd.BENCH_RECIPE`, 10 epochs, batch 256; ``veil membership``'s defaults) for each
  target in ``--lira-targets`` (plain; DP-SGD at ``--epsilon``): online :class:`~veil.attacks.membership.LiRA`
  with ``--shadows`` shadow models (each trained with the target's public recipe on ``--members`` examples, its lots
  and noise from the attacker's seed; a DP-SGD shadow calibrates its own sigma) attacks one released target,
  ``--lira-reps`` times, each run after one more target training (timed: ``TrainedModel.seconds``, calibration
  included). Reported: shadow models per second (shadows / the attack's median wall time, which also holds the
  target's and the shadows' logits on the candidates and the scoring), the time of one shadow against one target's
  training, and whether every run gave the same scores (the attacker's seed fixes them).

With ``--setting top-layers`` the step times are of the issue's second setting instead: MiniLM's last two layers
trained with the head (:func:`veil.models.top_layers.build_top_layers`, the model of ``veil dpsgd train --setting
top-layers``; its inputs are the hidden states entering those layers, computed once and not timed), on an evenly
spaced ``--max-train`` texts (default 512) of the same split; LiRA is not run there (each shadow costs a target's
training: ``veil attack membership --setting top-layers`` uses RMIA's two reference models instead).

One thread by default (``--threads``: torch's and the BLAS/OpenMP pools', threadpoolctl).

Usage::

    veil corpora pull rt-polarity            # once
    python benchmarks/dpsgd.py [--setting head|top-layers] [--epochs 2] [--reps 5] [--batch-size 256] [--epsilon 8]
        [--max-train N] [--members 2000] [--shadows 8] [--lira-reps 3] [--lira-targets plain,dpsgd] [--seed 0]
        [--threads 1] [--note TEXT] [--out result.json] [--results-file benchmarks/RESULTS.md] [--no-append]

Prints one JSON line and appends a dated section to ``--results-file`` (written atomically); refuses to append
from a tree with uncommitted changes to tracked files (``--no-append`` prints the section instead).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
CORPUS = "rt-polarity"
WARM_STEPS = 10
STAGES = ("plain", "dpsgd", "noise", "lot")
TARGETS = ("plain", "dpsgd")
TOP_LAYERS_TEXTS = 512  # --setting top-layers: texts of the timed loops unless --max-train says otherwise


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def load(max_train: int | None, setting: str = "head") -> dict:
    """rt-polarity's train inputs and labels for the setting, as :mod:`veil.experiments.dpsgd.utility` loads them."""
    from veil.errors import ResourceMissingError
    from veil.experiments.dpsgd.utility import _load

    try:
        return _load(CORPUS, max_train, _say, setting)
    except ResourceMissingError as exc:
        sys.exit(f"{exc}\n(run `veil corpora pull {CORPUS}` first)")


def step_times(args: argparse.Namespace, X, y, classes: int) -> dict:
    """Per-step time of DP-SGD's loop against the plain loop (module docstring)."""
    from veil.defenses.dpsgd import DPSGD, PlainTraining
    from veil.defenses.dpsgd.accounting import _calibrated
    from veil.defenses.dpsgd.noise import gaussian, poisson_lot

    n = len(X)
    common = dict(epochs=args.epochs, batch_size=args.batch_size, lr=1e-3, hidden=(128,), num_classes=classes,
                  init_seed=args.seed)
    if args.setting == "top-layers":  # one model for both loops: each training copies it (the same initial weights)
        from veil.experiments.dpsgd.utility import MAX_LENGTH, TOP_LAYERS
        from veil.models.top_layers import build_top_layers

        common["model"] = build_top_layers(num_classes=classes, trained=TOP_LAYERS, max_length=MAX_LENGTH,
                                           hidden=(128,), init_seed=args.seed)
    plain = PlainTraining(**common)  # rng None: lots from the OS CSPRNG
    dp = DPSGD(epsilon=args.epsilon, clip=1.0, **common)  # rng None: lots and noise from the OS CSPRNG
    _calibrated.cache_clear()  # sigma's search is cached per setting in a process: time its first (real) run
    t = time.perf_counter()
    acc = dp.plan(n)
    calibration_s = time.perf_counter() - t
    q, steps = args.batch_size / n, acc.steps
    std = acc.sigma * dp.clip

    def loop(defense, private: bool, k: int):
        return defense._fit(X, y, classes, sigma=acc.sigma if private else 0.0, clip=dp.clip if private else math.inf,
                            q=q, accounted_q=acc.sample_rate, steps=k)

    module, _ = loop(plain, False, min(WARM_STEPS, steps))
    loop(dp, True, min(WARM_STEPS, steps))
    sizes = [p.numel() for p in module.parameters() if p.requires_grad]
    history_ok = True

    def run_dp() -> None:
        nonlocal history_ok
        _, log = loop(dp, True, steps)
        history_ok &= log.history == [(acc.sigma, acc.sample_rate, steps)]

    fns = {"plain": lambda: loop(plain, False, steps), "dpsgd": run_dp,
           "noise": lambda: [gaussian(None, size, std) for _ in range(steps) for size in sizes],
           "lot": lambda: [poisson_lot(None, n, q) for _ in range(steps)]}
    fns["noise"](), fns["lot"]()  # warm-up of the two measured alone (the loops were warmed up above)
    seconds: dict[str, list[float]] = {s: [] for s in STAGES}
    for rep in range(args.reps):
        for stage in STAGES[rep % len(STAGES):] + STAGES[:rep % len(STAGES)]:
            t = time.perf_counter()
            fns[stage]()
            seconds[stage].append(time.perf_counter() - t)
    ms = {s: 1e3 * statistics.median(v) / steps for s, v in seconds.items()}
    return {"n_train": n, "steps": steps, "sample_rate": acc.sample_rate, "sigma": acc.sigma, "clip": dp.clip,
            "epsilon": acc.epsilon, "delta": acc.delta, "parameters": sum(sizes), "calibration_s": calibration_s,
            "seconds": seconds, "ms_per_step": ms, "ratio_dp_over_plain": ms["dpsgd"] / ms["plain"],
            "clipping_and_rest_ms": ms["dpsgd"] - ms["plain"] - ms["noise"],
            "accounted_history_every_run": history_ok}


def lira_throughput(args: argparse.Namespace, X, y, classes: int) -> dict:
    """Shadow models per second of online LiRA against each target (module docstring)."""
    import numpy as np
    from scipy.stats import norm  # noqa: F401 (LiRA's scoring imports it: imported before anything is timed)

    from veil.attacks.membership import LiRA, ModelAccess, membership_game
    from veil.defenses.dpsgd import BENCH_RECIPE, DPSGD, PlainTraining
    from veil.defenses.dpsgd.accounting import _calibrated

    game = membership_game(np.arange(len(X)), members=args.members, rng=args.seed)
    population = (X[game.population], y[game.population])
    Xt, yt = X[game.train], y[game.train]
    out: dict[str, dict] = {}
    for target in args.lira_targets:
        common = {**BENCH_RECIPE, "num_classes": classes, "init_seed": args.seed}
        make = (lambda: PlainTraining(**common)) if target == "plain" else \
            (lambda: DPSGD(epsilon=args.epsilon, clip=1.0, **common))
        calibration_s = None
        if target == "dpsgd":
            _calibrated.cache_clear()
            t = time.perf_counter()
            make().plan(args.members)
            calibration_s = time.perf_counter() - t
        defense = make()
        model = defense.train((Xt, yt))  # the released target (and the warm-up of this recipe)
        access = ModelAccess.of(model, defense, X[game.candidates], y[game.candidates])
        train_s, attack_s, scores = [], [], []
        for _ in range(args.lira_reps):
            train_s.append(make().train((Xt, yt)).seconds)
            t = time.perf_counter()
            result = LiRA(population=population, shadows=args.shadows, online=True, rng=args.seed).run(access)
            attack_s.append(time.perf_counter() - t)
            scores.append(np.asarray(result.scores))
        target_s, lira_s = statistics.median(train_s), statistics.median(attack_s)
        out[target] = {"label": "plain" if target == "plain" else f"dpsgd-eps{args.epsilon:g}",
                       "steps": model.steps, "sigma": model.sigma, "target_train_s": train_s, "lira_s": attack_s,
                       "shadows_per_s": args.shadows / lira_s, "seconds_per_shadow": lira_s / args.shadows,
                       "shadow_over_target": lira_s / args.shadows / target_s, "calibration_s": calibration_s,
                       "same_scores_every_run": all(np.array_equal(s, scores[0]) for s in scores)}
    return {"members": args.members, "candidates": len(game.candidates), "population": len(game.population),
            "shadows": args.shadows, "recipe": {k: list(v) if isinstance(v, tuple) else v
                                                for k, v in BENCH_RECIPE.items()}, "targets": out}


def run(args: argparse.Namespace) -> dict:
    from importlib.metadata import version

    import threadpoolctl
    import torch

    from veil.defenses.dpsgd import BENCH_RECIPE
    from veil.results import git_commit

    torch.set_num_threads(args.threads)
    limits = threadpoolctl.threadpool_limits(limits=args.threads)  # noqa: F841 (held for the whole run)
    load_start = os.getloadavg()[0]
    if args.setting == "top-layers" and args.max_train is None:
        args.max_train = TOP_LAYERS_TEXTS
    data = load(args.max_train, args.setting)
    X, y, classes = data["X_train"], data["y_train"], data["num_classes"]
    if args.batch_size > len(X):
        sys.exit(f"--batch-size {args.batch_size} is more than the {len(X)} training examples")
    batch = BENCH_RECIPE["batch_size"]
    if args.lira_targets and not batch <= args.members <= len(X) // 3:
        sys.exit(f"--members {args.members} must be at least {batch} (the recipe's batch) and at most a third of "
                 f"the {len(X)} training examples (members, non-members, population)")
    steps = step_times(args, X, y, classes)
    lira = lira_throughput(args, X, y, classes) if args.lira_targets else None
    return {
        "benchmark": "dpsgd",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(HERE.parent),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count(),
                    "torch": torch.__version__, "opacus": version("opacus"), "numpy": version("numpy"),
                    "torch_threads": torch.get_num_threads(),
                    "blas_openmp_threads": sorted({p["num_threads"] for p in threadpoolctl.threadpool_info()}),
                    "load_avg_1m_start": load_start, "load_avg_1m_end": os.getloadavg()[0],
                    "other_load": args.note or "not stated"},
        "config": {"corpus": CORPUS, "split": "train", "max_train": args.max_train, "dim": int(X.shape[1]),
                   "setting": args.setting,
                   "classes": classes, "encoder": "minilm (all-MiniLM-L6-v2), mean pooling, L2-normalised, torch",
                   "head": "Scale(sqrt(d)) + MLPHead(hidden=[128], dropout=0)" if args.setting == "head" else
                   "MiniLM's last 2 layers (as shipped, trained) + mean pooling, L2-normalised x sqrt(d) + "
                   "MLPHead(hidden=[128], dropout=0)",
                   "optimizer": "adam", "lr": 1e-3,
                   "batch_size": args.batch_size, "epochs": args.epochs, "epsilon": args.epsilon,
                   "reps": args.reps, "warm_up_steps": min(WARM_STEPS, steps["steps"]), "lira_reps": args.lira_reps,
                   "seed": args.seed, "threads": args.threads},
        "steps": steps,
        "lira": lira,
    }


def markdown(r: dict) -> str:
    m, c, s = r["machine"], r["config"], r["steps"]
    ms = s["ms_per_step"]
    runs = {k: ", ".join(f"{x:.3f}" for x in v) for k, v in s["seconds"].items()}
    subset = "" if c["max_train"] is None else f" (an evenly spaced {s['n_train']} of it)"
    top = c.get("setting", "head") == "top-layers"
    inputs = (f"the hidden states entering MiniLM's last 2 layers and the attention mask (computed once, not timed; "
              f"{c['dim']:,} floats per text)" if top else f"frozen MiniLM embeddings (d = {c['dim']}, cached)")
    lines = [
        (f"## DP-SGD step time (MiniLM's top layers, {c['corpus']}), {r['date']}" if top else
         f"## DP-SGD step time and LiRA shadow throughput (head on frozen MiniLM, {c['corpus']}), {r['date']}"),
        "",
        f"- commit: {r['git_commit']}",
        f"- machine: {m['platform']}, {m['cpu_count']} CPUs, torch {m['torch']}, opacus {m['opacus']}, numpy "
        f"{m['numpy']}; {c['threads']} thread(s) (torch {m['torch_threads']}, BLAS/OpenMP "
        f"{m['blas_openmp_threads']}); 1-min load average {m['load_avg_1m_start']:.2f} at the start, "
        f"{m['load_avg_1m_end']:.2f} at the end (other jobs running: {m['other_load']})",
        f"- command: `python benchmarks/dpsgd.py {shlex.join(sys.argv[1:])}`",
        f"- workload: {inputs} of the {c['corpus']} train split{subset}, "
        f"{s['n_train']} examples, {c['classes']} classes; {'model' if top else 'head'} {c['head']} "
        f"({s['parameters']:,} trained parameters), Adam "
        f"lr {c['lr']:g}; Poisson lots of expected size {c['batch_size']} (q = {s['sample_rate']:.4g}), "
        f"{c['epochs']} epoch(s) = {s['steps']} steps; DP-SGD at target epsilon {c['epsilon']:g} (PRV {s['epsilon']:.3f} "
        f"at delta {s['delta']:.3g}, sigma {s['sigma']:.4g}, clip {s['clip']:g}); lots and noise from the OS CSPRNG; "
        f"median of {c['reps']} run(s) after a warm-up of {c['warm_up_steps']} steps, the order of the four rotating "
        "every run",
        "",
        "| what | ms per step (median) | vs plain | runs (s, all steps) |",
        "|---|---:|---:|---|",
        f"| plain step (PlainTraining's loop) | {ms['plain']:.3f} | 1.00 | {runs['plain']} |",
        f"| DP-SGD step (DPSGD's loop: ghost clipping + noise) | {ms['dpsgd']:.3f} | "
        f"{s['ratio_dp_over_plain']:.2f} | {runs['dpsgd']} |",
        f"| Gaussian noise alone, {s['parameters']:,} coordinates (os.urandom, Box-Muller, 4 draws each) | "
        f"{ms['noise']:.3f} | | {runs['noise']} |",
        f"| Poisson lot alone, {s['n_train']} uniforms (os.urandom; in both loops) | {ms['lot']:.3f} | | "
        f"{runs['lot']} |",
        "",
        f"- DP-SGD / plain, time per step: **{s['ratio_dp_over_plain']:.2f}**; of a DP-SGD step, the noise takes "
        f"{ms['noise'] / ms['dpsgd']:.0%} ({ms['noise']:.3f} ms) and ghost clipping with Opacus' bookkeeping the rest "
        f"beyond a plain step, {s['clipping_and_rest_ms']:.3f} ms (DP - plain - noise, a difference of medians); "
        f"sigma's calibration, once per DPSGD.train and not in the steps: {s['calibration_s']:.2f} s; the accountant's "
        f"history was exactly (sigma, q, {s['steps']}) after every DP-SGD run: "
        f"{'yes' if s['accounted_history_every_run'] else '**NO**'}",
    ]
    lira = r["lira"]
    if lira:
        rec = lira["recipe"]
        lines += [
            "",
            f"LiRA (online, {lira['shadows']} shadows; game: {lira['members']} members, {lira['candidates']} "
            f"candidates, population {lira['population']}, seed {c['seed']}; target and shadows trained with the "
            f"bench recipe, {rec['epochs']} epochs, batch {rec['batch_size']}, lr {rec['lr']:g}, hidden "
            f"{rec['hidden']}; median of {c['lira_reps']} run(s), each after one more target training; the attack's "
            "time holds its shadows' training, the logits on the candidates and the scoring):",
            "",
            "| target | one target's training (s, median) | LiRA attack (s, median) | shadows/s | one shadow / one "
            "target | target runs (s) | attack runs (s) |",
            "|---|---:|---:|---:|---:|---|---|",
        ]
        for t in lira["targets"].values():
            lines.append(f"| {t['label']} ({t['steps']} steps) | {statistics.median(t['target_train_s']):.3f} | "
                         f"{statistics.median(t['lira_s']):.3f} | {t['shadows_per_s']:.2f} | "
                         f"{t['shadow_over_target']:.2f} | {', '.join(f'{x:.3f}' for x in t['target_train_s'])} | "
                         f"{', '.join(f'{x:.3f}' for x in t['lira_s'])} |")
        lines.append("")
        for t in lira["targets"].values():
            calib = "" if t["calibration_s"] is None else (
                f"; sigma ({t['sigma']:.4g}) is calibrated once per setting in a process and shared by the target and "
                f"every shadow: {t['calibration_s']:.2f} s the first time, timed alone (the runs above come after it)")
            same = ("one run, not compared" if c["lira_reps"] < 2 else
                    "yes" if t["same_scores_every_run"] else "**NO**")
            lines.append(f"- {t['label']}: {t['seconds_per_shadow']:.3f} s per shadow{calib}; the same LiRA scores in "
                         f"every run: {same}")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setting", choices=("head", "top-layers"), default="head",
                        help="head on frozen MiniLM (default) or MiniLM's top layers with it (step times only)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of the timed loops (default 2)")
    parser.add_argument("--reps", type=int, default=5, help="timed runs of each loop (default 5)")
    parser.add_argument("--batch-size", type=int, default=256,
                        help="expected lot size of the timed loops (default 256)")
    parser.add_argument("--epsilon", type=float, default=8.0, help="DP-SGD's target epsilon (default 8)")
    parser.add_argument("--max-train", type=int, help="an evenly spaced subset of the train split (default: all; "
                        f"top-layers: {TOP_LAYERS_TEXTS})")
    parser.add_argument("--members", type=int, default=2000, help="LiRA game: the target's training set (default 2000)")
    parser.add_argument("--shadows", type=int, default=8, help="LiRA shadow models (default 8)")
    parser.add_argument("--lira-reps", type=int, default=3, help="timed LiRA runs per target (default 3)")
    parser.add_argument("--lira-targets", default="plain,dpsgd",
                        help="comma-separated targets: plain, dpsgd, both (default), or 'none' to skip LiRA")
    parser.add_argument("--seed", type=int, default=0, help="initial weights, the LiRA game and shadows (default 0)")
    parser.add_argument("--threads", type=int, default=1, help="torch and BLAS/OpenMP threads (default 1)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print the section; leave the results file alone")
    args = parser.parse_args(argv)
    for name in ("epochs", "reps", "batch_size", "members", "lira_reps", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.shadows < 2:
        parser.error("--shadows must be >= 2 (LiRA fits a Gaussian per candidate)")
    if args.seed < 0 or (args.max_train is not None and args.max_train < 2):
        parser.error("--seed must be >= 0 and --max-train >= 2")
    if not (math.isfinite(args.epsilon) and args.epsilon > 0):
        parser.error("--epsilon must be finite and > 0")
    targets = [t.strip() for t in args.lira_targets.split(",") if t.strip()]
    args.lira_targets = [] if targets == ["none"] else list(dict.fromkeys(targets))
    if any(t not in TARGETS for t in args.lira_targets) or (not args.lira_targets and targets != ["none"]):
        parser.error("--lira-targets takes plain, dpsgd, plain,dpsgd or none")
    if args.setting == "top-layers" and args.lira_targets:
        if "--lira-targets" in (argv if argv is not None else sys.argv[1:]):
            parser.error("--setting top-layers times the steps only; drop --lira-targets (LiRA's shadows are heads)")
        args.lira_targets = []
    from _record import measure_and_publish

    return measure_and_publish(args, HERE.parent, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
