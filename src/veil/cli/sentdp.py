"""``veil sentdp embed | eval``: thin commands over veil.experiments.sentdp.embed and veil.experiments.sentdp.eval."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import (DropEmptyOpt, EncodingOpt, ForceOpt, FormatOpt, JsonOpt, LabelOpt, TextOpt, console,
                             echo_json, file_options, finite, parse_floats, split_names)

__all__ = ["register", "sentdp_app", "check_depth"]

sentdp_app = typer.Typer(help="SentDP / DeepCandidate (Meehan et al. 2022): sentence-level DP document embeddings.",
                         no_args_is_help=True)


_DEPTHS = ("tukey-min", "appendix")
_SPLITS = ("train", "dev", "test")


def check_depth(depth: str) -> str:
    if depth not in _DEPTHS:
        raise typer.BadParameter(f"--depth must be tukey-min or appendix, got {depth!r}")
    return depth


@sentdp_app.command("embed")
def sentdp_embed(
    source: Annotated[str, typer.Argument(help="A document corpus (its --split is embedded) or a file of texts.")],
    out: Annotated[Path, typer.Option(help="Output .npz (embeddings, n_sentences, candidate, meta).")],
    epsilon: Annotated[float, typer.Option(help="SentDP epsilon spent by EVERY document (finite, > 0; above 50 "
                                                "warns).")] = 10.0,
    n_projections: Annotated[int, typer.Option(min=1, help="Random projections p of the depth approximation.")] = 50,
    depth: Annotated[str, typer.Option(help="tukey-min (default) or appendix.")] = "tukey-min",
    public: Annotated[Optional[str], typer.Option(help="Public document corpus for the candidates and recoder "
                                                       "(default: SOURCE's own train/dev split).")] = None,
    split: Annotated[str, typer.Option(help="Split of a built-in SOURCE to embed.")] = "test",
    text: TextOpt = "text",
    label: LabelOpt = None,
    encoding: EncodingOpt = None,
    format_: FormatOpt = None,
    drop_empty: DropEmptyOpt = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Release epsilon-SentDP embeddings of private documents (each release spends epsilon)."""
    import veil.corpora as vc
    from veil.validation import check_epsilon
    from veil.outputs import check_output_file
    from veil.experiments.sentdp.embed import EmbedJob, run_embed

    check_epsilon(finite("--epsilon", epsilon, low=0.0))  # warns above the meaningful range, before any work
    if split not in _SPLITS:
        raise typer.BadParameter(f"--split must be one of {', '.join(_SPLITS)}, got {split!r}")
    opts = file_options(source, text=text, label=label, encoding=encoding, format=format_, drop_empty=drop_empty)
    if source not in vc.names() and public is None:
        raise typer.BadParameter("a file needs --public CORPUS (a public document corpus, e.g. news-articles)")
    if public is not None and public not in vc.names():
        from veil.errors import UnknownNameError

        raise UnknownNameError("corpus", public, vc.names())
    check_output_file(out, force=force, suffixes=(".npz",))
    result = run_embed(EmbedJob(source=source, out=out, epsilon=epsilon, n_projections=n_projections,
                                depth=check_depth(depth), public=public, split=split, text=text,
                                file_options=opts))
    if as_json:
        echo_json(result)
        return
    typer.echo(f"wrote {result['documents']} x {result['dim']} epsilon={result['epsilon']:g}-SentDP embeddings "
               f"(m={result['m']} public candidates) to {result['out']} in {result['seconds']:.1f} s")


@sentdp_app.command("eval")
def sentdp_eval(
    corpus: Annotated[str, typer.Argument(help="Labelled document corpus, e.g. news-articles or spam-assassin.")],
    epsilons: Annotated[str, typer.Option(help="Comma-separated epsilons.")] = "1,3,6,10,15,23,30",
    methods: Annotated[str, typer.Option(help="Comma-separated: deepcandidate, truncation, metric-dp.")]
    = "deepcandidate,truncation,metric-dp",
    trials: Annotated[int, typer.Option(min=1, help="Trials of each private mechanism (the same for every method, "
                                                    "on the whole test split).")] = 5,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/sentdp).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Fig. 4 on one corpus: macro-F1 against epsilon and sentence count; one JSON per (method, epsilon)."""
    import warnings

    import veil.corpora as vc
    from veil.validation import check_epsilon
    from veil.errors import UnknownNameError
    from veil.experiments.sentdp.eval import SentDPEval, run_sentdp_eval

    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    eps = parse_floats(epsilons, "--epsilons")
    for e in eps:
        check_epsilon(e)
    cfg = SentDPEval(corpus=corpus, epsilons=eps, methods=tuple(split_names(methods, "--methods")),
                     trials=trials)
    msg = console(as_json)
    with warnings.catch_warnings():  # warned once above; the mechanisms would repeat it per trial
        warnings.filterwarnings("ignore", message=r"epsilon=.* is above", category=Warning)
        records = run_sentdp_eval(cfg, results_dir=results, force=force,
                                  log=lambda line: msg.print(line, highlight=False, soft_wrap=True))
    if as_json:
        echo_json([rec.to_dict() for rec in records])


def register(app: typer.Typer) -> None:
    app.add_typer(sentdp_app, name="sentdp")
