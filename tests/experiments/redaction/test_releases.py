"""The releases set beside redaction on the same data: their names, the two text rewrites on running text (random
same-POS substitution keeps whitespace and closed-class words; word-level metric DP changes words only), the
owner's draws from the OS CSPRNG and an attacker's seeded copy, and both experiments running them."""

from __future__ import annotations

import re

import numpy as np
import pytest

import veil.experiments.redaction.releases as releases
from veil.errors import InvalidParameterError, InvalidTypeError
from veil.experiments.redaction.releases import check_releases, make_text_mechanism, parse_release
from veil.results import ResultRecord

TEXT = "Angela Merkel met  Emmanuel Macron in Berlin.\nThey said: 'the old treaty is fine', and left at noon."


@pytest.fixture()
def quick_public(monkeypatch):
    """The public vocabulary from the quick silver treebank (a real treebank, its first 60 documents per source)
    and 2,000 metric-DP words, so the test does not build the full one."""
    monkeypatch.setattr(releases, "TREEBANK", "silver-sm-quick")
    monkeypatch.setattr(releases, "VOCABULARY_SIZE", 2000)


def test_names_parse_to_their_family_and_bad_names_are_typed_errors():
    assert parse_release("none").family == "none"
    assert parse_release("pseudonym") == releases.Release("pseudonym", "redaction", operator="pseudonym")
    assert parse_release("metric-dp-eps10").epsilon == 10.0 and parse_release("metric-dp-eps2.5").epsilon == 2.5
    assert parse_release("random-P3").level == "P3" and parse_release("random-P3").text
    dc = parse_release("deepcandidate-eps10")
    assert dc.family == "deepcandidate" and not dc.text
    for bad in ("blur", "random-P9", "metric-dp-eps0", "metric-dp-10", "deepcandidate", "Type"):
        with pytest.raises(InvalidParameterError, match="metric-dp-eps<E>"):
            parse_release(bad)
    with pytest.raises(InvalidParameterError, match="releases a vector"):
        parse_release("deepcandidate-eps10", vectors=False)
    with pytest.raises(InvalidTypeError):
        parse_release(3)
    assert [r.name for r in check_releases(["none", "random-P3", "none"])] == ["none", "random-P3"]
    with pytest.raises(InvalidParameterError, match="empty"):
        check_releases([])
    with pytest.raises(InvalidTypeError):
        check_releases("none")


def test_random_substitution_on_running_text_keeps_whitespace_and_closed_class_words(quick_public):
    owner = make_text_mechanism(parse_release("random-P3"))  # draws from the OS CSPRNG
    assert owner.obfuscator._rng is None
    out, again = owner.transform([TEXT, "   ", ""]), owner.transform([TEXT])[0]
    assert out[1:] == ["   ", ""]
    released = out[0]
    # whitespace (two spaces, the newline) and punctuation where they were
    assert len(re.findall(r"\s", released)) == len(re.findall(r"\s", TEXT))
    assert "  " in released and "\n" in released and released.endswith(".") and ": '" in released
    words = released.split()
    assert {"met", "in", "They", "said:", "'the", "is", "and", "left", "at"} <= set(words)  # not hidden at P3
    for name in ("Merkel", "Macron", "Berlin", "treaty"):  # NNP / NN: replaced, never by themselves
        assert name not in released
    assert again != released  # fresh draws each release
    cfg = owner.config()
    assert cfg["level"] == "P3" and cfg["vocabulary"] == "silver-sm-quick train"


def test_metric_dp_rewrites_words_only_and_an_attackers_seeded_copy_is_reproducible(quick_public):
    owner = make_text_mechanism(parse_release("metric-dp-eps1"))
    released = owner.transform([TEXT])[0]
    assert [c for c in released if not c.isalpha()] == [c for c in TEXT if not c.isalpha()]
    assert released != TEXT.lower()  # epsilon 1 per word: words move
    vectors = owner.vectors
    a = make_text_mechanism(parse_release("metric-dp-eps1"), 7, vectors=vectors).transform([TEXT] * 3)
    b = make_text_mechanism(parse_release("metric-dp-eps1"), 7, vectors=vectors).transform([TEXT] * 3)
    assert a == b and len(set(a)) > 1  # a seed reproduces, and each text gets its own noise
    assert owner.config()["epsilon"] == 1.0


def test_reidentification_runs_a_text_release_with_the_attackers_own_copy(builtin, quick_public, tmp_path):
    from veil.experiments.redaction.reidentify import run_reidentification

    builtin("hoc-speeches")
    (path,) = run_reidentification(tmp_path, corpus="hoc-speeches", operators=("random-P3",), max_candidates=12,
                                   seed=0, log=lambda line: None)
    rec = ResultRecord.read(path)
    assert path.name == "reidentify-hoc-speeches-random-P3-msm-min2-max10-n12-s0.json"
    assert rec.config["variants"] == ["plain", "kerckhoffs"] and "top1[kerckhoffs]" in rec.metrics
    assert rec.config["defense"]["defense"] == "obfuscation-random" and rec.config["defense"]["level"] == "P3"
    assert rec.config["owner_randomness"].startswith("os-entropy")
    assert "spans_per_document" not in rec.metrics  # nothing was redacted
    with pytest.raises(InvalidParameterError, match="releases a vector"):
        run_reidentification(tmp_path, corpus="hoc-speeches", operators=("deepcandidate-eps10",))


def test_attributes_refuse_deepcandidate_on_other_data_before_work(tmp_path):
    from veil.corpora.attributes import AttributeCorpus
    from veil.corpora.attributes_ner import entity_variables
    from veil.experiments.redaction.attributes import run_redacted_attributes

    private = entity_variables([("Smith",), ("Jones",)], ("Smith", "Jones"))
    data = AttributeCorpus("tiny", ["Smith spoke.", "Jones spoke."], np.array([0, 1]), ("a", "b"),
                           np.array(["train", "test"], dtype=object), private, {})
    with pytest.raises(InvalidParameterError, match="built-in news-articles"):
        run_redacted_attributes(tmp_path, data=data, operators=("none", "deepcandidate-eps10"))
    assert not list(tmp_path.iterdir())


def test_passage_sentences_are_the_sentences_a_passage_was_cut_from(builtin):
    from veil.corpora.attributes import load_attributes
    from veil.errors import DataFormatError

    builtin("news-articles")
    texts = list(load_attributes("news-articles").texts[:50])
    sentences = releases.passage_sentences(texts)
    assert [" ".join(s) for s in sentences] == texts and all(1 <= len(s) <= 3 for s in sentences)
    with pytest.raises(DataFormatError, match="news-articles"):
        releases.passage_sentences(["not a passage of the corpus"])


def test_deepcandidate_releases_candidates_and_counts_the_passages_it_draws_uniformly(builtin):
    """Candidates from a slice of news-articles' train articles; each release is one of them, and 3-sentence
    passages against long-document candidates (every candidate outside some projection's sentence range: depth 0
    everywhere) get uniform draws."""
    import veil.corpora as vc
    from veil.corpora.attributes import load_attributes

    builtin("news-articles")
    corpus = vc.load("news-articles")
    train, dev = corpus.indices("train"), corpus.indices("dev")
    long = [int(i) for i in train if len(corpus.documents[i]) >= 12][:40]
    source = corpus.select(np.concatenate([long, dev[:5]]))
    texts = list(load_attributes("news-articles").texts[:12])
    X, cfg = releases.deepcandidate_vectors(texts, 10.0, say=lambda line: None, source=source)
    assert X.shape == (12, 384) and cfg["candidates"] == 40 and cfg["epsilon"] == 10.0
    assert cfg["uniform_output_share"] > 0.5  # 3-sentence passages: (almost) every candidate has depth 0
    from veil.encoders import TextEncoder, encode_sentences

    S, offsets = encode_sentences(TextEncoder("minilm"), source, progress=False)
    means = np.stack([S[offsets[i]:offsets[i + 1]].mean(axis=0) for i in range(40)])
    assert np.abs(X[:, None, :] - means[None]).max(axis=2).min(axis=1).max() < 1e-5  # every release a candidate


def test_random_text_leaves_the_shared_spacy_pipeline_whole(quick_public):
    """RandomText skips spaCy's parser per call: the cached pipeline other code parses with keeps its parser (a
    disabled pipe there once left the parsing tests without sentence boundaries)."""
    from veil.models.spacy_pipelines import load_spacy

    nlp = load_spacy("spacy-sm")
    before = list(nlp.pipe_names)
    make_text_mechanism(parse_release("random-P3")).transform([TEXT])
    assert list(nlp.pipe_names) == before and "parser" in before
    assert len(list(nlp("One sentence here. And another one.").sents)) == 2
