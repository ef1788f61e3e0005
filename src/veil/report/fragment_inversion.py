"""The fragments of docs/inversion.md (see ``veil.report.fragments``): what each inverter cost to train, from the
manifest every inversion record copies (``config["inverter"]``) in ``results/inversion``."""

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
    if not seen:
        return "No inversion record yet (`veil attack invert`)."
    lines = []
    for name in sorted(seen):
        inv = seen[name]
        minutes = inv.get("minutes")
        took = f"{minutes:.1f} minutes" if isinstance(minutes, (int, float)) else "minutes not recorded"
        lines.append(f"- `{name}`: {inv.get('steps_trained'):,} steps on {inv.get('train_sentences'):,} sentences, "
                     f"{took} on {inv.get('device') or 'an unrecorded device'} (its manifest, as the inversion "
                     f"records copy it).")
    return "\n".join(lines)
