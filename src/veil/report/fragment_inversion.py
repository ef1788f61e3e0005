"""The fragments of docs/inversion.md (see ``veil.report.fragments``): what each inverter cost to train, from the
manifest every inversion record copies (``config["inverter"]``) in ``results/inversion``, and what the full one
would cost on the CPU, from the newest bounded run of ``benchmarks/inverter_training.py`` in RESULTS.md."""

from __future__ import annotations

from pathlib import Path

from veil.report.fragments import register_fragment

__all__ = ["inversion_training_cost"]


@register_fragment("inversion-training-cost")
def inversion_training_cost(results: Path, bench: Path) -> str:
    """One line per inverter the records used (the newest record's copy of its manifest): steps, training
    sentences, minutes and the device that trained it."""
    from veil.report.fragment_texts import _records

    seen: dict[str, dict] = {}
    for rec in sorted(_records(results, "inversion"), key=lambda r: r.created):
        inv = rec.config.get("inverter") or {}
        if inv.get("name"):
            seen[inv["name"]] = inv
    lines = [] if seen else ["No inversion record yet (`veil attack invert`)."]
    for name in sorted(seen):
        inv = seen[name]
        minutes = inv.get("minutes")
        took = f"{minutes:.1f} minutes" if isinstance(minutes, (int, float)) else "minutes not recorded"
        lines.append(f"- `{name}`: {inv.get('steps_trained'):,} steps on {inv.get('train_sentences'):,} sentences, "
                     f"{took} on {inv.get('device') or 'an unrecorded device'} (its manifest, as the inversion "
                     f"records copy it).")
    return "\n".join(lines + [_cpu_cost(bench)])


def _cpu_cost(bench: Path) -> str:
    """The full inverter's extrapolated cost on the CPU, or that it has not been measured."""
    import re

    from veil.errors import DataFormatError
    from veil.report.fragment_texts import _commit, _section

    try:
        head, rows, lines = _section(bench, "Inverter training cost on this CPU")
    except DataFormatError:
        return ("- On 2 CPU cores: not measured yet (`python benchmarks/inverter_training.py` times a bounded run "
                "of each model and extrapolates).")
    full = next(r for r in rows[1:] if r[0] == "`inverter`")
    machine = next((ln for ln in lines if ln.startswith("- machine:")), "")
    load = re.search(r"load average ([\d.]+)", machine)
    cores = re.search(r"(\d+) CPUs", machine)
    hours = float(full[7].replace(",", "")) / 60
    return (f"- `inverter` on {cores.group(1) if cores else '?'} CPU cores: {full[4]} s per step of {full[2]} "
            f"sentences, so its {full[6]} steps would take about {hours:.0f} hours: an extrapolation from "
            f"{full[3]} steps of a bounded run, not a run (`benchmarks/inverter_training.py`, commit "
            f"{_commit(lines)}, 1-min load {load.group(1) if load else '?'} after it).")
