"""One function per release kind for :func:`veil.protect`: build the defense from its settings and the public
defaults (:mod:`veil.defenses.defaults`), apply its kind's verb to the data, and hand back (defense, release, key).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["protect_vectors", "protect_training_encodings", "protect_document_embeddings", "protect_text",
           "protect_obfuscated_text", "protect_model", "protect_generative_model", "protect_representations",
           "private_variables",
           "TRAINING_BATCH"]

#: the batch a TextHide training release is encrypted in (the bench's training runs; mixing is within a batch)
TRAINING_BATCH = 64


def _key(value: Any, kind: str) -> Any:
    from veil.api import SecretKey

    return SecretKey(value, kind)


def _is_corpus(data: Any) -> bool:
    return hasattr(data, "indices") and hasattr(data, "texts")


def _texts(data: Any, what: str) -> list[str] | None:
    """``data`` as a list of texts, or None if it is not one."""
    if isinstance(data, str):
        raise InvalidTypeError(f"{what}: give a list of texts, not one string (wrap it: [text])")
    if isinstance(data, (list, tuple)) and data and all(isinstance(t, str) for t in data):
        return list(data)
    return None


def _encode(texts: list[str], public_corpus: str | None = None) -> np.ndarray:
    """MiniLM vectors of ``texts``; through the embedding cache (on disk) only when they are a built-in corpus'
    public text (``public_corpus`` names it), else in memory only."""
    from veil.encoders import TextEncoder
    from veil.encoders.cache import encode_cached

    encoder = TextEncoder("minilm")
    X = (encoder.encode(texts, progress=False) if public_corpus is None else
         encode_cached(encoder, texts, public_corpus, "train-sentences", progress=False))
    return np.ascontiguousarray(X, dtype=np.float32)


def _vectors(data: Any, what: str) -> np.ndarray:
    texts = _texts(data, what)
    if texts is not None:
        return _encode(texts)
    X = np.asarray(data)
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
        raise DataFormatError(f"{what}: give (n, d) vectors or a list of texts, got an array of shape {X.shape} "
                              f"and dtype {X.dtype}")
    return np.ascontiguousarray(X, dtype=np.float32)


def _pair(data: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(data, tuple) or len(data) != 2:
        raise InvalidTypeError(f"{what}: give a pair (vectors or texts, labels)")
    X, y = _vectors(data[0], what), np.asarray(data[1])
    if len(y) != len(X) or not np.issubdtype(y.dtype, np.integer):
        raise DataFormatError(f"{what}: give one integer label per example ({len(X)} examples, {len(y)} labels)")
    return X, y.astype(np.int64)


def _pool(s: dict[str, Any], dim: int, rng: Any) -> Any:
    from veil.defenses.defaults import mask_pool

    if s["pool"] is not None:
        return s["pool"]
    return mask_pool(s["m"], dim, rng=rng)


# ---------------------------------------------------------------------------------------------------------- kinds
def protect_vectors(data: Any, name: str, s: dict[str, Any]) -> tuple[Any, Any, Any]:
    from veil.defenses.base import make_defense

    X = _vectors(data, f"{name} releases vectors")
    if name == "texthide-inference":
        from veil.defenses.texthide.inference import TextHideInference

        if s["pool"] is not None:
            defense = TextHideInference(pool=s["pool"], rng=s["seed"])
        else:
            defense = TextHideInference(m=s["m"], dim=X.shape[1], rng=s["seed"])
        return defense, defense.protect(X), _key(defense.pool, "mask pool")
    defense = make_defense(name, **_params(s))
    return defense, defense.protect(X), None


def protect_training_encodings(data: Any, name: str, s: dict[str, Any]) -> tuple[Any, Any, Any]:
    """A TextHide training run's release: ``epochs`` passes over the data, each in a fresh order, in batches of
    about :data:`TRAINING_BATCH` (:func:`~veil.attacks.texthide.observe.encrypt_training_run`, the bench's own),
    every encoding with a fresh one-time mixing. The key holds the pool and the run's mixing."""
    from veil.api import SecretKey
    from veil.attacks.texthide.observe import encrypt_training_run
    from veil.defenses.defaults import key_seeds
    from veil.defenses.texthide.mechanism import TextHide

    what = f"{name} releases the encodings of a training run"
    X, y = _pair(data, what) if isinstance(data, tuple) else (_vectors(data, what), None)
    seeds = key_seeds(s["seed"], 3)  # pool, mixing, batch order (the first two as the bench's bench_make draws them)
    pool = _pool(s, X.shape[1], seeds[0])
    public = None
    if s["mode"] == "inter":
        from veil.api import PUBLIC_SIZE
        from veil.defenses.defaults import public_vectors

        public = public_vectors(PUBLIC_SIZE, corpus=s["public"])[1]
    defense = TextHide(k=int(s["k"]), pool=pool, public=public, mode=s["mode"], rng=seeds[1], record_details=True)
    num_classes = None if y is None else max(2, int(y.max()) + 1)
    release, truth, _ = encrypt_training_run(X, defense, epochs=int(s["epochs"]), batch_size=TRAINING_BATCH, y=y,
                                             num_classes=num_classes, rng=seeds[2])
    return defense, release, SecretKey(pool, "mask pool", mixing=truth)


def _documents(docs: Any, what: str) -> list[list[str]]:
    if not isinstance(docs, (list, tuple)) or not docs or not all(
            isinstance(d, (list, tuple)) and all(isinstance(x, str) for x in d) for d in docs):
        raise InvalidTypeError(f"{what}: give documents as a list of lists of sentences (str), or a document corpus")
    empty = [i for i, d in enumerate(docs) if not d]
    if empty:
        raise DataFormatError(f"{what}: documents {empty[:5]} have no sentence; drop them first")
    return [list(d) for d in docs]


def _split_documents(corpus: Any, split: str) -> list[list[str]]:
    if corpus.documents is None:
        raise InvalidParameterError(f"corpus {corpus.name!r} has no sentence lists; give a document corpus "
                                    "(e.g. news-articles)")
    return [list(corpus.documents[i]) for i in corpus.indices(split)]


def _builtin_name(corpus: Any) -> str | None:
    """The corpus' name when it is a built-in corpus pulled from a package registry (public by construction), else
    None (a file of the user's, whatever its name)."""
    import veil.corpora as vc

    from_file = any(p.registry == "file" for p in corpus.provenance) or not corpus.provenance
    return None if from_file or corpus.name not in vc.names() else corpus.name


def _public_documents(data: Any, public: Any, name: str) -> tuple[list[list[str]], str | None]:
    """The public documents: ``public`` (a corpus name: its train split; or documents), else ``data``'s own train
    split when it is a corpus (as the bench and ``veil sentdp embed`` take it); and the corpus' name when they are
    a built-in corpus' train split (their vectors may then be cached on disk: they are public), else None."""
    if public is None:
        if not _is_corpus(data):
            raise InvalidParameterError(f"{name} needs public documents for its candidates: pass public=CORPUS (a "
                                        "document corpus, e.g. 'news-articles', whose train split is public) or "
                                        "public=[documents], as `veil sentdp embed --public CORPUS` does for a file")
        return _split_documents(data, "train"), _builtin_name(data)
    if isinstance(public, str):
        import veil.corpora as vc

        corpus = vc.load(public)
        return _split_documents(corpus, "train"), _builtin_name(corpus)
    return _documents(public, f"{name}'s public documents"), None


def _embed_documents(docs: list[list[str]], public_corpus: str | None = None) -> list[np.ndarray]:
    """Each document's sentence vectors (MiniLM). A public corpus' train split (``public_corpus`` names it) goes
    through the embedding cache, so the second protect on the same public corpus does not encode it again; any
    other text (the caller's documents, or public documents given as a list) is encoded and kept in memory only."""
    S = _encode([x for d in docs for x in d], public_corpus)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    return [S[offsets[i]:offsets[i + 1]] for i in range(len(docs))]


def protect_document_embeddings(data: Any, name: str, s: dict[str, Any]) -> tuple[Any, Any, Any]:
    from veil.defenses.defaults import document_candidates, mean_embeddings

    docs = _split_documents(data, "test") if _is_corpus(data) else _documents(data, f"{name} releases documents")
    candidates = document_candidates(mean_embeddings(_embed_documents(*_public_documents(data, s["public"], name))))
    if name == "deepcandidate":
        from veil.defenses.sentdp import DeepCandidate

        defense = DeepCandidate(candidates=candidates, epsilon=s["epsilon"], n_projections=s["n_projections"],
                                depth=s["depth"], rng=s["seed"])
    elif name == "truncation":
        from veil.defenses.truncation import Truncation

        defense = Truncation.fit(candidates, epsilon=s["epsilon"], rng=s["seed"])
    else:
        from veil.defenses.base import make_defense

        defense = make_defense(name, **_params(s))
    return defense, defense.release_embeddings(_embed_documents(docs)), None


def _corpus_texts(corpus: Any, split: str) -> list[str]:
    return [corpus.texts[i] for i in corpus.indices(split)]


def _is_documents(data: Any) -> bool:
    return (isinstance(data, (list, tuple)) and bool(data)
            and all(isinstance(d, (list, tuple)) and not isinstance(d, str) for d in data))


def protect_text(data: Any, name: str, s: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Texts (or a corpus' test split) are rewritten one by one; documents (lists of sentences) sentence by sentence
    in one release (as the bench rewrites a document corpus: one draw over all the sentences, pseudonyms consistent
    over it), and come back as documents."""
    docs = _documents(data, f"{name} rewrites documents") if _is_documents(data) else None
    if docs is not None:
        texts = [x for d in docs for x in d]
    else:
        texts = _corpus_texts(data, "test") if _is_corpus(data) else _texts(data, f"{name} rewrites texts")
    if texts is None:
        raise InvalidTypeError(f"{name} rewrites texts: give a list of texts, documents (lists of sentences) or a "
                               "corpus")
    defense, key = _text_defense(data, name, s)
    out = defense.transform(texts)
    if docs is not None:
        cuts = np.cumsum([0] + [len(d) for d in docs])
        out = [list(out[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    return defense, out, key


def _text_defense(data: Any, name: str, s: dict[str, Any]) -> tuple[Any, Any]:
    if name == "metric-dp":
        from veil.defenses.defaults import word_vectors
        from veil.defenses.metric_dp import WordMetricDP

        if s["public"] is None and not _is_corpus(data):
            raise InvalidParameterError("metric-dp needs public text for its word vectors: pass public=CORPUS (its "
                                        "train split is public) or public=[texts]")
        if isinstance(s["public"], (list, tuple)):
            public = list(s["public"])
            if not all(isinstance(t, str) for t in public):
                raise InvalidTypeError("metric-dp's public text: give a list of texts (str) or a corpus name")
        else:
            import veil.corpora as vc

            corpus = data if s["public"] is None else vc.load(s["public"])
            public = ([x for i in corpus.indices("train") for x in corpus.documents[i]] if corpus.documents
                      is not None else _corpus_texts(corpus, "train"))
        digest = hashlib.sha256("\n".join(public).encode()).hexdigest()[:12]
        return WordMetricDP(vectors=word_vectors(public, name=f"public-{digest}-vocabulary"),
                            epsilon=s["epsilon"], rng=s["seed"]), None
    if name == "redaction":
        from veil.defenses.redaction import PresidioRedaction

        defense = PresidioRedaction(operator=s["operator"], entities=s["entities"], model=s["model"],
                                    threshold=s["threshold"], scope=s["scope"], rng=s["seed"])
        secret = getattr(defense, "_key", None)
        return defense, (_key(secret, "redaction key") if secret is not None else None)
    from veil.defenses.base import make_defense

    return make_defense(name, **_params(s)), None


def _tagged(data: Any, name: str) -> list[tuple[list[str], list[str]]]:
    texts = _texts(data, f"{name} obfuscates sentences")
    if texts is not None:
        from veil.parsing.obfuscate_file import tag_lines

        return tag_lines(texts)
    if not isinstance(data, (list, tuple)) or not data:
        raise InvalidTypeError(f"{name} obfuscates sentences: give (words, tags) pairs, trees or plain sentences")
    return [(list(x.words), list(x.tags)) if hasattr(x, "words") else (list(x[0]), list(x[1])) for x in data]


def protect_obfuscated_text(data: Any, name: str, s: dict[str, Any]) -> tuple[Any, Any, Any]:
    from veil.parsing.obfuscate_file import make_obfuscator

    sentences = _tagged(data, name)
    if name == "obfuscation-neural" and s["neural_model"] is None:
        raise InvalidParameterError("obfuscation-neural needs neural_model= (the file `veil parse obfuscator train "
                                    "--level LEVEL` writes), as `veil obfuscate --method neural --neural-model` does")
    method = {"obfuscation-random": "random", "obfuscation-neural": "neural"}[name]
    defense = make_obfuscator(method, level=s["level"], treebank=s.get("treebank", "silver-sm"), seed=s["seed"],
                              neural_model=s.get("neural_model"))
    out = defense.transform(sentences)
    return defense, [(list(o.words), list(o.tags)) for o in out], _key([o.key for o in out], "obfuscation keys")


def protect_model(data: Any, name: str, s: dict[str, Any]) -> tuple[Any, Any, Any]:
    from veil.defenses.base import get_defense

    X, y = _pair(data, f"{name} trains a model")
    defense = get_defense(name)(**_params(s))
    return defense, defense.train((X, y)), None


def protect_generative_model(data: Any, name: str, s: dict[str, Any]) -> tuple[Any, Any, Any]:
    from veil.defenses.base import get_defense

    texts = _texts(data, f"{name} fine-tunes a language model")
    if texts is None:
        raise InvalidTypeError(f"{name} fine-tunes a language model on texts: give a list of strings")
    defense = get_defense(name)(**_params(s))
    return defense, defense.train_lm(texts), None


def protect_representations(data: Any, name: str, s: dict[str, Any]) -> tuple[Any, Any, Any]:
    from veil.defenses.base import get_defense

    cls = get_defense(name)
    params = {k: v for k, v in _params(s).items() if v is not None and (k != "rng" or _takes(cls, "rng"))}
    if name == "leace":
        defense = get_defense(name)()
        if data is None:
            return defense, None, None
        if not isinstance(data, tuple) or len(data) != 2:
            raise InvalidTypeError("leace: give (R, private) (representations and their private variables) or None")
        R = _vectors(data[0], "leace erases from representations")
        return defense, defense.fit(R, private_variables(data[1], len(R), "leace")).protect(R), None
    if data is not None:
        raise InvalidParameterError(f"{name} is a training objective (release kind representations): it releases "
                                    "nothing by itself; call veil.protect(None, ...) for the configured objective and "
                                    "train with it (`veil adversarial train`)")
    return cls(**params), None, None


def private_variables(z: Any, n: int, what: str) -> Any:
    """``z`` as :class:`~veil.corpora.attributes.PrivateVariables` of ``n`` examples: given as such, as a dict
    (attribute name -> one value per example) or as one value per example (one attribute, ``private``); values
    become one-hot variables (:func:`~veil.corpora.attributes.one_hot_variables`)."""
    from veil.corpora.attributes import PrivateVariables, one_hot_variables

    if isinstance(z, PrivateVariables):
        out = z
    elif isinstance(z, dict):
        out = one_hot_variables({str(k): list(v) for k, v in z.items()})
    elif isinstance(z, (list, tuple, np.ndarray)) and not isinstance(z, str) and np.ndim(z) == 1:
        out = one_hot_variables({"private": list(z)})
    else:
        raise InvalidTypeError(f"{what}: give the private variables as one value per example (a list or a 1-d "
                               "array), a dict attribute -> values, or veil.corpora.attributes.PrivateVariables")
    if len(out) != n:
        raise DataFormatError(f"{what}: {len(out)} private values for {n} representations; give one per row")
    return out


def _takes(cls: type, parameter: str) -> bool:
    import inspect

    return parameter in inspect.signature(cls.__init__).parameters


def _params(s: dict[str, Any]) -> dict[str, Any]:
    """The defense's own constructor parameters: the settings less those protect handles (``seed`` -> ``rng``)."""
    out = {k: v for k, v in s.items() if k not in ("seed", "public", "pool", "treebank", "neural_model")}
    if s.get("seed") is not None:
        out["rng"] = s["seed"]
    return out
