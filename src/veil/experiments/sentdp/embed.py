"""``veil sentdp embed``: epsilon-SentDP embeddings of a corpus split or a file of documents.

The pipeline (recoder H and candidates F) is fitted on the train and dev
splits of a PUBLIC document corpus and cached under
``veil_home()/sentdp/`` (public material only). The private documents are
either the test split of a built-in corpus (``source`` = its name; the
public corpus is then the same corpus' train/dev) or a file of your own
(CSV/JSONL/...; each text is split into sentences with spaCy).

The output is one ``.npz`` written atomically: ``embeddings`` (n, d)
float32, ``n_sentences`` (n,), ``candidate`` (n,) (the index of the chosen
public candidate) and ``meta`` (a JSON string: epsilon per document, the
guarantee, the pipeline's public configuration). Each document in it has
spent ``epsilon`` of its SentDP budget.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import DataFormatError, DataWarning, InvalidParameterError

__all__ = ["EmbedJob", "run_embed", "fitted_pipeline"]


@dataclass(frozen=True)
class EmbedJob:
    source: str
    out: Path
    epsilon: float = 10.0
    n_projections: int = 50
    depth: str = "tukey-min"
    public: str | None = None  # default: the source corpus itself (its train/dev split)
    split: str = "test"
    text: str = "text"
    n_candidates: int = 5000
    seed: int = 0
    progress: bool = True
    file_options: dict[str, Any] = field(default_factory=dict)  # loader options for a user file (encoding=, ...)


def fitted_pipeline(public: str, *, n_candidates: int = 5000, seed: int = 0, progress: bool = True):
    """The DeepCandidate pipeline fitted on ``public``'s train/dev split, cached under veil_home()/sentdp/.

    A cached file that fails its checksum or cannot be read is refitted with a
    :class:`~veil.encoders.CacheWarning` and rewritten: it holds only public
    material that the seeded fit recomputes, so refitting costs time, never
    correctness. An unwritable cache folder raises
    :class:`~veil.errors.CacheLocationError` before the fit starts.
    """
    import veil.corpora as vc
    from veil._io import veil_home, writable_dir
    from veil.defenses.sentdp.pipeline import SentDPPipeline
    from veil.encoders import CacheWarning, TextEncoder
    from veil.errors import CacheCorruptError

    encoder = TextEncoder("minilm")
    corpus = vc.load(public)
    key = json.dumps({"corpus": public, "build": corpus.provenance[0].sha256 if corpus.provenance else "",
                      "model": encoder.model_id, "n_candidates": n_candidates, "seed": seed, "format": 1},
                     sort_keys=True)
    path = veil_home() / "sentdp" / f"{public}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt"
    if path.is_file():
        try:
            return SentDPPipeline.load(path, encoder=encoder)
        except (CacheCorruptError, DataFormatError) as exc:
            problem = exc.problem if isinstance(exc, CacheCorruptError) else "it cannot be read as a saved pipeline"
            warnings.warn(f"cached SentDP pipeline {path} is damaged ({problem}); refitting it on {public!r} and "
                          f"rewriting the file", CacheWarning, stacklevel=2)
    writable_dir(path.parent)  # fail before the fit, not after
    from veil.encoders.plan import announce_encoding

    announce_encoding(encoder, [s for doc in corpus.documents or [] for s in doc],
                      what=f"sentences of {public} (the public corpus: its train/dev split fits the candidates and "
                           "the recoder, once; the fitted pipeline is cached)", cache_as=(corpus.name, "sentences"))
    pipe = SentDPPipeline.fit(corpus, encoder=encoder, n_candidates=n_candidates, seed=seed, progress=progress)
    pipe.save(path)
    return pipe


def _private_documents(job: EmbedJob) -> tuple[list[list[str]], str]:
    import veil.corpora as vc

    if job.source in vc.names():
        corpus = vc.load(job.source)
        if corpus.documents is None:
            raise InvalidParameterError(f"corpus {job.source!r} has no sentence lists; use a document corpus")
        docs = [corpus.documents[i] for i in corpus.indices(job.split)]
        return docs, f"{job.source}/{job.split}"
    from veil.corpora.sentences import split_sentences

    corpus = vc.load(job.source, **{"text": job.text, **job.file_options})
    docs = corpus.documents or split_sentences(corpus.texts, progress=job.progress)
    return docs, str(job.source)


def run_embed(job: EmbedJob) -> dict[str, Any]:
    from veil._io import atomic_write

    if Path(job.out).suffix != ".npz":
        raise InvalidParameterError(f"--out must end in .npz, got {job.out}")
    if Path(job.out).is_dir():
        raise InvalidParameterError(f"--out {job.out} is a folder; give a file name ending in .npz")
    public = job.public or job.source
    docs, what = _private_documents(job)
    empty = [i for i, d in enumerate(docs) if len(d) == 0]
    if len(empty) == len(docs):
        raise DataFormatError(f"no document of {what} has a sentence")
    if empty:
        warnings.warn(f"{len(empty)} of {len(docs)} documents of {what} have no sentences and get no embedding "
                      f"(their rows are missing from the output; 'kept' lists the kept rows)", DataWarning,
                      stacklevel=2)
    kept = [i for i, d in enumerate(docs) if len(d) > 0]
    start = time.perf_counter()
    pipe = fitted_pipeline(public, n_candidates=job.n_candidates, seed=job.seed, progress=job.progress)
    from veil.encoders.plan import announce_encoding

    announce_encoding(pipe.encoder, [s for i in kept for s in docs[i]], what=f"private sentences of {what} "
                      f"({len(kept)} documents; not cached)")
    rel = pipe.embed([docs[i] for i in kept], epsilon=job.epsilon, n_projections=job.n_projections,
                     depth=job.depth, progress=job.progress)
    mech = pipe.mechanism(epsilon=job.epsilon, n_projections=job.n_projections, depth=job.depth)
    meta = {"source": what, "public": public, "epsilon_per_document": job.epsilon,
            "guarantee": mech.guarantee.to_dict(), "job": {k: str(v) for k, v in asdict(job).items()},
            "pipeline": pipe.config()}
    with atomic_write(job.out, "wb") as fh:
        np.savez(fh, embeddings=rel.embeddings.astype(np.float32), n_sentences=rel.n_sentences,
                 candidate=rel.indices, kept=np.asarray(kept, dtype=np.int64), meta=np.asarray(json.dumps(meta)))
    return {"out": str(job.out), "documents": len(kept), "dim": int(rel.embeddings.shape[1]),
            "epsilon": job.epsilon, "seconds": time.perf_counter() - start, "m": int(len(pipe.candidates))}
