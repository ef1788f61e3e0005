"""Taps: veil replaces only the tap folders it recorded (issue 26, class 1); a user's folder is never touched."""

from __future__ import annotations

import pytest

from veil._io import is_owned
from veil.errors import NotOwnedError
from veil.federated.config import FederatedConfig
from veil.federated.server import Recorder


def _record(path, **kw) -> Recorder:
    rec = Recorder(path, **kw)
    rec.describe({"format": "test"})
    rec.finish()
    return rec


def test_a_users_folder_is_refused_with_force_and_kept(tmp_path):
    mine = tmp_path / "mydocs"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work")
    with pytest.raises(NotOwnedError, match="did not write"):
        Recorder(mine, force=True)
    assert (mine / "thesis.txt").read_text() == "years of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mydocs"]  # no partial folder either


def test_a_users_folder_named_like_the_partial_is_kept(tmp_path):
    partial = tmp_path / "tap.partial"
    partial.mkdir()
    (partial / "keep.txt").write_text("mine")
    with pytest.raises(NotOwnedError):
        Recorder(tmp_path / "tap")
    assert (partial / "keep.txt").read_text() == "mine"


def test_veils_own_tap_is_replaced_with_force_only(tmp_path):
    tap = tmp_path / "tap"
    _record(tap, truth=True)
    assert is_owned(tap) and is_owned(tmp_path / "tap.truth")
    (tap / "old-round").mkdir()
    with pytest.raises(Exception, match="pass --force to replace it"):
        Recorder(tap)
    _record(tap, truth=True, force=True)
    assert is_owned(tap) and not (tap / "old-round").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tap", "tap.truth"]


def test_abort_removes_the_partial_tap_and_refuses_later_writes(tmp_path):
    rec = Recorder(tmp_path / "tap", truth=True)
    rec.describe({"format": "test"})
    rec.abort()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(Exception, match="stopped"):
        rec.describe({"format": "test"})
    assert list(tmp_path.iterdir()) == []


def test_the_sweeps_refuse_a_users_folder_in_place_of_a_tap(tmp_path):
    from veil.experiments.federated.taps import analytic_grid, plan_tap_cells, tap_name
    from veil.experiments.federated.chain import chain_result_path

    cells = analytic_grid(batch_sizes=[2])
    mine = tmp_path / "taps" / tap_name(cells[0])
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(NotOwnedError, match="--taps"):
        plan_tap_cells(cells, tmp_path / "res", tmp_path / "taps", chain_result_path)
    assert (mine / "notes.txt").read_text() == "mine"


def test_run_names_keep_runs_with_other_settings_apart():
    base = FederatedConfig()
    names = {base.run_name, FederatedConfig(lr=0.1).run_name, FederatedConfig(max_train=100).run_name,
             FederatedConfig(max_test=50).run_name, FederatedConfig(dropout=0.1).run_name,
             FederatedConfig(client_mode="fedavg", local_epochs=2).run_name}
    assert len(names) == 6
    assert FederatedConfig(lr=0.5).run_name == base.run_name  # alg2's default rate, given explicitly
    assert base.run_name == base.name  # the default run keeps its old name
