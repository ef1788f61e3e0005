"""What the quick masked LM costs to train on this CPU, from scratch: the estimate a first run prints.

The quick masked LM (``QUICK_MLM``: three passes over the quick silver treebank's train split) is what the quick
bench's word-recovery attackers and the tests use, and ``veil models train mlm --quick`` or the first use trains
it. This trains it whole with veil's own :func:`veil.training.mlm.train_mlm`, configuration unchanged except the
thread count, into a temporary folder that is deleted afterwards (nothing lands in VEIL_HOME), and reports the
minutes of reading the treebank, of training (the manifest's minutes: every held-out evaluation included) and in
all, the steps (planned and done), how it stopped (``epochs``: its step budget; ``budget``: cut short by the
minute cap) and the held-out accuracy and weights' sha256 (two runs of one commit give the same model whatever the
load: the step budget decides, not the clock).

``--busy N`` starts N busy loops (``while True: pass`` processes) for the run: the synthetic load the record
names.

Usage::

    make setup                                  # once (the quick silver treebank)
    python benchmarks/quick_models.py [--threads 2] [--busy 0] [--note TEXT]
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


def run(args: argparse.Namespace) -> dict:
    import torch

    from veil.parsing.mlm import mlm_training_data
    from veil.results import git_commit
    from veil.training.mlm import QUICK_MLM, train_mlm

    config = replace(QUICK_MLM, threads=args.threads)
    from _record import busy_loops

    with busy_loops(args.busy):
        start = time.perf_counter()
        train, heldout, data = mlm_training_data(config.treebank)
        read = time.perf_counter() - start
        with tempfile.TemporaryDirectory(prefix="veil-quick-mlm-cost-") as tmp:
            manifest = train_mlm(config, train, heldout, data=data, out=Path(tmp) / config.name,
                                 log=lambda _: None)
        wall = time.perf_counter() - start
    return {"benchmark": "quick_models",
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(HERE.parent),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "threads": args.threads,
            "torch": torch.__version__, "busy_loops": args.busy, "load_after": round(os.getloadavg()[0], 2),
            "note": args.note, "command": "python benchmarks/quick_models.py " + shlex.join(sys.argv[1:]),
            "mlm": {"name": config.name, "sentences": manifest["train_sentences"], "steps": manifest["steps"],
                    "planned_steps": manifest["planned_steps"], "stopped": manifest["stopped"],
                    "read_minutes": round(read / 60, 2), "train_minutes": manifest["minutes"],
                    "wall_minutes": round(wall / 60, 2), "heldout_accuracy": manifest["heldout"]["accuracy"],
                    "sha256": manifest["sha256"]}}


def markdown(r: dict) -> str:
    m = r["mlm"]
    load = f"{r['busy_loops']} busy loop(s) running" if r["busy_loops"] else "no synthetic load"
    lines = [f"## Quick masked LM training cost on this CPU (trained whole), {r['date']}", "",
             f"- commit: {r['git_commit']}",
             f"- machine: {r['machine']}; threads {r['threads']}; torch {r['torch']}; {load}; 1-min load average "
             f"{r['load_after']} after the run" + (f"; note: {r['note']}" if r["note"] else ""),
             f"- command: `{r['command']}`",
             "- workload: veil's train_mlm on QUICK_MLM (unchanged but its threads) from the quick silver treebank, "
             "into a temporary folder", "",
             "| model | sentences | steps (planned) | stopped | read min | train min | total min | held-out accuracy "
             "| weights sha256 |",
             "|---|---:|---:|---|---:|---:|---:|---:|---|",
             f"| `{m['name']}` | {m['sentences']:,} | {m['steps']} ({m['planned_steps']}) | {m['stopped']} | "
             f"{m['read_minutes']:.2f} | {m['train_minutes']:.2f} | {m['wall_minutes']:.2f} | "
             f"{m['heldout_accuracy']:.2f}% | `{m['sha256'][:12]}` |"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch and BLAS/OpenMP threads (default 2)")
    parser.add_argument("--busy", type=int, default=0, help="busy loops run beside the training (default 0)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print the section; leave the results file alone")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    if not 0 <= args.busy <= 16:
        parser.error("--busy must be in [0, 16]")
    from _record import measure_and_publish

    return measure_and_publish(args, HERE.parent, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
