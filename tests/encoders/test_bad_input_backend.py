"""`veil encode` with a bad VEIL_ENCODER_BACKEND: one `veil: error` line, exit 2, nothing written."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("value, match", [
    ("fp16", r"VEIL_ENCODER_BACKEND='fp16' is not an encoder backend; set it to one of bf16, onnx, torch"),
    ("ONNX", r"VEIL_ENCODER_BACKEND='ONNX' is not an encoder backend"),
])
def test_encode_refuses_an_unknown_backend_in_the_environment(cli, monkeypatch, value, match):
    monkeypatch.setenv("VEIL_ENCODER_BACKEND", value)
    cli("encode", "rt-polarity", "--out", "x.npy", match=match)
