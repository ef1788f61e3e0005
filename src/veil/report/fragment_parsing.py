"""The fragments of docs/parsing.md (see ``veil.report.fragments``): the biaffine parser's test score, the neural
obfuscator against random substitution per learning attacker (the direction each interval supports, and whether
the two sides' attackers trained alike), and the strongest attacker per level, all from ``results/parsing``."""

from __future__ import annotations

from pathlib import Path

from veil.report.fragments import register_fragment
from veil.results import ResultRecord

__all__ = ["parsing_biaffine_test", "parsing_attackers", "parsing_strongest"]


def _records(results: Path) -> list[ResultRecord]:
    from veil.report.fragment_texts import _records as records

    return records(results, "parsing")


@register_fragment("parsing-biaffine-test")
def parsing_biaffine_test(results: Path, bench: Path) -> str:
    r = next(r for r in _records(results) if r.experiment == "eval-biaffine-none")
    m = r.metrics
    f = lambda k: f"{m[k].mean:.1f} [{m[k].ci_low:.1f}, {m[k].ci_high:.1f}]"  # noqa: E731
    return (f"On the first {r.config['test_sentences']:,} silver test sentences: **UAS {f('uas')} / LAS {f('las')} "
            f"with punctuation, {f('uas_nopunct')} / {f('las_nopunct')} without** (95% sentence-bootstrap "
            f"intervals; `results/parsing/`).")


#: the direction of Δ prv (neural - random) its 95% t interval supports: prv higher is more private
_PRV_DIRECTION = {"below": "neural less private", "none": "no difference shown", "above": "neural more private"}


def _like_for_like(pairs: dict[str, tuple[str, tuple[str, ...]]]) -> list[str]:
    """Per level, each side's training (random substitution's rule, the neural cells' rules): one sub-bullet per
    distinct pair, saying whether the two sides of that comparison trained alike."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for level, pair in pairs.items():
        groups.setdefault(pair, []).append(level)
    out = []
    for (rand, neural), levels in groups.items():
        alike = neural == (rand,)
        out.append(f"  - training at {', '.join(levels)}: random substitution's attacker ({rand}) and the neural "
                   f"cells' ({'; '.join(neural)}): "
                   + ("like-for-like (the same rule and budget on both sides)." if alike else
                      "**not like-for-like** (the two sides trained under different rules or budgets, so Δ there "
                      "mixes the obfuscator with the attacker's training)."))
    return out


@register_fragment("parsing-attackers", compares=True)
def parsing_attackers(results: Path, bench: Path) -> str:
    """Per learning attacker and level: Δ prv (neural - random) over training seeds with the direction its interval
    supports, and each side's training (minute or step cap, stopping rule) with whether the two match."""
    from veil.report.parsing import _interval, _weight, training_rule

    recs = _records(results)
    rand = {(r.config["attacker"], r.config["level"]): r for r in recs if r.experiment.startswith("attack-")
            and r.config.get("defense", "random") == "random"}
    neural: dict[tuple[str, str], list[ResultRecord]] = {}
    for r in sorted(recs, key=lambda r: (r.config.get("training_seed", 0), r.experiment)):
        if r.experiment.startswith("attack-") and r.config.get("defense") == "neural" and _weight(r) == 0:
            neural.setdefault((r.config["attacker"], r.config["level"]), []).append(r)
    out = []
    for attacker in ("trained", "minilm"):
        cells, pairs = [], {}
        for level in ("P1", "P2", "P3", "P4", "P5"):
            if (attacker, level) in neural and (attacker, level) in rand:
                ns, ref = neural[(attacker, level)], rand[(attacker, level)]
                mean, lo, hi = _interval([r.metrics["prv"].mean for r in ns], ref.metrics["prv"].mean)
                verdict = ("one seed" if lo is None else
                           _PRV_DIRECTION["below" if hi < 0 else "above" if lo > 0 else "none"])
                cells.append(f"{level} {mean:+.1f}" + ("" if lo is None else f" [{lo:+.1f}, {hi:+.1f}]")
                             + (f" ({verdict}: no interval)" if lo is None else f" ({verdict}, {len(ns)} seeds)"))
                pairs[level] = (training_rule(ref), tuple(dict.fromkeys(training_rule(r) for r in ns)))
        if not cells:
            continue
        out.append(f"- {'trained' if attacker == 'trained' else 'MiniLM'} attacker, Δ prv (neural - random, 95% t over "
                   f"training seeds; prv higher is more private): " + "; ".join(cells) + ".")
        out += _like_for_like(pairs)
    return "\n".join(out)


@register_fragment("parsing-strongest")
def parsing_strongest(results: Path, bench: Path) -> str:
    """Per level of random substitution: the strongest attacker (lowest prv), how its training ended, beside the
    earlier best and the paper's trained attacker; and what veil's masked LM reached."""
    from veil.report.parsing import PAPER_BIAFFINE, _ATTACKERS, _ended

    recs = _records(results)
    rand = {(r.config["attacker"], r.config["level"]): r for r in recs if r.experiment.startswith("attack-")
            and r.config.get("defense", "random") == "random"}
    out = []
    for level in ("P1", "P2", "P3", "P4", "P5"):
        ran = sorted((rand[(a, level)].metrics["prv"].mean, a) for a in _ATTACKERS if (a, level) in rand)
        if not ran:
            continue
        prv, who = ran[0]
        rec = rand[(who, level)]
        old = [(p, a) for p, a in ran if not a.startswith("veil-mlm")]
        earlier = f"; the best attacker before veil's masked LM: {old[0][1]} {old[0][0]:.1f}" if old else ""
        out.append(f"- {level}: {who} prv {prv:.1f} [{rec.metrics['prv'].ci_low:.1f}, {rec.metrics['prv'].ci_high:.1f}], "
                   f"top-1 {rec.metrics['top1'].mean:.1f}% ({_ended(rec)}){earlier}; the paper's trained attacker "
                   f"{PAPER_BIAFFINE[level][2]}.")
    for r in recs:
        if r.experiment.startswith("model-"):
            c = r.config
            out.append(f"- veil's masked LM `{c['name']}`: held-out masked-token accuracy "
                       f"{r.metrics['heldout_accuracy'].mean:.1f}% (from {r.metrics['start_accuracy'].mean:.1f}% "
                       f"with MiniLM's weights and a fresh head) after {c['steps']} steps, {c['tokens_seen']:,} "
                       f"tokens, {c['minutes']:.1f} minutes.")
    return "\n".join(out)
