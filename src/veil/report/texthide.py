"""Result page for TextHide: Table 1 and Fig. 2 analogues, rendered from results/texthide/*.json."""

from __future__ import annotations

from pathlib import Path

from veil.results import ResultRecord
from veil.report.markdown import register_renderer

# The paper's Table 1 (BERT-base, GLUE dev sets, mean over 5 runs): the closest analogue of each veil task.
PAPER = {
    "rt-polarity": ("SST-2 acc.", 92.4, 91.7, 91.3),
    "hutto-tweets": ("STS-B Pearson", 90.1, 87.0, 86.0),
    "trec-questions": ("CoLA MCC (other single-sentence task)", 58.9, 56.3, 52.3),
    "sms-spam": ("MRPC acc. (a 3.7k-example task)", 86.2, 85.6, 82.6),
}
PAPER_SMALL = ("RTE acc. with (16, 4)", 72.0, 65.2, 54.4)
SMALLEST = "hutto-tweets"  # the task that also runs (16, 4), as the paper does for RTE
COLUMNS = [("baseline", "baseline"), ("intra-m256-k4", "intra (256,4)"), ("inter-m256-k4", "inter (256,4)"),
           ("intra-m16-k4", "intra (16,4)"), ("inter-m16-k4", "inter (16,4)")]


def _primary(rec: ResultRecord) -> str:
    return "test_accuracy" if rec.config.get("task") == "classification" else "test_pearson"


def _points(rec: ResultRecord, base: ResultRecord, key: str) -> float:
    """Change of ``rec`` against ``base`` in points (x100) of metric ``key``."""
    return 100 * (rec.metrics[key].mean - base.metrics[key].mean)


def _cell(rec: ResultRecord | None) -> str:
    if rec is None:
        return "–"
    m = rec.metrics[_primary(rec)]
    sd = f" ± {100 * m.std:.1f}" if m.std is not None else ""
    return f"{100 * m.mean:.1f}{sd}"


def _budget(rec: ResultRecord) -> tuple[int, str]:
    """Training budget (max epochs), then creation time: the larger budget wins when one cell ran twice."""
    return int((rec.config.get("train") or {}).get("epochs") or 0), rec.created


def _index(records: list[tuple[Path, ResultRecord]]) -> dict[tuple[str, str, str], ResultRecord]:
    out: dict[tuple[str, str, str], ResultRecord] = {}
    for _, rec in records:
        c = rec.config
        variant = "baseline" if (c["m"] == "0" and c["k"] == 1) else f"{c['mode']}-m{c['m']}-k{c['k']}"
        key = (c["corpus"], variant, c["setting"])
        if key not in out or _budget(rec) >= _budget(out[key]):
            out[key] = rec
    return out


def _table1(index, setting: str) -> list[str]:
    corpora = sorted({c for (c, _, s) in index if s == setting},
                     key=lambda c: list(PAPER).index(c) if c in PAPER else 99)
    if not corpora:
        return [f"No {setting} runs yet (`veil texthide sweep table1{' --finetune' if setting == 'finetuned' else ''}`).", ""]
    lines = ["| corpus | metric | " + " | ".join(name for _, name in COLUMNS) + " | paper analogue: baseline / intra / inter |",
             "|---" * (len(COLUMNS) + 3) + "|"]
    for corpus in corpora:
        recs = [index.get((corpus, v, setting)) for v, _ in COLUMNS]
        any_rec = next(r for r in recs if r is not None)
        metric = _primary(any_rec).removeprefix("test_")
        paper = PAPER.get(corpus)
        ptxt = f"{paper[0]}: {paper[1]} / {paper[2]} / {paper[3]}" if paper else ""
        if corpus == SMALLEST:
            ptxt += f"; {PAPER_SMALL[0]}: {PAPER_SMALL[1]} / {PAPER_SMALL[2]} / {PAPER_SMALL[3]}"
        lines.append(f"| {corpus} | {metric} | " + " | ".join(_cell(r) for r in recs) + f" | {ptxt} |")
    lines.append("")
    lines += _losses(index, corpora, setting)
    if setting == "finetuned":  # (the frozen setting's other cells are the grid below)
        lines += _other_cells(index, corpora, setting)
    lines += _targets(index, setting)
    return lines


def _other_cells(index, corpora, setting) -> list[str]:
    """Runs outside the table's columns (e.g. mixing without masks, m=0), with their change against the baseline."""
    shown = {v for v, _ in COLUMNS}
    out = []
    for corpus in corpora:
        base = index.get((corpus, "baseline", setting))
        for (c, variant, s), rec in sorted(index.items()):
            if c != corpus or s != setting or variant in shown:
                continue
            key = _primary(rec)
            delta = "" if base is None else \
                f", {_points(rec, base, key):+.1f} against the baseline ({_diff_ci(rec, base, key)})"
            out.append(f"- {corpus} {variant} (outside the table): {_cell(rec)}{delta}.")
    return out + ([""] if out else [])


def _diff_ci(rec: ResultRecord, base: ResultRecord, key: str, level: float = 0.95) -> str:
    """Welch's t interval of ``rec - base`` in points, from the per-seed values; says so when it cannot be formed."""
    return _diff_interval(rec, base, key, level)[2]


def _diff_interval(rec: ResultRecord, base: ResultRecord, key: str,
                   level: float = 0.95) -> tuple[float | None, float | None, str]:
    """(low, high, text) of Welch's t interval of ``rec - base`` in points (None, None, reason) when impossible."""
    a, b = rec.metrics[key].values, base.metrics[key].values
    if len(a) < 2 or len(b) < 2:
        return None, None, f"no interval: {len(a)} vs {len(b)} seed(s), at least 2 each are needed"
    import numpy as np
    from scipy import stats

    a, b = 100 * np.asarray(a, dtype=float), 100 * np.asarray(b, dtype=float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = float(np.sqrt(va + vb))
    if se == 0.0:
        return None, None, f"no interval: the seeds agree exactly ({len(a)} vs {len(b)} seeds)"
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    d = float(a.mean() - b.mean())
    return d - half, d + half, (f"{level:.0%} CI of the difference [{d - half:+.1f}, {d + half:+.1f}] (Welch, "
                                f"{len(a)} vs {len(b)} seeds, {df:.1f} df)")


# The targets on rt-polarity: largest allowed loss against the baseline, in points of accuracy.
TARGETS = (("intra-m256-k4", "intra (256,4)", 3.0), ("inter-m256-k4", "inter (256,4)", 5.0))


def _targets(index, setting: str) -> list[str]:
    base = index.get(("rt-polarity", "baseline", setting))
    if base is None:
        return []
    out = []
    for variant, name, limit in TARGETS:
        rec = index.get(("rt-polarity", variant, setting))
        if rec is None:
            out.append(f"- Target, {name} loses at most {limit:.0f} points on rt-polarity: not run in this setting.")
            continue
        loss = -_points(rec, base, "test_accuracy")
        low, high, ci = _diff_interval(rec, base, "test_accuracy")
        if loss > limit:
            verdict = f"missed by {loss - limit:.1f} points"
        elif low is None:
            verdict = "met on the means; too few seeds for an interval, so not established"
        elif low >= -limit:
            verdict = "met (the whole interval is inside the target)"
        else:
            verdict = (f"met on the means only: the interval reaches {low:+.1f}, so these seeds cannot rule out a "
                       f"loss beyond {limit:.0f} points")
        change = f"it loses {loss:.1f}" if loss >= 0 else f"it scores {-loss:.1f} above the baseline"
        out.append(f"- Target, {name} loses at most {limit:.0f} points on rt-polarity: {change}, {verdict} ({ci}).")
    return out + [""]


def _losses(index, corpora, setting) -> list[str]:
    out = []
    for corpus in corpora:
        base = index.get((corpus, "baseline", setting))
        if base is None:
            continue
        key = _primary(base)
        parts = []
        for variant, name in COLUMNS[1:]:
            rec = index.get((corpus, variant, setting))
            if rec is not None:
                parts.append(f"{name} {_points(rec, base, key):+.1f}")
        if parts:
            out.append(f"- {corpus}: change against the baseline, in points of {key.removeprefix('test_')}: "
                       + ", ".join(parts))
    for (corpus, variant, s), rec in sorted(index.items()):
        epochs = rec.extra.get("best_epochs") or []
        if s == setting and corpus in corpora and epochs and all(e == 1 for e in epochs):
            out.append(f"- {corpus} {variant}: the dev score never improved after the first epoch in any seed "
                       "(training never got past its first epoch on dev; the kept head is that first epoch's).")
        if s == setting and corpus in corpora and epochs and all(e == 0 for e in epochs):
            out.append(f"- {corpus} {variant}: fine-tuning never beat the head-only warm start on dev in any seed, "
                       "so the reported model is the warm-started head on the pretrained encoder.")
    return out + [""]


def _grid(index, out_dir: Path) -> list[str]:
    from veil.experiments.texthide import GRID_K, GRID_M, m_label

    cells = {}
    for m in GRID_M:
        for k in GRID_K:
            variant = "baseline" if (m == 0 and k == 1) else f"intra-m{m_label(m)}-k{k}"
            rec = index.get(("rt-polarity", variant, "frozen"))
            if rec is not None:
                cells[(m_label(m), k)] = rec.metrics["test_accuracy"]
    if not cells:
        return ["No grid runs yet (`veil texthide sweep grid`).", ""]
    ms = [m_label(m) for m in GRID_M]
    lines = ["| m \\ k | " + " | ".join(str(k) for k in GRID_K) + " |", "|---" * (len(GRID_K) + 1) + "|"]
    for m in ms:
        lines.append(f"| {m} | " + " | ".join(
            f"{100 * cells[(m, k)].mean:.1f}" if (m, k) in cells else "–" for k in GRID_K) + " |")
    png = out_dir / "texthide_grid.png"
    _heatmap(cells, ms, list(GRID_K), png)
    return [f"![TextHide (m, k) grid on rt-polarity]({png.name})", "", *lines, ""]


def _heatmap(cells, ms, ks, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from veil._io import atomic_write

    grid = np.full((len(ms), len(ks)), np.nan)
    for i, m in enumerate(ms):
        for j, k in enumerate(ks):
            if (m, k) in cells:
                grid[i, j] = 100 * cells[(m, k)].mean
    fig, ax = plt.subplots(figsize=(5, 5.5))
    im = ax.imshow(grid, cmap="viridis", aspect="auto")
    for i in range(len(ms)):
        for j in range(len(ks)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center",
                        color="white" if grid[i, j] < np.nanmean(grid) else "black")
    ax.set_xticks(range(len(ks)), [str(k) for k in ks])
    ax.set_yticks(range(len(ms)), ms)
    ax.set_xlabel("k (representations mixed)")
    ax.set_ylabel("m (mask pool size)")
    ax.set_title("TextHide intra, rt-polarity test accuracy (%)\nfrozen MiniLM + MLP head")
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


def _training(rec: ResultRecord) -> str:
    t = rec.config.get("train", {})
    text = f"{t.get('epochs')} ep, patience {t.get('patience')}, batch {t.get('batch_size')}"
    if rec.config.get("finetune"):
        text += f", encoder lr {t.get('encoder_lr')}, warm start {t.get('head_warmup_epochs', 0)} ep"
    return text


@register_renderer("texthide")
def texthide_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    index = _index(records)
    lines = [
        "# TextHide: utility on veil's corpora",
        "",
        "Huang et al. 2020, Table 1 and Fig. 2, re-run on offline corpora with all-MiniLM-L6-v2 (d=384) instead of "
        "BERT-base. Numbers are test-split scores (x100), mean ± sd over seeds; each seed has its own secret mask pool "
        "and mixing randomness from the OS CSPRNG. Reproduce with `veil texthide sweep table1 [--finetune]` and "
        "`veil texthide sweep grid`, then `veil report`.",
        "",
        "## Table 1 analogue, frozen encoder (MLP head on cached embeddings)",
        "",
        *_table1(index, "frozen"),
        "## Table 1 analogue, fine-tuned encoder",
        "",
        *_table1(index, "finetuned"),
        "## Fig. 2 analogue: the (m, k) grid on rt-polarity (intra, frozen encoder, test accuracy)",
        "",
        *_grid(index, out_dir),
        "## Runs",
        "",
        "Training: at most this many epochs, early-stopping patience, batch size, and for fine-tuned runs the "
        "head-only warm-start epochs on the frozen encoder (best epoch 0 = the warm start was kept).",
        "",
        "| experiment | seeds | train/dev/test | training | best epochs | wall time |",
        "|---|---|---|---|---|---|",
    ]
    for path, rec in sorted(records, key=lambda x: x[1].experiment):
        e = rec.extra
        lines.append(f"| `{path.name}` | {','.join(map(str, rec.config['seeds']))} | "
                     f"{e.get('n_train')}/{e.get('n_dev')}/{e.get('n_test')} | {_training(rec)} | "
                     f"{e.get('best_epochs')} | {rec.wall_time_s:.0f} s |")
    lines += ["", "## Discussion", "", DISCUSSION]
    return "\n".join(lines)


DISCUSSION = """\
Why our numbers differ from the paper's (every number above is computed from the result files):

- **Encoder and setting.** The paper fine-tunes BERT-base (d=768) on GLUE; veil uses all-MiniLM-L6-v2 (d=384).
  In the frozen setting only the MLP head learns, so it alone must become invariant to the secret sign masks.
  Masks, not mixing, are what cost utility with a frozen encoder: compare the m=0 and m>0 rows of the grid.
  A sign mask keeps only the coordinates' magnitudes, so a frozen head must either learn a separate decision
  rule per mask (a few dozen examples per mask and epoch at m=256) or rely on magnitude features that the
  frozen encoder never had a reason to make informative. A fine-tuned encoder can move the task signal to
  where the masks do not destroy it, which is why the fine-tuned table is the one to compare with the paper.
- **Fine-tuning recipe.** Fine-tuned runs first train the head alone on the frozen encoder's embeddings
  with the same secret pool (60 epochs, the best dev epoch kept), then fine-tune encoder and head together
  for 4 epochs at batch 32 (the paper's batch sizes are 16 and 32). The warm start is epoch 0 in the run
  table, and fine-tuning must beat it on dev to replace it. The paper fine-tunes from a random head. We
  depart from it because our first fine-tuned run from a random head (2000 training examples, 3 epochs;
  `rt-polarity-intra-m256-k4-finetuned.json` at commit dda1094) never got past a constant predictor within
  a CPU budget. The baseline gets the same warm start, so the comparison stays like for like.
- **Fine-tuned TextHide above the fine-tuned baseline.** Mixing k examples and their labels is mixup, a
  known regulariser, and rt-polarity's 10k training snippets are few enough for it to help. The mix-only run
  (m=0, k=4, listed under the fine-tuned table) isolates it: it scores above the baseline by itself, so the
  cost of the secret masks is the gap between the mix-only run and the (256, 4) runs, not the gap to the
  baseline. The baseline also peaked on dev before its last epoch (see the run table), and its seeds
  spread more than TextHide's. A baseline tuned on its own (the paper searches learning rate, epochs, batch
  size and dropout for each) could close some of the gap. We ran one recipe for all cells.
- **Inter mode** mixes floor(k/2) public tweets into every private representation, so half of each mixture
  carries no label signal. With a frozen encoder it costs more than intra mode, and it can make training
  stall at its first epoch (flagged above when that happened in every seed). When fine-tuning, the public
  tweets (the first 5000) are re-encoded by the current encoder before every epoch, as in Algorithm 2.
- **Corpora.** No GLUE task is available offline. rt-polarity is the Rotten Tomatoes source SST-2 was built from,
  but as whole snippets, without SST's phrase-level training labels, so the baseline is lower than SST-2's.
  hutto-tweets stands in for STS-B as the regression task; trec-questions and sms-spam have no GLUE analogue.
- **Budget.** Everything runs on 2 CPU cores. Frozen Table 1 runs train up to 300 epochs with early
  stopping on dev (patience 50); masked heads converge slowly, with best epochs in the hundreds. The (m, k)
  grid keeps 60 epochs (patience 15), so its large-m cells, whose best epochs sit near that cap, understate
  what longer training reaches (compare its (256, 4) cell with the frozen Table 1 cell). Fine-tuned runs
  take about half an hour per seed on one core, so they cover rt-polarity only, with fewer seeds (see the
  run table).
- **No tuning on test data.** Hyperparameters were fixed before the test split was scored; early stopping uses
  the dev split only. The fine-tuning recipe (warm start, 4 epochs, batch 32, encoder lr 2e-5) was fixed
  before the reported runs; one probe run of the intra (256, 4) cell with it was not followed by any change.
"""
