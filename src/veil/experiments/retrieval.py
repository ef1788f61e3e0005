"""Representation leakage experiments: the TextHide paper's Tables 3 (RSS) and 8 (RepRecon).

The attacker owns the public encoder and an index of (text, original
representation) pairs for the whole corpus (the paper's worst case). RSS
queries are 1,000 corpus examples whose representations are protected per
setting (baseline = none, mix-only = TextHide (0, 4), TextHide (256, 4));
RepRecon trains its MLP on (protected, original) pairs of the train split and
attacks 500 dev queries. Every table has the random-guess floor. Masks come
from the OS CSPRNG; ``seed`` fixes the query sample, the mixing, RepRecon's
initialisation and the random guesses.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError
from veil.experiments.records import ResultRecord

__all__ = ["ATTACKS", "run_retrieval", "write_records"]

ATTACKS = ("rss", "reprecon")
DEFAULT_QUERIES = {"rss": 1000, "reprecon": 500}


def _settings(defense: str, m: int | None, k: int) -> tuple[tuple[str, int | None, int], ...]:
    from veil.attacks.retrieval import PAPER_SETTINGS

    if defense == "all":
        return PAPER_SETTINGS
    if defense == "none":
        return (("baseline", 0, 1),)
    if defense == "texthide":
        label = "mix-only" if m == 0 and k > 1 else "texthide" if (m, k) == (256, 4) else f"texthide-m{m}-k{k}"
        return ((label, m, k),)
    raise InvalidParameterError(f"unknown defense {defense!r}; use all, none or texthide")


def run_retrieval(corpus: str, attack: str, *, defense: str = "all", m: int | None = 256, k: int = 4,
                  queries: int | None = None, seed: int = 0, random_guess: bool = True,
                  progress: bool = True) -> list[ResultRecord]:
    """Run one attack on one corpus for the requested defense settings; returns one record per setting."""
    import veil.corpora as vc
    from veil.attacks.retrieval import SimilaritySearch, reprecon_table, rss_table, sample_queries
    from veil.encoders import TextEncoder

    if attack not in ATTACKS:
        raise InvalidParameterError(f"unknown attack {attack!r}; use one of {', '.join(ATTACKS)}")
    start = time.perf_counter()
    data = vc.load(corpus)
    X = TextEncoder("minilm").encode_corpus(data, None, progress=progress)
    index = SimilaritySearch(data.texts, X, labels=data.labels if data.task == "classification" else None)
    n = queries or DEFAULT_QUERIES[attack]
    settings = _settings(defense, m, k)
    if attack == "rss":
        q = sample_queries(len(index), n, rng=seed)
        results = rss_table(index, q, settings=settings, rng=seed, text_embeddings=X, random_guess=random_guess)
    else:
        q = sample_queries(len(index), n, rng=seed, candidates=data.indices("dev"))
        results = reprecon_table(index, data.indices("train"), q, settings=settings, rng=seed, text_embeddings=X,
                                 random_guess=random_guess, progress=progress)
    records = []
    for res in results:
        rec = res.to_record("retrieval", f"{corpus}-{attack}-{res.setting}")
        rec.config.update({"corpus": corpus, "attack_name": attack, "setting": res.setting, "seed": seed,
                           "index_size": len(index), "encoder": "minilm (all-MiniLM-L6-v2), mean pooling"})
        rec.wall_time_s = res.wall_time_s
        records.append(rec)
    if records:
        records[0].extra["total_wall_time_s"] = time.perf_counter() - start
    return records


def write_records(records: list[ResultRecord], root: str | Path = "results/retrieval") -> list[Path]:
    return [rec.write(Path(root) / f"{rec.experiment}.json") for rec in records]
