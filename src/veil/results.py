"""Result records: the JSON schema every veil experiment writes.

A record holds what was run (``config``), what came out (``metrics``, each a
:class:`Metric` with mean and spread), where and when (``environment``, git
commit, wall time). Records are written atomically and are the only source
of the tables and plots in ``docs/results/`` (rendered by ``veil report``).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from veil._io import atomic_write_json
from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["SCHEMA_VERSION", "Metric", "ResultRecord", "environment", "git_commit", "load_records", "Timer"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Metric:
    """A metric over ``n`` runs or queries: mean, standard deviation and an optional CI."""

    mean: float
    std: float | None = None
    n: int = 1
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float | None = None
    values: tuple[float, ...] = ()

    @classmethod
    def from_values(cls, values: Sequence[float], *, keep_values: bool = True) -> "Metric":
        """Mean and sample standard deviation (ddof=1) of per-seed values."""
        vals = [float(v) for v in values]
        if not vals:
            raise InvalidParameterError("Metric.from_values needs at least one value")
        n = len(vals)
        mean = math.fsum(vals) / n
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else None
        return cls(mean=mean, std=std, n=n, values=tuple(vals) if keep_values else ())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["values"] = list(self.values)
        return {k: v for k, v in d.items() if v is not None and v != []}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Metric":
        return cls(**{**d, "values": tuple(d.get("values", ()))})

    def __str__(self) -> str:
        if self.ci_low is not None and self.ci_high is not None:
            return f"{self.mean:.4g} [{self.ci_low:.4g}, {self.ci_high:.4g}]"
        if self.std is not None:
            return f"{self.mean:.4g} ± {self.std:.2g}"
        return f"{self.mean:.4g}"


def git_commit(cwd: str | os.PathLike | None = None) -> str:
    """The current git commit (with ``-dirty`` if the tree has changes), or ``unknown``."""
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=10)
        if sha.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment() -> dict[str, Any]:
    """Versions and machine facts that matter for reproducing a number."""
    import importlib.metadata as md

    versions = {}
    for pkg in ("torch", "transformers", "sentence-transformers", "numpy", "scikit-learn", "spacy", "faiss-cpu"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            continue
    from veil import __version__

    return {
        "veil": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "packages": versions,
    }


class Timer:
    """Wall-clock timer: ``with Timer() as t: ...; t.seconds``."""

    def __enter__(self) -> "Timer":
        self._start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


@dataclass
class ResultRecord:
    """One experiment result, serialised as JSON.

    ``method`` names the results folder (``results/<method>/``); ``experiment``
    names what was run (e.g. ``table1``, ``grid``). ``config`` must say which
    setting produced the numbers (e.g. frozen vs fine-tuned encoder) and the
    experiment seeds. Secret material (mask pools, DP noise seeds) never goes
    into a record.
    """

    method: str
    experiment: str
    config: dict[str, Any]
    metrics: dict[str, Metric]
    wall_time_s: float
    environment: dict[str, Any] = field(default_factory=environment)
    git_commit: str = field(default_factory=git_commit)
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    extra: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "method": self.method,
            "experiment": self.experiment,
            "created": self.created,
            "git_commit": self.git_commit,
            "wall_time_s": self.wall_time_s,
            "config": self.config,
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
            "environment": self.environment,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ResultRecord":
        try:
            return cls(
                method=d["method"], experiment=d["experiment"], config=d["config"],
                metrics={k: Metric.from_dict(m) for k, m in d["metrics"].items()},
                wall_time_s=float(d["wall_time_s"]), environment=d.get("environment", {}),
                git_commit=d.get("git_commit", "unknown"), created=d.get("created", ""),
                extra=d.get("extra", {}), schema_version=int(d.get("schema_version", SCHEMA_VERSION)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataFormatError(f"not a veil result record ({type(exc).__name__}: {exc})") from None

    def write(self, path: str | os.PathLike) -> Path:
        """Write the record as JSON atomically; returns the path."""
        path = Path(path)
        atomic_write_json(path, self.to_dict())
        return path

    @classmethod
    def read(cls, path: str | os.PathLike) -> "ResultRecord":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{path}: invalid JSON ({exc})") from None
        return cls.from_dict(data)


def load_records(paths: Iterable[str | os.PathLike]) -> list[ResultRecord]:
    return [ResultRecord.read(p) for p in paths]
