"""What the quick bench's generative-model section costs on a first run (issue 52: at most 3 minutes more).

Runs ``veil bench --quick --corpora rt-polarity-planted`` into a fresh folder with a fresh VEIL_HOME (the corpora,
encoders and downloads linked from the real one, so nothing is downloaded; no language model cached), and times
each phase from the run's own lines: every language model and its attacker's reference model (``bench: model ...
ready after S s``), then the cells. The reference in the same run is the issue's target, 3 minutes: the ratio is the
section's wall time over it.

    python benchmarks/bench_generation.py [--busy N] [--note TEXT] [--no-append]

Prints one JSON line and appends a dated section to benchmarks/RESULTS.md (never from a tree with uncommitted
changes to tracked files: ``--no-append`` prints the section instead).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
#: the issue's budget for the section, in minutes
TARGET_MINUTES = 3.0
_READY = re.compile(r"bench: model (?P<name>.+?) ready after (?P<s>[0-9.]+) s")


def run(args: argparse.Namespace) -> dict:
    from _record import busy_loops

    from veil._io import veil_home
    from veil.results import git_commit

    real = veil_home()
    veil = Path(sys.executable).with_name("veil")
    with tempfile.TemporaryDirectory(prefix="veil-bench-lm-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        for sub in ("corpora", "encoders", "downloads"):
            if (real / sub).exists():
                (home / sub).symlink_to(real / sub)
        cmd = [str(veil), "bench", "--quick", "--corpora", "rt-polarity-planted", "--out", str(Path(tmp) / "out")]
        env = {**os.environ, "VEIL_HOME": str(home), "COLUMNS": "1000"}  # one line per message: read below
        with busy_loops(args.busy):
            start = time.perf_counter()
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"veil bench failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        cells = len(list((Path(tmp) / "out" / "cells").glob("*.json")))
    models = [{"model": m["name"], "seconds": float(m["s"])} for m in _READY.finditer(done.stdout + done.stderr)]
    if not models:
        sys.exit("no 'bench: model ... ready after' line in veil bench's output: the phases cannot be timed")
    model_s = sum(m["seconds"] for m in models)
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(HERE.parent),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores", "busy_loops": args.busy, "note": args.note,
            "load_after": round(os.getloadavg()[0], 2),
            "command": "veil bench --quick --corpora rt-polarity-planted --out TMP (fresh VEIL_HOME)",
            "models": models, "model_seconds": round(model_s, 1), "cells": cells,
            "cell_seconds": round(wall - model_s, 1), "wall_seconds": round(wall, 1),
            "target_minutes": TARGET_MINUTES, "ratio_to_target": round(wall / 60 / TARGET_MINUTES, 3)}


def markdown(r: dict) -> str:
    load = f"; {r['busy_loops']} busy loop(s) running beside it (synthetic load)" if r["busy_loops"] else ""
    lines = [f"## The quick bench's generative-model section from an empty language-model cache, {r['date']}", "",
             f"- commit: {r['git_commit']}",
             f"- machine: {r['machine']}; 1-min load average {r['load_after']} after the run{load}"
             + (f"; note: {r['note']}" if r["note"] else ""),
             f"- command: `{r['command']}` (`{shlex.join(['python', 'benchmarks/bench_generation.py'])}`)", "",
             "| phase | minutes |", "|---|---:|"]
    lines += [f"| {m['model']} (the model and its attacker's reference model) | {m['seconds'] / 60:.2f} |"
              for m in r["models"]]
    lines += [f"| {r['cells']} cells | {r['cell_seconds'] / 60:.2f} |",
              f"| the section, in all | {r['wall_seconds'] / 60:.2f} |", "",
              f"Against the issue's {r['target_minutes']:g}-minute target: {r['ratio_to_target']:.2f}x."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="BLAS/OpenMP threads (default 2)")
    parser.add_argument("--busy", type=int, default=0, help="busy loops beside the timed run (default 0)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print the section; leave the results file alone")
    args = parser.parse_args(argv)
    if not 0 <= args.busy <= 16:
        parser.error("--busy must be in [0, 16]")
    from _record import measure_and_publish

    return measure_and_publish(args, HERE.parent, run, markdown)


if __name__ == "__main__":
    sys.exit(main())
