"""Model weights as portable parts: how a model travels between machines (a GPU machine trains, a CPU machine
imports).

A portable folder holds ``weights-<i>.safetensors`` files of at most :data:`PART_BYTES` bytes each, every float
tensor rounded to float16 (or kept in float32, bit for bit); a tensor larger than one part is split along its
first dimension into row blocks named ``<key>#<j>``. :func:`write_parts` writes them and returns one descriptor
per part (file, bytes, sha256, tensors); :func:`read_parts` checks each part against its descriptor and returns
the tensors (floats widened to float32), blocks joined. Both need only torch and safetensors, so they run on a
machine where veil's other dependencies are missing (``deploy/gpu/train.py``). What the folder's manifest says
around the parts (the model's kind, config, data hashes, curve, device, base encoder) belongs to
:mod:`veil.models.transfer`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from veil.errors import DataFormatError

__all__ = ["PART_BYTES", "part_name", "write_parts", "read_parts"]

#: the largest part, in bytes
PART_BYTES = 15_000_000


def part_name(i: int) -> str:
    return f"weights-{i}.safetensors"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def write_parts(state: dict[str, Any], out: str | os.PathLike, part_bytes: int = PART_BYTES,
                dtype: str = "float16") -> list[dict[str, Any]]:
    """Write ``state`` (name -> tensor) into ``out`` as parts of ``dtype`` (float16, or float32 to keep every bit;
    integer tensors keep their type); returns their descriptors in order."""
    import torch
    from safetensors.torch import save_file

    if dtype not in ("float16", "float32"):
        raise ValueError(f"dtype must be float16 or float32, got {dtype!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    blocks: dict[str, Any] = {}
    for key, value in state.items():
        if "#" in key:
            raise ValueError(f"tensor name {key!r} holds '#', which the parts use for row blocks")
        value = value.detach().to("cpu")
        if value.is_floating_point():
            value = value.to(getattr(torch, dtype))
        size = value.element_size()
        if value.dim() and value.numel() * size > part_bytes:
            rows = max(1, part_bytes // size // max(1, value[0].numel()))
            blocks.update({f"{key}#{j}": b.contiguous() for j, b in enumerate(value.split(rows))})
        else:
            blocks[key] = value.contiguous()
    parts: list[dict[str, Any]] = [{}]
    size = 0
    for key in sorted(blocks):
        n = blocks[key].numel() * blocks[key].element_size()
        if parts[-1] and size + n > part_bytes:
            parts.append({})
            size = 0
        parts[-1][key] = blocks[key]
        size += n
    described = []
    for i, part in enumerate(parts):
        path = out / part_name(i)
        save_file(part, str(path), metadata={"format": "pt"})
        described.append({"file": path.name, "bytes": path.stat().st_size, "sha256": _sha256(path),
                          "tensors": len(part)})
    return described


def read_parts(folder: str | os.PathLike, parts: list[dict[str, Any]], fix: str) -> dict[str, Any]:
    """The float32 tensors of the parts ``parts`` (descriptors as :func:`write_parts` returns them) in
    ``folder``, after each part's size and sha256 matched. A missing, truncated or altered part is a
    :class:`~veil.errors.DataFormatError` naming the file and ``fix``."""
    import torch
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    stored: dict[str, Any] = {}
    for part in parts:
        path = folder / str(part["file"])
        if not path.is_file():
            raise DataFormatError(f"{path} is missing (the manifest lists {len(parts)} weight parts); {fix}")
        size = path.stat().st_size
        if size != int(part["bytes"]):
            raise DataFormatError(f"{path} has {size} bytes, the manifest says {part['bytes']} (truncated or "
                                  f"replaced); {fix}")
        digest = _sha256(path)
        if digest != part["sha256"]:
            raise DataFormatError(f"{path} has sha256 {digest[:12]}..., the manifest says "
                                  f"{str(part['sha256'])[:12]}... (damaged or replaced); {fix}")
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise DataFormatError(f"{path} is not a safetensors file ({exc}); {fix}") from None
        stored.update({k: v.to(torch.float32) if v.is_floating_point() else v for k, v in tensors.items()})
    state: dict[str, Any] = {k: v for k, v in stored.items() if "#" not in k}
    for key in sorted({k.rsplit("#", 1)[0] for k in stored if "#" in k}):
        n = sum(1 for k in stored if "#" in k and k.rsplit("#", 1)[0] == key)
        try:
            state[key] = torch.cat([stored[f"{key}#{j}"] for j in range(n)])
        except KeyError:
            raise DataFormatError(f"the parts in {folder} split {key} into blocks with a gap; {fix}") from None
    return state
