"""Gradient attacks on federated TextHide: the paper's Table 2 analogue (the attacks on a recorded run are in
:mod:`veil.experiments.federated.taps`).

* :func:`run_table2_cell` / :func:`run_table2`: Algorithm 3 (:class:`~veil.attacks.gradients.alg3.GradMatch`),
  ``runs`` independent attacks per cell (k, d), plus the no-defense row (k = 0 here). One run draws k distinct
  rt-polarity training examples and a fresh head (both from the experiment seed: data order and weights are not
  secret), a secret mask pool (m = 1, the paper's upper-bound setting) and mixing from the OS CSPRNG (never from
  the seed), computes the client's gradient at batch size 1, and attacks it with dummies drawn from the seed.
  Success rates carry Wilson 95% intervals over the runs. Inputs: MiniLM vectors times sqrt(384) (veil's
  rep_scale); ``placement="input"`` first maps them to d dimensions with a FIXED public Gaussian projection
  (entries N(0, 1/d), seed :data:`PROJECTION_SEED`) times sqrt(d), for every d (1024 included).

Records go to ``<results>/<name>.json`` (method ``gradients``), one per cell, written atomically; finished cells
are skipped unless ``force``. Gradient matching is many small torch operations, which run several times
faster on one thread than on two contended ones, so the runners set torch to one thread while they work and
restore the caller's setting afterwards.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil._threads import torch_threads
from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord

__all__ = ["Table2Cell", "table2_cells", "run_table2_cell", "run_table2", "result_path", "identity",
           "PROJECTION_SEED", "TABLE2_K", "TABLE2_D"]

METHOD = "gradients"
PROJECTION_SEED = 20201105  # public: the projection is part of the (public) model, not a secret
TABLE2_K = (1, 2, 4)
TABLE2_D = (4, 16, 64, 256, 1024)
SECRET_NOTE = ("OS CSPRNG per run: TextHide's mask pool (m=1) and mixing (coefficients, permutation); the seed "
               "picks the examples, the head's initial weights and the attacker's dummies only")


@dataclass(frozen=True)
class Table2Cell:
    """One cell of the Table 2 analogue: ``k`` (0 = no defense), mask dimension ``d``, ``runs`` attacks."""

    k: int = 1
    d: int = 64
    runs: int = 50
    seed: int = 0
    placement: str = "hidden"
    activation: str = "sigmoid"
    max_evals: int = 600
    hidden_width: int = 64  # placement="input" only: the head's hidden layer after the d-dimensional input
    corpus: str = "rt-polarity"

    def __post_init__(self) -> None:
        from veil.attacks.gradients.alg3 import PLACEMENTS, check_mixed
        from veil.attacks.gradients._net import ACTIVATIONS

        for name in ("k", "seed"):
            if getattr(self, name) < 0:
                raise InvalidParameterError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.k:  # 0: the no-defense row
            check_mixed(self.k)
        for name in ("d", "runs", "max_evals", "hidden_width"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.placement not in PLACEMENTS:
            raise InvalidParameterError(f"placement must be one of {PLACEMENTS}, got {self.placement!r}")
        if self.activation not in ACTIVATIONS:
            raise InvalidParameterError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")

    @property
    def name(self) -> str:
        row = "none" if self.k == 0 else f"k{self.k}"
        width = f"-h{self.hidden_width}" if self.placement == "input" else ""
        return (f"table2-{self.corpus}-{self.placement}-{self.activation}{width}-{row}-d{self.d}-r{self.runs}"
                f"-e{self.max_evals}-seed{self.seed}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def table2_cells(*, ks: Sequence[int] = TABLE2_K, ds: Sequence[int] = TABLE2_D, baseline: bool = True,
                 **options: Any) -> list[Table2Cell]:
    """The grid: the no-defense row (k = 0) if ``baseline``, then every (k, d)."""
    rows = ([0] if baseline else []) + [int(k) for k in ks]
    return [Table2Cell(k=k, d=int(d), **options) for k in rows for d in ds]


def result_path(cell: Table2Cell, root: str | Path) -> Path:
    return Path(root) / f"{cell.name}.json"


_DATA: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray, int]] = {}


def _corpus(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(MiniLM vectors, labels, train indices, classes) of a labelled corpus, cached per process and backend."""
    from veil.encoders.backends import resolve_backend

    backend = resolve_backend(None)  # the one :func:`identity` names
    key = (name, backend)
    if key not in _DATA:
        import veil.corpora as vc
        from veil.encoders import TextEncoder

        corpus = vc.load(name)
        if corpus.task != "classification":
            raise InvalidParameterError(f"corpus {name!r} is not a classification corpus; use e.g. rt-polarity")
        X = TextEncoder("minilm", backend=backend).encode_corpus(corpus, None, progress=True)
        y = np.asarray(corpus.labels, dtype=np.int64)
        _DATA[key] = (np.ascontiguousarray(X, dtype=np.float64), y, np.asarray(corpus.indices("train")),
                      int(y.max()) + 1)
    return _DATA[key]


def identity(cell: Table2Cell) -> dict[str, Any]:
    """What a record's ``config["cell"]`` holds and is compared on: the cell, and the backend of its frozen MiniLM
    vectors when it is not torch (``encoder_backend``; absent from every torch record)."""
    from veil.encoders.backends import backend_identity

    return {**cell.to_dict(), **backend_identity(None)}


def projection(d: int, dim: int) -> np.ndarray:
    """The fixed public (d, dim) Gaussian projection, entries N(0, 1/d) (norms preserved on average)."""
    return np.random.default_rng([PROJECTION_SEED, d, dim]).standard_normal((d, dim)) / math.sqrt(d)


def _seeds(cell: Table2Cell, run: int) -> tuple[np.random.Generator, int, int]:
    data, head, attack = np.random.SeedSequence([cell.seed, cell.k, cell.d, run]).spawn(3)
    return (np.random.default_rng(data), int(head.generate_state(1)[0]), int(attack.generate_state(1)[0]))


def _one_run(cell: Table2Cell, run: int, X: np.ndarray, y: np.ndarray, train: np.ndarray, C: int) -> dict[str, Any]:
    from veil.attacks.gradients.alg3 import GradMatch, score_gradmatch, simulate_step
    from veil.attacks.gradients.tap import ModelSpec
    from veil.models.heads import MLPHead

    data_rng, head_seed, attack_seed = _seeds(cell, run)
    k = max(cell.k, 1)
    idx = data_rng.choice(train, size=k, replace=False)
    x = X[idx]
    if cell.placement == "input":
        x = x @ projection(cell.d, X.shape[1]).T * math.sqrt(cell.d)
        spec = ModelSpec(cell.d, C, (cell.hidden_width,), 0.0)
    else:
        x = x * math.sqrt(X.shape[1])
        spec = ModelSpec(X.shape[1], C, (cell.d,), 0.0)
    head = MLPHead(spec.in_dim, C, hidden=spec.hidden, dropout=0.0, rng=head_seed)
    weights = {key: v.detach().numpy().astype(np.float64) for key, v in head.state_dict().items()}
    defense = ({"name": "none", "placement": cell.placement} if cell.k == 0 else
               {"name": "texthide", "k": cell.k, "m": 1, "placement": cell.placement})
    obs, truth = simulate_step(x, np.eye(C)[y[idx]], spec, weights, defense=defense, activation=cell.activation)
    recovery = GradMatch(max_evals=cell.max_evals, rng=attack_seed).recover(obs)
    scores = score_gradmatch(recovery, truth)
    scores["wall_time_s"] = recovery.wall_time_s
    return scores


def _rate(values: Sequence[bool]) -> Metric:
    from veil.metrics.leakage import wilson_interval

    n = len(values)
    hits = int(sum(bool(v) for v in values))
    lo, hi = wilson_interval(hits, n)
    return Metric(mean=hits / n, n=n, ci_low=lo, ci_high=hi, ci_level=0.95)


def _mean(values: Sequence[float], bounds: tuple[float, float] = (0.0, math.inf)) -> Metric:
    from veil.metrics.leakage import normal_interval

    vals = [float(v) for v in values]
    base = Metric.from_values(vals, keep_values=False)
    ci = normal_interval(vals, bounds=bounds)
    return base if ci is None else Metric(mean=base.mean, std=base.std, n=base.n, ci_low=ci[0], ci_high=ci[1],
                                          ci_level=0.95)


def run_table2_cell(cell: Table2Cell, *, progress: bool = False) -> ResultRecord:
    """Run one cell's ``runs`` attacks; returns its record (not written)."""
    from veil.attacks.gradients.alg3 import GradMatch
    from veil.progress import progress_bar

    start = time.perf_counter()
    X, y, train, C = _corpus(cell.corpus)
    runs = []
    with torch_threads(1), progress_bar(cell.runs, cell.name, progress) as advance:
        for r in range(cell.runs):
            runs.append(_one_run(cell, r, X, y, train, C))
            advance(1)
    metrics = {"success": _rate([r["success"] for r in runs]),
               "success_any": _rate([r["success_any"] for r in runs]),
               "success_raw": _rate([r["success_raw"] for r in runs]),
               "encoding_recovered": _rate([r["encoding_recovered"] for r in runs]),
               "evaluations": _mean([r["evaluations"] for r in runs]),
               "seconds_per_run": _mean([r["wall_time_s"] for r in runs])}
    if cell.k:
        metrics["mask_bits"] = _mean([r["mask_bits"] for r in runs], bounds=(0.0, 1.0))
    attack = {**GradMatch(max_evals=cell.max_evals, rng=cell.seed).config(),
              "rng": "per run: numpy SeedSequence([seed, k, d, run]) spawned into (examples, head weights, dummies)"}
    defense = ({"defense": "none"} if cell.k == 0 else
               {"defense": "texthide", "m": 1, "k": cell.k, "mask_dim": cell.d, "placement": cell.placement})
    per_run = [{k_: v for k_, v in r.items() if k_ in ("mse", "mse_raw", "mask_bits", "encoding_error", "loss",
                                                        "evaluations", "success")} for r in runs]
    return ResultRecord(method=METHOD, experiment="table2",
                        config={"cell": identity(cell), "attack": attack, "defense": defense,
                                "success_criterion": "every source matched (Hungarian on MSE, sign-corrected) with "
                                                     "MSE <= 1e-3 on inputs scaled to mean square ~1",
                                "secret_randomness": SECRET_NOTE},
                        metrics=metrics, wall_time_s=time.perf_counter() - start, extra={"runs": per_run})


def run_table2(cells: Sequence[Table2Cell], root: str | Path, *, force: bool = False, progress: bool = True,
               log: Any = print, workers: int = 1, ray_address: str | None = None) -> list[Path]:
    """Run every cell not yet done (resumable, :mod:`veil.experiments._sweep`); each record is written atomically
    as soon as it is done. Cells are independent: ``workers`` > 1 or ``ray_address`` runs them as Ray tasks."""
    from functools import partial

    from veil.experiments._sweep import Sweep, run_records
    from veil.outputs import check_output_dir

    root = check_output_dir(root)
    sequential = workers == 1 and ray_address is None
    sweep = Sweep(name="table 2", path=partial(result_path, root=root), finished=_finished, cell_id=_cell_name,
                  run=partial(run_table2_cell, progress=progress and sequential), summary=_summary)
    return run_records(sweep, cells, root, workers=workers, ray_address=ray_address, force=force,
                       progress=progress and not sequential, log=log)


def _cell_name(cell: Table2Cell) -> str:
    return cell.name


def _summary(rec: ResultRecord) -> str:
    return f"success = {rec.metrics['success']}, encoding recovered = {rec.metrics['encoding_recovered']}"


def _finished(cell: Table2Cell, path: Path) -> bool:
    """True when ``path`` holds ``cell``'s record; a damaged one or one of another cell is a typed error naming it
    (never counted as done)."""
    from veil.results import ResultRecord, check_same_config

    if not path.exists():
        return False
    rec = ResultRecord.read(path)
    stored = rec.config.get("cell")
    check_same_config(stored if isinstance(stored, dict) else {}, identity(cell), path)
    return True
