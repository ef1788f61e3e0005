"""Summaries of corpora for ``veil corpora list`` and ``veil corpora show``."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np

from veil.corpora import info, load, names
from veil.corpora.base import SPLITS
from veil.corpora.fetch import corpus_dir, is_pulled

__all__ = ["list_rows", "describe", "print_description"]


def list_rows() -> list[dict[str, Any]]:
    """One row per built-in corpus; ``size`` is the cleaned size once pulled, else None."""
    rows = []
    for name in names():
        meta = info(name)
        size = None
        if is_pulled(name):
            size = json.loads((corpus_dir(name) / "meta.json").read_text(encoding="utf-8"))["size"]
        rows.append({"name": name, "task": meta["task"], "size": size, "raw_rows": meta["expected"].get("raw_rows"),
                     "documents": meta["documents"], "package": meta["package"], "registry": meta["registry"],
                     "license": meta["license"], "pulled": meta["pulled"], "description": meta["description"]})
    return rows


def _attr_summary(values: list[Any]) -> dict[str, Any]:
    hashable = [v if not isinstance(v, list) else tuple(v) for v in values]
    counts = Counter(hashable)
    return {"distinct": len(counts), "top": [[str(k), c] for k, c in counts.most_common(3)]}


def describe(name_or_path: str, *, examples: int = 3, **options: Any) -> dict[str, Any]:
    """Counts per split, label balance, attributes, cleaning stats and examples."""
    corpus = load(name_or_path, **options)
    splits = {s: int(np.sum(corpus.splits == s)) for s in SPLITS}
    labels: dict[str, Any] = {}
    if corpus.task == "classification":
        labels = {s: corpus.label_counts(s) for s in SPLITS}
    elif corpus.task == "regression":
        y = corpus.labels
        labels = {"min": float(y.min()), "max": float(y.max()), "mean": float(y.mean()), "std": float(y.std())}
    rng_idx = corpus.indices("train")[:examples]
    shown = []
    for i in rng_idx:
        item = {"text": corpus.texts[i][:300] + ("..." if len(corpus.texts[i]) > 300 else "")}
        if corpus.labels is not None:
            lab = corpus.labels[i]
            item["label"] = corpus.label_names[int(lab)] if corpus.task == "classification" else float(lab)
        if corpus.documents is not None:
            item["sentences"] = len(corpus.documents[i])
        shown.append(item)
    desc = {
        "name": corpus.name, "task": corpus.task, "size": len(corpus), "splits": splits,
        "label_names": list(corpus.label_names) if corpus.label_names else None, "labels": labels,
        "attributes": {k: _attr_summary(v) for k, v in corpus.attributes.items()},
        "stats": corpus.stats, "provenance": [p.to_dict() for p in corpus.provenance], "examples": shown,
    }
    if corpus.documents is not None:
        lens = [len(d) for d in corpus.documents]
        desc["sentences_per_document"] = {"mean": float(np.mean(lens)), "min": int(min(lens)), "max": int(max(lens))}
    return desc


def print_description(desc: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    console.print(f"[bold]{desc['name']}[/bold]  task={desc['task'] or 'unlabelled'}  size={desc['size']}")
    if desc["provenance"]:
        p = desc["provenance"][0]
        console.print(f"source: {p['package']}=={p['version']} ({p['registry']}), license: {p['license']}")
        if p.get("note"):
            console.print(f"cleaning: {p['note']}")
    console.print("stats: " + ", ".join(f"{k}={v}" for k, v in desc["stats"].items()))
    table = Table(title="splits")
    table.add_column("split")
    table.add_column("n")
    label_cols = desc["label_names"] or []
    for lab in label_cols:
        table.add_column(lab)
    for s, n in desc["splits"].items():
        counts = desc["labels"].get(s, {}) if label_cols else {}
        table.add_row(s, str(n), *[str(counts.get(lab, 0)) for lab in label_cols])
    console.print(table)
    if desc["task"] == "regression":
        lab = desc["labels"]
        console.print(f"labels: min {lab['min']:.3g}, max {lab['max']:.3g}, mean {lab['mean']:.3g}, std {lab['std']:.3g}")
    if "sentences_per_document" in desc:
        s = desc["sentences_per_document"]
        console.print(f"sentences per document: mean {s['mean']:.1f}, min {s['min']}, max {s['max']}")
    for k, a in desc["attributes"].items():
        top = ", ".join(f"{v} ({c})" for v, c in a["top"])
        console.print(f"attribute [bold]{k}[/bold]: {a['distinct']} distinct; most common: {top}")
    for ex in desc["examples"]:
        console.print(f"- [{ex.get('label', '')}] {ex['text']}", markup=False, highlight=False)
