"""Training the embedding inverter: a resumed run ends where an uninterrupted one does, a state of another
configuration is refused, bad configurations fail before any work, and the training data are public sentences
(train splits only, never the excluded corpora, held out from dev splits)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from veil.errors import (DataFormatError, InvalidParameterError, ResourceMissingError, StaleResultError,
                         UnknownNameError)
from veil.models.inverter import InversionPairs, load_inverter
from veil.training.inverter import (FULL_INVERTER, QUICK_INVERTER, InverterConfig, ensure_inverter,
                                    inverter_training_data, state_path, train_inverter)

pytestmark = pytest.mark.slow

TEXTS = ["markets rose on friday.", "the council met again.", "rain is expected tonight.", "he won the race.",
         "prices fell in june.", "the film opens soon.", "a new law was passed.", "she left the club."]
IDENTITY = {"name": "minilm", "model_id": "minilm-test", "pooling": "mean", "normalize": True, "max_length": 256,
            "dim": 384}


def _pairs(texts: list[str], seed: int) -> InversionPairs:
    x = np.random.default_rng(seed).normal(size=(len(texts), 384)).astype(np.float32)
    return InversionPairs(list(texts), x / np.linalg.norm(x, axis=1, keepdims=True), dict(IDENTITY))


def _tiny() -> InverterConfig:
    """Four steps: two batches of four sentences per epoch, two epochs, an evaluation at step 3 and at the end."""
    return InverterConfig(name="inverter-quick", sources=(("news-articles", 8),), epochs=2, batch_size=4, warmup=2,
                          eval_every=3, heldout=2, max_tokens=12, threads=1, seed=3)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The uninterrupted run of :func:`_tiny` on the test pairs: its manifest and its saved weights (the run a
    resumed or capped run must end at; trained once for this file)."""
    folder = tmp_path_factory.mktemp("inverter") / "whole"
    manifest = train_inverter(_tiny(), _pairs(TEXTS, 0), _pairs(TEXTS[:2], 1), out=folder, log=lambda _: None)
    return manifest, load_inverter(folder).net.state_dict()


def test_an_interrupted_run_resumes_and_ends_where_an_uninterrupted_one_does(tmp_path, uninterrupted):
    config, train, held = _tiny(), _pairs(TEXTS, 0), _pairs(TEXTS[:2], 1)
    whole, a = uninterrupted

    class Stop(Exception):
        pass

    def interrupt(line: str) -> None:
        if line.startswith("step 3/"):  # mid-epoch, after the state of step 3 is written
            raise Stop

    folder = tmp_path / "resumed"
    with pytest.raises(Stop):
        train_inverter(config, train, held, out=folder, log=interrupt)
    assert state_path(folder).is_file() and not folder.exists()
    with pytest.raises(StaleResultError, match="lr"):  # a state of another configuration is never resumed
        train_inverter(replace(config, lr=1e-3), train, held, out=folder, log=lambda _: None)
    lines: list[str] = []
    again = train_inverter(replace(config, max_minutes=30.0), train, held, out=folder, log=lines.append)
    assert any(line.startswith("resumed at step 3") for line in lines)
    assert not state_path(folder).exists()  # finished: the resume state is gone
    assert again["steps"] == whole["steps"] == 4
    assert [(r["step"], r["token_f1"], r["loss"]) for r in again["curve"]] == \
        [(r["step"], r["token_f1"], r["loss"]) for r in whole["curve"]]
    b = load_inverter(folder).net.state_dict()
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k]) for k in a)
    with pytest.raises(InvalidParameterError, match="already exists"):
        train_inverter(config, train, held, out=folder, log=lambda _: None)


def test_the_minute_cap_only_marks_a_run_cut_short_and_the_result_does_not_depend_on_load(tmp_path, uninterrupted):
    """The budget is steps: a run stopped by its minute cap (a busy machine) saves a model marked cut short and
    keeps its state, and resuming it session after session (across an epoch's end and an evaluation) ends exactly
    where an uninterrupted run ends; a run while two busy loops share the cores gives the same model too."""
    import subprocess
    import sys

    config, train, held = _tiny(), _pairs(TEXTS, 0), _pairs(TEXTS[:2], 1)
    whole, a = uninterrupted
    assert whole["stopped"] == "epochs" and whole["planned_steps"] == whole["steps"] == 4

    folder, hurried = tmp_path / "capped", replace(config, max_minutes=1e-6)  # every session stops after a step
    sessions: list[dict] = []
    for _ in range(10):
        lines: list[str] = []
        sessions.append(train_inverter(hurried, train, held, out=folder, log=lines.append))
        if sessions[-1]["stopped"] != "budget":
            break
        assert state_path(folder).is_file() and any("cut short" in line for line in lines)
        assert load_inverter(folder).identity()["stopped"] == "budget"  # what a record made with it says
    first = sessions[0]
    assert first["stopped"] == "budget" and first["steps"] == 1 and first["planned_steps"] == 4
    assert len(sessions) == 4 and sessions[-1]["stopped"] == "epochs" and not state_path(folder).exists()
    key = (lambda m: [(r["step"], r["token_f1"], r["loss"]) for r in m["curve"]])
    assert key(sessions[-1]) == key(whole) and sessions[-1]["selected_step"] == whole["selected_step"]
    b = load_inverter(folder).net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)

    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        busy = train_inverter(config, train, held, out=tmp_path / "busy", log=lambda _: None)
    finally:
        for p in burners:
            p.kill()
            p.wait()
    assert key(busy) == key(whole) and busy["stopped"] == "epochs"
    c = load_inverter(tmp_path / "busy").net.state_dict()
    assert all(torch.equal(a[k], c[k]) for k in a)


def test_the_bench_resumes_a_quick_inverter_cut_short_by_its_minute_cap(tmp_path, monkeypatch, real_home, builtin):
    """ensure_inverter (what the bench and `veil attack invert` call) finds the quick inverter cut short and
    resumes it, so a busy first run does not leave the demo with a weaker model for good."""
    import veil.training.inverter as ti

    builtin("trec-questions")  # pulled into the real cache if missing
    for sub in ("corpora", "embeddings", "encoders"):
        if (real_home / sub).exists():
            (tmp_path / sub).symlink_to(real_home / sub)
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    # a small corpus (selecting its sentences takes a second, news-articles' ten)
    tiny = replace(_tiny(), sources=(("trec-questions", 8),), max_minutes=1e-6)
    monkeypatch.setattr(ti, "QUICK_INVERTER", tiny)
    made: dict = {}
    real = ti.inverter_training_data

    def read_once(config, **kwargs):  # the same sentences and vectors every call: selected and encoded once here
        if config not in made:
            made[config] = real(config, **kwargs)
        return made[config]

    monkeypatch.setattr(ti, "inverter_training_data", read_once)
    ensure_inverter("inverter-quick", log=lambda _: None)
    assert load_inverter("inverter-quick").manifest["stopped"] == "budget"
    lines: list[str] = []
    ensure_inverter("inverter-quick", log=lines.append)
    assert any("cut short by its minute cap at step 1 of" in line and "resuming it" in line for line in lines)
    assert load_inverter("inverter-quick").manifest["steps"] == 2
    # cut short by a veil that kept no state (before the cap only marked a run): trained again from the start
    state_path(tmp_path / "models" / "inverter-quick").unlink()
    lines.clear()
    ensure_inverter("inverter-quick", log=lines.append)
    assert any("no state is left to resume it from: training it again" in line for line in lines)
    assert load_inverter("inverter-quick").manifest["steps"] == 1  # a fresh run, cut short again at its first step
    assert state_path(tmp_path / "models" / "inverter-quick").is_file()
    assert list(made) == [tiny]  # every session learned from the quick configuration's data


def test_bad_configurations_and_inputs_fail_before_any_work(tmp_path):
    for bad in (dict(lr=float("nan")), dict(epochs=0), dict(max_tokens=300), dict(sources=()),
                dict(sources=(("rt-polarity", None),)), dict(max_train=0), dict(bf16=1),
                dict(sources=(("brown", 5), ("brown", 6)))):
        with pytest.raises(InvalidParameterError):
            replace(_tiny(), **bad)
    with pytest.raises(UnknownNameError, match="no-such-corpus"):
        replace(_tiny(), sources=(("no-such-corpus", None),)).check_corpora()
    train = _pairs(TEXTS, 0)
    with pytest.raises(DataFormatError, match="no held-out"):
        train_inverter(_tiny(), train, _pairs([], 1), out=tmp_path / "m", log=lambda _: None)
    other = InversionPairs(TEXTS[:2], train.vectors[:2], {**IDENTITY, "model_id": "other"})
    with pytest.raises(InvalidParameterError, match="different encoders"):
        train_inverter(_tiny(), train, other, out=tmp_path / "m", log=lambda _: None)
    with pytest.raises(InvalidParameterError, match="device"):
        train_inverter(_tiny(), train, train, out=tmp_path / "m", device="tpu", log=lambda _: None)
    with pytest.raises(DataFormatError, match="NaN"):
        InversionPairs(["a"], np.full((1, 384), np.nan, dtype=np.float32), dict(IDENTITY))
    assert not (tmp_path / "m").exists() and not state_path(tmp_path / "m").exists()


def test_the_full_and_quick_configurations_learn_from_public_text_only(tmp_path, monkeypatch):
    assert FULL_INVERTER.exclude == QUICK_INVERTER.exclude == ("rt-polarity", "hutto-movies")
    FULL_INVERTER.check_corpora()
    assert len(FULL_INVERTER.sources) >= 10 and QUICK_INVERTER.sources == (("news-articles", 10000),)
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    with pytest.raises(ResourceMissingError, match=r"`veil models import DIR`.*`veil models train inverter --device "
                                                   r"cuda`"):
        ensure_inverter("inverter")  # the full model is never trained behind the user's back


def test_training_data_are_distinct_public_sentences_held_out_from_dev_splits(builtin):
    from veil.corpora.public_sentences import sentence_key, split_sentences_of

    config = replace(_tiny(), sources=(("hutto-tweets", 30), ("sms-spam", 20)), heldout=6, max_tokens=24,
                     max_train=40)
    train, held, data = inverter_training_data(config, log=lambda _: None, progress=False, cache=False)
    assert len(train) == 40 and len(held) == 6 and data["sentences"] == 40
    assert data["corpora"]["hutto-tweets"]["sentences"] + data["corpora"]["sms-spam"]["sentences"] == 40
    tweets, sms = builtin("hutto-tweets"), builtin("sms-spam")
    train_split = {sentence_key(s) for c in (tweets, sms) for s in split_sentences_of(c, "train")}
    dev_split = {sentence_key(s) for c in (tweets, sms) for s in split_sentences_of(c, "dev")}
    assert all(sentence_key(t) in train_split for t in train.texts)
    assert all(sentence_key(t) in dev_split for t in held.texts)
    assert not {sentence_key(t) for t in train.texts} & {sentence_key(t) for t in held.texts}
    assert len({sentence_key(t) for t in train.texts}) == 40
    assert all(len(t.split()) >= config.min_words for t in train.texts + held.texts)
    assert train.encoder["model_id"].startswith("minilm-") and train.encoder["dim"] == 384
    norms = np.linalg.norm(train.vectors, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-4)  # MiniLM's normalised vectors
    assert data["exclude"] == ["rt-polarity", "hutto-movies"] and data["heldout"]["sentences"] == 6


def test_the_first_encoding_of_the_public_sentences_is_announced_with_a_measured_estimate(builtin, tmp_path):
    """Issue 50, item 3: before the public sentences are encoded for the first time (a new inverter configuration
    or another backend), one line says how many and about how long, from a timing on this machine; once they are
    cached, nothing is announced. With one source cached and one not, only the missing one is counted."""
    from veil.encoders import EmbeddingCache

    builtin("hutto-tweets"), builtin("sms-spam")
    cache = EmbeddingCache(tmp_path / "embeddings")
    config = replace(_tiny(), sources=(("hutto-tweets", 30), ("sms-spam", 20)), heldout=6, max_tokens=24,
                     max_train=None)
    first: list[str] = []
    train, _, _ = inverter_training_data(config, log=first.append, progress=False, cache=cache)
    announced = [line for line in first if line.startswith("veil: encoding ")]
    assert len(announced) == 1 and "public sentences of the inverter inverter-quick" in announced[0]
    assert f"(0 of {len(train)} cached): about " in announced[0] and "on this machine now" in announced[0]
    again: list[str] = []
    inverter_training_data(config, log=again.append, progress=False, cache=cache)
    assert not [line for line in again if line.startswith("veil: encoding ")]
    # one more source: the two cached ones are counted as cached, the new one is timed
    more: list[str] = []
    bigger = replace(config, sources=config.sources + (("trec-questions", 10),))
    builtin("trec-questions")
    train, _, _ = inverter_training_data(bigger, log=more.append, progress=False, cache=cache)
    line = [line for line in more if line.startswith("veil: encoding ")]
    n_new = sum(o == "trec-questions" for o in train.corpora)
    assert len(line) == 1 and f"({len(train) - n_new} of {len(train)} cached)" in line[0]
