"""``docs/results/redaction.md``: PII redaction with Presidio, what it detects and what still leaks from the text it
releases, rendered from ``results/redaction/*.json`` (:mod:`veil.experiments.redaction`: ``detection-*``,
``news-recall-*``, ``infill-*``, ``reidentify-*``, ``attributes-*``; each module's docstring defines its metrics).

Every number comes from a record; a kind of record that is missing leaves its section out. The
``redaction-summary`` fragment of docs/redaction.md (``veil.report.fragment_texts``) uses this module's formats.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil.report.commands import redaction_commands, redaction_settings_off_cli
from veil.report.markdown import percent as _pct, regenerate_section, register_renderer
from veil.results import Metric, ResultRecord

__all__ = ["redaction_page", "by_kind", "side_by_side", "KINDS", "OPERATOR_ORDER"]

KINDS = ("detection", "formats", "news-recall", "infill", "reidentify", "attributes")
MODELS = ("sm", "md")
OPERATOR_ORDER = ("none", "type", "mask", "hash", "pseudonym")
ALPHA = 0.05
_OPERATORS = {"type": "`type` (each span becomes `<ENTITY>`)", "mask": "`mask` (each character becomes `*`: the "
              "length is released)", "hash": "`hash` (a keyed sha256 of the value: equal values stay linkable)",
              "pseudonym": "`pseudonym` (consistent surrogate values)"}
_VARIANTS = {"allcaps": "all caps", "lowercase": "lower case", "non_english": "non-English",
             "common_word": "common word", "intl_plus": "international, +", "intl_national": "international, national",
             "intl": "international", "us": "US", "v4": "IPv4", "v6": "IPv6"}


def by_kind(records: list[ResultRecord]) -> dict[str, list[ResultRecord]]:
    """The records of each kind (:data:`KINDS`, by experiment name), sorted by experiment name."""
    out: dict[str, list[ResultRecord]] = {}
    for r in sorted(records, key=lambda r: r.experiment):
        kind = next((k for k in KINDS if r.experiment.startswith(k + "-")), None)
        if kind is not None:
            out.setdefault(kind, []).append(r)
    return out


def _pts(m: Metric | None) -> str:
    """A difference of scores in points (x 100), signed, with its interval."""
    if m is None:
        return "–"
    if m.ci_low is None or m.ci_high is None:
        return f"{100 * m.mean:+.1f}"
    return f"{100 * m.mean:+.1f} [{100 * m.ci_low:+.1f}, {100 * m.ci_high:+.1f}]"


def _share(m: Metric | None) -> str:
    """A share in percent without an interval; – when the record has none (a release that redacts nothing)."""
    return "–" if m is None else f"{_pct(m, False)}%"


def _p(p: float) -> str:
    if p <= 0.0:
        return "< 1e-300"  # below the smallest double: the test's p-value underflowed
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _p_yes(m: Metric | None) -> str:
    return "–" if m is None else f"{_p(m.mean)} ({'yes' if m.mean <= ALPHA else 'no'})"


def _entities(value: Any) -> str:
    if value == "all supported":
        return "every type it supports"
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _model_rank(model: Any) -> int:
    return MODELS.index(model) if model in MODELS else len(MODELS)


def _variant(v: str) -> str:
    return _VARIANTS.get(v, v.replace("_", " "))


def _ops(recs: list[ResultRecord]) -> list[ResultRecord]:
    """Records by corpus, then release (none, Presidio's operators, then the releases set beside them)."""
    from veil.experiments.redaction.releases import release_order

    return sorted(recs, key=lambda r: (str(r.config.get("corpus")), release_order(str(r.config.get("operator")))))


# --------------------------------------------------------------------------- 1. what was measured
def _intro(kinds: dict[str, list[ResultRecord]]) -> list[str]:
    detectors = [r.config.get("detector") or r.config.get("defense") or {} for rs in kinds.values() for r in rs]
    detectors = [d for d in detectors if d.get("presidio_analyzer")]
    versions = sorted({str(d["presidio_analyzer"]) for d in detectors})
    pipelines = {str(d.get("model")): str(d.get("spacy_model")) for d in detectors if d.get("spacy_model")}
    pipelines = [f"{m} (`{pipelines[m]}`)" for m in sorted(pipelines, key=_model_rank)]
    main = [r.config.get("detector") or r.config.get("defense") or {} for k, rs in kinds.items() for r in rs
            if k != "attributes"]  # attribute inference states its own entity set
    entities = sorted({_entities(d.get("entities")) for d in [d for d in main if d.get("presidio_analyzer")]
                       or detectors})
    thresholds = sorted({float(d["threshold"]) for d in detectors if d.get("threshold") is not None})
    ops = [o for o in OPERATOR_ORDER[1:] if any(r.config.get("operator") == o for rs in kinds.values() for r in rs)]
    others = sorted({str(r.config["operator"]) for k in ("reidentify", "attributes") for r in kinds.get(k, [])
                     if r.config.get("operator") not in OPERATOR_ORDER}, key=_release_order)
    lines = ["# Results: PII redaction with Presidio", "",
             "See [the user page](../redaction.md) for the defense and its use."]
    text = (f"The defense is Presidio's analyzer {', '.join(versions)} with its predefined recognizers (the "
            f"regular expressions with checksums and context words, and the NER of a spaCy pipeline: "
            f"{' or '.join(pipelines)}), configured as Presidio's default deployment; entities: "
            f"{'; '.join(entities)}; score threshold {', '.join(f'{t:g}' for t in thresholds) or '–'}; overlapping "
            f"detections merged into their union. Its anonymizer rewrites what was found with one operator: "
            + ("; ".join(_OPERATORS.get(o, o) for o in ops) or "none measured") + ". It promises nothing formal: a "
            "span it misses is released verbatim, and everything around a redacted span is released too.")
    threats = []
    if "detection" in kinds or "news-recall" in kinds:
        threats.append("Detection quality, against exact ground truth (values injected into real sentences) and "
                       "against spaCy's silver PERSON mentions of news passages: no attacker, what Presidio misses "
                       "is released verbatim.")
    if "infill" in kinds:
        threats.append("Infilling: an attacker who reads the redacted text, knows the mechanism and holds public "
                       "texts of the same corpus ranks candidate names for each redacted PERSON span with veil's "
                       "masked LM.")
    if "reidentify" in kinds:
        threats.append("Re-identification: an attacker holding public texts of every candidate author links each "
                       "redacted document to its author (closed world, authorship attribution on n-grams).")
    if "attributes" in kinds:
        threats.append("Attribute inference: an eavesdropper on the encodings of redacted news passages infers "
                       "which people a passage names (Coavoux et al.'s attackers).")
    lines += ["", text, ""]
    if threats:
        lines += ["Measured here:", "", *[f"- {t}" for t in threats], ""]
    if others:
        lines += [f"Beside redaction, on the same data and through the same attacks where they apply: "
                  f"{', '.join(f'`{o}`' for o in others)} (word-level metric DP, random same-POS substitution of "
                  "running text, DeepCandidate's SentDP vectors; `veil.experiments.redaction.releases`); see "
                  "[Side by side](#side-by-side-redaction-and-the-other-releases-on-the-same-data).", ""]
    return lines + ["A defense is only as private as the strongest attack run against it: every attack success below "
                    "is a lower bound on what leaks, and an attack at its floor shows only that this attack found "
                    "nothing.", ""]


# --------------------------------------------------------------------------- 2. detection quality
def _detection_groups(recs: list[ResultRecord]) -> list[dict[str, ResultRecord]]:
    groups: dict[tuple, dict[str, ResultRecord]] = {}
    for r in recs:
        c = r.config
        groups.setdefault((str(c["corpus"]["base"]), int(c["n_per_entity"]), int(c["seed"])), {})[c["model"]] = r
    return [groups[k] for k in sorted(groups, key=lambda k: (-k[1], k))]


def _classes(group: dict[str, ResultRecord]) -> list[str]:
    return list(dict.fromkeys(c for m in MODELS if m in group for c in group[m].extra.get("recall", {})))


def _rate(row: dict[str, Any] | None, key: str) -> str:
    return "–" if not row else f"{100 * row[key]['rate']:.1f}"


def _detection(recs: list[ResultRecord], out_dir: Path) -> list[str]:
    lines = ["## Detection quality", ""]
    for i, group in enumerate(_detection_groups(recs)):
        models = [m for m in MODELS if m in group]
        first = group[models[0]]
        corpus = first.config["corpus"]
        lines += [f"Injection corpus (base `{corpus['base']}`, {corpus['n_per_entity']} values per class and per "
                  f"PERSON variant, seed {corpus['seed']}): {corpus['n_values']} values, one per text, each in one of "
                  f"the class's templates ({', '.join(f'{c} {len(t)}' for c, t in corpus.get('templates', {}).items())}"
                  f" templates) around one of {corpus['base_sentences']}. Values: {corpus['values']}. "
                  f"Covered (the recall): every letter and digit of the value inside a detection, nothing of it "
                  f"released; touched: any of them inside one (touched minus covered: a partial redaction that "
                  f"releases the rest); typed: covered by detections of the class's own Presidio type (any type for "
                  f"STREET_ADDRESS, which Presidio has no recognizer for; veil's own patterns add one). Percent of the values, Wilson 95% intervals.", ""]
        lines += ["| class | values | " + " | ".join(f"recall (covered) {m} | touched {m} | typed {m}" for m in models)
                  + " |",
                  "|---|---:|" + "---|---:|---:|" * len(models)]
        for cls in _classes(group):
            cells = []
            n = {group[m].extra["recall"][cls]["n"] for m in models if cls in group[m].extra["recall"]}
            for m in models:
                row = group[m].extra["recall"].get(cls)
                cells += [_pct(group[m].metrics.get(f"recall_{cls}")), _rate(row, "touched"), _rate(row, "typed")]
            lines.append(f"| {cls} | {' / '.join(map(str, sorted(n)))} | " + " | ".join(cells) + " |")
        lines += [""] + _detection_plot(group, out_dir, i)
        lines += ["### Hard cases: each class's formats and PERSON's variants", "",
                  "| class | variant | values | " + " | ".join(f"covered {m} | touched {m}" for m in models) + " |",
                  "|---|---|---:|" + "---|---:|" * len(models)]
        for cls in _classes(group):
            variants = list(dict.fromkeys(v for m in models for v in group[m].extra["recall"].get(cls, {})
                                          .get("variants", {})))
            for v in variants:
                rows = {m: group[m].extra["recall"].get(cls, {}).get("variants", {}).get(v) for m in models}
                n = sorted({r["n"] for r in rows.values() if r})
                cells = [f"{_pct(group[m].metrics.get(f'recall_{cls}_{v}'))} | {_rate(rows[m], 'touched')}"
                         for m in models]
                lines.append(f"| {cls} | {_variant(v)} | {' / '.join(map(str, n))} | " + " | ".join(cells) + " |")
        lines += ["", *_precision(group, models), *_misses(group, models)]
    return lines


def _precision(group: dict[str, ResultRecord], models: list[str]) -> list[str]:
    types = sorted({t for m in models for t in group[m].extra.get("precision", {})})
    if not types:
        return []
    lines = ["### Precision per Presidio type", "",
             "Over the detections in an injected text that are not also in its un-injected base sentence (same text "
             "slice and type: those are the base sentence's own, real PII or a false positive, with no gold, so "
             "they are counted apart and never scored). On the value: the detection overlaps the injected value; "
             "typed: and its type matches the value's class. A detection elsewhere counts as a false positive even "
             "when it is a real name of the base sentence that the template's context made the NER find: these "
             "precisions are conservative. Percent, Wilson 95%.", "",
             "| Presidio type | " + " | ".join(f"detections {m} | on the value {m} | typed {m} | in the base "
                                              f"sentence too {m}" for m in models) + " |",
             "|---|" + "---:|---|---|---:|" * len(models)]
    for t in types:
        cells = []
        for m in models:
            p = group[m].extra.get("precision", {}).get(t)
            cells += (["–"] * 4 if p is None else
                      [str(p["new"]), _pct(group[m].metrics.get(f"precision_{t}")),
                       _pct(group[m].metrics.get(f"precision_typed_{t}")), str(p["from_base"])])
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines.append("")
    for m in models:
        base = group[m].extra.get("base_detections")
        if base:
            per = ", ".join(f"{k} {v}" for k, v in base.get("per_type", {}).items())
            lines.append(f"- {m}: Presidio found something in {base['texts_with_any']} of the {base['texts']} "
                         f"un-injected base sentences ({per}).")
    return lines + [""]


def _misses(group: dict[str, ResultRecord], models: list[str]) -> list[str]:
    rows = []
    for m in models:
        for key, examples in group[m].extra.get("missed_examples", {}).items():
            if examples:
                e = examples[0]
                found = ", ".join(f"'{d['text']}' as {d['entity']}" for d in e.get("detections", [])) or "nothing"
                rows.append(f"- {m}, {key}: '{e['value']}' in \"{e['text']}\" (detected: {found})")
    if not rows:
        return []
    return ["<details><summary>One missed value per class and variant (the records keep up to three)</summary>", "",
            *rows, "", "</details>", ""]


def _detection_plot(group: dict[str, ResultRecord], out_dir: Path, index: int) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from veil._io import atomic_write

    models = [m for m in MODELS if m in group]
    classes = _classes(group)
    person = list(dict.fromkeys(v for m in models for v in group[m].extra["recall"].get("PERSON", {})
                                .get("variants", {})))
    panels = [("per class", [(c, f"recall_{c}") for c in classes])]
    if person:
        panels.append(("PERSON variants", [(_variant(v), f"recall_PERSON_{v}") for v in person]))
    fig, axes = plt.subplots(1, len(panels), figsize=(11.0, 3.9), squeeze=False,
                             gridspec_kw={"width_ratios": [len(p[1]) for p in panels]})
    width = 0.8 / len(models)
    for ax, (title, items) in zip(axes[0], panels):
        x = np.arange(len(items))
        for j, m in enumerate(models):
            ms = [group[m].metrics.get(key) for _, key in items]
            mean = np.array([100 * v.mean if v else np.nan for v in ms])
            err = np.array([[100 * (v.mean - v.ci_low), 100 * (v.ci_high - v.mean)] if v and v.ci_low is not None
                            else [0.0, 0.0] for v in ms]).T
            ax.bar(x + (j - (len(models) - 1) / 2) * width, mean, width, yerr=err, capsize=2,
                   color=("tab:orange", "tab:blue")[j % 2], label=f"Presidio on spaCy {m}")
        ax.set_xticks(x, [name for name, _ in items], rotation=35, ha="right", fontsize=7)
        ax.set_ylim(0, 119)
        ax.set_yticks(range(0, 101, 20))
        ax.set_title(f"covered (nothing released), {title}", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("% of injected values (Wilson 95%)")
    axes[0][0].legend(fontsize=7, loc="upper center", ncol=2, frameon=False)
    fig.tight_layout()
    path = out_dir / ("redaction_detection.png" if index == 0 else f"redaction_detection_{index}.png")
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)
    return [f"![recall per class and per PERSON variant, sm against md]({path.name})", ""]


# --------------------------------------------------------------------------- 3. news passages
def _news(recs: list[ResultRecord]) -> list[str]:
    recs = sorted(recs, key=lambda r: (_model_rank(r.config["model"]), r.experiment))
    lines = ["## Recall of news passages' PERSON mentions", "",
             f"Silver mentions: {recs[0].config['silver']}. Covered, touched and typed (a PERSON detection) as above; "
             "percent of the mentions, Wilson 95%; name-like: the mentions the attribute corpus accepts as a "
             "person's name. No precision: a PERSON detection off the silver spans may be a person sm's NER missed "
             "or a false positive (counted in the last column).", "",
             "| Presidio on | passages (of) | seed | silver mentions | covered | touched | typed | name-like: "
             "covered | passages with every mention covered | PERSON detections off the silver spans | circular? |",
             "|---|---:|---:|---:|---|---:|---:|---|---:|---:|---|"]
    for r in recs:
        c, m, e = r.config, r.metrics, r.extra
        circular = str(c.get("circular", "–")).split(":")[0]
        lines.append(f"| {c['model']} (`{c['detector'].get('spacy_model', '–')}`) | {c['passages']['scored']} "
                     f"({c['passages']['total']}) | {c['seed']} | {m['recall_PERSON'].n} | {_pct(m['recall_PERSON'])} "
                     f"| {_pct(m.get('touched_PERSON'), False)} | {_pct(m.get('typed_PERSON'), False)} | "
                     f"{_pct(m.get('recall_PERSON_names'))} | {e.get('texts_all_mentions_covered', '–')} of "
                     f"{e.get('texts', '–')} | {e.get('person_detections_off_silver', '–')} | {circular} |")
    lines.append("")
    for r in recs:
        if str(r.config.get("circular", "")).startswith("yes"):
            lines.append(f"- {r.config['model']} is circular, as its record says: "
                         f"{str(r.config['circular']).removeprefix('yes: ')}.")
    return lines + [""]


# --------------------------------------------------------------------------- 4. infilling
def _edge(c: dict[str, Any]) -> str | None:
    grid = [float(w) for w in c.get("weights", [])]
    if not grid or "weight" not in c or len(grid) < 2:
        return None
    w = float(c["weight"])
    if w == 0.0:  # frequency alone: the masked LM did not help on the calibration texts (a natural end, not a cut)
        return None
    return "top" if w == max(grid) else "bottom" if w == min(grid) else None


def _infill(recs: list[ResultRecord]) -> list[str]:
    recs = _ops(recs)
    first = recs[0].config
    lines = ["## Infilling the redacted PERSON spans", "",
             f"Per corpus, the attacker's candidates are the {first.get('entity', 'PERSON')} values its own run of the "
             "same analyzer finds in the corpus' train split (public); the weight of the masked-LM term against "
             "their public frequency is chosen on the dev split, redacted by the attacker's own copy of the "
             "redactor (grid `weights` in the config), never on the targets; targets: every redacted "
             f"{first.get('entity', 'PERSON')} span of the test documents, redacted by the owner (key and "
             f"randomness from OS entropy). Masked LM: veil's `{first.get('mlm')}`. Top-1 / top-10: the true value "
             "ranked first / in the first ten (its coverage, the share of targets among the candidates at all, "
             "bounds both); without the LM: public frequency and what the operator gives away (a masked value's "
             "length, linked hashes); floor: the most frequent public value whatever the slot. Percent of the "
             "targets, Wilson 95%; p: exact one-sided McNemar test of the attack's top-1 hits against the floor's "
             "and against the attack without the LM, on the same targets (yes: p <= 0.05).", "",
             "| corpus | operator | spaCy | private documents | targets (documents) | candidates | coverage | top-1 | "
             "top-10 | top-1 without the LM | floor top-1 | p vs floor | p vs without the LM | LM weight | "
             "calibration slots |", "|---|---|---|---:|---:|---:|---|---|---|---|---|---|---|---|---:|"]
    edges = []
    for r in recs:
        c, m = r.config, r.metrics
        edge = _edge(c)
        if edge:
            edges.append(f"{c['corpus']} {c['operator']} ({float(c['weight']):g}, the grid's {edge} edge)")
        slots = c.get("calibration", [{}])[0].get("n", "–") if c.get("calibration") else "–"
        docs = m.get("documents_with_targets")
        lines.append(f"| {c['corpus']} | {c['operator']} | {c['model']} | {c.get('private_documents', '–')} | "
                     f"{int(m['targets'].mean)} ({int(docs.mean) if docs else '–'}) | {c.get('candidates', '–')} | "
                     f"{_pct(m.get('coverage'))} | {_pct(m.get('top1'))} | {_pct(m.get('top10'))} | "
                     f"{_pct(m.get('top1_prior'))} | {_pct(m.get('floor_top1'))} | {_p_yes(m.get('p_floor'))} | "
                     f"{_p_yes(m.get('p_prior'))} | {float(c['weight']):g}"
                     f"{f' ({edge} edge of the grid)' if edge else ''} | {slots} |")
    lines.append("")
    if edges:
        lines += [f"The chosen weight sits at an edge of the grid for {', '.join(edges)}: a weight beyond the grid "
                  "may do better, so those rows may understate the attack.", ""]
    off = [f"{r.config['corpus']} {r.config['operator']}" for r in recs if float(r.config.get("weight", 1)) == 0.0]
    if off:
        lines += [f"LM weight 0 ({', '.join(off)}): on the attacker's own calibration texts the masked LM did not "
                  "raise top-1 over public frequency, so the attack ranks by frequency and what the operator gives "
                  "away alone: there veil's masked LM adds nothing measurable.", ""]
    return lines


# --------------------------------------------------------------------------- 5. re-identification
def _reidentify(recs: list[ResultRecord]) -> list[str]:
    recs = _ops(recs)
    att = recs[0].config.get("attacker", {})
    lines = ["## Re-identification", "",
             f"Attacker: {att.get('citation', 'closed-world authorship attribution')}; "
             f"{att.get('classifier', '')}. Each "
             "candidate's texts are split: half the owner's private documents (released redacted), half the "
             "attacker's public texts. Two attackers per redacted release: plain (trained on the public texts as "
             "they are) and kerckhoffs (trained on them redacted by its own copy of the redactor); the headline is "
             "the stronger by top-1, its p-value Bonferroni-corrected for that choice. Floor: the larger of chance "
             "(1 / candidates) and always naming the candidate with the most public texts; p: exact one-sided "
             "binomial test of the top-1 hits against it (yes: p <= 0.05). Percent of the documents, Wilson 95%; "
             "redacted characters: the share of the private documents' characters inside redacted spans. Read each "
             "operator against `none` (the original text: same documents, same attacker): redaction protects only "
             "as much as it lowers that row, and where `none` itself is near its floor the attack is weak on that "
             "corpus, so a redacted row at the floor says little.", "",
             "| corpus | operator | candidates | private documents / public texts | top-1 | top-5 | MRR | floor top-1 "
             "| p vs floor | headline | top-1 plain | top-1 kerckhoffs | redacted characters | spans per document |",
             "|---|---|---:|---:|---|---|---:|---:|---|---|---:|---:|---:|---:|"]
    for r in recs:
        c, m = r.config, r.metrics
        mrr, spans = m.get("mrr"), m.get("spans_per_document")
        spans = "–" if spans is None else f"{spans.mean:.1f}"
        lines.append(f"| {c['corpus']} | {c['operator']} | {int(m['candidates'].mean)} | "
                     f"{c.get('private_documents', '–')} / {c.get('public_texts', '–')} | {_pct(m['top1'])} | "
                     f"{_pct(m.get('top5'))} | {'–' if mrr is None else f'{mrr.mean:.3f}'} | "
                     f"{_pct(m.get('floor'), False)} | {_p_yes(m.get('p_top1'))} | {c.get('chosen', '–')} | "
                     f"{_pct(m.get('top1[plain]'), False)} | {_pct(m.get('top1[kerckhoffs]'), False)} | "
                     f"{_share(m.get('redacted_char_share'))} | {spans} |")
    lines.append("")
    sizes = {}
    for r in recs:
        c = r.config
        per = c.get("texts_per_candidate", {})
        sizes.setdefault(c["corpus"], [f"{c['corpus']}: candidates are the `{c.get('column')}` values with at least "
                                       f"{c.get('min_texts')} texts, at most {c.get('max_texts')} of them used "
                                       f"({per.get('min')} to {per.get('max')} per candidate, mean {per.get('mean')}),"
                                       f" texts cut to {c.get('max_chars')} characters, seed {c.get('seed')}"])
        found = r.extra.get("entities")
        if found and len(sizes[c["corpus"]]) == 1:
            sizes[c["corpus"]].append("Presidio's spans in the private documents: " + ", ".join(
                f"{k} {v}" for k, v in list(found.items())[:6])
                + (f" and {len(found) - 6} more types" if len(found) > 6 else ""))
    return lines + [f"- {'; '.join(s)}." for s in sizes.values()] + [""]


# --------------------------------------------------------------------------- 6. attribute inference
def _change(rec: ResultRecord, none: ResultRecord | None) -> Metric | None:
    if none is None or rec is none or "rows" not in rec.extra or "rows" not in none.extra:
        return None
    from veil.errors import VeilError
    from veil.experiments.redaction.attributes import advantage_change

    try:
        return advantage_change(rec, none)
    except VeilError:
        return None


def _attackers(rec: ResultRecord) -> list[str]:
    return [k[len("advantage["):-1] for k in rec.metrics if k.startswith("advantage[")]


def _attributes(recs: list[ResultRecord]) -> list[str]:
    groups: dict[tuple, list[ResultRecord]] = {}
    for r in recs:
        c = r.config
        groups.setdefault((c["corpus"], str(c.get("entities")), c.get("model"), str(c.get("seeds")),
                           c.get("max_train")), []).append(r)
    first = recs[0].config
    lines = ["## Attribute inference on encodings of redacted news passages", "",
             f"Threat model: {first.get('threat_model', '')}. Advantage: the attacker's micro-F minus the best "
             f"constant's (the floor), in points, mean over seeds with a t 95% interval; change vs none: the same "
             f"against the original text, with a paired bootstrap 95% interval over the shared test passages. p vs "
             f"floor: per seed a one-sided paired randomization test of the mlp attacker against the floor "
             f"({first.get('resamples', '–')} resamples), the largest p over the seeds (intersection-union: yes only "
             f"when every seed's attacker beats the floor at {first.get('alpha', ALPHA)}). Strongest attacker: the "
             f"largest advantage of the three, with its own p (picked after the fact: not corrected for the choice). "
             f"Names verbatim: passages whose released text still holds the surname "
             "of one of the people it names (Wilson 95%); silver mentions redacted: spaCy sm's PERSON mentions with "
             "every letter redacted (Wilson 95%); main-task accuracy: the publisher head on the released text (t 95% "
             "over seeds).", ""]
    for key, rs in sorted(groups.items(), key=str):
        rs = _ops(rs)
        none = next((r for r in rs if r.config["operator"] == "none"), None)
        attackers = _attackers(rs[0])
        c = rs[0].config
        lines += [f"### {key[0]}: entities {_entities(c.get('entities'))}, spaCy {key[2]}, seeds "
                  f"{', '.join(map(str, c.get('seeds', [])))}, width {c.get('width')}, {c.get('n', '–')} test "
                  "passages"
                  + (f", at most {key[4]} training passages" if key[4] else ""), "",
                  "| operator | mlp advantage | change vs none | p vs floor | seeds above floor | strongest attacker | "
                  + " | ".join(f"{a} advantage" for a in attackers if a != "mlp")
                  + " | names verbatim | silver mentions redacted | main-task accuracy | redacted characters |",
                  "|---|---|---|---|---:|---|" + "---|" * len([a for a in attackers if a != "mlp"])
                  + "---|---|---|---:|"]
        for r in rs:
            m = r.metrics
            adv = {a: m[f"advantage[{a}]"] for a in attackers if f"advantage[{a}]" in m}
            best = max(adv, key=lambda a: adv[a].mean) if adv else "–"
            seeds = m.get("seeds_above_floor[mlp]")
            acc = m.get("test_accuracy")
            acc_s = "–" if acc is None else (f"{100 * acc.mean:.1f}" + (f" [{100 * acc.ci_low:.1f}, "
                                                                      f"{100 * acc.ci_high:.1f}]"
                                                                      if acc.ci_low is not None else ""))
            lines.append(f"| {r.config['operator']} | {_pts(m.get('advantage[mlp]'))} | "
                         f"{'–' if r is none else _pts(_change(r, none))} | {_p_yes(m.get('p_floor[mlp]'))} | "
                         f"{'–' if seeds is None else f'{int(seeds.mean)} of {seeds.n}'} | "
                         f"{best} ({_pts(adv[best]) if adv else '–'}; p {_p_yes(m.get(f'p_floor[{best}]'))}) | "
                         + " | ".join(_pts(adv.get(a)) for a in attackers if a != "mlp")
                         + f" | {_pct(m.get('names_verbatim'))} | {_pct(m.get('silver_person_redacted'))} | {acc_s} | "
                           f"{_share(m.get('redacted_char_share'))} |")
        lines.append("")
    return lines


# --------------------------------------------------------------------------- 7. side by side
def _release_order(name: str) -> tuple[Any, ...]:
    from veil.experiments.redaction.releases import release_order

    return release_order(name)


def side_by_side(kinds: dict[str, list[ResultRecord]]) -> tuple[list[str], dict[str, dict[str, ResultRecord]]]:
    """The releases of the attribute and re-identification records, in order, and each one's records by column
    ("attributes" and each re-identification corpus); only a setting of which some record is not a Presidio
    operator makes a side-by-side table (else ``[]``)."""
    cells: dict[str, dict[str, ResultRecord]] = {}
    groups = {}
    for r in kinds.get("attributes", []):
        c = r.config
        groups.setdefault((str(c.get("entities")), c.get("model"), str(c.get("seeds")), c.get("max_train")),
                          []).append(r)
    if groups:  # the setting with the most releases (the page's main one)
        main = max(groups.values(), key=len)
        for r in main:
            cells.setdefault(str(r.config["operator"]), {})["attributes"] = r
    for r in kinds.get("reidentify", []):
        if r.config.get("max_candidates") is None:
            cells.setdefault(str(r.config["operator"]), {})[f"reidentify {r.config['corpus']}"] = r
    names = sorted(cells, key=_release_order)
    if all(n in OPERATOR_ORDER for n in names):
        return [], {}
    return names, cells


def _side_by_side(kinds: dict[str, list[ResultRecord]], out_dir: Path) -> list[str]:
    from veil.experiments.redaction.releases import guarantee_words

    names, cells = side_by_side(kinds)
    if not names:
        return []
    corpora = sorted({k for c in cells.values() for k in c if k.startswith("reidentify ")})
    attr = next((c["attributes"] for c in cells.values() if "attributes" in c), None)
    lines = ["## Side by side: redaction and the other releases on the same data", "",
             "Each row is one release of the same private data, measured by the same attack code as above (the rows "
             "of the tables above, gathered): the attribute attacker on the encodings of the released news passages "
             "(mlp advantage over the floor, points, t 95% over seeds; main-task accuracy: the owner's head on the "
             "release, which of the 9 publishers a passage comes from), and the re-identifier on the released documents (headline top-1 among the "
             "candidates, Wilson 95%; p: exact binomial test against the floor, yes at 0.05). `metric-dp-eps<E>` "
             "and `deepcandidate-eps<E>` carry a formal guarantee, but of different units (per word; per passage), "
             "so their epsilons are not comparable with each other. DeepCandidate releases a vector: the "
             "re-identifier and the names-verbatim count read text, so they do not apply to it (–); infilling "
             "applies only to redacted spans (its section above). The names-verbatim count is case-sensitive and "
             "metric DP lower-cases every word it releases, so its count says nothing about the names it keeps: "
             "read its attribute advantage.", "",
             "| release | guarantee | main-task accuracy | attribute advantage (mlp) | p vs floor | names verbatim | "
             + " | ".join(f"{c.removeprefix('reidentify ')} re-identification top-1 | p vs floor" for c in corpora)
             + " |",
             "|---|---|---|---|---|---|" + "---|---|" * len(corpora)]
    for n in names:
        row = cells[n]
        a = row.get("attributes")
        acc = None if a is None else a.metrics.get("test_accuracy")
        acc_s = "–" if acc is None else (f"{100 * acc.mean:.1f}" + (f" [{100 * acc.ci_low:.1f}, "
                                                                  f"{100 * acc.ci_high:.1f}]"
                                                                  if acc.ci_low is not None else ""))
        parts = [f"`{n}`", guarantee_words(n), acc_s, _pts(None if a is None else a.metrics.get("advantage[mlp]")),
                 _p_yes(None if a is None else a.metrics.get("p_floor[mlp]")),
                 _pct(None if a is None else a.metrics.get("names_verbatim"))]
        for c in corpora:
            r = row.get(c)
            parts += [_pct(None if r is None else r.metrics.get("top1")),
                      _p_yes(None if r is None else r.metrics.get("p_top1"))]
        lines.append("| " + " | ".join(parts) + " |")
    lines.append("")
    floors = [f"{c.removeprefix('reidentify ')} {_pct(r.metrics.get('floor'), False)}%" for c in corpora
              for r in [next((row[c] for row in cells.values() if c in row), None)] if r is not None]
    if floors:
        lines += [f"Re-identification floors (top-1): {', '.join(floors)}."]
    if attr is not None:
        lines += [f"Attribute setting: {attr.config.get('corpus')}, entities {_entities(attr.config.get('entities'))}"
                  f", seeds {', '.join(map(str, attr.config.get('seeds', [])))}, width {attr.config.get('width')}; "
                  f"the floor's micro-F {_pct(attr.metrics.get('floor_score'), False)}%, the majority publisher "
                  f"{_pct(attr.metrics.get('majority_accuracy'), False)}%."]
    uniform = [(n, cells[n]["attributes"].config.get("defense", {}).get("uniform_output_share")) for n in names
               if "attributes" in cells[n]]
    uniform = [(n, u) for n, u in uniform if u is not None]
    if uniform:
        lines += ["DeepCandidate's releases drawn uniformly among its public candidates (every candidate at the same "
                  "depth for the passage's sentences, so epsilon does not matter for them): "
                  + ", ".join(f"`{n}` {100 * u:.1f}% of the passages" for n, u in uniform) + "."]
    lines.append("")
    return lines + _side_plot(names, cells, out_dir)


def _side_plot(names: list[str], cells: dict[str, dict[str, ResultRecord]], out_dir: Path) -> list[str]:
    pts = [(n, cells[n]["attributes"]) for n in names if "attributes" in cells[n]
           and "test_accuracy" in cells[n]["attributes"].metrics and "advantage[mlp]" in cells[n]["attributes"].metrics]
    if len(pts) < 2:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil._io import atomic_write
    from veil.experiments.redaction.releases import parse_release

    colors = {"none": "black", "redaction": "tab:blue", "metric-dp": "tab:green", "random": "tab:orange",
              "deepcandidate": "tab:red"}
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    placed: list[tuple[float, float]] = []
    for n, r in pts:
        acc, adv = r.metrics["test_accuracy"], r.metrics["advantage[mlp]"]
        fam = parse_release(n).family
        xerr = None if acc.ci_low is None else [[100 * (acc.mean - acc.ci_low)], [100 * (acc.ci_high - acc.mean)]]
        yerr = None if adv.ci_low is None else [[100 * (adv.mean - adv.ci_low)], [100 * (adv.ci_high - adv.mean)]]
        ax.errorbar([100 * acc.mean], [100 * adv.mean], xerr=xerr, yerr=yerr, fmt="o", color=colors[fam],
                    capsize=2, markersize=5)
        x, y = 100 * acc.mean, 100 * adv.mean
        near = sum(abs(x - a) < 2.0 and abs(y - b) < 1.5 for a, b in placed)  # stack labels of a cluster
        placed.append((x, y))
        ax.annotate(n, (x, y), textcoords="offset points", xytext=(6, 4 + 9 * near), fontsize=7)
    for fam, col in colors.items():
        if any(parse_release(n).family == fam for n, _ in pts):
            ax.plot([], [], "o", color=col, label={"none": "original text", "redaction": "Presidio redaction",
                                                   "metric-dp": "word-level metric DP",
                                                   "random": "random same-POS substitution",
                                                   "deepcandidate": "DeepCandidate (SentDP)"}[fam])
    ax.axhline(0, color="grey", lw=0.8, ls="--")
    majority = pts[0][1].metrics.get("majority_accuracy")
    if majority is not None:
        ax.axvline(100 * majority.mean, color="grey", lw=0.8, ls=":")
        ax.annotate("majority publisher", (100 * majority.mean, ax.get_ylim()[1]), textcoords="offset points",
                    xytext=(3, -10), fontsize=7, color="grey")
    ax.set_xlabel("main-task accuracy on the release (which publisher), % (t 95% over seeds)")
    ax.set_ylabel("attribute attacker's advantage over the floor,\npoints (t 95% over seeds)")
    ax.set_title("news passages: who is named (leak, lower is better) against the task (utility)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    path = out_dir / "redaction_side_by_side.png"
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)
    return [f"![attribute advantage against main-task accuracy, one point per release]({path.name})", ""]


# --------------------------------------------------------------------------- the page and the summary
@register_renderer("redaction")
def redaction_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    kinds = by_kind([r for _, r in records])
    lines = _intro(kinds)
    if not kinds:
        lines += ["No redaction records yet (`veil redaction detect`).", ""]
    if "detection" in kinds:
        lines += _detection(kinds["detection"], out_dir)
    if "formats" in kinds:
        from veil.report.redaction_formats import formats_section

        lines += formats_section(kinds["formats"])
    if "news-recall" in kinds:
        lines += _news(kinds["news-recall"])
    if "infill" in kinds:
        lines += _infill(kinds["infill"])
    if "reidentify" in kinds:
        lines += _reidentify(kinds["reidentify"])
    if "attributes" in kinds:
        lines += _attributes(kinds["attributes"])
    lines += _side_by_side(kinds, out_dir)
    commits = sorted({r.git_commit for rs in kinds.values() for r in rs})
    if commits:
        lines += [f"Commits: {', '.join(commits)}."]
    lines += redaction_settings_off_cli(records)
    lines += regenerate_section(redaction_commands(records), "redaction", configs=[r.config for _, r in records])
    return "\n".join(lines)

