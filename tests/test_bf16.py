"""veil._bf16: bfloat16 autocast only where the device runs it natively, and what records say about it."""

from __future__ import annotations

import pytest
import torch

from veil import _bf16


@pytest.fixture
def cpuinfo(tmp_path):
    def write(flags: str) -> str:
        path = tmp_path / f"cpuinfo-{abs(hash(flags))}"
        path.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n")
        return str(path)
    return write


def test_flags_are_read_from_cpuinfo(cpuinfo):
    assert "avx512_bf16" in _bf16.cpu_flags(cpuinfo("fpu avx2 avx512f avx512_bf16"))
    assert _bf16.cpu_flags(cpuinfo("fpu avx2")) == frozenset({"fpu", "avx2"})
    assert _bf16.cpu_flags("/nonexistent/cpuinfo") == frozenset()  # another OS: no flags assumed


@pytest.mark.parametrize("flags, native", [("fpu avx2 fma", False), ("avx512f avx512_bf16", True),
                                           ("amx_tile amx_bf16", True)])
def test_native_on_cpu_follows_the_flags(monkeypatch, cpuinfo, flags, native):
    monkeypatch.setattr(_bf16, "_CPUINFO", cpuinfo(flags))
    monkeypatch.delenv(_bf16.ENV, raising=False)
    assert _bf16.native_bf16("cpu") is native
    assert _bf16.native_bf16(torch.device("cpu")) is native
    assert _bf16.use_bf16(True, "cpu") is native
    assert _bf16.use_bf16(False, "cpu") is False  # never where it was not asked for
    assert _bf16.precision(True, "cpu") == ("bf16" if native else "fp32 (bf16 not native here)")
    assert _bf16.precision(False, "cpu") == "fp32"


def test_the_environment_forces_either_way(monkeypatch):
    monkeypatch.setenv(_bf16.ENV, "1")
    assert _bf16.use_bf16(True, "cpu")
    monkeypatch.setenv(_bf16.ENV, "0")
    assert not _bf16.use_bf16(True, "cpu")


def test_autocast_runs_products_in_bf16_only_when_used(monkeypatch):
    a, b = torch.randn(4, 8), torch.randn(8, 4)
    monkeypatch.setenv(_bf16.ENV, "1")
    with _bf16.autocast("cpu"):
        assert (a @ b).dtype == torch.bfloat16
    monkeypatch.setenv(_bf16.ENV, "0")
    with _bf16.autocast("cpu"):
        assert (a @ b).dtype == torch.float32
    with _bf16.autocast("cpu", requested=False):
        assert (a @ b).dtype == torch.float32
