"""``veil redact``: PII redaction with Presidio on this machine (offline; veil.defenses.redaction)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import EncodingOpt, ForceOpt, JsonOpt, console, echo_json, split_names

__all__ = ["register"]


def _entities(value: Optional[str], model: str) -> Optional[list[str]]:
    if value is None:
        return None
    from veil.defenses.redaction import supported_entities

    names = split_names(value, "--entities")
    known = supported_entities(model)
    bad = [n for n in names if n not in known]
    if not names or bad:
        raise typer.BadParameter(f"--entities: unknown {', '.join(bad) or '(empty)'}; valid: {', '.join(known)} "
                                 "(`veil redact --list-entities`)")
    return names


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
    from veil.defenses.redaction import MODELS, OPERATORS, SCOPES

    if model not in MODELS:
        raise typer.BadParameter(f"--model must be one of {', '.join(MODELS)}, got {model!r}")
    if list_entities:
        from veil.defenses.redaction import supported_entities

        names = supported_entities(model)
        echo_json(names) if as_json else typer.echo("\n".join(names))
        return
    if operator not in OPERATORS:
        raise typer.BadParameter(f"--operator must be one of {', '.join(OPERATORS)}, got {operator!r}")
    if scope not in SCOPES:
        raise typer.BadParameter(f"--scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if scope != "document" and operator != "pseudonym":
        raise typer.BadParameter(f"--scope {scope} sets where pseudonyms are consistent: it needs --operator "
                                 f"pseudonym (the {operator} operator keeps no mapping); drop --scope, or pass "
                                 "--operator pseudonym")
    if file is None or out is None:
        raise typer.BadParameter("give the FILE to redact and --out (e.g. `veil redact notes.txt --out "
                                 "notes.redacted.txt`)")
    if not file.is_file():
        raise typer.BadParameter(f"{file} is not a file")
    from veil.defenses.redaction.files import check_output_format, read_texts
    from veil.outputs import check_distinct_outputs, check_output_file

    check_distinct_outputs({"--out": out, "--spans": spans}, {"FILE": file})
    check_output_format(file, out, format=file_format)
    check_output_file(out, force=force, option="--out")
    if spans is not None:
        check_output_file(spans, force=force, option="--spans")
    read_texts(file, format=file_format, text=text, encoding=encoding or "utf-8")  # bad input fails before the model
    names = _entities(entities, model)

    from veil.defenses.redaction import PresidioRedaction
    from veil.defenses.redaction.files import redact_file

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
