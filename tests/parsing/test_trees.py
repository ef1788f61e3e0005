"""CoNLL-U round trip of trees, and the typed errors of malformed sentences."""

from __future__ import annotations

import pytest

from veil.errors import DataFormatError
from veil.parsing.trees import Tree, conllu_text, read_conllu_trees, write_conllu


def _tree():
    return Tree(["Mr.", "Smith", "'s", "dog", "barked", "."], ["NNP", "NNP", "POS", "NN", "VBD", "."],
                [2, 4, 2, 5, 0, 5], ["compound", "poss", "case", "nsubj", "ROOT", "punct"],
                [True, False, True, True, False, False], ["PROPN", "PROPN", "PART", "NOUN", "VERB", "PUNCT"],
                {"sent_id": "x-1"})


def test_conllu_round_trip_keeps_everything(tmp_path):
    tree = _tree()
    path = write_conllu(tmp_path / "t.conllu", [tree, tree.with_words(["A", "b", "c", "d", "e", "!"])])
    back = read_conllu_trees(path)
    assert back[0] == tree and back[0].meta["sent_id"] == "x-1"
    assert back[0].text == "Mr. Smith's dog barked."
    assert back[1].words == ("A", "b", "c", "d", "e", "!") and back[1].heads == tree.heads
    assert conllu_text(back) == conllu_text([tree, back[1]])


def test_missing_xpos_is_refused_with_a_fix(tmp_path):
    text = conllu_text([_tree()]).replace("\tNOUN\tNN\t", "\tNOUN\t_\t")
    with pytest.raises(DataFormatError, match="word 4 .'dog'. has no XPOS"):
        read_conllu_trees(tmp_path / "x.conllu", source=text)


@pytest.mark.parametrize("kwargs, message", [
    ({"words": [], "tags": [], "heads": [], "deprels": []}, "empty"),
    ({"words": ["a", "b"], "tags": ["DT", "_"], "heads": [2, 0], "deprels": ["det", "ROOT"]}, "has no tag"),
    ({"words": ["a", "b"], "tags": ["DT", ""], "heads": [2, 0], "deprels": ["det", "ROOT"]}, "has no tag"),
    ({"words": ["a", "b"], "tags": ["DT", "NN"], "heads": [2, 3], "deprels": ["det", "ROOT"]}, "has head 3"),
    ({"words": ["a", "b"], "tags": ["DT", "NN"], "heads": [1, 0], "deprels": ["det", "ROOT"]}, "has head 1"),
    ({"words": ["a", "b"], "tags": ["DT"], "heads": [2, 0], "deprels": ["det", "ROOT"]}, "1 tags for 2 words"),
])
def test_bad_sentences_are_typed_errors(kwargs, message):
    with pytest.raises(DataFormatError, match=message):
        Tree(**kwargs)


def test_a_file_without_sentences_is_refused(tmp_path):
    with pytest.raises(DataFormatError, match="holds no sentence"):
        read_conllu_trees(tmp_path / "e.conllu", source="\n\n")
