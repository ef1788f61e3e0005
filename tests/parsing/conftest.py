"""A tiny treebank folder (train/dev/test.conllu), made by spaCy sm from the first brown documents.

It is laid out exactly like a user's own gold treebank, so every test that uses it also exercises the
"your own CoNLL-U in place of the silver trees" path.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_treebank(tmp_path_factory, builtin):
    from veil.models.spacy_pipelines import load_spacy, parsed_trees
    from veil.parsing.trees import Tree, write_conllu

    brown = builtin("brown")
    nlp = load_spacy("spacy-sm")
    folder = tmp_path_factory.mktemp("treebank")
    docs = {"train": range(0, 4), "dev": range(4, 5), "test": range(5, 6)}
    for split, ids in docs.items():
        trees = []
        for d in ids:
            for doc in nlp.pipe(brown.documents[d][:30]):
                heads, labels = parsed_trees(doc)
                for span in doc.sents:
                    toks = list(span)
                    if len(toks) < 3 or any(t.is_space for t in toks):
                        continue
                    hs = [0 if heads[t.i] == 0 else heads[t.i] - span.start for t in toks]
                    if any(not 0 <= h <= len(toks) for h in hs):
                        continue
                    trees.append(Tree([t.text for t in toks], [t.tag_ for t in toks], hs,
                                      [labels[t.i] for t in toks], [bool(t.whitespace_) for t in toks[:-1]] + [False],
                                      [t.pos_ for t in toks]))
        write_conllu(folder / f"{split}.conllu", trees)
    return folder


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """torch with one thread: on a shared 2-core machine two threads are several times slower (measured)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
