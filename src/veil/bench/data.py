"""One corpus as the bench sees it: embeddings, the public/private split, the attacker's index, public sets.

Sentence corpora (labelled single texts): every text is private and can be queried; the attacker's index holds
the corpus' own texts (the paper's worst case, scored by Identity); the train split is what a TextHide client
trains on; dev + test are the attacker's held-out public statistics for mask recovery (never encrypted); the
public corpus (health-tweets) fills inter-mode slots.

Document corpora (labelled multi-sentence documents, SentDP): train documents are public (candidates, the
truncation box, the utility classifier), test documents are private (released, queried; the attacker's index
holds their non-private mean embeddings, the worst case).

A quick bench uses a fixed, seed-free slice of each split (every k-th example) so that every cell and every
run sees the same examples; a full bench uses whole corpora.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil.defenses.defaults import PUBLIC_CORPUS  # the bench's inter-mode public corpus
from veil.errors import InvalidParameterError

__all__ = ["BenchData", "bench_data", "bench_sentence_texts", "bench_names", "bench_task", "corpus_task",
           "use_attributes", "load_corpus", "use_corpus", "use_treebank", "every_kth", "provenance_of",
           "encoder_backend", "corpus_inputs", "given_names", "given_texts", "SIZES", "TASK_CORPORA"]

#: (quick, full) sizes: sentence texts per corpus (split proportions kept), documents per split of a document
#: corpus (train = public, test = private), public texts; None = all. Quick sentence corpora are whole: on a 2,000-text
#: slice (1,606 training texts) every masked TextHide head stayed at the majority class whatever its budget, on the
#: whole of rt-polarity (10,239) each trains (docs/bench.md)
SIZES = {"sentences": (None, None), "documents": ({"train": 400, "dev": 60, "test": 200}, None),
         "public": (2000, 20000)}


#: bench corpora that are not classification corpora: name -> (task, ``"module:function"`` building their bench data
#: from ``(name, quick, limit)``). The treebank serves dependency parsing (obfuscated text); the attribute corpora
#: pair a main task with a private variable (representations).
TASK_CORPORA: dict[str, tuple[str, str]] = {
    "silver-sm": ("dependency-parsing", "veil.bench.data_parsing:treebank_data"),
    "news-articles-people": ("private-attributes", "veil.bench.data_attributes:attribute_data"),
    "debates-2016-speaker": ("private-attributes", "veil.bench.data_attributes:attribute_data"),
    "rt-polarity-planted": ("language-modeling", "veil.bench.data_generation:planted_data"),
}


def bench_task(name: str) -> str | None:
    """The bench task of the corpus called ``name`` (a :data:`TASK_CORPORA` entry, a file given with
    :func:`use_corpus`, a treebank given with :func:`use_treebank`, or a built-in classification corpus, loaded), or
    None."""
    if name in TASK_CORPORA:
        return TASK_CORPORA[name][0]
    if name in _TREEBANKS:
        return "dependency-parsing"
    if name in _ATTRIBUTES:
        return "private-attributes"
    return corpus_task(load_corpus(name))


def encoder_backend(name: str) -> dict[str, str]:
    """The backend of the frozen MiniLM encodings the cells of corpus ``name`` read, as their records hold it (top
    level ``encoder_backend``) and :func:`veil.bench.runner.finished_cells` compares it: ``{}`` for torch (as every
    record made before backends existed) and for a treebank, whose cells read obfuscated text with veil's parsers
    and masked LM and encode nothing with MiniLM; every other corpus (classification: :func:`bench_data`;
    private attributes: the frozen MiniLM of the representations cells) resolves it as its ``TextEncoder`` will; a
    language-modeling corpus encodes nothing either (its cells read a fine-tuned causal LM)."""
    from veil.encoders.backends import backend_identity

    if name in _TREEBANKS or (name in TASK_CORPORA and TASK_CORPORA[name][0] in ("dependency-parsing",
                                                                                  "language-modeling")):
        return {}
    return backend_identity(None)


def bench_names() -> list[str]:
    """Every corpus name the bench takes without ``--data``: the built-in corpora and :data:`TASK_CORPORA`."""
    import veil.corpora as vc

    return [*vc.names(), *TASK_CORPORA]


def provenance_of(corpus: Any) -> list[dict[str, Any]]:
    """A loaded corpus' source files as the bench records them (package==version, file, sha256)."""
    return [{"package": f"{p.package}=={p.version}", "file": p.file, "sha256": p.sha256}
            for p in (corpus.provenance or [])]


def every_kth(idx: np.ndarray, limit: int | None) -> np.ndarray:
    """At most ``limit`` of ``idx``, evenly spaced in order (seed-free: every run sees the same examples)."""
    if limit is None or len(idx) <= limit:
        return idx
    return idx[np.linspace(0, len(idx) - 1, limit).round().astype(int)]


def corpus_task(corpus: Any) -> str | None:
    """The bench task a loaded corpus offers, or None (unlabelled, regression, ...)."""
    if corpus.task != "classification":
        return None
    return "document-classification" if corpus.documents is not None else "sentence-classification"


@dataclass
class BenchData:
    """Everything cells of one corpus share (built once per process; see :func:`bench_data`)."""

    name: str
    task: str
    quick: bool
    texts: list[str]
    labels: np.ndarray
    X: np.ndarray  # (n, d): sentence embeddings (sentence corpora) or mean sentence embeddings (documents)
    splits: dict[str, np.ndarray]
    num_classes: int
    label_names: list[str]
    documents: list[np.ndarray] | None = None  # per example, its (k, d) sentence embeddings
    sentences: list[list[str]] | None = None  # per example, its sentences (documents) or [its text] (sentences)
    limit: int | None = None
    provenance: list[dict[str, Any]] = field(default_factory=list)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def dim(self) -> int:
        return int(self.X.shape[1])

    @property
    def private_ids(self) -> np.ndarray:
        """What the attacker tries to identify: every text (sentences) or the test documents (documents)."""
        return np.arange(len(self.texts)) if self.documents is None else self.splits["test"]

    @property
    def candidates(self) -> np.ndarray:
        """The public (train) documents' mean sentence embeddings: SentDP's candidates and truncation box."""
        from veil.defenses.defaults import document_candidates

        return document_candidates(self.X[self.splits["train"]])

    @property
    def index(self) -> Any:
        """The attacker's search index over the private items' original (undefended) vectors."""
        if "index" not in self._cache:
            from veil.attacks.retrieval import SimilaritySearch

            ids = self.private_ids
            labels = self.labels[ids]
            self._cache["index"] = SimilaritySearch([self.texts[i] for i in ids], self.X[ids], labels=labels)
        return self._cache["index"]

    @property
    def tfidf(self) -> Any:
        if "tfidf" not in self._cache:
            from veil.metrics.leakage import TfidfScorer

            self._cache["tfidf"] = TfidfScorer(list(self.index.texts))
        return self._cache["tfidf"]

    @property
    def public_texts(self) -> list[str]:
        return self._public()[0]

    @property
    def public_vectors(self) -> np.ndarray:
        """Representations of a public corpus the attacker and the defender both can get (inter-mode slots)."""
        return self._public()[1]

    def _public(self) -> tuple[list[str], np.ndarray]:
        if "public" not in self._cache:
            from veil.defenses.defaults import public_vectors

            size = SIZES["public"][0 if self.quick else 1]
            size = size if self.limit is None else min(size, self.limit)
            self._cache["public"] = public_vectors(size, corpus=PUBLIC_CORPUS, what=(
                f"public texts of {PUBLIC_CORPUS} (the first {{n}} of its train split, for inter-mode defenses "
                "and attackers)"))
        return self._cache["public"]

    def describe(self) -> dict[str, Any]:
        return {"corpus": self.name, "task": self.task, "slice": "quick" if self.quick else "full",
                "n": len(self.texts), "splits": {k: int(len(v)) for k, v in self.splits.items()},
                "num_classes": self.num_classes, "provenance": self.provenance}


_DATA: dict[tuple[str, bool, int | None, str], Any] = {}
#: corpora given as files in this process (``veil bench --data FILE``), by name; built-in ones load by name
_FILES: dict[str, Any] = {}
#: treebanks given in this process (``veil bench --data FILE.conllu``), by name: (trees by split, their keyword
#: arguments for :func:`~veil.bench.data_parsing.user_treebank_data`)
_TREEBANKS: dict[str, tuple[dict[str, list[Any]], dict[str, Any]]] = {}
#: attribute corpora given in this process (``veil bench --data FILE --private-column P``), by name: (the
#: AttributeCorpus, its provenance)
_ATTRIBUTES: dict[str, tuple[Any, list[dict[str, Any]]]] = {}


def _given(name: str) -> None:
    """Make room for a corpus or treebank given under ``name``: never a built-in name; what was given before under
    it (and its bench data) goes."""
    import veil.corpora as vc

    if name in vc.names() or name in TASK_CORPORA:
        raise InvalidParameterError(f"a file corpus may not take the built-in name {name!r}; pass name= to "
                                    "load_file (the CLI names it after the file)")
    _FILES.pop(name, None)
    _TREEBANKS.pop(name, None)
    _ATTRIBUTES.pop(name, None)
    for key in [k for k in _DATA if k[0] == name]:  # a file given again under its name replaces the old one
        del _DATA[key]


def use_treebank(name: str, trees: dict[str, list[Any]], *, folder: Any = None,
                 provenance: list[dict[str, Any]] | None = None) -> str:
    """Make a treebank of your own available to the bench under ``name`` (task dependency-parsing), in this
    process; returns the name. ``trees`` maps ``train``, ``dev`` and ``test`` to their trees
    (:func:`veil.bench.data_parsing.read_user_treebank` reads a CoNLL-U file or folder); ``folder`` is the folder
    holding those splits, if there is one; ``provenance`` lists its files
    (:func:`~veil.bench.data_parsing.user_treebank_provenance`). The trees are checked here, before any cell."""
    from veil.bench.data_parsing import check_user_treebank

    if not isinstance(trees, dict) or set(trees) != {"train", "dev", "test"}:
        raise InvalidParameterError("trees must map 'train', 'dev' and 'test' to lists of trees "
                                    "(veil.bench.data_parsing.read_user_treebank)")
    check_user_treebank(trees, name)
    _given(name)
    _TREEBANKS[name] = ({s: list(v) for s, v in trees.items()}, {"folder": folder, "provenance": provenance})
    return name


def use_attributes(corpus: Any, provenance: list[dict[str, Any]] | None = None) -> str:
    """Make an :class:`~veil.corpora.attributes.AttributeCorpus` of your own (a labelled file with a private column,
    :func:`veil.bench.data_attributes.attribute_corpus_from_file`) available to the bench under its name (task
    private-attributes), in this process; returns the name."""
    from veil.corpora.attributes import AttributeCorpus

    if not isinstance(corpus, AttributeCorpus):
        raise InvalidParameterError(f"an attribute corpus is needed (attribute_corpus_from_file), not "
                                    f"{type(corpus).__name__}")
    from veil.bench.data_checks import check_bench_corpus

    check_bench_corpus(corpus)
    _given(corpus.name)
    _ATTRIBUTES[corpus.name] = (corpus, list(provenance or []))
    return corpus.name


def use_corpus(corpus: Any) -> str:
    """Make a loaded :class:`~veil.corpora.base.Corpus` (your own file, :func:`veil.corpora.files.load_file`)
    available to the bench under its name, in this process; returns the name. Its splits are its own (a file
    without a split column is split by :func:`~veil.corpora.base.hash_split`). A labelled corpus the bench cannot
    measure (one class, too few rows in a split or of a class) is refused here, before any encoding
    (:func:`veil.bench.data_checks.check_bench_corpus`)."""
    if corpus_task(corpus) is not None:
        from veil.bench.data_checks import check_bench_corpus

        check_bench_corpus(corpus)
    _given(corpus.name)
    _FILES[corpus.name] = corpus
    return corpus.name


def given_names() -> list[str]:
    """The corpora and treebanks given to the bench in this process (:func:`use_corpus`, :func:`use_treebank`,
    :func:`use_attributes`): the user's own data."""
    return [*_FILES, *_TREEBANKS, *_ATTRIBUTES]


def corpus_inputs(name: str) -> dict[str, str]:
    """The content hashes of what the cells of corpus ``name`` read that its name does not pin: for data given in
    this process, each source file's sha256 (by file name) and ``rows``, the sha256 of the data read from them
    (:func:`~veil.bench.data_checks.content_sha256`: the same file read with other columns is other data); ``{}``
    for built-in corpora, whose content veil's registry pins (checked on every load). A cell's record keeps them and
    is reused only while they match (:attr:`veil.experiments._sweep.Sweep.inputs`)."""
    from veil.bench.data_checks import content_sha256

    if name in _FILES:
        corpus = _FILES[name]
        files, content = [(p.file, p.sha256) for p in corpus.provenance], content_sha256(corpus)
    elif name in _ATTRIBUTES:
        corpus, provenance = _ATTRIBUTES[name]
        files, content = [(p["file"], p["sha256"]) for p in provenance], content_sha256(corpus)
    elif name in _TREEBANKS:
        trees, options = _TREEBANKS[name]
        files = [(p["file"], p["sha256"]) for p in options.get("provenance") or []]
        content = content_sha256(trees)
    else:
        return {}
    from pathlib import PurePath

    # keyed by file name, not path: the same content moved to another folder is the same input
    return {**{PurePath(str(f)).name: str(h) for f, h in files if h}, "rows": content}


def given_texts(name: str) -> list[str]:
    """Every text of the data given as ``name`` in this process that the MiniLM encoder may read (a document
    corpus' sentences too); [] for other corpora."""
    if name in _FILES:
        corpus = _FILES[name]
        return [*corpus.texts, *(s for d in corpus.documents or [] for s in d)]
    if name in _ATTRIBUTES:
        return list(_ATTRIBUTES[name][0].texts)
    if name in _TREEBANKS:
        return [t.text for trees in _TREEBANKS[name][0].values() for t in trees]
    return []


def load_corpus(name: str) -> Any:
    """A corpus the bench can plan on: one given with :func:`use_corpus`, else a built-in one."""
    if name in _FILES:
        return _FILES[name]
    import veil.corpora as vc

    return vc.load(name)


def _bench_slice(corpus: Any, name: str, quick: bool, limit: int | None) -> tuple[Any, str]:
    """The bench's slice of a loaded classification corpus (:data:`SIZES`; ``limit`` caps every split) and its
    tag (quick, full, -limitN)."""
    kind = "documents" if corpus.documents is not None else "sentences"
    size = SIZES[kind][0 if quick else 1]
    if kind == "documents":  # at least 2 sentences (SentDP's setting, App. A.4)
        keep = np.asarray([len(d) >= 2 for d in corpus.documents])
        picks = [every_kth(corpus.indices(s)[keep[corpus.indices(s)]], None if size is None else size[s])
                 for s in ("train", "dev", "test")]
    else:
        picks = [every_kth(corpus.indices(s), None if size is None else
                            max(1, int(round(size * len(corpus.indices(s)) / len(corpus))))) for s in
                 ("train", "dev", "test")]
    if limit is not None:
        picks = [every_kth(p, limit) for p in picks]
    sel_idx = np.sort(np.concatenate(picks))
    tag = ("quick" if quick else "full") + ("" if limit is None else f"-limit{limit}")
    return corpus.select(sel_idx, name=f"{name}-bench-{tag}{len(sel_idx)}"), tag


def bench_sentence_texts(name: str, quick: bool, limit: int | None = None) -> list[str] | None:
    """The texts of the bench's slice of the sentence corpus ``name`` (every one private), in the order
    :func:`bench_data` gives them, read without encoding any: for an attack that encodes only the texts it queries.
    None where ``name`` is not a plain labelled sentence corpus (a document corpus, a treebank, a user's corpus);
    there :func:`bench_data` is the way."""
    if name in _TREEBANKS or name in _ATTRIBUTES or name in TASK_CORPORA:
        return None
    corpus = load_corpus(name)
    if corpus_task(corpus) != "sentence-classification":
        return None
    return list(_bench_slice(corpus, name, quick, limit)[0].texts)


def bench_data(name: str, quick: bool, limit: int | None = None) -> Any:
    """The corpus ``name`` for the bench (loaded and encoded once per process); ``limit`` caps every split. A
    treebank (silver-sm of :data:`TASK_CORPORA`, or one given with :func:`use_treebank`) gives a
    :class:`~veil.bench.data_parsing.TreebankBenchData`, a classification corpus a :class:`BenchData`."""
    from veil.encoders.backends import resolve_backend

    key = (name, quick, limit, resolve_backend(None))  # the encodings are the backend's: kept per backend
    if key in _DATA:
        return _DATA[key]
    if name in _TREEBANKS:
        from veil.bench.data_parsing import user_treebank_data

        trees, options = _TREEBANKS[name]
        _DATA[key] = user_treebank_data(name, trees, quick, limit, **options)
        return _DATA[key]
    if name in _ATTRIBUTES:
        from veil.bench.data_attributes import attribute_data_from

        corpus, provenance = _ATTRIBUTES[name]
        _DATA[key] = attribute_data_from(name, corpus, quick, limit, provenance)
        return _DATA[key]
    if name in TASK_CORPORA:
        import importlib

        module, _, attr = TASK_CORPORA[name][1].partition(":")
        _DATA[key] = getattr(importlib.import_module(module), attr)(name, quick, limit)
        return _DATA[key]
    from veil.encoders import TextEncoder

    corpus = load_corpus(name)
    task = corpus_task(corpus)
    if task is None:
        raise InvalidParameterError(f"corpus {name!r} has no classification labels; the bench needs a labelled "
                                    f"sentence or document corpus (e.g. rt-polarity, news-articles)")
    encoder = TextEncoder("minilm", backend=key[3])
    kind = "documents" if corpus.documents is not None else "sentences"
    sel, tag = _bench_slice(corpus, name, quick, limit)
    documents = None
    from veil.encoders.plan import announce_corpus, announce_sentences

    if kind == "documents":
        from veil.defenses.defaults import mean_embeddings
        from veil.encoders import encode_sentences

        announce_sentences(encoder, sel, what=f"sentences of the bench's {tag} slice of {name} ({len(sel.texts)} "
                                              "documents)")
        S, offsets = encode_sentences(encoder, sel, progress=True)
        documents = [S[offsets[i]:offsets[i + 1]] for i in range(len(sel.texts))]
        X = mean_embeddings(documents)
    else:
        announce_corpus(encoder, sel, what=f"texts of the bench's {tag} slice of {name}")
        X = np.ascontiguousarray(encoder.encode_corpus(sel, None, progress=True), dtype=np.float32)
    splits = {s: sel.indices(s) for s in ("train", "dev", "test")}
    prov = provenance_of(corpus)
    sentences = ([list(d) for d in sel.documents] if sel.documents is not None else [[t] for t in sel.texts])
    data = BenchData(name=name, task=task, quick=quick, texts=list(sel.texts), labels=np.asarray(sel.labels),
                     X=X, splits=splits, num_classes=int(corpus.num_classes), label_names=list(corpus.label_names),
                     documents=documents, sentences=sentences, provenance=prov, limit=limit)
    _DATA[key] = data
    return data
