"""Training throughput of the paper's LSTM encoder: veil's mini-batches against batch size 1 (issue 14).

The authors' DyNet code updates once per example. This measures main-model training steps (LSTM encoder W=64 +
one-hidden-layer head, Adam, clip 5; optionally a defense) in examples per second, batched (packed sequences)
and with batch size 1, in the same run, on the same news passages (3 sentences, <= 100 tokens; no spaCy needed).
Also times the slowest defense (adversarial generation, 300 characters) batched, and projects the wall time of
a full sweep (6 defenses x 3 seeds, W=64, 16 epochs) on the built-in news-articles attribute corpus from the
measured rates. Threads: whatever torch uses here (``OMP_NUM_THREADS`` decides; on a shared 2-core machine, 1
thread per process avoids spin-wait contention).

    python benchmarks/attributes.py [--examples 1280] [--single 200] [--batch-size 32]

Prints one line to paste into benchmarks/RESULTS.md (this script does not edit it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np


def _rate(texts, batch_size: int, n: int, defense: str = "none") -> tuple[float, float]:
    """(examples/s by wall clock, examples/s by this process' CPU time) of one training epoch."""
    import torch

    from veil.corpora.attributes import entity_variables
    from veil.defenses.adversarial import make_objective
    from veil.training.adversarial import MainConfig, train_main
    from veil.models.lstm import LSTMEncoder, TokenInputs, Vocabulary

    texts = texts[:n]
    vocab = Vocabulary(texts, max_tokens=100)
    inputs = TokenInputs(texts, vocab)
    y = np.arange(n) % 9
    private = entity_variables([{"a"} if i % 3 else {"b"} for i in range(n)], ["a", "b"])
    enc = LSTMEncoder(vocab, width=64, rng=0)
    dev = TokenInputs(texts[:2], vocab)
    kwargs = {"max_chars": 300} if defense == "generation" else {}
    import warnings

    cpu = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = train_main(enc, inputs, y, dev, y[:2], n_classes=9, objective=make_objective(defense, **kwargs),
                           config=MainConfig(epochs=1, batch_size=batch_size), private_train=private,
                           texts_train=texts)
    cpu = time.process_time() - cpu  # also covers setup and the 2-example dev pass (pessimistic)
    del torch
    return model.examples_per_second, n / cpu


def main() -> None:
    import torch

    from veil.corpora.attributes_ner import _passages
    import veil.corpora as vc

    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=1280)
    ap.add_argument("--single", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    base = vc.load("news-articles")
    texts, _, splits = _passages(base)
    texts = [t for t, s in zip(texts, splits) if s == "train"]
    batched, batched_cpu = _rate(texts, args.batch_size, args.examples)
    single, single_cpu = _rate(texts, 1, args.single)
    gen, gen_cpu = _rate(texts, args.batch_size, max(args.batch_size * 8, args.examples // 4), "generation")
    # sweep projection: news-articles attribute corpus (2,787 train passages, 16 epochs, 3 seeds); five defenses at
    # the plain rate (multidetask/grl/decluster add a small MLP; leace trains like none), generation at its rate
    n_train, epochs, seeds = 2787, 16, 3
    plain_s, gen_s = n_train * epochs / batched, n_train * epochs / gen
    projected = seeds * (5 * plain_s + gen_s)
    projected_cpu = seeds * n_train * epochs * (5 / batched_cpu + 1 / gen_cpu)
    out = {"batched_examples_per_s": round(batched, 1), "batch_size": args.batch_size,
           "batch1_examples_per_s": round(single, 1), "speedup": round(batched / single, 1),
           "generation_examples_per_s": round(gen, 1), "projected_sweep_min": round(projected / 60, 1),
           "cpu_time_rates": {"batched": round(batched_cpu, 1), "batch1": round(single_cpu, 1),
                              "generation": round(gen_cpu, 1)},
           "projected_sweep_cpu_min": round(projected_cpu / 60, 1), "load_average": os.getloadavg()[0],
           "threads": torch.get_num_threads(), "cpu": platform.processor() or platform.machine(),
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    print(json.dumps(out))
    print(f"| {time.strftime('%Y-%m-%d')} | attributes LSTM W=64 (news passages) | batch {args.batch_size}: "
          f"{batched:.0f} ex/s | batch 1 (authors' setting): {single:.0f} ex/s | {batched / single:.1f}x | "
          f"generation defense, batch {args.batch_size}: {gen:.0f} ex/s | projected news sweep (6 defenses x 3 "
          f"seeds, 16 epochs, training only): {projected / 60:.0f} min wall, {projected_cpu / 60:.0f} min of CPU time | "
          f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f} |")


if __name__ == "__main__":
    main()
