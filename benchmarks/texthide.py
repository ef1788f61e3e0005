"""Cost of TextHide encryption as a fraction of a training step, frozen and fine-tuned, in one run.

Reference (measured in the same run, same batch): one training step without
the defense. Frozen: MLP head (3 hidden layers of width 384) forward +
backward + AdamW step on cached MiniLM embeddings. Fine-tuned: tokenise +
MiniLM forward + head + backward + AdamW step. Encryption: one
``TextHide.encrypt`` call on the batch's representations (with autograd),
(m, k) = (256, 4), intra and inter mode. Target: <= 1% of the fine-tuning step.

    python benchmarks/texthide.py [--reps 30] [--out result.json]

Prints one JSON line and appends a dated section to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from veil._io import atomic_write_json, atomic_write_text  # noqa: E402
from veil.results import git_commit  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")


def median_ms(fn, reps: int, warmup: int = 3) -> tuple[float, list[float]]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import veil.corpora as vc
    from veil.defenses.texthide import MaskPool, TextHide
    from veil.encoders import TextEncoder
    from veil.models import MLPHead

    corpus = vc.load("rt-polarity")
    texts = [corpus.texts[i] for i in corpus.indices("train")[: args.batch_size]]
    labels = torch.as_tensor(corpus.labels[corpus.indices("train")[: args.batch_size]])
    enc = TextEncoder("minilm")
    d = enc.dim
    with torch.no_grad():
        cached = enc.forward_tokens(enc.tokenize(texts)) * d ** 0.5
    public = torch.as_tensor(np.random.default_rng(0).normal(size=(20000, d)), dtype=torch.float32)
    intra = TextHide(k=4, pool=MaskPool(256, d))
    inter = TextHide(k=4, pool=MaskPool(256, d), public=public)

    head = MLPHead(d, 2, hidden=(d, d, d))
    opt = torch.optim.AdamW(head.parameters(), lr=1e-3)

    def frozen_step():
        loss = torch.nn.functional.cross_entropy(head(cached), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    ft_head = MLPHead(d, 2, hidden=(d, d, d))
    ft_opt = torch.optim.AdamW([*enc.module.parameters(), *ft_head.parameters()], lr=2e-5)
    enc.module.train()

    def finetune_step():
        e = enc.forward_tokens(enc.tokenize(texts))
        loss = torch.nn.functional.cross_entropy(ft_head(e), labels)
        ft_opt.zero_grad()
        loss.backward()
        ft_opt.step()

    e_grad = cached.clone().requires_grad_(True)
    results = {}
    results["frozen_step_ms"], _ = median_ms(frozen_step, args.reps)
    results["finetune_step_ms"], _ = median_ms(finetune_step, max(5, args.reps // 3), warmup=2)
    results["encrypt_intra_ms"], _ = median_ms(lambda: intra.encrypt(e_grad, labels, num_classes=2), args.reps * 3)
    results["encrypt_inter_ms"], _ = median_ms(lambda: inter.encrypt(e_grad, labels, num_classes=2), args.reps * 3)
    for mode in ("intra", "inter"):
        results[f"{mode}_over_frozen_step"] = results[f"encrypt_{mode}_ms"] / results["frozen_step_ms"]
        results[f"{mode}_over_finetune_step"] = results[f"encrypt_{mode}_ms"] / results["finetune_step_ms"]
    commit = git_commit()
    machine = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
               "torch_threads": torch.get_num_threads()}
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    record = {"benchmark": "texthide", "date": now, "git_commit": commit, "machine": machine,
              "config": {"batch_size": args.batch_size, "m": 256, "k": 4, "dim": d, "reps": args.reps}, **results}
    print(json.dumps(record))
    if args.out:
        atomic_write_json(args.out, record)
    section = [
        f"\n## TextHide encryption cost, {now}\n",
        f"- commit: {commit}",
        f"- machine: {machine['platform']}, {machine['cpu_count']} CPUs, torch {machine['torch']} with "
        f"{machine['torch_threads']} threads",
        f"- workload: batch {args.batch_size} rt-polarity sentences, MiniLM d={d}, (m, k) = (256, 4); medians",
        "",
        "| measurement | median (ms) | encryption / step |",
        "|---|---:|---:|",
        f"| frozen training step (MLP head) | {results['frozen_step_ms']:.2f} | |",
        f"| fine-tuning step (MiniLM + head) | {results['finetune_step_ms']:.1f} | |",
        f"| encrypt, intra | {results['encrypt_intra_ms']:.3f} | frozen {results['intra_over_frozen_step']:.1%}, "
        f"fine-tuned {results['intra_over_finetune_step']:.3%} |",
        f"| encrypt, inter (20k public rows) | {results['encrypt_inter_ms']:.3f} | frozen "
        f"{results['inter_over_frozen_step']:.1%}, fine-tuned {results['inter_over_finetune_step']:.3%} |",
        "",
        f"target: encryption <= 1% of the fine-tuning step: "
        f"**{'met' if max(results['intra_over_finetune_step'], results['inter_over_finetune_step']) <= 0.01 else 'MISSED'}**",
    ]
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    atomic_write_text(RESULTS, old + "\n".join(section) + "\n")  # rewrite whole file atomically


if __name__ == "__main__":
    main()
