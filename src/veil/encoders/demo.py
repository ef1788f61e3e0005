"""``veil demo`` / ``make demo``: encode a real corpus and sanity-check retrieval on it.

Two checks that any working encoder + search stack must pass:

1. Self-retrieval: a subset of the split is re-encoded with a different batch
   size and without the cache; each re-encoded vector's nearest neighbour in
   the index must be its own text (identity rate 1.0).
2. Semantic neighbours: for every text, its nearest *other* text should share
   its label more often than the majority-class rate (1-NN label agreement).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError

__all__ = ["run_demo", "print_demo"]


def _nearest(queries: np.ndarray, index: np.ndarray, exclude_self: bool = False, chunk: int = 1024):
    import torch

    q = torch.from_numpy(np.ascontiguousarray(queries))
    x = torch.from_numpy(np.ascontiguousarray(index))
    best_i, best_s = [], []
    for start in range(0, len(q), chunk):
        sims = q[start:start + chunk] @ x.T
        if exclude_self:
            rows = torch.arange(sims.shape[0])
            sims[rows, rows + start] = -float("inf")
        s, i = sims.max(dim=1)
        best_i.append(i)
        best_s.append(s)
    return torch.cat(best_i).numpy(), torch.cat(best_s).numpy()


def run_demo(corpus: str = "rt-polarity", split: str = "dev", limit: int | None = None,
             self_check: int = 200, examples: int = 3) -> dict[str, Any]:
    import veil.corpora as vc
    from veil.encoders import TextEncoder

    if limit is not None and limit < 2:
        raise InvalidParameterError(f"limit must be >= 2 (or omitted), got {limit}")
    data = vc.load(corpus).split(split)
    if limit is not None:
        if limit > len(data):
            import warnings

            from veil.errors import DataWarning

            warnings.warn(f"--limit {limit} is more than the {len(data)} texts of {corpus}/{split}; using all "
                          f"{len(data)}", DataWarning, stacklevel=2)
        data = data.select(np.arange(min(limit, len(data))))
    start = time.perf_counter()
    encoder = TextEncoder("minilm")
    emb = encoder.encode_corpus(data, None, cache=True, batch_size=64)
    encode_s = time.perf_counter() - start

    n_self = min(self_check, len(data))
    again = encoder.encode(data.texts[:n_self], batch_size=17, progress=False)
    idx, _ = _nearest(again, emb)
    identity = float(np.mean(idx == np.arange(n_self)))
    max_abs_diff = float(np.max(np.abs(again - emb[:n_self])))

    nn, sims = _nearest(emb, emb, exclude_self=True)
    result: dict[str, Any] = {
        "corpus": corpus, "split": split, "n": len(data), "model": encoder.model_name, "dim": encoder.dim,
        "encode_seconds": encode_s, "self_retrieval_identity": identity, "self_retrieval_n": n_self,
        "reencode_max_abs_diff": max_abs_diff,
    }
    if data.task == "classification":
        agree = float(np.mean(data.labels[nn] == data.labels))
        majority = float(np.max(np.bincount(data.labels)) / len(data))
        result.update({"nn_label_agreement": agree, "majority_rate": majority})
    order = np.argsort(-sims)
    picks = [int(order[len(order) // 4]), int(order[len(order) // 2]), int(order[3 * len(order) // 4])][:examples]
    result["examples"] = [{"query": data.texts[i], "neighbour": data.texts[nn[i]], "cosine": float(sims[i])}
                          for i in picks]
    return result


def print_demo(result: dict[str, Any], console: Any) -> None:
    console.print(f"[bold]veil demo[/bold]: {result['corpus']}/{result['split']}, {result['n']} texts, "
                  f"{result['model']} (d={result['dim']}), encoded in {result['encode_seconds']:.1f} s")
    ok = result["self_retrieval_identity"] == 1.0
    console.print(f"self-retrieval: {result['self_retrieval_identity']:.3f} of {result['self_retrieval_n']} "
                  f"re-encoded texts find themselves (max |diff| {result['reencode_max_abs_diff']:.1e}) "
                  + ("[green]OK[/green]" if ok else "[red]FAILED[/red]"))
    if "nn_label_agreement" in result:
        better = result["nn_label_agreement"] > result["majority_rate"]
        console.print(f"1-NN label agreement: {result['nn_label_agreement']:.3f} vs majority-class rate "
                      f"{result['majority_rate']:.3f} " + ("[green]OK[/green]" if better else "[red]FAILED[/red]"))
    for ex in result["examples"]:
        console.print(f"- cos {ex['cosine']:.2f}", highlight=False)
        console.print(f"    query:     {ex['query']}", markup=False, highlight=False)
        console.print(f"    neighbour: {ex['neighbour']}", markup=False, highlight=False)
