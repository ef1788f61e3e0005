"""Result page for embedding inversion (``results/inversion``): what the inverter, the nearest public sentence and a
bag-of-words predictor write back from each release, with the correction curve and examples."""

from __future__ import annotations

from pathlib import Path

from veil.report.markdown import proportion_interval, regenerate_section, register_renderer
from veil.results import Metric, ResultRecord

_METHODS = (("inverter", "inverter + correction"), ("nearest_public", "nearest public sentence"),
            ("bag_of_words", "bag of words"), ("floor", "floor: inverter on a random public candidate"),
            ("bag_of_words_floor", "floor of the bag of words: it on the same random candidates"),
            ("released_text", "the released text itself, read directly"))
_COLUMNS = (("token_f1", "token F1"), ("bleu", "BLEU-4"), ("rouge_l", "ROUGE-L"), ("exact_match", "exact"),
            ("cosine", "cosine"), ("names_recovered", "names"))
_RELEASE_ORDER = ("none", "texthide-inference", "deepcandidate", "truncation", "metric-dp", "redaction")


def _m(m: Metric | None, digits: int = 1) -> str:
    if m is None:
        return "–"
    if m.ci_low is None or m.ci_high is None:
        return f"{m.mean:.{digits}f}"
    return f"{m.mean:.{digits}f} [{m.ci_low:.{digits}f}, {m.ci_high:.{digits}f}]"


def _verdict(g: Metric) -> str:
    """A paired gain's verdict: above or below where its 95% interval excludes 0."""
    if g.ci_low is not None and g.ci_low > 0:
        return "**above** it (the paired 95% interval excludes 0)"
    if g.ci_high is not None and g.ci_high < 0:
        return "below it (the paired 95% interval excludes 0)"
    return "not distinguishable from it (the paired 95% interval includes 0)"


def _exact(m: Metric | None) -> str:
    """Exact match (a share of texts): a percentile interval collapsed at 0 or 100 becomes Clopper-Pearson's."""
    if m is None or m.ci_low is None or m.ci_high is None:
        return _m(m)
    low, high = proportion_interval(m.mean / 100, m.n, m.ci_low / 100, m.ci_high / 100, m.ci_level)
    return f"{m.mean:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def _key(rec: ResultRecord) -> tuple:
    c = rec.config["cell"]
    return (c["corpus"], _RELEASE_ORDER.index(c["release"]) if c["release"] in _RELEASE_ORDER else 9,
            c.get("epsilon") or 0.0, c.get("m") or 0, c.get("operator") or "", c["inverter"], c["steps"],
            c["queries"], c.get("shortlist") or 0, c.get("batch_size") or 0)


def _release(c: dict) -> str:
    if c.get("m") is not None:
        return f"{c['release']} m={c['m']}"
    if c.get("operator") is not None:
        return f"{c['release']} ({c['operator']})"
    return c["release"] if c.get("epsilon") is None else f"{c['release']} ε={c['epsilon']:g}"


def _commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    folder = records[0][0].parent
    results = f"{folder.parent.name}/{folder.name}"
    out = []
    for _, r in sorted(records, key=lambda pr: _key(pr[1])):
        c = r.config["cell"]
        parts = [f"veil attack invert --corpus {c['corpus']} --defense {c['release']}"]
        if c.get("epsilon") is not None:
            parts.append(f"--epsilon {c['epsilon']:g}")
        if c.get("m") is not None:
            parts.append(f"--m {c['m']}")
        if c.get("operator") is not None:
            parts.append(f"--operator {c['operator']}")
        parts.append(f"--limit {c['queries']} --inverter {c['inverter']} --steps {c['steps']} --beam {c['beam']}")
        if c.get("shortlist") is not None:
            parts.append(f"--shortlist {c['shortlist']}")
        if c.get("batch_size") is not None:
            parts.append(f"--batch-size {c['batch_size']}")
        if not c.get("quick", True):
            parts.append("--full")
        parts.append(f"--seed {c['seed']} --results {results}")
        out.append(" ".join(parts))
    return out


def _two_panels(path: Path, series: list[tuple[str, list[float], list[float], list[float]]],
                labels: tuple[str, str, str]) -> None:
    """Two side-by-side line plots of token F1 (one line per ``(label, x_left, x_right, f1)``), written to
    ``path`` atomically; ``labels``: the left x axis, the y axis, the right x axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil._io import atomic_write

    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.3))
    for label, left, right, f1 in series:
        axes[0].plot(left, f1, marker="o", markersize=3, label=label)
        axes[1].plot(right, f1, marker="o", markersize=3, label=label)
    axes[0].set_xlabel(labels[0])
    axes[0].set_ylabel(labels[1])
    axes[1].set_xlabel(labels[2])
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


def _plot_curves(records: list[ResultRecord], path: Path) -> None:
    series = []
    for rec in records:
        c, curve = rec.config["cell"], rec.extra.get("curve") or []
        series.append((f"{c['corpus']}, {_release(c)}, {c['inverter']}", [p["step"] for p in curve],
                       [p["seconds_per_text"] for p in curve], [p["token_f1"] for p in curve]))
    _two_panels(path, series, ("correction steps", "token F1 (%)", "seconds per text (cumulative)"))


def _plot_training(curves: dict[str, list[dict]], path: Path) -> None:
    series = [(name, [p["step"] for p in curve], [p["minutes"] for p in curve], [p["token_f1"] for p in curve])
              for name, curve in curves.items()]
    _two_panels(path, series, ("training steps", "held-out token F1 (%), greedy",
                               "training minutes (on the machine that trained it)"))


def _training_section(recs: list[ResultRecord], out_dir: Path) -> list[str]:
    """The learning curve of each inverter the records used (from the inverter block of the newest record)."""
    seen: dict[str, dict] = {}
    for rec in sorted(recs, key=lambda r: r.created):
        inv = rec.config.get("inverter") or {}
        if inv.get("curve"):
            seen[str(inv["name"])] = inv
    if not seen:
        return []
    png = out_dir / "inversion_training.png"
    _plot_training({n: inv["curve"] for n, inv in seen.items()}, png)
    lines = ["## The inverters' learning curves", "",
             "Held-out token F1 of the greedy decode (500 sentences of the training corpora's dev splits) against "
             "training steps and minutes, as each inverter's manifest records it; the saved weights are those of "
             "the best evaluation.", "", f"![inverter learning curves]({png.name})", "",
             "| inverter | trained on | steps | minutes | held-out token F1 | exact | held-out token F1 here |",
             "|---|---|---|---|---|---|---|"]
    for name, inv in seen.items():
        held = inv.get("heldout") or {}
        here = inv.get("heldout_here") or (inv.get("transfer") or {}).get("heldout_here") or {}
        last = inv["curve"][-1]
        lines.append(f"| `{name}` | {inv.get('device') or 'cpu'} | {last['step']} | {last['minutes']:.1f} | "
                     f"{held.get('token_f1', float('nan')):.1f} | {held.get('exact_match', float('nan')):.1f} | "
                     + (f"{here['token_f1']:.1f} |" if isinstance(here.get("token_f1"), (int, float)) else "- |"))
    lines.append("")
    for name, inv in seen.items():
        t = inv.get("transfer")
        if t:
            lines += [_transfer_sentence(name, t), ""]
    return lines


def _transfer_sentence(name: str, t: dict) -> str:
    """How an imported inverter came here, from the transfer block `veil models import` writes into its manifest."""
    exported = t.get("exported") or {}
    check = t.get("rounding_check") or {}
    here = t.get("heldout_here") or {}
    parts = [f"`{name}` was trained on {exported.get('device') or 'another machine'} "
             f"(`{exported.get('by', '?')}`, {str(exported.get('created', '?'))[:10]}) and imported here with "
             f"`veil models import` ({str(t.get('imported', '?'))[:10]}): {t.get('rounding', 'no rounding stated')}"]
    if check:
        parts.append(f"; MiniLM's vectors with float16-rounded weights keep a minimum cosine of "
                     f"{check.get('min_cosine', float('nan')):.7f} to the float32 ones over {check.get('sentences')} "
                     "training sentences")
    if isinstance(here.get("token_f1"), (int, float)):
        parts.append(f"; decoding this machine's vectors of the {here.get('sentences')} held-out sentences with the "
                     f"widened weights gives token F1 {here['token_f1']:.1f} (\"held-out token F1 here\")")
    return "".join(parts) + "."


#: the full inverter's target on rt-polarity (Li et al.'s GEIA decoder reaches 47 token F1 on GTR embeddings)
TARGET_F1, TARGET_GAIN = 45.0, 10.0


def _target_section(recs: list[ResultRecord]) -> list[str]:
    """The full inverter against its target on rt-polarity's undefended vectors: token F1 >= 45 with correction,
    and >= 10 points above each baseline (met when the paired 95% interval lies at or above 10)."""
    full = [r for r in recs if r.config["cell"]["inverter"] == "inverter" and r.config["cell"]["corpus"] ==
            "rt-polarity" and r.config["cell"]["release"] == "none" and r.config["cell"].get("shortlist") is None]
    if not full:
        return ["## Target: the full inverter on rt-polarity", "",
                "No record of the full inverter on rt-polarity's vectors yet (`veil models import DIR` or `veil "
                "models train inverter`, then `veil attack invert --corpus rt-polarity --defense none --inverter "
                "inverter --steps 5 --limit 100`).", ""]
    rec = max(full, key=lambda r: (r.config["cell"]["steps"], r.config["cell"]["queries"]))
    c, f1 = rec.config["cell"], rec.metrics["inverter_token_f1"]
    met = f1.ci_low is not None and f1.ci_low >= TARGET_F1
    lines = ["## Target: the full inverter on rt-polarity", "",
             f"With the full inverter and {c['steps']} correction steps on {rec.config['queries']['n']} rt-polarity "
             f"texts (never learned from). Targets: token F1 at least {TARGET_F1:g} (Li et al.'s GEIA decoder "
             f"reaches 47 on GTR embeddings) and at least {TARGET_GAIN:g} points above each baseline; a target is "
             "met when its 95% interval (bootstrap over the texts; paired for the gains) lies at or above it.", "",
             "| target | measured | verdict |", "|---|---|---|",
             f"| token F1 >= {TARGET_F1:g} | {_m(f1)} | " + ("met" if met else
                                                            f"not met: the mean is {f1.mean - TARGET_F1:+.1f} points "
                                                            "from it" + ("" if f1.mean < TARGET_F1 else
                                                                         ", the interval reaches below it")) + " |"]
    for key, title in (("nearest_public", "the nearest public sentence"), ("bag_of_words", "the bag of words")):
        g = rec.metrics.get(f"gain_over_{key}_token_f1")
        if g is None:
            continue
        ok = g.ci_low is not None and g.ci_low >= TARGET_GAIN
        lines.append(f"| >= {TARGET_GAIN:g} points above {title} | {_m(g)} | " +
                     ("met" if ok else f"not met: the mean is {g.mean - TARGET_GAIN:+.1f} points from it" +
                      ("" if g.mean < TARGET_GAIN else ", the interval reaches below it")) + " |")
    lines += ["", "The correction curve and the inverter's learning curve are below.", ""]
    return lines


def _seen_queries(rec: ResultRecord) -> str:
    """Whether the queried texts could include sentences the inverter learned from: records made before queries left
    those out, on a corpus among the inverter's public training corpora, are marked."""
    q = rec.config.get("queries") or {}
    corpus = rec.config["cell"]["corpus"]
    # the inverter learns from public train splits: test documents were never among its sentences
    learned = corpus in ((rec.config.get("public") or {}).get("corpora") or []) and \
        "test documents" not in str(q.get("from"))
    if q.get("unseen"):
        left = int(q.get("excluded_seen") or 0)
        return (f"The queries were drawn from the private items that are none of the inverter's training sentences "
                f"({left} left out)." if left else "")
    if learned:
        return (f"**This record's queries may include sentences the inverter learned from** ({corpus} is one of its "
                "training corpora, and the record predates the rule that leaves them out): re-make it with `--force`.")
    return ""


def _bag_of_words_budget(b: dict) -> str:
    """Whether the bag-of-words baseline's budget was enough: where it stopped, and its held-out curve's last gain
    (a baseline stopped by its step cap while still rising is weaker than it could be, and a gain over it flatters
    the inverter)."""
    curve = b.get("curve") or []
    if not curve:
        return ""
    best = max(r["dev_token_f1"] for r in curve)
    head = (f"The bag of words trained {b.get('steps')} steps on {b.get('train_sentences'):,} public sentences "
            f"(held-out token F1 {best:.1f} at step {b.get('selected_step')})")
    if b.get("stopped") == "patience":
        return head + f": it stopped early ({b.get('patience')} evaluations without a gain), so its budget was enough."
    tail = [r for r in curve if r["step"] >= curve[-1]["step"] - 10 * int(b.get("eval_every") or 1)]
    rise = tail[-1]["dev_token_f1"] - tail[0]["dev_token_f1"]
    why = "its step cap" if b.get("stopped") == "max_steps" else "its minute cap (cut short)"
    return (head + f": it stopped at {why}, still gaining {rise:+.1f} points over its last "
            f"{tail[-1]['step'] - tail[0]['step']:,} steps, so a longer fit would likely be stronger and the gain "
            "over it smaller.")


@register_renderer("inversion")
def inversion_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = sorted((r for _, r in records), key=_key)
    lines = ["# Results: embedding inversion (GEIA, Vec2Text)", "",
             "See [the user page](../inversion.md) for the inverter, the correction and the threat model. Each row: "
             "one release of the private texts of a corpus, inverted by veil's inverter with correction by "
             "re-embedding and by the two baselines, on the same released vectors; percentile bootstrap 95% "
             "intervals over the queried texts. Token F1, ROUGE-L, exact match and names are percentages; BLEU-4 "
             "is a corpus score; cosine is between the MiniLM vectors of the reconstruction and of the original. "
             "The bag of words outputs words, not a sentence (BLEU and ROUGE-L low by construction).", ""]
    if any(r.config["cell"]["inverter"] == "inverter-quick" for r in recs):
        lines += ["**Records made with `inverter-quick`** (the small model of the tests: 10000 news-articles "
                  "sentences) say how far a small inverter gets, not what veil's full inverter recovers; they are "
                  "no verdict on a defense beyond what their gains show.", ""]
    lines += _target_section(recs)
    for rec in recs:
        c = rec.config["cell"]
        inv = rec.config.get("inverter", {})
        held = (inv.get("heldout") or {}).get("token_f1")
        lines += [f"## {c['corpus']}, release: {_release(c)}, `{c['inverter']}`", "",
                  f"{rec.config['queries']['n']} private texts: {rec.config['queries']['from']}; inverter "
                  f"`{c['inverter']}` ({inv.get('train_sentences')} training sentences, {inv.get('steps_trained')} "
                  f"steps" + (f", held-out token F1 {held:.1f}" if isinstance(held, (int, float)) else "")
                  + f"), {c['steps']} correction steps, beam {c['beam']}"
                  + ("" if c.get("shortlist") is None else f", only the {c['shortlist']} edits per text and step "
                                                           "ranked highest by the cosine's gradient re-embedded "
                                                           "(`--shortlist`)")
                  + f"; code {rec.git_commit}."
                  + (f" **The inverter was cut short by its minute cap** at step {inv.get('steps_trained')} of "
                     f"{inv.get('planned_steps')}: a weaker model than its configuration, so this record is a lower "
                     "bound, not a result (`veil models train inverter` resumes it)."
                     if inv.get("stopped") == "budget" else ""), "",
                  "| method | " + " | ".join(t for _, t in _COLUMNS) + " |", "|---" * (len(_COLUMNS) + 1) + "|"]
        for key, title in _METHODS:
            if f"{key}_token_f1" not in rec.metrics:
                continue
            cells = [_exact(rec.metrics.get(f"{key}_{col}")) if col == "exact_match" else
                     _m(rec.metrics.get(f"{key}_{col}"), 3 if col == "cosine" else 1) for col, _ in _COLUMNS]
            lines.append(f"| {title} | " + " | ".join(cells) + " |")
        lines.append("")
        unmask, cos = rec.config["release"].get("unmask"), rec.metrics.get("unmask_cosine")
        if unmask and cos is not None:
            lines += [f"The attacker unmasked the release first: from the {unmask['encodings']} inference encodings "
                      f"it recovered {unmask['masks_found']} masks of the pool of {c['m']} (statistics from public "
                      f"text only) and assigned {unmask['assigned']} encodings; the unmasked vectors of the queried "
                      f"texts have cosine {cos.mean:.4f} [{cos.ci_low:.4f}, {cos.ci_high:.4f}] with the texts' own "
                      f"(1: the masking is undone exactly).", ""]
        gains = [(k, t) for k, t in (("gain_over_nearest_public_token_f1", "the nearest public sentence"),
                                      ("gain_over_bag_of_words_token_f1", "the bag of words"),
                                      ("gain_over_floor_token_f1", "the floor (a random public candidate)"),
                                      ("gain_over_released_text_token_f1", "the released text itself"))
                 if k in rec.metrics]
        # the floor is a clean public vector: DeepCandidate's own kind of release, not a noised or rewritten one
        unlike = ("" if c["release"] == "deepcandidate" else
                  " The floor is a clean public vector, unlike this release, so a difference from it is no verdict on "
                  "the defense (docs/inversion.md).")
        for k, title in gains:
            g = rec.metrics[k]
            lines.append(f"- Inverter minus {title}, token F1: {_m(g)} points: {_verdict(g)}."
                         + (unlike if k == "gain_over_floor_token_f1" else ""))
        g = rec.metrics.get("bag_of_words_gain_over_floor_token_f1")
        if g is not None:
            lines.append(f"- Bag of words minus its floor (the bag of words on the same random public candidates), "
                         f"token F1: {_m(g)} points: {_verdict(g)}.{unlike}")
        seen = _seen_queries(rec)
        if seen:
            lines.append(f"- {seen}")
        bow = _bag_of_words_budget(rec.config.get("bag_of_words") or {})
        if bow:
            lines.append(f"- {bow}")
        lines.append("")
    curved = [r for r in recs if r.extra.get("curve")]
    if curved:
        png = out_dir / "inversion_correction.png"
        _plot_curves(curved, png)
        lines += ["## Correction by re-embedding", "",
                  "Token F1 of the inverter's output after each correction step (step 0: the beam's hypotheses "
                  "reranked by the cosine of their re-embedding with the released vector), and the cumulative cost "
                  "per text on the machine that made the record.", "", f"![correction curve]({png.name})", "",
                  "| corpus | release | inverter | step | token F1 | BLEU-4 | cosine to the original | cosine to the "
                  "released vector | seconds per text |", "|---" * 9 + "|"]
        for rec in curved:
            c = rec.config["cell"]
            for p in rec.extra["curve"]:
                lines.append(f"| {c['corpus']} | {_release(c)} | `{c['inverter']}` | {p['step']} | {p['token_f1']:.1f} | "
                             f"{p['bleu']:.1f} | {p['cosine']:.3f} | {p['target_cosine']:.3f} | "
                             f"{p['seconds_per_text']:.2f} |")
        lines.append("")
    lines += _training_section(recs, out_dir)
    lines += ["## Examples", "", "The first queried texts of each record, next to what each method wrote back "
              "(the corpora are public; the inverter writes lower-cased WordPiece text).", ""]
    for rec in recs:
        c = rec.config["cell"]
        examples = rec.extra.get("examples", [])[:5]
        cols = (("original", "original"),) + ((("released-text", "released text"),)
                                              if any("released-text" in ex for ex in examples) else ()) + (
            ("inverter", "inverter"), ("nearest-public", "nearest public"), ("bag-of-words", "bag of words"))
        lines += [f"### {c['corpus']}, {_release(c)}, `{c['inverter']}`", "", "| " + " | ".join(t for _, t in cols) + " |",
                  "|---" * len(cols) + "|"]
        for ex in examples:
            cells = [ex.get(k, "") for k, _ in cols]
            lines.append("| " + " | ".join(x.replace("|", "\\|").replace("\n", " ")[:300] for x in cells) + " |")
        lines.append("")
    lines += regenerate_section(_commands(records), "inversion", configs=[r.config["cell"] for _, r in records])
    return "\n".join(lines) + "\n"
