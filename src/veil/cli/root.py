"""The root ``veil`` Typer app: ``--version``, ``--debug`` and every command module, registered one way.

Each module of :mod:`veil.cli` that holds commands defines them at import and exposes ``register(app)``, which
mounts its group (``app.add_typer``) or its top-level commands (``app.command``) on the root app; this module calls
each ``register`` once, in the order ``veil --help`` lists them (top-level commands first, then groups, each in
registration order).
"""

from __future__ import annotations

from typing import Annotated

import typer

from veil import __version__
from veil.cli import (adversarial, attack, audit, bench, corpora, dpsgd, encode, federated, lm, models, models_transfer,
                      obfuscate, parse, redact, redaction, registries, report, sentdp, texthide)

__all__ = ["app", "COMMAND_MODULES"]

app = typer.Typer(help="veil: privacy-preserving NLP defenses and the attacks that measure them.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"veil {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    """veil: privacy-preserving NLP."""


#: the command modules; commands: encode, demo, report, bench, obfuscate, redact; groups: corpora, defenses, attacks,
#: texthide, attack, sentdp, audit, adversarial, parse, models, federated, redaction, dpsgd, lm
COMMAND_MODULES = (encode, report, bench, obfuscate, redact, corpora, registries, texthide, attack, sentdp, audit, adversarial,
                   parse, models, models_transfer, federated, redaction, dpsgd, lm)

for _module in COMMAND_MODULES:
    _module.register(app)
