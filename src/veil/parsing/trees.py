"""Dependency trees and their CoNLL-U form.

A :class:`Tree` is one sentence: its words, whether a space follows each word
(``spaces``; spaCy must see them again when it re-parses the words, see
RESOURCES.md), the Penn Treebank tag of each word (``tags``, CoNLL-U XPOS), the
universal tag (``upos``), the head of each word (1-based, 0 = the root) and the
label of each arc. Positions, not words, carry the structure: an obfuscated
sentence keeps the tree of its original (:mod:`veil.defenses.obfuscation`).

:func:`write_conllu` writes trees as CoNLL-U (``SpaceAfter=No`` in MISC where no
space follows); :func:`read_conllu_trees` reads them back through veil's
CoNLL-U reader (:mod:`veil.corpora.files_conllu`), so a gold treebank of your
own (e.g. UD English EWT, which has Penn tags in XPOS) loads the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from veil.errors import DataFormatError, InvalidTypeError

__all__ = ["Tree", "check_tree", "check_heads", "check_label", "CLEAR_LABELS", "UD_LABELS", "write_conllu",
           "conllu_text", "read_conllu_trees", "read_text_file", "is_punct"]

#: Penn tags of punctuation (arcs of these words are left out of the "no punct" scores, as in CoNLL evaluations)
PUNCT_TAGS = frozenset({".", ",", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP", "$", "#"})


#: dependency labels a parser may answer: spaCy's English (ClearNLP) labels and the Universal Dependencies v2
#: relations (a UD relation may carry a lower-case subtype, ``nsubj:pass``); see :func:`check_label`
CLEAR_LABELS = frozenset("""ROOT acl acomp advcl advmod agent amod appos attr aux auxpass case cc ccomp compound conj
csubj csubjpass dative dep det dobj expl intj mark meta neg nmod npadvmod nsubj nsubjpass nummod oprd parataxis pcomp
pobj poss preconj predet prep prt punct quantmod relcl xcomp""".split())
UD_LABELS = frozenset("""acl advcl advmod amod appos aux case cc ccomp clf compound conj cop csubj dep det discourse
dislocated expl fixed flat goeswith iobj list mark nmod nsubj nummod obj obl orphan parataxis punct reparandum root
vocative xcomp""".split())


def check_label(label: object) -> bool:
    """Whether ``label`` is a dependency label veil knows (:data:`CLEAR_LABELS`, or a :data:`UD_LABELS` relation
    with an optional lower-case subtype): never whitespace, tabs or control characters, which would break CoNLL-U."""
    if not isinstance(label, str) or not label or len(label) > 40:
        return False
    if label in CLEAR_LABELS or label in UD_LABELS:
        return True
    base, sep, sub = label.partition(":")
    return bool(sep) and base in UD_LABELS and sub.isascii() and sub.isalpha() and sub.islower()


def check_heads(heads: Sequence[object]) -> str | None:
    """None when ``heads`` (1-based, 0 = the root) form one tree over the words: ints in range, no word its own
    head, exactly one root, no cycle; otherwise what is wrong."""
    n = len(heads)
    for i, h in enumerate(heads):
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= n:
            return f"word {i + 1}'s head {h!r} is not an integer in 0..{n}"
        if h == i + 1:
            return f"word {i + 1} is its own head"
    roots = [i + 1 for i, h in enumerate(heads) if h == 0]
    if len(roots) != 1:
        return f"{len(roots)} roots (words {roots[:5]}); a tree has exactly one"
    state = [0] * (n + 1)  # 0 unseen, 1 on the current path, 2 reaches the root
    state[0] = 2
    for start in range(1, n + 1):
        path, node = [], start
        while state[node] == 0:
            state[node] = 1
            path.append(node)
            node = int(heads[node - 1])  # type: ignore[call-overload]
        if state[node] == 1:
            return f"the heads form a cycle through word {node}"
        for p in path:
            state[p] = 2
    return None


def is_punct(tag: str, upos: str = "") -> bool:
    """Whether a word is punctuation: UPOS ``PUNCT`` or one of the Penn punctuation tags."""
    return upos == "PUNCT" or tag in PUNCT_TAGS


@dataclass(frozen=True)
class Tree:
    """One parsed sentence (see the module docstring). Heads are 1-based; 0 marks the root."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    heads: tuple[int, ...]
    deprels: tuple[str, ...]
    spaces: tuple[bool, ...] = ()
    upos: tuple[str, ...] = ()
    meta: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in ("words", "tags", "heads", "deprels", "spaces", "upos"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        n = len(self.words)
        if not self.spaces:
            object.__setattr__(self, "spaces", (True,) * (n - 1) + (False,) * min(n, 1))
        if not self.upos:
            object.__setattr__(self, "upos", ("_",) * n)
        check_tree(self)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def text(self) -> str:
        return "".join(w + (" " if s else "") for w, s in zip(self.words, self.spaces)).strip()

    def with_words(self, words: Sequence[str]) -> "Tree":
        """The same tree over other words (an obfuscated sentence keeps tags, heads and labels by position)."""
        return Tree(tuple(words), self.tags, self.heads, self.deprels, self.spaces, self.upos, dict(self.meta))


def check_tree(tree: Tree, where: str = "sentence") -> None:
    """Raise :class:`DataFormatError` unless ``tree`` is non-empty, fully tagged and its heads are in range."""
    n = len(tree.words)
    if n == 0:
        raise DataFormatError(f"{where} is empty; a sentence needs at least one word (drop empty lines)")
    for name in ("tags", "heads", "deprels", "spaces", "upos"):
        if len(getattr(tree, name)) != n:
            raise DataFormatError(f"{where}: {len(getattr(tree, name))} {name} for {n} words; give one per word")
    for i, (w, t) in enumerate(zip(tree.words, tree.tags)):
        if not isinstance(w, str) or not isinstance(t, str):
            raise InvalidTypeError(f"{where}: words and tags must be strings (word {i + 1})")
        if not w or any(c in w for c in "\t\n"):
            raise DataFormatError(f"{where}: word {i + 1} is empty or holds a tab or newline; tokenise it again")
        if not t or t == "_":
            raise DataFormatError(f"{where}: word {i + 1} ({w!r}) has no tag; obfuscation and the parser need a Penn "
                                  "Treebank tag (CoNLL-U XPOS) for every word: tag the text first (e.g. with "
                                  "spaCy, `token.tag_`)")
    for i, h in enumerate(tree.heads):
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= n or h == i + 1:
            raise DataFormatError(f"{where}: word {i + 1} has head {h!r}; heads are 0 (root) or another word's "
                                  f"1-based position <= {n}")


def conllu_text(trees: Iterable[Tree]) -> str:
    """Trees as CoNLL-U text (``# key = value`` comments from ``meta``, then ``# text``)."""
    out: list[str] = []
    for tree in trees:
        for key, value in tree.meta.items():
            out.append(f"# {key} = {value}")
        out.append(f"# text = {tree.text}")
        for i in range(len(tree)):
            misc = "_" if tree.spaces[i] or i == len(tree) - 1 else "SpaceAfter=No"
            out.append("\t".join((str(i + 1), tree.words[i], "_", tree.upos[i], tree.tags[i], "_",
                                  str(tree.heads[i]), tree.deprels[i] or "_", "_", misc)))
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def write_conllu(path: str | os.PathLike, trees: Iterable[Tree]) -> Path:
    """Write ``trees`` to ``path`` atomically as CoNLL-U; returns the path."""
    from veil._io import atomic_write_text

    atomic_write_text(path, conllu_text(trees))
    return Path(path)


def _spaces(words: Sequence[str], text: str) -> tuple[bool, ...]:
    """Whether a space follows each word in ``text`` (words found left to right)."""
    out, pos = [], 0
    for w in words:
        at = text.find(w, pos)
        if at < 0:  # text does not spell the words (hand-written comment): assume single spaces
            return ()
        pos = at + len(w)
        out.append(pos < len(text) and text[pos].isspace())
    return tuple(out)


def read_text_file(path: str | os.PathLike) -> str:
    """The text of a UTF-8 input file: a leading byte-order mark is dropped; a NUL byte (a binary file, or
    UTF-16 text) or bytes that are not UTF-8 are a :class:`DataFormatError` naming the file."""
    data = Path(path).read_bytes()
    nul = data.find(b"\x00")
    if nul >= 0:
        raise DataFormatError(f"{path} holds a NUL byte (byte {nul}): it is binary or UTF-16, not "
                              "UTF-8 text; convert it to UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{path} is not UTF-8 (byte {exc.start}); convert it to UTF-8") from None


def read_conllu_trees(path: str | os.PathLike, *, source: str | None = None) -> list[Tree]:
    """Read every sentence of a CoNLL-U file as a :class:`Tree` (Penn tags from XPOS).

    A word without XPOS (``_``) is refused with a :class:`DataFormatError`:
    the obfuscation spectrum is defined over Penn tags. ``source`` is the text
    itself (for tests); otherwise ``path`` is read as UTF-8.
    """
    from veil.corpora.files_conllu import read_conllu

    where = str(path)
    if source is None:
        source = read_text_file(path)
    table = read_conllu(source, where)
    trees = []
    for line, row in table.rows:
        meta = {k: v for k, v in row.items() if k not in ("text", "tokens", "upos", "xpos", "head", "deprel")}
        tree = Tree(words=row["tokens"], tags=row["xpos"], heads=row["head"], deprels=row["deprel"],
                    spaces=_spaces(row["tokens"], row["text"]), upos=row["upos"],
                    meta={str(k): str(v) for k, v in meta.items()}) if "_" not in row["xpos"] else None
        if tree is None:
            bad = row["xpos"].index("_") + 1
            raise DataFormatError(f"{where}: the sentence starting on line {line}: word {bad} "
                                  f"({row['tokens'][bad - 1]!r}) has no XPOS (Penn tag); obfuscation and the parser "
                                  "need one for every word: tag the file first (e.g. with spaCy, `token.tag_`)")
        trees.append(tree)
    if not trees:
        raise DataFormatError(f"{where} holds no sentence; a CoNLL-U file has token lines separated by blank lines")
    return trees
