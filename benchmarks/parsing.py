"""Throughput of veil's biaffine parser (batched) against spaCy sm's parser, and of the random obfuscator.

On the first ``--n`` sentences of the silver test split (the same pre-tokenised sentences for both parsers):

* biaffine: ``veil.parsing.evaluate.predict_biaffine`` (length-sorted batches of ``--batch``; decoding
  included: argmax, and Edmonds' algorithm where the argmax is not a tree);
* spaCy sm: tok2vec + tagger + parser + attribute_ruler on ``Doc(words, spaces)`` (``nlp.pipe``, batch 256);
  spaCy also tags, the biaffine parser is given the tags;
* obfuscator: ``RandomSubstitution.obfuscate`` at level P3, OS-entropy draws (the release setting) and seeded.

Each is the median of ``--reps`` runs after one warm-up; torch runs with ``--threads`` threads. Prints a
Markdown section to paste into benchmarks/RESULTS.md (this script does not edit it) and one JSON line.

``--mlm`` measures veil's masked LM instead (no parser needed):

* training throughput (subword tokens/s) of ``--steps`` steps of veil's MLM step (whole-word masks, the decoder
  only at masked tokens, bf16 matrix products) against the reference in the same run: transformers'
  ``BertForMaskedLM(..., labels=...)`` step in fp32 (the decoder at every token), on the same batches of the
  silver train split (about 2,048 tokens each);
* attacker inference (sentences/s) at P3 on the first ``--n`` test sentences: the zero-shot attacker (one pass
  per candidate length 1..4), the fine-tuned attacker (one pass; untrained weights cost the same), against the
  frozen-MiniLM attacker's feature pass (one pass of MiniLM, the encoder both start from).

    python benchmarks/parsing.py [--n 1000] [--batch 64] [--reps 3] [--threads 1] [--model PATH]
    python benchmarks/parsing.py --mlm [--n 500] [--steps 20] [--threads 2] [--mlm-name mlm]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import time
import warnings


def _timed(fn, reps: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default=None)
    ap.add_argument("--mlm", action="store_true", help="measure veil's masked LM and its attackers instead")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--mlm-name", default="mlm")
    args = ap.parse_args()
    if args.mlm:
        return _mlm(args)

    import torch

    from veil.defenses.obfuscation import RandomSubstitution, TagVocabulary
    from veil.errors import PrivacyLeakWarning
    from veil.parsing.evaluate import predict_biaffine
    from veil.models.spacy_pipelines import load_spacy, parse_words
    from veil.parsing.train import load_parser
    from veil.parsing.treebank import load_treebank
    from veil.results import git_commit

    torch.set_num_threads(args.threads)
    test = load_treebank("test", limit=args.n)
    words = sum(map(len, test))
    net = load_parser(args.model)
    nlp = load_spacy("spacy-sm")
    vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in load_treebank("train"))
    secure = RandomSubstitution(vocabulary=vocab, level="P3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        seeded = RandomSubstitution(vocabulary=vocab, level="P3", rng=0)

    runs = {
        "biaffine (veil, batched)": _timed(lambda: predict_biaffine(net, test, batch_size=args.batch), args.reps),
        "spaCy sm (tok2vec+tagger+parser)": _timed(
            lambda: list(parse_words(nlp, [(t.words, t.spaces) for t in test])), args.reps),
        "random obfuscator P3 (OS entropy)": _timed(lambda: [secure.obfuscate(t.words, t.tags) for t in test],
                                                    args.reps),
        "random obfuscator P3 (seeded)": _timed(lambda: [seeded.obfuscate(t.words, t.tags) for t in test],
                                                args.reps),
    }
    rates = {k: len(test) / statistics.median(v) for k, v in runs.items()}
    ratio = rates["biaffine (veil, batched)"] / rates["spaCy sm (tok2vec+tagger+parser)"]
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    lines = [f"## parsing throughput, {stamp}", "", f"- commit: {git_commit()}",
             f"- machine: {platform.platform()}, torch {torch.__version__} with {args.threads} threads",
             f"- workload: first {len(test)} silver test sentences ({words} words); biaffine batch {args.batch}; "
             f"median of {args.reps} runs after a warm-up", "", "| what | sentences/s (median) | runs (s) |",
             "|---|---:|---|"]
    lines += [f"| {k} | {rates[k]:.1f} | {', '.join(f'{x:.2f}' for x in runs[k])} |" for k in runs]
    lines += ["", f"ratio biaffine / spaCy sm: **{ratio:.2f}**", ""]
    print("\n".join(lines))
    print(json.dumps({"sentences": len(test), "words": words, "rates": rates, "ratio": ratio, "runs": runs}))


def _mlm(args) -> None:
    import numpy as np
    import torch

    from veil.attacks.word_recovery import ContextualAttacker, AttackVocabulary, TunedMLMAttacker, ZeroShotMLMAttacker, \
        observe
    from veil.defenses.obfuscation import RandomSubstitution, TagVocabulary
    from veil.errors import PrivacyLeakWarning
    from veil.models.mlm import base_mlm, load_mlm
    from veil.parsing.treebank import load_treebank
    from veil.results import git_commit
    from veil.training.mlm import FULL_MLM, _Encoded, _masked_loss

    torch.set_num_threads(args.threads)
    train = load_treebank("train")
    rng = np.random.default_rng(0)
    sample = [train[i] for i in rng.permutation(len(train))[:4000]]
    mlm = load_mlm(args.mlm_name)
    enc = _Encoded(mlm.tokenizer, [(t.words, t.tags) for t in sample], FULL_MLM.max_length)
    batches = [enc.masked(rows, np.random.default_rng(k), FULL_MLM.open_rate, FULL_MLM.other_rate, mlm.mask_id,
                          mlm.tokenizer.pad_token_id)
               for k, rows in enumerate(enc.batches(FULL_MLM.batch_tokens, rng)[:args.steps + 1])]
    tokens = sum(int(att.sum()) for _, att, _ in batches[1:])

    def train_rate(model, step) -> float:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
        model.train()
        step(model, *batches[0]).backward()  # warm-up
        opt.zero_grad()
        t = time.perf_counter()
        for ids, att, labels in batches[1:]:
            loss = step(model, ids, att, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return tokens / (time.perf_counter() - t)

    ours = train_rate(base_mlm()[0], lambda m, i, a, lab: _masked_loss(m, i, a, lab, True)[0])
    ref = train_rate(base_mlm()[0], lambda m, i, a, lab: m(input_ids=i, attention_mask=a, labels=lab).loss)

    test = load_treebank("test", limit=args.n)
    vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        obf = RandomSubstitution(vocabulary=vocab, level="P3", rng=0).transform((t.words, t.tags) for t in test)
    text = observe(obf)
    public = [(t.words, t.tags) for t in train]
    zero = ZeroShotMLMAttacker(public, model=mlm)
    tuned = TunedMLMAttacker(public, model=mlm)
    minilm = ContextualAttacker(AttackVocabulary.build(t.words for t in train), vocab.words.keys())

    def infer(fn) -> float:
        t = time.perf_counter()
        fn()
        return len(text) / (time.perf_counter() - t)

    rates = {"veil-mlm (zero-shot, 4 passes)": infer(lambda: list(zero.scores(text))),
             "veil-mlm-tuned (1 pass)": infer(lambda: list(tuned.scores(text))),
             "frozen MiniLM attacker: feature pass (reference)": infer(lambda: minilm._features(text, False, "run"))}
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    lines = [f"## masked-LM throughput, {stamp}", "", f"- commit: {git_commit()}",
             f"- machine: {platform.platform()}, torch {torch.__version__} with {args.threads} threads",
             f"- training: {args.steps} steps of about {FULL_MLM.batch_tokens} tokens ({tokens} tokens) from the "
             f"silver train split, after a warm-up step; inference: the first {len(text)} silver test sentences at "
             f"P3 ({text.n_positions} replaced words), masked LM `{args.mlm_name}`", "",
             "| what | rate |", "|---|---:|",
             f"| MLM training, veil (bf16, decoder at masked tokens) | {ours:,.0f} tokens/s |",
             f"| MLM training, transformers BertForMaskedLM(labels=...) fp32 (reference) | {ref:,.0f} tokens/s |"]
    lines += [f"| {k} | {v:.1f} sentences/s |" for k, v in rates.items()]
    lines += ["", f"ratio veil / reference, training: **{ours / ref:.2f}**; zero-shot / one MiniLM pass: "
                  f"**{rates['veil-mlm (zero-shot, 4 passes)'] / rates['frozen MiniLM attacker: feature pass (reference)']:.2f}**", ""]
    print("\n".join(lines))
    print(json.dumps({"train_tokens_per_s": ours, "reference_tokens_per_s": ref, "inference": rates}))


if __name__ == "__main__":
    main()
