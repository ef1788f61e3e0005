"""Per-round wall time of federated TextHide on Flower against the in-process reference loop, same work.

Both engines run the same configuration (3 clients, fedavg, one local epoch per round, TextHide (256, 4),
frozen encoder) from the same keys (key files) and seeded mixing, so they do the same arithmetic (their global
weights agree, which the test suite checks). Round 1 is reported apart: on Flower it includes starting the
client processes and loading each client's data; later rounds are the steady state. The overhead is
(Flower round - reference round) / reference round, medians over rounds 2..R.

The fine-tuned-encoder setting (the issue's target: overhead <= 20% of a fine-tuned round) is not implemented
in veil.federated yet, so only the frozen setting is measured; a frozen round is far cheaper, which makes any
fixed per-round cost of Flower look larger here than it would next to a fine-tuned round.

    python benchmarks/federated.py [--rounds 6] [--max-train 3000]

Prints one JSON line and appends a dated section to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import tempfile
import time
import warnings
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def main() -> None:
    import torch

    from veil._io import atomic_write_text
    from veil.defenses.texthide import MaskPool
    from veil.errors import PrivacyLeakWarning
    from veil.federated import FederatedConfig
    from veil.federated.data import corpus_arrays
    from veil.federated.run import run_federated
    from veil.results import git_commit

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--max-train", type=int, default=3000)
    args = ap.parse_args()
    cfg = FederatedConfig(corpus="rt-polarity", clients=3, rounds=args.rounds, client_mode="fedavg", m=256, k=4,
                          batch_size=32, lr=1e-3, max_train=args.max_train, max_test=600)
    corpus_arrays(cfg)  # warm the embedding cache outside the timed runs
    load = [os.getloadavg()[0]]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in range(cfg.clients):
            MaskPool(cfg.m, 384).save(Path(tmp) / f"client-{p}.key")
        for engine in ("reference", "flower"):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyLeakWarning)  # seeded mixing: same work on both engines
                rec, _ = run_federated(cfg, engine=engine, mixing_seed=1, key_dir=tmp)
            rows[engine] = {"total_s": time.perf_counter() - t,
                            "rounds_s": [r["seconds"] for r in rec.extra["rounds"]]}
    load.append(os.getloadavg()[0])
    ref = statistics.median(rows["reference"]["rounds_s"][1:])
    flw = statistics.median(rows["flower"]["rounds_s"][1:])
    commit = git_commit()
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    machine = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
               "load_1min": load}
    out = {"benchmark": "federated", "date": now, "git_commit": commit, "machine": machine, "config": cfg.to_dict(),
           "reference": rows["reference"], "flower": rows["flower"], "round_median_reference_s": ref,
           "round_median_flower_s": flw, "overhead": (flw - ref) / ref}
    print(json.dumps(out))
    lines = [f"\n## federated round wall time, Flower simulation vs in-process loop, {now}\n", f"- commit: {commit}",
             f"- machine: {machine['platform']}, {machine['cpu_count']} CPUs, torch {machine['torch']}; 1-min load "
             f"average {load[0]:.2f} at the start, {load[1]:.2f} at the end",
             f"- workload: rt-polarity, {args.max_train} training sentences, 3 clients, fedavg (1 local AdamW epoch), "
             f"TextHide (256,4), frozen MiniLM, {args.rounds} rounds, same keys and seeded mixing on both engines",
             "", "| engine | round 1 | median round 2.. | total | overhead per round |", "|---|---:|---:|---:|---:|",
             f"| in-process loop (reference) | {rows['reference']['rounds_s'][0]:.2f} s | {ref:.2f} s | "
             f"{rows['reference']['total_s']:.1f} s | |",
             f"| Flower simulation (Ray) | {rows['flower']['rounds_s'][0]:.2f} s | {flw:.2f} s | "
             f"{rows['flower']['total_s']:.1f} s | {100 * (flw - ref) / ref:+.0f}% |",
             "", "Fine-tuned-encoder rounds are not implemented yet, so the issue's 20%-of-a-fine-tuned-round target "
                 "is not measured."]
    atomic_write_text(RESULTS, RESULTS.read_text() + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
