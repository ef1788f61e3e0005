"""The treebank as the bench sees it: dependency parsing on obfuscated text (Hu et al. 2020).

The bench corpus ``silver-sm`` is veil's silver treebank (spaCy en_core_web_sm parses of news-articles and brown,
:mod:`veil.parsing.treebank`). A quick bench uses the quick silver treebank (the first
:data:`~veil.parsing.treebank.QUICK_DOCS` documents of each source, built here in under a minute if missing); a
full bench uses the full one (built with ``veil parse treebank``; the bench refuses to start a 5-16 minute build
on its own and names the command).

Roles: the train split is public text (the obfuscator's same-tag vocabulary, and the attackers' own training
obfuscations: they know the mechanism, not its draws); the first :attr:`TreebankBenchData.n_test` test sentences are
the private sentences that are obfuscated, parsed and attacked.

A treebank of your own (``veil bench --data FILE.conllu`` or ``--data FOLDER``) takes the same roles:
:func:`read_user_treebank` reads and checks it (a single file is split 80/10/10 by a hash of each sentence's text,
a folder keeps its train/dev/test.conllu), :func:`user_treebank_data` builds the bench data from its trees.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["TreebankBenchData", "treebank_data", "read_user_treebank", "check_user_treebank", "user_treebank_data",
           "user_treebank_provenance", "SIZES", "MIN_TRAIN"]

#: (quick, full): private test sentences, public sentences the attackers train on, the neural attackers' minutes
#: (a safety cap: a run it stops is marked cut short), the optimiser steps of the attackers that stop on their own
#: dev MRR (``trained``, ``veil-mlm-tuned``; the same budget on a busy machine; None: no step cap), veil's masked LM
#: (``veil models train mlm [--quick]``). The quick attackers stop on their steps, epochs or dev MRR well inside their
#: 30-minute cap on 2 cores, even beside busy loops (their records say how each ended), so a busy machine takes longer
#: but records the same. The full bench's attackers still stop on their eight minutes (its records were made so).
SIZES = {"n_test": (500, 2000), "attack_train": (5000, 20000), "attack_minutes": (30.0, 8.0),
         "attack_steps": (300, None), "mlm": ("mlm-quick", "mlm")}


@dataclass
class TreebankBenchData:
    """Everything the obfuscated-text cells of one treebank share (built once per process)."""

    name: str
    treebank: str  # the treebank source (silver-sm or silver-sm-quick)
    quick: bool
    train: list[Any]
    test: list[Any]
    vocab: Any  # TagVocabulary of the public train split: what the obfuscators draw from
    limit: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    task: str = "dependency-parsing"
    provenance: list[dict[str, Any]] | None = None  # a treebank of your own: its file(s); None: the silver one's
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def setup(self, seed: int) -> Any:
        """The parsing experiment's shared settings for this slice (:class:`ParsingSetup`)."""
        from veil.experiments.obfuscation.parsing import ParsingSetup

        i = 0 if self.quick else 1
        return ParsingSetup(treebank=self.treebank, n_test=len(self.test),
                            attack_train=min(SIZES["attack_train"][i], len(self.train)),
                            attack_minutes=SIZES["attack_minutes"][i], attack_steps=SIZES["attack_steps"][i],
                            seed=seed, mlm=SIZES["mlm"][i])

    def describe(self) -> dict[str, Any]:
        counts = self.info.get("counts", {})
        prov = self.provenance if self.provenance is not None else [
            {"package": self.info.get("parser", "spaCy en_core_web_sm"),
             "file": f"{self.treebank} (sources {', '.join(self.info.get('sources', []))}; "
                     f"{counts.get('train', {}).get('sentences', '?')} train sentences)",
             "sha256": str(self.info.get("sha256", {}).get("test", ""))}]
        return {"corpus": self.name, "task": self.task, "slice": "quick" if self.quick else "full",
                "n": len(self.test), "splits": {"train": len(self.train), "test": len(self.test)},
                "num_classes": None, "treebank": self.treebank, "provenance": prov}


def treebank_data(name: str, quick: bool, limit: int | None = None) -> TreebankBenchData:
    """The treebank ``name`` for the bench; ``limit`` caps the test sentences and the public sentences the attackers
    learn from (smoke runs, tests), not the vocabulary the obfuscators draw from."""
    from veil.defenses.defaults import tag_vocabulary
    from veil.errors import InvalidParameterError, ResourceMissingError
    from veil.parsing.treebank import QUICK_SILVER, SILVER, SILVER_HOW, build_silver, load_treebank, silver_dir, \
        treebank_info

    if name != SILVER:
        raise InvalidParameterError(f"unknown bench treebank {name!r}; the bench parses {SILVER}")
    source = QUICK_SILVER if quick else SILVER
    if quick:
        build_silver(name=QUICK_SILVER, progress=True)
    elif not (silver_dir(SILVER) / "meta.json").is_file():
        raise ResourceMissingError("the silver treebank", "veil parse treebank",
                                   message=f"the full bench parses the silver treebank, which is not built yet; "
                                           f"{SILVER_HOW}")
    train = load_treebank("train", source)
    n_test = SIZES["n_test"][0 if quick else 1]
    test = load_treebank("test", source, limit=n_test if limit is None else min(n_test, limit))
    vocab = tag_vocabulary(train)  # always the whole public split
    if limit is not None:  # caps what the attackers learn from, never the obfuscators' vocabulary
        train = train[:limit]
    return TreebankBenchData(name=name, treebank=source, quick=quick, train=train, test=test, vocab=vocab,
                             limit=limit, info=treebank_info(source))


# ----------------------------------------------------------------------------------------- a treebank of your own
#: the fewest train (public) sentences a treebank of your own may have: the obfuscators draw their substitutes from
#: them and the attackers learn from them (a meaningful bench wants thousands)
MIN_TRAIN = 20
_SPLITS = ("train", "dev", "test")
_TAG_IT = "tag the text first (e.g. with spaCy, `token.tag_`)"


def _read_trees(path: Path) -> list[Any]:
    """The trees of one CoNLL-U file ([] for a file holding only blank lines); every error names the file."""
    from veil.errors import DataFormatError
    from veil.parsing.trees import read_conllu_trees, read_text_file

    source = read_text_file(path)
    if not source.strip():
        return []
    try:
        return read_conllu_trees(path, source=source)
    except DataFormatError as exc:  # a tree refused by Tree itself says "sentence: ..." without the file
        msg = str(exc)
        raise DataFormatError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None


def read_user_treebank(path: str | os.PathLike) -> dict[str, list[Any]]:
    """The trees of a treebank of your own by split (``train``, ``dev``, ``test``), checked for the bench
    (:func:`check_user_treebank`).

    ``path`` is a CoNLL-U file, split 80/10/10 by a hash of each sentence's text
    (:func:`~veil.corpora.base.hash_split`: the same sentence always lands in the same split, so a sentence repeated
    in the file is never both public and private), or a folder holding ``train.conllu``, ``dev.conllu`` and
    ``test.conllu`` (its own splits). Penn Treebank tags must be in XPOS; a word without one is refused naming the
    file and line (:func:`~veil.parsing.trees.read_conllu_trees`).
    """
    from veil.corpora.base import hash_split
    from veil.errors import DataFormatError, ResourceMissingError

    path = Path(os.fspath(path)).expanduser()
    if path.is_dir():
        missing = [f"{s}.conllu" for s in _SPLITS if not (path / f"{s}.conllu").is_file()]
        if missing:
            raise ResourceMissingError(f"{path / missing[0]}", "", message=(
                f"{path} has no {', '.join(missing)}; a treebank folder holds train.conllu, dev.conllu and "
                "test.conllu (CoNLL-U, Penn tags in XPOS), or pass a single .conllu file (split 80/10/10)"))
        trees = {s: _read_trees(path / f"{s}.conllu") for s in _SPLITS}
    elif path.is_file():
        every = _read_trees(path)
        if not every:
            raise DataFormatError(f"{path} holds no sentence; a CoNLL-U file has token lines separated by blank lines")
        trees = {s: [] for s in _SPLITS}
        for tree in every:
            trees[hash_split(tree.text)].append(tree)
    else:
        raise ResourceMissingError(f"treebank {path}", "", message=(
            f"no treebank at {path}; check the path (relative paths start at {Path.cwd()})"))
    check_user_treebank(trees, str(path), single_file=not path.is_dir())
    return trees


def user_treebank_provenance(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Where a treebank of your own came from: each of its files (the one file, or the folder's three splits), with
    its sha256, as the bench report lists them."""
    from veil._io import sha256_file

    path = Path(os.fspath(path)).expanduser().resolve()
    files = [path / f"{s}.conllu" for s in _SPLITS] if path.is_dir() else [path]
    return [{"package": f.name, "file": str(f), "sha256": sha256_file(f)} for f in files]


def check_user_treebank(trees: dict[str, list[Any]], where: str, *, single_file: bool = False) -> None:
    """Raise :class:`~veil.errors.DataFormatError` (naming ``where`` and the fix) unless the bench can run on
    ``trees``: test sentences to obfuscate, at least :data:`MIN_TRAIN` public train sentences, Penn tags the
    obfuscation hides, and at least two public words for every tag it hides (a substitute must differ from the
    word it replaces)."""
    from veil.defenses.obfuscation import DEFAULT_SPECTRUM, LEVEL_NAMES
    from veil.errors import DataFormatError

    counts = ", ".join(f"{len(trees.get(s, []))} {s}" for s in _SPLITS)
    split = (f" (split 80/10/10 by a hash of each sentence's text: {counts})" if single_file else
             f" ({counts})")
    more = ("add sentences, or pass a folder holding train.conllu, dev.conllu and test.conllu" if single_file else
            "add sentences to that split")
    if not trees.get("test"):
        raise DataFormatError(f"{where} has no test sentences{split}; the bench obfuscates, parses and attacks the "
                              f"test (private) sentences: {more}")
    if len(trees.get("train", [])) < MIN_TRAIN:
        raise DataFormatError(f"{where} has {len(trees.get('train', []))} train sentences{split}; the obfuscators "
                              f"draw substitutes from the train (public) sentences and the attackers learn from "
                              f"them: give at least {MIN_TRAIN} ({more})")
    hidden = DEFAULT_SPECTRUM.hidden_tags(LEVEL_NAMES[-1])
    if not any(tag in hidden for t in (*trees["train"], *trees["test"]) for tag in t.tags):
        seen = sorted({tag for t in trees["test"] for tag in t.tags})[:6]
        raise DataFormatError(f"{where}: no word's XPOS is a Penn Treebank tag that the obfuscation hides "
                              f"({', '.join(sorted(hidden))}); its XPOS column holds {', '.join(map(repr, seen))}, "
                              f"...: put Penn tags in XPOS ({_TAG_IT})")
    words: dict[str, set[str]] = {}
    for t in trees["train"]:
        for w, tag in zip(t.words, t.tags):
            if tag in hidden:
                words.setdefault(tag, set()).add(w.lower())
    single = {tag: next(iter(ws)) for tag, ws in sorted(words.items()) if len(ws) == 1}
    if single:
        named = ", ".join(f"{tag} ({w!r})" for tag, w in single.items())
        raise DataFormatError(f"{where}: its train (public) sentences have a single word for tag(s) {named}, so the "
                              "obfuscation cannot replace such a word by a different one: add train sentences with "
                              "other words of those tags, or drop the sentences that use them")


def _split_folder(name: str, trees: dict[str, list[Any]]) -> Path:
    """A folder holding ``trees`` as train/dev/test.conllu (owner-only files; named after their content, so a
    file given again reuses it), under ``VEIL_HOME/parsing/user``: the parsing experiments find a treebank by
    folder (the masked-LM attacker's cache key, the neural obfuscator's dev sentences)."""
    from veil._io import atomic_write, mark_owned, sha256_text, veil_home
    from veil.parsing.trees import conllu_text

    texts = {s: conllu_text(trees[s]) for s in _SPLITS}
    key = sha256_text("".join(f"{s}\n{texts[s]}" for s in _SPLITS))[:12]
    folder = veil_home() / "parsing" / "user" / f"{name}-{key}"
    if not (folder / ".veil-owned").is_file():
        mark_owned(folder, f"treebank {name} given to the bench, by split")
    for s in _SPLITS:
        path = folder / f"{s}.conllu"
        if not path.is_file() or path.read_text(encoding="utf-8") != texts[s]:
            with atomic_write(path, "w", perms=0o600) as fh:
                fh.write(texts[s])
    return folder


def user_treebank_data(name: str, trees: dict[str, list[Any]], quick: bool, limit: int | None = None, *,
                       folder: str | os.PathLike | None = None,
                       provenance: list[dict[str, Any]] | None = None) -> TreebankBenchData:
    """The bench data of a treebank of your own (``trees`` by split, from :func:`read_user_treebank`), in the
    same roles as the silver one (module docstring; ``limit`` as in :func:`treebank_data`). ``folder`` is the
    folder holding its splits (a treebank folder given to the bench); without one the splits are written once under
    ``VEIL_HOME/parsing/user``."""
    from veil.defenses.defaults import tag_vocabulary

    check_user_treebank(trees, name)
    root = Path(folder) if folder is not None else _split_folder(name, trees)
    train = list(trees["train"])
    n_test = SIZES["n_test"][0 if quick else 1]
    test = list(trees["test"][:n_test if limit is None else min(n_test, limit)])
    vocab = tag_vocabulary(train)  # always the whole public split
    if limit is not None:
        train = train[:limit]
    counts = {s: {"sentences": len(trees[s]), "words": sum(map(len, trees[s]))} for s in _SPLITS}
    return TreebankBenchData(name=name, treebank=str(root), quick=quick, train=train, test=test, vocab=vocab,
                             limit=limit, info={"counts": counts, "folder": str(root)},
                             provenance=list(provenance) if provenance is not None else
                             [{"package": "your trees", "file": str(root), "sha256": ""}])
