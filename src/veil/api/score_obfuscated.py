"""``veil.attack`` on an ``obfuscated-text`` release: word recovery, scored by the bench cell's own function.

The release is what :func:`veil.protect` returns for an obfuscator: ``(words, tags)`` per sentence, and the
client's keys (replaced positions and original words) in ``Protected.key``. The attacker observes what the bench's
attacker observes (:class:`~veil.attacks.word_recovery.ObfuscatedText`, Hu et al. 2020 Sec. 5.2): the obfuscated
words, their tags, and which positions were replaced. This harness reads those positions from the key it holds
(the owner's side) and gives the attacker the positions only; the original words at them come from ``private=``
(the sentences you protected) and reach the scorer only.

The attacker learns from a public treebank (the ``treebank`` resource: the bench's ``silver-sm``, its quick slice
with ``quick=True``, or a :class:`~veil.bench.data_parsing.TreebankBenchData` you built; ``limit`` caps the public
sentences it learns from) and, where it trains, from its own obfuscations of those made by the release's mechanism
with its own draws (:func:`~veil.bench.cells.obfuscated_text.attackers_mechanism`). Scoring is
:func:`~veil.bench.cells.obfuscated_text.score_word_recovery`, the bench cell's.
"""

from __future__ import annotations

from typing import Any, Callable

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["word_recovery"]


def _data(s: dict[str, Any]) -> Any:
    from veil.bench.data_parsing import TreebankBenchData, treebank_data

    tb = s["treebank"]
    if isinstance(tb, TreebankBenchData):
        if s["limit"] is not None:
            raise InvalidParameterError("limit caps a treebank veil.attack loads by name; a TreebankBenchData you "
                                        "pass is used as it is (build it with the limit you want)")
        return tb
    if not isinstance(tb, str):
        raise InvalidTypeError(f"treebank must be a bench treebank name or a TreebankBenchData, got "
                               f"{type(tb).__name__}")
    return treebank_data(tb, bool(s["quick"]), s["limit"])


def _words(private: Any, n: int) -> list[list[str]]:
    if private is None:
        raise InvalidParameterError("veil.attack scores against the truth: pass private= the sentences you "
                                    "protected, in the release's order; the attack never sees them")
    if isinstance(private, str) or not isinstance(private, (list, tuple)) or len(private) != n:
        raise InvalidTypeError(f"private: give the {n} protected sentences (a list, in the release's order)")
    out = []
    for x in private:
        w = x.words if hasattr(x, "words") else x[0] if isinstance(x, tuple) and len(x) == 2 else x
        if isinstance(w, str) or not all(isinstance(t, str) for t in w):
            raise InvalidTypeError("private: give each sentence as (words, tags), a tree, or a list of words")
        out.append(list(w))
    return out


def word_recovery(release: Any, attack: str, private: Any, s: dict[str, Any],
                  make_cell: Callable[..., Any]) -> tuple[Any, dict[str, Any], Any, int]:
    """(record, bench block, the cell it stands for, sentences) of ``attack`` on ``release`` (module docstring)."""
    from veil.attacks.word_recovery import ObfuscatedText
    from veil.bench.cells.obfuscated_text import attackers_mechanism, score_word_recovery
    from veil.defenses.obfuscation.neural import NeuralObfuscator

    sentences = release.release
    keys = None if release.key is None else release.key.value
    if not isinstance(keys, list) or len(keys) != len(sentences):
        raise InvalidParameterError("an obfuscated-text release scored by veil.attack needs its keys (the replaced "
                                    "positions): pass what veil.protect returned, key included")
    words = _words(private, len(sentences))
    originals = []
    for i, (w, k) in enumerate(zip(words, keys)):
        if len(w) != len(sentences[i][0]):
            raise DataFormatError(f"private sentence {i} has {len(w)} words, its release {len(sentences[i][0])}")
        originals.append([w[p] for p in k.positions])
    text = ObfuscatedText(tuple(tuple(w) for w, _ in sentences), tuple(tuple(t) for _, t in sentences),
                          tuple(tuple(k.positions) for k in keys))
    data = _data(s)
    cell = make_cell(release, attack, len(sentences), s)
    # the mechanism the attacker knows: the release's own network for a neural obfuscator (the bench's is its cache)
    options = {"network": release.defense.network} if isinstance(release.defense, NeuralObfuscator) else {}
    rec, bench = score_word_recovery(attack, text, originals, train=data.train, vocab=data.vocab,
                                     setup=data.setup(cell.config.seed),
                                     make=attackers_mechanism(cell, data, options),
                                     defense=release.defense.config(), setting=cell.id)
    rec.config["public"] = data.describe()
    return rec, bench, cell, len(sentences)
