"""What the full inverter costs to train on this CPU: a bounded run of its training, extrapolated to its planned
steps (and said to be an extrapolation), with the quick inverter's bounded run in the same process as the reference.

Each run is veil's own :func:`veil.training.inverter.train_inverter` on the configuration's real public sentences
and their cached MiniLM vectors (``FULL_INVERTER`` or ``QUICK_INVERTER``, unchanged except a minute cap of
``--minutes``), written to a temporary folder that is deleted afterwards (nothing lands in VEIL_HOME). Every row
of the learning curve took one held-out evaluation (the untrained decoder's first, then the scheduled ones, or for
a run cut short before its first scheduled one the row that scores its weights), so the training minutes are the
run's minutes less one evaluation per row (each taken as long as the first row's), and

    seconds per step = training minutes * 60 / steps done;  planned minutes = planned steps * seconds per step / 60.

Reported: steps done, seconds per step, sentences per second, and for the full model its planned steps (4 passes
over its sentences) and the extrapolated minutes, hours and the ratio of its step time to the quick model's.

Usage::

    veil models train inverter --quick                    # once (its corpora and vectors); the full model's
                                                          # sentences are encoded by the first `veil attack invert`
    python benchmarks/inverter_training.py [--minutes 3] [--threads 2] [--note TEXT]
        [--out result.json] [--results-file benchmarks/RESULTS.md] [--no-append]

Prints one JSON line and appends a dated section to ``--results-file`` (written atomically); refuses to append
from a tree with uncommitted changes to tracked files (``--no-append`` prints the section instead).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shlex
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"


def _bounded(config, minutes: float, threads: int) -> dict:
    """One bounded training run of ``config`` in a temporary folder: its steps, minutes and rate."""
    import math

    from veil.training.inverter import inverter_training_data, train_inverter

    cfg = replace(config, max_minutes=minutes, threads=threads)
    train, heldout, data = inverter_training_data(cfg, log=lambda _: None, progress=False)
    batches_per_pass = math.ceil(len(train) / cfg.batch_size)
    planned = batches_per_pass * cfg.epochs
    with tempfile.TemporaryDirectory(prefix="veil-inverter-cost-") as tmp:
        start = time.perf_counter()
        manifest = train_inverter(cfg, train, heldout, data=data, out=Path(tmp) / cfg.name, resume=False,
                                  log=lambda _: None, progress=False)
        wall = time.perf_counter() - start
    curve = manifest["curve"]
    steps = int(manifest["steps"])
    evaluation = float(curve[0]["minutes"])
    # every curve row took one held-out evaluation (the step-0 row, the scheduled ones, and for a run cut short
    # before its first scheduled one the row that scores its weights)
    train_minutes = max(float(manifest["minutes"]) - len(curve) * evaluation, 1e-9)
    per_step = train_minutes * 60 / max(steps, 1)
    return {"name": cfg.name, "sentences": len(train), "batch_size": cfg.batch_size, "epochs": cfg.epochs,
            "max_tokens": cfg.max_tokens, "planned_steps": planned, "steps_done": steps,
            "evaluation_minutes": round(evaluation, 3), "train_minutes": round(train_minutes, 3),
            "wall_minutes": round(wall / 60, 3), "seconds_per_step": round(per_step, 4),
            "sentences_per_second": round(cfg.batch_size / per_step, 2),
            "planned_minutes": round(planned * per_step / 60, 1)}


def run(args: argparse.Namespace) -> dict:
    import torch

    from veil.errors import ResourceMissingError
    from veil.results import git_commit
    from veil.training.inverter import FULL_INVERTER, QUICK_INVERTER

    try:
        runs = {"quick": _bounded(QUICK_INVERTER, args.minutes, args.threads),
                "full": _bounded(FULL_INVERTER, args.minutes, args.threads)}
    except ResourceMissingError as exc:
        sys.exit(str(exc))
    full, quick = runs["full"], runs["quick"]
    return {"benchmark": "inverter_training",
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(HERE.parent),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "threads": args.threads,
            "torch": torch.__version__, "load_after": round(os.getloadavg()[0], 2), "note": args.note,
            "command": "python benchmarks/inverter_training.py " + shlex.join(sys.argv[1:]),
            "minutes_cap": args.minutes, "runs": runs,
            "full_step_over_quick_step": round(full["seconds_per_step"] / quick["seconds_per_step"], 3),
            "full_planned_hours": round(full["planned_minutes"] / 60, 1)}


def markdown(r: dict) -> str:
    lines = [f"## Inverter training cost on this CPU (bounded runs, extrapolated), {r['date']}", "",
             f"- commit: {r['git_commit']}",
             f"- machine: {r['machine']}; threads {r['threads']}; torch {r['torch']}; 1-min load average "
             f"{r['load_after']} after the run" + (f"; note: {r['note']}" if r["note"] else ""),
             f"- command: `{r['command']}`",
             f"- workload: veil's train_inverter on each configuration's public sentences, capped at "
             f"{r['minutes_cap']} minutes; training minutes = the run's minutes less one held-out evaluation per "
             "learning-curve row", "",
             "| model | sentences | batch | steps done | s/step | sentences/s | planned steps | planned minutes |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key in ("quick", "full"):
        x = r["runs"][key]
        lines.append(f"| `{x['name']}` | {x['sentences']:,} | {x['batch_size']} | {x['steps_done']} | "
                     f"{x['seconds_per_step']:.3f} | {x['sentences_per_second']:.1f} | {x['planned_steps']:,} | "
                     f"{x['planned_minutes']:,.1f} |")
    lines += ["", f"The full inverter's step costs {r['full_step_over_quick_step']:.2f}x the quick one's; its "
              f"{r['runs']['full']['planned_steps']:,} planned steps would take about {r['full_planned_hours']} "
              f"hours on this machine (extrapolated from {r['runs']['full']['steps_done']} steps, not run)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="training cap of each bounded run (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="torch and BLAS/OpenMP threads (default 2)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print the section; leave the results file alone")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    if not 0 < args.minutes <= 60:
        parser.error("--minutes must be in (0, 60]")
    from _record import measure_and_publish

    return measure_and_publish(args, HERE.parent, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
