"""The checks ``veil federated run`` (and ``sweep``) make before any work, in the library: option values and
combinations, the engine, counts against the corpus, and where the result and the tap go. Conflicting or
malformed options raise :class:`~veil.errors.OptionError` (the CLI's usage error), the rest
:class:`~veil.errors.InvalidParameterError`; each names the CLI option and the fix."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from veil.errors import InvalidParameterError, OptionError

__all__ = ["check_run_options", "check_engine", "check_sizes", "prepare_run"]


def _finite(option: str, value: float) -> None:
    if not math.isfinite(value):
        raise OptionError(f"{option} must be a finite number, got {value}")
    if value <= 0.0:
        raise OptionError(f"{option} must be > 0, got {value:g}")


def check_run_options(*, lr: float | None, alpha: float | None, encoder_lr: float, timeout: float, truth: bool,
                      record: Any, dp: str | None, clip: float | None, noise: float | None) -> None:
    """``veil federated run``'s option values and combinations, in the order the command has always checked them."""
    if lr is not None and not (math.isfinite(lr) and lr > 0):  # 0 is refused, never replaced by a default
        raise OptionError(f"--lr must be a finite number > 0, got {lr:g}; leave out --lr for the mode's "
                          "default (0.5 alg2, 1e-3 fedavg)")
    if alpha is not None and not (math.isfinite(alpha) and alpha > 0):
        raise OptionError(f"--alpha must be a finite number > 0, got {alpha:g}; leave out --alpha for an "
                          "IID partition")
    _finite("--encoder-lr", encoder_lr)
    _finite("--timeout", timeout)
    if truth and record is None:
        raise InvalidParameterError("--truth needs --record FOLDER (the truth is written next to the tap)")
    if dp is not None and dp not in ("server", "client", "local"):
        raise OptionError(f"--dp must be server, client or local, got {dp!r}")
    if dp is not None and (clip is None or noise is None):
        raise OptionError(f"--dp {dp} needs --clip C and --noise Z (e.g. --clip 1 --noise 1)")
    if dp is None and (clip is not None or noise is not None):
        raise OptionError("--clip and --noise set differential privacy's parameters: pass --dp server, "
                          "client or local with them")
    for option, value in (("--clip", clip), ("--noise", noise)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise OptionError(f"{option} must be a finite number > 0, got {value:g}")


def check_engine(engine: str) -> None:
    from veil.federated.run import ENGINES

    if engine not in ENGINES:
        raise OptionError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")


def check_sizes(cfg: Any) -> None:
    """Counts larger than the data are refused before any work (never silently capped)."""
    import veil.corpora as vc

    corpus = vc.load(cfg.corpus)
    n_train, n_test = len(corpus.indices("train")), len(corpus.indices("test"))
    if cfg.max_train > n_train:
        raise InvalidParameterError(f"--max-train {cfg.max_train} is more than {cfg.corpus}'s {n_train} training "
                                    f"examples; give at most {n_train}, or 0 for all")
    if cfg.max_test > n_test:
        raise InvalidParameterError(f"--max-test {cfg.max_test} is more than {cfg.corpus}'s {n_test} test examples; "
                                    f"give at most {n_test}, or 0 for all")
    usable = cfg.max_train or n_train
    if cfg.clients * cfg.k > usable:
        raise InvalidParameterError(f"--clients {cfg.clients} with --k {cfg.k} needs at least {cfg.clients * cfg.k} "
                                    f"training examples, and the run has {usable}; lower --clients or raise "
                                    "--max-train")


def prepare_run(cfg: Any, *, results: Path | None, record: Path | None, truth: bool, force: bool) -> Path:
    """Check a run's sizes and outputs before any work; returns the path its result file goes to."""
    from veil.federated.run import result_path, stored_result
    from veil.federated.server import check_record_target
    from veil.outputs import check_distinct_outputs, check_output_dir, default_results_dir

    if record is not None and cfg.finetune:
        raise InvalidParameterError("--record works with the frozen encoder only (a fine-tuned reply holds the whole "
                                    "encoder, 91 MB); drop --finetune or --record")
    check_sizes(cfg)
    out = check_output_dir(results if results is not None else default_results_dir("federated"))
    check_distinct_outputs({"--record": record, "--results": out})
    path = result_path(cfg, out)
    if path.is_dir():
        raise InvalidParameterError(f"{path} is a folder, where the result file would go; choose another --results")
    if path.exists() and stored_result(path, cfg, force=force) is not None:
        raise InvalidParameterError(f"{path} exists (this configuration's result); pass --force to run it again")
    if record is not None:
        check_record_target(record, truth=truth, force=force)
    return path
