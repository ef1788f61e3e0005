"""``veil attack ...``: every attack command, thin over the experiment runners that measure what a defense's output
leaks.

- TextHide (Huang et al. 2020), veil.experiments.texthide (retrieval, attacks): ``rss``, ``reprecon``, ``abs-rss``,
  ``mask-recovery``, ``unmix``, ``texthide-sweep``; results in ``./veil-results/retrieval/`` and
  ``./veil-results/texthide-attacks/``.
- Gradients of federated TextHide, veil.experiments.federated (table2, taps, chain): ``gradmatch-table``, ``analytic``,
  ``gradmatch``, ``chain``; results in ``./veil-results/gradients/``.
- Attribute inference (Coavoux et al. 2018), veil.experiments.adversarial.attributes: ``attribute``; results in
  ``./veil-results/attributes/``.
- Word recovery from obfuscated sentences (Hu et al. 2020), veil.experiments.obfuscation.parsing: ``word-recovery``;
  results in ``./veil-results/parsing/``.
- Membership inference on a released classifier (plain, TextHide or DP-SGD), veil.experiments.membership:
  ``membership``;
  results in ``./veil-results/membership/``.
- Embedding inversion (GEIA, Vec2Text) of released vectors, veil.bench.inversion (on the bench's data): ``invert``;
  results in ``./veil-results/inversion/``.

Results go under ``$VEIL_RESULTS`` instead when it is set, or to ``--results``; every value and output location is
checked before any work starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli import adversarial, parse
from veil.cli.common import (ForceOpt, JsonOpt, RayOpt, WorkersOpt, console, echo_json, finite, parse_floats,
                             parse_ints, parse_m, positive, split_names)
from veil.cli.obfuscate import LevelOpt, TreebankOpt, check_level, check_treebank
from veil.cli.texthide import check_mode

__all__ = ["register", "attack_app"]

attack_app = typer.Typer(help="Attacks that measure what protected representations leak.", no_args_is_help=True)


# --------------------------------------------------------------------------- TextHide: retrieval and adaptive attacks
_DEFENSES = ("all", "none", "texthide")
_DEFENSE_HELP = "all (baseline, mix-only, TextHide (256,4)), none, or texthide with --m/--k."


def _check_queries(corpus: str, queries: Optional[int], *, split: Optional[str] = None) -> None:
    """``--queries`` at most the examples queries are drawn from (without replacement), checked before any work."""
    if queries is None:
        return
    import veil.corpora as vc

    data = vc.load(corpus)
    available = len(data) if split is None else len(data.indices(split))
    if queries > available:
        where = f"{corpus}'s {split} split" if split else corpus
        raise typer.BadParameter(f"--queries {queries} is more than the {available} examples of {where} (queries "
                                 f"are drawn without replacement); use --queries {available} or fewer")


def _attack(attack: str, corpus: str, defense: str, m: str, k: int, queries: Optional[int], seed: int,
            results: Optional[Path], force: bool, as_json: bool) -> None:
    import veil.corpora as vc
    from veil.errors import UnknownNameError
    from veil.outputs import check_output_dir, default_results_dir
    from veil.experiments.texthide.retrieval import check_planned, run_retrieval, write_records

    if defense not in _DEFENSES:
        raise typer.BadParameter(f"--defense must be one of {', '.join(_DEFENSES)}, got {defense!r}")
    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    mm = parse_m(m)
    root = check_output_dir(results if results is not None else default_results_dir("retrieval"))
    _check_queries(corpus, queries, split="dev" if attack == "reprecon" else None)
    check_planned(corpus, attack, defense=defense, m=mm, k=k, queries=queries, seed=seed, root=root, force=force)
    records = run_retrieval(corpus, attack, defense=defense, m=mm, k=k, queries=queries, seed=seed)
    paths = write_records(records, root)
    if as_json:
        echo_json([rec.to_dict() for rec in records])
        return
    from rich.table import Table

    out = console()
    table = Table(title=f"{attack} on {corpus}: mean [95% CI] over {records[0].config['n_queries']} queries")
    table.add_column("metric")
    for rec in records:
        table.add_column(rec.config["setting"])
    for metric in records[0].metrics:
        table.add_row(metric, *[str(rec.metrics[metric]) if metric in rec.metrics else "-" for rec in records])
    out.print(table)
    for path in paths:
        out.print(f"wrote {path}")


@attack_app.command("rss")
def attack_rss(
    corpus: Annotated[str, typer.Option(help="Corpus whose texts form the attacker's index.")] = "rt-polarity",
    defense: Annotated[str, typer.Option(help=_DEFENSE_HELP)] = "all",
    m: Annotated[str, typer.Option("--m", help="TextHide mask pool size (with --defense texthide).")] = "256",
    k: Annotated[int, typer.Option("--k", min=1, help="TextHide k (with --defense texthide).")] = 4,
    queries: Annotated[Optional[int], typer.Option(min=1, help="Number of queries (default 1000); the whole corpus "
                                                               "is still encoded: it is the attacker's index.")]
    = None,
    seed: Annotated[int, typer.Option(min=0, help="Experiment seed (queries, mixing, random guesses; never masks).")] = 0,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/retrieval).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Similarity search: return the index text whose representation is most similar to the protected query."""
    _attack("rss", corpus, defense, m, k, positive("--queries", queries), seed, results, force, as_json)


@attack_app.command("reprecon")
def attack_reprecon(
    corpus: Annotated[str, typer.Option(help="Corpus whose texts form the attacker's index.")] = "rt-polarity",
    defense: Annotated[str, typer.Option(help=_DEFENSE_HELP)] = "all",
    m: Annotated[str, typer.Option("--m", help="TextHide mask pool size (with --defense texthide).")] = "256",
    k: Annotated[int, typer.Option("--k", min=1, help="TextHide k (with --defense texthide).")] = 4,
    queries: Annotated[Optional[int], typer.Option(min=1, help="Number of dev queries (default 500); the whole "
                                                               "corpus is still encoded: train fits the "
                                                               "reconstruction, every split is the index.")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Experiment seed (queries, mixing, MLP init; never masks).")] = 0,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/retrieval).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Reconstruction: an MLP maps protected vectors back to originals (trained on train), then RSS on dev queries."""
    _attack("reprecon", corpus, defense, m, k, positive("--queries", queries), seed, results, force, as_json)


def _adaptive(attack: str, corpus: str, defense: str, m: str, k: int, mode: str, epochs: int, index: str,
              queries: int, seed: int, public: str, results: Optional[Path], force: bool, as_json: bool) -> None:
    import veil.corpora as vc
    from veil.errors import UnknownNameError
    from veil.outputs import check_output_dir, default_results_dir
    from veil.experiments.texthide.attacks import AttackCell, existing_cell, result_path, run_cell

    if defense != "texthide":
        raise typer.BadParameter(f"--defense must be texthide for {attack} (the only defense it applies to), "
                                 f"got {defense!r}")
    for name in (corpus, public) + ((index.split(":", 1)[1],) if index.startswith("public:") else ()):
        if name not in vc.names():
            raise UnknownNameError("corpus", name, vc.names())
    cell = AttackCell(corpus=corpus, attack=attack, m=parse_m(m), k=k, mode=check_mode(mode), epochs=epochs,
                      index=index, queries=queries, seed=seed, public=public)
    root = check_output_dir(results if results is not None else default_results_dir("texthide-attacks"))
    path = result_path(cell, root)
    existing_cell(cell, root, force=force, keep=False)  # damaged, another configuration, or this one: refused
    record = run_cell(cell)
    record.write(path)
    if as_json:
        echo_json(record.to_dict())
        return
    out = console()
    for key, metric in record.metrics.items():
        if not key.startswith("random_"):
            floor = record.metrics.get(f"random_{key}")
            out.print(f"{cell.name}: {key} = {metric}" + (f"   (random: {floor})" if floor else ""), highlight=False)
    out.print(f"wrote {path}")


def _adaptive_command(attack: str, summary: str):
    def command(
        corpus: Annotated[str, typer.Option(help="Private corpus.")] = "rt-polarity",
        defense: Annotated[str, typer.Option(help="texthide (the defense these attacks target).")] = "texthide",
        m: Annotated[str, typer.Option("--m", help="Mask pool size: an integer >= 1, or inf (abs-rss: also 0).")] = "256",
        k: Annotated[int, typer.Option("--k", min=1, help="TextHide k.")] = 4,
        mode: Annotated[str, typer.Option(help="intra or inter.")] = "intra",
        epochs: Annotated[int, typer.Option(min=1, help="Encodings observed per training example (mask-recovery, "
                                                        "unmix).")] = 5 if attack != "abs-rss" else 1,
        index: Annotated[str, typer.Option(help="private (the index holds the private texts) or public:CORPUS.")]
        = "private",
        queries: Annotated[int, typer.Option(min=1, help="Queries (encodings attacked).")] = 1000,
        seed: Annotated[int, typer.Option(min=0, help="Selects queries and the attacker's choices; never the key or "
                                                      "the mixing (OS CSPRNG).")] = 0,
        public: Annotated[str, typer.Option(help="Public corpus: inter mode's public set and the attacker's "
                                                 "statistics.")] = "health-tweets",
        results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/texthide-attacks).")]
        = None,
        force: ForceOpt = False,
        as_json: JsonOpt = False,
    ) -> None:
        _adaptive(attack, corpus, defense, m, k, mode, epochs, index, queries, seed, public, results, force, as_json)

    command.__doc__ = summary
    return command


attack_app.command("abs-rss")(_adaptive_command(
    "abs-rss", "Sign-invariant search: |e~| - mu against |e| - mu over the index (masks keep magnitudes)."))
attack_app.command("mask-recovery")(_adaptive_command(
    "mask-recovery", "Recover TextHide's secret mask pool from the encodings an eavesdropper collects."))
attack_app.command("unmix")(_adaptive_command(
    "unmix", "Unmask encodings with recovered masks and solve for their k sources over the index."))


@attack_app.command("texthide-sweep")
def texthide_attacks_sweep(
    which: Annotated[str, typer.Argument(help="headline ((256,4), (256,1), mix-only on 3 corpora) or grid (m x k x "
                                              "epochs x mode on one corpus).")],
    corpus: Annotated[str, typer.Option(help="Corpus of the grid.")] = "rt-polarity",
    queries: Annotated[int, typer.Option(min=1, help="Queries per cell.")] = 1000,
    attacks: Annotated[Optional[str], typer.Option(help="Only these attacks, comma-separated.")] = None,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/texthide-attacks).")]
    = None,
    force: Annotated[bool, typer.Option("--force", help="Re-run cells whose result file exists.")] = False,
    workers: WorkersOpt = 1,
    ray: RayOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run many adaptive-attack cells; finished cells are skipped (resumable), each written when done."""
    from veil.outputs import default_results_dir
    from veil.experiments.texthide.attacks import ATTACKS, grid_cells, headline_cells, run_cells

    if which == "headline":
        cells = headline_cells(queries=queries)
    elif which == "grid":
        cells = grid_cells(corpus=corpus, queries=queries)
    else:
        raise typer.BadParameter(f"unknown sweep {which!r}; use headline or grid")
    if attacks is not None:
        wanted = split_names(attacks, "--attacks")
        bad = [a for a in wanted if a not in ATTACKS]
        if bad or not wanted:
            raise typer.BadParameter(f"--attacks: {'unknown ' + str(bad) if bad else 'no attack named'}; use some "
                                     f"of {', '.join(ATTACKS)} (comma-separated), or leave --attacks out for all")
        cells = [c for c in cells if c.attack in wanted]
    msg = console(as_json)
    paths = run_cells(cells, results if results is not None else default_results_dir("texthide-attacks"),
                      force=force, log=lambda line: msg.print(line, highlight=False), workers=workers,
                      ray_address=ray)
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


# --------------------------------------------------------------------------- gradients of federated TextHide
GradientResultsOpt = Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/gradients).")]


def _gradients_root(results: Optional[Path]) -> Path:
    from veil.outputs import check_output_dir, default_results_dir

    return check_output_dir(results if results is not None else default_results_dir("gradients"))


@attack_app.command("gradmatch-table")
def gradmatch_table(
    k: Annotated[str, typer.Option("--k", help="TextHide k values (comma-separated, >= 1).")] = "1,2,4",
    d: Annotated[str, typer.Option("--d", help="Mask dimensions d (comma-separated).")] = "4,16,64,256,1024",
    runs: Annotated[int, typer.Option(min=1, help="Independent attacks per cell (the paper: 50).")] = 50,
    seed: Annotated[int, typer.Option(min=0, help="Picks examples, head weights and dummies; never the key or the "
                                                  "mixing (OS CSPRNG).")] = 0,
    placement: Annotated[str, typer.Option(help="hidden (the paper's mimic: mask on the head's d-wide hidden layer) "
                                                "or input (veil's TextHide on the head's d-dim input).")] = "hidden",
    activation: Annotated[str, typer.Option(help="sigmoid (the DLG code the paper used) or relu (veil's head).")]
    = "sigmoid",
    max_evals: Annotated[int, typer.Option(min=1, help="Loss evaluations per attack (L-BFGS budget).")] = 600,
    baseline: Annotated[bool, typer.Option("--baseline/--no-baseline", help="Also run the no-defense row.")] = True,
    results: GradientResultsOpt = None,
    force: ForceOpt = False,
    workers: WorkersOpt = 1,
    ray: RayOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Table 2 analogue: Alg. 3 gradient matching with dummy masks, success rate over --runs attacks per (k, d)."""
    from veil.experiments.federated.table2 import run_table2, table2_cells

    if placement not in ("hidden", "input"):
        raise typer.BadParameter(f"--placement must be hidden or input, got {placement!r}")
    if activation not in ("sigmoid", "relu"):
        raise typer.BadParameter(f"--activation must be sigmoid or relu, got {activation!r}")
    cells = table2_cells(ks=parse_ints(k, "--k", minimum=1), ds=parse_ints(d, "--d", minimum=1), baseline=baseline,
                         runs=runs, seed=seed, placement=placement, activation=activation, max_evals=max_evals)
    root = _gradients_root(results)
    msg = console(as_json)
    paths = run_table2(cells, root, force=force, progress=True, log=lambda line: msg.print(line, highlight=False),
                       workers=workers, ray_address=ray)
    if as_json:
        from veil.results import ResultRecord

        echo_json({"results": [str(p) for p in paths],
                   "table": [{"k": c.k, "d": c.d, **{name: m.to_dict() for name, m in
                                                      ResultRecord.read(p).metrics.items()}}
                             for c, p in zip(cells, paths)]})
        return
    _print_table(cells, paths, msg)


def _print_table(cells, paths, msg) -> None:
    from rich.table import Table

    from veil.results import ResultRecord

    ds = sorted({c.d for c in cells})
    table = Table(title="Alg. 3 success rate [95% Wilson CI] (encoding recovered)")
    table.add_column("row")
    for d in ds:
        table.add_column(f"d={d}")
    rows: dict[int, dict[int, str]] = {}
    for cell, path in zip(cells, paths):
        rec = ResultRecord.read(path)
        s, e = rec.metrics["success"], rec.metrics["encoding_recovered"]
        rows.setdefault(cell.k, {})[cell.d] = f"{s.mean:.2f} [{s.ci_low:.2f}, {s.ci_high:.2f}] ({e.mean:.2f})"
    for k in sorted(rows):
        table.add_row("baseline" if k == 0 else f"k={k}", *[rows[k].get(d, "-") for d in ds])
    msg.print(table)


def _tap(attack: str, record: Path, results: Optional[Path], seed: int, match: bool, max_evals: int, restarts: int,
         force: bool, as_json: bool) -> None:
    from veil.attacks.gradients.tap import Tap
    from veil.experiments.federated.taps import run_tap_attack, tap_result_path
    from veil.outputs import check_distinct_outputs, refuse_existing

    Tap(record)  # a missing or malformed tap fails here, before any work
    root = _gradients_root(results)
    check_distinct_outputs({"--results": root}, {"--record": record})
    path = tap_result_path(record, attack, root, seed)
    refuse_existing(path, force)
    rec = run_tap_attack(record, attack, seed=seed, match=match, max_evals=max_evals, restarts=restarts,
                         progress=True)
    rec.write(path)
    if as_json:
        echo_json(rec.to_dict())
        return
    out = console()
    from rich.table import Table

    table = Table(title=f"{attack} on {record.name} ({rec.config['client_mode']}, batch {rec.config['batch_size']}, "
                        f"defense {rec.config['defense'].get('name')})")
    for col in ("round", "client", "rows", "recovered", "vectors (correct)", "classes leaked"):
        table.add_column(col)
    for u in rec.extra["updates"]:
        sc = u.get("scores")
        table.add_row(str(u["round"]), u["client"], str(u["rows"]), "-" if sc is None else str(sc["recovered"]),
                      f"{u['vectors']}" + ("" if sc is None else f" ({sc['correct_vectors']})"),
                      ",".join(map(str, u["classes_leaked"])))
    out.print(table)
    for key, metric in rec.metrics.items():
        out.print(f"{key} = {metric}", highlight=False)
    if not rec.config["scored"]:
        out.print(f"no ground truth next to the tap ({record.name}.truth): recovery counts only, not scored")
    out.print(f"wrote {path}")


@attack_app.command("analytic")
def attack_analytic(
    record: Annotated[Path, typer.Option(help="Tap folder of a recorded run (veil federated run --record DIR).")],
    results: GradientResultsOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the matching's starts.")] = 0,
    match: Annotated[bool, typer.Option("--match/--no-match", help="Match the rows the ratios leave (alg2).")] = True,
    max_evals: Annotated[int, typer.Option(min=1, help="Matching budget per restart.")] = 400,
    restarts: Annotated[int, typer.Option(min=1, help="Matching restarts.")] = 2,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Read the head's inputs (TextHide encodings) off every client update of a recorded run; label leakage too."""
    _tap("analytic", record, results, seed, match, max_evals, restarts, force, as_json)


@attack_app.command("gradmatch")
def attack_gradmatch(
    record: Annotated[Path, typer.Option(help="Tap folder of a recorded run (veil federated run --record DIR).")],
    results: GradientResultsOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the dummies' starts.")] = 0,
    max_evals: Annotated[int, typer.Option(min=1, help="Loss evaluations per restart.")] = 400,
    restarts: Annotated[int, typer.Option(min=1, help="Restarts (the best match is kept).")] = 2,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Gradient matching in encoding space (Zhu et al. 2019) on every client update of a recorded run."""
    _tap("gradmatch", record, results, seed, True, max_evals, restarts, force, as_json)


@attack_app.command("chain")
def attack_chain(
    record: Annotated[Path, typer.Option(help="Tap folder of a run recorded with --truth (veil federated run "
                                              "--record DIR --truth).")],
    results: GradientResultsOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="The attacker's own randomness (matching starts, mask-recovery "
                                                  "seeding).")] = 0,
    pool: Annotated[bool, typer.Option("--pool/--no-pool", help="Try to recover each client's mask pool first.")]
    = True,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """End to end: encodings off the updates, then each client's masks and the sentences mixed into them."""
    from veil.attacks.gradients.tap import Tap
    from veil.attacks.gradients.truth import truth_dir
    from veil.experiments.federated.chain import run_chain
    from veil.outputs import check_distinct_outputs, refuse_existing

    Tap(record)  # a missing or malformed tap fails here, before any work
    if not (truth_dir(record) / "run.json").exists():
        from veil.errors import ResourceMissingError

        raise ResourceMissingError(f"{truth_dir(record)}/run.json", "veil federated run --record DIR --truth",
                                   message=f"{record} has no ground truth with its run configuration next to it "
                                           f"({truth_dir(record).name}/run.json): the chain is scored against it; "
                                           "record the run with `veil federated run --record DIR --truth`")
    root = _gradients_root(results)
    check_distinct_outputs({"--results": root}, {"--record": record})
    path = root / f"chain-{record.name}-seed{seed}.json"
    refuse_existing(path, force)
    rec = run_chain(record, seed=seed, pool_recovery=pool, progress=True)
    rec.write(path)
    if as_json:
        echo_json(rec.to_dict())
        return
    out = console()
    for key, metric in rec.metrics.items():
        out.print(f"{key} = {metric}", highlight=False)
    out.print(f"masks that explained the encodings: {rec.extra['mask_source']}", highlight=False)
    out.print(f"wrote {path}")


# --------------------------------------------------------------------------- attribute inference
AttackEncoderOpt = Annotated[str, typer.Option(help="minilm (default: a width-W projection of frozen MiniLM, the "
                                                    "setting where the attack shows a leak on news-articles: "
                                                    "privacy well below the constant-predictor floor) or lstm "
                                                    "(the paper's own encoder, which on news passages shows no "
                                                    "leak: privacy at the floor; see docs/results/attributes.md).")]


@attack_app.command("attribute")
def attack_attribute(
    corpus: adversarial.CorpusOpt = "news-articles",
    defense: adversarial.DefenseOpt = "none",
    width: adversarial.WidthOpt = 64,
    seed: adversarial.SeedOpt = 0,
    encoder: AttackEncoderOpt = "minilm",
    epochs: adversarial.EpochsOpt = 16,
    max_train: adversarial.MaxTrainOpt = None,
    results: adversarial.ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """The eavesdropper: attackers trained on r(x) of a (defended) model; privacy = 1 - their score.

    Uses the record of `veil adversarial train` with the same settings when it exists (no retraining), else
    trains the model first and writes that record. The default encoder is minilm, the setting that demonstrates
    the leak (the paper's LSTM, --encoder lstm, leaves news passages at the floor; see docs/results/attributes.md).
    """
    from veil.experiments.adversarial.attributes import run_or_skip
    from veil.results import ResultRecord

    cfg = adversarial.run_config(corpus, defense, width, seed, encoder, epochs, max_train, None, "sum")
    path, _ = run_or_skip(cfg, adversarial.result_folder(results), force=force, progress=True)
    rec = ResultRecord.read(path)
    if as_json:
        echo_json({"result": str(path), "config": rec.config, "metrics": adversarial.summary(rec),
                   "attacks": rec.extra.get("attacks", {})})
        return
    adversarial.print_result(rec, path, console())


# --------------------------------------------------------------------------- word recovery (obfuscated parsing)
@attack_app.command("word-recovery")
def attack_word_recovery(
    method: Annotated[str, typer.Option(help="minilm (a head over frozen MiniLM), trained, mlm, veil-mlm (veil's own "
                                             "masked LM, zero-shot), veil-mlm-tuned (it, fine-tuned on the "
                                             "attacker's own obfuscations), keep-word or tag-frequency.")] = "trained",
    level: LevelOpt = "P3",
    treebank: TreebankOpt = "silver-sm",
    n_test: parse.NTestOpt = 2000,
    train_sentences: Annotated[int, typer.Option(min=1, help="Public sentences the attacker learns from.")] = 20000,
    minutes: Annotated[float, typer.Option(min=0.1, help="Training budget of a neural attacker (a cap for trained and "
                                                         "veil-mlm-tuned, which stop when their own dev MRR stops "
                                                         "rising).")] = 8.0,
    attack_steps: parse.AttackStepsOpt = None,
    mlm: parse.MLMOpt = "mlm",
    seed: parse.SeedOpt = 0,
    results: parse.ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Recover the original words at the obfuscated positions: MRR, prv = 100 - 100 MRR, top-1 (Hu et al.)."""
    from veil.experiments.obfuscation.parsing import ATTACKERS, ParsingSetup

    if method not in ATTACKERS:
        raise typer.BadParameter(f"--method must be one of {', '.join(ATTACKERS)}, got {method!r}")
    finite("--minutes", minutes, low=0.0)
    setup = ParsingSetup(treebank=check_treebank(treebank), n_test=n_test, attack_train=train_sentences,
                         attack_minutes=minutes, seed=seed, mlm=parse.check_mlm(mlm, [method]),
                         attack_steps=attack_steps)
    parse.run_one_cell(f"attack-{method}-{level}", setup, results, force, as_json, parsers=[],
                       levels=[check_level(level)], attackers=[method])


# --------------------------------------------------------------------------- membership inference (release kind model)
_MEMBERSHIP_DEFENSES = {"all": ("plain", "texthide", "dpsgd"), "none": ("plain",), "plain": ("plain",),
                        "texthide": ("texthide",), "dpsgd": ("dpsgd",)}


@attack_app.command("membership")
def attack_membership(
    corpus: Annotated[str, typer.Option(help="Labelled sentence corpus, e.g. rt-polarity.")] = "rt-polarity",
    defense: Annotated[str, typer.Option(help="none (plain training), texthide (a head trained on (256,4)-TextHide "
                                              "encodings), dpsgd (at each --epsilon), comma-separated, or all.")]
    = "all",
    method: Annotated[str, typer.Option(help="loss, lira (online), lira-offline, rmia (comma-separated), or "
                                             "all.")] = "all",
    epsilon: Annotated[str, typer.Option(help="DP-SGD target epsilon(s), comma-separated.")] = "1,3,8",
    shadows: Annotated[int, typer.Option(min=2, help="LiRA's shadow models.")] = 16,
    members: Annotated[int, typer.Option(min=2, help="The target's training examples (as many non-members are "
                                                     "candidates; the rest of the train split is the attacker's "
                                                     "population).")] = 2000,
    epochs: Annotated[int, typer.Option(min=1, help="Epochs of the target (and of every shadow).")] = 10,
    batch_size: Annotated[int, typer.Option(min=1, help="Batch size of the target and every shadow (DP-SGD: the "
                                                        "expected lot size); at most --members.")] = 256,
    setting: Annotated[str, typer.Option(help="head (the head on frozen MiniLM) or top-layers (MiniLM's last 2 "
                                              "layers trained too: minutes per model; use --method loss or rmia)")]
    = "head",
    optimizer: Annotated[str, typer.Option(help="adam (default) or sgd (momentum 0.9), for the target and every "
                                                "shadow; use sgd with --setting top-layers (docs/dpsgd.md).")]
    = "adam",
    lr: Annotated[float, typer.Option(help="Learning rate of the target and every shadow.")] = 1e-3,
    queries: Annotated[int, typer.Option(min=1, help="Queries per input, logits averaged (more than 1 for a target "
                                                     "that answers with fresh randomness, e.g. --defense texthide; "
                                                     "shadows are queried alike).")] = 1,
    seed: Annotated[int, typer.Option(min=0, help="Sets the game, initial weights and the attacker's choices (never "
                                                  "the target's lots or noise).")] = 0,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/membership).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Membership inference (loss threshold, LiRA, RMIA) on plain training, TextHide and DP-SGD: AUC, TPR at 1% and
    0.1% FPR."""
    import veil.corpora as vc
    from veil.errors import UnknownNameError
    from veil.defenses.dpsgd.engine import OPTIMIZERS
    from veil.experiments.membership import METHODS, run_membership
    from veil.outputs import check_output_dir, default_results_dir
    from veil.results import ResultRecord

    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    named = split_names(defense, "--defense")
    if not named or any(d not in _MEMBERSHIP_DEFENSES for d in named):
        raise typer.BadParameter(f"--defense must be one of {', '.join(_MEMBERSHIP_DEFENSES)} (comma-separated), "
                                 f"got {defense!r}")
    chosen = METHODS if method == "all" else tuple(split_names(method, "--method"))
    if not chosen or any(m not in METHODS for m in chosen):
        raise typer.BadParameter(f"--method must be one of {', '.join(METHODS)} (comma-separated) or all, got "
                                 f"{method!r}")
    eps = parse_floats(epsilon, "--epsilon", distinct=True)
    if optimizer not in OPTIMIZERS:
        raise typer.BadParameter(f"--optimizer must be adam or sgd, got {optimizer!r}")
    finite("--lr", lr, low=0.0)
    root = check_output_dir(results if results is not None else default_results_dir("membership"))
    say = console(as_json)
    defenses = tuple(dict.fromkeys(d for name in named for d in _MEMBERSHIP_DEFENSES[name]))
    if setting == "top-layers" and "all" in named:  # TextHide's target is a head on frozen embeddings only
        defenses = tuple(d for d in defenses if d != "texthide")
    paths = run_membership(root, corpus=corpus, defenses=defenses, epsilons=eps,
                           methods=chosen, shadows=shadows, members=members, batch_size=batch_size,
                           epochs=epochs, seed=seed, queries=queries, model=setting, optimizer=optimizer, lr=lr,
                           force=force,
                           log=lambda line: say.print(line, highlight=False, soft_wrap=True))
    if as_json:
        rows = []
        for p in paths:
            rec = ResultRecord.read(p)
            rows.append({"path": str(p), "defense": rec.config["defense"], "epsilon": rec.config["epsilon"],
                         "method": rec.config["method"], "metrics": {k: m.to_dict() for k, m in rec.metrics.items()}})
        echo_json(rows)


# --------------------------------------------------------------------------- embedding inversion (vectors)
@attack_app.command("invert")
def attack_invert(
    corpus: Annotated[str, typer.Option(help="A sentence corpus (every text private, e.g. rt-polarity) for --defense "
                                             "none, a document corpus (test documents private, e.g. drug-reviews) "
                                             "for deepcandidate, truncation, metric-dp and redaction.")
                      ] = "rt-polarity",
    defense: Annotated[str, typer.Option(help="none (the MiniLM vectors themselves), deepcandidate or truncation "
                                              "(one epsilon-SentDP embedding per document), texthide-inference "
                                              "(TextHide's masked vectors, unmasked by the attacker first), "
                                              "metric-dp or redaction (the released text, read as its MiniLM "
                                              "vector).")] = "none",
    epsilon: Annotated[Optional[float], typer.Option(help="Epsilon of deepcandidate / truncation (SentDP) or "
                                                          "metric-dp (per word).")] = None,
    operator: Annotated[Optional[str], typer.Option(help="Redaction operator (redaction): type, mask, hash or "
                                                         "pseudonym.")] = None,
    m: Annotated[Optional[int], typer.Option("--m", help="Secret masks in TextHide's pool (texthide-inference; "
                                                         "the paper's 256).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Private texts inverted (drawn with --seed).")] = 200,
    inverter: Annotated[str, typer.Option(help="inverter (the full model) or inverter-quick (`veil models train "
                                               "inverter [--quick]`).")] = "inverter",
    steps: Annotated[int, typer.Option(min=0, help="Correction steps by re-embedding (0: the inverter's beam "
                                                   "search, reranked by cosine).")] = 3,
    beam: Annotated[int, typer.Option(min=1, help="Beam width of the inverter's hypotheses.")] = 4,
    shortlist: Annotated[Optional[int], typer.Option(min=1, help="Re-embed only this many word edits per text and "
                                                                 "step, those the cosine's gradient ranks highest "
                                                                 "(default: every edit, the strongest and slowest; "
                                                                 "32 with --batch-size 64 is the fast setting, "
                                                                 "docs/inversion.md).")] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Texts searched together (larger: faster decoding, more "
                                                        "memory).")] = 16,
    full: Annotated[bool, typer.Option("--full", help="A document corpus' whole test split (default: the quick "
                                                      "bench slice, 200 test documents).")] = False,
    seed: Annotated[int, typer.Option(min=0, help="Draws the private texts and the attacker's own choices (never "
                                                  "a defense's key: that comes from the OS CSPRNG).")] = 0,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/inversion).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the private text back from each released vector (veil's inverter with correction, the nearest public
    sentence, a bag-of-words predictor): token F1, BLEU-4, ROUGE-L, exact match, cosine, names recovered."""
    from veil.bench.inversion import METHODS, InversionCell, run_inversion
    from veil.models.inverter import INVERTER_NAMES
    from veil.outputs import check_output_dir, default_results_dir
    from veil.results import ResultRecord

    if inverter not in INVERTER_NAMES:
        raise typer.BadParameter(f"--inverter must be one of {', '.join(INVERTER_NAMES)}, got {inverter!r}")
    if epsilon is not None:
        finite("--epsilon", epsilon, low=0.0)
    cell = InversionCell(corpus=corpus, release=defense, epsilon=epsilon, queries=limit, inverter=inverter,
                         steps=steps, beam=beam, quick=not full, seed=seed, m=m, operator=operator,
                         shortlist=shortlist, batch_size=batch_size)
    root = check_output_dir(results if results is not None else default_results_dir("inversion"))
    say = console(as_json)
    path = run_inversion(cell, root, force=force, log=lambda line: say.print(line, highlight=False, soft_wrap=True))
    rec = ResultRecord.read(path)
    if as_json:
        echo_json({"path": str(path), **rec.to_dict()})
        return
    for m in METHODS:
        key = f"{m.replace('-', '_')}_token_f1"
        met = rec.metrics[key]
        say.print(f"{m}: token F1 {met.mean:.1f} [{met.ci_low:.1f}, {met.ci_high:.1f}]", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(attack_app, name="attack")
