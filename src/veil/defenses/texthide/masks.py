"""TextHide's mask pool: the secret key of (m, k)-TextHide (Huang et al. 2020, Sec. 3.2, Alg. 2 line 19).

A pool holds ``m`` sign-flipping masks sigma in {-1, +1}^d, drawn i.i.d.
uniformly. It is a SECRET KEY:

* by default (``rng=None``) its bits come straight from the OS CSPRNG
  (``secrets.token_bytes``), never from an experiment seed. An int seed or a
  numpy Generator is accepted for experiments and tests only and emits
  :class:`~veil.errors.PrivacyLeakWarning` (the key is then reproducible from
  the seed). The authors' code builds its pool from a fixed default seed, so
  anyone who knows the defaults can rebuild it; veil does not.
* ``repr``/``str`` show ``m`` and ``dim`` only; pickling is refused (use
  :meth:`MaskPool.save`, which writes an owner-only file atomically).

``m=0`` is "no mask" (every mask is all ones: the identity), and ``m=None`` is
the paper's m = infinity: a fresh uniformly random mask per example and per
call, drawn from the pool's own key source (the OS CSPRNG, or the seeded
generator), not from the mixing generator.

File format (``.npz``, no pickle): ``format="veil.texthide.maskpool"``,
``version=1``, ``m``, ``dim``, ``seeded`` (whether the key came from a seed) and ``bits`` = ``np.packbits(mask < 0, axis=1)``
of shape ``(m, ceil(dim / 8))``.
"""

from __future__ import annotations

import copy
import math
import os
import secrets
import stat
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from veil._io import atomic_write
from veil.defenses.base import InsecureKeyFileError
from veil.validation import check_int, check_rng
from veil.errors import (DataFormatError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning,
                         ResourceMissingError)

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["MaskPool", "FORMAT", "FORMAT_VERSION"]

FORMAT = "veil.texthide.maskpool"
FORMAT_VERSION = 1
# Domain separation: an int seed shared with the mixing generator (TextHide(rng=seed)) must not make the
# mask bits equal that generator's seed material.
_SEED_DOMAIN = 0x7465787468696465  # "texthide"


def _key_source(rng: Any) -> np.random.Generator | None:
    """None for the OS CSPRNG, else a numpy Generator (domain-separated from the same int seed elsewhere)."""
    if rng is None:
        return None
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(np.random.SeedSequence(int(rng), spawn_key=(_SEED_DOMAIN,)))


def _random_signs(n: int, dim: int, source: np.random.Generator | None) -> np.ndarray:
    """(n, dim) int8 array of i.i.d. uniform +-1 (bit 1 -> -1)."""
    row = math.ceil(dim / 8)
    raw = secrets.token_bytes(n * row) if source is None else source.bytes(n * row)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(n, row), axis=1)[:, :dim]
    return (1 - 2 * bits.astype(np.int8)).astype(np.int8)


_FIELDS = ("format", "version", "m", "dim", "seeded", "bits")
# what reading a damaged or foreign file can raise (np.load, zip members, scalar conversions)
_READ_ERRORS = (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, zlib.error)


def _read_key_file(path: Path) -> tuple[str, int, int, int, np.ndarray, bool]:
    """The fields of a mask pool file; DataFormatError naming the problem (never the contents) otherwise."""
    hint = "; point to a file written by MaskPool.save, or create a new key with MaskPool(m, dim).save(path)"
    try:
        fh = open(path, "rb")  # our handle, closed even when numpy fails half-way through a damaged zip
    except IsADirectoryError:
        raise DataFormatError(f"{path} is a directory, not a veil mask pool file{hint}") from None
    with fh:
        try:
            npz = np.load(fh, allow_pickle=False)
        except _READ_ERRORS as exc:
            raise DataFormatError(f"{path} is not a veil mask pool file (cannot be read as .npz: "
                                  f"{type(exc).__name__}){hint}") from None
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise DataFormatError(f"{path} holds a single numpy array, not a veil mask pool file (.npz){hint}")
        with npz:
            missing = [f for f in _FIELDS if f not in npz.files]
            if missing:
                raise DataFormatError(f"{path} is not a veil mask pool file (missing fields: {', '.join(missing)})"
                                      f"{hint}")
            try:
                arrays = {f: np.asarray(npz[f]) for f in _FIELDS}
            except _READ_ERRORS as exc:
                raise DataFormatError(f"{path} is a damaged mask pool file (a field cannot be read: "
                                      f"{type(exc).__name__}){hint}") from None
    kinds = {"format": "U", "version": "iu", "m": "iu", "dim": "iu", "seeded": "b"}
    bad = [f for f, kind in kinds.items() if arrays[f].shape != () or arrays[f].dtype.kind not in kind]
    if bad:
        raise DataFormatError(f"{path} is not a veil mask pool file (malformed fields: {', '.join(bad)}){hint}")
    return (str(arrays["format"])[:60], int(arrays["version"]), int(arrays["m"]), int(arrays["dim"]),
            arrays["bits"], bool(arrays["seeded"]))


class MaskPool:
    """``m`` secret sign masks in {-1, +1}^dim (``m=0``: identity, ``m=None``: a fresh mask every time).

    Parameters
    ----------
    m: pool size; ``0`` = no mask, ``None`` = infinite pool.
    dim: representation dimension d.
    rng: None (default) = OS CSPRNG. An int seed or numpy Generator makes the key
        reproducible from the seed (experiments and tests only; warns).

    >>> pool = MaskPool(256, 384)            # secret, from the OS CSPRNG
    >>> pool.save("client0.key")             # owner-only file (0o600)
    >>> pool = MaskPool.load("client0.key", dim=384)
    """

    def __init__(self, m: int | None, dim: int, *, rng: Any = None):
        self._m = None if m is None else check_int(
            "m (mask pool size)", m, minimum=0, hint="; use m=0 for no mask or m=None for an infinite pool")
        self._dim = check_int("dim", dim, minimum=1)
        check_rng(rng)
        self._seeded = rng is not None
        if self._seeded and self._m != 0:
            warnings.warn("MaskPool was given an rng seed: the secret masks are reproducible from that seed by "
                          "anyone who knows it; use rng=None (OS CSPRNG) outside experiments and tests",
                          PrivacyLeakWarning, stacklevel=2)
        self._source = _key_source(rng)
        self._cache: dict[Any, torch.Tensor] = {}
        if self._m is None:
            self._masks = None
        else:
            import torch

            self._masks = torch.from_numpy(_random_signs(self._m, self._dim, self._source))

    @classmethod
    def from_masks(cls, masks: Any) -> MaskPool:
        """A pool holding exactly ``masks`` ((m, d), entries +-1), e.g. an attacker's guessed or dummy pool."""
        import torch

        if not isinstance(masks, (torch.Tensor, np.ndarray)):
            raise InvalidTypeError(f"masks must be a torch tensor or numpy array of shape (m, d), "
                                   f"got {type(masks).__name__}")
        t = torch.as_tensor(masks).detach().cpu()
        if t.ndim != 2 or t.shape[1] < 1:
            raise InvalidParameterError(f"masks must have shape (m, d) with d >= 1, got {tuple(t.shape)}")
        if not bool(((t == 1) | (t == -1)).all()):
            raise InvalidParameterError("masks must contain only -1 and +1 (use torch.sign and replace zeros)")
        pool = cls.__new__(cls)
        pool._m, pool._dim, pool._seeded, pool._source, pool._cache = int(t.shape[0]), int(t.shape[1]), True, None, {}
        pool._masks = t.to(torch.int8).clone()
        return pool

    # ------------------------------------------------------------ properties
    @property
    def m(self) -> int | None:
        """Pool size (0 = no mask, None = infinite)."""
        return self._m

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def infinite(self) -> bool:
        return self._m is None

    @property
    def seeded(self) -> bool:
        """True when the key is reproducible (an rng seed was given, or the masks were passed in)."""
        return self._seeded

    @property
    def masks(self) -> torch.Tensor:
        """A copy of the secret masks, int8 (m, dim). THE KEY: never log it or send it anywhere."""
        if self._masks is None:
            raise InvalidParameterError("an infinite pool (m=None) holds no masks; each call draws fresh ones")
        return self._masks.clone()

    def __repr__(self) -> str:
        m = "inf" if self._m is None else self._m
        return f"MaskPool(m={m}, dim={self._dim}, key={'seeded' if self._seeded else 'os-csprng'})"

    __str__ = __repr__

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("MaskPool is a secret key and cannot be pickled (it would end up in checkpoints or "
                        "messages); use pool.save(path) / MaskPool.load(path)")

    def __deepcopy__(self, memo: dict) -> MaskPool:
        new = self.__class__.__new__(self.__class__)
        new.__dict__.update({k: copy.deepcopy(v, memo) for k, v in self.__dict__.items() if k != "_cache"})
        new._cache = {}
        return new

    # ------------------------------------------------------------ sampling
    def sample(self, n: int, generator: torch.Generator | None = None, *, dtype: Any = None,
               device: Any = None) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Draw one mask per example: ``(indices, masks)``.

        ``indices`` is an int64 tensor (n,) drawn uniformly from ``range(m)`` with
        ``generator`` (a CPU ``torch.Generator``, reproducible; None = straight from
        the OS CSPRNG, ``os.urandom``), or None for ``m=0`` (masks are all ones) and
        ``m=None`` (fresh masks from the pool's key source). ``masks`` has shape
        (n, dim), dtype ``dtype`` (default float32), on ``device``.
        """
        import torch

        n = check_int("n", n, minimum=0)
        dtype = torch.float32 if dtype is None else dtype
        if self._m == 0:
            return None, torch.ones(n, self._dim, dtype=dtype, device=device)
        if self._m is None:
            fresh = torch.from_numpy(_random_signs(n, self._dim, self._source))
            return None, fresh.to(device=device, dtype=dtype)
        if generator is None:
            from veil.defenses.texthide.mix import secure_randint

            idx = secure_randint(self._m, (n,))
        else:
            idx = torch.randint(self._m, (n,), generator=generator, device=generator.device)
        table = self._table(dtype, device)
        return idx, table.index_select(0, idx.to(table.device))

    def apply(self, e: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``sigma_i o e_i`` with one mask per row drawn from the pool (no mixing; see TextHide.encrypt_inference)."""
        if self._m == 0:
            return e
        _, masks = self.sample(e.shape[0], generator, dtype=e.dtype, device=e.device)
        return e * masks

    def _table(self, dtype: Any, device: Any) -> torch.Tensor:
        import torch

        key = (torch.device("cpu") if device is None else torch.device(device), dtype)
        if key not in self._cache:
            self._cache[key] = self._masks.to(device=key[0], dtype=dtype)
        return self._cache[key]

    # ------------------------------------------------------------ storage
    def save(self, path: str | os.PathLike) -> Path:
        """Write the key to ``path`` atomically with mode 0o600 (owner read/write only); returns the path."""
        if self._masks is None:
            raise InvalidParameterError("an infinite pool (m=None) has nothing to save: its masks are drawn "
                                        "fresh on every call; save a finite pool (m >= 1) instead")
        path = Path(path)
        bits = np.packbits(self._masks.numpy() < 0, axis=1)
        with atomic_write(path, "wb", encoding=None, perms=0o600) as fh:
            np.savez(fh, format=np.array(FORMAT), version=np.array(FORMAT_VERSION), m=np.array(self._m),
                     dim=np.array(self._dim), seeded=np.array(self._seeded), bits=bits)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, *, dim: int | None = None) -> MaskPool:
        """Read a key written by :meth:`save`; refuses files open to group/others; checks ``dim`` if given.

        A missing file raises :class:`~veil.errors.ResourceMissingError` (a
        ``FileNotFoundError``); a file that is not a readable veil mask pool
        raises :class:`~veil.errors.DataFormatError`. Messages name the path and
        the problem, never the file's contents.
        """
        path = Path(path)
        if dim is not None:
            dim = check_int("dim", dim, minimum=1)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise ResourceMissingError(
                f"mask pool file {path}", "MaskPool(m, dim).save(path)",
                message=f"mask pool file {path} does not exist; check the path (the key is the file written by "
                        f"MaskPool.save), or create a new secret key with MaskPool(m, dim).save({str(path)!r}) "
                        "(a new key does not reproduce anything hidden with a lost one)") from None
        if os.name == "posix" and st.st_mode & 0o077:
            raise InsecureKeyFileError(
                f"mask pool file {path} has mode {stat.S_IMODE(st.st_mode):#o}: group/others can access this "
                f"secret key; run `chmod 600 {path}` (and consider the key leaked if others could read it)")
        fmt, version, m, file_dim, bits, seeded = _read_key_file(path)
        if fmt != FORMAT:
            raise DataFormatError(f"{path} holds {fmt!r}, not a {FORMAT!r} file")
        if version != FORMAT_VERSION:
            raise DataFormatError(f"{path} has format version {version}; this veil reads version {FORMAT_VERSION}, "
                                  "upgrade veil or re-create the pool")
        if m < 0 or file_dim < 1 or bits.dtype != np.uint8 or bits.shape != (m, math.ceil(file_dim / 8)):
            raise DataFormatError(f"{path} is damaged: m={m}, dim={file_dim}, bits {bits.dtype} {bits.shape}")
        if dim is not None and dim != file_dim:
            raise InvalidParameterError(f"mask pool {path} has dim={file_dim} but dim={dim} was expected; the pool "
                                        "was made for another encoder; create a new pool with MaskPool(m, dim)")
        import torch

        signs = (1 - 2 * np.unpackbits(bits, axis=1)[:, :file_dim].astype(np.int8)).astype(np.int8)
        pool = cls.__new__(cls)
        pool._m, pool._dim, pool._seeded, pool._source, pool._cache = m, file_dim, seeded, None, {}
        pool._masks = torch.from_numpy(np.ascontiguousarray(signs))
        return pool
