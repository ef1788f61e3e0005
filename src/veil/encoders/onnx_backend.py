"""The ``"onnx"`` encoder backend: the model exported once to ONNX, run by ONNX Runtime.

The export is made on first use from the same local weights the torch
backend loads (nothing is downloaded) and cached under
``veil_home()/encoders/<model_id>/onnx-v<FORMAT>/``: ``model.onnx`` and a
``manifest.json`` holding its sha256, size, the versions that made it and how
long the export took. The folder carries veil's ``.veil-owned`` marker.

Atomic and resumable: the model is written through a temporary file and
renamed, the manifest last, so a killed export leaves no manifest and the
next use exports again (stale temporary files are removed first); a file
lock keeps two processes from exporting at once. On every load the model's
sha256 must match the manifest; a mismatch warns
(:class:`~veil.encoders.cache.CacheWarning`) and exports again.

The graph maps the tokenizer's tensors to the last hidden states; pooling
and normalisation run in :mod:`veil.encoders.pooling`, as for torch. The
export uses the model's eager attention (the plain matmul/softmax graph that
ONNX Runtime fuses into its Attention kernel) at opset :data:`OPSET`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from veil._io import atomic_write, atomic_write_json, mark_owned, read_json, veil_home, writable_dir
from veil.errors import DataFormatError

if TYPE_CHECKING:  # pragma: no cover
    from veil.encoders.registry import ResolvedModel

__all__ = ["FORMAT", "OPSET", "OnnxRunner", "export_folder", "ensure_exported"]

FORMAT = 1  # bump when the exported graph's contract changes: old exports are then ignored, not reused
OPSET = 17
MODEL_FILE = "model.onnx"
MANIFEST = "manifest.json"


def _safe(part: str) -> str:
    from veil.encoders.cache import _safe as safe

    return safe(part)


def export_folder(model_id: str, root: Path | None = None) -> Path:
    """Where the export of the weights ``model_id`` lives (it may not exist yet)."""
    return (root if root is not None else veil_home() / "encoders") / _safe(model_id) / f"onnx-v{FORMAT}"


def _valid_export(folder: Path, model_id: str, *, warn: bool = True) -> Path | None:
    """The model file if ``folder`` holds a complete export of ``model_id`` whose sha256 matches, else None.

    An unusable one warns (unless ``warn`` is False) and counts as absent.
    """
    from veil.encoders.cache import CacheWarning
    from veil.encoders.registry import _file_digest

    manifest_path, model_path = folder / MANIFEST, folder / MODEL_FILE
    if not manifest_path.is_file():
        return None
    try:
        manifest = read_json(manifest_path, what="ONNX export manifest")
        if not isinstance(manifest, dict):
            raise DataFormatError(f"{manifest_path} is not a JSON object")
        st = model_path.stat()
        digest = _file_digest(str(model_path), st.st_size, st.st_mtime_ns)
    except (DataFormatError, OSError) as exc:
        problem = str(exc)
    else:
        if manifest.get("model_id") == model_id and manifest.get("format") == FORMAT \
                and manifest.get("sha256") == digest and manifest.get("bytes") == st.st_size:
            return model_path
        problem = (f"its manifest does not match the file (model {manifest.get('model_id')!r}, "
                   f"sha256 {str(manifest.get('sha256'))[:12]}..., the file's is {digest[:12]}...)")
    if not warn:
        return None
    warnings.warn(f"the cached ONNX export in {folder} is unusable ({problem}); exporting the model again",
                  CacheWarning, stacklevel=4)
    return None


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    import fcntl

    with open(folder / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _export_bytes(resolved: ResolvedModel) -> tuple[bytes, list[str]]:
    """The ONNX graph (input tensors -> last_hidden_state) of the folder's weights, and its input names."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(resolved.folder, local_files_only=True)
        model = AutoModel.from_pretrained(resolved.folder, local_files_only=True, attn_implementation="eager").eval()
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    sample = tokenizer(["an example", "a longer example sentence for the export"], padding=True,
                       return_tensors="pt")
    names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in sample]

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(**dict(zip(names, inputs))).last_hidden_state

    axes = {name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]}
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent Python branches of transformers
        torch.onnx.export(Hidden().eval(), tuple(sample[name] for name in names), buffer, input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET,
                          dynamo=False)
    return buffer.getvalue(), names


def ensure_exported(resolved: ResolvedModel, *, root: Path | None = None, log: Any = None) -> Path:
    """The cached ONNX export of ``resolved``'s weights, made (with a one-line message on stderr) if missing."""
    import hashlib

    folder = export_folder(resolved.model_id, root)
    found = _valid_export(folder, resolved.model_id)
    if found is not None:
        return found
    writable_dir(folder)
    mark_owned(folder.parent, f"ONNX exports of the encoder weights {resolved.model_id}")
    with _locked(folder):
        if (folder / MANIFEST).is_file():
            found = _valid_export(folder, resolved.model_id, warn=False)  # another process may have just made it
            if found is not None:
                return found
        (folder / MANIFEST).unlink(missing_ok=True)  # the manifest goes first: no half-made export looks valid
        for stale in folder.glob(f".{MODEL_FILE}.*.tmp"):
            stale.unlink(missing_ok=True)  # atomic_write's temporary files of a killed export
        stream = log if log is not None else sys.stderr
        print(f"veil: exporting {resolved.name} ({resolved.model_id}) to ONNX for the 'onnx' encoder backend, "
              f"once, into {folder} ...", end="", file=stream, flush=True)
        start = time.perf_counter()
        data, names = _export_bytes(resolved)
        with atomic_write(folder / MODEL_FILE, "wb") as fh:
            fh.write(data)
        seconds = time.perf_counter() - start
        atomic_write_json(folder / MANIFEST, {
            "format": FORMAT, "backend": "onnx", "model_id": resolved.model_id, "source": str(resolved.folder),
            "file": MODEL_FILE, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "inputs": names,
            "opset": OPSET, "versions": _versions(), "seconds": round(seconds, 3),
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})
        print(f" done in {seconds:.1f} s", file=stream, flush=True)
    found = _valid_export(folder, resolved.model_id)
    if found is None:  # pragma: no cover - the file was changed between the write and this check
        raise DataFormatError(f"the ONNX export just written to {folder} does not match its manifest; "
                              f"remove {folder} and run again")
    return found


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "onnx", "onnxruntime"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:  # pragma: no cover
            out[name] = "absent"
    return out


class OnnxRunner:
    """An ONNX Runtime session over one export; ``hidden(batch)`` returns the last hidden states.

    Uses as many intra-op threads as torch does (``torch.get_num_threads()``,
    which follows ``OMP_NUM_THREADS``), so both backends use the same cores.
    """

    def __init__(self, model_path: Path) -> None:
        import onnxruntime as ort
        import torch

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, int(torch.get_num_threads()))
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: ORT's informational notes are not the user's concern
        self.session = ort.InferenceSession(os.fspath(model_path), options, providers=["CPUExecutionProvider"])
        self.inputs = [item.name for item in self.session.get_inputs()]

    def hidden(self, batch: Any) -> np.ndarray:
        feed = {name: np.ascontiguousarray(batch[name].numpy(), dtype=np.int64) for name in self.inputs}
        return self.session.run(["last_hidden_state"], feed)[0]
