"""``veil sentdp ...`` and ``veil audit ...``: thin commands over veil.experiments.sentdp* and audit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

sentdp_app = typer.Typer(help="SentDP / DeepCandidate (Meehan et al. 2022): sentence-level DP document embeddings.",
                         no_args_is_help=True)
audit_app = typer.Typer(help="Exact privacy audits of DP mechanisms.", no_args_is_help=True)


def _floats(text: str, what: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise typer.BadParameter(f"give at least one value for {what}")
    return values


def _console():
    from rich.console import Console

    return Console()


@sentdp_app.command("embed")
def sentdp_embed(
    source: Annotated[str, typer.Argument(help="A document corpus (its --split is embedded) or a file of texts.")],
    out: Annotated[Path, typer.Option(help="Output .npz (embeddings, n_sentences, candidate, meta).")],
    epsilon: Annotated[float, typer.Option(help="SentDP epsilon spent by EVERY document.")] = 10.0,
    n_projections: Annotated[int, typer.Option(help="Random projections p of the depth approximation.")] = 50,
    depth: Annotated[str, typer.Option(help="tukey-min (default) or appendix.")] = "tukey-min",
    public: Annotated[Optional[str], typer.Option(help="Public document corpus for the candidates and recoder "
                                                       "(default: SOURCE's own train/dev split).")] = None,
    split: Annotated[str, typer.Option(help="Split of a built-in SOURCE to embed.")] = "test",
    text: Annotated[str, typer.Option(help="Text column (files only).")] = "text",
) -> None:
    """Release epsilon-SentDP embeddings of private documents (each release spends epsilon)."""
    from veil.experiments.sentdp_embed import EmbedJob, run_embed

    if public is None and Path(source).suffix:
        raise typer.BadParameter("a file needs --public CORPUS (a public document corpus, e.g. news-articles)")
    result = run_embed(EmbedJob(source=source, out=out, epsilon=epsilon, n_projections=n_projections, depth=depth,
                                public=public, split=split, text=text))
    typer.echo(f"wrote {result['documents']} x {result['dim']} epsilon={result['epsilon']:g}-SentDP embeddings "
               f"(m={result['m']} public candidates) to {result['out']} in {result['seconds']:.1f} s")


@sentdp_app.command("eval")
def sentdp_eval(
    corpus: Annotated[str, typer.Argument(help="Labelled document corpus, e.g. news-articles or spam-assassin.")],
    epsilons: Annotated[str, typer.Option(help="Comma-separated epsilons.")] = "1,3,6,10,15,23,30",
    methods: Annotated[str, typer.Option(help="Comma-separated: deepcandidate, truncation, metric-dp.")]
    = "deepcandidate,truncation,metric-dp",
    trials: Annotated[int, typer.Option(help="Trials of each private mechanism.")] = 5,
    mdp_test_docs: Annotated[int, typer.Option(help="Test documents for word-level metric DP (re-encoded).")] = 150,
    mdp_trials: Annotated[int, typer.Option(help="Trials for word-level metric DP.")] = 3,
    results: Annotated[Path, typer.Option(help="Result folder.")] = Path("results/sentdp"),
) -> None:
    """Fig. 4 on one corpus: macro-F1 against epsilon and sentence count; one JSON per (method, epsilon)."""
    from veil.experiments.sentdp import SentDPEval, run_sentdp_eval

    cfg = SentDPEval(corpus=corpus, epsilons=_floats(epsilons, "--epsilons"),
                     methods=tuple(m.strip() for m in methods.split(",") if m.strip()), trials=trials,
                     mdp_test_docs=mdp_test_docs, mdp_trials=mdp_trials)
    console = _console()
    run_sentdp_eval(cfg, results_dir=results, log=lambda line: console.print(line, highlight=False))


@audit_app.command("sentdp")
def audit_sentdp(
    corpus: Annotated[str, typer.Argument(help="Document corpus whose test documents are audited.")],
    epsilons: Annotated[str, typer.Option(help="Comma-separated epsilons.")] = "1,3,10,30",
    documents: Annotated[Optional[int], typer.Option(help="Test documents to audit (default: all).")] = None,
    neighbours: Annotated[int, typer.Option(help="Neighbours per document (random and adversarial).")] = 35,
    n_projections: Annotated[int, typer.Option(help="Projections p (fixed per document).")] = 50,
    depth: Annotated[str, typer.Option(help="tukey-min or appendix.")] = "tukey-min",
    results: Annotated[Path, typer.Option(help="Result folder.")] = Path("results/sentdp"),
) -> None:
    """Exact check that replacing one sentence never moves log P(output) by more than epsilon."""
    from veil.experiments.audit import run_sentdp_audit

    record = run_sentdp_audit(corpus, epsilons=_floats(epsilons, "--epsilons"), n_documents=documents,
                              neighbours_per_document=neighbours, n_projections=n_projections, depth=depth,
                              results_dir=results)
    worst = record.metrics["max_abs_log_ratio"].mean
    passed = all(record.metrics[f"max_abs_log_ratio_eps{e:g}"].mean <= e + 1e-9
                 for e in _floats(epsilons, "--epsilons") if f"max_abs_log_ratio_eps{e:g}" in record.metrics)
    typer.echo(f"{corpus}: {int(record.metrics['pairs'].mean)} neighbour pairs, largest |log ratio| {worst:.6g}; "
               f"{'PASS' if passed else 'FAIL'}")
    if not passed:
        raise typer.Exit(1)
