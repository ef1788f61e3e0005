"""The commands that regenerate each results page's records, derived from the records' own configs.

One function per page; each returns ``veil ...`` command lines (every option one the CLI has; a test parses them
against the command tree). ``regenerate_section`` in ``veil.report.markdown`` turns them into the page's last
section. SentDP and audit live in ``sentdp_commands``, TextHide in ``texthide``.
"""

from __future__ import annotations

import re
from pathlib import Path

from veil.results import ResultRecord

__all__ = ["folder_of", "parsing_commands", "gradients_commands", "bench_commands", "attributes_commands",
           "federated_commands", "retrieval_commands", "texthide_attack_commands", "redaction_commands",
           "redaction_settings_off_cli"]

_LEVELS = ("none", "P1", "P2", "P3", "P4", "P5")


def folder_of(records: list[tuple[Path, ResultRecord]]) -> str:
    """``results/<method>`` as the records' own folder names it (parent/name)."""
    folder = records[0][0].parent
    return f"{folder.parent.name}/{folder.name}"


def _join(values) -> str:
    return ",".join(str(v) for v in values)


def _num(v) -> str:
    return f"{float(v):g}"


def parsing_commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """One ``veil parse sweep`` per (defense, privacy weight), with the parsers, attackers, levels and seeds run."""
    if not records:
        return []
    groups: dict[tuple, list[ResultRecord]] = {}
    for _, r in records:
        c = r.config
        if not (r.experiment.startswith("eval-") or r.experiment.startswith("attack-")):
            continue
        defense = c.get("defense", "random")
        weight = float(c.get("obfuscator", {}).get("training", {}).get("training", {}).get("privacy_weight") or 0.0)
        neural_minutes = c.get("obfuscator", {}).get("training", {}).get("training", {}).get("max_minutes")
        key = (defense, weight, c.get("treebank"), c.get("n_test"), c.get("attack_train"), c.get("attack_minutes"),
               c.get("seed"), neural_minutes, c.get("mlm") or "mlm", c.get("attack_steps"))
        groups.setdefault(key, []).append(r)
    out, results = [], folder_of(records)
    for (defense, weight, treebank, n_test, train, minutes, seed, nmin, mlm, steps), rs in sorted(
            groups.items(), key=lambda kv: (kv[0][0] != "random", str(kv[0]))):
        parsers = sorted({r.config["parser"] for r in rs if "parser" in r.config})
        attackers = sorted({r.config["attacker"] for r in rs if "attacker" in r.config})
        levels = [lv for lv in _LEVELS if any(r.config.get("level") == lv for r in rs)]
        parts = [f"veil parse sweep --defense {defense}", f"--parsers {_join(parsers)}" if parsers else "",
                 f"--attackers {_join(attackers)}" if attackers else "", f"--levels {_join(levels)}",
                 f"--treebank {treebank} --n-test {n_test} --train-sentences {train} --minutes {_num(minutes)} "
                 f"--seed {seed}"]
        if steps is not None:
            parts.append(f"--attack-steps {steps}")
        if mlm != "mlm":
            parts.append(f"--mlm {mlm}")
        if defense == "neural":
            seeds = sorted({int(r.config.get("training_seed", 0)) for r in rs})
            parts.append(f"--training-seeds {_join(seeds)}")
            if nmin is not None:
                parts.append(f"--neural-minutes {_num(nmin)}")
            parts.append(f"--privacy-weight {_num(weight)}")
        out.append(" ".join(p for p in parts if p) + f" --results {results}")
    return out


def gradients_commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """``veil attack gradmatch-table`` for Table 2, ``veil federated analytic-sweep`` / ``chain-sweep`` for the taps."""
    if not records:
        return []
    out, results = [], folder_of(records)
    table2 = [r for _, r in records if r.experiment == "table2"]
    if table2:
        out.append(_table2_command(table2, results))
    for kind, sub in (("tap-analytic", "analytic-sweep"), ("tap-chain", "chain-sweep")):
        taps = [(p, r) for p, r in records if r.experiment == kind]
        by_folder: dict[tuple, list[tuple[Path, ResultRecord]]] = {}
        for p, r in taps:
            tap = Path(str(r.config.get("tap", "")))
            rounds = re.search(r"-r(\d+)-", tap.name)
            corpus = r.config.get("corpus") or tap.name.split("-alg2-")[0].split("-fedavg-")[0]
            by_folder.setdefault((str(tap.parent), corpus, rounds.group(1) if rounds else None), []).append((p, r))
        for (taps_dir, corpus, rounds), items in sorted(by_folder.items()):
            sizes = sorted({int(r.config["batch_size"]) for _, r in items
                            if r.config.get("client_mode") == "alg2" and not re.search(r"-drop", p.name)
                            and r.config.get("defense", {}).get("name") == "texthide"})
            if sizes:
                parts = [f"veil federated {sub} --corpus {corpus} --batch-sizes {_join(sizes)}"]
                if sub == "chain-sweep" and rounds:
                    parts.append(f"--rounds {rounds}")
                out.append(" ".join(parts) + f" --taps {taps_dir} --results {results}")
            dp = sorted({(int(r.config["batch_size"]), dpc["clip"], dpc["noise_multiplier"]) for _, r in items
                         if isinstance(dpc := (r.config.get("run") or {}).get("differential_privacy"), dict)})
            for batch, clip, noise in dp:  # veil federated dp-sweep: the run without DP and one per placement
                out.append(f"veil federated dp-sweep --corpus {corpus}" + (f" --rounds {rounds}" if rounds else "")
                           + f" --batch-size {batch} --clip {clip:g} --noise {noise:g} --taps {taps_dir} "
                           f"--results {results}")
    return out


def _table2_command(table2: list[ResultRecord], results: str) -> str:
    cells = [r.config.get("cell", {}) for r in table2]
    ks = sorted({int(c["k"]) for c in cells if c.get("k") not in (None, "none", 0)})
    parts = [f"veil attack gradmatch-table --k {_join(ks)} --d {_join(sorted({int(c['d']) for c in cells}))}"]
    for opt, key in (("--runs", "runs"), ("--seed", "seed"), ("--placement", "placement"),
                     ("--activation", "activation"), ("--max-evals", "max_evals")):
        values = sorted({c[key] for c in cells if c.get(key) is not None}, key=str)
        if len(values) == 1:
            parts.append(f"{opt} {values[0]}")
    parts.append("--baseline" if any(c.get("k") in (None, "none", 0) for c in cells) else "--no-baseline")
    return " ".join(parts) + f" --results {results}"


def bench_commands(cells: list[dict], folder: str) -> list[str]:
    """``veil bench`` with the corpora, seed and queries its cells ran (``--out`` is the bench's results folder)."""
    if not cells:
        return []
    configs = [c.get("cell", {}).get("config", {}) for c in cells]
    corpora = sorted({c.get("cell", {}).get("corpus") for c in cells if c.get("cell", {}).get("corpus")})
    parts = ["veil bench"]
    if any(c.get("quick") for c in configs):
        parts.append("--quick")
    parts.append(f"--corpora {_join(corpora)}")
    for opt, key in (("--seed", "seed"), ("--queries", "queries"), ("--key-seed", "key_seed"), ("--limit", "limit")):
        values = sorted({c.get(key) for c in configs if c.get(key) is not None})
        if len(values) == 1:
            parts.append(f"{opt} {values[0]}")
    return [" ".join(parts) + f" --out {folder}"]


def attributes_commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """One ``veil adversarial sweep`` per (corpus, encoder, width), with its seeds and defenses."""
    if not records:
        return []
    from veil.report.attributes import ORDER

    groups: dict[tuple, list[ResultRecord]] = {}
    for _, r in records:
        c = r.config
        groups.setdefault((c["corpus"], c["encoder"], int(c["width"]), c.get("epochs"), c.get("max_train")),
                          []).append(r)
    out, results = [], folder_of(records)
    for (corpus, encoder, width, epochs, max_train), rs in sorted(groups.items(), key=str):
        seeds = sorted({int(r.config["seed"]) for r in rs})
        defenses = [d for d in ORDER if any(r.config["defense"] == d for r in rs)]
        parts = [f"veil adversarial sweep --corpus {corpus} --encoder {encoder} --width {width} --seeds {_join(seeds)}",
                 f"--defenses {_join(defenses)}"]
        if epochs is not None:
            parts.append(f"--epochs {epochs}")
        if max_train:
            parts.append(f"--max-train {max_train}")
        out.append(" ".join(parts) + f" --results {results}")
    return out


def _engine(value) -> str:
    return "reference" if str(value) in ("reference", "in-process") else "flower"


def federated_commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """``veil federated sweep`` for the utility grid (20 rounds, frozen) and one ``veil federated run`` per other run."""
    if not records:
        return []
    out, results = [], folder_of(records)
    grid = [r for _, r in records if r.config.get("rounds") == 20 and not r.config.get("finetune")]
    if grid:
        clients = sorted({int(r.config["clients"]) for r in grid} - {1})
        alphas = sorted({float(r.config["alpha"]) for r in grid})
        seeds = sorted({int(r.config["seed"]) for r in grid})
        engines = sorted({_engine(r.config.get("engine")) for r in grid if r.config.get("engine") not in ("none",)})
        out.append(f"veil federated sweep --corpus {grid[0].config['corpus']} --seeds {_join(seeds)} --clients "
                   f"{_join(clients)} --alphas {_join(_num(a) for a in alphas)} --rounds 20 --engine "
                   f"{engines[0] if engines else 'flower'} --results {results}")
    for _, r in sorted(records, key=lambda x: x[0].name):
        c = r.config
        if r in grid:
            continue
        parts = [f"veil federated run --corpus {c['corpus']} --clients {c['clients']} --rounds {c['rounds']} "
                 f"--mode {c['client_mode']} --m {c['m']} --k {c['k']} --mixing {c['mode']}"]
        if c.get("alpha"):
            parts.append(f"--alpha {_num(c['alpha'])}")  # left out: IID
        parts.append(f"--batch-size {c['batch_size']}")
        lr = c.get("learning_rate", c.get("lr"))
        if lr:
            parts.append(f"--lr {_num(lr)}")
        if c.get("client_mode") == "fedavg":
            parts.append(f"--local-epochs {c.get('local_epochs', 1)}")
        for opt, key in (("--max-train", "max_train"), ("--max-test", "max_test")):
            if c.get(key):
                parts.append(f"{opt} {c[key]}")
        parts.append(f"--seed {c['seed']}")
        if c.get("finetune"):
            parts.append(f"--finetune --encoder-lr {_num(c.get('encoder_lr', 2e-5))}")
        if c.get("dp"):
            parts.append(f"--dp {c['dp']} --clip {_num(c['dp_clip'])} --noise {_num(c['dp_noise'])}")
        parts.append(f"--engine {_engine(c.get('engine'))}")
        out.append(" ".join(parts) + f" --results {results}")
    return out


_DEFAULT_SETTINGS = {"baseline", "mix-only-m0-k4", "texthide-m256-k4", "random"}


def retrieval_commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """``veil attack rss|reprecon --defense all`` per corpus, plus one command per other TextHide setting."""
    if not records:
        return []
    out, results = [], folder_of(records)
    groups: dict[tuple, set[str]] = {}
    for _, r in records:
        c = r.config
        groups.setdefault((c["attack_name"], c["corpus"], c["n_queries"], c["seed"]), set()).add(str(c["setting"]))
    for (attack, corpus, queries, seed), settings in sorted(groups.items(), key=str):
        base = f"veil attack {attack} --corpus {corpus}"
        tail = f"--queries {queries} --seed {seed} --results {results}"
        if settings & _DEFAULT_SETTINGS:
            out.append(f"{base} --defense all {tail}")
        for s in sorted(settings - _DEFAULT_SETTINGS):
            m = re.fullmatch(r"texthide-m(\w+)-k(\d+)", s)
            if m:
                out.append(f"{base} --defense texthide --m {m.group(1)} --k {m.group(2)} {tail}")
    return out


def _cell_key(cell: dict) -> tuple:
    m = cell.get("m")
    return (cell.get("corpus"), cell.get("attack"), "inf" if m is None else str(m), int(cell.get("k", 1)),
            cell.get("mode", "intra"), int(cell.get("epochs", 1)), cell.get("index", "private"),
            int(cell.get("queries", 1000)), int(cell.get("seed", 0)))


def texthide_attack_commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """``veil attack texthide-sweep headline|grid`` where the records hold their cells, single attacks otherwise."""
    if not records:
        return []
    from dataclasses import asdict

    from veil.experiments.texthide.attacks import grid_cells, headline_cells

    out, results = [], folder_of(records)
    cells = {_cell_key(r.config["cell"]): r.config["cell"] for _, r in records if "cell" in r.config}
    queries = sorted({k[7] for k in cells}) or [1000]
    covered: set[tuple] = set()
    headline = {_cell_key(asdict(c)) for c in headline_cells(queries=queries[0])}
    if headline & set(cells):
        out.append(f"veil attack texthide-sweep headline --queries {queries[0]} --results {results}")
        covered |= headline
    for corpus in sorted({k[0] for k in cells}):
        grid = {_cell_key(asdict(c)) for c in grid_cells(corpus=corpus, queries=queries[0])}
        if len(grid & set(cells)) > len(headline & grid & set(cells)):
            out.append(f"veil attack texthide-sweep grid --corpus {corpus} --queries {queries[0]} --results {results}")
            covered |= grid
    for key in sorted(set(cells) - covered, key=str):
        c = cells[key]
        parts = [f"veil attack {c['attack']} --corpus {c['corpus']} --m {key[2]} --k {key[3]} --mode {key[4]}"]
        if c["attack"] in ("mask-recovery", "unmix"):
            parts.append(f"--epochs {key[5]}")
        parts.append(f"--index {key[6]} --queries {key[7]} --seed {key[8]}")
        if c.get("public"):
            parts.append(f"--public {c['public']}")
        out.append(" ".join(parts) + f" --results {results}")
    return out


def _ops(rs: list[ResultRecord]) -> str:
    from veil.experiments.redaction.releases import release_order

    return _join(sorted({str(r.config["operator"]) for r in rs if r.config.get("operator")}, key=release_order))


def redaction_commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """``veil redaction detect | formats | news-recall | infill | reidentify | attributes``, one per configuration the records
    hold (operators joined per corpus), each option as the configs state it."""
    if not records:
        return []
    out, results = [], folder_of(records)
    groups: dict[tuple, list[ResultRecord]] = {}
    for _, r in sorted(records, key=lambda x: x[0].name):
        c, exp = r.config, r.experiment
        if exp.startswith("detection-"):
            key = ("detect", f"--model {c['model']} --n-per-entity {c['n_per_entity']} --base {c['corpus']['base']} "
                             f"--seed {c['seed']}")
        elif exp.startswith("formats-"):
            key = ("formats", f"--model {c['model']} --n-per-variant {c['n_per_variant']} --seed {c['seed']}")
        elif exp.startswith("news-recall-"):
            key = ("news-recall", f"--model {c['model']} --max-passages {c['max_passages']} --seed {c['seed']}")
        elif exp.startswith("infill-"):
            key = ("infill", f"--corpus {c['corpus']}", f"--model {c['model']} --mlm {c['mlm']} --max-documents "
                                                        f"{c['max_documents']} --max-public {c['max_public']} "
                                                        f"--seed {c['seed']}")
        elif exp.startswith("reidentify-"):
            cands = f" --max-candidates {c['max_candidates']}" if c.get("max_candidates") else ""
            key = ("reidentify", f"--corpus {c['corpus']}", f"--model {c['model']}{cands} --seed {c['seed']}")
        elif exp.startswith("attributes-"):
            ents = "PERSON" if c.get("entities") == ["PERSON"] else "all"
            train = f" --max-train {c['max_train']}" if c.get("max_train") else ""
            key = ("attributes", "", f"--entities {ents} --model {c['model']} --seeds {_join(c['seeds'])}{train}")
        else:
            continue
        groups.setdefault(key, []).append(r)
    order = ("detect", "formats", "news-recall", "infill", "reidentify", "attributes")
    for key, rs in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0]), "--model md" in kv[0][-1],
                                                          kv[0])):
        if len(key) == 2:
            out.append(f"veil redaction {key[0]} {key[1]} --results {results}")
        else:
            corpus = f" {key[1]}" if key[1] else ""
            out.append(f"veil redaction {key[0]}{corpus} --operators {_ops(rs)} {key[2]} --results {results}")
    return out


def redaction_settings_off_cli(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """A line naming the records' settings that ``veil redaction`` has no option for and that differ from the
    library's defaults (the Regenerate commands cannot state them; the Python API can); none: no line."""
    import inspect

    from veil.experiments.redaction import attributes, infilling, reidentify

    fixed = {"infill-": (infilling.run_infilling, ("entity", "max_calibration", "max_chars")),
             "reidentify-": (reidentify.run_reidentification, ("min_texts", "max_texts", "max_chars")),
             "attributes-": (attributes.run_redacted_attributes, ("corpus", "width", "epochs", "attacker_epochs"))}
    out = []
    for _, r in sorted(records, key=lambda x: x[0].name):
        for prefix, (fn, names) in fixed.items():
            if not r.experiment.startswith(prefix):
                continue
            params = inspect.signature(fn).parameters
            for name in names:
                default = params[name].default
                if prefix == "reidentify-" and name == "min_texts" and default is None:
                    default = reidentify.SOURCES.get(r.config.get("corpus"), (None, None, None))[2]
                if name in r.config and r.config[name] != default:
                    out.append(f"`{r.experiment}`: {name}={r.config[name]} (default {default})")
    if not out:
        return []
    return ["", "The commands below cannot state these settings of the records (no command-line option; pass them "
            "to the functions of `veil.experiments.redaction`): " + "; ".join(out) + "."]
