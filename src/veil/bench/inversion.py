"""``veil attack invert``: the text written back from one release, by the inverter and by the two baselines.

It lives with the bench because it runs on the bench's data and defenses (:func:`veil.bench.data.bench_data`, each
defense's ``bench_make``): the same slices, candidates and releases as the bench's cells. One cell = one corpus,
one release, one query sample. The release is what the bench reads as vectors
(:mod:`veil.bench.cells.vectors`):

* ``none``: the private texts' MiniLM vectors themselves (a sentence corpus: every text is private, as the
  bench's; the inverter never learned from rt-polarity or hutto-movies), or of a document corpus the mean of its
  sentences' vectors (the undefended document embedding, beside which the SentDP releases are read);
* ``deepcandidate`` / ``truncation`` at ``epsilon``: one epsilon-SentDP embedding per private (test) document of
  a document corpus, made by the defense from the bench's public (train) documents, with a fresh key from the
  OS CSPRNG;
* ``texthide-inference`` with a pool of ``m`` masks: TextHide's inference release of every private text of a
  sentence corpus (one pool mask each; the pool from the OS CSPRNG). The eavesdropper sees all of them, recovers
  the pool (:class:`~veil.attacks.texthide.mask_recovery.MaskRecovery`, its statistics from the inverter's own
  public training sentences: public text of other domains) and unmasks every encoding
  (:func:`veil.attacks.inversion.unmasked.unmask`); the methods below see the unmasked vectors of the queried
  texts, and ``unmask_cosine`` says how close those are to the texts' own vectors. The queried texts are the same
  draw as ``none``'s on the same corpus and seed, so the two records compare text by text.

Every method sees the same released vectors (one release per cell) and nothing else of the private texts:

* ``inverter``: veil's inverter (``veil models train inverter``), with correction by re-embedding
  (:mod:`veil.attacks.inversion.correct`); the record keeps the correction curve (quality and seconds per text at
  every step);
* ``nearest-public`` and ``bag-of-words`` (:mod:`veil.attacks.inversion.baselines`), built from the inverter's own
  public training sentences and their vectors.

* ``metric-dp`` at ``epsilon`` / ``redaction`` with an ``operator``: every sentence of each private (test) document
  of a document corpus rewritten by the defense as the bench makes it (one release, fresh OS-CSPRNG draws), read
  as anyone holding the text reads it: the mean of its sentences' MiniLM vectors
  (:func:`veil.bench.cells.vectors.rewrite_documents`). The record also scores the **released text itself**
  against the original (what a reader of the release gets directly, beside which the inverter's output of its
  vector is read).

For a document release the record also inverts the **floor**: a uniformly drawn public candidate per document
(what DeepCandidate releases when its choice carries no information), scored against the same documents, and the
paired difference says whether the release gives the inverter anything beyond it. Released document vectors are
L2-normalised before inversion (the attacker's choice: MiniLM vectors are unit length, a mean of them is not).

Scores (:func:`veil.metrics.inversion.score_inversions`): token F1, exact match, ROUGE-L, corpus BLEU-4, the
cosine of the reconstruction's MiniLM vector with the original's, PERSON names recovered, each with a percentile
bootstrap interval over the queried texts; gains are paired bootstrap differences on the same texts. Document
references are the whole document (every method is scored against the same reference).

Records are resumable: a record is reused only if its cell (and encoder backend) match the request.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError

__all__ = ["METHODS", "RELEASES", "InversionCell", "record_path", "run_inversion", "check_corpus",
           "public_sentences_of"]

#: what writes text back from a vector: the inverter (with correction) and the two baselines
METHODS = ("inverter", "nearest-public", "bag-of-words")
#: the releases a cell inverts: none (the vectors), one epsilon-SentDP document embedding per document, TextHide's
#: inference vectors, or a text release (word-level metric DP, Presidio redaction) read as its MiniLM vector
RELEASES = ("none", "deepcandidate", "truncation", "texthide-inference", "metric-dp", "redaction")
_SENTDP_RELEASES = ("deepcandidate", "truncation")
#: releases of rewritten text: the attacker inverts the public encoder's vector of each released document
_TEXT_RELEASES = ("metric-dp", "redaction")
#: releases made per document of a document corpus (a floor cell: a random public candidate inverted alike)
_DOCUMENT_RELEASES = _SENTDP_RELEASES + _TEXT_RELEASES
_EPSILON_RELEASES = _SENTDP_RELEASES + ("metric-dp",)
#: targets the correction searches together unless a cell says otherwise (correct()'s default, with which every
#: record before --batch-size was made)
CORRECTION_BATCH = 16
#: examples kept in a record (the first queried texts)
EXAMPLES = 8


@dataclass(frozen=True)
class InversionCell:
    """One inversion run (recorded in full as the record's ``config["cell"]``)."""

    corpus: str = "rt-polarity"
    release: str = "none"
    epsilon: float | None = None
    queries: int = 200
    inverter: str = "inverter"
    steps: int = 3
    beam: int = 4
    quick: bool = True
    seed: int = 0
    m: int | None = None
    operator: str | None = None
    #: re-embed only this many word edits per text and step, those the cosine's gradient ranks highest (None: every
    #: edit); :func:`veil.attacks.inversion.correct.correct`'s ``shortlist``
    shortlist: int | None = None
    #: targets searched together (:func:`~veil.attacks.inversion.correct.correct`'s ``batch_size``); larger batches
    #: amortise the decoder's per-token overhead
    batch_size: int = CORRECTION_BATCH

    def __post_init__(self) -> None:
        from veil.defenses.redaction.presidio import OPERATORS
        from veil.validation import check_int

        if self.release not in RELEASES:
            raise InvalidParameterError(f"unknown release {self.release!r}; use one of {', '.join(RELEASES)}")
        if self.release in _EPSILON_RELEASES:
            e = self.epsilon
            if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e) or e <= 0:
                raise InvalidParameterError(f"--epsilon must be a finite number > 0 for {self.release}, got {e!r}")
        elif self.epsilon is not None:
            raise InvalidParameterError(f"--epsilon applies to {', '.join(_EPSILON_RELEASES)} only, not to "
                                        f"{self.release!r}")
        if self.release == "redaction":
            if self.operator not in OPERATORS:
                raise InvalidParameterError(f"redaction needs --operator, one of {', '.join(OPERATORS)}, got "
                                            f"{self.operator!r}")
        elif self.operator is not None:
            raise InvalidParameterError(f"--operator applies to redaction only, not to {self.release!r}")
        if self.release == "texthide-inference":
            hint = " (--m: the number of secret masks in TextHide's pool, e.g. 256)"
            if self.m is None:
                raise InvalidParameterError(f"texthide-inference needs m{hint}")
            check_int("m", self.m, minimum=1, hint=hint)
        elif self.m is not None:
            raise InvalidParameterError(f"--m applies to texthide-inference only, not to {self.release!r}")
        check_int("queries", self.queries, minimum=1)
        check_int("steps", self.steps, minimum=0)
        check_int("beam", self.beam, minimum=1)
        check_int("seed", self.seed, minimum=0)
        if self.shortlist is not None:
            check_int("shortlist", self.shortlist, minimum=1, hint=" (--shortlist: edits re-embedded per text and "
                                                                   "step; leave it out to re-embed every edit)")
        check_int("batch_size", self.batch_size, minimum=1)

    @property
    def label(self) -> str:
        """``none``, ``<release>-eps<epsilon>``, ``texthide-inference-m<m>`` or ``redaction-<operator>``."""
        if self.m is not None:
            return f"{self.release}-m{self.m}"
        if self.operator is not None:
            return f"{self.release}-{self.operator}"
        return self.release if self.epsilon is None else f"{self.release}-eps{float(self.epsilon):g}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["epsilon"] is not None:
            d["epsilon"] = float(d["epsilon"])
        for key in ("m", "operator", "shortlist"):  # records made before these options existed hold none of them
            if d[key] is None:
                del d[key]
        if d["batch_size"] == CORRECTION_BATCH:
            del d["batch_size"]
        return d


def record_path(root: str | Path, cell: InversionCell) -> Path:
    """``<corpus>-<release>-<inverter>-<steps, beam, queries, slice, seed>.json``."""
    from veil.outputs import tag

    batch = None if cell.batch_size == CORRECTION_BATCH else cell.batch_size  # earlier records' names hold none
    parts = tag(steps=cell.steps, beam=cell.beam, q=cell.queries, seed=cell.seed, sl=cell.shortlist, b=batch)
    return Path(root) / (f"{cell.corpus}-{cell.label}-{cell.inverter}-{parts}"
                         f"{'' if cell.quick else '-full'}.json")


def _requested(cell: InversionCell) -> dict[str, Any]:
    from veil.encoders.backends import backend_identity

    return {**cell.to_dict(), **backend_identity(None)}


def _released(cell: InversionCell, data: Any, ids: np.ndarray, public_vectors: np.ndarray,
              log: Callable[[str], None]) -> tuple[np.ndarray, dict[str, Any], list[str] | None]:
    """The released vectors of the queried items (for TextHide: unmasked by the attacker), the release's public
    description, and for a text release the released documents themselves (else None)."""
    if cell.release == "none":
        return data.X[ids].astype(np.float32), {"defense": "none"}, None
    if cell.release == "texthide-inference":
        return (*_unmasked_texthide(cell, data, ids, public_vectors, log), None)
    from veil.defenses.base import get_defense

    if cell.release in _TEXT_RELEASES:  # the released text, read as anyone holding it reads it: its MiniLM vector
        from veil.bench.cells.vectors import rewrite_documents

        setting = {"operator": cell.operator} if cell.release == "redaction" else {"epsilon": float(cell.epsilon)}
        defense = get_defense(cell.release).bench_make(setting, data, rng=None)
        log(f"rewriting the {len(ids)} private documents with {cell.label} and encoding them")
        rewritten, X = rewrite_documents(defense, data, ids)
        return X, {**defense.config(), "read_as": "the mean of the released sentences' MiniLM vectors per document"
                   }, [" ".join(doc) for doc in rewritten]
    defense = get_defense(cell.release).bench_make({"epsilon": float(cell.epsilon)}, data, rng=None)
    emb = defense.release_embeddings([data.documents[i] for i in ids])
    return np.asarray(emb, dtype=np.float32), dict(defense.config()), None


def _unmasked_texthide(cell: InversionCell, data: Any, ids: np.ndarray, public_vectors: np.ndarray,
                       log: Callable[[str], None]) -> tuple[np.ndarray, dict[str, Any]]:
    """TextHide's inference release of every private text (a fresh OS-CSPRNG pool), the pool recovered from all of
    them and each unmasked; the unmasked vectors of ``ids``."""
    from veil.attacks.base import Observation
    from veil.attacks.inversion.unmasked import recover_and_unmask
    from veil.attacks.texthide.mask_recovery import MaskRecovery
    from veil.defenses.texthide.inference import TextHideInference

    private = np.asarray(data.private_ids)
    defense = TextHideInference(m=int(cell.m), dim=data.dim)
    obs = Observation(defense.protect(data.X[private]), defense=defense.config(), source="defense")
    recovery = MaskRecovery.from_public(public_vectors, source="the inverter's public training sentences",
                                        rng=cell.seed)
    log(f"recovering TextHide's pool from the {len(obs)} inference encodings")
    Z, found = recover_and_unmask(recovery, obs)
    pos = {int(r): i for i, r in enumerate(private)}
    log(f"{found['masks_found']} masks found, {found['assigned']} of {found['encodings']} encodings assigned")
    return Z[[pos[int(i)] for i in ids]], {**defense.config(), "observed": "the inference encoding of every private "
                                           "text, once each", "unmask": found, "mask_recovery": recovery.config()}


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def public_sentences_of(inverter: Any, log: Callable[[str], None] = print
                        ) -> tuple[list[str], np.ndarray, dict[str, Any]]:
    """The inverter's own public training sentences and their vectors (the baselines' public data), and what the
    record says about them."""
    from veil.training.inverter import InverterConfig, inverter_training_data

    cfg = dict(inverter.manifest["config"])
    cfg["sources"] = tuple((s, c) for s, c in cfg["sources"])
    cfg["exclude"] = tuple(cfg["exclude"])
    train, _, data = inverter_training_data(InverterConfig(**cfg), log=log, progress=True)
    return list(train.texts), np.asarray(train.vectors, dtype=np.float32), {
        "sentences": data["sentences"], "corpora": sorted(data["corpora"]), "texts_sha256": data["texts_sha256"],
        "what": "the inverter's own training sentences (public train splits) and their MiniLM vectors"}


#: the bag-of-words predictor's budget in every inversion record: a step cap, early stopping on its own held-out
#: token F1 (evaluated every ``eval_every`` steps, ``patience`` evaluations without a gain), and a minute cap that
#: only marks a fit as cut short (such a fit is not cached, so no record reuses it). On the full inverter's 244,032
#: public sentences 5000 steps stopped still rising (+1.0 held-out token F1 over the last 1000), hence the cap of
#: 40000 with early stopping
BAG_OF_WORDS = {"max_steps": 40000, "eval_every": 250, "patience": 8, "max_minutes": 120.0}


def bag_of_words(texts: list[str], vectors: np.ndarray, public: dict[str, Any], encoder: dict[str, Any], seed: int,
                 log: Callable[[str], None] = print) -> Any:
    """The bag-of-words baseline fitted on the public sentences (:data:`BAG_OF_WORDS`), cached under
    ``VEIL_HOME/attackers/bag-of-words/`` by the sha256 of the public texts and of their vectors (which differ
    slightly between encoder backends), the encoder, the settings and the seed: it
    holds public material only, and a fit recomputes it exactly, so every record on the same public set reads the
    same predictor. A damaged file is refitted with a warning; a fit cut short by the minute cap is not cached."""
    import hashlib
    import json
    import warnings

    from veil._io import veil_home, writable_dir
    from veil.attacks.inversion.baselines import BagOfWords
    from veil.encoders import CacheWarning
    from veil.errors import CacheCorruptError

    vectors_sha256 = hashlib.sha256(np.ascontiguousarray(vectors, dtype=np.float32).tobytes()).hexdigest()
    key = json.dumps({"texts_sha256": public["texts_sha256"], "vectors_sha256": vectors_sha256,
                      "sentences": len(texts), "encoder": encoder,
                      "settings": BAG_OF_WORDS, "seed": seed, "format": BagOfWords.FORMAT}, sort_keys=True)
    path = veil_home() / "attackers" / "bag-of-words" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt"
    if path.is_file():
        try:
            bow = BagOfWords.load(path)
            log(f"bag-of-words predictor: {path} (cached, fitted on the same public sentences)")
            return bow
        except CacheCorruptError as exc:
            warnings.warn(f"{exc}; refitting it", CacheWarning, stacklevel=2)
    writable_dir(path.parent)
    log(f"fitting the bag-of-words predictor on {len(texts):,} public sentences (at most "
        f"{BAG_OF_WORDS['max_steps']:,} steps; cached for the next record)")
    bow = BagOfWords(texts, vectors, rng=seed, log=log, **BAG_OF_WORDS)
    if bow.stopped != "max_minutes":
        bow.save(path)
    return bow


def unseen_by_inverter(ids: Any, texts: Sequence[str], public_texts: Sequence[str]) -> tuple[np.ndarray, int]:
    """The private ``ids`` whose text is none of the inverter's public training sentences (compared exactly), and
    how many were left out: an inverter (or the nearest public sentence) that writes back a sentence it learned
    from measures memory, not inversion. A corpus the inverter never learned from loses nothing."""
    public = set(public_texts)
    ids = np.asarray(ids)
    keep = np.array([texts[i] not in public for i in ids], dtype=bool)
    return ids[keep], int((~keep).sum())


def run_inversion(cell: InversionCell, root: str | Path, *, force: bool = False,
                  log: Callable[[str], None] = print) -> Path:
    """Run ``cell`` (or keep its record when one made under the same cell exists) and return the record's path."""
    from veil.outputs import existing_record

    path = record_path(root, cell)
    requested = _requested(cell)
    # the record's configuration: the cell and the bag-of-words baseline's budget (another budget is another result)
    # and the query rule (only private items the inverter did not learn from)
    want = {**requested, "bag_of_words": dict(BAG_OF_WORDS), "unseen_queries": True}

    def view(stored: dict[str, Any]) -> dict[str, Any]:
        bow = stored.get("bag_of_words") or {}
        return {**(stored.get("cell") or {}), "bag_of_words": {k: bow.get(k) for k in BAG_OF_WORDS},
                "unseen_queries": bool((stored.get("queries") or {}).get("unseen"))}

    if existing_record(path, want, force=force, view=view) is not None:
        log(f"{path}: kept (same configuration)")
        return path
    check_corpus(cell)  # before the inverter loads (tens of seconds) and before any encoding
    from veil.models.inverter import load_inverter

    inverter = load_inverter(cell.inverter)  # before any work: a missing model names the command that trains it
    return _run(cell, inverter, path, requested, log)


def check_corpus(cell: InversionCell) -> None:
    """The cell's corpus exists, is pulled and suits its release, as the bench decides it (the release's defense
    lists the tasks it runs on; :func:`veil.bench.data.corpus_task`): a document corpus for the SentDP releases,
    which release one embedding per document, a sentence corpus for texthide-inference; a typed error naming
    corpora that fit otherwise. Reads the pulled corpus only (fast)."""
    from veil.bench.data import corpus_task, load_corpus
    from veil.defenses.base import get_defense

    corpus = load_corpus(cell.corpus)  # an unknown or unpulled corpus is a typed error naming the fix
    task = corpus_task(corpus)
    if task is None:
        raise InvalidParameterError(f"{cell.corpus} has no classification labels, so the bench has no slice of it to "
                                    "invert; use a sentence corpus (e.g. --corpus rt-polarity) or a document corpus "
                                    "(e.g. --corpus drug-reviews)")
    if cell.release != "none" and task not in get_defense(cell.release).tasks:
        kind, other = (("a sentence", "a document corpus (e.g. --corpus drug-reviews)")
                       if corpus.documents is None else ("a document", "a sentence corpus (e.g. --corpus rt-polarity)"))
        what = ("rewritten documents (the bench runs it on document corpora)" if cell.release in _TEXT_RELEASES
                else f"one embedding per {'document' if cell.release in _DOCUMENT_RELEASES else 'sentence'}")
        raise InvalidParameterError(f"{cell.release} releases {what}, and {cell.corpus} is {kind} corpus; use "
                                    f"{other}")


def _run(cell: InversionCell, inverter: Any, path: Path, requested: dict[str, Any],
         log: Callable[[str], None]) -> Path:
    from veil.attacks.inversion.baselines import NearestPublic
    from veil.bench.data import bench_data, bench_sentence_texts
    from veil.encoders import TextEncoder
    from veil.metrics.inversion import paired_difference, person_names, score_inversions
    from veil.models.inverter import encoder_identity
    from veil.results import ResultRecord

    start = time.perf_counter()
    encoder = TextEncoder(inverter.manifest["encoder"]["name"])
    # the undefended vectors of a sentence corpus: only the queried texts are encoded (the query costs what --limit
    # asks, not the corpus); every other release reads the bench's encoded slice (TextHide's pool is recovered from
    # every private text's encoding, SentDP's candidates are the public documents)
    items = bench_sentence_texts(cell.corpus, cell.quick) if cell.release == "none" else None
    data = bench_data(cell.corpus, cell.quick) if items is None else None
    if data is not None:
        items, private_ids = data.texts, data.private_ids
    else:
        private_ids = np.arange(len(items))
    public_texts, public_vectors, public = public_sentences_of(inverter, log)
    private, seen = unseen_by_inverter(private_ids, items, public_texts)
    if seen:
        log(f"{seen} of {len(private_ids)} private items of {cell.corpus} are sentences the inverter learned "
            "from (its public training sentences); the queries are drawn from the others")
    if not len(private):
        raise InvalidParameterError(f"every private item of {cell.corpus} is one of the inverter's training "
                                    "sentences, so nothing unseen is left to invert; use a corpus it never learned "
                                    "from (e.g. --corpus rt-polarity)")
    n = min(cell.queries, len(private))
    ids = np.sort(np.random.default_rng(cell.seed).choice(private, size=n, replace=False))
    refs = [items[i] for i in ids]
    if data is None:
        log(f"encoding the {n} queried texts of {cell.corpus}")
        ref_vectors = np.asarray(encoder.encode(refs, progress=False), dtype=np.float32)
        released, described, released_texts = ref_vectors, {"defense": "none"}, None
    else:
        ref_vectors = data.X[ids]
        released, described, released_texts = _released(cell, data, ids, public_vectors, log)
    targets = _unit(released)
    log(f"inverting {n} released vectors of {cell.corpus} ({cell.label}) with {cell.inverter}, {cell.steps} "
        f"correction steps, beam {cell.beam}")
    names = person_names(refs)

    def score(texts: list[str]) -> Any:
        return score_inversions(refs, texts, reference_vectors=ref_vectors,
                                hypothesis_vectors=encoder.encode(texts, progress=False), names=names,
                                seed=cell.seed)

    outputs: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    corrected = _invert(inverter, encoder, targets, cell)
    seconds["inverter"] = time.perf_counter() - t0
    outputs["inverter"] = corrected["texts"][-1]
    log(f"inverted {n} vectors in {seconds['inverter']:.1f} s ({n / max(seconds['inverter'], 1e-9):.2f} texts/s, "
        f"{int(sum(corrected['candidates'])):,} candidate texts re-embedded)")
    t0 = time.perf_counter()
    outputs["nearest-public"] = NearestPublic(public_texts, public_vectors).run(targets)
    seconds["nearest-public"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    bow = bag_of_words(public_texts, public_vectors, public, encoder_identity(encoder), cell.seed, log)
    outputs["bag-of-words"] = bow.run(targets)
    seconds["bag-of-words"] = time.perf_counter() - t0
    scores = {m: score(outputs[m]) for m in METHODS}
    if released_texts is not None:  # the reference of a text release: the released text itself, read directly
        scores["released-text"] = score(released_texts)
    metrics: dict[str, Any] = {}
    for m in scores:
        for k, v in scores[m].metrics().items():
            metrics[f"{m.replace('-', '_')}_{k}"] = v
    for base in ("nearest-public", "bag-of-words") + (("released-text",) if released_texts is not None else ()):
        metrics[f"gain_over_{base.replace('-', '_')}_token_f1"] = paired_difference(scores["inverter"], scores[base])
    if cell.release == "texthide-inference":  # how close the unmasked vectors are to the texts' own
        from veil.metrics.stats import bootstrap_mean

        metrics["unmask_cosine"] = bootstrap_mean(np.sum(_unit(released) * _unit(ref_vectors), axis=1),
                                                  seed=cell.seed)
    floor_info: dict[str, Any] | None = None
    if cell.release in _DOCUMENT_RELEASES:  # the floor: invert a uniformly drawn public candidate per document
        cand = np.asarray(data.candidates, dtype=np.float32)
        pick = np.random.default_rng([cell.seed, 1]).integers(0, len(cand), size=n)
        floor = _invert(inverter, encoder, _unit(cand[pick]), cell)["texts"][-1]
        scores["floor"] = score(floor)
        for k, v in scores["floor"].metrics().items():
            metrics[f"floor_{k}"] = v
        metrics["gain_over_floor_token_f1"] = paired_difference(scores["inverter"], scores["floor"])
        # the bag of words has its own floor (the same candidates): it writes frequent words whatever it reads, so
        # its score on long documents says nothing until it is set against what it writes from no private signal
        scores["bag-of-words-floor"] = score(bow.run(_unit(cand[pick])))
        for k, v in scores["bag-of-words-floor"].metrics().items():
            metrics[f"bag_of_words_floor_{k}"] = v
        metrics["bag_of_words_gain_over_floor_token_f1"] = paired_difference(scores["bag-of-words"],
                                                                             scores["bag-of-words-floor"])
        floor_info = {"what": "the inverter (same steps) on a uniformly drawn public candidate per document",
                      "bag_of_words": "the bag of words on the same candidates",
                      "candidates": int(len(cand)), "draw": f"numpy default_rng([{cell.seed}, 1])"}
    curve = []
    for step, texts in enumerate(corrected["texts"]):
        s = scores["inverter"] if step == len(corrected["texts"]) - 1 else score(texts)
        curve.append({"step": step, "token_f1": round(s.point("token_f1"), 3),
                      "bleu": round(s.point("bleu"), 3), "cosine": round(s.point("cosine"), 5),
                      "target_cosine": round(float(np.mean(corrected["cosines"][step])), 5),
                      "seconds_per_text": round(corrected["seconds"][step] / n, 4),
                      "candidates": int(corrected["candidates"][step])})
    examples = [{"original": refs[i], **{m: outputs[m][i] for m in METHODS},
                 **({} if released_texts is None else {"released-text": released_texts[i]})}
                for i in range(min(EXAMPLES, n))]
    config = {"cell": requested, "release": described, "encoder": encoder_identity(encoder),
              "inverter": {"name": cell.inverter, "sha256": inverter.manifest.get("sha256"),
                           "steps_trained": inverter.manifest.get("steps"),
                           "stopped": inverter.manifest.get("stopped"),
                           "planned_steps": inverter.manifest.get("planned_steps"),
                           "train_sentences": inverter.manifest.get("train_sentences"),
                           "heldout": inverter.manifest.get("heldout"),
                           "device": inverter.manifest.get("device"), "minutes": inverter.manifest.get("minutes"),
                           "transfer": inverter.manifest.get("transfer"),
                           "heldout_here": inverter.manifest.get("heldout_here"),
                           "curve": [{k: r.get(k) for k in ("step", "minutes", "token_f1", "exact_match")}
                                     for r in inverter.manifest.get("curve") or []]},
              "public": public, "bag_of_words": bow.config(), "correction": corrected["config"],
              "queries": {"n": n, "from": "the bench's private items" + (" (test documents)" if data is not None
                                                                          and data.documents is not None
                                                                          else " (every text)"),
                          "unseen": True, "excluded_seen": int(seen),
                          "draw": f"numpy default_rng({cell.seed}).choice without replacement",
                          "slice": "quick" if cell.quick else "full"},
              "floor": floor_info, "references": "the whole private text (a document's every sentence)"}
    rec = ResultRecord(method="inversion", experiment=f"{cell.corpus}-{cell.label}", config=config, metrics=metrics,
                       wall_time_s=time.perf_counter() - start,
                       extra={"curve": curve, "examples": examples, "seconds": seconds,
                              "per_text_token_f1": {m: [round(float(x), 3) for x in s.token_f1]
                                                    for m, s in scores.items()}})
    rec.write(path)
    log(f"wrote {path}")
    return path


def _invert(inverter: Any, encoder: Any, targets: np.ndarray, cell: InversionCell) -> dict[str, Any]:
    """The inverter's texts after each correction step 0..steps, their cosines to the targets, and the seconds."""
    from veil.attacks.inversion.invert import Inversion

    c = Inversion(inverter, encoder=encoder, steps=cell.steps, beam=cell.beam, batch_size=cell.batch_size,
                  shortlist=cell.shortlist).correction(targets)
    return {"texts": [list(t) for t in c.texts], "cosines": [np.asarray(x) for x in c.cosines],
            "seconds": [float(x) for x in c.seconds], "candidates": [int(x) for x in c.candidates],
            "config": dict(c.config)}
