"""Integrity of cached corpora: row count and sha256 recorded at pull time and checked on every load.

A real pull (trec-questions, built from the package archive already
downloaded by `make setup`) is installed once into a temporary VEIL_HOME;
each test damages its own copy the way a disk, a crash or a hand edit would.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

import veil.corpora as vc
from veil.corpora.base import Corpus
from veil.corpora.registry import get_spec
from veil.errors import CacheCorruptError, ResourceMissingError

NAME = "trec-questions"  # small: builds in < 1 s
ROWS = 5381
FIX = f"veil corpora pull {NAME} --force"


@pytest.fixture(scope="module")
def pulled(real_home, builtin, tmp_path_factory):
    """A VEIL_HOME holding a fresh pull of NAME (and its verified archive)."""
    builtin(NAME)  # makes sure the archive is in the real downloads cache
    archive = real_home / "downloads" / get_spec(NAME).source.filename
    home = tmp_path_factory.mktemp("pulled") / "vh"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VEIL_HOME", str(home))
        vc.pull(NAME, archive=archive)
    return home, archive


@pytest.fixture()
def home(pulled, tmp_path, monkeypatch):
    """This test's own copy of the pulled cache, set as VEIL_HOME."""
    copy = tmp_path / "vh"
    shutil.copytree(pulled[0], copy)
    monkeypatch.setenv("VEIL_HOME", str(copy))
    return copy


def _files(home):
    folder = home / "corpora" / NAME
    return folder / "corpus.jsonl", folder / "meta.json"


def _snapshot(home):
    """Every file under the cache with its bytes: tests assert that refusing wrote nothing."""
    return {p.relative_to(home): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


def _refused(home, match):
    before = _snapshot(home)
    with pytest.raises(CacheCorruptError, match=match) as info:
        vc.load(NAME)
    message = str(info.value)
    assert f"`{FIX}`" in message and "older veil" not in message
    assert not vc.is_pulled(NAME)
    with pytest.raises(CacheCorruptError):  # pull_missing never rebuilds silently over damage
        vc.load(NAME, pull_missing=True)
    assert _snapshot(home) == before
    return message


def test_pull_records_row_count_and_sha256(home):
    rows, meta = _files(home)
    recorded = json.loads(meta.read_text())
    assert recorded["size"] == ROWS
    assert recorded["corpus_sha256"] == hashlib.sha256(rows.read_bytes()).hexdigest()
    assert len(vc.load(NAME)) == ROWS and vc.is_pulled(NAME)


def test_truncated_corpus_is_refused(home):
    rows, _ = _files(home)
    rows.write_bytes(b"".join(rows.read_bytes().splitlines(keepends=True)[:100]))
    message = _refused(home, r"corpus.jsonl has 100 rows, meta.json records 5381")
    assert message.startswith(f"cached corpus {NAME!r} (")


def test_flipped_byte_is_refused(home):
    rows, _ = _files(home)
    data = bytearray(rows.read_bytes())
    i = data.index(b'"text": "') + 12  # a letter inside the first text: still valid JSON, same row count
    data[i] ^= 0x20  # flip the case bit
    rows.write_bytes(bytes(data))
    _refused(home, r"corpus.jsonl has sha256 [0-9a-f]{12}\.\.\., meta.json records [0-9a-f]{12}\.\.\.")


def test_missing_meta_is_refused_not_called_older(home):
    _, meta = _files(home)
    meta.unlink()
    _refused(home, r"meta.json is missing")


@pytest.mark.parametrize("damage", ["truncated", "not_an_object", "lacks_keys"])
def test_broken_meta_is_refused_not_called_older(home, damage):
    _, meta = _files(home)
    text = meta.read_text()
    if damage == "truncated":
        meta.write_text(text[: len(text) // 2])
        match = r"meta.json is not valid JSON"
    elif damage == "not_an_object":
        meta.write_text("[1, 2, 3]\n")
        match = r"meta.json holds a list, not an object"
    else:
        obj = json.loads(text)
        del obj["size"], obj["task"]
        meta.write_text(json.dumps(obj))
        match = r"meta.json lacks task, size"
    _refused(home, match)


def test_missing_rows_file_is_refused(home):
    rows, _ = _files(home)
    rows.unlink()
    _refused(home, r"corpus.jsonl is missing \(meta.json is there\)")


def test_the_fix_command_repairs_it(home, pulled):
    rows, _ = _files(home)
    rows.write_bytes(rows.read_bytes()[:1000])
    with pytest.raises(CacheCorruptError):
        vc.load(NAME)
    # `veil corpora pull NAME --force` (here with the local archive instead of the network)
    vc.pull(NAME, force=True, archive=pulled[1])
    assert len(vc.load(NAME)) == ROWS


def test_older_cache_without_hash_is_checked_by_rows_and_upgraded(home):
    rows, meta = _files(home)
    legacy = json.loads(meta.read_text())
    digest = legacy.pop("corpus_sha256")
    meta.write_text(json.dumps(legacy))
    assert len(vc.load(NAME)) == ROWS  # still loads...
    assert json.loads(meta.read_text())["corpus_sha256"] == digest  # ...and the hash is now recorded

    meta.write_text(json.dumps(legacy))
    rows.write_bytes(b"".join(rows.read_bytes().splitlines(keepends=True)[:100]))
    _refused(home, r"corpus.jsonl has 100 rows, meta.json records 5381")  # the row count is checked


def test_older_build_is_still_reported_as_older(home):
    _, meta = _files(home)
    obj = json.loads(meta.read_text())
    obj["build"] = "1.1"
    meta.write_text(json.dumps(obj))
    older = rf"was cached by an older veil \(build 1.1, .*\); run `veil corpora pull {NAME}` to rebuild it"
    with pytest.raises(ResourceMissingError, match=older):
        vc.load(NAME)


def test_not_pulled_is_not_corrupt(home):
    shutil.rmtree(home / "corpora" / NAME)
    with pytest.raises(ResourceMissingError, match=rf"`veil corpora pull {NAME}` to fetch it") as info:
        vc.load(NAME)
    assert not isinstance(info.value, CacheCorruptError)


def test_saved_folder_of_your_own_is_checked_too(tmp_path):
    corpus = Corpus(name="mine", texts=["one", "two", "three"], splits=["train", "dev", "test"])
    corpus.save(tmp_path / "mine")
    assert Corpus.load_folder(tmp_path / "mine").texts == corpus.texts
    rows = tmp_path / "mine" / "corpus.jsonl"
    rows.write_bytes(rows.read_bytes().replace(b"two", b"TWO"))
    with pytest.raises(CacheCorruptError, match=r"saved corpus .*corpus.jsonl has sha256 .*"
                                                r"Run `corpus.save\('.*mine'\)` to rebuild it"):
        Corpus.load_folder(tmp_path / "mine")


def test_malformed_row_with_matching_count_is_refused(tmp_path):
    corpus = Corpus(name="mine", texts=["one", "two"], splits=["train", "dev"])
    corpus.save(tmp_path / "mine")
    rows, meta = tmp_path / "mine" / "corpus.jsonl", tmp_path / "mine" / "meta.json"
    obj = json.loads(meta.read_text())
    del obj["corpus_sha256"]  # a folder saved before the hash: only rows and parsing guard it
    meta.write_text(json.dumps(obj))
    rows.write_bytes(rows.read_bytes().replace(b'"text"', b'"txet"', 1))
    with pytest.raises(CacheCorruptError, match=r"corpus.jsonl line 1 cannot be read \(KeyError"):
        Corpus.load_folder(tmp_path / "mine")
