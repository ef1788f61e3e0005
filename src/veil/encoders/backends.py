"""Which engine runs a :class:`~veil.encoders.TextEncoder`'s frozen forward pass.

``"torch"``: the transformers model in float32, exactly as loaded (the
reference; its cache keys and ``model_id`` are those veil always used).
``"onnx"``: the same weights exported once to ONNX (float32) and run by ONNX
Runtime, whose fused CPU kernels are faster on the same cores; its vectors
match torch's to float rounding (checked on real text by
``tests/encoders/test_backends.py`` and ``benchmarks/encode.py``).

Candidates measured and not shipped (see docs/encoders.md): per-channel
dynamic int8 in ONNX Runtime (fastest, but its minimum cosine to the float32
vectors on rt-polarity is below the 0.99 bar), bf16 autocast in torch (meets
the bar but is barely faster than float32 here).

Only frozen encoding (:meth:`TextEncoder.encode`) uses a non-torch backend,
and only while the weights are as loaded: gradients (``forward_tokens``) and
fine-tuned weights always run in torch.

The default is :data:`DEFAULT_BACKEND` (``"onnx"`` on CPU, ``"torch"`` on any other device; see its comment);
the environment variable :data:`ENV` (``VEIL_ENCODER_BACKEND``) overrides it for every encoder built without an
explicit ``backend=``.
Result records compare the backend through :func:`backend_identity` (a key only for a backend other
than torch). No heavy import here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["BACKENDS", "BACKEND_KEY", "DEFAULT_BACKEND", "ENV", "backend_identity", "backend_names",
           "resolve_backend", "stored_backend_identity", "with_stored_backend"]

#: name -> one line for help texts and errors
BACKENDS: dict[str, str] = {
    "torch": "transformers in torch, float32 (the reference)",
    "onnx": "the same weights exported to ONNX, float32, run by ONNX Runtime (CPU only)",
}
# onnx is the default on CPU: the fastest backend that meets the quality bar (benchmarks/encode.py: speed and minimum
# cosine to torch's float32 vectors; benchmarks/encode_quality.py: accuracy and RSS identity unchanged). Off CPU the
# default is torch. Every resumable writer whose numbers depend on frozen MiniLM encodings compares the backend
# (backend_identity: no key for torch), so a record made with torch (every record committed before this change) is
# refused by a default run (StaleResultError naming encoder_backend) rather than taken as an onnx result; resuming or
# extending such a record needs VEIL_ENCODER_BACKEND=torch, which the Regenerate commands of the results pages state
# (veil.report.markdown.backend_lines).
DEFAULT_BACKEND = "onnx"
ENV = "VEIL_ENCODER_BACKEND"
_CPU_ONLY = frozenset({"onnx"})


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
                                        f"(or unset it for the default, {DEFAULT_BACKEND!r} on CPU)")
        if not env:
            return DEFAULT_BACKEND if _is_cpu(device) or DEFAULT_BACKEND not in _CPU_ONLY else "torch"
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
