"""Time of TextHide mask-pool recovery and unmixing against the number of observed encodings, in one run.

Workload: real MiniLM embeddings of rt-polarity's train split (10,239 texts), encrypted with TextHide
(m=256, k=4, intra; pool and mixing from the OS CSPRNG) for E = 1, 5 and 10 epochs (10k, 51k and
102k encodings), as an eavesdropper on a training run collects them. Mask recovery gets only the
encodings and public statistics (the corpus' dev+test splits); unmixing gets the RECOVERED masks and the
private index (12,752 texts) and splits every observed encoding of the 1-epoch run plus a sample of
``--unmix`` encodings of the larger runs. Reference, measured in the same run: the encryption itself
(what the defender pays to produce the encodings), so each attack's time is also given as a ratio.

    python benchmarks/texthide_attacks.py [--epochs 1,5,10] [--unmix 10000]

Prints one JSON line and appends a dated section to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from veil._io import atomic_write_text  # noqa: E402
from veil.results import git_commit  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", default="1,5,10")
    parser.add_argument("--unmix", type=int, default=10000, help="encodings unmixed per run (at most)")
    args = parser.parse_args()

    import torch

    import veil.corpora as vc
    from veil.attacks.base import Observation
    from veil.attacks.retrieval import SimilaritySearch
    from veil.attacks.texthide import MaskRecovery, PublicStats, Unmix, observe_training_run, score_mask_recovery
    from veil.attacks.texthide.unmix import score_unmix
    from veil.defenses.texthide import MaskPool, TextHide
    from veil.encoders import TextEncoder

    corpus = vc.load("rt-polarity")
    X = np.ascontiguousarray(TextEncoder("minilm").encode_corpus(corpus, None), dtype=np.float32)
    tr = corpus.indices("train")
    held = np.concatenate([corpus.indices("dev"), corpus.indices("test")])
    stats = PublicStats.from_vectors(X[held], source="rt-polarity dev+test")
    index = SimilaritySearch(corpus.texts, X)
    load = [os.getloadavg()[0]]
    rows = []
    for epochs in (int(e) for e in args.epochs.split(",")):
        th = TextHide(k=4, pool=MaskPool(256, X.shape[1]), record_details=True)
        t = time.perf_counter()
        obs, truth = observe_training_run(X[tr], th, epochs=epochs)
        encrypt_s = time.perf_counter() - t
        t = time.perf_counter()
        recovered = MaskRecovery(stats, rng=0).recover(obs)
        recover_s = time.perf_counter() - t
        bits = score_mask_recovery(recovered, truth, observation=obs).metrics["mask_bits"].mean
        sel = np.sort(np.random.default_rng(0).choice(len(obs), size=min(args.unmix, len(obs)), replace=False))
        seen = Observation(obs.vectors[sel], defense=dict(obs.defense), source=obs.source)
        t = time.perf_counter()
        unmixed = Unmix(index, recovered.masks, k=4).attack(seen)
        unmix_s = time.perf_counter() - t
        all_sources = score_unmix(unmixed, tr[np.asarray(truth.sources)[sel]]).metrics["all_sources"].mean
        rows.append({"epochs": epochs, "encodings": len(obs), "encrypt_s": encrypt_s, "recover_s": recover_s,
                     "mask_bits": bits, "unmixed": len(sel), "unmix_s": unmix_s, "all_sources": all_sources})
        print(json.dumps(rows[-1]), flush=True)
    load.append(os.getloadavg()[0])
    commit = git_commit()
    machine = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
               "torch_threads": torch.get_num_threads(), "load_1min": load}
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    print(json.dumps({"benchmark": "texthide_attacks", "date": now, "git_commit": commit, "machine": machine,
                      "rows": rows}))
    lines = [f"\n## TextHide attack cost (mask recovery, unmixing), {now}\n", f"- commit: {commit}",
             f"- machine: {machine['platform']}, {machine['cpu_count']} CPUs, torch {machine['torch']} with "
             f"{machine['torch_threads']} threads; 1-min load average {load[0]:.2f} at the start, {load[1]:.2f} "
             "at the end",
             "- workload: rt-polarity train (10,239 real MiniLM vectors), TextHide (256, 4) intra, pool and mixing "
             "from the OS CSPRNG, E epochs of a training run observed; unmixing over the 12,752-text index with the "
             "recovered masks; one run each", "",
             "| epochs | encodings | encryption (reference) | mask recovery | recovery / encryption | pool bits "
             "recovered | unmixed | unmixing | per 1,000 | all sources found |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['epochs']} | {r['encodings']:,} | {r['encrypt_s']:.1f} s | {r['recover_s']:.1f} s | "
                     f"{r['recover_s'] / r['encrypt_s']:.1f}x | {r['mask_bits']:.4f} | {r['unmixed']:,} | "
                     f"{r['unmix_s']:.1f} s | {1000 * r['unmix_s'] / r['unmixed']:.2f} s | {r['all_sources']:.4f} |")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        growth = np.log(b["recover_s"] / a["recover_s"]) / np.log(b["encodings"] / a["encodings"])
        lines.append(f"\n- mask recovery grows like n^{growth:.2f} from {a['encodings']:,} to {b['encodings']:,} "
                     "encodings (the pool size is fixed; clustering and assignment are matrix products)")
    atomic_write_text(RESULTS, RESULTS.read_text() + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
