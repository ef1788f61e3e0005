"""``veil audit sentdp | empirical | dpsgd``: thin commands over veil.experiments.sentdp.audit (the exact privacy
audit), veil.experiments.sentdp.empirical (the empirical lower bounds) and veil.experiments.dpsgd.audit (the one-run
audit of DP-SGD)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, finite, parse_floats, parse_seeds, split_names
from veil.cli.sentdp import check_depth

__all__ = ["register", "audit_app"]

audit_app = typer.Typer(help="Privacy audits of DP mechanisms: exact (sentdp), empirical lower bounds (empirical) and "
                             "the one-run audit of DP-SGD (dpsgd).", no_args_is_help=True)


@audit_app.command("sentdp")
def audit_sentdp(
    corpus: Annotated[str, typer.Argument(help="Document corpus whose test documents are audited.")],
    epsilons: Annotated[str, typer.Option(help="Comma-separated epsilons.")] = "1,3,10,30",
    documents: Annotated[Optional[int], typer.Option(min=0, help="Test documents audited, a seeded sample (default "
                                                                 "20; with --full all of them). 0: all.")] = None,
    fit_documents: Annotated[Optional[int], typer.Option(min=0, help="Fit the pipeline (recoder H, candidates) on a "
                                                                     "seeded sample of N train and N/4 dev "
                                                                     "documents, default 200: only their sentences "
                                                                     "and the audited documents' are encoded. 0: "
                                                                     "the whole train/dev split (for a registered "
                                                                     "corpus, the cached pipeline of `veil sentdp "
                                                                     "embed`).")] = None,
    full: Annotated[bool, typer.Option("--full", help="The paper's run: every test document, the pipeline fitted on "
                                                      "the whole corpus (--documents 0 --fit-documents 0; the whole "
                                                      "corpus is encoded: about an hour for spam-assassin on 2 cores "
                                                      "on a cold embedding cache); options given explicitly still "
                                                      "win.")] = False,
    neighbours: Annotated[int, typer.Option(min=1, help="Neighbours per document (random and adversarial).")] = 35,
    n_projections: Annotated[int, typer.Option(min=1, help="Projections p (fixed per document).")] = 50,
    depth: Annotated[str, typer.Option(help="tukey-min or appendix.")] = "tukey-min",
    recoder: Annotated[bool, typer.Option("--recoder/--no-recoder", help="Audit the pipeline with its recoder H "
                                          "(default) or the ablation without it.")] = True,
    control: Annotated[Optional[str], typer.Option(help="Audit a deliberately broken mechanism instead "
                                                        "(doubled-sensitivity, doubled-epsilon): it must FAIL; "
                                                        "exit 1 if it passes.")] = None,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/sentdp).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Exact check that replacing one sentence never moves log P(output) by more than epsilon (exit 1 if it does).

    By default a quick run: 20 test documents, the pipeline fitted on a seeded sample of 200 train and 50 dev
    documents (a few minutes on a cold embedding cache); --full audits every test document with the pipeline fitted
    on the whole corpus (the paper's run). The number of sentences to encode and an estimate come first.
    """
    import contextlib
    import sys

    import veil.corpora as vc
    from veil.errors import UnknownNameError
    from veil.experiments.sentdp.audit import audit_scale, run_sentdp_audit
    from veil.outputs import default_results_dir

    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    eps = parse_floats(epsilons, "--epsilons")
    scale = audit_scale(full=full, n_documents=documents, fit_documents=fit_documents)
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        record = run_sentdp_audit(corpus, epsilons=eps, **scale,
                                  neighbours_per_document=neighbours, n_projections=n_projections,
                                  depth=check_depth(depth), force=force, recoder=recoder, control=control,
                                  results_dir=results if results is not None else default_results_dir("sentdp"))
    worst = record.metrics["max_abs_log_ratio"].mean
    passed = record.metrics["passed"].mean == 1.0
    if as_json:
        echo_json(record.to_dict())
    elif control is None:
        typer.echo(f"{corpus}: {int(record.metrics['pairs'].mean)} neighbour pairs, largest |log ratio| {worst:.6g}; "
                   f"{'PASS' if passed else 'FAIL'}")
    else:
        verdict = "caught (FAIL, as it must)" if not passed else "NOT CAUGHT (the audit passed a broken mechanism)"
        typer.echo(f"{corpus}: negative control {control}: largest |log ratio| {worst:.6g}; {verdict}")
    if passed == (control is not None):
        raise typer.Exit(1)


@audit_app.command("empirical")
def audit_empirical(
    corpus: Annotated[str, typer.Option(help="Document corpus (its test documents are audited).")],
    mechanisms: Annotated[str, typer.Option(help="Comma-separated: deepcandidate, truncation, metric-dp.")]
    = "deepcandidate,truncation,metric-dp",
    epsilons: Annotated[str, typer.Option(help="Comma-separated epsilons.")] = "1,3,10",
    trials: Annotated[Optional[int], typer.Option(min=20, help="Scoring runs per input (DeepCandidate, truncation; "
                                                               "default 2000, with --full 20000).")] = None,
    selection_trials: Annotated[Optional[int], typer.Option(min=20, help="Runs per input of each candidate pair "
                                                                         "to choose the test (default: --trials).")]
    = None,
    mdp_trials: Annotated[Optional[int], typer.Option(min=20, help="Scoring and selection runs per input for "
                                                                   "metric DP (each encodes a sentence; default "
                                                                   "200, with --full 2000).")] = None,
    pairs: Annotated[int, typer.Option(min=1, help="Candidate pairs kept after screening.")] = 3,
    documents: Annotated[int, typer.Option(min=1, help="Test documents offering neighbours.")] = 8,
    neighbours: Annotated[int, typer.Option(min=1, help="Neighbours screened per document.")] = 8,
    confidence: Annotated[float, typer.Option(help="Confidence of each lower bound (joint over its two "
                                                   "Clopper-Pearson limits).")] = 0.95,
    n_projections: Annotated[int, typer.Option(min=1, help="DeepCandidate's projections p.")] = 50,
    max_documents: Annotated[Optional[int], typer.Option(min=0, help="A seeded subsample of N documents (>= 2 "
                                                                     "sentences) per split, default 60: only their "
                                                                     "sentences are encoded (about 3N documents'), "
                                                                     "and DeepCandidate's candidates and recoder, "
                                                                     "truncation's box and metric DP's vocabulary "
                                                                     "are fitted on its train/dev part. 0: the "
                                                                     "whole corpus.")] = None,
    full: Annotated[bool, typer.Option("--full", help="The whole corpus and the paper's run counts (--max-documents "
                                                      "0 --trials 20000 --mdp-trials 2000; hours on a cold "
                                                      "embedding cache); options given explicitly still win.")]
    = False,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the public choices (documents, projections, "
                                                  "neighbours); the mechanisms use the OS CSPRNG.")] = 0,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/sentdp).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Empirical epsilon lower bounds (distinguishing game, Clopper-Pearson); exit 1 if one exceeds the formal epsilon.

    By default a quick run: a seeded subsample of 60 documents per split, --trials 2000, --mdp-trials 200
    (minutes on a cold embedding cache); --full runs the whole corpus at the paper's run counts. One record per
    (mechanism, epsilon, neighbour kind); existing records are kept (resumable).
    """
    import veil.corpora as vc
    from veil.errors import UnknownNameError
    from veil.experiments.sentdp.empirical import empirical_config, run_empirical_audit

    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    cfg = empirical_config(full=full, corpus=corpus,
                           mechanisms=tuple(split_names(mechanisms, "--mechanisms")),
                           epsilons=parse_floats(epsilons, "--epsilons"), trials=trials,
                           selection_trials=selection_trials, mdp_trials=mdp_trials, pairs=pairs,
                           documents=documents, neighbours_per_document=neighbours,
                           confidence=finite("--confidence", confidence, low=0.0), n_projections=n_projections,
                           max_documents=max_documents, seed=seed)
    msg = console(as_json)
    records = run_empirical_audit(cfg, results_dir=results, force=force,
                                  log=lambda line: msg.print(line, highlight=False, soft_wrap=True))
    if as_json:
        echo_json([rec.to_dict() for rec in records])
    violations = [rec.experiment for rec in records if rec.metrics["violation"].mean > 0]
    if violations:
        msg.print(f"lower bound above the formal epsilon: {', '.join(violations)}", highlight=False)
        raise typer.Exit(1)


@audit_app.command("dpsgd")
def audit_dpsgd(
    corpus: Annotated[str, typer.Option(help="Labelled corpus whose train split holds the real examples.")]
    = "rt-polarity",
    epsilons: Annotated[str, typer.Option("--epsilons", "--epsilon", help="Comma-separated claimed epsilons.")]
    = "1,2,4",
    settings: Annotated[str, typer.Option(help="Comma-separated: one-step (the whole set in one lot, one step) "
                                               "and/or recipe (10 epochs, lots of 256).")] = "one-step,recipe",
    canaries: Annotated[int, typer.Option(min=20, help="Canaries m, each included with probability 1/2.")] = 10000,
    max_train: Annotated[int, typer.Option(min=2, help="Real training examples (an evenly spaced subset).")] = 2000,
    control: Annotated[Optional[str], typer.Option(help="Audit a deliberately broken DP-SGD instead (half-noise, "
                                                        "also halved-noise; no-clip, also no-clipping): it must FAIL; "
                                                        "exit 1 if it passes.")] = None,
    clip: Annotated[float, typer.Option(help="Clip bound C.")] = 1.0,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds of the initial weights (one audit each).")] = "0",
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/dpsgd-audit).")]
    = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """One-run audit of DP-SGD (Steinke et al. 2023): canaries in one training run; exit 1 if a bound or a check fails.

    White-box (every step's noisy gradients) and black-box (the released model's outputs) lower bounds on epsilon
    at 95% confidence, and checks of the noise and the clipping on the transcript. About a minute per audit with
    the defaults; existing records are kept (resumable).
    """
    import veil.corpora as vc
    from veil.errors import UnknownNameError
    from veil.experiments.dpsgd.audit import CONTROLS, headline, run_audit
    from veil.outputs import default_results_dir
    from veil.results import ResultRecord

    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    control = {"halved-noise": "half-noise", "no-clipping": "no-clip"}.get(control or "", control)
    if control is not None and control not in CONTROLS:
        raise UnknownNameError("control", control, sorted(CONTROLS))
    seed_list = list(parse_seeds(seeds))
    msg = console(as_json)
    paths = run_audit(results if results is not None else default_results_dir("dpsgd-audit"), corpus=corpus,
                      epsilons=parse_floats(epsilons, "--epsilons"),
                      settings=split_names(settings, "--settings"), canaries=canaries,
                      max_train=max_train, control=control, clip=finite("--clip", clip, low=0.0), seeds=seed_list,
                      force=force, log=lambda line: msg.print(line, highlight=False, soft_wrap=True))
    records = [ResultRecord.read(p) for p in paths]
    if as_json:
        echo_json([rec.to_dict() for rec in records])
    else:
        for rec in records:
            msg.print(headline(rec), highlight=False, soft_wrap=True)
    passed = [rec.metrics["passed"].mean == 1.0 for rec in records]
    if control is None and not all(passed):
        msg.print("the audit rejected DP-SGD's claim in at least one run (see FAIL above)", highlight=False)
        raise typer.Exit(1)
    if control is not None:
        caught = sum(not p for p in passed)
        msg.print(f"negative control {control}: caught in {caught} of {len(passed)} audits"
                  + ("" if caught == len(passed) else " (NOT CAUGHT in the others: the audit passed a broken "
                     "mechanism)"), highlight=False)
        if caught < len(passed):
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")
