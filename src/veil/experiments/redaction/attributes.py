"""Attribute inference on encodings of Presidio-redacted text: Coavoux et al.'s (2018) attackers against PII
redaction (docs/redaction.md, docs/attributes.md).

Question: after every PERSON span of a news passage is redacted, do encodings of the passage still tell which of
the five most frequent people (:mod:`veil.corpora.attributes_ner`) it names? And, on the same passages through the
same code, after the releases redaction is compared with (:mod:`veil.experiments.redaction.releases`): word-level
metric DP (``metric-dp-eps<E>``), random same-POS substitution (``random-P<k>``), and DeepCandidate
(``deepcandidate-eps<E>``, whose SentDP vector takes the place of the frozen MiniLM vector; a release without text,
so its record has no names-verbatim metrics). Records of those releases have no span metrics either.

Threat model (Coavoux et al.'s eavesdropper, as :mod:`veil.experiments.adversarial.attributes` runs it): the data
owner redacts EVERY passage (train, dev and test) with :class:`~veil.defenses.redaction.PresidioRedaction` before
anything else happens, then runs the same pipeline as the undefended attribute experiment on the released text:
frozen MiniLM vectors, the tanh projection encoder (width ``width``) and the publisher head trained on the redacted
training passages, and r(x) of every split. The eavesdropper observes r(x) of redacted passages only: its train
and dev passages with their private variables z (which people the ORIGINAL passage names: spaCy's silver labels,
unchanged by redaction), and its test passages without z. It trains the three post-hoc attackers (``mlp``, the
paper's, ``mlp-wide``, ``linear``) on its train split, picks epoch and threshold on dev and is scored on test; the
floor is the best constant entity set on its training labels. ``none`` is the original text through the very same
code path (:func:`~veil.experiments.adversarial.attributes.train_attribute`, cache entries included), so its
record reproduces the undefended +15.2 points (MiniLM, W=64, seeds 0-2) of docs/attributes.md.

Per (corpus, operator) one :class:`~veil.results.ResultRecord`, with for each attacker ``a``:

* ``advantage[a]``: the attacker's score (micro-F) minus the floor's, the mean over seeds; its interval is the t
  95% interval over seeds (the +15.2's); each seed's paired bootstrap interval over test passages is in
  ``extra["seeds"]`` and ``seeds_above_floor[a]`` counts the seeds whose interval lies above 0;
* ``p_floor[a]`` / ``beats_floor[a]``: the test against the floor. Per seed, :func:`swap_test` (one-sided paired
  randomization test, H0: on each test passage the attacker's prediction is exchangeable with the floor's; exact,
  9,999 resamples); ``p_floor[a]`` is the largest of the seeds' p-values (their list in its ``values``) and
  ``beats_floor[a]`` is 1 when it is <= ``alpha`` = 0.05: an intersection-union test, which says "beats the
  floor" only when every seed's attacker does, with a false-positive rate of at most 0.05 per attacker (three
  attackers, three tests, not corrected: ``mlp`` is the headline, as in the +15.2);
* ``score[a]`` (mean over seeds, t 95%), ``floor_score`` (bootstrap 95% over test passages; the floor does not
  depend on the seed), ``test_accuracy`` (the publisher head on the redacted text: what redaction costs the task).

What redaction removed, over every passage (spaCy sm's silver PERSON mentions, re-tagged as the corpus was built):
``person_spans_redacted``, ``spans_redacted`` (every redacted type), ``redacted_char_share``,
``silver_person_mentions``, ``silver_person_redacted`` (the share of silver mentions whose every letter was
redacted, Wilson 95%), ``silver_person_surviving`` (how many were not: released in part or verbatim) and
``names_verbatim`` (the share of passages whose released text still holds, as a word, the surname of one of the
people that passage names: a name Presidio missed, released verbatim; Wilson 95%), ``names_verbatim_test`` (the
same on the attacker's test passages) and ``names_verbatim_any`` (any of the five surnames).

Presidio's analysis runs once per corpus and entity set and is shared by every operator; the owner's hash key and
pseudonyms come from OS entropy (never from the seed), so ``hash`` and ``pseudonym`` releases differ from run to
run and are encoded again each time. Encodings are cached by the released text (the cache key holds the texts'
sha256), so a redacted release never shares a cache entry with the original. Records are written atomically; a
record of the same configuration is reused, one of another configuration is refused
(:class:`~veil.errors.StaleResultError`) unless ``force``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.results import Metric, ResultRecord

__all__ = ["OPERATORS", "SEEDS", "ALPHA", "METHOD", "run_redacted_attributes", "record_path", "swap_test",
           "names_verbatim", "advantage_change"]

METHOD = "redaction"
#: "none" (the original text) and Presidio's operators
OPERATORS = ("none", "type", "mask", "hash", "pseudonym")
SEEDS = (0, 1, 2)  # the undefended experiment's seeds (docs/attributes.md)
ALPHA = 0.05
RESAMPLES = 9999  # the randomization test's
LEVEL = 0.95


# --------------------------------------------------------------------------- statistics
def _score_from_sums(sums: np.ndarray, n: int, kind: str) -> np.ndarray:
    """Micro-F from (TP, FP, FN) sums (entities) or the mean of per-example scores (attributes), vectorised."""
    if kind == "entities":
        tp, fp, fn = sums[..., 0], sums[..., 1], sums[..., 2]
        den = 2 * tp + fp + fn
        return np.where(den > 0, 2 * tp / np.where(den > 0, den, 1.0), 0.0)
    return sums[..., 0] / n


def swap_test(rows: np.ndarray, base: np.ndarray, kind: str, *, resamples: int = RESAMPLES, rng: Any = 0,
              alpha: float = ALPHA) -> Any:
    """One-sided paired randomization test: do the attacker's predictions beat the floor's on the same passages?

    ``rows``: the attacker's per-test-example scoring rows (``(TP, FP, FN)`` for entities, the correct share for
    attributes: :func:`veil.attacks.attribute._per_example`); ``base``: the floor's. Statistic T = score(attacker)
    - score(floor) (micro-F or mean accuracy). H0: on each passage the attacker's row and the floor's are
    exchangeable (independently across passages); each resample swaps them on every passage with probability 1/2,
    and p = (1 + #{T* >= T}) / (R + 1) (Phipson and Smyth 2010): the false-positive rate is at most ``alpha`` for
    any R. Returns a :class:`~veil.metrics.stats.Verdict`.
    """
    from veil.metrics.stats import Verdict, check_alpha
    from veil.random import as_generator
    from veil.validation import check_int

    alpha = check_alpha(alpha)
    resamples = check_int("resamples", resamples, minimum=1)
    if kind not in ("entities", "attributes"):
        raise InvalidParameterError(f"kind must be 'entities' or 'attributes', got {kind!r}")
    A, B = np.asarray(rows, dtype=np.float64), np.asarray(base, dtype=np.float64)
    if A.shape != B.shape or A.ndim != 2 or len(A) == 0:
        raise DataFormatError(f"rows {A.shape} and base {B.shape} must be the same non-empty (n, columns) shape")
    n = len(A)
    sa, sb, D = A.sum(axis=0), B.sum(axis=0), A - B
    observed = float(_score_from_sums(sa, n, kind) - _score_from_sums(sb, n, kind))
    g = as_generator(rng)
    extreme, done = 0, 0
    chunk = max(1, min(resamples, (1 << 20) // n))
    while done < resamples:
        c = min(chunk, resamples - done)
        moved = g.integers(0, 2, size=(c, n)).astype(np.float64) @ D  # what swapping moves to the floor's side
        stat = _score_from_sums(sa - moved, n, kind) - _score_from_sums(sb + moved, n, kind)
        extreme += int((stat >= observed - 1e-12).sum())
        done += c
    p = (1 + extreme) / (resamples + 1)
    return Verdict(test=f"paired randomization (attacker and floor swapped per passage, {resamples} resamples), "
                        "one-sided", statistic=observed, p_value=p, alpha=alpha, reject=bool(p <= alpha),
                   null="on every passage the attacker's prediction is exchangeable with the floor's", n=n)


def _over_seeds(values: Sequence[Metric]) -> Metric:
    """The mean over seeds with a t 95% interval (one seed: its own interval)."""
    if len(values) == 1:
        return values[0]
    from scipy import stats

    means = [m.mean for m in values]
    mean = math.fsum(means) / len(means)
    sd = float(np.std(means, ddof=1))
    half = float(stats.t.ppf(0.5 + LEVEL / 2, len(means) - 1)) * sd / math.sqrt(len(means))
    return Metric(mean=mean, std=sd, n=len(means), ci_low=mean - half, ci_high=mean + half, ci_level=LEVEL,
                  values=tuple(means))


def _wilson(successes: int, n: int) -> Metric:
    from veil.metrics.leakage import wilson_interval

    if n == 0:
        return Metric(mean=0.0, n=0)
    lo, hi = wilson_interval(successes, n, LEVEL)
    return Metric(mean=successes / n, n=n, ci_low=lo, ci_high=hi, ci_level=LEVEL)


def advantage_change(record: ResultRecord, baseline: ResultRecord, *, attacker: str = "mlp", resamples: int = 1000,
                     rng: Any = 0) -> Metric:
    """``record``'s advantage minus ``baseline``'s (e.g. a redacted release against ``none``), in score points /
    100: the mean over seeds of score(record) - score(baseline) (the floor is the same: same training labels),
    with a paired percentile bootstrap 95% interval over the shared test passages (resampled jointly over seeds).
    Both records must hold the same test passages and seeds."""
    from veil.random import as_generator

    for r in (record, baseline):
        if not isinstance(r, ResultRecord) or "rows" not in r.extra:
            raise InvalidTypeError("advantage_change takes two records written by run_redacted_attributes")
    if (any(record.extra.get(k) != baseline.extra.get(k) for k in ("test_passages_sha256", "kind"))
            or record.config.get("seeds") != baseline.config.get("seeds")
            or record.extra["rows"]["floor"] != baseline.extra["rows"]["floor"]):
        raise InvalidParameterError("the two records hold different test passages, seeds or floors; compare records "
                                    "of one corpus, max_train and seed list")
    kind = record.extra["kind"]
    a = np.asarray(record.extra["rows"][attacker], dtype=np.float64)  # (seeds, n, c)
    b = np.asarray(baseline.extra["rows"][attacker], dtype=np.float64)
    n = a.shape[1]

    def stat(idx: np.ndarray | None) -> float:
        sa, sb = (a, b) if idx is None else (a[:, idx], b[:, idx])
        return float(np.mean(_score_from_sums(sa.sum(axis=1), n, kind) - _score_from_sums(sb.sum(axis=1), n, kind)))

    g = as_generator(rng)
    boots = np.array([stat(g.integers(0, n, size=n)) for _ in range(resamples)])
    lo, hi = np.quantile(boots, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return Metric(mean=stat(None), n=n, ci_low=float(lo), ci_high=float(hi), ci_level=LEVEL)


# --------------------------------------------------------------------------- what redaction left
def _surnames(private: Any) -> list[str]:
    return [str(name).split()[-1] for name in private.names]


def names_verbatim(texts: Sequence[str], private: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per text: (does it hold, as a word, the surname of one of the people z says it names; does it hold any of
    the surnames). Entity corpora only (``private.kind == "entities"``); matching is case-sensitive."""
    if private.kind != "entities":
        raise InvalidParameterError("names_verbatim needs entity variables (people); this corpus has attributes")
    pats = [re.compile(rf"\b{re.escape(s)}\b") for s in _surnames(private)]
    Z = np.asarray(private.Z)
    own = np.zeros(len(texts), dtype=bool)
    anyone = np.zeros(len(texts), dtype=bool)
    for i, text in enumerate(texts):
        hits = np.array([p.search(text) is not None for p in pats])
        own[i], anyone[i] = bool((hits & (Z[i] > 0)).any()), bool(hits.any())
    return own, anyone


def _redaction_metrics(texts: Sequence[str], released: Sequence[str] | None, spans: Sequence[Sequence[Any]] | None,
                       silver: Sequence[Sequence[tuple[int, int, bool]]], data: Any) -> dict[str, Metric]:
    """What the release removed. ``spans`` None: not a redaction (no span metrics); ``released`` None: not text
    (no names-verbatim metrics either)."""
    from veil.experiments.redaction.detection import span_outcome

    n = len(texts)
    out: dict[str, Metric] = {}
    if spans is not None:
        out["person_spans_redacted"] = Metric(mean=float(sum(s.entity == "PERSON" for sp in spans for s in sp)), n=n)
        out["spans_redacted"] = Metric(mean=float(sum(map(len, spans))), n=n)
        total = sum(map(len, texts))
        out["redacted_char_share"] = Metric(mean=sum(s.end - s.start for sp in spans for s in sp) / total if total
                                            else 0.0, n=n)
        outcomes = [span_outcome(t, a, b, sp, None) for t, m, sp in zip(texts, silver, spans) for a, b, _ in m]
        covered = sum(o.covered for o in outcomes)
        out["silver_person_mentions"] = Metric(mean=float(len(outcomes)), n=n)
        out["silver_person_redacted"] = _wilson(covered, len(outcomes))
        out["silver_person_surviving"] = Metric(mean=float(len(outcomes) - covered), n=n)
    if released is not None and data.private.kind == "entities":
        own, anyone = names_verbatim(released, data.private)
        test = data.indices("test")
        out["names_verbatim"] = _wilson(int(own.sum()), n)
        out["names_verbatim_test"] = _wilson(int(own[test].sum()), len(test))
        out["names_verbatim_any"] = _wilson(int(anyone.sum()), n)
    return out


# --------------------------------------------------------------------------- the experiment
def record_path(root: str | Path, corpus: str, operator: str, *, entities: Sequence[str] | None, model: str,
                width: int, seeds: Sequence[int], max_train: int | None) -> Path:
    from veil.outputs import tag

    what = "all" if entities is None else "_".join(entities)
    sizes = tag(e=what, m=model, w=width, s="_".join(map(str, seeds)), n=max_train)
    return Path(root) / f"attributes-{corpus}-{operator}-{sizes}.json"


def _check(operators: Any, entities: Any, model: Any, seeds: Any, max_train: Any, width: Any, epochs: Any,
           attacker_epochs: Any) -> tuple[tuple[str, ...], tuple[str, ...] | None, tuple[int, ...]]:
    from veil.defenses.redaction.engine import MODELS
    from veil.validation import check_choice, check_int

    from veil.experiments.redaction.releases import check_releases

    operators = tuple(r.name for r in check_releases(operators, vectors=True))
    if entities is not None:
        if isinstance(entities, str) or not isinstance(entities, Sequence) or not all(isinstance(e, str)
                                                                                     for e in entities):
            raise InvalidTypeError("entities must be a list of Presidio entity names such as ('PERSON',), or None "
                                   "for every supported type")
        entities = tuple(dict.fromkeys(entities))
        if not entities:
            raise InvalidParameterError("entities is empty; give ('PERSON',) or None for every supported type")
    check_choice("model", model, MODELS)
    if entities is not None:
        from veil.defenses.redaction import supported_entities
        from veil.errors import UnknownNameError

        known = supported_entities(model)
        for e in entities:
            if e not in known:
                raise UnknownNameError("entity", e, known)
    if isinstance(seeds, (str, int)) or not isinstance(seeds, Sequence) or not seeds:
        raise InvalidTypeError("seeds must be a non-empty list of ints, e.g. (0, 1, 2)")
    seeds = tuple(check_int("seed", s, minimum=0) for s in seeds)
    if len(set(seeds)) != len(seeds):
        raise InvalidParameterError(f"seeds repeat: {list(seeds)}; give each seed once")
    if max_train is not None:
        check_int("max_train", max_train, minimum=2)
    for name, value in (("width", width), ("epochs", epochs), ("attacker_epochs", attacker_epochs)):
        check_int(name, value, minimum=1)
    return operators, entities, seeds


def run_redacted_attributes(results: str | Path, *, corpus: str = "news-articles",
                            operators: Sequence[str] = OPERATORS, entities: Sequence[str] | None = ("PERSON",),
                            model: str = "sm", seeds: Sequence[int] = SEEDS, width: int = 64, epochs: int = 16,
                            attacker_epochs: int = 16, max_train: int | None = None, data: Any = None,
                            force: bool = False, log: Callable[[str], None] | None = None) -> list[Path]:
    """Write (or reuse) one record per operator of ``corpus`` under ``results``; returns their paths in operator
    order (module docstring for the threat model and the metrics).

    ``entities``: the Presidio types redacted (default every PERSON span; None: every supported type); ``model``:
    the spaCy pipeline behind Presidio's NER. ``seeds``, ``width``, ``epochs``, ``attacker_epochs``: the undefended
    attribute experiment's settings (MiniLM projection, W=64, 16 + 16 epochs, seeds 0-2); ``max_train``: at most
    that many training passages (a subset drawn with seed 0, as that experiment draws it). ``data``: an
    :class:`~veil.corpora.attributes.AttributeCorpus` to use instead of the built-in ``corpus`` (tests, slices;
    its texts' hash is part of the configuration). ``log``: progress lines (None: print).
    """
    from veil.encoders.backends import backend_identity, with_stored_backend
    from veil.experiments.adversarial.attributes import ATTACKERS, AttributeRun, train_attribute
    from veil.experiments.redaction.releases import parse_release
    from veil.outputs import check_output_dir, existing_record

    say = print if log is None else log
    operators, entities, seeds = _check(operators, entities, model, seeds, max_train, width, epochs,
                                        attacker_epochs)
    if data is None:
        from veil.corpora.attributes import attribute_names
        from veil.validation import check_choice

        check_choice("corpus", corpus, attribute_names())
    else:
        from veil.corpora.attributes import AttributeCorpus
        from veil.encoders.cache import texts_sha256

        if not isinstance(data, AttributeCorpus):
            raise InvalidTypeError(f"data must be an AttributeCorpus (veil.corpora.attributes), not "
                                   f"{type(data).__name__}")
        corpus = data.name
    vector_releases = [op for op in operators if not parse_release(op).text]
    if vector_releases and (data is not None or corpus != "news-articles"):
        raise InvalidParameterError(f"{', '.join(vector_releases)} releases DeepCandidate vectors of news passages "
                                    "from the sentences they were cut from: the built-in news-articles corpus only "
                                    "(veil redaction attributes, no data=)")
    root = check_output_dir(results)
    run = AttributeRun(corpus=corpus, defense="none", width=width, seed=seeds[0], encoder="minilm", epochs=epochs,
                       attacker_epochs=attacker_epochs, max_train=max_train)
    base = {"corpus": corpus, "entities": list(entities) if entities else "all supported", "model": model,
            "seeds": list(seeds), "width": width, "encoder": "minilm", "epochs": epochs,
            "attacker_epochs": attacker_epochs, "max_train": max_train, "alpha": ALPHA, "resamples": RESAMPLES,
            "data": "built-in" if data is None else {"name": data.name, "size": len(data),
                                                     "texts_sha256": texts_sha256(data.texts)},
            "attribute_run": {k: v for k, v in run.to_dict().items() if k != "seed"},
            # every release is encoded by (or, DeepCandidate, built from) frozen MiniLM: its backend, unless torch
            **backend_identity(None)}
    paths = {op: record_path(root, corpus, op, entities=entities, model=model, width=width, seeds=seeds,
                             max_train=max_train) for op in operators}
    todo = [op for op in operators
            if existing_record(paths[op], {**base, "operator": op}, force=force,
                               view=with_stored_backend({**base, "operator": op})) is None]
    for op in operators:
        if op not in todo:
            say(f"redacted attributes {corpus} {op}: kept {paths[op]} (a record of this configuration)")
    if not todo:
        return [paths[op] for op in operators]

    start = time.perf_counter()
    if data is None:
        from veil.corpora.attributes import load_attributes

        data = load_attributes(corpus)
    data = data.limit(max_train, rng=0)
    texts = list(data.texts)
    found, silver, costs, encode_s = _analyse(data, todo, entities, model, seeds, say)
    trained = 0
    per_run: list[float] = []
    out = []
    for op in operators:
        if op not in todo:
            out.append(paths[op])
            continue
        op_start = time.perf_counter()
        rel = parse_release(op)
        vectors = None
        if rel.family == "none":
            released, spans = texts, [() for _ in texts]
            defense: dict[str, Any] = {"defense": "none"}
        elif rel.family == "redaction":
            from veil.defenses.redaction import PresidioRedaction

            owner = PresidioRedaction(operator=op, entities=entities, model=model)  # secrets from OS entropy
            red = owner.redact(texts, detections=found)
            released, spans = [r.text for r in red], [r.spans for r in red]
            defense = owner.config()
        elif rel.text:
            from veil.experiments.redaction.releases import make_text_mechanism

            owner = make_text_mechanism(rel)  # the owner's draws from the OS CSPRNG
            released, spans, defense = owner.transform(texts), None, owner.config()
        else:
            from veil.experiments.redaction.releases import deepcandidate_vectors

            released, spans = None, None
            X, defense = deepcandidate_vectors(texts, rel.epsilon, say=say)  # sampling from the OS CSPRNG
            vectors = {s: X[data.indices(s)] for s in ("train", "dev", "test")}
        metrics = _redaction_metrics(texts, released, spans, silver, data)
        say(f"redacted attributes {corpus} {op}: released {len(texts)} passages"
            + (f" ({int(metrics['person_spans_redacted'].mean)} PERSON spans redacted)" if spans is not None else
               "" if released is not None else " as vectors")
            + (f"; a target name still verbatim in {metrics['names_verbatim'].mean:.1%} of them"
               if "names_verbatim" in metrics else ""))
        from veil.corpora.attributes import AttributeCorpus

        release = AttributeCorpus(data.name, list(texts if released is None else released), data.labels,
                                  data.label_names, data.splits, data.private, dict(data.notes))
        outcomes = []
        for s in seeds:
            t0 = time.perf_counter()
            outcomes.append(train_attribute(replace(run, seed=s), release, vectors=vectors))
            per_run.append(time.perf_counter() - t0)
            trained += 1
            later = [o for o in todo[todo.index(op) + 1:] if o != "none"]  # releases still to make and encode
            left = (len(todo) * len(seeds) - trained) * min(per_run) + len(later) * encode_s
            m = outcomes[-1].metrics
            say(f"redacted attributes {corpus} {op} seed {s}: advantage[mlp] {100 * m['advantage[mlp]'].mean:+.1f} "
                f"points [{100 * m['advantage[mlp]'].ci_low:+.1f}, {100 * m['advantage[mlp]'].ci_high:+.1f}] in "
                f"{per_run[-1]:.0f} s" + (f"; about {left / 60:.1f} min left" if left else ""))
        rec = _record(op, outcomes, metrics, base, defense, data, ATTACKERS, costs,
                      time.perf_counter() - op_start)
        rec.write(paths[op])
        say(f"wrote {paths[op]}")
        out.append(paths[op])
    say(f"redacted attributes {corpus}: {len(todo)} records in {(time.perf_counter() - start) / 60:.1f} min")
    return out


def _analyse(data: Any, todo: Sequence[str], entities: tuple[str, ...] | None, model: str, seeds: Sequence[int],
             say: Callable[[str], None]) -> tuple[list[Any], list[Any], dict[str, float], float]:
    """Counts and a measured time estimate first; then Presidio's analysis (once, shared by every operator) and
    the silver PERSON mentions. Returns (detections, silver mentions, seconds spent, the estimated seconds to
    encode one release)."""
    from veil.defenses.redaction import Detector
    from veil.encoders import TextEncoder
    from veil.encoders.plan import estimate_seconds, is_cached
    from veil.experiments.redaction.detection import silver_person_spans

    texts = list(data.texts)
    n = len(texts)
    from veil.experiments.redaction.releases import parse_release

    redacting = [op for op in todo if parse_release(op).family == "redaction"]
    sizes = ", ".join(f"{s} {len(data.indices(s))}" for s in ("train", "dev", "test"))
    k = min(n, 48)  # calibration passages (after a two-passage warm-up that loads the models): timed and kept
    calib = max(1, sum(map(len, texts[2:k])))
    found: list[Any] = []
    detect_rate = 0.0
    if redacting:
        detector = Detector(model=model, entities=list(entities) if entities else None)
        found = detector.detect(texts[:2])
        t0 = time.perf_counter()
        found += detector.detect(texts[2:k])
        detect_rate = (time.perf_counter() - t0) / calib
    silver = silver_person_spans(texts[:2], lambda _line: None)
    t0 = time.perf_counter()
    silver += silver_person_spans(texts[2:k], lambda _line: None)
    silver_rate = (time.perf_counter() - t0) / calib
    rest = sum(map(len, texts[k:]))
    enc = TextEncoder("minilm")
    uncached_none = "none" in todo and not all(
        is_cached(enc, [texts[i] for i in data.indices(s)], f"attributes-{data.name}", s)
        for s in ("train", "dev", "test"))
    n_encode = sum(parse_release(op).family not in ("none", "deepcandidate") for op in todo) + int(uncached_none)
    encode_all = estimate_seconds(enc, texts)[0] if n_encode else 0.0  # one release of every passage
    ahead = (detect_rate + silver_rate) * rest + n_encode * encode_all
    say(f"redacted attributes {data.name}: {n} passages ({sizes}); {len(todo)} records ({', '.join(todo)}) x "
        f"{len(seeds)} seeds = {len(todo) * len(seeds)} trainings of the projection encoder + 3 attackers; "
        + (f"Presidio ({model}, {', '.join(entities) if entities else 'every type'}) analyses {n} passages once, "
           if redacting else "")
        + f"spaCy sm re-tags the silver PERSON mentions; MiniLM encodes {n_encode} x {n} passages. Measured now: "
        f"about {ahead / 60:.1f} min before the first training (analysis and encoding), training timed after "
        f"the first run")
    detect_s = 0.0
    if redacting:
        t0 = time.perf_counter()
        found += detector.detect(texts[k:])
        detect_s = time.perf_counter() - t0 + detect_rate * calib
    t0 = time.perf_counter()
    silver += silver_person_spans(texts[k:], lambda _line: None)
    silver_s = time.perf_counter() - t0 + silver_rate * calib
    say(f"redacted attributes {data.name}: "
        + (f"Presidio found {sum(map(len, found))} spans in {detect_s:.0f} s; " if redacting else "")
        + f"{sum(map(len, silver))} silver PERSON mentions ({silver_s:.0f} s)")
    return (found, silver, {"detect_seconds_shared": round(detect_s, 3), "silver_seconds_shared": round(silver_s, 3)},
            encode_all)


def _record(op: str, outcomes: Sequence[Any], redaction: Mapping[str, Metric], base: Mapping[str, Any],
            defense: Mapping[str, Any], data: Any, attackers: Sequence[str], costs: Mapping[str, float],
            seconds: float) -> ResultRecord:
    from veil.encoders.cache import texts_sha256
    from veil.experiments.redaction.releases import parse_release

    kind = outcomes[0].kind
    metrics: dict[str, Metric] = {}
    for a in attackers:
        adv = [o.metrics[f"advantage[{a}]"] for o in outcomes]
        metrics[f"advantage[{a}]"] = _over_seeds(adv)
        metrics[f"score[{a}]"] = _over_seeds([o.metrics[f"score[{a}]"] for o in outcomes])
        tests = [swap_test(o.rows[a], o.rows["floor"], kind,
                           rng=int(np.random.SeedSequence([o.run.seed, 11]).generate_state(1)[0])) for o in outcomes]
        p_max = max(t.p_value for t in tests)  # intersection-union: every seed's attacker must beat the floor
        metrics[f"p_floor[{a}]"] = Metric(mean=p_max, n=tests[0].n, values=tuple(t.p_value for t in tests))
        metrics[f"beats_floor[{a}]"] = Metric(mean=float(p_max <= ALPHA), n=tests[0].n)
        metrics[f"seeds_above_floor[{a}]"] = Metric(mean=float(sum(m.ci_low is not None and m.ci_low > 0
                                                                   for m in adv)), n=len(adv))
    metrics["floor_score"] = outcomes[0].metrics["floor_score"]
    metrics["test_accuracy"] = _over_seeds([o.metrics["test_accuracy"] for o in outcomes])
    metrics["majority_accuracy"] = outcomes[0].metrics["majority_accuracy"]
    metrics.update(redaction)
    test_texts = [data.texts[i] for i in data.indices("test")]
    integer = kind == "entities"
    rows = {who: [np.rint(o.rows[who]).astype(int).tolist() if integer else np.round(o.rows[who], 6).tolist()
                  for o in outcomes] for who in (*attackers, "floor")}
    seeds_extra = {str(o.run.seed): {"advantage": {a: o.metrics[f"advantage[{a}]"].to_dict() for a in attackers},
                                     "score": {a: o.metrics[f"score[{a}]"].to_dict() for a in attackers},
                                     "attackers": {a: {k: o.attacks[a].config.get(k) for k in
                                                       ("best_epoch", "dev_score", "threshold")} for a in attackers},
                                     "test_accuracy": o.metrics["test_accuracy"].to_dict(),
                                     "best_epoch": o.best_epoch, "seconds": round(o.seconds, 3)}
                   for o in outcomes}
    config = {**base, "operator": op, "defense": dict(defense), "n": outcomes[0].n, "kind": kind,
              "threat_model": "the owner releases every passage (train, dev, test) through the mechanism (redaction, "
                              "a text rewrite, or DeepCandidate's vector in place of the frozen MiniLM vector) and "
                              "trains the projection encoder and head on the release; the eavesdropper sees r(x) of "
                              "released passages, z of "
                              "its train and dev passages (the original passage's people), trains the post-hoc "
                              "attackers on train, selects on dev, is scored on test",
              "owner_randomness": ("os-entropy (never the experiment seed)"
                                   if op in ("hash", "pseudonym") or parse_release(op).family not in ("none", "redaction")
                                   else "none"),
              "test": "p_floor: per seed a paired randomization test against the floor (attacker and floor swapped "
                      f"per test passage, {RESAMPLES} resamples, one-sided), the largest p over seeds "
                      f"(intersection-union); beats_floor: p_floor <= {ALPHA}, per attacker, uncorrected (mlp is "
                      "the headline)",
              "intervals": "advantage/score/test_accuracy: t 95% over seeds; per seed: paired bootstrap over test "
                           "passages (extra.seeds); shares: Wilson 95%",
              "silver": "spaCy en_core_web_sm 3.8.0 PERSON spans (as veil.corpora.attributes_ner tags them); "
                        "redacted = every letter inside a redacted span"}
    extra = {"kind": kind, "seeds": seeds_extra, "rows": rows, "private": data.private.describe(),
             "test_passages_sha256": texts_sha256(test_texts), "corpus_notes": data.notes, **costs}
    return ResultRecord(method=METHOD, experiment=f"attributes-{base['corpus']}-{op}", config=config,
                        metrics=metrics, wall_time_s=seconds, extra=extra)
