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

from veil.errors import InvalidParameterError
from veil.results import ResultRecord

__all__ = ["check_planned", "ATTACKS", "run_retrieval", "write_records", "planned_paths", "record_file_name"]

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
    from veil.encoders import TextEncoder, backend_identity

    if attack not in ATTACKS:
        raise InvalidParameterError(f"unknown attack {attack!r}; use one of {', '.join(ATTACKS)}")
    start = time.perf_counter()
    data = vc.load(corpus)
    encoder = TextEncoder("minilm")
    from veil.encoders.plan import announce_corpus

    announce_corpus(encoder, data, what=f"texts of {corpus} (every split: the attacker's search index is the whole "
                                        "corpus)")
    X = encoder.encode_corpus(data, None, progress=progress)
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
                           "index_size": len(index),
                           "encoder": "minilm (all-MiniLM-L6-v2), mean pooling" + encoder.backend_note,
                           **backend_identity(encoder)})
        rec.wall_time_s = res.wall_time_s
        records.append(rec)
    if records:
        records[0].extra["total_wall_time_s"] = time.perf_counter() - start
    return records


def record_file_name(corpus: str, attack: str, setting: str, *, m: int | None, k: int, queries: int,
                     seed: int) -> str:
    """``<corpus>-<attack>-<setting>-<m, k, queries, seed>.json``: runs of other sizes never collide."""
    from veil.outputs import tag

    named = setting in ("baseline", "random") or "-m" in setting  # the label already says m and k
    mk = {} if named else {"m": "inf" if m is None else m, "k": k}
    return f"{corpus}-{attack}-{setting}-{tag(**mk, q=queries, seed=seed)}.json"


def _setting_mk(setting: str, defense: str, m: int | None, k: int) -> tuple[int | None, int]:
    from veil.attacks.retrieval import PAPER_SETTINGS

    for label, sm, sk in _settings(defense, m, k) + tuple(PAPER_SETTINGS):
        if label == setting:
            return sm, sk
    return m, k


def planned_paths(corpus: str, attack: str, *, defense: str, m: int | None, k: int, queries: int | None,
                  seed: int, root: str | Path, random_guess: bool = True) -> list[Path]:
    """Every file one :func:`run_retrieval` call writes (known before the run)."""
    n = queries or DEFAULT_QUERIES.get(attack, 0)
    labels = [label for label, _, _ in _settings(defense, m, k)] + (["random"] if random_guess else [])
    return [Path(root) / record_file_name(corpus, attack, label, m=_setting_mk(label, defense, m, k)[0],
                                          k=_setting_mk(label, defense, m, k)[1], queries=n, seed=seed)
            for label in labels]


def check_planned(corpus: str, attack: str, *, defense: str, m: int | None, k: int, queries: int | None,
                  seed: int, root: str | Path, force: bool = False) -> list[Path]:
    """The planned paths (:func:`planned_paths`), each checked before any work: an existing record is refused
    (``force`` replaces it), naming the keys when it was made under another configuration and the fix when it is
    damaged (:func:`veil.outputs.existing_record`)."""
    from veil.outputs import existing_record

    paths = planned_paths(corpus, attack, defense=defense, m=m, k=k, queries=queries, seed=seed, root=root)
    requested = {"corpus": corpus, "attack_name": attack, "seed": seed,
                 "n_queries": queries or DEFAULT_QUERIES.get(attack, 0)}
    for path in paths:
        existing_record(path, requested, force=force, keep=False)
    return paths


def write_records(records: list[ResultRecord], root: str | Path | None = None) -> list[Path]:
    """Write each record atomically; ``root`` defaults to ``./veil-results/retrieval``."""
    from veil.outputs import default_results_dir

    root = Path(root if root is not None else default_results_dir("retrieval"))
    paths = []
    for rec in records:
        c = rec.config
        defense = c.get("defense") or {}
        name = record_file_name(c["corpus"], c["attack_name"], c["setting"], m=defense.get("m"),
                                k=defense.get("k", 1), queries=c["n_queries"], seed=c["seed"])
        paths.append(rec.write(root / name))
    return paths
