"""Attacks that observe ``vectors``: what each release kind looks like when read as vectors, and the retrieval cell.

Every release kind the bench makes is read here as vectors (:data:`veil.kinds.CONTAINS`): a ``vectors`` defense
through its verb ``protect``, a TextHide training run's encodings (mixed with the one-time key the scorer gets,
apart), a sentence-DP mechanism's document embeddings. Separation of what is seen from what is scored: the release
is made here, the attack is built with :meth:`~veil.attacks.base.Attack.for_bench` from
:class:`~veil.bench.cells.common.AttackResources` and gets only the :class:`~veil.attacks.base.Observation`; the
ground truth (query ids, mixing details) goes to the scorer only.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from veil.bench.cells.common import ALPHA, AttackResources, bench_block, cell_queries, finish, make_defense
from veil.errors import InvalidParameterError
from veil.results import ResultRecord

__all__ = ["AS_VECTORS", "VECTOR_RELEASES", "release_vectors", "rewrite_documents", "known_pairs", "retrieval_cell",
           "inversion_cell", "unmasked_inversion_cell", "inversion_record", "INVERSION_QUERIES", "score_retrieval",
           "score_inversion", "inversion_floor", "floor_what", "public_pairs"]

#: the most private items an inversion cell inverts (quick, full bench): correction costs about a second per text
INVERSION_QUERIES = (50, 200)


def _protected(defense: Any, data: Any, rows: np.ndarray) -> tuple[Any, Any]:
    from veil.attacks.base import Observation

    return Observation(defense.protect(data.X[rows]), defense=defense.config(), source="defense"), None


def _training_encodings(defense: Any, data: Any, rows: np.ndarray) -> tuple[Any, Any]:
    from veil.attacks.retrieval.observe import protect_with_truth

    obs, truth = protect_with_truth(data.X[rows], defense)
    return obs, truth


def _document_embeddings(defense: Any, data: Any, rows: np.ndarray) -> tuple[Any, Any]:
    from veil.attacks.base import Observation

    emb = defense.release_embeddings([data.documents[i] for i in rows])
    return Observation(emb, defense=defense.config(), source="defense"), None


def rewrite_documents(defense: Any, data: Any, rows: np.ndarray) -> tuple[list[list[str]], np.ndarray]:
    """Every sentence of each private item ``rows`` rewritten by the text defense (one ``transform`` of them all:
    one fresh draw per release, pseudonyms consistent over it), and each item's vector as anyone holding the text
    makes it: the mean of its rewritten sentences' MiniLM vectors. Returns (rewritten sentences per item, (n, d))."""
    from veil.encoders import TextEncoder

    sentences = [data.sentences[i] for i in rows]
    flat = defense.transform([s for item in sentences for s in item])
    E = TextEncoder("minilm").encode(flat, progress=False).astype(np.float64)
    cuts = np.cumsum([0] + [len(item) for item in sentences])
    X = np.stack([E[a:b].mean(axis=0) for a, b in zip(cuts[:-1], cuts[1:])]).astype(np.float32)
    return [list(flat[a:b]) for a, b in zip(cuts[:-1], cuts[1:])], X


def _rewritten(defense: Any, data: Any, rows: np.ndarray) -> tuple[Any, Any]:
    """``text``: every sentence of each private item rewritten by the defense (one fresh draw per release), then
    encoded with the public encoder as anyone holding the text can, and averaged per document."""
    from veil.attacks.base import Observation

    _, X = rewrite_documents(defense, data, rows)
    return Observation(X, defense=defense.config(), source="defense"), None


#: release kind -> how the bench makes that release of private rows and reads it as vectors:
#: ``(defense, data, rows) -> (Observation, truth or None)``
AS_VECTORS: dict[str, Callable[[Any, Any, np.ndarray], tuple[Any, Any]]] = {
    "vectors": _protected,
    "training-encodings": _training_encodings,
    "document-embeddings": _document_embeddings,
    "text": _rewritten,
}
#: the release kinds the bench makes and reads as vectors (the others have cells that read them in their own form,
#: :data:`veil.bench.cells.RUNNABLE_RELEASES`)
VECTOR_RELEASES = tuple(AS_VECTORS)


def release_vectors(cell: Any, data: Any, rows: np.ndarray) -> tuple[Any, Any]:
    """What an eavesdropper sees of the private items ``rows``, read as vectors, by the defense's release kind
    (through the kind's one verb): (Observation, mixing truth or None). The truth is for the scorer only."""
    from veil.attacks.retrieval import observe_original

    defense = make_defense(cell, data, record_details=True)
    kind = type(defense).releases
    if cell.defense == "none":
        return observe_original(data.X[rows]), None
    read = AS_VECTORS.get(kind)
    if read is None:
        raise InvalidParameterError(f"defense {cell.defense!r} releases {kind!r}, which the bench does not read as "
                                    f"vectors (it reads {', '.join(VECTOR_RELEASES)})")
    return read(defense, data, rows)


def _protect_public(defense: Any, P: np.ndarray) -> np.ndarray:
    return defense.protect(P)


def _encode_public(defense: Any, P: np.ndarray) -> np.ndarray:
    from veil.attacks.retrieval.observe import protect

    return protect(P, defense).vectors


#: release kind -> how the attacker's own public sentences come out of the same key: ``(defense, P) -> vectors``
_PUBLIC_PAIRS: dict[str, Callable[[Any, np.ndarray], np.ndarray]] = {
    "vectors": _protect_public,
    "training-encodings": _encode_public,
}


def public_pairs(defense: Any, P: np.ndarray) -> np.ndarray:
    """The attacker's own public vectors ``P`` as ``defense`` (with its key) releases them: RepRecon's known
    pairs are (this, P)."""
    kind = type(defense).releases
    if kind not in _PUBLIC_PAIRS:
        raise InvalidParameterError(f"no known pairs for a release of kind {kind!r}")
    return _PUBLIC_PAIRS[kind](defense, P)


def known_pairs(cell: Any, data: Any) -> tuple[np.ndarray, np.ndarray]:
    """(protected, original) pairs the attacker owns: the public train documents' releases (document corpora), or
    the corpus' public sentences protected with the cell's key (sentence corpora)."""
    if data.documents is not None:
        rows = data.splits["train"]
        obs, _ = release_vectors(cell, data, rows)
        return obs.vectors, data.X[rows]
    P = data.public_vectors
    defense = make_defense(cell, data)
    if cell.defense == "none":
        return P, P
    return public_pairs(defense, P), P


def retrieval_cell(cell: Any, data: Any) -> ResultRecord:
    """Any attack that retrieves from an index: the release of ``queries`` private items, scored by Identity
    (the query itself, and any of its mixed private sources) with exact tests against the random rate
    (:func:`score_retrieval`, which :func:`veil.attack` calls too)."""
    from veil.attacks.base import get_attack
    from veil.attacks.retrieval import sample_queries

    start = time.perf_counter()
    index, ids = data.index, data.private_ids
    q = sample_queries(len(index), cell_queries(cell, len(index), "index entries"), rng=cell.config.seed)
    obs, truth = release_vectors(cell, data, ids[q])
    resources = AttackResources(index=index, seed=cell.config.seed, data=data, cell=cell,
                                train_epochs=5 if cell.config.quick else 20)
    resources._lazy["known_pairs"] = lambda: known_pairs(cell, data)
    attacker = get_attack(cell.attack).for_bench(resources)
    rec, bench = score_retrieval(attacker, obs, q, truth=truth, tfidf=data.tfidf, text_embeddings=data.X[ids],
                                 setting=cell.id)
    return finish(rec, cell, data, start, bench)


def score_retrieval(attacker: Any, observation: Any, query_ids: np.ndarray, *, truth: Any = None, tfidf: Any = None,
                    text_embeddings: Any = None, setting: str = "") -> tuple[ResultRecord, dict[str, Any]]:
    """Run a retrieval attack on ``observation`` and score it as a bench cell does: the record (every metric, the
    exact tests) and its ``extra["bench"]`` block (success: Identity, or identity_any for a mixture, with its test
    against the random rate 1 / len(index)). ``query_ids`` (the index position behind each observed vector) and
    ``truth`` (mixing details) are the scorer's; the attacker gets ``observation`` only."""
    from veil.attacks.retrieval import evaluate_retrieval

    index = attacker.index
    res = evaluate_retrieval(attacker, observation, query_ids, truth=truth, tfidf=tfidf,
                             text_embeddings=text_embeddings, setting=setting, alpha=ALPHA)
    rec = res.to_record("bench", setting)
    name = "identity_any" if "identity_any" in res.metrics else "identity"
    verdict = res.significance[name]
    floor = bool(getattr(attacker, "floor", False))
    bench = bench_block(success=name, success_metric=res.metrics[name].to_dict(), comparable=not floor,
                        floor=floor or None,
                        random_rate=1.0 / len(index), test=verdict.to_dict(),
                        measure="re-identification: the attacker's answer is the private text itself"
                                + (" or one of the texts mixed into it" if name == "identity_any" else ""))
    rec.config["significance"] = {k: v.to_dict() for k, v in res.significance.items()}
    return rec, bench


def _inversion_floor(cell: Any, data: Any, attacker: Any, n: int) -> list[str]:
    """:func:`inversion_floor` on the corpus' public items (public sentences; public train documents), computed once
    per process for every cell of the corpus with this attacker, seed and size."""
    key = ("inversion-floor", n, cell.config.seed, str(attacker.inverter.manifest.get("sha256")), attacker.steps,
           attacker.beam)
    if key not in data._cache:
        pool = data.candidates if data.documents is not None else data.public_vectors
        data._cache[key] = inversion_floor(attacker, pool, n, cell.config.seed)
    return data._cache[key]


def inversion_floor(attacker: Any, pool: Any, n: int, seed: int) -> list[str]:
    """What the attack writes from the undefended vectors of ``n`` public items drawn uniformly from ``pool``
    (numpy ``default_rng([seed, 1])``): vectors that carry nothing about the private texts."""
    pick = np.random.default_rng([seed, 1]).integers(0, len(pool), size=n)
    return attacker.invert(np.asarray(pool, dtype=np.float32)[pick])


def inversion_cell(cell: Any, data: Any) -> ResultRecord:
    """Embedding inversion of the release of private items read as vectors: what the attack writes back, scored
    against each private text (token F1, BLEU-4, ROUGE-L, exact match, cosine, names; bootstrap intervals over the
    texts, :func:`veil.metrics.inversion.score_inversions`), and tested text by text (a paired sign-flip
    permutation test of token F1) against the floor: the same attack on the undefended vector of a uniformly drawn
    public item, which carries nothing about the private text. The nearest public sentence (from the inverter's
    own training sentences) is scored beside it. At most :data:`INVERSION_QUERIES` private items, drawn from those
    whose text is none of the inverter's training sentences (:func:`veil.bench.inversion.unseen_by_inverter`)."""
    from veil.attacks.base import get_attack
    from veil.bench.inversion import public_sentences_of, unseen_by_inverter

    start = time.perf_counter()
    resources = AttackResources(index=None, seed=cell.config.seed, data=data, cell=cell)
    attacker = get_attack(cell.attack).for_bench(resources)
    # only private items the inverter did not learn from (writing back a training sentence is memory, not inversion)
    ids, _ = unseen_by_inverter(data.private_ids, data.texts,
                                public_sentences_of(attacker.inverter, log=lambda _: None)[0])
    cap = INVERSION_QUERIES[0 if cell.config.quick else 1]
    want = min(cap, cell.config.n_queries)
    n = want if want <= len(ids) else cell_queries(cell, len(ids), "private items")
    rows = np.sort(np.random.default_rng(cell.config.seed).choice(ids, size=n, replace=False))
    obs, _ = release_vectors(cell, data, rows)
    texts = attacker.run(obs)
    return inversion_record(cell, attacker, _references(data, rows), texts, obs.vectors, obs.describe()["defense"],
                            _inversion_floor(cell, data, attacker, n), _floor_what(cell, data), cap, start, data)


def unmasked_inversion_cell(cell: Any, data: Any) -> ResultRecord:
    """Inversion of TextHide's encodings after unmasking (:mod:`veil.attacks.inversion.unmasked`): the eavesdropper
    sees the release of every train text (the inference queries, one each; or every encoding of a training run,
    ``epochs`` passes), recovers the masks from all of them, and inverts at most :data:`INVERSION_QUERIES` of
    them, drawn uniformly. Each text written back is scored as in :func:`inversion_cell` against the encoding's
    private text: for a mixture of k, its largest private source (the record also says how often the text is
    closer, by token F1, to another of its sources). ``unmask_cosine``: the cosine of each unmasked vector to that
    source's own vector (1 when the mask and the sign are right and nothing is mixed in)."""
    from veil.attacks.base import Observation, get_attack
    from veil.bench.cells.training_encodings import training_run
    from veil.metrics.stats import bootstrap_mean
    from veil.models.inverter import token_f1

    start = time.perf_counter()
    defense = make_defense(cell, data, record_details=True)
    if type(defense).releases == "training-encodings":
        obs, truth, tr = training_run(cell, data)
        private = np.asarray(truth.coefficients)[:, :truth.sources.shape[1]]
        sources = tr[np.asarray(truth.sources)]  # corpus rows of every encoding's private sources, slot 0 first
        largest = sources[np.arange(len(sources)), private.argmax(axis=1)]
        seen = "every encoding of one training run on the train split"
    else:
        tr = np.asarray(data.splits["train"])
        obs = Observation(defense.protect(data.X[tr]), defense=defense.config(), source="defense")
        sources, largest = tr[:, None], tr
        seen = "the inference query of every train text, once each"
    cap = INVERSION_QUERIES[0 if cell.config.quick else 1]
    want = min(cap, cell.config.n_queries)
    n = want if want <= len(obs) else cell_queries(cell, len(obs), "encodings")
    sel = np.sort(np.random.default_rng(cell.config.seed).choice(len(obs), size=n, replace=False))
    resources = AttackResources(index=None, seed=cell.config.seed, data=data, cell=cell)
    attacker = get_attack(cell.attack).for_bench(resources)
    unmasked = attacker.unmask(obs)[sel]
    texts = attacker.invert(unmasked)
    rows = largest[sel]
    Xr = data.X[rows].astype(np.float64)
    u = unmasked.astype(np.float64)
    cosine = np.sum(u * Xr, axis=1) / np.maximum(np.linalg.norm(u, axis=1) * np.linalg.norm(Xr, axis=1), 1e-12)
    extra_metrics = {"unmask_cosine": bootstrap_mean(cosine, seed=cell.config.seed)}
    if sources.shape[1] > 1:  # is the text closer to another private source of its mixture than to the largest?
        f1 = np.array([[token_f1(data.texts[j], t) for j in sources[i]] for i, t in zip(sel, texts)])
        best = f1.max(axis=1)
        own = np.array([token_f1(data.texts[j], t) for j, t in zip(rows, texts)])
        extra_metrics["closer_to_another_source"] = bootstrap_mean((best > own).astype(float), seed=cell.config.seed)
    described = {**obs.describe()["defense"], "observed": seen, "encodings_seen": int(len(obs))}
    return inversion_record(cell, attacker, _references(data, rows), texts, unmasked, described,
                            _inversion_floor(cell, data, attacker, n), _floor_what(cell, data), cap, start, data,
                            extra_config={"unmask": dict(attacker.last_unmask),
                                           "references": "the encoding's largest private source (k = 1: its text)"},
                            extra_metrics=extra_metrics)


def cut_short(manifest: dict[str, Any]) -> str | None:
    """A line for an inverter cut short by its minute cap (its success is then a lower bound), else None."""
    if manifest.get("stopped") != "budget":
        return None
    return (f"the inverter {manifest.get('name')} was cut short by its minute cap at step {manifest.get('steps')} "
            f"of {manifest.get('planned_steps')} (a weaker model than its configuration: its success is a lower "
            "bound)")


def _references(data: Any, rows: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The private texts of ``rows`` and their own MiniLM vectors (the scorer's references)."""
    return [data.texts[i] for i in rows], data.X[rows]


def _floor_what(cell: Any, data: Any) -> str:
    return floor_what("a public train document" if data.documents is not None else "a public sentence",
                      cell.config.seed)


def floor_what(item: str, seed: int) -> str:
    """How the inversion floor was drawn, as records say it."""
    return f"the same attack on the undefended vector of a uniformly drawn public item ({item}; numpy " \
           f"default_rng([{seed}, 1]))"


def inversion_record(cell: Any, attacker: Any, references: tuple[list[str], np.ndarray], texts: list[str],
                     seen: np.ndarray, defense: Any, floor: list[str], floor_what: str, cap: int, start: float,
                     data: Any, *, extra_config: dict[str, Any] | None = None,
                     extra_metrics: dict[str, Any] | None = None) -> ResultRecord:
    """The cell's record of an inversion attack: :func:`score_inversion`, stamped with the cell."""
    rec, bench = score_inversion(attacker, references, texts, seen, defense, floor, floor_what, cap,
                                 cell.config.seed, setting=cell.id, extra_config=extra_config,
                                 extra_metrics=extra_metrics)
    return finish(rec, cell, data, start, bench)


def score_inversion(attacker: Any, references: tuple[list[str], np.ndarray], texts: list[str], seen: np.ndarray,
                    defense: Any, floor: list[str], floor_what: str, cap: int, seed: int, *, setting: str = "",
                    extra_config: dict[str, Any] | None = None,
                    extra_metrics: dict[str, Any] | None = None) -> tuple[ResultRecord, dict[str, Any]]:
    """Score the texts an inversion attack wrote back against the private ``references`` (texts, and their own
    MiniLM vectors), beside the ``floor`` (the same attack on vectors unrelated to the private texts, tested text
    by text) and the nearest public sentence to the vectors it inverted (``seen``): the record and its
    ``extra["bench"]`` block, as a bench cell writes them (:func:`veil.attack` calls it too)."""
    from veil.attacks.inversion.baselines import NearestPublic
    from veil.bench.inversion import public_sentences_of
    from veil.metrics.inversion import paired_difference, person_names, score_inversions
    from veil.metrics.stats import paired_permutation_test

    refs, ref_vectors = references
    n = len(refs)
    public_texts, public_vectors, public = public_sentences_of(attacker.inverter, log=lambda _: None)
    nearest = NearestPublic(public_texts, public_vectors).run(seen)
    names = person_names(refs)
    encoder = attacker.encoder

    def score(hyps: list[str]) -> Any:
        return score_inversions(refs, hyps, reference_vectors=ref_vectors,
                                hypothesis_vectors=encoder.encode(hyps, progress=False), names=names,
                                seed=seed)

    scores = {"inverter": score(texts), "floor": score(floor), "nearest_public": score(nearest)}
    metrics = {f"{m}_{k}" if m != "inverter" else k: v for m, s in scores.items() for k, v in s.metrics().items()}
    metrics["gain_over_floor_token_f1"] = paired_difference(scores["inverter"], scores["floor"])
    metrics["gain_over_nearest_public_token_f1"] = paired_difference(scores["inverter"], scores["nearest_public"])
    metrics.update(extra_metrics or {})
    test = paired_permutation_test(scores["inverter"].token_f1, scores["floor"].token_f1, alpha=ALPHA, rng=seed)
    rec = ResultRecord(method="bench", experiment=setting,
                       config={"attack": attacker.config(), "defense": defense, "queries": int(n),
                               "query_cap": cap, "public": public, "floor": floor_what,
                               "references": "the whole private text (a document's every sentence)",
                               **(extra_config or {})},
                       metrics=metrics, wall_time_s=0.0,
                       extra={"examples": [{"original": refs[i], "inverter": texts[i], "floor": floor[i],
                                            "nearest-public": nearest[i]} for i in range(min(5, n))]})

    def fraction(m: Any) -> dict[str, Any]:
        return {"mean": m.mean / 100, "n": m.n, "ci_low": None if m.ci_low is None else m.ci_low / 100,
                "ci_high": None if m.ci_high is None else m.ci_high / 100, "ci_level": m.ci_level}

    bench = bench_block(success="token_f1", comparable=False, test=test.to_dict(),
                        success_metric=fraction(metrics["token_f1"]),
                        versus_success=fraction(metrics["floor_token_f1"]),
                        measure="inversion: token F1 of the text written back from each released vector against "
                                "the private text",
                        versus="the same attack on unrelated public vectors",
                        budget=cut_short(attacker.inverter.manifest))
    return rec, bench
