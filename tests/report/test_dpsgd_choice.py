"""veil.report.dpsgd_choice: TextHide against DP-SGD at the same utility, each under the strongest attack recorded
for what it releases (the section that ends docs/results/dpsgd.md), from synthetic records of the three folders."""

from __future__ import annotations

from veil.report.dpsgd_choice import choice_section
from veil.results import Metric, ResultRecord


def _member(defense, method, auc, acc, *, eps=None, epochs=200, corpus="rt-polarity"):
    cfg = {"corpus": corpus, "defense": defense, "epsilon": eps, "method": method, "members": 100, "epochs": epochs,
           "seed": 0, **({"texthide_m": 256, "texthide_k": 4} if defense == "texthide" else {})}
    metrics = {"auc": Metric(mean=auc, ci_low=auc - 0.01, ci_high=auc + 0.01, n=200),
               "tpr@1%fpr": Metric(mean=auc / 10, ci_low=0.0, ci_high=auc / 5, n=200),
               "test_accuracy": Metric(mean=acc, n=1000, ci_low=acc - 0.03, ci_high=acc + 0.03),
               "majority_rate": Metric(mean=0.6, n=1000)}
    if eps is not None:
        metrics["delta"] = Metric(mean=5e-5)
    name = f"{corpus}-{defense}{'' if eps is None else f'-eps{eps:g}'}-{method}-ep{epochs}"
    return ResultRecord(method="membership", experiment=name, config=cfg, metrics=metrics, wall_time_s=1.0,
                        git_commit="abc1234")


def _unmix(share, *, m="256", k=4, corpus="rt-polarity"):
    cell = {"corpus": corpus, "attack": "unmix", "mode": "intra", "m": m, "k": k, "index": "private", "epochs": 5}
    return ResultRecord(method="texthide-attacks", experiment=f"{corpus}-unmix-m{m}-k{k}", config={"cell": cell},
                        metrics={"all_sources": Metric(mean=share, ci_low=share - 0.01, ci_high=min(1, share + 0.01),
                                                       n=1000)}, wall_time_s=1.0, git_commit="abc1234")


def _audit(eps, lower, seed, passed=True, corpus="rt-polarity"):
    cfg = {"corpus": corpus, "defense": "dpsgd", "epsilon": eps, "setting": "recipe", "seed": seed}
    metrics = {"epsilon_claimed": Metric(mean=eps * 0.99), "epsilon_lower_white": Metric(mean=lower),
               "epsilon_lower_black": Metric(mean=lower / 2), "passed": Metric(mean=1.0 if passed else 0.0)}
    return ResultRecord(method="dpsgd-audit", experiment=f"{corpus}-audit-eps{eps:g}-seed{seed}", config=cfg,
                        metrics=metrics, wall_time_s=1.0, git_commit="abc1234")


def _write(root, folder, recs):
    for rec in recs:
        rec.write(root / folder / f"{rec.experiment}.json")


def test_dpsgd_at_the_texthide_heads_accuracy_is_set_beside_the_broken_encodings(tmp_path):
    _write(tmp_path, "membership", [
        _member("plain", "lira", 0.88, 0.74), _member("plain", "loss", 0.70, 0.74),
        _member("texthide", "lira", 0.57, 0.70), _member("texthide", "loss", 0.52, 0.68),
        _member("dpsgd", "rmia", 0.53, 0.66, eps=1.0), _member("dpsgd", "rmia", 0.55, 0.72, eps=3.0),
        _member("dpsgd", "rmia", 0.59, 0.76, eps=8.0),
        _member("plain", "loss", 0.60, 0.75, epochs=10)])  # another budget: plain alone, never mixed in
    _write(tmp_path, "texthide-attacks", [_unmix(0.999), _unmix(0.2, k=8)])
    _write(tmp_path, "dpsgd-audit", [_audit(3.0, 0.8, 0), _audit(3.0, 0.5, 1)])
    text = "\n".join(choice_section(tmp_path))
    assert "## TextHide or DP-SGD?" in text and "(100 members, 10 epochs)" not in text
    # the TextHide head: two trainings, 70.0 and 68.0, mean 69.0; epsilon 1 (66.0) falls short, epsilon 3 reaches it
    assert "| DP-SGD, epsilon 3 (same utility) | model | 72.0 |" in text
    assert "| DP-SGD, epsilon 1 | model | 66.0 |" in text
    assert "membership (lira): AUC 88.0 [87.0, 89.0]" in text  # the plain head's strongest attack
    assert ("unmix (5 epochs of encodings observed) recovers all 4 private sources of 99.9% [98.9, 100.0] of "
            "1000") in text
    assert "one-run audit: highest lower bound 0.80 against the claimed 2.97 (recipe); 2 of 2 audits pass" in text
    assert "no one-run audit recorded at this epsilon" in text  # epsilon 1 and 8
    assert ("- rt-polarity: DP-SGD reaches the TextHide head's accuracy (69.0) at epsilon 3 (72.0). There, its "
            "strongest recorded membership attack reaches AUC 55.0 [54.0, 56.0] (rmia), and its guarantee caps "
            "every attack's AUC at 95.26.") in text


def test_no_epsilon_that_reaches_texthide_is_said_and_a_budget_without_all_three_is_left_out(tmp_path):
    _write(tmp_path, "membership", [
        _member("plain", "loss", 0.70, 0.90, corpus="sms-spam"), _member("texthide", "loss", 0.52, 0.93,
                                                                         corpus="sms-spam"),
        _member("dpsgd", "loss", 0.51, 0.89, eps=1.0, corpus="sms-spam"),
        _member("plain", "loss", 0.70, 0.74), _member("dpsgd", "loss", 0.51, 0.70, eps=1.0)])  # no TextHide head
    text = "\n".join(choice_section(tmp_path))
    assert "rt-polarity" not in text
    assert ("- sms-spam: no recorded epsilon reaches the TextHide head's accuracy (93.0); the most accurate DP-SGD "
            "head (epsilon 1) reaches 89.0.") in text
    assert "no attack on these encodings recorded" in text
    assert choice_section(tmp_path / "absent") == []


def test_encodings_are_called_broken_only_when_the_attack_interval_clears_half(tmp_path):
    _write(tmp_path, "membership", [_member("plain", "loss", 0.70, 0.74), _member("texthide", "loss", 0.52, 0.70),
                                    _member("dpsgd", "loss", 0.51, 0.72, eps=1.0),
                                    _member("texthide", "loss", 0.52, 0.70, epochs=10)])  # another budget
    _write(tmp_path, "texthide-attacks", [_unmix(0.3)])
    text = "\n".join(choice_section(tmp_path))
    assert ("TextHide's training encodings, which leave the owner at every step: unmix (5 epochs of encodings "
            "observed) recovers all 4 private sources of 30.0% [29.0, 31.0] of 1000 encodings.") in text
    assert "are broken" not in text


def _rows(text):
    return {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| rt-polarity (")}


def test_each_row_is_judged_by_the_rules_of_what_to_use(tmp_path):
    _write(tmp_path, "membership", [
        _member("plain", "lira", 0.88, 0.74), _member("texthide", "lira", 0.57, 0.70),
        _member("dpsgd", "rmia", 0.55, 0.72, eps=3.0),  # useful, and its AUC's interval ends under 95.26
        _member("dpsgd", "rmia", 0.50, 0.61, eps=1.0),  # 610 of 1000 against 60%: not useful
        _member("dpsgd", "rmia", 0.59, 0.75, eps=0.01)])  # 0.01-DP allows AUC 50.25: 0.60 contradicts it
    _write(tmp_path, "texthide-attacks", [_unmix(0.999)])
    _write(tmp_path, "dpsgd-audit", [_audit(3.0, 0.8, 0)])
    text = "\n".join(choice_section(tmp_path))
    assert "'Useful and private': the two rules of the bench's What to use" in text
    rows = _rows(text)
    assert rows["DP-SGD, epsilon 3"].endswith("| yes |")
    assert rows["DP-SGD, epsilon 1"].endswith("| no (not useful: test accuracy does not beat the majority class "
                                              "(p=0.27, exact one-sided binomial)) |")
    assert rows["DP-SGD, epsilon 0.01 (same utility)"].endswith("| no (leaks: membership (rmia) AUC 59.0 [58.0, 60.0] reaches above "
                                                 "the 50.25 its guarantee allows) |")
    assert rows["none (plain training)"].endswith("| no (leaks: membership (lira) AUC 88.0 [87.0, 89.0]: its interval "
                                                  "lies above 50 (random guessing)) |")
    encodings = [line for line in text.splitlines() if "| training encodings, every step |" in line][0]
    assert encodings.endswith("| no (leaks: unmix 99.9% [98.9, 100.0] beats random guessing (p<1e-4, exact one-sided "
                              "binomial against 1/1000)) |")
    # the same-utility epsilon (the smallest as accurate as TextHide) fails; the page names the one that passes
    assert ("By the rules, DP-SGD at epsilon 0.01: no (leaks: membership (rmia) AUC 59.0 [58.0, 60.0] reaches above "
            "the 50.25 its guarantee allows); TextHide (256, 4), both releases together: no (leaks: its training "
            "encodings: unmix 99.9%") in text
    assert text.rstrip().endswith("DP-SGD heads that pass both rules: epsilon 3.")


def test_a_failed_one_run_audit_fails_the_privacy_rule_and_quiet_encodings_pass_it(tmp_path):
    _write(tmp_path, "membership", [_member("plain", "loss", 0.70, 0.74), _member("texthide", "loss", 0.50, 0.70),
                                    _member("dpsgd", "loss", 0.51, 0.72, eps=1.0)])
    # one recovered encoding of 1000 against a chance of at most 1/1000: not distinguishable from random guessing
    _write(tmp_path, "texthide-attacks", [_unmix(0.001)])
    _write(tmp_path, "dpsgd-audit", [_audit(1.0, 0.3, 0), _audit(1.0, 1.5, 1, passed=False)])
    text = "\n".join(choice_section(tmp_path))
    rows = _rows(text)
    assert rows["DP-SGD, epsilon 1 (same utility)"].endswith(
        "| no (leaks: 1 one-run audit(s) at this epsilon failed) |")
    encodings = [line for line in text.splitlines() if "| training encodings, every step |" in line][0]
    assert encodings.endswith("| yes |")  # and its model's AUC interval [49.0, 51.0] does not lie above 50
    assert "TextHide (256, 4), both releases together: yes. No DP-SGD head passes both rules." in text
