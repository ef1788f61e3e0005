"""The releases set beside Presidio's operators on the same data: what redaction is compared with.

A release is named by a string, the ``--operators`` value of ``veil redaction attributes | reidentify``:

* ``none``: the original text;
* ``type``, ``mask``, ``hash``, ``pseudonym``: Presidio redaction (:mod:`veil.defenses.redaction`);
* ``metric-dp-eps<E>`` (e.g. ``metric-dp-eps10``): word-level metric DP (:class:`~veil.defenses.metric_dp.
  WordMetricDP`) at epsilon E per word, every run of letters replaced, everything else kept; the word vectors are
  MiniLM's, of the 20,000 most frequent words of the public silver treebank's train split (news-articles and
  Brown train documents; :func:`public_word_vectors`);
* ``random-P<k>`` (e.g. ``random-P3``): Hu et al.'s random same-POS substitution at level Pk
  (:class:`~veil.defenses.obfuscation.RandomSubstitution`) applied to running text: spaCy sm tokenises and tags
  (Penn tags), every word of a hidden tag is replaced by a word drawn uniformly from the silver treebank's public
  train words of that tag, and the text keeps its whitespace and every other token (:class:`RandomText`);
* ``deepcandidate-eps<E>`` (e.g. ``deepcandidate-eps10``, attribute inference only): Meehan et al.'s
  DeepCandidate at epsilon-SentDP E per passage: each passage's sentences (the news-articles sentences it was
  cut from) are encoded by MiniLM and one candidate is released per passage, the candidates being the mean
  sentence embeddings of up to 5,000 public train articles with at least 8 sentences, without the recoder H
  (the bench's setting; :func:`deepcandidate_vectors`, which also counts the passages whose candidates all have
  the same depth: their release is a uniform draw, whatever epsilon is). The release is a vector, so it takes the
  place of the frozen MiniLM vector in the attribute pipeline; the text attacks (re-identification, infilling)
  do not apply.

Every mechanism's secret randomness (metric-DP noise, substitutions, DeepCandidate's sampling) comes from the OS
CSPRNG; an attacker's own copy of a mechanism (the Kerckhoffs re-identifier) may take a seed.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["REDACTION_OPERATORS", "Release", "parse_release", "check_releases", "release_help", "release_order",
           "guarantee_words", "RandomText",
           "make_text_mechanism", "public_word_vectors", "deepcandidate_vectors", "passage_sentences",
           "VOCABULARY_SIZE", "TREEBANK", "N_CANDIDATES", "MIN_SENTENCES"]

#: Presidio's operators (veil.defenses.redaction.OPERATORS), in the experiments' order
REDACTION_OPERATORS = ("type", "mask", "hash", "pseudonym")
VOCABULARY_SIZE = 20000  # the metric-DP word vectors' vocabulary (the bench's)
TREEBANK = "silver-sm"  # public text of the metric-DP vocabulary and of random substitution's words
N_CANDIDATES = 5000  # DeepCandidate's candidates (the SentDP page's)
MIN_SENTENCES = 8

_PATTERNS = (("metric-dp", re.compile(r"metric-dp-eps(\d+(?:\.\d+)?)")),
             ("random", re.compile(r"random-(P\d)")),
             ("deepcandidate", re.compile(r"deepcandidate-eps(\d+(?:\.\d+)?)")))


@dataclass(frozen=True)
class Release:
    """One release by name: ``family`` is none, redaction, metric-dp, random or deepcandidate; ``operator`` the
    Presidio operator (redaction), ``epsilon`` (metric-dp, deepcandidate) or ``level`` (random)."""

    name: str
    family: str
    operator: str | None = None
    epsilon: float | None = None
    level: str | None = None

    @property
    def text(self) -> bool:
        """True when the release is text (every family but deepcandidate)."""
        return self.family != "deepcandidate"


def release_help(vectors: bool) -> str:
    """The names a command accepts, for its --operators help and its errors."""
    names = "none, " + ", ".join(REDACTION_OPERATORS) + ", metric-dp-eps<E> (e.g. metric-dp-eps10), random-P<k> " \
                                                        "(P1-P5, e.g. random-P3)"
    return names + (", deepcandidate-eps<E> (e.g. deepcandidate-eps10)" if vectors else "")


def parse_release(name: Any, *, vectors: bool = True) -> Release:
    """The :class:`Release` a name stands for (module docstring); a typed error names the valid forms.
    ``vectors`` False: only text releases are valid (re-identification)."""
    if not isinstance(name, str):
        raise InvalidTypeError(f"a release name must be a str such as 'type' or 'metric-dp-eps10', not "
                               f"{type(name).__name__}")
    if name == "none":
        return Release(name, "none")
    if name in REDACTION_OPERATORS:
        return Release(name, "redaction", operator=name)
    for family, pattern in _PATTERNS:
        m = pattern.fullmatch(name)
        if m is None:
            continue
        if family == "random":
            from veil.defenses.obfuscation import DEFAULT_SPECTRUM

            if m.group(1) not in DEFAULT_SPECTRUM.levels:
                break
            return Release(name, family, level=m.group(1))
        eps = float(m.group(1))
        if not eps > 0:
            break
        if family == "deepcandidate" and not vectors:
            raise InvalidParameterError(f"{name!r} releases a vector, and this attack reads text; give one of "
                                        f"{release_help(False)}")
        return Release(name, family, epsilon=eps)
    raise InvalidParameterError(f"unknown release {name!r}; give one of {release_help(vectors)}")


def release_order(name: str) -> tuple[Any, ...]:
    """A sort key: none, Presidio's operators, then metric DP, random substitution and DeepCandidate (by epsilon or
    level); a name that is not a release sorts last."""
    from veil.errors import VeilError

    if name == "none":
        return (0, 0, 0.0, "")
    try:
        rel = parse_release(name)
    except VeilError:
        return (9, 0, 0.0, str(name))
    if rel.family == "redaction":
        return (1, REDACTION_OPERATORS.index(name), 0.0, "")
    return (2, ("metric-dp", "random", "deepcandidate").index(rel.family), rel.epsilon or 0.0, rel.level or "")


def guarantee_words(name: str) -> str:
    """What a release promises, in a few words (for tables)."""
    rel = parse_release(name)
    if rel.family == "none":
        return "none"
    if rel.family == "metric-dp":
        return f"metric DP, epsilon {rel.epsilon:g} per word"
    if rel.family == "deepcandidate":
        return f"epsilon-SentDP, epsilon {rel.epsilon:g} per passage"
    return "heuristic"


def check_releases(names: Any, *, vectors: bool = True) -> tuple[Release, ...]:
    """Parse a non-empty list of release names (duplicates dropped, order kept)."""
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise InvalidTypeError(f"operators must be a list of release names, e.g. ('none', 'type', "
                               f"'metric-dp-eps10'), not {type(names).__name__}")
    names = tuple(dict.fromkeys(names))
    if not names:
        raise InvalidParameterError(f"operators is empty; give some of {release_help(vectors)}")
    return tuple(parse_release(n, vectors=vectors) for n in names)


# --------------------------------------------------------------------------- text mechanisms
def _quiet(build: Any) -> Any:
    """Build with a seed without the PrivacyLeakWarning: for an ATTACKER's own copy only (its draws are no one's
    secret)."""
    from veil.errors import PrivacyLeakWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return build()


def public_word_vectors() -> Any:
    """MiniLM vectors of the :data:`VOCABULARY_SIZE` most frequent words of :data:`TREEBANK`'s train split
    (public; cached as ``<treebank>-vocabulary``)."""
    from veil.encoders import TextEncoder
    from veil.encoders.word_vectors import WordVectors, build_vocabulary
    from veil.parsing.treebank import load_treebank

    words = build_vocabulary((" ".join(t.words) for t in load_treebank("train", TREEBANK)),
                             max_size=VOCABULARY_SIZE)
    return WordVectors.from_encoder(TextEncoder("minilm"), words, name=f"{TREEBANK}-vocabulary")


class RandomText:
    """Random same-POS substitution on running text (module docstring): spaCy sm's tokens and Penn tags, hidden-tag
    words replaced, whitespace and the other tokens kept. ``rng`` None: the OS CSPRNG."""

    name = "obfuscation-random"

    def __init__(self, level: str, rng: Any = None) -> None:
        from veil.parsing.obfuscate_file import make_obfuscator

        self.obfuscator = make_obfuscator("random", level=level, treebank=TREEBANK, seed=rng)
        self._nlp: Any = None

    def config(self) -> dict[str, Any]:
        return {**self.obfuscator.config(), "text": "spaCy sm tokens and Penn tags; whitespace and unhidden "
                                                    "tokens kept", "vocabulary": f"{TREEBANK} train"}

    def transform(self, texts: Sequence[str]) -> list[str]:
        if self._nlp is None:
            from veil.models.spacy_pipelines import load_spacy

            self._nlp = load_spacy("spacy-sm")  # shared (cached): never disable its pipes, only skip them per call
        out = []
        for doc in self._nlp.pipe(list(texts), batch_size=32, disable=["parser"]):
            tokens = [t for t in doc if not t.is_space]
            if not tokens:
                out.append(doc.text)
                continue
            new = iter(self.obfuscator.obfuscate([t.text for t in tokens], [t.tag_ for t in tokens]).words)
            out.append("".join((t.text if t.is_space else next(new)) + t.whitespace_ for t in doc))
        return out


def make_text_mechanism(release: Release, rng: Any = None, *, vectors: Any = None) -> Any:
    """An object with ``transform(texts)`` and ``config()`` for a text release other than none and redaction;
    ``rng`` None: the OS CSPRNG (the owner), a seed: an attacker's own copy. ``vectors``: the metric-DP word
    vectors when already built."""
    if release.family == "metric-dp":
        from veil.defenses.metric_dp import WordMetricDP

        vectors = public_word_vectors() if vectors is None else vectors
        build = lambda: WordMetricDP(vectors=vectors, epsilon=release.epsilon, rng=rng)  # noqa: E731
    elif release.family == "random":
        build = lambda: RandomText(release.level, rng=rng)  # noqa: E731
    else:
        raise InvalidParameterError(f"{release.name!r} is not a text mechanism veil builds here")
    return build() if rng is None else _quiet(build)


# --------------------------------------------------------------------------- DeepCandidate on news passages
def passage_sentences(texts: Sequence[str]) -> list[list[str]]:
    """The news-articles sentences each passage of the ``news-articles`` attribute corpus was cut from (the corpus
    joins 3 consecutive sentences of an article with spaces)."""
    import veil.corpora as vc
    from veil.corpora.attributes_ner import PASSAGE_SENTENCES
    from veil.errors import DataFormatError

    base = vc.load("news-articles")
    lookup: dict[str, list[str]] = {}
    for sentences in base.documents:
        for start in range(0, len(sentences), PASSAGE_SENTENCES):
            chunk = [s.strip() for s in sentences[start:start + PASSAGE_SENTENCES]]
            lookup.setdefault(" ".join(chunk).strip(), [s for s in chunk if s])
    missing = [i for i, t in enumerate(texts) if t not in lookup]
    if missing:
        raise DataFormatError(f"{len(missing)} passages (first: {missing[0]}) are not passages of news-articles; "
                              "DeepCandidate runs on the built-in news-articles attribute corpus only")
    return [lookup[t] for t in texts]


def deepcandidate_vectors(texts: Sequence[str], epsilon: float, *, rng: Any = None, say: Any = print,
                          source: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
    """One epsilon-SentDP DeepCandidate release per news passage (module docstring) and the mechanism's
    configuration, with ``uniform_output_share``: the share of passages whose candidates all had the same depth
    (their release is a uniformly drawn candidate, whatever epsilon is). ``rng`` None: the OS CSPRNG. ``source``:
    the document corpus whose train (dev) documents give the candidates (default: the built-in news-articles; a
    slice of it in tests)."""
    import veil.corpora as vc
    from veil.defenses.sentdp import SentDPPipeline
    from veil.encoders import TextEncoder, encode_sentences

    corpus = vc.load("news-articles") if source is None else source
    encoder = TextEncoder("minilm")
    S, offsets = encode_sentences(encoder, corpus, progress=False)
    counts = np.diff(offsets)
    train = np.asarray([i for i in corpus.indices("train") if counts[i] >= 1], dtype=np.int64)
    dev = np.asarray([i for i in corpus.indices("dev") if counts[i] >= 1], dtype=np.int64)
    pipe = SentDPPipeline.fit_vectors(S, offsets, train, dev, n_candidates=N_CANDIDATES,
                                      min_sentences=MIN_SENTENCES, recoder=None, seed=0)
    pipe.encoder = encoder
    docs = passage_sentences(texts)
    say(f"DeepCandidate eps {epsilon:g}: {len(docs)} passages ({sum(map(len, docs))} sentences) against "
        f"{len(pipe.candidates)} public candidates")
    mech = pipe.mechanism(epsilon=epsilon, rng=rng)
    vectors = pipe.sentence_vectors(docs, progress=False)
    projections = mech.projections()  # public randomness, one set for the whole release
    released = mech.release(vectors, projections=projections)
    # a passage whose candidates all have the same utility gets a uniformly drawn candidate, whatever epsilon is
    flat = [bool(np.ptp(mech.utilities(v, projections)) == 0) for v in vectors]
    config = {"defense": "deepcandidate", "epsilon": float(epsilon), "guarantee": mech.guarantee.statement,
              "candidates": int(len(pipe.candidates)), "candidate_source": f"{corpus.name} train articles with >= "
              f"{MIN_SENTENCES} sentences (their mean MiniLM sentence embedding)", "recoder": None,
              "n_projections": mech.n_projections, "depth": mech.depth, "dim": int(pipe.dim),
              "uniform_output_share": float(np.mean(flat)),
              "uniform_output": "the share of passages whose candidates all had the same utility (depth) under the "
                                "release's projections: their release is a uniformly drawn public candidate, "
                                "whatever epsilon is"}
    return np.asarray(released.embeddings, dtype=np.float32), config
