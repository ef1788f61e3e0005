"""The checks ``veil redact`` makes before the model loads, in the library: the operator, scope and model, the
entity types, and the input and output files. Values that cannot go together raise
:class:`~veil.errors.OptionError` (the CLI's usage error) naming the CLI option and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from veil.errors import OptionError

__all__ = ["check_model", "check_operator", "check_entities", "check_files"]


def check_model(model: str) -> str:
    from veil.defenses.redaction import MODELS

    if model not in MODELS:
        raise OptionError(f"--model must be one of {', '.join(MODELS)}, got {model!r}")
    return model


def check_operator(operator: str, scope: str) -> None:
    """The operator, and the pseudonyms' scope that only the pseudonym operator takes."""
    from veil.defenses.redaction import OPERATORS, SCOPES

    if operator not in OPERATORS:
        raise OptionError(f"--operator must be one of {', '.join(OPERATORS)}, got {operator!r}")
    if scope not in SCOPES:
        raise OptionError(f"--scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if scope != "document" and operator != "pseudonym":
        raise OptionError(f"--scope {scope} sets where pseudonyms are consistent: it needs --operator "
                          f"pseudonym (the {operator} operator keeps no mapping); drop --scope, or pass "
                          "--operator pseudonym")


def check_entities(names: Optional[list[str]], model: str) -> Optional[list[str]]:
    """The entity types asked for (None: every supported type), each one ``model`` supports."""
    if names is None:
        return None
    from veil.defenses.redaction import supported_entities

    known = supported_entities(model)
    bad = [n for n in names if n not in known]
    if not names or bad:
        raise OptionError(f"--entities: unknown {', '.join(bad) or '(empty)'}; valid: {', '.join(known)} "
                          "(`veil redact --list-entities`)")
    return names


def check_files(file: Optional[Path], out: Optional[Path], spans: Optional[Path], *, file_format: Optional[str],
                text: str, encoding: Optional[str], force: bool) -> None:
    """The input is a readable file of texts and the outputs may be written, before any model loads."""
    from veil.defenses.redaction.files import check_output_format, read_texts
    from veil.outputs import check_distinct_outputs, check_output_file

    if file is None or out is None:
        raise OptionError("give the FILE to redact and --out (e.g. `veil redact notes.txt --out "
                          "notes.redacted.txt`)")
    if not file.is_file():
        raise OptionError(f"{file} is not a file")
    check_distinct_outputs({"--out": out, "--spans": spans}, {"FILE": file})
    check_output_format(file, out, format=file_format)
    check_output_file(out, force=force, option="--out")
    if spans is not None:
        check_output_file(spans, force=force, option="--spans")
    read_texts(file, format=file_format, text=text, encoding=encoding or "utf-8")  # bad input fails before the model
