"""announce_encoding: the count, the cached count and a measured estimate, with the real encoder on a small slice."""

from __future__ import annotations

import re

import pytest

from veil.encoders.plan import CALIBRATION_TEXTS, EncodingPlan, announce_encoding, estimate_seconds, is_cached
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError


@pytest.fixture(scope="module")
def encoder():
    from veil.encoders import TextEncoder

    return TextEncoder("minilm")


@pytest.fixture(scope="module")
def texts(builtin):
    return list(builtin("rt-polarity").texts[:40])


@pytest.fixture(autouse=True)
def tmp_home(tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    return tmp_path


class CountingEncoder:
    """The real encoder, counting the texts each encode() call is given (the estimate's own calls included)."""

    def __init__(self, encoder):
        self._encoder = encoder
        self.calls: list[int] = []

    def __getattr__(self, name):
        return getattr(self._encoder, name)

    def encode(self, texts, **kwargs):
        self.calls.append(len(texts))
        return self._encoder.encode(texts, **kwargs)


def test_announces_the_count_before_encoding_and_measures_the_time(encoder, texts):
    lines: list[str] = []
    spy = CountingEncoder(encoder)
    plan = announce_encoding(spy, texts, what="rt-polarity texts", cache_as=("rt-polarity", "slice"),
                             log=lines.append)
    assert isinstance(plan, EncodingPlan) and (plan.n_texts, plan.n_cached, plan.n_to_encode) == (40, 0, 40)
    assert len(lines) == 1 and lines[0].startswith("veil: encoding 40 rt-polarity texts (0 of 40 cached): about ")
    assert "on this machine now" in lines[0]
    # the estimate is a measurement: a two-text warm-up, then a calibration batch of the real texts, timed
    assert spy.calls == [2, min(CALIBRATION_TEXTS, 40)] and plan.calibration[0] == 40
    assert plan.seconds is not None and plan.seconds > 0 and plan.calibration[1] > 0


def test_cached_entry_counts_as_cached_and_is_not_timed(encoder, texts):
    from veil.encoders import encode_cached

    assert not is_cached(encoder, texts, "rt-polarity", "slice")
    encode_cached(encoder, texts, "rt-polarity", "slice", progress=False)
    assert is_cached(encoder, texts, "rt-polarity", "slice")  # the key encode_cached used
    assert not is_cached(encoder, texts[:-1], "rt-polarity", "slice")  # other texts: another entry
    assert not is_cached(encoder, texts, "rt-polarity", "slice", cache=False)
    lines: list[str] = []
    spy = CountingEncoder(encoder)
    plan = announce_encoding(spy, texts, what="texts", cache_as=("rt-polarity", "slice"), log=lines.append)
    assert (plan.n_cached, plan.n_to_encode, plan.seconds) == (40, 0, None) and spy.calls == []
    assert lines == ["veil: encoding 40 texts: all cached, nothing to encode"]


def test_partly_cached_counts_only_the_rest(encoder, texts):
    lines: list[str] = []
    spy = CountingEncoder(encoder)
    plan = announce_encoding(spy, texts, what="sentences", cached=30, log=lines.append)
    assert (plan.n_texts, plan.n_cached, plan.n_to_encode) == (40, 30, 10)
    assert lines[0].startswith("veil: encoding 10 sentences (30 of 40 cached): about ")
    assert spy.calls == [2, 10]  # only the texts still to encode are timed
    quiet = announce_encoding(spy, texts, what="sentences", estimate=False, log=lines.append)
    assert quiet.seconds is None and lines[-1] == "veil: encoding 40 sentences (0 of 40 cached)"


def test_estimate_is_the_measured_time_per_padded_token_times_the_tokens(encoder, texts):
    """All 40 texts are the calibration batch here; encode() pads each length-sorted batch of 32 to its longest."""
    seconds, (n, took) = estimate_seconds(encoder, texts)
    lengths = sorted((len(ids) for ids in encoder.tokenizer(texts, truncation=True, max_length=encoder.max_length)
                      ["input_ids"]), reverse=True)
    padded = sum(len(lengths[i:i + 32]) * lengths[i] for i in range(0, len(lengths), 32))
    assert n == 40 and took > 0
    assert seconds == pytest.approx(took * sum(lengths) / padded, rel=1e-9)
    more, (n2, took2) = estimate_seconds(encoder, texts * 5)  # 200 texts: scaled beyond the timed sample
    assert n2 == CALIBRATION_TEXTS and more / took2 > 200 / CALIBRATION_TEXTS * 0.5


def test_default_log_is_stderr(encoder, texts, capsys):
    announce_encoding(encoder, texts[:3], what="texts", estimate=False)
    out, err = capsys.readouterr()
    assert out == "" and re.fullmatch(r"veil: encoding 3 texts \(0 of 3 cached\)\n", err)


def test_bad_inputs(encoder, texts):
    with pytest.raises(InvalidTypeError):
        announce_encoding(encoder, "one text", what="texts")
    with pytest.raises(DataFormatError):
        announce_encoding(encoder, ["ok", ""], what="texts")
    with pytest.raises(InvalidParameterError, match="cached"):
        announce_encoding(encoder, texts, cached=41)
    with pytest.raises(InvalidTypeError, match="cache_as"):
        announce_encoding(encoder, texts, cache_as="rt-polarity")
    with pytest.raises(InvalidTypeError, match="what"):
        announce_encoding(encoder, texts, what="")
    with pytest.raises(InvalidParameterError, match="empty"):
        estimate_seconds(encoder, [])
