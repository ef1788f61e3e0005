"""The fragments of docs/*.md and README.md (see ``veil.report.fragments``): each renders measured numbers from the
records under ``results/`` or the newest matching section of ``benchmarks/RESULTS.md``, with the verdict its
interval supports (an interval that includes 0 shows no difference). docs/parsing.md's are in
``veil.report.fragment_parsing``, registered from here."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from veil.errors import DataFormatError
from veil.report.fragments import register_fragment
from veil.report.markdown import read_record
from veil.results import ResultRecord


# ---- benchmarks/RESULTS.md ------------------------------------------------------------------------------------

def _section(bench: Path, title: str) -> tuple[str, list[list[str]], list[str]]:
    """The newest ``## <title>...`` section: its heading, its first table's rows (cells) and its other lines."""
    if not bench.is_file():
        raise DataFormatError(f"{bench} does not exist; run the script in benchmarks/ that writes the "
                              f"'{title}' section, or pass the benchmark results file")
    parts = re.split(r"(?m)^## ", bench.read_text(encoding="utf-8"))
    found = [p for p in parts if p.startswith(title)]
    if not found:
        raise DataFormatError(f"{bench} has no section '## {title}'; run the benchmark that writes it")
    lines = found[-1].splitlines()
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines
            if line.startswith("|") and not re.fullmatch(r"\|[-:| ]+\|", line.strip())]
    return lines[0], rows, lines[1:]


def _commit(lines: list[str]) -> str:
    for line in lines:
        m = re.match(r"- commit: (\w+)", line)
        if m:
            return m.group(1)[:7]
    return "unknown"


@register_fragment("bench-quick-time")
def bench_quick_time(results: Path, bench: Path) -> str:
    head, rows, lines = _section(bench, "quick bench wall time")
    by = {r[0]: r for r in rows[1:]}
    seq = next(r for k, r in by.items() if k.startswith("sequential"))
    ray = next((r for k, r in by.items() if k.startswith("Ray")), None)
    cells = next((m.group(1) for ln in lines if (m := re.search(r", (\d+) cells,", ln))), None)
    size = f", {cells} cells" if cells else ""
    text = (f"The last timed run (commit {_commit(lines)}{size}, embeddings cached, after one untimed warm-up) took "
            f"{seq[1]}")
    return text + (f" sequentially and {ray[1]} on {ray[0].removeprefix('Ray, ')}." if ray else ".")


@register_fragment("demo-time")
def demo_time(results: Path, bench: Path) -> str:
    """The newest ``benchmarks/demo.py`` record: a first ``make demo`` from a fresh clone, phase by phase."""
    head, rows, lines = _section(bench, "make demo from a fresh clone")
    by = {r[0]: r for r in rows[1:]}
    outcome = next((ln.removeprefix("- outcome: ") for ln in lines if ln.startswith("- outcome:")), "")
    machine = next((ln.removeprefix("- machine: ") for ln in lines if ln.startswith("- machine:")), "")
    load = "no synthetic load" if "no synthetic load" in machine else \
        next((m.group(0) for m in [re.search(r"\d+ busy loop\(s\) running", machine)] if m), "a stated load")
    def name(k: str) -> str:
        m = re.match(r"(\d+) cells, (\d+) of the quick bench's left out", k)
        return f"{m.group(1)} cells ({m.group(2)} of the quick bench left out)" if m else \
            k.replace(" (summed cell time)", "").replace("`", "").replace("report and the rest of make demo", "report")

    phases = [f"{name(k)} {float(r[2]):.1f}" for k, r in by.items() if not k.startswith(("**", "clone"))]
    total = next(r for k, r in by.items() if k.startswith("**total"))
    target = total[3].split()[0]
    within = "NOT within" not in outcome and outcome.startswith("done")
    return (f"The last measured first run (commit {_commit(lines)}, 2 cores, {load}, {head.split(', ')[-1][:10]}) "
            f"took {float(total[2]):.1f} min from a fresh clone to the report ({'; '.join(phases)} min), "
            f"{'within' if within else 'NOT within'} the {target}-minute target.")


@register_fragment("records-under-load")
def records_under_load(results: Path, bench: Path) -> str:
    """The newest ``benchmarks/records_under_load.py`` record of each grid it ran (``--demo``, ``--quick``): the
    same bench cells run quietly and beside busy loops, compared record by record."""
    if not bench.is_file():
        raise DataFormatError(f"{bench} does not exist; run benchmarks/records_under_load.py")
    title = "Bench records quiet and under load"
    found: dict[str, list[str]] = {}
    for part in re.split(r"(?m)^## ", bench.read_text(encoding="utf-8")):
        if part.startswith(title):
            lines = part.splitlines()
            grid = next((m.group(1) for ln in lines for m in [re.search(r"\(`veil bench (--\w+[^`]*)`", ln)] if m),
                        "")
            found[grid] = lines  # the newest of each grid wins
    if not found:
        raise DataFormatError(f"{bench} has no section '## {title}'; run benchmarks/records_under_load.py")
    said = []
    for grid, lines in found.items():
        outcome = next((ln.removeprefix("- outcome: ") for ln in lines if ln.startswith("- outcome:")), "")
        busy = next(r for r in ([c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines
                                if ln.startswith("| beside")))
        said.append(f"`veil bench {grid}` run quietly and {busy[0]} (commit {_commit(lines)}, the cells {busy[3]}x "
                    f"as slow): {outcome}")
    return "; ".join(said) + "."


@register_fragment("parsing-throughput")
def parsing_throughput(results: Path, bench: Path) -> str:
    head, rows, lines = _section(bench, "parsing throughput")
    by = {r[0]: r[1] for r in rows[1:]}
    bia = next(v for k, v in by.items() if k.startswith("biaffine"))
    sm = next(v for k, v in by.items() if k.startswith("spaCy sm"))
    work = next((ln.removeprefix("- workload: ") for ln in lines if ln.startswith("- workload:")), "")
    return (f"Decoding runs at {bia} sentences/s against {sm} for spaCy sm's own pipeline on the same words "
            f"({work}; commit {_commit(lines)}, `benchmarks/parsing.py`, one torch thread).")


@register_fragment("attributes-cost")
def attributes_cost(results: Path, bench: Path) -> str:
    head, rows, lines = _section(bench, "attributes: training throughput")
    h, r = rows[0], rows[-1]
    col = dict(zip(h, r))
    return (f"Measured with `benchmarks/attributes.py` ({col['date']}, {col['settings']}, commit {_commit(lines)}): "
            f"the LSTM encoder trains at {col['batched']} ({col['batch size 1']}; {col['speedup']}), the "
            f"{col['generation defense']}; {col['projection']}.")


@register_fragment("sentdp-sampler-cost")
def sentdp_sampler_cost(results: Path, bench: Path) -> str:
    head, rows, lines = _section(bench, "SentDP sampler")
    h = rows[0]
    table = [dict(zip(h, r)) for r in rows[1:]]

    def rng(sel, key, unit=""):
        vals = [float(re.sub(r"[^\d.]", "", t[key])) for t in sel]
        return f"{min(vals):g}-{max(vals):g}{unit}"

    big = [t for t in table if t["m"] == "5000"]
    share = "draw's share"
    small = [t for t in table if t["m"] == "1000"]
    return (f"on synthetic documents (d = 384, commit {_commit(lines)}) a draw costs {rng(table, 'exact draw', ' us')} "
            f"exact against {rng(table, 'float64 draw (reference)', ' us')} float64 (exact / float64 "
            f"{rng(big, 'exact / float')} at m = 5000, {rng(small, 'exact / float')} at m = 1000), and a whole "
            f"release at m = 5000 costs {rng(big, 'release per document', ' ms')} per document (p = 10 to 50) with "
            f"the exact draw {rng(big, share, '%')} of it")


@register_fragment("parse-service-load")
def parse_service_load(results: Path, bench: Path) -> str:
    head, rows, lines = _section(bench, "parse service")
    blocks: list[list[str]] = []
    for i, ln in enumerate(lines):
        if ln.startswith("|"):
            if i == 0 or not lines[i - 1].startswith("|"):
                blocks.append([])
            blocks[-1].append(ln)
    ratio = next((ln for ln in lines if ln.startswith("obfuscation time / parsing time")), "")
    machine = next((ln.removeprefix("- machine: ") for ln in lines if ln.startswith("- machine:")), "")
    out = [f"Commit {_commit(lines)}; {machine}.", ""] + blocks[0] + ["", ratio]
    for block in blocks[1:]:
        out += [""] + block
    return "\n".join(out)


# ---- records --------------------------------------------------------------------------------------------------

def _records(results: Path, method: str) -> list[ResultRecord]:
    folder = results / method
    if not folder.is_dir():
        raise DataFormatError(f"{folder} does not exist; pass the results folder that holds {method}/ records")
    return [read_record(p) for p in sorted(folder.glob("*.json"))]


def _t(values: list[float]) -> tuple[float, float, float]:
    from scipy import stats

    a = np.asarray(values, dtype=float)
    half = float(stats.t.ppf(0.975, len(a) - 1)) * float(a.std(ddof=1)) / np.sqrt(len(a)) if len(a) > 1 else np.nan
    return float(a.mean()), float(a.mean()) - half, float(a.mean()) + half


def _welch(a: list[float], b: list[float]) -> tuple[float, float, float]:
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if va + vb == 0:
        d = float(x.mean() - y.mean())
        return d, d, d
    df = (va + vb) ** 2 / ((va ** 2 / (len(x) - 1) if va else 0.0) + (vb ** 2 / (len(y) - 1) if vb else 0.0))
    half = float(stats.t.ppf(0.975, df)) * float(np.sqrt(va + vb))
    d = float(x.mean() - y.mean())
    return d, d - half, d + half


def _iv(d: tuple[float, float, float]) -> str:
    return f"{d[0]:+.1f} [{d[1]:+.1f}, {d[2]:+.1f}]"


def _side(d: tuple[float, float, float], below: str, none: str, above: str) -> str:
    return below if d[2] < 0 else above if d[1] > 0 else none


def _attr_groups(results: Path) -> dict[tuple, dict[str, list[ResultRecord]]]:
    groups: dict[tuple, dict[str, list[ResultRecord]]] = {}
    for r in _records(results, "attributes"):
        c = r.config
        groups.setdefault((c["corpus"], c["encoder"], int(c["width"])), {}).setdefault(c["defense"], []).append(r)
    return groups


def _pv(recs: list[ResultRecord], key: str) -> list[float]:
    return [100 * r.metrics[key].mean for r in recs if key in r.metrics]


@register_fragment("attributes-findings", compares=True)
def attributes_findings(results: Path, bench: Path) -> str:
    g = _attr_groups(results)
    news, deb, lstm = ("news-articles", "minilm", 64), ("debates-2016", "minilm", 64), ("news-articles", "lstm", 64)
    out = []
    leak = {k: _t(_pv(g[k]["none"], "advantage[mlp]")) for k in (news, deb, lstm)}
    out.append(f"- **Undefended representations leak with MiniLM, not with the paper's LSTM.** The undefended `mlp` "
               f"attacker minus the best constant, over seeds (t 95%): news passages (MiniLM, W=64) "
               f"{_iv(leak[news])}, debates-2016 (the speaker) {_iv(leak[deb])}, both above 0; news passages with the "
               f"paper's LSTM {_iv(leak[lstm])}, "
               + _side(leak[lstm], "below 0.", "which includes 0: no leak shown.", "above 0.")
               + " Use the corpus, not a 400-example slice: on slices the LSTM stays at the majority class.")
    base = g[news]["none"]
    parts = []
    for d, name in (("multidetask", "multidetasking"), ("grl", "gradient reversal")):
        rs = g[news].get(d, [])
        adv = np.mean(_pv(rs, "privacy[adversary]"))
        floor = np.mean(_pv(rs, "floor_privacy"))
        ch = {a: _welch(_pv(rs, f"privacy[{a}]"), _pv(base, f"privacy[{a}]")) for a in ("mlp", "mlp-wide", "linear")}
        parts.append(f"{name}: its own adversary ends at privacy {adv:.1f} against a floor of {floor:.1f}; privacy "
                     f"change against the undefended model " + ", ".join(
                         f"{_iv(v)} (`{a}`, {_side(v, 'lower', 'no difference shown', 'higher')})"
                         for a, v in ch.items()))
    out.append("- **The training-time adversary is not a measure of privacy** (news, MiniLM, W=64; Welch 95% over "
               "seeds): " + "; ".join(parts) + ".")
    rows = []
    for k in (news, deb):
        for d in ("decluster", "generation"):
            if d in g[k]:
                ch = [(a, _welch(_pv(g[k][d], f"privacy[{a}]"), _pv(g[k]["none"], f"privacy[{a}]")))
                      for a in ("mlp", "mlp-wide", "linear")]
                rows.append(f"{d} on {k[0]}: " + ", ".join(
                    f"{_iv(v)} (`{a}`{'' if v[1] <= 0 <= v[2] else ', excludes 0'})" for a, v in ch))
    out.append("- **Declustering and generation**, privacy change against the undefended model (MiniLM, W=64): "
               + "; ".join(rows) + ".")
    at, below, above = [], [], []
    for k, by in sorted(g.items()):
        if "leace" not in by:
            continue
        for a in ("mlp", "mlp-wide", "linear"):
            d = _t([p - f for p, f in zip(_pv(by["leace"], f"privacy[{a}]"), _pv(by["leace"], "floor_privacy"))])
            label = f"{k[0]} {k[1]} W={k[2]} `{a}` {_iv(d)}"
            (below if d[2] < 0 else above if d[1] > 0 else at).append(label)
    out.append(f"- **LEACE**, privacy minus the floor over seeds (t 95%), per setting and attacker: indistinguishable "
               f"from the floor in {len(at)} of {len(at) + len(below) + len(above)} pairs; above it (the attacker "
               f"does worse than the best constant) in {len(above)}"
               + (f"; **below it** (information left) in {len(below)}: " + "; ".join(below) if below else "")
               + ".")
    width = sorted((k[2], _t(_pv(by["none"], "advantage[mlp]"))) for k, by in g.items()
                   if k[:2] == ("news-articles", "minilm") and "none" in by)
    out.append("- **Width.** Undefended `mlp` attacker minus the floor on news with MiniLM: "
               + ", ".join(f"W={w}: {_iv(d)}" for w, d in width) + ".")
    return "\n".join(out)


def _th(results: Path) -> list[ResultRecord]:
    return [r for r in _records(results, "texthide-attacks") if "cell" in r.config]


def _pct_range(values: list[float]) -> str:
    lo, hi = 100 * min(values), 100 * max(values)
    return f"{lo:.1f}%" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}-{hi:.1f}%"


@register_fragment("texthide-attack-summary")
def texthide_attack_summary(results: Path, bench: Path) -> str:
    recs = _th(results)

    def sel(**kw):
        return [r for r in recs if all(str(r.config["cell"].get(k)) == str(v) for k, v in kw.items())]

    heads = ("rt-polarity", "trec-questions", "sms-spam")
    k1 = [r for r in sel(attack="abs-rss", m=256, k=1, mode="intra", index="private") if r.config["cell"]["corpus"] in heads]
    k1_rss = [r for r in sel(attack="rss", m=256, k=1, mode="intra", index="private") if r.config["cell"]["corpus"] in heads]
    k4 = [r for r in sel(attack="abs-rss", m=256, k=4, mode="intra", index="private") if r.config["cell"]["corpus"] in heads]
    inter = sel(attack="abs-rss", m=256, k=4, mode="inter", index="private")
    masks = [r for r in recs if r.config["cell"]["attack"] == "mask-recovery"]
    unmix = [r for r in recs if r.config["cell"]["attack"] == "unmix"]
    runs = {(c["corpus"], str(c["m"]), c["k"], c["mode"], c["epochs"]) for c in (r.config["cell"] for r in masks + unmix)}
    lines = [
        f"- **Inference-time masking protects nothing.** An encoding with k = 1 (a pool mask, no mixing) is matched to "
        f"its original by sign-invariant search (abs-RSS): Identity {_pct_range([r.metrics['identity'].mean for r in k1])} "
        f"on {', '.join(sorted({r.config['cell']['corpus'] for r in k1}))}, against "
        f"{_pct_range([r.metrics['identity'].mean for r in k1_rss])} for RSS.",
        f"- **Training encodings (256, 4), intra mode, leak a private source almost always.** abs-RSS returns the "
        f"query's own text for {_pct_range([r.metrics['identity'].mean for r in k4])} of encodings and one of its k "
        f"private sources for {_pct_range([r.metrics['identity_any'].mean for r in k4])} (three corpora). In inter "
        f"mode (rt-polarity) one of its sources for {_pct_range([r.metrics['identity_any'].mean for r in inter])}.",
        f"- **The grid:** over {len(runs)} attacked training runs (m x k x mode x epochs), the weakest mask recovery "
        f"got {_pct_range([min(r.metrics['mask_bits'].mean for r in masks)])} of pool bits and the weakest unmixing "
        f"recovered every source of {_pct_range([min(r.metrics['all_sources'].mean for r in unmix)])} of encodings.",
    ]
    return "\n".join(lines)


@register_fragment("redaction-summary", compares=True)
def redaction_summary(results: Path, bench: Path) -> str:
    """One bullet per measured finding of the redaction records (none: an empty string)."""
    from veil.report.redaction import (MODELS, OPERATOR_ORDER, _detection_groups, _ops, _p, _pct, _pts, _variant,
                                       by_kind, side_by_side)

    if not (results / "redaction").is_dir():
        return ""
    kinds = by_kind(_records(results, "redaction"))
    out = []

    def pc(m, ci: bool = True) -> str:
        return _pct(m, ci, "%")

    for group in _detection_groups(kinds.get("detection", []))[:1]:
        models = [m for m in MODELS if m in group]
        if all("recall_PERSON" in group[m].metrics for m in models):
            worst = []
            for m in models:
                vs = sorted((v.mean, k.removeprefix("recall_PERSON_"), v) for k, v in group[m].metrics.items()
                            if k.startswith("recall_PERSON_"))
                worst += [f"{m} {_variant(vs[0][1])} {pc(vs[0][2])}"] if vs else []
            out.append("- **Injected names (PERSON)** with every letter redacted (Wilson 95%): "
                       + ", ".join(f"{m} {pc(group[m].metrics['recall_PERSON'])}" for m in models)
                       + f" of {group[models[0]].metrics['recall_PERSON'].n} names"
                       + (f"; the worst variant: {'; '.join(worst)}." if worst else "."))
        if all("recall_STREET_ADDRESS" in group[m].metrics for m in models):
            out.append("- **Street addresses** (Presidio has no recognizer for them; veil adds its own patterns, written "
                       "on these values, so this line is in-sample: the held-out draw is the next line) fully redacted: "
                       + ", ".join(f"{m} {pc(group[m].metrics['recall_STREET_ADDRESS'])}" for m in models)
                       + f" of {group[models[0]].metrics['recall_STREET_ADDRESS'].n}; touched at all: "
                       + ", ".join(f"{m} {pc(group[m].metrics.get('touched_STREET_ADDRESS'), False)}"
                                   for m in models) + ".")
    from veil.report.redaction_formats import formats_summary

    held_out = formats_summary(kinds.get("formats", []))
    if held_out:
        out.append(held_out)
    for r in kinds.get("news-recall", []):
        if r.config.get("model") == "md":
            out.append(f"- **News passages**: Presidio on md covers {pc(r.metrics['recall_PERSON'])} of spaCy sm's "
                       f"{r.metrics['recall_PERSON'].n} silver PERSON mentions ({r.config['passages']['scored']} "
                       "passages).")
    by: dict[tuple[str, str], dict[str, ResultRecord]] = {}
    for kind in ("infill", "reidentify"):
        for r in kinds.get(kind, []):
            by.setdefault((kind, r.config["corpus"]), {})[r.config["operator"]] = r
    for (kind, corpus), ops in sorted(by.items()):
        if kind == "infill":
            parts = [f"{op} {pc(ops[op].metrics['top1'])} of {ops[op].metrics['top1'].n} names against the "
                     f"floor's {pc(ops[op].metrics['floor_top1'], False)} (p {_p(ops[op].metrics['p_floor'].mean)})"
                     for op in ("type", "mask") if op in ops and "p_floor" in ops[op].metrics]
            if parts:
                out.append(f"- **Infilling** {corpus}, top-1: " + "; ".join(parts) + ".")
        elif "type" in ops and "none" in ops:
            t, n = ops["type"].metrics, ops["none"].metrics
            out.append(f"- **Re-identification** {corpus} among {int(t['candidates'].mean)} candidates: top-1 "
                       f"{pc(t['top1'])} after `type` redaction (p vs floor {_p(t['p_top1'].mean)}) against "
                       f"{pc(n['top1'])} on the original text (p {_p(n['p_top1'].mean)}); floor "
                       f"{pc(t['floor'], False)}.")
    attr = {r.config["operator"]: r for r in _ops(kinds.get("attributes", [])) if "advantage[mlp]" in r.metrics
            and r.config["operator"] in OPERATOR_ORDER}
    if attr:
        kept = [f"{op} {pc(r.metrics['names_verbatim'], False)}" for op, r in attr.items()
                if op != "none" and "names_verbatim" in r.metrics]
        out.append("- **Attribute inference** on news passages, the mlp attacker's advantage over the floor (points, "
                   "t 95% over the seeds; 'every seed' when each seed's paired randomization test beats the floor "
                   "at 0.05): " + ", ".join(
                       f"{op} {_pts(r.metrics['advantage[mlp]'])}"
                       + ("" if "beats_floor[mlp]" not in r.metrics else " (every seed)"
                          if r.metrics["beats_floor[mlp]"].mean else " (not every seed)") for op, r in attr.items())
                   + (f"; passages still naming their people verbatim: {', '.join(kept)}." if kept else "."))
    names, cells = side_by_side(kinds)
    side = []
    for n in names:
        row = cells[n]
        a, r = row.get("attributes"), row.get("reidentify spam-assassin")
        bits = []
        if a is not None and "advantage[mlp]" in a.metrics and "test_accuracy" in a.metrics:
            bits.append(f"attribute advantage {_pts(a.metrics['advantage[mlp]'])} at publisher accuracy "
                        f"{pc(a.metrics['test_accuracy'])}")
        if r is not None:
            bits.append(f"spam-assassin re-identification top-1 {pc(r.metrics['top1'])}")
        if bits:
            side.append(f"`{n}` " + ", ".join(bits))
    if side:
        out.append("- **Side by side** on the same data (same attacks): " + "; ".join(side) + ".")
    return "\n".join(out)


@register_fragment("dpsgd-audit-summary", compares=True)
def dpsgd_audit_summary(results: Path, bench: Path) -> str:
    """One bullet per audited mechanism of results/dpsgd-audit/: how many audits it passed or failed, and which part
    of the audit (the bounds, the noise check, the sensitivity check) did it."""
    if not (results / "dpsgd-audit").is_dir():
        return ""
    recs = _records(results, "dpsgd-audit")
    names = {"dpsgd": "DP-SGD", "dpsgd-broken-half-noise": "Half the noise (control)",
             "dpsgd-broken-no-clip": "No clipping (control)"}
    out = []
    for defense in [d for d in names if any(r.config["defense"] == d for r in recs)]:
        rs = [r for r in recs if r.config["defense"] == defense]
        m = [r.metrics for r in rs]
        failed = sum(x["passed"].mean == 0.0 for x in m)
        white = [x["epsilon_lower_white"].mean / x["epsilon_claimed"].mean for x in m]
        black = [x["epsilon_lower_black"].mean / x["epsilon_claimed"].mean for x in m]
        ideal = [x["epsilon_lower_ideal"].mean / x["epsilon_claimed"].mean for x in m]
        over = sum(x["epsilon_lower_white"].mean > x["epsilon_claimed"].mean or
                   x["epsilon_lower_black"].mean > x["epsilon_claimed"].mean for x in m)
        noise = [x["noise_variance_ratio"].mean for x in m]
        noise_failed = sum(x["noise_p_value"].mean < r.config["check_alpha"] for x, r in zip(m, rs))
        sens_failed = sum(x["sensitivity_p_value"].mean < r.config["check_alpha"] for x, r in zip(m, rs))
        claims = sorted({round(x["epsilon_claimed"].mean, 1) for x in m})
        head = (f"- **{names[defense]}**: {'failed' if defense != 'dpsgd' else 'passed'} "
                f"{failed if defense != 'dpsgd' else len(rs) - failed} of {len(rs)} audits (on "
                f"{', '.join(sorted({r.config['corpus'] for r in rs}))}; claimed epsilon "
                f"{', '.join(f'{c:g}' for c in claims)}; settings {', '.join(sorted({r.config['setting'] for r in rs}))}"
                f"; {rs[0].config['canaries']} canaries). ")
        head += (f"White-box bound / claimed epsilon {min(white):.2f} to {max(white):.2f}, black-box {min(black):.2f} "
                 f"to {max(black):.2f} (a perfect white-box auditor of the claimed mechanism: {min(ideal):.2f} to "
                 f"{max(ideal):.2f}): above the claim in {over} of {len(rs)}; noise variance / accounted "
                 f"{min(noise):.3f} to {max(noise):.3f}, rejected in {noise_failed}; sensitivity rejected in "
                 f"{sens_failed}.")
        out.append(head)
    return "\n".join(out)


def _above_majority(r: ResultRecord) -> bool:
    """Whether a DP-SGD record's test accuracy interval (the one its page shows) lies above its majority rate."""
    from veil.report.markdown import proportion_interval

    m = r.metrics["accuracy"]
    low, _ = proportion_interval(m.mean, m.n, m.ci_low, m.ci_high, m.ci_level)
    return low is not None and low > r.metrics["majority_rate"].mean


@register_fragment("dpsgd-top-layers", compares=True)
def dpsgd_top_layers(results: Path, bench: Path) -> str:
    """The top-layers setting per recipe (optimizer, learning rate) of results/dpsgd/: test accuracy without privacy
    and at each epsilon, and DP-SGD's best run at the largest epsilon against the best non-private run (the paired
    difference over the same test texts)."""
    from veil.experiments.dpsgd.utility import _paired_change, _unbits
    from veil.report.dpsgd import recipe, recipe_text
    from veil.report.markdown import percent

    if not (results / "dpsgd").is_dir():
        return ""
    recs = [r for r in _records(results, "dpsgd") if r.config["setting"] == "top-layers"]
    out = []
    for corpus in sorted({r.config["corpus"] for r in recs}):
        rs = [r for r in recs if r.config["corpus"] == corpus]
        budgets = {(r.config["epochs"], r.config.get("max_train"), r.config["batch_size"]) for r in rs}
        if len(budgets) != 1:
            raise DataFormatError(f"results/dpsgd holds top-layers records of {corpus} at {len(budgets)} budgets; "
                                  "keep one (epochs, training texts, lot size)")
        epochs, n, batch = budgets.pop()
        eps = sorted({float(r.config["epsilon"]) for r in rs if r.config.get("epsilon") is not None})

        def acc(r: ResultRecord) -> str:
            return percent(r.metrics["accuracy"]) + (" (one class)" if r.extra.get("one_class") else "")

        lines = ["| recipe | none | " + " | ".join(f"epsilon {e:g}" for e in eps) + " |",
                 "|---|---|" + "---|" * len(eps)]
        cell = {(recipe(r.config), r.config.get("epsilon")): r for r in rs}
        for used in sorted({recipe(r.config) for r in rs}):
            row = [acc(cell[(used, e)]) if (used, e) in cell else "–" for e in (None, *eps)]
            lines.append(f"| {used[0]}, lr {used[1]:g} | " + " | ".join(row) + " |")
        plain = [r for r in rs if r.config.get("epsilon") is None]
        top = [r for r in rs if r.config.get("epsilon") == eps[-1]] if eps else []
        majority = 100 * rs[0].metrics["majority_rate"].mean
        learnt: dict[bool, list[str]] = {True: [], False: []}
        for used in sorted({recipe(r.config) for r in rs}):
            side: dict[bool, list[str]] = {True: [], False: []}
            for e in (None, *eps):
                if (used, e) in cell:
                    side[_above_majority(cell[(used, e)])].append("none" if e is None else f"epsilon {e:g}")
            for above, where in side.items():
                if where:
                    learnt[above].append(f"{used[0]}, lr {used[1]:g} at {', '.join(where)}")
        text = (f"{corpus}, {n:,} training texts, {epochs} epochs, lots of {batch}, one seed per cell (test "
                f"accuracy, percent, Wilson 95%; the majority class scores {majority:.1f}):")
        out += [text, "", *lines, ""]
        out += [f"Above the majority class (the accuracy interval lies above {majority:.1f}): "
                f"{'; '.join(learnt[True]) or 'no run'}. Not above it: {'; '.join(learnt[False]) or 'no run'}.", ""]
        if plain and top:
            best_plain = max(plain, key=lambda r: r.metrics["accuracy"].mean)
            best_dp = max(top, key=lambda r: r.metrics["accuracy"].mean)
            d = _paired_change(_unbits(best_dp.extra["correct"]), _unbits(best_plain.extra["correct"]))
            verdict = ("no difference the interval can show" if d.ci_low <= 0 <= d.ci_high else
                       "below it" if d.ci_high < 0 else "above it")
            out.append(f"DP-SGD's best run at epsilon {eps[-1]:g} ({recipe_text(best_dp.config)}: {acc(best_dp)}) "
                       f"against the best non-private run ({recipe_text(best_plain.config)}: {acc(best_plain)}): "
                       f"{100 * d.mean:+.1f} points [{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}] paired over the same test texts, "
                       f"{verdict}.")
    return "\n".join(out).rstrip()


from veil.report import fragment_parsing as _fragment_parsing  # noqa: E402,F401  (registers the parsing fragments)
from veil.report import fragment_inversion as _fragment_inversion  # noqa: E402,F401  (registers the inversion ones)
