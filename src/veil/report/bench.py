"""The bench report: one privacy-utility page (self-contained HTML, and a Markdown twin) from the cell records.

First "What to use" (:mod:`veil.report.bench_use`): per corpus and release kind, the settings that pass its two
stated rules (useful: the utility beats the majority class; private: no attack beats its floor, or a DP guarantee's
bound holds), or why none does; "TextHide or DP-SGD?" under the same rules; and the privacy-utility frontier, a
description and not advice, with the settings a stronger attack than their paper's broke. Then one section per
release kind (:data:`veil.kinds.RELEASE_KINDS`
order) and, in it, per corpus: a plot of utility (x: the task's utility with its 95% CI) against the strongest
attack's success (y, with its CI), one point per defense setting, the undefended baseline (where the corpus has
one), the floor and the majority class or the utility on the original inputs marked; a table with the same numbers,
the attack that was strongest, the paper's own attack next to it, and the cell's stated test (against random
guessing, or against a floor attack on the same items). Per defense: its formal guarantee next to what was
measured. Provenance: veil version, commits, corpora with checksums, machine, wall time.

"Strongest" compares only measures on one scale within a kind (the share of private items re-identified:
Identity, any mixed source, all k sources; the share of replaced words recovered; the private attribute's score).
Mask-bit recovery and the exact audit are shown beside it, not folded in.
"""

from __future__ import annotations

import base64
import html
import io
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veil.results import ResultRecord
from veil._io import read_json
from veil.report.commands import bench_commands
from veil.report.markdown import proportion_interval, read_record, regenerate_section, report_fix

__all__ = ["BenchPoint", "load_bench", "bench_points", "render_bench"]



@dataclass
class BenchPoint:
    corpus: str
    defense: str
    setting: dict[str, Any]
    label: str
    guarantee: dict[str, Any]
    utility: dict[str, Any] | None = None
    attacks: dict[str, dict[str, Any]] = field(default_factory=dict)  # attack -> bench block (+ "record")
    #: the attacks the bench plans for this setting (:func:`veil.bench.plan.paired_attacks`) that have no record
    missing: list[str] = field(default_factory=list)

    @property
    def strongest(self) -> tuple[str, dict[str, Any]] | None:
        comp = [(a, b) for a, b in self.attacks.items() if b.get("comparable") and "success_metric" in b]
        if not comp:
            return None
        return max(comp, key=lambda ab: (ab[1]["success_metric"]["mean"], ab[0]))

    @property
    def name(self) -> str:
        return self.defense if self.label == "default" else f"{self.defense} {self.label}"


def load_bench(folder: str | Path) -> tuple[list[ResultRecord], dict[str, Any]]:
    """The cell records under ``folder/cells`` and the last run's summary (``folder/run.json``, or {})."""
    folder = Path(folder)
    records = [read_record(p) for p in sorted((folder / "cells").glob("*.json"))]
    run = folder / "run.json"
    return records, (read_json(run, what="bench run summary", fix=report_fix(run)) if run.is_file() else {})


def _paper_attack(defense: str) -> str | None:
    """The attack the defense's own paper measured it with (its ``paper_attack``), None if unknown or none."""
    from veil.defenses.base import defense_names, get_defense

    if defense not in defense_names(controls=True):
        return None
    return get_defense(defense).paper_attack or None


def _guarantee(defense: str, setting: dict[str, Any]) -> dict[str, Any]:
    from veil.defenses.base import get_defense

    try:
        return get_defense(defense).bench_guarantee(setting).to_dict()
    except Exception:  # noqa: BLE001 - a defense no longer registered still gets its row
        return {"kind": "unknown", "statement": "defense not registered in this veil"}


def bench_points(records: list[ResultRecord]) -> dict[str, list[BenchPoint]]:
    """Points per corpus (in first-seen order), one per (defense, setting)."""
    points: dict[str, dict[tuple[str, str], BenchPoint]] = defaultdict(dict)
    for rec in records:
        cell = rec.config.get("cell")
        if not cell or "bench" not in rec.extra:
            continue
        key = (cell["defense"], cell["setting_label"])
        p = points[cell["corpus"]].get(key)
        if p is None:
            p = points[cell["corpus"]][key] = BenchPoint(cell["corpus"], cell["defense"], cell["setting"],
                                                         cell["setting_label"],
                                                         _guarantee(cell["defense"], cell["setting"]))
        block = dict(rec.extra["bench"])
        if isinstance(rec.config.get("guarantee"), dict) and cell["attack"] != "utility":
            block.setdefault("guarantee", rec.config["guarantee"])  # as run: DP-SGD's accounted epsilon and delta
        if cell["attack"] == "utility":
            p.utility = {**block, "collapsed": bool(rec.extra.get("collapsed", False))}
        else:
            p.attacks[cell["attack"]] = block
    for by_setting in points.values():
        for p in by_setting.values():
            p.missing = [a for a in _planned(p.defense, p.setting) if a not in p.attacks]
    return {c: list(v.values()) for c, v in points.items()}


def _planned(defense: str, setting: dict[str, Any]) -> list[str]:
    """The attacks this veil's bench pairs with the setting ([] for a defense it no longer registers)."""
    from veil.bench.plan import paired_attacks
    from veil.defenses.base import defense_names

    return paired_attacks(defense, setting) if defense in defense_names(controls=True) else []


def _pct(m: dict[str, Any] | None) -> str:
    """A share as a percentage with its 95% interval; a measure with a ``unit`` (canary exposure in bits) in it."""
    if not m:
        return "n/a"
    if m.get("unit"):
        s = f"{m['mean']:.1f} {m['unit']}"
        return s + (f" [{m['ci_low']:.1f}, {m['ci_high']:.1f}]" if m.get("ci_low") is not None else "")
    s = f"{100 * m['mean']:.1f}%"
    if m.get("ci_low") is not None:
        low, high = proportion_interval(m["mean"], m.get("n"), m["ci_low"], m["ci_high"], m.get("ci_level"))
        s += f" [{100 * low:.1f}, {100 * high:.1f}]"
    return s


def _p(test: dict[str, Any] | None, versus: str = "random") -> str:
    """The test's p-value and verdict against ``versus`` (what the cell tested against: random guessing, or a
    floor attack on the same items)."""
    if not test:
        return ""
    p = test.get("p_value")
    if p is None:
        return ""
    verdict = f"beats {versus}" if test.get("reject") else f"not distinguishable from {versus}"
    return f"p={p:.2g} ({verdict})" if p >= 1e-4 else f"p<1e-4 ({verdict})"


def _floor(points: list[BenchPoint]) -> tuple[str, dict[str, Any]] | None:
    """The strongest floor among ``points``, with its name: a floor attack's cell (random guessing, the
    tag-frequency guess), or the floor an attack cell scored beside itself (the best constant predictor)."""
    floors = [(a, b) for p in points for a, b in p.attacks.items() if b.get("floor") and "success_metric" in b]
    floors += [(b.get("versus", "floor"), {"success_metric": b["floor_success"], "random_rate": None})
               for p in points for a, b in p.attacks.items() if not b.get("floor") and b.get("floor_success")
               and not any(q.get("floor") for q in p.attacks.values())]
    return max(floors, key=lambda ab: (ab[1]["success_metric"]["mean"], ab[0])) if floors else None


def _rows(points: list[BenchPoint]) -> list[list[str]]:
    rows = []
    for p in points:
        strongest = p.strongest
        paper = _paper_attack(p.defense)
        extra = []
        if "mask-recovery" in p.attacks:
            extra.append(f"mask bits {_pct(p.attacks['mask-recovery']['success_metric'])}")
        if strongest and strongest[1].get("budget"):
            extra.append(f"{strongest[0]}'s budget: {strongest[1]['budget']}")
        if "exact-audit" in p.attacks:
            extra.append("exact audit: " + ("VIOLATED" if p.attacks["exact-audit"]["success_metric"]["mean"] > 0
                                            else "bound holds"))
        for name, block in sorted(p.attacks.items()):  # measured but not comparable with the strongest (e.g. AUC)
            if block.get("comparable") or name in ("mask-recovery", "exact-audit") or "success_metric" not in block:
                continue
            test = block.get("test") or {}
            verdict = f", p={test['p_value']:.2g}" if test.get("p_value") is not None else ""
            what = _SHORT.get(block.get("success", ""), block.get("success", "success"))
            vs = block.get("versus_success")
            against = f" against {_pct(vs)} for {block.get('versus', 'the reference')}" if vs else ""
            extra.append(f"{name} {what} {_pct(block['success_metric'])}{against}{verdict}")
        g = p.guarantee
        guarantee = (f"epsilon={g['epsilon']:g} ({g['kind']})" if g.get("epsilon") is not None else
                     ("none" if _undefended(p.defense) else
                      "heuristic" if g.get("kind") in (None, "none") else g["kind"]))
        utility = _pct(p.utility and p.utility["utility_metric"])
        if p.utility and p.utility.get("collapsed"):
            utility += " (collapsed: predicts one class)"
        ref = p.utility and p.utility.get("reference_metric")
        if ref:
            utility += f" (originals {_pct(ref)})"
        ppl = p.utility and p.utility.get("perplexity")
        if ppl:
            utility += f" (held-out perplexity {ppl['mean']:,.0f})"
        rows.append([p.name, guarantee, utility,
                     strongest[0] if strongest else "n/a",
                     _pct(strongest[1]["success_metric"]) if strongest else "n/a",
                     _p(strongest[1].get("test"), strongest[1].get("versus", "random")) if strongest else "",
                     _pct(p.attacks[paper]["success_metric"]) if paper in p.attacks else "n/a",
                     "; ".join(extra)])
    return rows


def _undefended(defense: str) -> bool:
    """Whether ``defense`` releases its kind without protection (:attr:`~veil.defenses.base.Defense.undefended`):
    its kind's reference, never on its frontier."""
    from veil.defenses.base import defense_names, get_defense

    return defense in defense_names(controls=True) and get_defense(defense).undefended


def _kind(defense: str) -> str:
    from veil.defenses.base import defense_names, get_defense

    return get_defense(defense).releases if defense in defense_names(controls=True) else "unknown"


def _reference(points: list[BenchPoint]) -> str:
    """What the kind's cells measured without the defense, where there is no undefended point: the utility on the
    original inputs (parsing), or an undefended training run's numbers (representations)."""
    for p in points:
        u = p.utility or {}
        if u.get("reference_metric"):
            return f"{u.get('utility', 'utility')} on the originals {_pct(u['reference_metric'])}"
        ref = u.get("reference")
        if isinstance(ref, dict) and isinstance(ref.get("utility"), dict):
            out = f"utility {_pct(ref['utility'])}"
            if ref.get("success_metric"):
                out += f", {ref.get('success', 'attack')} {_pct(ref['success_metric'])}"
                if ref.get("p_value") is not None:
                    out += f" (p={ref['p_value']:.2g} against the floor)"
            return out
    return "n/a"


HEAD = ["defense / setting", "guarantee", "utility", "strongest attack", "its success", "test (alpha 0.05)",
        "paper's attack", "other attacks"]

#: an attack's success metric -> what the y axis and the tables call it
MEASURES = {"identity": "share re-identified", "identity_any": "share re-identified",
            "top1": "replaced words recovered (top-1)", "auc": "membership AUC"}
#: how a measured-but-not-comparable success is named beside the strongest attack
_SHORT = {"token_f1": "token F1", "exposure": "exposure", "pii_inference": "top-1 among candidates",
          "pii_reconstruction": "values reconstructed", "extraction_precision": "top samples verbatim"}


def _measure(points: list[BenchPoint]) -> str:
    s = next((p.strongest[1] for p in points if p.strongest), None)
    return MEASURES.get(s.get("success", ""), s.get("success", "success")) if s else "success"


def _utility_name(points: list[BenchPoint]) -> str:
    u = next((p.utility for p in points if p.utility), None) or {}
    name = u.get("utility", "accuracy")
    return f"{name} ({u['utility_parser']})" if u.get("utility_parser") else name


def _plot(corpus: str, points: list[BenchPoint], title: str | None = None) -> bytes:
    """The privacy-utility plot of one corpus (the points of one release kind) as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    # one colour per defense in order of appearance (no defense in black): no table of names to keep up to date
    palette = iter(["tab:blue", "tab:green", "tab:orange", "tab:purple", "tab:red", "tab:brown", "tab:pink",
                    "tab:olive", "tab:cyan", "tab:gray"] * 3)
    colours = {q.defense: "black" for q in points if _undefended(q.defense)}
    for q in points:
        colours.setdefault(q.defense, next(palette))
    shown = [(q.utility["utility_metric"]["mean"], q.strongest[1]["success_metric"]["mean"]) for q in points
             if q.utility is not None and q.strongest is not None]
    xs = max(1e-9, max(x for x, _ in shown) - min(x for x, _ in shown)) if shown else 1.0

    def offset(x: float, y: float) -> float:
        """Where a point's label goes, in points above (+) or below (-) it: above unless the nearest other point
        is higher, so labels of close points never cross; points at (nearly) the same leakage alternate below and
        above in order of utility, further out each pair, and labels near the top go below first."""
        tied = sorted(ox for ox, oy in shown if abs(oy - y) < 0.02)
        if len(tied) > 1:
            rank = tied.index(x)
            up = (rank % 2 == 1) if y > 0.9 else (rank % 2 == 0)
            return (1 if up else -1) * (12 + 11 * (rank // 2)) - (0 if up else 4)
        others = [(abs(x - ox) / xs + abs(y - oy), oy) for ox, oy in shown if (ox, oy) != (x, y)]
        up = (not others or y >= min(others)[1]) and y <= 0.9
        return 10 if up else -16

    for i, p in enumerate(points):
        s = p.strongest
        if p.utility is None or s is None:
            continue
        u, a = p.utility["utility_metric"], s[1]["success_metric"]
        xerr = [[u["mean"] - u.get("ci_low", u["mean"])], [u.get("ci_high", u["mean"]) - u["mean"]]]
        yerr = [[a["mean"] - a.get("ci_low", a["mean"])], [a.get("ci_high", a["mean"]) - a["mean"]]]
        ax.errorbar(u["mean"], a["mean"], xerr=xerr, yerr=yerr, fmt="o", capsize=3,
                    color=colours[p.defense], label=p.defense)
        tag = "no defense" if _undefended(p.defense) else p.label
        tag += " (collapsed)" if p.utility.get("collapsed") else ""
        # the leader line ties each label to its own point
        ax.annotate(tag, (u["mean"], a["mean"]), textcoords="offset points",
                    xytext=(14, offset(u["mean"], a["mean"])),
                    fontsize=7, arrowprops={"arrowstyle": "-", "lw": 0.6, "color": colours[p.defense],
                                            "shrinkA": 0, "shrinkB": 3})
    floor, own = _floor(points), _own_floors(points)
    if own:  # each setting has its own floor: mark each
        for p, f in own:
            if p.utility is None:
                continue
            ax.plot([p.utility["utility_metric"]["mean"]], [f[1]["success_metric"]["mean"]], marker="_",
                    markersize=18, color="grey", ls="none", label=f"floor of each setting: {f[0]}")
    elif floor:
        ax.axhline(floor[1]["success_metric"]["mean"], ls="--", color="grey", lw=1,
                   label="random guessing" if floor[0] == "random-guess" else f"floor: {floor[0]}")
    maj = next((p.utility.get("majority_rate") for p in points if p.utility), None)
    if maj is not None:  # a classifier's majority class; another utility's one-class value (the likeliest token)
        ax.axvline(maj, ls=":", color="grey", lw=1,
                   label="majority class" if _utility_name(points) == "accuracy" else "one-class value")
    ref = next((p.utility.get("reference_metric") for p in points if p.utility), None)
    if ref:
        ax.axvline(ref["mean"], ls=":", color="grey", lw=1, label="original inputs")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8, loc="best")
    ax.set_xlabel(f"utility: {_utility_name(points)} (95% CI)")
    ax.set_ylabel(f"strongest attack: {_measure(points)} (95% CI)")
    ax.set_ylim(-0.03, 1.12)  # room for labels above the top points
    ax.set_title(f"{title or corpus}: privacy against utility (lower right is better)", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    """One HTML table, every cell escaped."""
    return ("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>")


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


INTRO = ("Every defense veil has, against every attack that observes what it releases, on the same data, in one "
         "section per release kind (what leaves the owner: vectors, training encodings, document embeddings, "
         "rewritten text, obfuscated text for a parsing service, an encoder's hidden states, a trained model, a "
         "language model fine-tuned on the private text). Each point is one defense setting: x is the utility it "
         "keeps (task accuracy, the parse's UAS, or a language model's held-out next-token accuracy), y the success "
         "of the strongest attack (the share of private items re-identified, of replaced words recovered, the "
         "private attribute's prediction score, or membership AUC). The dashed line is the floor (random guessing, "
         "or an attack that learns nothing from the release), the dotted line the majority class or the utility on "
         "the original inputs. A good defense sits low and to the right; a point high up leaks no matter what its "
         "paper's attack reported, which is in its own column.")


FRONTIER_TITLE = "Privacy-utility frontier (a description, not advice)"

#: what each release kind's section is about, after its name
_KIND_WORDS = {"vectors": "one vector per text (inference)", "training-encodings": "the encodings of a training run",
               "document-embeddings": "one private embedding per document", "text": "rewritten text",
               "obfuscated-text": "word substitutes for a parsing service",
               "representations": "a trained encoder's hidden states",
               "generative-model": "a language model fine-tuned on the private text"}


def _by_kind(by_corpus: dict[str, list[BenchPoint]]) -> list[tuple[str, str, list[BenchPoint]]]:
    """(release kind, corpus, points) in the order of :data:`veil.kinds.RELEASE_KINDS`: each kind's defenses on each
    corpus (its own undefended reference first, e.g. ``plain`` for a model), with the ``none`` baseline of that
    corpus beside them where the kind contains what it releases (vectors: a trained model does not); the baseline
    alone has the ``vectors`` section when no vectors defense ran."""
    from veil.kinds import RELEASE_KINDS, observable

    out = []
    for kind in [*RELEASE_KINDS, "unknown"]:
        for corpus, points in by_corpus.items():
            mine = sorted((p for p in points if p.defense != "none" and _kind(p.defense) == kind),
                          key=lambda p: not _undefended(p.defense))
            base = [p for p in points if p.defense == "none" and observable(kind, _kind("none"))]
            if mine or (kind == "vectors" and base):
                out.append((kind, corpus, base + mine))
    return out


def _own_floors(points: list[BenchPoint]) -> list[tuple[BenchPoint, tuple[str, dict[str, Any]]]]:
    """Each point with its own floor, where the points' floors differ (the tag-frequency guess at each obfuscation
    level); [] where one floor serves them all (random guessing over one index)."""
    own = [(p, f) for p in points if (f := _floor([p]))]
    return own if len({round(f[1]["success_metric"]["mean"], 9) for _, f in own}) > 1 else []


def _floor_line(points: list[BenchPoint]) -> str:
    floor = _floor(points)
    if not floor:
        return ""
    name, b = floor
    own = _own_floors(points)
    if own:
        return "Floors: " + "; ".join(f"{p.name}: {f[0]} {_pct(f[1]['success_metric'])}" for p, f in own) + "."
    if name == "random-guess" and b.get("random_rate"):
        return f"Random guessing re-identifies {_pct(b['success_metric'])} (1 in {round(1 / b['random_rate']):,})."
    line = f"The floor ({name}) reaches {_pct(b['success_metric'])}"
    if b.get("random_rate"):
        line += f"; guessing uniformly would reach {100 * b['random_rate']:.2f}%"
    return line + "."


def _left_out(left: dict[str, list[str]], folder: str | Path) -> tuple[str, list[str], list[list[str]]]:
    """The section on the cells ``veil bench --demo`` left out (``run.json``'s ``left_out``): a note with the
    command that adds them, and one row per reason."""
    from veil.bench.selection import QUICK_REST_MINUTES

    n = sum(map(len, left.values()))
    note = (f"This was `veil bench --demo`: {n} cells of the quick bench were not run, because each trains a model "
            "for minutes on 2 cores. A setting that passed the attacks that ran but not one of these gets no "
            "verdict above, and settings left out whole are not in this report. `veil bench --quick --out "
            f"{folder}` runs them and reuses every cell already here (about {QUICK_REST_MINUTES} minutes on 2 idle "
            "cores, the two quick models included).")
    rows = [[why, f"{len(ids)}: " + ", ".join(" / ".join(i.split("--")[:3]) for i in ids)] for why, ids in left.items()]
    return note, ["why left out", "cells (corpus / defense-setting / attack)"], rows


def render_bench(folder: str | Path, out_dir: str | Path, *, name: str = "bench") -> tuple[Path, Path]:
    """Write ``out_dir/<name>.md`` (+ one PNG per corpus) and the self-contained ``out_dir/<name>.html``."""
    from veil._io import atomic_write, atomic_write_text

    records, run = load_bench(folder)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_corpus = bench_points(records)
    md = [f"<!-- generated by `veil report` from {Path(folder).name}/cells/*.json; do not edit by hand -->", "",
          "# veil bench: privacy against utility", "", INTRO, ""]
    body = [f"<h1>veil bench: privacy against utility</h1><p>{html.escape(INTRO)}</p>"]
    last_kind = None
    from veil.report import bench_use as advice

    for level, title, note, head, rows in (
            ("##", "What to use", advice.USE_NOTE, advice.USE_HEAD, advice.what_to_use(by_corpus)),
            ("###", "TextHide or DP-SGD?", advice.CHOICE_NOTE, advice.CHOICE_HEAD, advice.texthide_or_dpsgd(by_corpus)),
            ("##", FRONTIER_TITLE, advice.FRONTIER_NOTE, advice.FRONTIER_HEAD, advice.frontier_rows(by_corpus))):
        if not rows and title != "What to use":
            continue
        tag = f"h{len(level)}"
        md += [f"{level} {title}", "", note, ""] + _md_table(head, rows) + [""]
        body.append(f"<{tag}>{html.escape(title)}</{tag}><p>{html.escape(note)}</p>" + _html_table(head, rows))
    left = run.get("left_out") or {}
    if left:
        note, lhead, lrows = _left_out(left, folder)
        md += ["## Left out of this run", "", note, ""] + _md_table(lhead, lrows) + [""]
        body.append(f"<h2>Left out of this run</h2><p>{html.escape(note)}</p>" + _html_table(lhead, lrows))
    for kind, corpus, points in _by_kind(by_corpus):
        if kind != last_kind:
            last_kind = kind
            head = f"{kind}: {_KIND_WORDS.get(kind, '')}".rstrip(": ")
            md += [f"## {head}", ""]
            body.append(f"<h2>{html.escape(head)}</h2>")
        png = _plot(corpus, points, title=f"{corpus}, {kind}")
        png_name = f"{name}_{corpus}_{kind}.png"
        with atomic_write(out_dir / png_name, "wb") as fh:
            fh.write(png)
        rows = _rows(points)
        floor_line = _floor_line(points)
        if not any(_undefended(p.defense) for p in points) and _reference(points) != "n/a":
            floor_line += f" Without a defense: {_reference(points)}."
        md += [f"### {corpus}", "", f"![privacy-utility plot of {corpus}, {kind}]({png_name})", "", floor_line, ""]
        md += _md_table(HEAD, rows) + [""]
        b64 = base64.b64encode(png).decode()
        body.append(f"<h3>{html.escape(corpus)}</h3><img alt='privacy-utility plot of {html.escape(corpus)}, "
                    f"{html.escape(kind)}' src='data:image/png;base64,{b64}'><p>{html.escape(floor_line)}</p>")
        body.append(_html_table(HEAD, rows))
    guarantees = []
    seen = set()
    for points in by_corpus.values():
        for p in points:
            if (p.defense, p.label) in seen:
                continue
            seen.add((p.defense, p.label))
            s = p.strongest
            guarantees.append([p.name, p.guarantee.get("statement", ""),
                               f"{s[0]}: {_pct(s[1]['success_metric'])} on {p.corpus}" if s else "n/a"])
    ghead = ["defense / setting", "formal guarantee", "strongest measured leakage"]
    md += ["## Guarantees against measurements", ""] + _md_table(ghead, guarantees) + [""]
    body.append("<h2>Guarantees against measurements</h2>" + _html_table(ghead, guarantees))
    from veil.report.bench_provenance import provenance

    prov = provenance(records, run)
    md += ["## Provenance", ""] + [f"- {k}: {v}" for k, v in prov] + [""]
    folder_name = f"{Path(folder).parent.name}/{Path(folder).name}"
    md += regenerate_section(bench_commands([r.config for r in records], folder_name), name,
                             configs=[r.config for r in records])
    body.append("<h2>Provenance</h2><ul>" + "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>"
                                                    for k, v in prov) + "</ul>")
    md_path, html_path = out_dir / f"{name}.md", out_dir / f"{name}.html"
    atomic_write_text(md_path, "\n".join(md).rstrip() + "\n")
    atomic_write_text(html_path, _html_page("\n".join(body)))
    return md_path, html_path


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:4px 6px;
text-align:left;vertical-align:top}th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee}"""

# Sets data-check on <body> once loaded: "ok", "broken-images:N" or "script-error"; `make report-check` reads it.
_CHECK = """window.addEventListener('error',function(){document.body.dataset.check='script-error';});
window.addEventListener('load',function(){var bad=0;var imgs=document.images;
for(var i=0;i<imgs.length;i++){if(!imgs[i].complete||imgs[i].naturalWidth===0){bad++;}}
if(document.body.dataset.check!=='script-error'){document.body.dataset.check=bad?('broken-images:'+bad):'ok';}});"""


def _html_page(body: str) -> str:
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>veil bench</title>"
            f"<style>{_CSS}</style><script>{_CHECK}</script></head><body data-check='pending'>"
            f"{body}</body></html>\n")
