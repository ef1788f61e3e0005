"""veil.random (secure default, seeded for experiments) and veil.errors."""

from __future__ import annotations

import numpy as np
import pytest

from veil.errors import InvalidParameterError, InvalidTypeError, ResourceMissingError, UnknownNameError, VeilError
from veil.random import as_generator, is_seeded, torch_generator


def test_int_seed_reproduces_and_none_differs():
    a, b = as_generator(7).integers(0, 2**62, 4), as_generator(7).integers(0, 2**62, 4)
    np.testing.assert_array_equal(a, b)
    # two OS-entropy generators agreeing on four 62-bit draws has probability 2^-248
    assert not np.array_equal(as_generator(None).integers(0, 2**62, 4), as_generator(None).integers(0, 2**62, 4))
    g = np.random.default_rng(1)
    assert as_generator(g) is g
    assert is_seeded(3) and not is_seeded(None)


def test_torch_generator():
    import torch

    x = torch.rand(3, generator=torch_generator(5))
    y = torch.rand(3, generator=torch_generator(5))
    assert torch.equal(x, y)
    assert not torch.equal(torch.rand(8, generator=torch_generator(None)), torch.rand(8, generator=torch_generator(None)))


@pytest.mark.parametrize("bad", [1.5, "7", True, [1]])
def test_bad_rng_types(bad):
    with pytest.raises(InvalidTypeError, match="rng must be"):
        as_generator(bad)
    with pytest.raises(TypeError):  # also a TypeError for generic handlers
        as_generator(bad)


def test_negative_seed():
    with pytest.raises(InvalidParameterError, match=">= 0"):
        as_generator(-1)


def test_error_messages_say_what_to_do():
    e = UnknownNameError("corpus", "sst2", ["b", "a"])
    assert str(e) == "unknown corpus 'sst2'; valid corpus names: a, b" and isinstance(e, (VeilError, KeyError))
    m = ResourceMissingError("corpus 'x'", "veil corpora pull x")
    assert "run `veil corpora pull x`" in str(m) and isinstance(m, FileNotFoundError)


def test_atomic_write_modes(tmp_path):
    import os
    import stat

    from veil._io import atomic_write, atomic_write_text

    atomic_write_text(tmp_path / "out.txt", "hello")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o666 & ~mask
    with atomic_write(tmp_path / "secret.bin", "wb", perms=0o600) as fh:
        fh.write(b"k")
    assert stat.S_IMODE((tmp_path / "secret.bin").stat().st_mode) == 0o600
    with pytest.raises(RuntimeError):
        with atomic_write(tmp_path / "out.txt") as fh:
            fh.write("partial")
            raise RuntimeError("crash mid-write")
    assert (tmp_path / "out.txt").read_text() == "hello" and len(list(tmp_path.iterdir())) == 2
