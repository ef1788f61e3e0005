"""Whether bfloat16 matrix products are fast where a model runs, and autocast only there.

veil's models train and decode under bfloat16 autocast (``bf16=True`` in their configs) because the GPUs and the
Intel CPUs with AVX512-BF16 or AMX tiles it was built on run bfloat16 products natively. A CPU without them (AMD Zen
3, older Intel) emulates them: a MiniLM forward and backward pass under CPU autocast ran about 25 times slower than
in float32 on one such machine (AMD EPYC, 2 cores). So ``bf16=True`` means "bfloat16 where it is native": on any
other CPU the same code runs in float32, and records and manifests say which (:func:`precision`).

``VEIL_BF16=0`` turns bfloat16 off everywhere; ``VEIL_BF16=1`` forces it on CPU (for a test of the bf16 path on a
machine without the instructions).
"""

from __future__ import annotations

import functools
import os
from typing import Any

__all__ = ["ENV", "cpu_flags", "native_bf16", "use_bf16", "autocast", "precision"]

ENV = "VEIL_BF16"
_CPUINFO = "/proc/cpuinfo"
#: CPU flags (Linux's /proc/cpuinfo) of native bfloat16 products
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@functools.lru_cache(maxsize=4)
def cpu_flags(cpuinfo: str = _CPUINFO) -> frozenset[str]:
    """The flags of the first CPU in ``cpuinfo`` (empty where the file is unreadable: another OS)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[-1].split())
    except OSError:
        pass
    return frozenset()


def _device_type(device: Any) -> str:
    return str(getattr(device, "type", device)).strip().lower().split(":")[0]


def native_bf16(device: Any = "cpu") -> bool:
    """Whether ``device`` (a name or a torch.device) runs bfloat16 products natively."""
    kind = _device_type(device)
    if kind == "cpu":
        return bool(cpu_flags(_CPUINFO) & _BF16_FLAGS)
    if kind == "cuda":
        import torch

        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return False


def use_bf16(requested: bool, device: Any = "cpu") -> bool:
    """Whether a model asked for bfloat16 (``requested``) runs under it on ``device``: only where it is native,
    unless :data:`ENV` says otherwise."""
    if not requested:
        return False
    forced = os.environ.get(ENV, "").strip()
    if forced == "0":
        return False
    if forced == "1":
        return True
    return native_bf16(device)


def autocast(device: Any, requested: bool = True) -> Any:
    """``torch.autocast`` to bfloat16 on ``device`` when :func:`use_bf16` says so, else a no-op context."""
    import torch

    kind = _device_type(device)
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=use_bf16(requested, kind))


def precision(requested: bool, device: Any = "cpu") -> str:
    """What a record says about the products: ``"bf16"`` or ``"fp32"`` (with why, where bfloat16 was asked for)."""
    if use_bf16(requested, device):
        return "bf16"
    return "fp32 (bf16 not native here)" if requested else "fp32"
