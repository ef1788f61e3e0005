"""Secret Sharer canaries: the randomness space, every candidate's text, OS-CSPRNG secrets that stay hidden, and
typed errors for a format with nothing secret in it."""

from __future__ import annotations

import pytest

from veil.corpora.canaries import SECRET_SHARER, CanaryFormat, make_canaries
from veil.errors import DataFormatError, InvalidParameterError


def test_a_format_spans_its_space_and_writes_every_candidate():
    fmt = CanaryFormat("pin {d}{d}, code {a}")
    assert fmt.space == 10 * 10 * 26 and fmt.slots == ("d", "d", "a")
    assert fmt.candidate(0) == "pin 00, code a" and fmt.candidate(fmt.space - 1) == "pin 99, code z"
    assert fmt.candidate(27) == "pin 01, code b"  # mixed radix, the first slot most significant
    assert len({fmt.candidate(v) for v in range(fmt.space)}) == fmt.space
    assert CanaryFormat(SECRET_SHARER).space == 10**9
    with pytest.raises(InvalidParameterError, match="0..2599"):
        fmt.candidate(fmt.space)


def test_canaries_are_distinct_secrets_at_each_count_and_hidden_in_their_repr():
    canaries = make_canaries("my account number is {d}{d}{d}{d}{d}{d}", counts=(1, 4, 16), per_count=10)
    assert [c.count for c in canaries] == [1] * 10 + [4] * 10 + [16] * 10
    assert len({c.value for c in canaries}) == 30 and all(0 <= c.value < 10**6 for c in canaries)
    assert all(c.text().startswith("my account number is ") and len(c.text()) == 27 for c in canaries)
    assert "hidden" in repr(canaries[0]) and str(canaries[0].value) not in repr(canaries[0])
    again = make_canaries("my account number is {d}{d}{d}{d}{d}{d}", counts=(1, 4, 16), per_count=10)
    assert [c.value for c in again] != [c.value for c in canaries]  # drawn afresh (OS CSPRNG), never from a seed


def test_formats_with_nothing_secret_and_bad_counts_are_typed_errors():
    with pytest.raises(DataFormatError, match="no random slot"):
        CanaryFormat("my account number is 4815")
    with pytest.raises(DataFormatError, match="unknown slot"):
        CanaryFormat("pin {x}")
    with pytest.raises(InvalidParameterError, match="counts"):
        make_canaries("pin {d}{d}{d}", counts=(0,))
    with pytest.raises(InvalidParameterError, match="do not fit"):
        make_canaries("pin {d}", counts=(1,), per_count=6)
