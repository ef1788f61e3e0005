"""veil.bench.cells.common: defense keys come from the OS CSPRNG unless the bench was given key_seed."""

from __future__ import annotations

from veil.bench.cells.common import bench_block, key_rng
from veil.bench.plan import UTILITY, BenchConfig, Cell


def _cell(key_seed, setting=None):
    return Cell.make("rt-polarity", "texthide", setting or {"k": 4, "m": 256, "mode": "intra"}, UTILITY,
                     BenchConfig(quick=True, seed=3, key_seed=key_seed))


def test_keys_are_left_to_the_os_csprng_unless_a_key_seed_is_given():
    assert key_rng(_cell(None), "defense") is None


def test_a_key_seed_gives_one_key_per_cell_and_purpose_never_the_experiment_seed():
    cell = _cell(1)
    key = key_rng(cell, "defense")
    assert isinstance(key, int) and 0 <= key < 2 ** 63
    assert key_rng(_cell(1), "defense") == key  # reproducible
    assert key_rng(cell, "order") != key
    assert key_rng(_cell(2), "defense") != key
    assert key_rng(_cell(1, {"k": 4, "m": 256, "mode": "inter"}), "defense") != key
    assert key not in (cell.config.seed, cell.config.key_seed)


def test_the_bench_block_keeps_only_what_is_said():
    assert bench_block(success="identity", floor=None, comparable=False) == {"success": "identity",
                                                                              "comparable": False}
