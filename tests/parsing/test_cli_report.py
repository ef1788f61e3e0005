"""`veil obfuscate`, `veil parse eval`, `veil attack word-recovery` on the tiny treebank; the result page."""

from __future__ import annotations

import json
import stat


import pytest
import typer
from typer.testing import CliRunner

from veil.cli import attack, obfuscate, parse
from veil.errors import InvalidParameterError
from veil.report import render_all
from veil.report.parsing import parsing_page
from veil.results import Metric, ResultRecord

#: what every real parsing record's config holds (ParsingSetup's fields); the hand-made records below start from it
_SETUP = {"treebank": "silver-sm", "n_test": 2000, "attack_train": 20000, "attack_minutes": 8.0, "seed": 0,
          "model": None}


def _app() -> typer.Typer:
    """The commands as `veil` registers them (each module's ``register``), on an app of their own."""
    app = typer.Typer()
    for module in (obfuscate, parse, attack):
        module.register(app)
    return app


class _Result:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err


def main(args):
    res = CliRunner().invoke(_app(), args, env={"COLUMNS": "300", "TERMINAL_WIDTH": "300"})
    main.last = _Result(res.exit_code, res.stdout, " ".join(res.stderr.replace("│", " ").split()))
    return res.exit_code


def test_obfuscate_conllu_with_a_key(tiny_treebank, tmp_path):
    key = tmp_path / "key.json"
    code = main(["obfuscate", str(tiny_treebank / "dev.conllu"), "--level", "P2", "--treebank", str(tiny_treebank),
                 "--key", str(key), "--json"])
    out = json.loads(main.last.out)
    assert code == 0 and out and all(len(s["words"]) == len(s["tags"]) for s in out)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    secret = json.loads(key.read_text())
    assert [s["positions"] for s in out] == [k["positions"] for k in secret]
    assert "originals" not in out[0]


def test_bad_level_and_method_are_usage_errors(tiny_treebank):
    assert main(["obfuscate", str(tiny_treebank / "dev.conllu"), "--method", "bert"]) == 2
    assert "--method must be one of neural, random" in main.last.err
    assert main(["obfuscate", str(tiny_treebank / "dev.conllu"), "--level", "P7"]) == 2
    assert "--level must be one of P1, P2, P3, P4, P5" in main.last.err
    assert main(["attack", "word-recovery", "--method", "bert", "--level", "P1"]) == 2
    assert "--method must be one of keep-word, tag-frequency, minilm, mlm, trained" in main.last.err


def test_eval_and_attack_write_records_and_the_page_renders(tiny_treebank, tmp_path):
    res = tmp_path / "results" / "parsing"
    code = main(["parse", "eval", "--parser", "spacy-sm", "--level", "P1", "--treebank", str(tiny_treebank),
                 "--n-test", "20", "--results", str(res), "--json"])
    rec = json.loads(main.last.out)
    assert code == 0 and rec["experiment"] == "eval-spacy-sm-P1" and 0 < rec["metrics"]["uas"]["mean"] <= 100
    code = main(["attack", "word-recovery", "--method", "tag-frequency", "--level", "P1", "--treebank",
                 str(tiny_treebank), "--n-test", "20", "--results", str(res), "--json"])
    rec = json.loads(main.last.out)
    assert code == 0 and 0 <= rec["metrics"]["prv"]["mean"] <= 100
    assert main(["parse", "eval", "--parser", "spacy-sm", "--level", "P1", "--treebank", str(tiny_treebank),
                 "--n-test", "20", "--results", str(res)]) == 0  # resumes: the cell exists, nothing is re-run
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "parsing.md").read_text()
    assert "| NE (P1) | NNP NNPS |" in page and "### spaCy en_core_web_sm" in page


def test_empty_page_says_no_results_yet(tmp_path):
    page = parsing_page("parsing", [], tmp_path)
    assert page.count("No results yet") == 2


def test_table_2_row_with_the_paper_beside_ours(tmp_path):
    def rec(exp, config, metrics):
        return (tmp_path / f"{exp}.json",
                ResultRecord("parsing", exp, {**_SETUP, **config}, {k: Metric(mean=v) for k, v in metrics.items()},
                             1.0))

    records = [rec("eval-biaffine-P1", {"parser": "biaffine", "level": "P1"}, {"uas": 90.0, "las": 88.0,
                                                                               "uas_nopunct": 89.0}),
               rec("attack-trained-P1", {"attacker": "trained", "level": "P1"},
                   {"prv": 70.0, "top1": 20.0, "coverage": 90.0})]
    page = parsing_page("parsing", [r for r in records], tmp_path)
    assert ("| NE (P1) | 90.0 (94.1) | 88.0 (93.0) | 89.0 | – | – | 70.0 (68.3) | 3.00 (2.97) | – | – | "
            "70.0 (trained; no curve) | 3.00 |") in page
    records.append(rec("attack-minilm-P1", {"attacker": "minilm", "level": "P1"},
                       {"prv": 60.0, "top1": 30.0, "coverage": 90.0}))
    page = parsing_page("parsing", records, tmp_path)
    assert "| 89.0 | 60.0 | 2.25 | 70.0 (68.3) |" in page  # the MiniLM column, first
    assert "| NE (P1) | – | – | 70.0 / 20.0 / 90 | 60.0 / 30.0 / 90 |" in page
    assert "| – | – | – | minilm (60.0; no curve) |\n" in page  # the strongest, by prv
    # an attacker that records its learning curve: the strongest says how its training ended; the curve is drawn
    curve = [{"step": 0, "minutes": 0.0, "dev_mrr": 0.05, "test_prv": 95.0},
             {"step": 100, "minutes": 2.0, "dev_mrr": 0.40, "test_prv": 56.0}]
    path, tuned = rec("attack-veil-mlm-tuned-P1", {"attacker": "veil-mlm-tuned", "level": "P1",
                                                   "attack": {"stopped": "flattened",
                                                              "selected": {"step": 100, "minutes": 2.0,
                                                                           "dev_mrr": 0.40}}},
                      {"prv": 55.0, "top1": 40.0, "coverage": 95.0})
    tuned.extra["curve"] = curve
    page = parsing_page("parsing", [*records, (path, tuned)], tmp_path)
    assert "| veil-mlm-tuned (55.0; flattened) |\n" in page and "55.0 (veil-mlm-tuned; flattened) | 2.00 |" in page
    assert "| veil-mlm-tuned | P1 | flattened | 100 | 2.0 | 2 | 100 | 0.400 | 95.0 -> 56.0 -> 56.0 | 55.0 |" in page
    assert (tmp_path / "parsing_learning_curves.png").stat().st_size > 1000


def test_the_papers_pattern_is_computed_per_parser(tmp_path):
    def ev(parser, level, uas):
        exp = f"eval-{parser}-{level}"
        return (tmp_path / f"{exp}.json", ResultRecord("parsing", exp, {**_SETUP, "parser": parser, "level": level},
                                                       {"uas": Metric(mean=uas), "las": Metric(mean=uas - 1)}, 1.0))

    records = [ev("biaffine", "none", 95.0), ev("biaffine", "P3", 93.1), ev("biaffine", "P4", 85.2),  # the paper's
               ev("spacy-md", "none", 95.0), ev("spacy-md", "P3", 86.0), ev("spacy-md", "P4", 84.0)]  # no late drop
    page = parsing_page("parsing", records, tmp_path)
    assert "| biaffine | 0.6 | 7.9 | holds |" in page
    assert "| spacy-md | 3.0 | 2.0 | does not hold |" in page
    assert "spacy-sm |" not in page.split("## The paper's pattern")[1]  # no records, no row


def test_sweep_writes_every_cell_and_refuses_a_record_of_another_setup(tiny_treebank, tmp_path):
    import shutil

    from veil.errors import StaleResultError

    res = tmp_path / "results" / "parsing"
    args = ["parse", "sweep", "--parsers", "spacy-sm", "--levels", "none,P1", "--attackers", "keep-word,tag-frequency",
            "--n-test", "20", "--results", str(res)]
    code = main(args + ["--treebank", str(tiny_treebank), "--json"])
    out = json.loads(main.last.out)
    assert code == 0, main.last.err
    assert sorted(r["experiment"] for r in out["records"]) == [
        "attack-keep-word-P1", "attack-tag-frequency-P1", "eval-spacy-sm-P1", "eval-spacy-sm-none", "table1"]
    other = tmp_path / "other-treebank"
    shutil.copytree(tiny_treebank, other)
    res_other = CliRunner().invoke(_app(), args + ["--treebank", str(other)])
    assert isinstance(res_other.exception, StaleResultError)
    assert "another configuration (treebank: stored" in str(res_other.exception)
    assert "--force" in str(res_other.exception) and res_other.exception.keys == ["treebank"]
    with pytest.raises(StaleResultError):
        raise res_other.exception
    # a step cap is part of an attack cell's setup: the records made without one are not reused under one
    res_steps = CliRunner().invoke(_app(), args + ["--treebank", str(tiny_treebank), "--attack-steps", "5"])
    assert isinstance(res_steps.exception, StaleResultError) and res_steps.exception.keys == ["attack_steps"]
    assert "attack_steps: stored" in str(res_steps.exception)


def test_an_attack_step_cap_is_validated_and_left_out_of_records_when_unset():
    from veil.experiments.obfuscation.parsing import ParsingSetup

    assert "attack_steps" not in ParsingSetup().to_dict()
    assert ParsingSetup(attack_steps=600).to_dict()["attack_steps"] == 600
    for bad in (0, -3, 2.5, True, "600"):
        with pytest.raises(InvalidParameterError, match="attack_steps"):
            ParsingSetup(attack_steps=bad)


def test_neural_table_and_computed_verdicts(tmp_path):
    """Neural vs random: mean ± sd over seeds, the t interval of the difference, the targets' verdicts."""
    def rec(exp, config, metrics):
        return (tmp_path / f"{exp}.json",
                ResultRecord("parsing", exp, {**_SETUP, **config}, {k: Metric(mean=v) for k, v in metrics.items()},
                             1.0))

    records = [rec("eval-biaffine-P4", {"parser": "biaffine", "level": "P4"}, {"uas": 84.0, "las": 80.0}),
               rec("eval-spacy-md-P4", {"parser": "spacy-md", "level": "P4"}, {"uas": 78.0, "las": 74.0}),
               rec("attack-trained-P4", {"attacker": "trained", "level": "P4"}, {"prv": 80.0, "top1": 9.0,
                                                                                 "coverage": 95.0})]
    ob = {"max_candidates": 2000, "fingerprint": "ab" * 32, "training": {"steps": 500, "minutes": 4.0,
                                                                         "training": {"privacy_weight": 0.0}}}
    for seed, (b, md, prv) in enumerate([(87.0, 78.5, 79.0), (88.0, 77.5, 78.0), (89.0, 79.0, 77.0)]):
        neural = {"level": "P4", "defense": "neural", "training_seed": seed, "obfuscator": ob}
        records += [rec(f"eval-biaffine-P4-neural-s{seed}", {**neural, "parser": "biaffine"}, {"uas": b, "las": b - 5}),
                    rec(f"eval-spacy-md-P4-neural-s{seed}", {**neural, "parser": "spacy-md"}, {"uas": md, "las": md}),
                    rec(f"attack-trained-P4-neural-s{seed}", {**neural, "attacker": "trained"}, {"prv": prv})]
    page = parsing_page("parsing", records, tmp_path).split("## The paper's pattern")[0]
    random_part, neural_part = page.split("## Table 2: the neural obfuscator against random substitution")
    assert "neural" not in random_part.split("## Table 2 (random substitution)")[1]  # the random table is random's
    # biaffine: diffs 3, 4, 5 -> mean 4, sd 1, t(0.975, 2) = 4.303 -> half-width 2.48
    assert "| +Verbs (P4) | 84.0 | 88.0 ± 1.0 (3) | +4.0 [+1.5, +6.5] | 80.0 | 83.0 ± 1.0 (3) |" in neural_part
    assert "| 85.2 / 87.3 | 80.4 / 78.7 |" in neural_part  # the paper's random / neural beside ours
    assert "beats random by >= 2 points on the target parser | P4 | +4.0 [+1.5, +6.5] | 3 | +2 | inconclusive |" \
        in neural_part
    assert "unseen parser | P4 | +0.3 [-1.6, +2.2] | 3 | +0 | inconclusive |" in neural_part
    assert "(trained attacker) | P4 | -2.0 [-4.5, +0.5] | 3 | -5 | met |" in neural_part
    assert "(P4, P5): **incomplete** (no records at P5)" in neural_part
    assert "- prv: neural within 5 points of random (MiniLM attacker): no records" in neural_part
    assert "| P4 | 0 | 2000 | 0.0 | 4.0 | 500 |" in neural_part


def test_no_neural_records_is_said_not_failed(tmp_path):
    page = parsing_page("parsing", [], tmp_path)
    assert "No neural-obfuscator records yet (`veil parse sweep --defense neural" in page


def test_privacy_knob_rows_are_kept_out_of_table_2_and_compared_with_lambda_0(tmp_path):
    """A lambda > 0 obfuscator gets cells of its own and a section of its own, beside lambda = 0 at its seed."""
    from veil.defenses.obfuscation.neural import NeuralTraining
    from veil.experiments.obfuscation.parsing import neural_suffix

    assert neural_suffix(1) == neural_suffix(1, NeuralTraining()) == "-neural-s1"
    assert neural_suffix(1, NeuralTraining(privacy_weight=0.5)) == "-neural-pw0.5-s1"

    def rec(exp, config, metrics):
        return (tmp_path / f"{exp}.json",
                ResultRecord("parsing", exp, {**_SETUP, **config}, {k: Metric(mean=v) for k, v in metrics.items()},
                             1.0))

    records = [rec("eval-biaffine-P4", {"parser": "biaffine", "level": "P4"}, {"uas": 84.0, "las": 80.0}),
               rec("attack-trained-P4", {"attacker": "trained", "level": "P4"}, {"prv": 80.0, "top1": 9.0,
                                                                                 "coverage": 95.0})]
    for seed, weight, uas, prv in [(0, 0.0, 88.0, 78.0), (1, 0.0, 90.0, 77.0), (0, 1.0, 85.0, 81.0)]:
        ob = {"training": {"training": {"privacy_weight": weight}}}
        neural = {"level": "P4", "defense": "neural", "training_seed": seed, "obfuscator": ob}
        suffix = f"-neural-pw{weight:g}-s{seed}" if weight else f"-neural-s{seed}"
        records += [rec(f"eval-biaffine-P4{suffix}", {**neural, "parser": "biaffine"}, {"uas": uas, "las": uas}),
                    rec(f"attack-trained-P4{suffix}", {**neural, "attacker": "trained"}, {"prv": prv})]
    page = parsing_page("parsing", records, tmp_path)
    table2, knob = page.split("## The privacy knob (λ)")
    assert "| 89.0 ± 1.4 (2) |" in table2  # Table 2 averages the two lambda = 0 seeds only
    assert "| +Verbs (P4) | – | random | 84.0 | – | 80.0 | – | 4.20 | – | – | – | – |" in knob
    assert "| +Verbs (P4) | 0 | 0 | 88.0 | – | 78.0 | – | 4.00 | – | – | – | – |" in knob
    assert "| +Verbs (P4) | 0 | 1 | 85.0 | – | 81.0 | – | 4.47 | -3.0 | – | +3.0 | – |" in knob
    assert "λ = 1 moved UAS by -3.0 and the trained attacker's prv by +3.0 against λ = 0 (λ = 0's own spread: " \
           "UAS sd 1.4 over 2 seeds, prv sd 0.7 over 2 seeds)." in knob
    assert "## The privacy knob" not in parsing_page("parsing", records[:6], tmp_path)  # no lambda > 0: no section


def test_the_regenerate_command_repeats_an_attack_step_cap(tmp_path):
    from veil.report.commands import parsing_commands

    def atk(level, steps):
        cfg = {**_SETUP, "attacker": "veil-mlm-tuned", "level": level, **({} if steps is None else
                                                                          {"attack_steps": steps})}
        return (tmp_path / f"attack-veil-mlm-tuned-{level}.json",
                ResultRecord("parsing", f"attack-veil-mlm-tuned-{level}", cfg, {"prv": Metric(mean=70.0)}, 1.0))

    capped, plain = parsing_commands([atk("P1", 1000), atk("P2", 1000), atk("P3", None)])
    assert "--levels P1,P2" in capped and capped.count("--attack-steps 1000") == 1
    assert "--levels P3" in plain and "--attack-steps" not in plain
