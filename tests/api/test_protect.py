"""``veil.protect``: every registered defense built and applied through it with nothing beyond its CLI options, on
small slices of real data; wrong settings and negative controls refused with typed errors; keys kept out of reprs.

The metric-DP word vectors are written to a VEIL_HOME of this module (its corpora and encoders are the real
cache's), never to the real cache."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import veil
from veil.api import SETTINGS, Protected, SecretKey, settings_of
from veil.defenses.base import defense_names
from veil.errors import InvalidParameterError, InvalidTypeError, PrivacyLeakWarning, UnknownNameError


@pytest.fixture(scope="module")
def home(tmp_path_factory, real_home):
    """A VEIL_HOME sharing the real corpora, encoders and parsing caches, with its own embeddings folder."""
    folder = tmp_path_factory.mktemp("home")
    for sub in ("corpora", "encoders", "parsing"):
        if (real_home / sub).exists():
            (folder / sub).symlink_to(real_home / sub)
    old = os.environ.get("VEIL_HOME")
    os.environ["VEIL_HOME"] = str(folder)
    yield folder
    if old is None:
        del os.environ["VEIL_HOME"]
    else:
        os.environ["VEIL_HOME"] = old


@pytest.fixture(scope="module")
def texts(builtin):
    rt = builtin("rt-polarity")
    return list(rt.texts[:8]), np.asarray(rt.labels[:8])


@pytest.fixture(scope="module")
def news(builtin):
    corpus = builtin("news-articles")
    train, test = corpus.indices("train"), corpus.indices("test")
    public = [list(corpus.documents[i][:4]) for i in train[:12]]
    private = [list(corpus.documents[i][:4]) for i in test[:3]]
    return public, private


@pytest.fixture(scope="module")
def trees(home):
    from veil.parsing.treebank import load_treebank

    return load_treebank("train", "silver-sm-quick"), load_treebank("test", "silver-sm-quick", limit=3)


@pytest.fixture(scope="module")
def neural_model(trees, tmp_path_factory):
    """A neural obfuscator file (untrained: its heads start at the uniform draw over each tag's candidates) built
    on the public treebank, as `veil parse obfuscator train` writes one."""
    from veil.defenses.obfuscation import NeuralObfuscator, ObfuscatorConfig
    from veil.defenses.obfuscation.neural import ObfuscatorNet, frequent_candidates
    from veil.defenses.obfuscation import DEFAULT_SPECTRUM
    from veil.models.biaffine import ParserVocab

    train = trees[0]
    config = ObfuscatorConfig(level="P3", max_candidates=50, hidden=16)
    cands = frequent_candidates(((t.words, t.tags) for t in train), DEFAULT_SPECTRUM.hidden_tags("P3"), 50)
    vocab = ParserVocab.build([(t.words, t.tags, t.deprels) for t in train], min_count=1)
    net = ObfuscatorNet(vocab, {"word_dim": 16, "tag_dim": 8, "sub_dim": 8, "sub_buckets": 500}, cands, config)
    path = tmp_path_factory.mktemp("obfuscator") / "p3.pt"
    NeuralObfuscator(network=net).save(path)
    return path


def _case(name, texts, news, trees, neural_model):
    """(data, CLI options) for one registered defense: small real data, only options its CLI has."""
    sentences, labels = texts
    public, private = news
    small = {"epochs": 2, "batch_size": 4}
    words = [s for d in public for s in d]
    return {
        "none": (sentences, {}),
        "texthide-inference": (sentences, {"m": 16}),
        "texthide": ((sentences, labels), {"m": 16, "k": 4}),
        "deepcandidate": (private, {"epsilon": 3.0, "public": public}),
        "truncation": (private, {"epsilon": 3.0, "public": public}),
        "metric-dp": (sentences[:3], {"epsilon": 10.0, "public": words}),
        "redaction": (["Mary Smith called John in Paris.", "Nothing here."], {"operator": "type"}),
        "obfuscation-random": (trees[1], {"level": "P3", "treebank": "silver-sm-quick"}),
        "obfuscation-neural": (trees[1], {"level": "P3", "neural_model": neural_model}),
        "plain": ((sentences, labels), small),
        "dpsgd": ((sentences, labels), {**small, "epsilon": 8.0}),
        "texthide-model": ((sentences, labels), {**small, "m": 16}),
        "multidetask": (None, {}), "grl": (None, {}), "generation": (None, {}), "decluster": (None, {}),
        "leace": (None, {}),
        "lm-plain": (sentences, {"steps": 2, "batch_size": 2, "max_tokens": 16}),
        "lm-scrub": (sentences, {"steps": 2, "batch_size": 2, "max_tokens": 16}),
        "lm-dedup": (sentences, {"steps": 2, "batch_size": 2, "max_tokens": 16}),
        "lm-dpsgd": (sentences, {"steps": 2, "batch_size": 2, "max_tokens": 16, "epsilon": 8.0}),
    }[name]


def test_every_registered_defense_has_settings():
    assert sorted(SETTINGS) == sorted(defense_names())


@pytest.mark.parametrize("name", defense_names())
def test_every_defense_is_built_and_applied_through_protect(name, home, texts, news, trees, neural_model):
    data, options = _case(name, texts, news, trees, neural_model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # no seeded key: every key from the OS CSPRNG
        out = veil.protect(data, name, **options)
    assert isinstance(out, Protected) and out.defense.name == name and out.kind == out.defense.releases
    n = {"vectors": len(texts[0]), "training-encodings": len(texts[0]), "document-embeddings": 3,
         "text": len(data) if data is not None else 0, "obfuscated-text": 3}.get(out.kind)
    if out.kind in ("vectors", "document-embeddings"):
        assert out.release.shape[0] == n and np.isfinite(out.release).all()
    elif out.kind == "training-encodings":
        passes = SETTINGS[name]["epochs"]  # a training run: every pass's encodings, as the bench observes them
        assert tuple(out.release.e.shape) == (passes * n, 384) and tuple(out.release.y.shape) == (passes * n, 2)
        assert out.key.mixing.n_examples == n and len(out.key.mixing.sources) == passes * n
    elif out.kind == "text":
        assert len(out.release) == n and all(isinstance(t, str) for t in out.release)
    elif out.kind == "obfuscated-text":
        assert [len(w) for w, _ in out.release] == [len(t.words) for t in trees[1]]
        assert [tags for _, tags in out.release] == [list(t.tags) for t in trees[1]]
    elif out.kind == "model":
        assert out.release is not None
    elif out.kind == "generative-model":  # a fine-tuned language model, trained for the steps asked
        private = out.release.accounting is not None  # DP-SGD releases no training loss (outside its guarantee)
        assert len(out.release.losses) == (0 if private else 2) and out.release.n_train == len(data)
    else:
        assert out.kind == "representations" and out.release is None
    if name in ("texthide", "texthide-inference", "obfuscation-random", "obfuscation-neural"):
        assert isinstance(out.key, SecretKey) and "hidden" in repr(out.key) and "hidden" in repr(out)


def test_the_mask_pool_is_secret_and_a_given_pool_is_used():
    from veil.defenses.texthide.masks import MaskPool

    X = np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32)
    pool = MaskPool(1, 8)
    out = veil.protect(X, "texthide-inference", pool=pool)
    assert out.key.value is pool and "mask" in out.key.kind
    assert np.array_equal(np.abs(out.release), np.abs(X))  # sign masks only
    assert np.array_equal(out.release, X * pool.masks[0].numpy())  # one mask: every row masked by it
    assert str(pool.masks[0].numpy()) not in repr(out) + repr(out.key)
    with pytest.raises(TypeError, match="not pickled"):
        import pickle

        pickle.dumps(out.key)


def test_settings_take_the_cli_names_and_defaults():
    import inspect

    from veil.cli.obfuscate import obfuscate
    from veil.cli.redact import redact
    from veil.cli.sentdp import sentdp_embed

    def defaults(command):
        return {k: p.default for k, p in inspect.signature(command).parameters.items()}

    for name, command in (("deepcandidate", sentdp_embed), ("redaction", redact), ("obfuscation-random", obfuscate)):
        cli = defaults(command)
        shared = {k: v for k, v in settings_of(name).items() if k in cli and k not in ("public",)}
        assert shared and shared == {k: cli[k] for k in shared}, name
    assert settings_of("texthide")["m"] == 256 and settings_of("texthide")["k"] == 4


def test_a_wrong_setting_is_a_typed_error_naming_the_valid_ones():
    X = np.zeros((4, 8), dtype=np.float32)
    with pytest.raises(InvalidParameterError, match=r"epsilon: not a setting of 'texthide-inference'.*m=256"):
        veil.protect(X, "texthide-inference", epsilon=1.0)
    with pytest.raises(UnknownNameError, match="valid defense names"):
        veil.protect(X, "texthyde")
    with pytest.raises(InvalidParameterError, match="public=CORPUS"):
        veil.protect([["One sentence."]], "deepcandidate")
    with pytest.raises(InvalidParameterError, match="neural_model="):
        veil.protect([(["A", "dog"], ["DT", "NN"])], "obfuscation-neural")
    with pytest.raises(InvalidTypeError, match="list of texts"):
        veil.protect("one text", "none")


@pytest.mark.parametrize("name", ["dpsgd-broken-half-noise", "deepcandidate-broken-doubled-epsilon"])
def test_a_negative_control_is_refused_naming_veil_controls(name):
    with pytest.raises(InvalidParameterError, match=r"negative control.*veil\.controls\.make_control"):
        veil.protect(np.zeros((2, 4)), name)
    with pytest.raises(InvalidParameterError, match=r"veil\.controls\.make_control"):
        veil.make_defense(name)
