"""Run bench cells: resumable, one failing cell never stops the others, sequential or on a Ray cluster.

Every finished cell is written atomically to ``OUT/cells/<cell id>.json`` as soon as it is done; a cell whose
file exists, made for the same cell from the same inputs (a given corpus' file and rows, by sha256:
:func:`veil.bench.data.corpus_inputs`), is skipped unless ``force``; one made from other content is refused. A
cell that raises is reported (type, message, the last lines of its traceback) in ``OUT/run.json`` and on the
console, and the others go on; :func:`run_bench` returns a :class:`BenchRun` whose ``failed`` list the CLI turns
into its exit code.

``workers > 1`` (or ``ray_address``) runs cells as Ray tasks of one CPU each on a local cluster started here
(``ray.init(num_cpus=workers)``) or on an existing one; each worker process loads and encodes a corpus once and
reuses it for every cell it runs. Cells are deterministic given their seed when keys are seeded
(``key_seed``), so a Ray run writes the same metrics as a sequential one. The engine is the one every sweep
uses, :mod:`veil.experiments._sweep`; this module says what a bench cell is (its path, its run, its reuse check).

Data given to the bench in this process (a user's file, :func:`veil.bench.data.use_corpus`) is private: its
encodings are kept in memory for the run only (:func:`veil.encoders.cache.private_texts`), unless
``cache_embeddings``, and texts the encoder will truncate are warned about before any cell.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable

from veil.errors import InvalidParameterError
from veil.experiments._sweep import CellOutcome, Sweep, SweepRun, run_sweep

__all__ = ["BenchRun", "CellOutcome", "run_bench", "run_cell", "cell_path", "finished_cells", "ensure_models",
           "cell_models", "releases_lm"]

#: a bench run: the outcome of every cell (``failed``, ``counts()``), written as ``OUT/run.json``
BenchRun = SweepRun


def cell_path(out: str | Path, cell: Any) -> Path:
    return Path(out) / "cells" / f"{cell.id}.json"


def _target(path: str) -> Callable[..., Any]:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_cell(cell: Any) -> Any:
    """Run one cell in this process; returns its :class:`~veil.results.ResultRecord` (not written)."""
    from veil.attacks.base import get_attack
    from veil.bench.cells import UTILITY_CELLS
    from veil.bench.data import bench_data
    from veil.bench.plan import UTILITY

    data = bench_data(cell.corpus, cell.config.quick, cell.config.limit)
    if cell.attack == UTILITY:
        target = UTILITY_CELLS.get(data.task)
        if target is None:
            raise InvalidParameterError(f"no utility measure for task {data.task!r}")
    else:
        target = get_attack(cell.attack).bench_cell
        if not target:
            raise InvalidParameterError(f"attack {cell.attack!r} declares no bench cell")
    return _target(target)(cell, data)


def _summary(rec: Any) -> str:
    bench = rec.extra.get("bench", {})
    if "success" in bench:
        m = bench["success_metric"]
        ci = f" [{m['ci_low']:.3f}, {m['ci_high']:.3f}]" if "ci_low" in m else ""
        return f"{bench['success']}={m['mean']:.3f}{ci}"
    if "utility" in bench:
        m = bench["utility_metric"]
        return f"{bench['utility']}={m['mean']:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]"
    return ""


def _identity(cell: dict[str, Any]) -> dict[str, Any]:
    """What a cell's result depends on, flat (``config.queries`` None and 500 are the same run: ``n_queries``)."""
    config = cell.get("config") if isinstance(cell.get("config"), dict) else {}
    return {**{k: v for k, v in cell.items() if k != "config"},
            **{f"config.{k}": v for k, v in config.items() if k not in ("queries", "epochs")}}


def _finished(out: Path, cell: Any, path: Path) -> bool:
    """True when ``path`` holds a record made for ``cell`` (with the same frozen-encoder backend,
    :func:`veil.bench.data.encoder_backend`); False when absent. A damaged record is a
    :class:`~veil.errors.DataFormatError` and one made for another cell a :class:`~veil.errors.StaleResultError`,
    each naming the file and the fix."""
    from veil._io import read_json
    from veil.bench.data import encoder_backend
    from veil.encoders.backends import stored_backend_identity
    from veil.errors import DataFormatError
    from veil.results import check_same_config

    if not path.exists():
        return False
    fix = f"delete it, or pass --force to re-run every cell (the bench cell {cell.id} is not done)"
    data = read_json(path, what="bench cell record", fix=fix)
    stored = (data.get("config") or {}).get("cell") if isinstance(data, dict) else None
    if not isinstance(stored, dict) or not isinstance(data.get("metrics"), dict):
        raise DataFormatError(f"damaged bench cell record {path}: not a veil result record; {fix}")
    check_same_config({**_identity(stored), **stored_backend_identity(data["config"])},
                      {**_identity(cell.to_dict()), **encoder_backend(cell.corpus)}, path)
    return True


def _cell_inputs(inputs: dict[str, dict[str, str]], cell: Any) -> dict[str, str]:
    return inputs.get(cell.corpus, {})


def _sweep(out: Path, cells: list[Any]) -> Sweep:
    from functools import partial

    from veil.bench.data import corpus_inputs

    inputs = {name: corpus_inputs(name) for name in dict.fromkeys(c.corpus for c in cells)}  # hashed once per run
    return Sweep(name="bench", path=partial(cell_path, out), run=run_cell, finished=partial(_finished, out),
                 summary=_summary, keep_warnings=True, skip_log="count", inputs=partial(_cell_inputs, inputs))


def finished_cells(cells: list[Any], out: str | Path, *, force: bool = False) -> set[str]:
    """The ids of ``cells`` whose record in ``OUT/cells/`` exists and was made for that same cell (none with
    ``force``). Checked before any work: a damaged record (empty, truncated, not UTF-8, not JSON) is a
    :class:`~veil.errors.DataFormatError` and one made for another cell a :class:`~veil.errors.StaleResultError`,
    each naming the file and the fix; neither is ever counted as done. A record of a corpus given in this process
    counts only if it was made from the same content (:func:`veil.bench.data.corpus_inputs`); one made from other
    content (the file was edited, or read with other columns) is a :class:`~veil.errors.StaleResultError` naming
    ``--force``."""
    from veil.experiments._sweep import finished

    return finished(_sweep(Path(out), cells), cells, force=force)


def _inverts(attack: str | None) -> bool:
    """Whether the attack registered as ``attack`` writes text back with veil's inverter (it needs the model)."""
    from veil.attacks.base import attack_names, get_attack
    from veil.attacks.inversion.invert import Inversion

    return attack in attack_names() and issubclass(get_attack(attack), Inversion)


def _warn_truncated(names: list[str]) -> None:
    """One warning per given corpus whose texts the MiniLM encoder will truncate (before any cell)."""
    from veil.bench.data import given_texts
    from veil.bench.data_checks import warn_truncated

    texts = {name: given_texts(name) for name in names}
    texts = {name: t for name, t in texts.items() if t}
    if not texts:
        return
    from veil.encoders import TextEncoder

    encoder = TextEncoder("minilm")
    seen: set[str] = set()
    for name, t in texts.items():
        fresh = [x for x in dict.fromkeys(t) if x not in seen]  # a file given twice (a private column) warns once
        seen.update(fresh)
        warn_truncated(name, fresh, encoder)


def cell_models(cell: Any) -> list[str]:
    """The cached models veil trains that ``cell`` needs (:func:`ensure_models` makes them): ``mlm-quick`` for the
    quick bench's infilling and veil's masked-LM word recovery, an inverter for every inverting attack
    (``inverter-quick`` quick, ``inverter`` full), and for a cell of a defense that releases a language model its
    fine-tuned model and the attacker's reference model (``lm:<run key>``)."""
    attack = getattr(cell, "attack", None)
    out = []
    if attack and (str(attack).startswith("word-recovery-veil-mlm") or attack == "infill") and cell.config.quick:
        out.append("mlm-quick")
    if _inverts(attack):
        out.append("inverter-quick" if cell.config.quick else "inverter")
    if releases_lm(cell):
        from veil.bench.cells.generative_model import lm_model_name

        out.append(lm_model_name(cell))
    return out


def releases_lm(cell: Any) -> bool:
    """Whether ``cell``'s defense releases a fine-tuned language model (its cells need the trained model)."""
    from veil.defenses.base import defense_names, get_defense

    defense = getattr(cell, "defense", None)
    return defense in defense_names(controls=True) and get_defense(defense).releases == "generative-model"


def ensure_models(cells: list[Any], log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Make sure the models ``cells`` need are cached before any runs: the quick masked LM (infilling, veil's MLM
    word recovery), the inverters (the quick one is trained here on first use; the full one must exist) and the
    language models of generative-model settings with their attackers' reference models (trained here on first use).

    Returns one ``{"model", "seconds"}`` per model checked, and logs ``bench: model NAME ready after S s`` for each
    that took a second or more (one trained here; benchmarks/demo.py times a first run's phases from these lines)."""
    import time

    names = list(dict.fromkeys(name for c in cells for name in cell_models(c)))
    needed: list[tuple[str, Callable[[], None]]] = []
    if "mlm-quick" in names:
        from veil.parsing.mlm import ensure_mlm

        needed.append(("mlm-quick", lambda: ensure_mlm("mlm-quick", log=log)))
    for name in ("inverter", "inverter-quick"):
        if name in names:
            from veil.training.inverter import ensure_inverter

            needed.append((name, lambda name=name: ensure_inverter(name, log=log)))
    lm_cells: dict[str, Any] = {}
    for c in cells:
        lm_cells.update({n: c for n in cell_models(c) if n.startswith("lm:") and n not in lm_cells})
    for name, c in lm_cells.items():
        from veil.bench.cells.generative_model import ensure_cell_lm

        needed.append((f"{name} ({c.defense} {c.setting_label}, {c.corpus})",
                       lambda c=c: ensure_cell_lm(c, log=log)))
    done = []
    for name, ensure in needed:
        start = time.perf_counter()
        ensure()
        seconds = round(time.perf_counter() - start, 1)
        if seconds >= 1.0:
            log(f"bench: model {name} ready after {seconds:.1f} s")
        done.append({"model": name, "seconds": seconds})
    return done


def run_bench(cells: list[Any], out: str | Path, *, workers: int = 1, ray_address: str | None = None,
              force: bool = False, progress: bool = True, log: Callable[[str], None] | None = None,
              cache_embeddings: bool = False, left_out: dict[str, list[str]] | None = None) -> BenchRun:
    """Run every cell not yet done (all with ``force``); writes ``OUT/cells/*.json`` and ``OUT/run.json``.

    Every existing cell record is checked first (:func:`finished_cells`); an empty plan is an error. Ctrl-C stops
    the run (Ray tasks cancelled, a cluster started here shut down) and leaves only finished cells.

    The encodings of data given in this process (:func:`veil.bench.data.given_names`: a user's file) are kept in
    memory for this run only, never in ``VEIL_HOME/embeddings``, unless ``cache_embeddings`` (then they are cached
    there like a built-in corpus' and reused by later runs). ``left_out`` (``--demo``: why -> the ids of planned cells
    not run) goes into ``run.json`` for the report. Texts of it longer than the encoder's token limit are
    warned about (:class:`~veil.errors.DataWarning`, how many and the limit) before any cell.
    """
    from veil._io import writable_dir
    from veil.bench.data import bench_task, given_names, given_texts
    from veil.encoders.cache import private_texts

    if workers < 1:
        raise InvalidParameterError(f"workers must be >= 1, got {workers}")
    if not cells:
        raise InvalidParameterError("the bench plan has no cells; choose corpora, defenses and attacks that apply "
                                    "to each other (`veil bench --list` shows a plan)")
    done = finished_cells(cells, out, force=force)  # every record checked before the output folder is touched
    _warn_truncated([name for name in dict.fromkeys(c.corpus for c in cells if c.id not in done)
                     if name in given_names() and bench_task(name) != "dependency-parsing"])
    ensure_models([c for c in cells if c.id not in done], log=log or print)  # once: never raced by workers
    out_dir = writable_dir(out)
    writable_dir(out_dir / "cells")
    private = [t for name in given_names() for t in given_texts(name)]
    with private_texts(private, keep=cache_embeddings):
        return run_sweep(_sweep(out_dir, cells), cells, out=out_dir, workers=workers, ray_address=ray_address,
                         force=force, progress=progress, log=log, run_json=True,
                         notes={"left_out": left_out} if left_out else None)
