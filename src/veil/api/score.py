"""``veil.attack``: an attack on a release made by :func:`veil.protect`, scored as the bench cell scores it.

The harness (this module) holds the ground truth (``private``: what the caller protected); the attack is built by
its own :meth:`~veil.attacks.base.Attack.for_bench` from the bench's default resources and sees only the
:class:`~veil.attacks.base.Observation` (the release and the defense's public configuration). Scoring is the bench
cell's own: :func:`veil.bench.cells.vectors.score_retrieval` (re-identification, exact test against the random rate
1 / len(index)) and :func:`veil.bench.cells.vectors.score_inversion` (token F1, paired permutation test against the
floor: the same attack on unrelated public vectors). The numbers are those a bench cell writes for the same release,
queries and seed.

In this process ``veil.attack`` scores the attacks of seven bench cells (``veil attacks list``): retrieval and
inversion on releases read as vectors (``vectors``, ``document-embeddings``, ``text`` encoded by MiniLM); word
recovery on ``obfuscated-text`` releases (:mod:`veil.api.score_obfuscated`, scored by
:func:`veil.bench.cells.obfuscated_text.score_word_recovery`); membership inference on ``model`` releases
(:mod:`veil.api.score_model`, scored by :func:`veil.bench.cells.model.score_membership_attack`); mask recovery
and unmixing on TextHide's ``training-encodings`` (:mod:`veil.api.score_encodings`, scored by
:mod:`veil.bench.cells.training_encodings`' functions); and attribute inference on released ``representations``
(:mod:`veil.api.score_representations`, scored by :func:`veil.bench.cells.representations.score_attribute`). The
others are refused with an :class:`~veil.errors.InvalidParameterError` naming :func:`veil.evaluate`, which scores
them by their bench cell on a corpus (one bench row): inverting r(x), which needs query access to the released
encoder; the attacks on a training objective, which releases nothing until a model is trained with it; the
document audits; infilling.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["attack", "AttackOutcome", "resources_of", "scored_attacks", "SCORED_CELLS", "READ_AS_VECTORS"]

#: bench cell -> the scoring family veil.attack runs in this process
SCORED_CELLS = {"veil.bench.cells.vectors:retrieval_cell": "retrieval",
                "veil.bench.cells.vectors:inversion_cell": "inversion",
                "veil.bench.cells.obfuscated_text:word_recovery_cell": "word-recovery",
                "veil.bench.cells.model:membership_cell": "membership",
                "veil.bench.cells.training_encodings:mask_recovery_cell": "texthide-run",
                "veil.bench.cells.training_encodings:unmix_cell": "texthide-run",
                "veil.bench.cells.representations:attribute_cell": "attribute"}
#: release kinds veil.attack reads as vectors (text: each rewritten text encoded by MiniLM, as anyone holding it can)
READ_AS_VECTORS = ("vectors", "document-embeddings", "text")
#: family -> the release kinds veil.attack scores it on
FAMILY_KINDS = {"retrieval": READ_AS_VECTORS, "inversion": READ_AS_VECTORS, "word-recovery": ("obfuscated-text",),
                "membership": ("model",), "texthide-run": ("training-encodings",), "attribute": ("representations",)}
#: family -> {resource: default (None: the bench's)}; ``seed`` selects the attacker's own choices, ``quick`` the
#: bench's quick models (``inverter-quick``, 1 correction step) and epochs
RESOURCES: dict[str, dict[str, Any]] = {
    "retrieval": {"index": None, "query_ids": None, "text_embeddings": None, "public": None},
    "inversion": {"public": None},
    "word-recovery": {"treebank": "silver-sm", "limit": None},
    "membership": {"nonmembers": None, "population": None, "shadows": None},
    "texthide-run": {"public": None, "queries": None, "index": None, "source_ids": None},
    "attribute": {"epochs": 16},  # the post-hoc attackers' epochs (AttributeRun's attacker_epochs)
}
_COMMON = {"seed": 0, "quick": True}
#: family -> the module and function that score it (the families whose release is not read as vectors)
_ELSEWHERE = {"word-recovery": ("veil.api.score_obfuscated", "word_recovery"),
              "membership": ("veil.api.score_model", "membership"),
              "texthide-run": ("veil.api.score_encodings", "texthide_run"),
              "attribute": ("veil.api.score_representations", "attribute")}


@dataclass(frozen=True)
class AttackOutcome:
    """What :func:`attack` returns: the success ``metric`` (``identity``, ``token_f1``, ...), its ``value`` and
    ``interval`` (low, high at ``level``), the ``test`` against the floor (the bench's dict: test, statistic,
    p_value, alpha, reject, null; empty where the cell has none, as mask recovery), the ``floor`` (the random rate,
    or the floor attack's success) and ``record`` (the :class:`~veil.results.ResultRecord` as JSON, its
    ``extra["bench"]`` block as the bench cell writes it)."""

    attack: str
    defense: str
    kind: str
    metric: str
    value: float
    interval: tuple[float | None, float | None]
    level: float | None
    test: dict[str, Any]
    floor: float | None
    record: dict[str, Any] = field(repr=False)

    @property
    def significant(self) -> bool:
        """Whether the test rejects the floor (the attack recovers more than the floor) at its alpha."""
        return bool(self.test.get("reject"))

    def __str__(self) -> str:
        low, high = self.interval
        ci = "" if low is None else f" [{low:.3f}, {high:.3f}]"
        p = self.test.get("p_value")
        head = f"{self.attack} on {self.defense}: {self.metric} = {self.value:.3f}{ci}"
        floor = self.floor if self.floor is None else round(self.floor, 4)
        if p is None:  # mask recovery: a step towards re-identification, scored without a test
            return f"{head}; chance: {floor} (no test)"
        return f"{head}; {'above' if self.significant else 'not above'} the floor ({floor}; p = {p:.3g})"


def outcome(attack_name: str, defense: str, kind: str, record: Any) -> AttackOutcome:
    """The :class:`AttackOutcome` of a bench record (a :class:`~veil.results.ResultRecord` or its JSON)."""
    d = record if isinstance(record, dict) else record.to_dict()
    bench = d["extra"]["bench"]
    m = bench["success_metric"]
    floor = bench.get("random_rate")
    if floor is None and "versus_success" in bench:
        floor = bench["versus_success"]["mean"]
    return AttackOutcome(attack=attack_name, defense=defense, kind=kind, metric=bench["success"], value=m["mean"],
                         interval=(m.get("ci_low"), m.get("ci_high")), level=m.get("ci_level"),
                         test=bench.get("test", {}), floor=floor, record=d)


def scored_attacks(kind: str | None = None) -> list[str]:
    """The registered attacks :func:`attack` scores in this process (that observe ``kind``, if given)."""
    from veil.attacks.base import attack_names, get_attack
    from veil.kinds import observable

    return [n for n in attack_names() if get_attack(n).bench_cell in SCORED_CELLS
            and (kind is None or observable(kind, get_attack(n).observes))]


def resources_of(name: str) -> dict[str, Any]:
    """The resources :func:`attack` takes for the attack registered as ``name``, with their defaults (None: the
    bench's: the private texts as the index, the quick bench's public texts, the quick inverter)."""
    from veil.attacks.base import get_attack

    cls = get_attack(name)  # UnknownNameError naming the valid ones
    family = SCORED_CELLS.get(cls.bench_cell)
    if family is None and (not cls.bench_cell or cls.observes == "generative-model"):
        raise InvalidParameterError(_no_cell(name, cls))
    if family is None:
        raise InvalidParameterError(
            f"veil.attack scores {', '.join(scored_attacks())} in this process; {name!r} is scored by its bench "
            f"cell ({cls.bench_cell or 'none declared'}) on a corpus: veil.evaluate(corpus, defense, "
            f"attacks=[{name!r}]) runs it")
    return {**RESOURCES[family], **_COMMON}


def _no_cell(name: str, cls: Any) -> str:
    """What to run instead, for an attack veil.attack does not score: one with no bench cell (neither veil.attack nor
    veil.evaluate scores it), or one on a language model (its own paths, and its bench cells)."""
    if cls.observes == "generative-model":
        return (f"veil.attack does not score {name!r} (it observes a fine-tuned language model, scored against "
                "the planted secrets of its training text); run it on your model's black-box access, "
                f"veil.run_attack({name!r}, LMAccess.of(released.release), ...) (veil.attacks.generation), measure "
                "a whole run with `veil lm train` and `veil lm attack` (docs/generation.md), or its bench cells: "
                f"veil.evaluate('rt-polarity-planted', 'lm-plain', attacks=[{name!r}])")
    return (f"{name!r} has no bench cell (it observes {cls.observes!r}), so neither veil.attack nor veil.evaluate "
            f"scores it; run it directly: veil.run_attack({name!r}, observation, ...), or its command under "
            f"`veil attack --help`; veil.attack scores {', '.join(scored_attacks())}")


def _check(release: Any, name: str) -> tuple[Any, str]:
    from veil.api import Protected
    from veil.attacks.base import attack_names, get_attack
    from veil.kinds import observable

    if not isinstance(release, Protected):
        raise InvalidTypeError(f"release must be what veil.protect returns (a veil.api.Protected), got "
                               f"{type(release).__name__}")
    if not isinstance(name, str):
        raise InvalidTypeError(f"attack must be a registered name (str), got {type(name).__name__}")
    cls = get_attack(name)
    if not observable(release.kind, cls.observes):
        readers = [n for n in attack_names() if observable(release.kind, get_attack(n).observes)]
        raise InvalidParameterError(f"{name!r} observes {cls.observes!r}, and {release.defense.name!r} releases "
                                    f"{release.kind!r}; the attacks that observe it: "
                                    f"{', '.join(readers) or 'none registered'}")
    family = SCORED_CELLS.get(cls.bench_cell)
    if family is None and (not cls.bench_cell or cls.observes == "generative-model"):
        raise InvalidParameterError(_no_cell(name, cls))
    if family is None or release.kind not in FAMILY_KINDS[family]:
        kinds = sorted({k for ks in FAMILY_KINDS.values() for k in ks})
        raise InvalidParameterError(
            f"veil.attack scores, in this process, {', '.join(scored_attacks(release.kind)) or 'no attack'} on a "
            f"{release.kind!r} release (it scores {', '.join(kinds)} releases); {name!r} is scored "
            f"by its bench cell on a corpus: veil.evaluate(corpus, {release.defense.name!r}, attacks=[{name!r}])")
    return cls, family


def _private(private: Any, kind: str, n: int) -> tuple[list[str], np.ndarray]:
    """The scorer's references: the private texts (a document: its sentences joined) and their own MiniLM vectors
    (a document: the mean of its sentences', as the bench's)."""
    from veil.api.kinds import _embed_documents, _encode
    from veil.defenses.defaults import mean_embeddings

    if private is None:
        raise InvalidParameterError("veil.attack scores against the truth: pass private= the texts (or documents) "
                                    "you protected, in the release's order; the attack never sees them")
    if isinstance(private, str) or not isinstance(private, (list, tuple)) or len(private) != n:
        raise InvalidTypeError(f"private: give the {n} protected texts (a list, in the release's order)")
    if all(isinstance(t, str) for t in private):
        texts = list(private)
        return texts, _encode(texts)
    if all(isinstance(d, (list, tuple)) and d and all(isinstance(x, str) for x in d) for d in private):
        return [" ".join(d) for d in private], mean_embeddings(_embed_documents([list(d) for d in private]))
    raise InvalidTypeError("private: give texts (str) or documents (lists of sentences)")


def _observation(release: Any) -> Any:
    from veil.api.kinds import _encode
    from veil.attacks.base import Observation

    seen = release.release
    if release.kind == "text" and seen and isinstance(seen[0], list):  # documents: as the bench reads them
        from veil.api.kinds import _embed_documents
        from veil.defenses.defaults import mean_embeddings

        seen = mean_embeddings(_embed_documents(seen))
    elif release.kind == "text":
        seen = _encode(list(seen))
    return Observation(np.asarray(seen, dtype=np.float32), defense=release.defense.config(), source="defense")


def _cell(release: Any, name: str, n: int, s: dict[str, Any]) -> Any:
    """The bench cell this run stands for (corpus ``python``: the caller's data), for the attack's for_bench."""
    import json

    from veil.bench.plan import BenchConfig, Cell

    setting = {}
    for k, v in release.settings.items():
        try:
            json.dumps(v)
        except TypeError:
            continue  # a key or an object the caller passed (pool=...): not part of the public setting
        if k != "seed" and v is not None:
            setting[k] = v
    return Cell.make("python", release.defense.name, setting, name,
                     BenchConfig(quick=bool(s["quick"]), seed=int(s["seed"]), queries=n))


def _public(s: dict[str, Any], quick: bool) -> np.ndarray:
    if s["public"] is not None:
        from veil.api.kinds import _vectors

        return _vectors(s["public"], "public")
    from veil.bench.data import SIZES
    from veil.defenses.defaults import public_vectors

    return public_vectors(SIZES["public"][0 if quick else 1])[1]


def attack(release: Any, attack: str, *, private: Any = None, **resources: Any) -> AttackOutcome:
    """Run the attack registered as ``attack`` on ``release`` (what :func:`veil.protect` returned) and score it as
    its bench cell does; ``private`` (the texts, or documents, you protected, in order) is the scorer's truth and
    never reaches the attack. ``resources`` default to the bench's (:func:`resources_of`): ``index`` (a
    ``SimilaritySearch``; default: the private texts themselves, the bench's worst case), ``query_ids`` (each
    released item's position in the index; default: its own), ``text_embeddings`` (the index entries' MiniLM
    vectors, for the SBERT cosine; default: the private texts', or the index's own), ``public`` (public texts or
    vectors: RepRecon's known pairs, the inversion floor; default: the quick bench's public texts), ``seed`` (the
    attacker's own choices; default 0) and ``quick`` (the quick bench's models; default True). On an
    ``obfuscated-text`` release ``private`` is the sentences you protected (``(words, tags)``, trees or word lists)
    and the resources are ``treebank`` (the public treebank the attacker learns from: ``"silver-sm"``, the bench's,
    or a ``TreebankBenchData``) and ``limit`` (cap on its public sentences); see :mod:`veil.api.score_obfuscated`.
    On a ``model`` release ``private`` is the model's training examples, ``(vectors or texts, labels)``, and the
    resources are ``nonmembers`` (held-out examples, required), ``population`` (public labelled examples for the
    shadow-model attacks) and ``shadows`` (:mod:`veil.api.score_model`). On TextHide's ``training-encodings``
    ``private`` is the protected texts, and the resources ``public`` (the attacker's public statistics),
    ``queries`` (encodings unmixed), ``index`` and ``source_ids`` (the candidates, and each protected row's place
    among them) (:mod:`veil.api.score_encodings`). On released representations (``leace``)
    ``private`` is the private variables, one value per row, and ``epochs`` the attackers'
    (:mod:`veil.api.score_representations`). Other attacks are refused, naming :func:`veil.evaluate`.

    >>> import veil                                                              # doctest: +SKIP
    >>> texts = ["a gripping film", "a dull, lifeless plot", "the cast shines"]
    >>> out = veil.protect(texts, "texthide-inference", m=256)
    >>> print(veil.attack(out, "abs-rss", private=texts))
    """
    from veil.bench.cells.vectors import INVERSION_QUERIES

    cls, family = _check(release, attack)
    valid = resources_of(attack)
    bad = sorted(set(resources) - set(valid))
    if bad:
        raise InvalidParameterError(f"{', '.join(bad)}: not a resource of {attack!r}; its resources: "
                                    f"{', '.join(f'{k}={v!r}' for k, v in valid.items())}")
    s = {**valid, **resources}
    start = time.perf_counter()
    if family in _ELSEWHERE:
        import importlib

        module, function = _ELSEWHERE[family]
        rec, bench, cell, n = getattr(importlib.import_module(module), function)(release, attack, private, s, _cell)
        return _stamp(rec, bench, cell, release, n, start, attack)
    obs = _observation(release)
    texts, X = _private(private, release.kind, len(obs))
    cell = _cell(release, attack, len(obs), s)
    if family == "retrieval":
        rec, bench = _retrieval(cls, release, obs, texts, X, cell, s)
    else:
        rec, bench = _inversion(cls, obs, texts, X, cell, s, INVERSION_QUERIES[0 if s["quick"] else 1])
    return _stamp(rec, bench, cell, release, len(obs), start, attack)


def _stamp(rec: Any, bench: dict[str, Any], cell: Any, release: Any, n: int, start: float,
           attack: str) -> AttackOutcome:
    """The record as the bench's ``finish`` stamps a cell's, for this process (method ``api``)."""
    rec.method, rec.experiment = "api", cell.id
    rec.config.update({"cell": cell.to_dict(), "release": {"kind": release.kind, "items": n},
                       "secret_randomness": "the caller's keys (veil.protect: OS CSPRNG unless seed= was given)"})
    rec.extra["bench"] = bench
    rec.wall_time_s = time.perf_counter() - start
    return outcome(attack, release.defense.name, release.kind, rec)


def _retrieval(cls: Any, release: Any, obs: Any, texts: list[str], X: np.ndarray, cell: Any,
               s: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    from veil.attacks.retrieval import SimilaritySearch
    from veil.bench.cells.common import AttackResources
    from veil.bench.cells.vectors import public_pairs, score_retrieval

    index = s["index"] if s["index"] is not None else SimilaritySearch(texts, X)
    if not isinstance(index, SimilaritySearch):
        raise InvalidTypeError(f"index must be a veil SimilaritySearch, got {type(index).__name__}")
    q = np.arange(len(obs)) if s["query_ids"] is None else np.asarray(s["query_ids"])
    if q.shape != (len(obs),) or q.dtype.kind not in "iu" or (len(q) and (q.min() < 0 or q.max() >= len(index))):
        raise DataFormatError(f"query_ids: give one index position (0..{len(index) - 1}) per released item "
                              f"({len(obs)})")
    resources = AttackResources(index=index, seed=cell.config.seed, data=None, cell=cell,
                                train_epochs=5 if cell.config.quick else 20)

    def known() -> tuple[np.ndarray, np.ndarray]:
        P = _public(s, cell.config.quick)
        return public_pairs(release.defense, P), P

    resources._lazy["known_pairs"] = known
    attacker = cls.for_bench(resources)
    emb = s["text_embeddings"]
    if emb is None:  # the index entries' own MiniLM vectors (SBERT cosine), as the bench's
        emb = X if s["index"] is None else index.vectors
    return score_retrieval(attacker, obs, q, truth=None, text_embeddings=emb, setting=cell.id)


def _inversion(cls: Any, obs: Any, texts: list[str], X: np.ndarray, cell: Any, s: dict[str, Any],
               cap: int) -> tuple[Any, dict[str, Any]]:
    from veil.attacks.base import Observation
    from veil.bench.cells.common import AttackResources
    from veil.bench.cells.vectors import floor_what, inversion_floor, score_inversion
    from veil.training.inverter import ensure_inverter

    import sys

    # as the bench: the quick inverter is (re)trained here if missing or cut short (minutes; said on stderr)
    ensure_inverter("inverter-quick" if cell.config.quick else "inverter", log=lambda m: print(m, file=sys.stderr))
    attacker = cls.for_bench(AttackResources(index=None, seed=cell.config.seed, data=None, cell=cell))
    rows = np.arange(len(obs))
    if len(rows) > cap:  # at most the bench's cap, drawn as the bench draws its rows
        rows = np.sort(np.random.default_rng(cell.config.seed).choice(rows, size=cap, replace=False))
    seen = Observation(obs.vectors[rows], defense=dict(obs.defense), source=obs.source)
    written = attacker.run(seen)
    floor = inversion_floor(attacker, _public(s, cell.config.quick), len(rows), cell.config.seed)
    return score_inversion(attacker, ([texts[i] for i in rows], X[rows]), written, seen.vectors,
                           seen.describe()["defense"], floor, floor_what("a public sentence", cell.config.seed), cap,
                           cell.config.seed, setting=cell.id)
