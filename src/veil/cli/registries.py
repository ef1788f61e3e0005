"""``veil defenses list`` and ``veil attacks list``: the two registries, with the release kind each defense lets out
and each attack observes (ARCHITECTURE.md: they meet there and nowhere else)."""

from __future__ import annotations

import typer

from veil.cli.common import JsonOpt, console, echo_json

__all__ = ["register", "defenses_app", "attacks_app"]

defenses_app = typer.Typer(help="The registered defenses: what each releases and guarantees.", no_args_is_help=True)
attacks_app = typer.Typer(help="The registered attacks: what each observes and needs.", no_args_is_help=True)


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.table import Table

    table = Table(title=title)
    for i, col in enumerate(columns):  # names and kinds are what users type: never wrapped
        table.add_column(col, no_wrap=i < 2, overflow="fold")
    for r in rows:
        table.add_row(*r)
    console().print(table)


@defenses_app.command("list")
def defenses_list(as_json: JsonOpt = False) -> None:
    """Every defense: name, the release kind it lets out, its verb, tasks, guarantee and citation. Negative
    controls (deliberately broken mechanisms the audits must catch) are listed last and marked."""
    from veil.defenses.base import defense_table

    rows = sorted(defense_table(), key=lambda r: (r["control"], r["releases"], r["name"]))
    if as_json:
        echo_json(rows)
        return
    _table("veil defenses (--json adds the guarantee in words, the verb and the citation)",
           ["name", "releases", "tasks", "guarantee"],
           [[r["name"], r["releases"], ", ".join(r["tasks"]), r["guarantee_kind"]] for r in rows if not r["control"]])
    controls = [r["name"] for r in rows if r["control"]]
    if controls:
        console().print(f"negative controls (broken on purpose for the audits to catch; never benchmarked): "
                        f"{', '.join(controls)}", highlight=False, soft_wrap=True)


@attacks_app.command("list")
def attacks_list(as_json: JsonOpt = False) -> None:
    """Every attack: name, the release kind it observes, its threat model and citation."""
    from veil.attacks.base import attack_table

    rows = sorted(attack_table(), key=lambda r: (r["observes"], r["name"]))
    if as_json:
        echo_json(rows)
        return
    _table("veil attacks (--json adds what each needs and the citation)", ["name", "observes", "sees"],
           [[r["name"] + (" (floor)" if r["floor"] else ""), r["observes"], r["threat"]["observes"]] for r in rows])


def register(app: typer.Typer) -> None:
    app.add_typer(defenses_app, name="defenses")
    app.add_typer(attacks_app, name="attacks")
