"""The redaction page's held-out recall per entity type (``formats-*`` records of ``veil redaction formats``): veil's
recognizer set beside Presidio's English defaults alone, on values of a draw the recognizers were not written on."""

from __future__ import annotations

from veil.report.markdown import percent
from veil.results import ResultRecord

__all__ = ["formats_section", "formats_summary"]


def _classes(r: ResultRecord) -> list[str]:
    return list(r.config.get("classes") or {})


def formats_section(recs: list[ResultRecord]) -> list[str]:
    """One table per record: recall (the whole value redacted) per entity type and variant, veil against Presidio,
    and the rate at which each added type fires on base sentences with nothing injected."""
    lines = ["## Recall per entity type on a held-out draw", "",
             "Values of each type injected into real sentences (Faker, per locale), on a seed the recognizers were not "
             "written on (each record says which); recall: every letter and digit of the value redacted, Wilson "
             "95%. veil's recognizer set beside Presidio's English defaults alone on the same texts; base rate: "
             "how often a type fires on the base sentences with nothing injected.", ""]
    for r in sorted(recs, key=lambda r: (r.config["model"] != "sm", r.experiment)):
        m = r.metrics
        lines += [f"### spaCy {r.config['model']}, seed {r.config['seed']} ({r.config.get('held_out', '')})", "",
                  "| type | variant | values | veil | Presidio alone | base rate |", "|---|---|---:|---|---|---:|"]
        for cls, variants in (r.config.get("classes") or {}).items():
            base = m.get(f"base_rate_{cls}")
            lines.append(f"| {cls} | all | {m[f'recall_{cls}'].n} | {percent(m[f'recall_{cls}'])} | "
                         f"{percent(m.get(f'presidio_recall_{cls}'))} | "
                         f"{'–' if base is None else f'{100 * base.mean:.1f}% of {base.n}'} |")
            for v in variants if len(variants) > 1 else []:
                key = f"recall_{cls}_{v}"
                if key in m:
                    lines.append(f"| {cls} | {v} | {m[key].n} | {percent(m[key])} | "
                                 f"{percent(m.get('presidio_' + key))} | |")
        lines.append("")
    return lines


def formats_summary(recs: list[ResultRecord]) -> str | None:
    """One line for the docs: held-out recall of veil's set against Presidio's defaults, per type and model."""
    if not recs:
        return None
    parts = []
    for r in sorted(recs, key=lambda r: (r.config["model"] != "sm", r.experiment)):
        m = r.metrics
        parts.append(f"{r.config['model']} (seed {r.config['seed']}): " + "; ".join(
            f"{cls} {percent(m[f'recall_{cls}'], unit='%')} (Presidio's defaults "
            f"{percent(m.get(f'presidio_recall_{cls}'), False, '%')})" for cls in _classes(r) if f"recall_{cls}" in m))
    return ("- **Held-out recall per type** (`veil redaction formats`; whole value redacted, values of a draw the "
            "recognizers were not written on): " + " | ".join(parts) + ".")
