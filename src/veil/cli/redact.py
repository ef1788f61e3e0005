"""``veil redact``: PII redaction with Presidio on this machine (offline; veil.defenses.redaction)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import EncodingOpt, ForceOpt, JsonOpt, console, echo_json, split_names, usage_errors

__all__ = ["register"]


def redact(
    file: Annotated[Optional[Path], typer.Argument(help=".txt (one text per line), .jsonl or .csv (a header row) "
                                                        "to redact.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Where to write the redacted file (the input's format; its "
                                                     "suffix must not name another).")] = None,
    operator: Annotated[str, typer.Option(help="type (<PERSON>), mask (****), hash (keyed sha256) or pseudonym "
                                               "(consistent surrogate names).")] = "type",
    entities: Annotated[Optional[str], typer.Option(help="Comma-separated Presidio entity types (default: every "
                                                         "supported type; --list-entities).")] = None,
    model: Annotated[str, typer.Option(help="spaCy pipeline behind the NER recognizer: sm or md.")] = "sm",
    scope: Annotated[str, typer.Option(help="Where pseudonyms are consistent: document (one line/row) or release "
                                            "(the whole file); --operator pseudonym only.")] = "document",
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0, help="Drop detections scoring below this "
                                                                    "(0: Presidio's default).")] = 0.0,
    text: Annotated[str, typer.Option(help="The text field (.jsonl) or column (.csv).")] = "text",
    file_format: Annotated[Optional[str], typer.Option("--format", help="txt, jsonl or csv (default: from the "
                                                                        "suffix).")] = None,
    encoding: EncodingOpt = None,
    spans: Annotated[Optional[Path], typer.Option(help="Also write the redacted spans with their original values "
                                                       "here (JSON Lines, mode 0600: keep it private).")] = None,
    list_entities: Annotated[bool, typer.Option("--list-entities", help="List the entity types and exit.")] = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Redact PII (names, e-mail addresses, phone numbers, locations, IDs, ...) with Microsoft Presidio, fully
    offline. Redaction is a heuristic: what Presidio misses is released verbatim (docs/redaction.md)."""
    from veil.defenses.redaction import PresidioRedaction, supported_entities
    from veil.defenses.redaction.checks import check_entities, check_files, check_model, check_operator
    from veil.defenses.redaction.files import redact_file

    with usage_errors():
        check_model(model)
    if list_entities:
        names = supported_entities(model)
        echo_json(names) if as_json else typer.echo("\n".join(names))
        return
    with usage_errors():
        check_operator(operator, scope)
        check_files(file, out, spans, file_format=file_format, text=text, encoding=encoding, force=force)
        names = check_entities(None if entities is None else split_names(entities, "--entities"), model)
    say = console(as_json)
    defense = PresidioRedaction(operator=operator, entities=names, model=model, threshold=threshold, scope=scope)
    report = redact_file(file, out, defense, format=file_format, text=text, encoding=encoding or "utf-8",
                         spans=spans, log=lambda m: say.print(m, highlight=False))
    if as_json:
        echo_json(report.to_dict())
        return
    per = ", ".join(f"{k} {v}" for k, v in report.per_entity.items()) or "none found"
    say.print(f"redacted {report.spans} spans in {report.texts} texts ({per})", highlight=False)
    say.print(f"wrote {report.out}" + (f" and the private spans {report.spans_file}" if spans else ""),
              highlight=False)


def register(app: typer.Typer) -> None:
    app.command("redact")(redact)
