"""``veil models export NAME DIR`` and ``veil models import DIR``: a cached model as a portable folder (float16
parts of at most 15 MB and a checked manifest, :mod:`veil.models.transfer`), and back into VEIL_HOME."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from veil.cli.common import JsonOpt, console, echo_json
from veil.cli.models import models_app

__all__ = ["register"]


@models_app.command("export")
def export_command(
    name: Annotated[str, typer.Argument(help="A cached model (`veil models list`): mlm, mlm-quick, inverter, "
                                             "inverter-quick, a parser (biaffine) or a neural obfuscator.")],
    out: Annotated[Path, typer.Argument(help="A new (or empty) folder to write the export to.")],
    exact: Annotated[bool, typer.Option("--exact", help="float32 parts, bit for bit (twice the size of the "
                                                        "default float16).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an earlier export in OUT.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a cached model to a folder another machine can import (`veil models import`)."""
    from veil.models.transfer import check_export_target, export_model, kind_of

    kind_of(name)  # an unknown name fails before any work, listing the cached models
    check_export_target(out, force=force)
    manifest = export_model(name, out, exact=exact, force=force)
    size = sum(p["bytes"] for p in manifest["parts"])
    if as_json:
        echo_json({"folder": str(out), **{k: v for k, v in manifest.items() if k != "model"}})
        return
    console().print(f"wrote {out}: {manifest['kind']} {name}, {len(manifest['parts'])} {manifest['dtype']} parts "
                    f"({size / 1e6:.1f} MB) and manifest.json", highlight=False)


@models_app.command("import")
def import_command(
    folder: Annotated[Path, typer.Argument(help="A folder `veil models export` wrote.")],
    force: Annotated[bool, typer.Option("--force", help="Replace the cached model of the same name.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Install an exported model into VEIL_HOME, after checking every part, the kind, the name and the base encoder
    (nothing is installed when a check fails)."""
    from veil.models.transfer import import_model

    path, manifest = import_model(folder, force=force)
    if as_json:
        echo_json({"installed": str(path), "kind": manifest["kind"], "name": manifest["name"],
                   "dtype": manifest["dtype"], "exported": manifest.get("exported")})
        return
    console().print(f"installed {manifest['kind']} {manifest['name']} from {folder} ({manifest['dtype']} parts); "
                    f"wrote {path}", highlight=False)


def register(app: typer.Typer) -> None:
    """The commands hang on ``veil models`` (registered by :mod:`veil.cli.models`)."""
