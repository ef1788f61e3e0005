"""veil.models.portable: float16 parts of at most PART_BYTES, checked on the way back."""

from __future__ import annotations

import pytest
import torch

from veil.errors import DataFormatError
from veil.models.portable import read_parts, write_parts


@pytest.fixture
def state():
    g = torch.Generator().manual_seed(0)
    return {"big.weight": torch.randn(300, 40, generator=g), "small.bias": torch.randn(40, generator=g),
            "scalar": torch.tensor(3.0)}


def test_round_trip_is_the_float16_rounding(tmp_path, state):
    parts = write_parts(state, tmp_path, part_bytes=8_000)
    assert len(parts) > 1 and all(p["bytes"] <= 8_000 + 2_000 for p in parts)  # header bytes beside the data
    back = read_parts(tmp_path, parts, fix="copy it again")
    assert set(back) == set(state)
    for key, value in state.items():
        assert back[key].dtype == torch.float32
        assert torch.equal(back[key], value.to(torch.float16).to(torch.float32))


def test_a_tensor_larger_than_a_part_is_split_in_row_blocks(tmp_path, state):
    write_parts(state, tmp_path, part_bytes=8_000)
    from safetensors.torch import load_file

    keys = {k for f in tmp_path.glob("weights-*.safetensors") for k in load_file(str(f))}
    assert "big.weight" not in keys and "big.weight#0" in keys and "small.bias" in keys


@pytest.mark.parametrize("damage", ["missing", "truncated", "altered"])
def test_a_damaged_part_is_a_typed_error_naming_the_file(tmp_path, state, damage):
    parts = write_parts(state, tmp_path, part_bytes=8_000)
    victim = tmp_path / parts[1]["file"]
    if damage == "missing":
        victim.unlink()
    elif damage == "truncated":
        victim.write_bytes(victim.read_bytes()[:100])
    else:
        data = bytearray(victim.read_bytes())
        data[-1] ^= 0xFF
        victim.write_bytes(bytes(data))
    with pytest.raises(DataFormatError, match=parts[1]["file"]) as err:
        read_parts(tmp_path, parts, fix="copy it again")
    assert "copy it again" in str(err.value)


def test_a_name_with_the_block_marker_is_refused(tmp_path):
    with pytest.raises(ValueError, match="#"):
        write_parts({"a#0": torch.zeros(2)}, tmp_path)
