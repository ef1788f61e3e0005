"""Whether a bench record depends on how busy the machine was: the same cells run quiet and beside busy loops.

Runs ``veil bench --demo --key-seed K`` (the quick bench's own cells, less those ``--demo`` leaves out; ``--quick``:
the whole quick bench, and ``--corpora``/``--attacks`` narrow either) twice, each
into a fresh output folder so every cell runs in both: first on the quiet machine, then beside ``--busy N`` busy
loops (``while True: pass`` processes, the synthetic load of a shared machine). ``--key-seed`` makes the defenses'
keys the same in both runs (the default draws them from the OS CSPRNG, so two runs would differ by design). Both
runs use this VEIL_HOME, so its cached corpora, encodings and models serve both (a model or attacker cached there
is trained by neither run: train it first, or clear it, to compare its training too).

Each cell's record is then compared field by field, after dropping what measures the run rather than its result:
the record's ``created``, ``wall_time_s`` and ``environment``, every key named ``seconds`` or ``minutes`` or ending
in ``_seconds`` or ``_per_s`` (timings inside the records: a training's seconds, the minute an epoch ended, an
attacker's sentences per second), and each duration written inside a text ("stopped at its optimiser-step cap
after 0.29 min": the words are compared, the minutes are not). A record whose step budget a minute cap had cut
short would differ here (its ``budget``/``stopped`` fields say "stopped by the ... budget"), and so would any result
that depends on timing. The record lists the cells compared, those identical, and the first differing
field of each other one, with both runs' summed cell seconds (how much the load slowed them).

Usage::

    python benchmarks/records_under_load.py [--busy 2] [--key-seed 0] [--quick] [--corpora A,B] [--attacks A,B]
        [--keep DIR | --compare DIR] [--note TEXT]
        [--out result.json] [--results-file benchmarks/RESULTS.md] [--no-append]

Prints one JSON line and appends a dated section to ``--results-file``; refuses to append from a tree with
uncommitted changes to tracked files. The two output folders are deleted afterwards unless ``--keep DIR`` names a
new folder to leave them in.
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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
#: what a record says about its run rather than its result
RUN_FIELDS = ("created", "wall_time_s", "environment")
_TIMING_KEY = re.compile(r"^(seconds|minutes)$|_seconds$|_per_s$")
#: a duration inside a text (a budget note's "stopped ... after 0.29 min"): the words around it are still compared
_TIMING_TEXT = re.compile(r"\b\d+(?:\.\d+)? min\b")


def strip_timings(value: Any) -> Any:
    """``value`` without the keys that time the run (``seconds``, ``minutes``, ``*_seconds``, rates ``*_per_s``) and
    with each duration written inside a text ("after 0.29 min") replaced by ``_ min``, recursively."""
    if isinstance(value, dict):
        return {k: strip_timings(v) for k, v in value.items() if not _TIMING_KEY.search(k)}
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    if isinstance(value, str):
        return _TIMING_TEXT.sub("_ min", value)
    return value


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A cell record as compared across runs: without :data:`RUN_FIELDS` and its timings."""
    return strip_timings({k: v for k, v in record.items() if k not in RUN_FIELDS})


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first path at which ``a`` and ``b`` differ (None when equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}/{k} (only in {'the busy' if k not in a else 'the quiet'} run)"
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} (lengths {len(a)} and {len(b)})"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path} ({json.dumps(a)[:60]} quiet, {json.dumps(b)[:60]} busy)"


def compare(quiet: Path, busy: Path) -> dict[str, Any]:
    """Every cell record of ``quiet/cells`` against the one of the same name in ``busy/cells``."""
    names = sorted(p.name for p in (quiet / "cells").glob("*.json"))
    other = {p.name for p in (busy / "cells").glob("*.json")}
    differing = {}
    for name in names:
        if name not in other:
            differing[name] = "missing from the busy run"
            continue
        a = comparable(json.loads((quiet / "cells" / name).read_text()))
        b = comparable(json.loads((busy / "cells" / name).read_text()))
        d = first_difference(a, b)
        if d:
            differing[name] = d
    extra = sorted(other - set(names))
    return {"compared": len(names), "identical": len(names) - len(differing), "differing": differing,
            "only_busy": extra}


def _bench(out: Path, args: argparse.Namespace) -> tuple[float, int]:
    """One ``veil bench --demo`` (``--quick``) into ``out``."""
    cmd = [sys.executable, "-m", "veil.cli", "bench", "--quick" if args.quick else "--demo", "--key-seed",
           str(args.key_seed), "--out", str(out)]
    for option, value in (("--corpora", args.corpora), ("--attacks", args.attacks)):
        if value:
            cmd += [option, value]
    print("$ " + shlex.join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)


def _summed(folder: Path) -> tuple[float, int]:
    run = json.loads((folder / "run.json").read_text())
    return round(sum(float(c.get("wall_time_s") or 0) for c in run["cells"]), 1), len(run["cells"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    from _record import busy_loops

    from veil.results import git_commit

    if args.compare is not None:  # the kept folders of an earlier run, compared again (by this commit's rules)
        where = args.compare.resolve()
        (quiet_s, n_quiet), (busy_s, n_busy) = _summed(where / "quiet"), _summed(where / "busy")
        made = {json.loads(p.read_text()).get("git_commit") for p in (where / "quiet" / "cells").glob("*.json")}
        return {"benchmark": "records_under_load", "date": dt.datetime.now(dt.timezone.utc).isoformat(
                    timespec="seconds"), "git_commit": git_commit(HERE.parent),
                "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "busy_loops": args.busy,
                "key_seed": args.key_seed, "note": args.note + f"; the runs kept in {where.name}/ (made at "
                f"{', '.join(sorted(str(m)[:12] for m in made))}) compared again", "bench": "--quick" if args.quick
                else "--demo", "corpora": args.corpora, "attacks": args.attacks,
                "command": "python benchmarks/records_under_load.py " + shlex.join(sys.argv[1:]),
                "cells_quiet": n_quiet, "cells_busy": n_busy, "cell_seconds_quiet": quiet_s,
                "cell_seconds_busy": busy_s, "load_during_busy": None, "total_s": 0.0,
                **compare(where / "quiet", where / "busy")}
    keep = args.keep.resolve() if args.keep else None
    if keep is not None and keep.exists() and any(keep.iterdir()):
        sys.exit(f"--keep {keep} is not empty: name a new folder (this script never writes into one it did not make)")
    where = keep or Path(tempfile.mkdtemp(prefix="veil-records-under-load-"))
    where.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        _bench(where / "quiet", args)
        with busy_loops(args.busy):
            _bench(where / "busy", args)
            load = round(os.getloadavg()[0], 2)
        result = compare(where / "quiet", where / "busy")
        (quiet_s, n_quiet), (busy_s, n_busy) = _summed(where / "quiet"), _summed(where / "busy")
    finally:
        if keep is None:
            shutil.rmtree(where, ignore_errors=True)
    return {"benchmark": "records_under_load", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(HERE.parent), "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
            "busy_loops": args.busy, "key_seed": args.key_seed, "note": args.note,
            "bench": "--quick" if args.quick else "--demo", "corpora": args.corpora, "attacks": args.attacks,
            "command": "python benchmarks/records_under_load.py " + shlex.join(sys.argv[1:]),
            "cells_quiet": n_quiet, "cells_busy": n_busy, "cell_seconds_quiet": quiet_s, "cell_seconds_busy": busy_s,
            "load_during_busy": load, "total_s": round(time.perf_counter() - start, 1), **result}


def markdown(r: dict[str, Any]) -> str:
    same = r["identical"] == r["compared"] and not r["only_busy"] and r["compared"] > 0
    lines = [f"## Bench records quiet and under load, {r['date']}", "",
             f"- commit: {r['git_commit']}",
             f"- machine: {r['machine']}; {r['busy_loops']} busy loop(s) beside the second run"
             + ("" if r["load_during_busy"] is None else f" (1-min load average {r['load_during_busy']} as it ended)")
             + (f"; note: {r['note']}" if r["note"] else ""),
             f"- command: `{r['command']}` (`veil bench {r['bench']} --key-seed {r['key_seed']}"
             + "".join(f" --{k} {r[k]}" for k in ("corpora", "attacks") if r.get(k)) + "`, twice)",
             f"- outcome: {r['identical']} of {r['compared']} cell records identical "
             f"(timings and the run's own fields aside): "
             + ("the records do not depend on the load" if same else "NOT all identical"),
             "", "| run | cells | summed cell seconds | ratio to the quiet run |", "|---|---:|---:|---:|",
             f"| quiet | {r['cells_quiet']} | {r['cell_seconds_quiet']:.1f} | |",
             f"| beside {r['busy_loops']} busy loop(s) | {r['cells_busy']} | {r['cell_seconds_busy']:.1f} | "
             f"{r['cell_seconds_busy'] / max(r['cell_seconds_quiet'], 1e-9):.2f} |"]
    if r["differing"]:
        lines += ["", "| differing cell | first difference |", "|---|---|"]
        lines += [f"| {name} | {why} |" for name, why in sorted(r["differing"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the second run (default 2)")
    parser.add_argument("--key-seed", type=int, default=0, help="the defenses' key seed, both runs (default 0)")
    parser.add_argument("--quick", action="store_true", help="run the quick bench's cells (default: --demo's)")
    parser.add_argument("--corpora", help="comma-separated corpora to keep (default: all of the grid's)")
    parser.add_argument("--attacks", help="comma-separated attacks to keep (default: all of the grid's)")
    parser.add_argument("--keep", type=Path, help="leave both output folders in this new folder")
    parser.add_argument("--compare", type=Path, help="compare again the quiet/ and busy/ folders an earlier run "
                                                      "left with --keep (nothing is run; give its other options)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--threads", type=int, default=2, help="BLAS/OpenMP threads of this script (default 2)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print the section; leave the results file alone")
    args = parser.parse_args(argv)
    if not 1 <= args.busy <= 16:
        parser.error("--busy must be in [1, 16]")
    from _record import measure_and_publish

    try:
        return measure_and_publish(args, HERE.parent, run, markdown)
    except KeyboardInterrupt:
        print("interrupted: every process this script started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
