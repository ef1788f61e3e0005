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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from veil._io import atomic_write_json, read_json
from veil.errors import DataFormatError, InvalidParameterError, StaleResultError

__all__ = ["SCHEMA_VERSION", "Metric", "ResultRecord", "environment", "git_commit", "load_records", "Timer",
           "config_diff", "check_same_config", "reusable_record"]

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
        """Read a record; a damaged file (empty, truncated, not UTF-8, not a record) is a typed error naming it."""
        data = read_json(path, what="result record")
        try:
            return cls.from_dict(data)
        except DataFormatError as exc:
            raise DataFormatError(f"damaged result record {path}: {exc}; delete it (or re-run with --force) so "
                                  "that it is made again") from None


def load_records(paths: Iterable[str | os.PathLike]) -> list[ResultRecord]:
    return [ResultRecord.read(p) for p in paths]


_MISSING = object()


def config_diff(stored: Mapping[str, Any], requested: Mapping[str, Any], *,
                ignore: Iterable[str] = ()) -> list[str]:
    """The keys whose values differ between two configurations (a key missing on one side differs), sorted.

    Values are compared after a JSON round trip, so a tuple equals the list a record stores (and, as in
    Python, ``1`` equals ``1.0``).
    """
    skip = set(ignore)
    norm_s = json.loads(json.dumps(dict(stored), default=str))
    norm_r = json.loads(json.dumps(dict(requested), default=str))
    keys = (set(norm_s) | set(norm_r)) - skip
    return sorted(k for k in keys if norm_s.get(k, _MISSING) != norm_r.get(k, _MISSING))


def _show(value: Any) -> str:
    return "(absent)" if value is _MISSING else json.dumps(value, default=str)


def check_same_config(stored: Mapping[str, Any], requested: Mapping[str, Any], path: str | os.PathLike, *,
                      ignore: Iterable[str] = (), force_option: str = "--force") -> None:
    """Raise :class:`~veil.errors.StaleResultError` when the result at ``path`` was made under another config.

    The message names every differing key with both values (the first few) and the way out: ``force_option``
    re-runs and replaces it, or another output folder keeps both.
    """
    keys = config_diff(stored, requested, ignore=ignore)
    if not keys:
        return
    shown = "; ".join(f"{k}: stored {_show(stored.get(k, _MISSING))}, requested {_show(requested.get(k, _MISSING))}"
                      for k in keys[:4])
    more = f" (and {len(keys) - 4} more)" if len(keys) > 4 else ""
    raise StaleResultError(
        f"{path} was made under another configuration ({shown}{more}); it was not reused. Pass {force_option} "
        "to re-run and replace it, or write to another output folder to keep both", keys=keys)


def reusable_record(path: str | os.PathLike, config: Mapping[str, Any], *, force: bool = False,
                    ignore: Iterable[str] = (), force_option: str = "--force") -> ResultRecord | None:
    """The record at ``path`` if it exists and was made under ``config``; None if there is none (or ``force``).

    The one rule of every resumable writer: a record on disk is this configuration's result, or it is not used.
    A damaged file raises :class:`~veil.errors.DataFormatError` and a record made under another configuration
    raises :class:`~veil.errors.StaleResultError` (both name the path and the fix), never "kept".
    """
    path = Path(path)
    if force or not path.exists():
        return None
    record = ResultRecord.read(path)
    check_same_config(record.config, config, path, ignore=ignore, force_option=force_option)
    return record
