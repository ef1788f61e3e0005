"""veil.defenses.texthide.masks.MaskPool: the secret key of TextHide (storage, secrecy, sampling law)."""

from __future__ import annotations

import copy
import os
import pickle

import numpy as np
import pytest
import torch
from scipy import stats

from veil.defenses.base import InsecureKeyFileError
from veil.defenses.texthide.masks import MaskPool
from veil.errors import (DataFormatError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning,
                         ResourceMissingError)

ALPHA = 1e-6  # false-positive rate of each statistical test below


def test_masks_are_exactly_plus_minus_one_int8():
    pool = MaskPool(32, 77)
    masks = pool.masks
    assert masks.dtype == torch.int8 and masks.shape == (32, 77)
    assert set(masks.unique().tolist()) == {-1, 1}
    _, sampled = pool.sample(10)
    assert sampled.dtype == torch.float32 and bool(((sampled == 1) | (sampled == -1)).all())


def test_mask_bits_are_fair_coins():
    """Binomial test that P(-1) = 1/2 over all bits of a large OS-CSPRNG pool; false-positive rate alpha = 1e-6."""
    masks = MaskPool(64, 1000).masks
    flips = int((masks < 0).sum())
    assert stats.binomtest(flips, masks.numel(), 0.5).pvalue > ALPHA


def test_default_pools_differ_and_seeded_pools_reproduce_with_warning():
    a, b = MaskPool(8, 64), MaskPool(8, 64)
    # 512 fair bits agreeing by chance: probability 2^-512
    assert not torch.equal(a.masks, b.masks) and not a.seeded
    with pytest.warns(PrivacyLeakWarning, match="reproducible from that seed"):
        s1 = MaskPool(8, 64, rng=5)
    with pytest.warns(PrivacyLeakWarning):
        s2 = MaskPool(8, 64, rng=5)
    assert torch.equal(s1.masks, s2.masks) and s1.seeded
    with pytest.warns(PrivacyLeakWarning):
        inf1, inf2 = MaskPool(None, 16, rng=1), MaskPool(None, 16, rng=1)
    assert torch.equal(inf1.sample(5)[1], inf2.sample(5)[1])


def test_m_zero_is_identity_and_needs_no_warning():
    pool = MaskPool(0, 5, rng=3)  # no key, so a seed leaks nothing: no warning (filterwarnings=error)
    idx, masks = pool.sample(4)
    assert idx is None and torch.equal(masks, torch.ones(4, 5))
    e = torch.randn(4, 5)
    assert pool.apply(e) is e


def test_infinite_pool_draws_fresh_masks_every_call():
    pool = MaskPool(None, 256)
    idx, m1 = pool.sample(3)
    _, m2 = pool.sample(3)
    assert idx is None and pool.infinite and repr(pool) == "MaskPool(m=inf, dim=256, key=os-csprng)"
    # each row is 256 fair bits: two equal rows anywhere has probability < 2^-250
    rows = torch.cat([m1, m2]).to(torch.int8)
    assert len({tuple(r.tolist()) for r in rows}) == 6
    with pytest.raises(InvalidParameterError, match="holds no masks"):
        pool.masks


@pytest.mark.parametrize("m", [16, 10])
def test_sample_indices_are_uniform(m):
    """Chi-square goodness of fit of pool indices (OS CSPRNG, no generator) to Uniform{0..m-1}; alpha = 1e-6."""
    pool = MaskPool(m, 3)
    idx = torch.cat([pool.sample(1000)[0] for _ in range(100)])
    counts = np.bincount(idx.numpy(), minlength=m)
    assert len(counts) == m and stats.chisquare(counts).pvalue > ALPHA


def test_sampled_masks_are_the_indexed_pool_rows():
    pool = MaskPool(5, 9)
    gen = torch.Generator().manual_seed(0)
    idx, masks = pool.sample(20, gen, dtype=torch.float64)
    assert masks.dtype == torch.float64 and torch.equal(masks, pool.masks[idx].double())


def test_repr_and_str_never_show_mask_values():
    pool = MaskPool(4, 8)
    text = repr(pool) + str(pool)
    assert text == "MaskPool(m=4, dim=8, key=os-csprng)" * 2
    assert "tensor" not in text and "-1" not in text


def test_pickling_is_refused_but_deepcopy_works():
    pool = MaskPool(4, 8)
    with pytest.raises(TypeError, match="secret key.*pool.save"):
        pickle.dumps(pool)
    with pytest.raises(TypeError):
        torch.save(pool, os.devnull)
    assert torch.equal(copy.deepcopy(pool).masks, pool.masks)


def test_save_is_owner_only_and_round_trips(tmp_path):
    pool = MaskPool(7, 13)
    path = pool.save(tmp_path / "sub" / "client.key")
    assert path == tmp_path / "sub" / "client.key"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["client.key"]  # no temporary file left behind
    back = MaskPool.load(path, dim=13)
    assert torch.equal(back.masks, pool.masks) and (back.m, back.dim, back.seeded) == (7, 13, False)


def test_overwriting_a_loose_file_tightens_it(tmp_path):
    path = tmp_path / "k.npz"
    path.write_bytes(b"old")
    os.chmod(path, 0o644)
    MaskPool(2, 3).save(path)
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_load_refuses_group_or_world_readable_file(tmp_path):
    path = MaskPool(3, 4).save(tmp_path / "k.npz")
    os.chmod(path, 0o644)
    with pytest.raises(InsecureKeyFileError, match=f"chmod 600 {path}"):
        MaskPool.load(path)
    with pytest.raises(PermissionError):  # also a PermissionError for generic handlers
        MaskPool.load(path)


def test_load_checks_dim_and_format(tmp_path):
    path = MaskPool(3, 4).save(tmp_path / "k.npz")
    with pytest.raises(InvalidParameterError, match="dim=4 but dim=8 was expected"):
        MaskPool.load(path, dim=8)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    os.chmod(junk, 0o600)
    with pytest.raises(DataFormatError, match="not a veil mask pool"):
        MaskPool.load(junk)
    other = tmp_path / "other.npz"
    np.savez(other, format=np.array("something.else"), version=np.array(1), m=np.array(1), dim=np.array(8),
             seeded=np.array(False), bits=np.zeros((1, 1), np.uint8))
    os.chmod(other, 0o600)
    with pytest.raises(DataFormatError, match="something.else"):
        MaskPool.load(other)


def test_seeded_flag_survives_save(tmp_path):
    with pytest.warns(PrivacyLeakWarning):
        pool = MaskPool(2, 3, rng=0)
    assert MaskPool.load(pool.save(tmp_path / "k.npz")).seeded


def test_infinite_pool_cannot_be_saved(tmp_path):
    with pytest.raises(InvalidParameterError, match="nothing to save"):
        MaskPool(None, 4).save(tmp_path / "k.npz")
    assert not (tmp_path / "k.npz").exists()


def test_from_masks_validates():
    pool = MaskPool.from_masks(torch.tensor([[1, -1, 1], [-1, -1, 1]]))
    assert (pool.m, pool.dim) == (2, 3) and pool.seeded
    with pytest.raises(InvalidParameterError, match="only -1 and \\+1"):
        MaskPool.from_masks(np.array([[1, 0, -1]]))
    with pytest.raises(InvalidTypeError):
        MaskPool.from_masks([[1, -1]])


@pytest.mark.parametrize("m, dim, err", [(-1, 4, InvalidParameterError), (2, 0, InvalidParameterError),
                                         (1.5, 4, InvalidTypeError), (True, 4, InvalidTypeError),
                                         (2, "4", InvalidTypeError)])
def test_bad_parameters(m, dim, err):
    with pytest.raises(err):
        MaskPool(m, dim)


def test_bad_rng():
    with pytest.raises(InvalidTypeError, match="rng must be"):
        MaskPool(2, 3, rng="seed")


def test_load_missing_file_says_what_to_do(tmp_path):
    path = tmp_path / "nowhere" / "client.key"
    with pytest.raises(ResourceMissingError, match=r"does not exist.*MaskPool\(m, dim\)\.save") as info:
        MaskPool.load(path)
    assert isinstance(info.value, FileNotFoundError) and str(path) in str(info.value)


def _secret_file(tmp_path, name, **fields):
    path = tmp_path / name
    with open(path, "wb") as fh:
        np.savez(fh, **fields)
    os.chmod(path, 0o600)
    return path


def _fields(pool):
    bits = np.packbits(pool.masks.numpy() < 0, axis=1)
    return dict(format=np.array("veil.texthide.maskpool"), version=np.array(1), m=np.array(pool.m),
                dim=np.array(pool.dim), seeded=np.array(False), bits=bits)


def test_load_corrupt_or_foreign_files_raise_data_format_errors_without_key_material(tmp_path):
    pool = MaskPool(6, 64)
    good = _fields(pool)
    key_texts = {str(good["bits"]), str(good["bits"].tolist())[:40], str(pool.masks.tolist())[:40]}
    cases = {
        "empty": b"",
        "truncated": None,  # first half of a valid key file
        "npy": None,  # a single array (.npy) holding the bits
    }
    truncated = pool.save(tmp_path / "full.key").read_bytes()
    cases["truncated"] = truncated[: len(truncated) // 2]
    for name, raw in cases.items():
        path = tmp_path / name
        if name == "npy":
            with open(path, "wb") as fh:
                np.save(fh, good["bits"])
        else:
            path.write_bytes(raw)
        os.chmod(path, 0o600)
        with pytest.raises(DataFormatError, match="MaskPool.save") as info:
            MaskPool.load(path)
        assert not any(t in str(info.value) for t in key_texts), name
    missing = _secret_file(tmp_path, "missing.npz", **{k: v for k, v in good.items() if k != "dim"})
    with pytest.raises(DataFormatError, match="missing fields: dim"):
        MaskPool.load(missing)
    # the key bits stored where the format string belongs: refused without echoing them
    swapped = _secret_file(tmp_path, "swapped.npz", **(good | {"format": good["bits"]}))
    with pytest.raises(DataFormatError, match="malformed fields: format") as info:
        MaskPool.load(swapped)
    assert not any(t in str(info.value) for t in key_texts)
    bad_shape = _secret_file(tmp_path, "shape.npz", **(good | {"m": np.array([6, 6])}))
    with pytest.raises(DataFormatError, match="malformed fields: m"):
        MaskPool.load(bad_shape)
    assert torch.equal(MaskPool.load(_secret_file(tmp_path, "ok.npz", **good)).masks, pool.masks)

