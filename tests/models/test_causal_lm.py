"""The causal LM of the generative-model release: training is a fixed number of steps, reproducible per seed, and
bad input is typed. That it memorises a planted canary, and writes it out, is tested through the attacks that must
find it (tests/attacks/test_generation.py), on one model trained once."""

from __future__ import annotations

import pytest

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.models.causal_lm import build_causal_lm, log_perplexities, sample, train_steps


@pytest.fixture(scope="module")
def public(builtin):
    corpus = builtin("rt-polarity")
    return [t for t in (corpus.texts[i] for i in corpus.indices("train")) if len(t) < 60][:30]


def test_training_is_a_fixed_number_of_steps_reproducible_per_seed(public):
    runs = []
    for _ in range(2):
        lm = build_causal_lm(max_tokens=24)
        runs.append(train_steps(lm, public, steps=3, batch_size=4, lr=1e-4, seed=5))
    assert runs[0] == runs[1] and len(runs[0]) == 3


def test_bad_input_is_a_typed_error():
    lm = build_causal_lm(max_tokens=8)
    with pytest.raises(InvalidTypeError, match="list of texts"):
        log_perplexities(lm, "one text")
    with pytest.raises(DataFormatError, match="no text"):
        log_perplexities(lm, [])
    with pytest.raises(DataFormatError, match="non-empty"):
        train_steps(lm, ["a text", "  "], steps=1)
    with pytest.raises(InvalidParameterError, match="lr"):
        train_steps(lm, ["a text"], steps=1, lr=0.0)
    with pytest.raises(InvalidParameterError, match="temperature"):
        sample(lm, 1, temperature=0.0)
    with pytest.raises(InvalidParameterError, match="min_tokens"):
        sample(lm, 1, max_tokens=2, min_tokens=3)
    fixed = sample(lm, 2, prompt="a", max_tokens=5, min_tokens=5, seed=3)  # [SEP] held back: five new pieces each
    assert all(len(lm.tokenizer(t, add_special_tokens=False)["input_ids"]) >= 5 for t in fixed)


class _Stop(Exception):
    pass


def test_an_interrupted_run_resumes_from_its_checkpoint_and_ends_where_an_uninterrupted_one_does(public, tmp_path):
    import torch

    whole = build_causal_lm(max_tokens=16)
    losses = train_steps(whole, public, steps=6, batch_size=4, lr=1e-4, seed=2)
    state = tmp_path / "state.pt"

    def stop_at_five(line):
        if line.startswith("causal LM: step 5/"):
            raise _Stop

    cut = build_causal_lm(max_tokens=16)
    with pytest.raises(_Stop):
        train_steps(cut, public, steps=6, batch_size=4, lr=1e-4, seed=2, checkpoint=state, save_every=2,
                    log=stop_at_five)
    assert state.is_file()  # saved at step 4, before the stop
    lines = []
    again = build_causal_lm(max_tokens=16)
    resumed = train_steps(again, public, steps=6, batch_size=4, lr=1e-4, seed=2, checkpoint=state, save_every=2,
                          log=lines.append)
    assert "causal LM: resumed at step 4/6" in lines and not state.exists()  # removed once the run is done
    assert resumed == losses
    for (name, a), b in zip(whole.net.state_dict().items(), again.net.state_dict().values()):
        assert torch.equal(a, b), name
    with pytest.raises(InvalidParameterError, match="save_every"):
        train_steps(again, public, steps=2, save_every=0, checkpoint=state)


def test_a_checkpoint_of_another_run_is_refused(public, tmp_path):
    state = tmp_path / "state.pt"
    lm = build_causal_lm(max_tokens=16)

    def stop(line):
        if line.startswith("causal LM: step 3/"):
            raise _Stop

    with pytest.raises(_Stop):
        train_steps(lm, public, steps=4, batch_size=2, seed=1, checkpoint=state, save_every=2, log=stop)
    with pytest.raises(DataFormatError, match="belongs to a run of 4 steps, not 9; delete"):
        train_steps(build_causal_lm(max_tokens=16), public, steps=9, batch_size=2, seed=1, checkpoint=state)
    state.write_bytes(b"not a torch file")
    with pytest.raises(DataFormatError, match="damaged or not a file veil wrote"):
        train_steps(build_causal_lm(max_tokens=16), public, steps=4, batch_size=2, seed=1, checkpoint=state)


def test_a_build_is_a_private_copy_of_the_pretrained_load():
    """Builds copy one load per process: a caller changing its model (training does) never changes the next build,
    which holds exactly the weights a fresh load from the same seed gives."""
    import torch

    import veil.models.causal_lm as causal_lm

    first = build_causal_lm(max_tokens=8)
    with torch.no_grad():
        for p in first.net.parameters():
            p.add_(1.0)
    second = build_causal_lm(max_tokens=8)
    causal_lm._pretrained.cache_clear()
    fresh = build_causal_lm(max_tokens=8)
    a, b = second.net.state_dict(), fresh.net.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(first.net.state_dict()["cls.predictions.transform.dense.weight"],
                           a["cls.predictions.transform.dense.weight"])
    other = build_causal_lm(max_tokens=8, seed=1)  # the fresh layers come from the seed
    assert not torch.equal(other.net.state_dict()["cls.predictions.transform.dense.weight"],
                           a["cls.predictions.transform.dense.weight"])
