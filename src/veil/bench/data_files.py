"""``veil bench --data``: a labelled file or a CoNLL-U treebank of your own loaded for the bench, checked before any
cell runs (typed errors naming the column, the line or the option, and the fix); the corpus is named after the file.
Conflicting arguments raise :class:`~veil.errors.OptionError`, named by their CLI options (``--label-column``, ...),
which the CLI shows as a usage error."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from veil.errors import OptionError

__all__ = ["check_encoding", "file_name", "use_data_file", "use_data_treebank"]


def check_encoding(encoding: str) -> str:
    """``--encoding``: a codec Python knows (``utf-8``, ``latin-1``, ``cp1252``, ``utf-16``, ...)."""
    import codecs

    try:
        codecs.lookup(encoding)
    except LookupError:
        raise OptionError(f"--encoding {encoding!r} is not a known encoding; try utf-8, latin-1, cp1252 or "
                          "utf-16") from None
    return encoding


def file_name(stem: str) -> str:
    """The bench's name of a corpus given with --data: ``file-`` and the file's (or folder's) name, made safe."""
    import re

    return "file-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)[:60]


def use_data_file(path: Path, text: str, label: Optional[str], corpora: Optional[str], workers: int,
                  ray: Optional[str], drop_empty: bool, private: Optional[str] = None,
                  documents: Optional[str] = None, encoding: Optional[str] = None) -> list[str]:
    """Load ``--data`` with the file loader (its typed errors name the column or line and the fix) before any
    cell runs; the corpus is named after the file. A folder, or a CoNLL-U file (``.conllu``) given without
    --label-column, is a treebank: the dependency-parsing track runs on its trees
    (:func:`veil.bench.data_parsing.read_user_treebank`); with --label-column a CoNLL-U file is a labelled file
    (its label a ``# key = value`` comment), as before."""
    import re

    from veil.bench.data import use_corpus
    from veil.corpora.files import load_file

    if corpora is not None:
        raise OptionError("--data and --corpora exclude each other: the bench runs on your file or on the "
                          "built-in corpora (`veil bench --data FILE ...` or `veil bench --corpora A,B`)")
    if path.is_dir() or (path.suffix.lower() == ".conllu" and label is None):
        if private is not None or documents is not None:
            raise OptionError("--private-column and --documents-column apply to labelled files; a treebank "
                              "has neither (leave them out)")
        if encoding is not None:
            raise OptionError("--encoding applies to labelled files; a CoNLL-U treebank is read as UTF-8 "
                              "(leave --encoding out, and convert the treebank to UTF-8 if it is not)")
        return [use_data_treebank(path, text, label, workers, ray, drop_empty)]
    if label is None:
        raise OptionError("--data needs --label-column (the column holding each text's label): the bench "
                          "measures utility as task accuracy")
    if workers > 1 or ray is not None:
        raise OptionError("--data runs in this process only: drop --workers/--ray (Ray's workers cannot "
                          "see a file loaded here)")
    from veil.errors import DataFormatError, InvalidParameterError

    name = file_name(path.stem)
    try:
        corpus = load_file(path, text=text, label=label, name=name, drop_empty=drop_empty,
                           attributes=[c for c in (private, documents) if c],
                           encoding=check_encoding(encoding) if encoding is not None else "utf-8")
        if documents:  # one row per sentence: the rows of one document become its sentences
            from veil.corpora.grouping import group_documents

            corpus = group_documents(corpus, documents)
        if private:
            from veil.bench.data_attributes import attribute_corpus_from_file

            attributes = attribute_corpus_from_file(corpus, private)
    except (DataFormatError, InvalidParameterError) as exc:  # the loader speaks Python; name this command's options
        msg = str(exc)
        for api, option in ((", or label=None (CLI: leave out --label) to load without labels", ""),
                            (" (pass label=None to load without labels)", ""), ("for label=;", "for --label-column;"),
                            ("for text=;", "for --text-column;"), ("drop_empty=True (CLI: --drop-empty)",
                                                                     "--drop-empty"),
                            ("for attributes=;", "for --private-column/--documents-column;")):
            msg = msg.replace(api, option)
        msg = re.sub(r'encoding="([^"]+)"', r"--encoding \1", re.sub(r" \(CLI: --encoding [^)]*\)", "", msg))
        raise type(exc)(msg) from None
    names = [use_corpus(corpus)]
    if private:  # the same rows, with the private column as the attribute the representations' attackers infer
        from dataclasses import replace

        from veil.bench.data import provenance_of, use_attributes

        names.append(use_attributes(replace(attributes, name=file_name(f"{path.stem}-{private}")),
                                    provenance_of(corpus)))
    return names


def use_data_treebank(path: Path, text: str, label: Optional[str], workers: int, ray: Optional[str],
                      drop_empty: bool) -> str:
    """``--data`` naming a CoNLL-U file or a folder of train/dev/test.conllu: read and check its trees (typed errors
    naming the file, the line where there is one, and the fix) before any cell runs; named after the file."""
    from veil.bench.data import use_treebank
    from veil.bench.data_parsing import read_user_treebank, user_treebank_provenance

    given = [opt for opt, on in (("--text-column", text != "text"), ("--label-column", label is not None),
                                 ("--drop-empty", drop_empty)) if on]
    if given:
        what = ("a folder is a CoNLL-U treebank" if path.is_dir() else
                "a .conllu file without --label-column is a treebank")
        raise OptionError(f"{'/'.join(given)} {'applies' if len(given) == 1 else 'apply'} to labelled files, "
                          f"but {what}: its words, Penn tags (XPOS) and trees are the data; leave "
                          f"{'/'.join(given)} out")
    if workers > 1 or ray is not None:
        raise OptionError("--data runs in this process only: drop --workers/--ray (Ray's workers cannot "
                          "see a file loaded here)")
    trees = read_user_treebank(path)
    name = file_name(path.expanduser().resolve().name if path.is_dir() else path.stem)
    return use_treebank(name, trees, folder=path.expanduser().resolve() if path.is_dir() else None,
                        provenance=user_treebank_provenance(path))
