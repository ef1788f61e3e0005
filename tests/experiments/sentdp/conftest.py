"""Shared by the SentDP experiment tests: count what the real encoder is asked to encode."""

from __future__ import annotations

import pytest


class Calls(list):
    """How many texts each encode() call of the real encoder got (the estimate's calibration included)."""


@pytest.fixture
def count_encodes(monkeypatch):
    """``count_encodes(encoder)``: record the size of every ``encoder.encode`` call; the real method still does the
    work."""

    def wrap(encoder) -> Calls:
        calls, real = Calls(), encoder.encode

        def encode(texts, **kwargs):
            calls.append(len(texts))
            return real(texts, **kwargs)

        monkeypatch.setattr(encoder, "encode", encode)
        return calls

    return wrap
