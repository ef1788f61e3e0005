"""Ground rules of every writer: veil removes only folders it marked, and reuses a record only under its config."""

from __future__ import annotations

import json

import pytest

from veil._io import OWNED_MARKER, is_owned, mark_owned, read_json, remove_owned_dir
from veil.errors import DataFormatError, NotOwnedError, StaleResultError
from veil.results import Metric, ResultRecord, check_same_config, config_diff, reusable_record


def test_a_users_folder_is_never_removed(tmp_path):
    mine = tmp_path / "mydocs"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work")
    with pytest.raises(NotOwnedError, match="veil did not write"):
        remove_owned_dir(mine)
    assert (mine / "thesis.txt").read_text() == "years of work"


def test_a_forged_or_damaged_marker_is_not_ownership(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / OWNED_MARKER).write_text("not json")
    assert not is_owned(d)
    (d / OWNED_MARKER).write_text(json.dumps({"by": "someone"}))
    assert not is_owned(d)
    with pytest.raises(NotOwnedError):
        remove_owned_dir(d)
    assert d.is_dir()


def test_a_file_or_a_link_is_never_removed_as_a_folder(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(NotOwnedError, match="a file"):
        remove_owned_dir(f)
    target = mark_owned(tmp_path / "target", "test")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(NotOwnedError, match="a link"):
        remove_owned_dir(link)
    assert f.exists() and target.is_dir()


def test_a_marked_folder_is_removed(tmp_path):
    d = mark_owned(tmp_path / "run", "a federated run")
    (d / "round-1.json").write_text("{}")
    assert is_owned(d)
    remove_owned_dir(d)
    assert not d.exists()
    remove_owned_dir(d)  # missing: nothing to do


@pytest.mark.parametrize("content,match", [
    (b"", "empty"), (b'{"method": "x", ', "not valid JSON"), (b"\xff\xfe\x00garbage", "not UTF-8")])
def test_damaged_json_is_a_typed_error_naming_the_file(tmp_path, content, match):
    p = tmp_path / "r.json"
    p.write_bytes(content)
    with pytest.raises(DataFormatError, match=match) as exc:
        read_json(p)
    assert str(p) in str(exc.value) and "--force" in str(exc.value)
    with pytest.raises(DataFormatError, match=str(p)):
        ResultRecord.read(p)


def _record(config):
    return ResultRecord(method="m", experiment="e", config=config, metrics={"acc": Metric(mean=0.5)},
                        wall_time_s=1.0)


def test_config_diff_names_every_differing_key():
    assert config_diff({"a": 1, "b": [1, 2]}, {"a": 1, "b": (1, 2)}) == []
    assert config_diff({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 0}) == ["b", "c"]
    assert config_diff({"a": 1, "t": 5}, {"a": 1, "t": 9}, ignore=["t"]) == []


def test_a_record_made_under_another_config_is_refused(tmp_path):
    p = _record({"documents": 8, "confidence": 0.95}).write(tmp_path / "r.json")
    assert reusable_record(p, {"documents": 8, "confidence": 0.95}) is not None
    with pytest.raises(StaleResultError, match="documents: stored 8, requested 16") as exc:
        reusable_record(p, {"documents": 16, "confidence": 0.95})
    assert exc.value.keys == ["documents"] and "--force" in str(exc.value)
    assert reusable_record(p, {"documents": 16}, force=True) is None
    assert reusable_record(tmp_path / "none.json", {"documents": 16}) is None
    with pytest.raises(StaleResultError, match="requested"):
        check_same_config({"a": 1}, {}, p)
