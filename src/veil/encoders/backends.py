"""Which engine runs a :class:`~veil.encoders.TextEncoder`'s frozen forward pass.

``"torch"``: the transformers model in float32, exactly as loaded (the
reference; its cache keys and ``model_id`` are those veil always used).
``"onnx"``: the same weights exported once to ONNX (float32) and run by ONNX
Runtime, whose fused CPU kernels were faster on most CPUs measured; its vectors
match torch's to float rounding (checked on real text by
``tests/encoders/test_backends.py`` and ``benchmarks/encode.py``).

``"bf16"``: the same torch model run under CPU bfloat16 autocast (matrix
products in bf16 with float32 accumulation; layer norms, softmax, pooling and
normalisation in float32), in shape-stable batches (a text's padded width
depends on its own length only, and every batch has enough rows for oneDNN's
large-batch kernels), so a text gets the same vector alone or in any batch. On
CPUs with AMX tiles oneDNN runs those products on them and this was the fastest
backend measured; with oneDNN held to its pre-AMX kernels
(``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16``, benchmarks/RESULTS.md) it was slower
than float32. Its vectors are within the 0.99 cosine bar of float32, not equal
to them.

Candidate measured and not shipped (see docs/encoders.md): per-channel
dynamic int8 in ONNX Runtime (fast, but its minimum cosine to the float32
vectors on rt-polarity is below the 0.99 bar).

Only frozen encoding (:meth:`TextEncoder.encode`) uses a non-torch backend,
and only while the weights are as loaded: gradients (``forward_tokens``) and
fine-tuned weights always run in torch.

The default is :func:`default_backend`: on CPU ``"bf16"`` where the CPU has AMX bf16 tiles
(:func:`cpu_has_amx_bf16`) and ``"onnx"`` elsewhere, ``"torch"`` on any other device: the fastest backend
within the quality bar on each kind of CPU measured. The environment variable :data:`ENV`
(``VEIL_ENCODER_BACKEND``) overrides it for every encoder built without an explicit ``backend=``. Records
name their backend and the results pages' Regenerate blocks set it explicitly, so a page renders the same on
any machine. Result records compare the backend through :func:`backend_identity` (a key only for a backend
other than torch). No heavy import here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["BACKENDS", "BACKEND_KEY", "ENV", "backend_identity", "backend_names", "cpu_has_amx_bf16",
           "default_backend", "resolve_backend", "stored_backend_identity", "with_stored_backend"]

#: name -> one line for help texts and errors
BACKENDS: dict[str, str] = {
    "torch": "transformers in torch, float32 (the reference)",
    "onnx": "the same weights exported to ONNX, float32, run by ONNX Runtime (CPU only)",
    "bf16": "the same torch model under bfloat16 autocast (CPU only; the default on CPUs with AMX bf16 tiles)",
}
# The default on CPU is the fastest backend within the quality bar, by CPU (benchmarks/encode.py: speed and minimum
# cosine to torch's float32 vectors; benchmarks/encode_quality.py: accuracy and RSS identity): onnx was about 2x
# sentence-transformers on the machines without AMX of the earlier runs but slower than torch on an AMX machine, where
# bf16 was fastest (e709355). bf16 became the default on AMX CPUs once its batches were made shape-stable: before, its
# rounding depended on the batch a text was encoded in, and veil's correction by re-embedding and many of its checks
# rely on a text having one vector. Off CPU the default is torch. Every resumable writer whose numbers depend on frozen
# MiniLM encodings compares the backend (backend_identity: no key for torch), so a record made with one backend is
# refused by a run under another (StaleResultError naming encoder_backend) rather than taken as its result; the results
# pages' Regenerate blocks state the backend of their records (veil.report.markdown.backend_lines).
ENV = "VEIL_ENCODER_BACKEND"
_CPU_ONLY = frozenset({"onnx", "bf16"})
_CPUINFO = "/proc/cpuinfo"


def cpu_has_amx_bf16(cpuinfo: str = _CPUINFO) -> bool:
    """Whether this CPU advertises AMX bf16 tiles (the ``amx_bf16`` flag of Linux's ``/proc/cpuinfo``).

    False where the file is unreadable (another OS). benchmarks/encode.py records it with the machine.
    """
    from veil._bf16 import cpu_flags

    return "amx_bf16" in cpu_flags(cpuinfo)


def default_backend(device: str = "cpu") -> str:
    """The backend an encoder built with neither ``backend=`` nor :data:`ENV` uses on ``device``.

    ``"bf16"`` on a CPU with AMX bf16 tiles, ``"onnx"`` on any other CPU, ``"torch"`` off CPU.
    """
    if not _is_cpu(device):
        return "torch"
    return "bf16" if cpu_has_amx_bf16(_CPUINFO) else "onnx"


def backend_names() -> list[str]:
    """The backend names accepted by ``TextEncoder(backend=...)`` and ``VEIL_ENCODER_BACKEND``."""
    return sorted(BACKENDS)


def _is_cpu(device: str) -> bool:
    return device.strip().lower().split(":")[0] == "cpu"


def resolve_backend(backend: str | None, device: str = "cpu") -> str:
    """The backend to use: ``backend``, else ``$VEIL_ENCODER_BACKEND``, else the default for ``device``.

    An explicit CPU-only backend on another device is an error; the default
    (from neither argument nor environment) falls back to ``"torch"`` off CPU.
    """
    valid = ", ".join(backend_names())
    if backend is None:
        env = os.environ.get(ENV, "").strip()
        if env and env not in BACKENDS:
            raise InvalidParameterError(f"{ENV}={env!r} is not an encoder backend; set it to one of {valid} "
                                        f"(or unset it for the default, {default_backend()!r} on this CPU)")
        if not env:
            return default_backend(device)
        backend, origin = env, f"{ENV}={env}"
    else:
        if not isinstance(backend, str):
            raise InvalidTypeError(f"backend must be a str ({valid}) or None, not {type(backend).__name__}")
        if backend not in BACKENDS:
            raise InvalidParameterError(f"unknown encoder backend {backend!r}; use one of {valid}")
        origin = f"backend={backend!r}"
    if backend in _CPU_ONLY and not _is_cpu(device):
        raise InvalidParameterError(f"{origin} runs on CPU only, but device={device!r}; use backend='torch' "
                                    f"(or set {ENV}=torch) for device {device!r}, or device='cpu'")
    return backend


#: the key under which a result record's compared configuration holds a non-torch encoder backend
BACKEND_KEY = "encoder_backend"


def backend_identity(encoder: Any = None, device: str = "cpu") -> dict[str, str]:
    """The frozen-encoding backend as a resumable writer's compared configuration holds it.

    ``{}`` for torch (what every record made before backends existed holds, so those records still match a
    torch run), ``{"encoder_backend": name}`` for any other backend (so a record made with one backend is never
    reused as the result of another). ``encoder``: a :class:`~veil.encoders.TextEncoder` (its
    ``active_backend``, the engine its ``encode`` runs now), a backend name, or None: what
    ``TextEncoder(backend=None, device=device)`` resolves to (``$VEIL_ENCODER_BACKEND``, else the default), for
    a writer that compares its record before it builds the encoder.
    """
    if encoder is None or isinstance(encoder, str):
        name = resolve_backend(encoder, device)
    else:
        name = getattr(encoder, "active_backend", None)
        if not isinstance(name, str):
            raise InvalidTypeError(f"encoder must be a TextEncoder, a backend name ({', '.join(backend_names())}) "
                                   f"or None, not {type(encoder).__name__}")
    return {} if name == "torch" else {BACKEND_KEY: name}


def stored_backend_identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`backend_identity` as a stored configuration holds it: its ``encoder_backend`` entry, or ``{}`` (torch,
    and every record made before backends existed)."""
    return {BACKEND_KEY: config[BACKEND_KEY]} if BACKEND_KEY in config else {}


def with_stored_backend(requested: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A ``view`` for :func:`veil.outputs.existing_record` of a writer that compares a record's top-level config on
    the keys it requests: the stored config on the keys of ``requested``, plus the stored backend. Without it a
    torch run (which requests no ``encoder_backend``) would not see the key of a record made with another backend.
    """
    keys = tuple(requested)

    def view(stored: Mapping[str, Any]) -> dict[str, Any]:
        return {**{k: stored[k] for k in keys if k in stored}, **stored_backend_identity(stored)}

    return view
