"""Obfuscate a file of sentences (the library side of ``veil obfuscate``).

A ``.conllu`` file is read with its own tokens and Penn tags (XPOS); any other file is plain text, one sentence
per line (blank lines skipped), tokenised and tagged by spaCy sm. The substitution vocabulary is the training
split of ``treebank`` (public text) for random substitution; the neural obfuscator brings its own (the file
``veil parse obfuscator train`` wrote). The key (every sentence's replaced positions and original words) is written
only where asked, readable by its owner only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["read_tagged", "tag_lines", "obfuscate_file", "make_obfuscator", "METHODS"]



def __getattr__(name: str) -> Any:
    """``METHODS``: the registered obfuscated-text defenses (:func:`veil.defenses.obfuscation.method_names`)."""
    if name == "METHODS":
        from veil.defenses.obfuscation import method_names

        return tuple(method_names())
    raise AttributeError(f"module 'veil.parsing.obfuscate_file' has no attribute {name!r}")


def read_tagged(path: str | os.PathLike) -> list[tuple[list[str], list[str]]]:
    """``(words, tags)`` of every sentence of ``path`` (CoNLL-U, or plain text tagged by spaCy sm)."""
    path = Path(path)
    if path.suffix == ".conllu":
        from veil.parsing.trees import read_conllu_trees

        return [(list(t.words), list(t.tags)) for t in read_conllu_trees(path)]
    from veil.parsing.trees import read_text_file

    lines = [ln.strip() for ln in read_text_file(path).splitlines() if ln.strip()]
    if not lines:
        raise DataFormatError(f"{path} holds no sentence; write one sentence per line")
    return tag_lines(lines)


def tag_lines(lines: list[str]) -> list[tuple[list[str], list[str]]]:
    """``(words, tags)`` of each sentence in ``lines`` (plain text), tokenised and tagged (Penn tags) by spaCy sm."""
    from veil.models.spacy_pipelines import load_spacy

    nlp = load_spacy("spacy-sm")
    return [([t.text for t in doc if not t.is_space], [t.tag_ for t in doc if not t.is_space])
            for doc in nlp.pipe(lines)]


def make_obfuscator(method: str = "random", *, level: str = "P3", treebank: str = "silver-sm",
                    seed: int | None = None, neural_model: str | os.PathLike | None = None) -> Any:
    """The obfuscator of ``method``: ``"random"`` (same-POS substitution over ``treebank``'s training split) or
    ``"neural"`` (the trained neural obfuscator saved at ``neural_model``; its level must be ``level``). ``seed``
    None draws from the OS CSPRNG; a seed is for experiments only (it warns)."""
    from veil.defenses.obfuscation import DEFAULT_SPECTRUM

    from veil.defenses.obfuscation import method_names

    if method not in method_names():
        raise InvalidParameterError(f"method must be one of {', '.join(method_names())}, got {method!r}")
    DEFAULT_SPECTRUM.hidden_tags(level)  # an unknown level fails before any work
    if (method == "neural") != (neural_model is not None):
        raise InvalidParameterError("the neural method needs the trained model and only it takes one: pass "
                                    "--neural-model PATH (the file `veil parse obfuscator train --level LEVEL` "
                                    "writes) with --method neural")
    if method == "neural":
        from veil.defenses.obfuscation.neural import NeuralObfuscator

        obfuscator = NeuralObfuscator.load(neural_model, rng=seed)
        if obfuscator.level != level:
            raise InvalidParameterError(f"{neural_model} obfuscates at {obfuscator.level}, not {level}; pass "
                                        f"--level {obfuscator.level} or a model trained at {level}")
        return obfuscator
    from veil.defenses.defaults import tag_vocabulary
    from veil.defenses.obfuscation import RandomSubstitution
    from veil.parsing.treebank import load_treebank

    vocab = tag_vocabulary(load_treebank("train", treebank))
    return RandomSubstitution(vocabulary=vocab, level=level, rng=seed)


def obfuscate_file(path: str | os.PathLike, *, level: str = "P3", treebank: str = "silver-sm",
                   seed: int | None = None, key_path: str | os.PathLike | None = None, method: str = "random",
                   neural_model: str | os.PathLike | None = None) -> list[Any]:
    """The obfuscated sentences of ``path`` (:class:`~veil.defenses.obfuscation.Obfuscated`) by ``method``
    (:func:`make_obfuscator`); the key goes to ``key_path`` (mode 0600) when given. ``seed`` None draws from the
    OS CSPRNG."""
    from veil._io import atomic_write

    sentences = read_tagged(path)  # a damaged input file fails before the vocabulary is built
    # a seed warns (PrivacyLeakWarning: the draws, hence the secret key, are reproducible), as `veil parse client`
    ob = make_obfuscator(method, level=level, treebank=treebank, seed=seed, neural_model=neural_model)
    out = ob.transform(sentences)
    if key_path is not None:
        with atomic_write(key_path, "w", perms=0o600) as fh:
            json.dump([{"positions": list(o.key.positions), "originals": list(o.key.originals)} for o in out], fh)
    return out
