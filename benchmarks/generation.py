"""What the generative-model release's language model costs on this CPU (issue 52): fine-tuning and sampling
throughput in tokens per second, each against a reference measured in the same run.

The model is veil's causal LM (:mod:`veil.models.causal_lm`: MiniLM's weights as a ``BertLMHeadModel`` decoder)
on the first ``--texts`` rt-polarity train texts (public), cut to ``--max-tokens`` word pieces.

- **Fine-tuning**: :func:`~veil.models.causal_lm.train_steps` for ``--steps`` steps at ``--batch`` texts. Its tokens
  are the predicted tokens a step sees on average (batches are drawn uniformly, so the workload's mean per text
  times the batch). Reference: scoring the same texts (:func:`~veil.models.causal_lm.log_perplexities`, forward
  only), whose tokens are counted exactly.
- **Sampling**: :func:`~veil.models.causal_lm.sample` (top-40, temperature 1, key-value cache) of ``--samples``
  texts of exactly ``--new-tokens`` tokens after a short prompt. Reference: transformers' own ``generate`` with
  the same settings on the same model, also forced to ``--new-tokens`` tokens.

Usage::

    python benchmarks/generation.py [--texts 512] [--steps 20] [--batch 16] [--samples 32] [--new-tokens 32]
        [--threads 2] [--busy 0] [--note TEXT] [--out result.json] [--results-file benchmarks/RESULTS.md]
        [--no-append]

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
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
PROMPT = "the film is"


def _predicted_tokens(lm, texts: list[str]) -> list[int]:
    """Per text: the tokens the LM predicts for it (its word pieces after [CLS], [SEP] included, as cut)."""
    _, mask = lm.batch(texts)
    return [int(m.sum()) - 1 for m in mask]


def run(args: argparse.Namespace) -> dict:
    import numpy as np
    import torch

    import veil.corpora as vc
    from _record import busy_loops
    from veil.models.causal_lm import build_causal_lm, log_perplexities, sample, train_steps
    from veil.results import git_commit

    torch.set_num_threads(args.threads)
    corpus = vc.load("rt-polarity")
    texts = [corpus.texts[i] for i in corpus.indices("train")[:args.texts]]
    lm = build_causal_lm(max_tokens=args.max_tokens, seed=0)
    per_text = _predicted_tokens(lm, texts)
    with busy_loops(args.busy):
        start = time.perf_counter()
        log_perplexities(lm, texts, batch_size=args.batch)
        score_s = time.perf_counter() - start
        start = time.perf_counter()
        train_steps(lm, texts, steps=args.steps, batch_size=args.batch, lr=1e-4, seed=0)
        train_s = time.perf_counter() - start
        start = time.perf_counter()
        drawn = sample(lm, args.samples, prompt=PROMPT, max_tokens=args.new_tokens, min_tokens=args.new_tokens,
                       top_k=40, seed=0, batch_size=args.samples)
        sample_s = time.perf_counter() - start
        prompt_len = len(lm.tokenizer(PROMPT, add_special_tokens=False)["input_ids"])
        made = args.samples * args.new_tokens  # every sample is new_tokens long (min_tokens = max_tokens)
        assert len(drawn) == args.samples and prompt_len >= 1
        ids = torch.tensor([[lm.tokenizer.cls_token_id]
                            + lm.tokenizer(PROMPT, add_special_tokens=False)["input_ids"]] * args.samples)
        start = time.perf_counter()
        with torch.no_grad(), torch.random.fork_rng():  # generate draws from torch's global generator: seeded here only
            torch.manual_seed(0)
            out = lm.net.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=40,
                                  temperature=1.0, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                                  pad_token_id=lm.tokenizer.pad_token_id)
        hf_s = time.perf_counter() - start
        hf_made = int((out.shape[1] - ids.shape[1]) * args.samples)
    score_tps = sum(per_text) / score_s
    train_tps = args.steps * args.batch * float(np.mean(per_text)) / train_s
    sample_tps, hf_tps = made / sample_s, hf_made / hf_s
    return {"benchmark": "generation", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(HERE.parent), "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
            "threads": args.threads, "torch": torch.__version__, "busy_loops": args.busy,
            "load_after": round(os.getloadavg()[0], 2), "note": args.note,
            "command": "python benchmarks/generation.py " + shlex.join(sys.argv[1:]),
            "workload": {"texts": len(texts), "max_tokens": args.max_tokens,
                         "mean_predicted_tokens": round(float(np.mean(per_text)), 2), "steps": args.steps,
                         "batch": args.batch, "samples": args.samples, "new_tokens": args.new_tokens},
            "scoring": {"seconds": round(score_s, 2), "tokens_per_s": round(score_tps, 1)},
            "fine_tuning": {"seconds": round(train_s, 2), "seconds_per_step": round(train_s / args.steps, 3),
                            "tokens_per_s": round(train_tps, 1),
                            "ratio_to_scoring": round(train_tps / score_tps, 3)},
            "sampling": {"seconds": round(sample_s, 2), "tokens": made, "tokens_per_s": round(sample_tps, 1)},
            "transformers_generate": {"seconds": round(hf_s, 2), "tokens": hf_made, "tokens_per_s": round(hf_tps, 1)},
            "sampling_ratio_to_generate": round(sample_tps / hf_tps, 3)}


def markdown(r: dict) -> str:
    w = r["workload"]
    load = f"; {r['busy_loops']} busy loop(s) running beside it (synthetic load)" if r["busy_loops"] else ""
    lines = [f"## Causal LM fine-tuning and sampling on this CPU, {r['date']}", "",
             f"- commit: {r['git_commit']}",
             f"- machine: {r['machine']}; threads {r['threads']}; torch {r['torch']}; 1-min load average "
             f"{r['load_after']} after the run{load}" + (f"; note: {r['note']}" if r["note"] else ""),
             f"- command: `{r['command']}`",
             f"- workload: veil's causal LM (MiniLM's weights as a decoder), the first {w['texts']} rt-polarity train "
             f"texts cut to {w['max_tokens']} word pieces ({w['mean_predicted_tokens']} predicted tokens per text "
             f"on average); fine-tuning {w['steps']} steps at batch {w['batch']}; {w['samples']} samples of "
             f"{w['new_tokens']} new tokens after \"{PROMPT}\", top-40", "",
             "| what | seconds | tokens/s | ratio to its reference |", "|---|---:|---:|---:|",
             f"| scoring (forward only; the fine-tuning's reference) | {r['scoring']['seconds']} | "
             f"{r['scoring']['tokens_per_s']} | |",
             f"| fine-tuning ({r['fine_tuning']['seconds_per_step']} s per step) | {r['fine_tuning']['seconds']} | "
             f"{r['fine_tuning']['tokens_per_s']} | {r['fine_tuning']['ratio_to_scoring']} |",
             f"| transformers `generate` (the sampling's reference) | {r['transformers_generate']['seconds']} | "
             f"{r['transformers_generate']['tokens_per_s']} | |",
             f"| veil's sampling | {r['sampling']['seconds']} | {r['sampling']['tokens_per_s']} | "
             f"{r['sampling_ratio_to_generate']} |"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=512, help="rt-polarity train texts (default 512)")
    parser.add_argument("--max-tokens", type=int, default=64, help="word pieces a text is cut to (default 64)")
    parser.add_argument("--steps", type=int, default=20, help="fine-tuning steps timed (default 20)")
    parser.add_argument("--batch", type=int, default=16, help="texts per step (default 16)")
    parser.add_argument("--samples", type=int, default=32, help="texts sampled (default 32)")
    parser.add_argument("--new-tokens", type=int, default=32, help="tokens sampled per text (default 32)")
    parser.add_argument("--threads", type=int, default=2, help="torch and BLAS/OpenMP threads (default 2)")
    parser.add_argument("--busy", type=int, default=0, help="busy loops beside the timed runs (default 0)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print the section; leave the results file alone")
    args = parser.parse_args(argv)
    for name in ("texts", "max_tokens", "steps", "batch", "samples", "new_tokens", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if not 0 <= args.busy <= 16:
        parser.error("--busy must be in [0, 16]")
    from _record import measure_and_publish

    return measure_and_publish(args, HERE.parent, run, markdown)


if __name__ == "__main__":
    sys.exit(main())
