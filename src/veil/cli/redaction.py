"""``veil redaction detect | news-recall | formats | infill | reidentify | attributes``: what Presidio finds, and what
still leaks from the text it redacts (veil.experiments.redaction; docs/redaction.md).

Results go to ``./veil-results/redaction/`` (or ``$VEIL_RESULTS/redaction``) unless ``--results`` names another
folder; values and the output folder are checked before any work starts; a record of the same configuration is
kept (resumable), one of another configuration is refused unless ``--force``. Redacting a file is ``veil redact``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, split_names

__all__ = ["register", "redaction_app"]

redaction_app = typer.Typer(help="PII redaction (Presidio): detection quality, and the attacks on redacted text.",
                            no_args_is_help=True)

ResultsOpt = Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/redaction).")]
ModelOpt = Annotated[str, typer.Option(help="spaCy pipeline behind Presidio's NER recognizer: sm or md.")]
SeedOpt = Annotated[int, typer.Option(min=0, help="Experiment seed (data draws and the attacker's choices; never "
                                                  "the owner's key).")]


def _folder(results: Optional[Path]) -> Path:
    from veil.outputs import check_output_dir, default_results_dir

    return check_output_dir(results if results is not None else default_results_dir("redaction"))


def _model(model: str) -> str:
    if model not in ("sm", "md"):
        raise typer.BadParameter(f"--model must be sm or md, got {model!r}")
    return model


def _list(option: str, value: str, valid: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple(split_names(value, option))
    bad = [n for n in names if n not in valid]
    if not names or bad:
        raise typer.BadParameter(f"{option}: unknown {', '.join(bad) or '(empty)'}; valid: {', '.join(valid)}")
    return names


def _releases(value: str, vectors: bool) -> tuple[str, ...]:
    from veil.errors import VeilError
    from veil.experiments.redaction.releases import check_releases

    try:
        return tuple(r.name for r in check_releases(split_names(value, "--operators"),
                                                    vectors=vectors))
    except VeilError as exc:
        raise typer.BadParameter(f"--operators: {exc}") from None


def _report(paths: list[Path], as_json: bool, headline: Callable[[Any], str]) -> None:
    from veil.results import ResultRecord

    records = [ResultRecord.read(p) for p in paths]
    if as_json:
        echo_json([{"path": str(p), "experiment": r.experiment,
                    "metrics": {k: m.to_dict() for k, m in r.metrics.items()}} for p, r in zip(paths, records)])
        return
    out = console(False)
    for p, r in zip(paths, records):
        out.print(f"{r.experiment}: {headline(r)}", highlight=False)
        out.print(f"wrote {p}", highlight=False)


def _log(as_json: bool) -> Callable[[str], None]:
    say = console(as_json)
    return lambda m: say.print(m, highlight=False)


@redaction_app.command("detect")
def detect(
    model: ModelOpt = "sm",
    n_per_entity: Annotated[int, typer.Option(min=1, help="Injected values per class (and per PERSON variant).")]
    = 300,
    base: Annotated[str, typer.Option(help="The built-in corpus whose real sentences receive the values.")]
    = "rt-polarity",
    seed: SeedOpt = 0,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Detection quality against exact ground truth: recall and precision per class on the PII-injection corpus."""
    from veil.experiments.redaction.detection import run_detection

    root = _folder(results)
    path = run_detection(root, model=_model(model), n_per_entity=n_per_entity, seed=seed, base=base, force=force,
                         log=_log(as_json))
    from veil.corpora.pii_injection import ENTITY_CLASSES

    _report([path], as_json, lambda r: "recall " + ", ".join(
        f"{c} {r.metrics[f'recall_{c}'].mean:.3f}" for c in ENTITY_CLASSES if f"recall_{c}" in r.metrics))


@redaction_app.command("news-recall")
def news_recall(
    model: ModelOpt = "md",
    max_passages: Annotated[int, typer.Option(min=1, help="News passages scored (the first ones).")] = 2000,
    seed: SeedOpt = 0,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Recall of the silver PERSON mentions of news passages (spaCy sm's NER: circular for --model sm)."""
    from veil.experiments.redaction.detection import run_news_recall

    root = _folder(results)
    path = run_news_recall(root, model=_model(model), max_passages=max_passages, seed=seed, force=force,
                           log=_log(as_json))
    _report([path], as_json, lambda r: f"PERSON recall {r.metrics['recall_PERSON']}")


@redaction_app.command("formats")
def formats(
    model: ModelOpt = "sm",
    n_per_variant: Annotated[int, typer.Option(min=1, help="Injected values per class and variant (locale).")]
    = 100,
    seed: Annotated[int, typer.Option(min=0, help="Experiment seed; 1 (the default) is held out: the recognizers "
                                                  "were written on seed 0.")] = 1,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Recall of the formats veil adds to Presidio (street addresses, UK postcodes, IT/ES/PL identifiers, SSNs
    Presidio drops) on a held-out injection set, against Presidio's English defaults alone."""
    from veil.experiments.redaction.formats import FORMAT_CLASSES, run_formats

    root = _folder(results)
    path = run_formats(root, model=_model(model), n_per_variant=n_per_variant, seed=seed, force=force,
                       log=_log(as_json))
    _report([path], as_json, lambda r: "recall " + ", ".join(
        f"{c} {r.metrics[f'recall_{c}'].mean:.3f} (Presidio alone {r.metrics[f'presidio_recall_{c}'].mean:.3f})"
        for c in FORMAT_CLASSES))


@redaction_app.command("infill")
def infill(
    corpus: Annotated[str, typer.Option(help="news-articles (passages), debates-2016 or spam-assassin.")]
    = "news-articles",
    operators: Annotated[str, typer.Option(help="Comma-separated: type, mask, hash.")] = "type,mask,hash",
    model: ModelOpt = "sm",
    mlm: Annotated[str, typer.Option(help="veil's masked LM: mlm or mlm-quick (`veil models train mlm`).")] = "mlm",
    max_documents: Annotated[int, typer.Option(min=1, help="Private (test-split) documents, drawn with --seed.")]
    = 1000,
    max_public: Annotated[int, typer.Option(min=1, help="Public (train-split) texts the candidates come from.")]
    = 5000,
    seed: SeedOpt = 0,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Infilling: rank public names for every redacted PERSON span with veil's masked LM, against the
    most-frequent-name floor."""
    from veil.experiments.redaction.infilling import CORPORA, OPERATORS, run_infilling

    if corpus not in CORPORA:
        raise typer.BadParameter(f"--corpus must be one of {', '.join(CORPORA)}, got {corpus!r}")
    if mlm not in ("mlm", "mlm-quick"):
        raise typer.BadParameter(f"--mlm must be mlm or mlm-quick, got {mlm!r}")
    ops = _list("--operators", operators, OPERATORS)
    root = _folder(results)
    paths = run_infilling(root, corpus=corpus, operators=ops, model=_model(model), mlm=mlm,
                          max_documents=max_documents, max_public=max_public, seed=seed, force=force,
                          log=_log(as_json))
    _report(paths, as_json, lambda r: (f"top-1 {r.metrics['top1']}, top-10 {r.metrics['top10']} over "
                                       f"{r.metrics['top1'].n} names (floor {r.metrics['floor_top1'].mean:.3f}; "
                                       f"without the masked LM {r.metrics['top1_prior'].mean:.3f})"))


@redaction_app.command("reidentify")
def reidentify(
    corpus: Annotated[str, typer.Option(help="spam-assassin (198 senders) or hoc-speeches (209 speakers); "
                                             "health-tweets and debates-2016 have fewer than 100 candidates.")]
    = "spam-assassin",
    operators: Annotated[str, typer.Option(help="Comma-separated releases: none (the original text), type, mask, "
                                                "hash, pseudonym (Presidio), metric-dp-eps<E> (word-level metric DP), "
                                                "random-P<k> (random same-POS substitution).")]
    = "none,type,mask,hash,pseudonym",
    model: ModelOpt = "sm",
    max_candidates: Annotated[Optional[int], typer.Option(min=2, help="At most this many candidates (drawn with "
                                                                      "--seed; default: all).")] = None,
    seed: SeedOpt = 0,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Re-identification: link each redacted document to its author among the candidates, from the attacker's
    public texts of each."""
    from veil.experiments.redaction.reidentify import SOURCES, run_reidentification

    if corpus not in SOURCES:
        raise typer.BadParameter(f"--corpus must be one of {', '.join(SOURCES)}, got {corpus!r}")
    ops = _releases(operators, vectors=False)
    root = _folder(results)
    paths = run_reidentification(root, corpus=corpus, operators=ops, model=_model(model),
                                 max_candidates=max_candidates, seed=seed, force=force, log=_log(as_json))
    _report(paths, as_json, lambda r: (f"top-1 {r.metrics['top1']}, top-5 {r.metrics['top5']} among "
                                       f"{int(r.metrics['candidates'].mean)} candidates (floor "
                                       f"{r.metrics['floor'].mean:.3f})"))


@redaction_app.command("attributes")
def attributes(
    operators: Annotated[str, typer.Option(help="Comma-separated releases: none (the original text), type, mask, "
                                                "hash, pseudonym (Presidio), metric-dp-eps<E> (word-level metric DP), "
                                                "random-P<k> (random same-POS substitution), deepcandidate-eps<E> "
                                                "(SentDP vectors).")] = "none,type,mask,hash,pseudonym",
    entities: Annotated[str, typer.Option(help="PERSON (every PERSON span redacted, the issue's setting) or all "
                                               "(every type Presidio finds).")] = "PERSON",
    model: ModelOpt = "sm",
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds (encoder, attackers).")] = "0,1,2",
    max_train: Annotated[Optional[int], typer.Option(min=2, help="Use at most this many training passages.")]
    = None,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Attribute inference (Coavoux et al.'s attackers) on encodings of redacted news passages: which of the five
    people a passage is about, against the same attackers on the original text and the floor."""
    from veil.cli.common import parse_seeds
    from veil.experiments.redaction.attributes import run_redacted_attributes

    ops = _releases(operators, vectors=True)
    if entities not in ("PERSON", "all"):
        raise typer.BadParameter(f"--entities must be PERSON or all, got {entities!r}")
    root = _folder(results)
    paths = run_redacted_attributes(root, operators=ops, entities=None if entities == "all" else ("PERSON",),
                                    model=_model(model), seeds=parse_seeds(seeds), max_train=max_train, force=force,
                                    log=_log(as_json))
    _report(paths, as_json, lambda r: (f"attacker advantage over the floor {r.metrics['advantage[mlp]']}"
                                       + (f" (passages still naming their people verbatim: "
                                          f"{r.metrics['names_verbatim'].mean:.3f})" if "names_verbatim" in r.metrics
                                          else "")))


def register(app: typer.Typer) -> None:
    app.add_typer(redaction_app, name="redaction")
