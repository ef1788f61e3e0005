"""veil.experiments.generation: a run trains once (cached, checked by sha256), records its utility, keeps a record
of the same configuration and refuses one of another, and its attack records never hold a planted secret."""

from __future__ import annotations

import dataclasses
import json
import stat

import pytest

from veil.errors import DataFormatError, InvalidParameterError, ResourceMissingError, StaleResultError
from veil.experiments.generation import LMRun, attack_lm_run, load_run_model, record_path, run_folder, train_lm_run

TINY = LMRun(steps=4, batch_size=4, max_tokens=16, n_train=40, n_heldout=20, counts=(1, 2), canaries_per_count=2,
             pii_per_count=1, candidates=50, samples=8, top=4)


@pytest.fixture(scope="module")
def home(tmp_path_factory, own_home, builtin):
    """A VEIL_HOME with the real corpora and encoders, and an empty place for the run's model."""
    builtin("rt-polarity")
    with own_home(tmp_path_factory.mktemp("home")) as root:
        yield root


@pytest.fixture(scope="module")
def trained(home, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    lines: list[str] = []
    rec = train_lm_run(TINY, results, log=lines.append)
    return results, rec, lines


def test_training_records_the_held_out_perplexity_and_keeps_the_model_with_its_canaries_private(trained):
    results, rec, lines = trained
    assert any(line.startswith("training lm-plain on ") for line in lines)
    assert record_path(results, TINY, "utility").is_file() and rec.experiment == "utility"
    for name in ("heldout_perplexity", "base_perplexity"):
        m = rec.metrics[name]
        assert m.n == TINY.n_heldout and m.ci_low <= m.mean <= m.ci_high and m.mean > 1
    # four steps on the private domain already beat MiniLM's weights read as a decoder, never trained to be one
    assert rec.metrics["heldout_perplexity"].ci_high < rec.metrics["base_perplexity"].ci_low
    folder = run_folder(TINY)
    secret = folder / "canaries.secret.json"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert not (folder / "state.pt").exists()  # the resume state goes once the run is done
    assert len(rec.extra["losses"]) == TINY.steps and rec.extra["corpus"]["canaries_per_count"] == {"1": 2, "2": 2}


def test_a_second_call_keeps_the_record_and_another_configuration_is_refused(trained):
    results, rec, _ = trained
    lines: list[str] = []
    again = train_lm_run(TINY, results, log=lines.append)
    assert again.created == rec.created and lines[0].startswith("kept ")
    other = dataclasses.replace(TINY, n_heldout=21)  # the same record path, another configuration
    with pytest.raises(StaleResultError, match="--force"):
        train_lm_run(other, results)


def test_the_attack_records_hold_no_planted_secret(trained):
    results, _, _ = trained
    recs = attack_lm_run(TINY, results)
    assert [r.experiment for r in recs] == ["canary-exposure", "extraction", "pii-inference", "pii-reconstruction",
                                            "membership"]
    exposure, extraction, inference, reconstruction, membership = recs
    # the held-out texts against as many plain training texts, by both scores, each with its test
    assert membership.extra["members"] == membership.extra["non_members"] == TINY.n_heldout
    assert {"loss_auc", "zlib_auc", "reference_auc", "loss_tpr@1%fpr"} <= set(membership.metrics)
    assert set(membership.extra["tests"]) == {"loss", "zlib", "reference"}
    # the attacker's reference model: trained once on public texts only, as many as the run trains on, and named
    from veil.experiments.generation.run import _planted, reference_folder

    planted = _planted(TINY)
    ref = membership.extra["reference"]
    assert ref["public_texts"] == len(planted.train) and (ref["model"], ref["steps"]) == (TINY.defense, TINY.steps)
    assert not set(planted.public) & (set(planted.train) | set(planted.heldout))
    assert (reference_folder(TINY) / "model.safetensors").is_file()
    assert membership.config["reference_sha256"] == extraction.config["reference_sha256"] == ref["sha256"]
    assert "precision@reference" in extraction.metrics
    # PII recall per class too: five classes, one value at each of the two counts
    assert set(extraction.extra["pii_by_entity"]) == {"PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "STREET_ADDRESS",
                                                      "IBAN_CODE"}
    assert all(row["planted"] == 2 and row["counts"] == [1, 2] for row in extraction.extra["pii_by_entity"].values())
    tagged = extraction.extra["pii_extraction"]  # counts only: no tagged value goes into a record
    assert tagged["planted"] == 6 and tagged["classes"] == ["EMAIL_ADDRESS", "PHONE_NUMBER", "IBAN_CODE"]
    assert ("pii_extraction_precision" in extraction.metrics) == (tagged["tagged"] > 0)
    assert sum(extraction.metrics[f"pii_recall[{e}]"].mean * 2 for e in extraction.extra["pii_by_entity"]) == \
        pytest.approx(sum(extraction.metrics[f"pii_recall@{c}"].mean * 5 for c in (1, 2)))
    assert set(inference.metrics) == {"pii_inference@1", "pii_inference@2"}
    assert set(reconstruction.metrics) == {"pii_reconstruction@1", "pii_reconstruction@2"}
    # five classes, one value at each of two counts; at most the run's candidates (50) each
    assert inference.extra["candidates_per_sentence"] == [50] * 10
    assert all(row["chance"] == pytest.approx(0.02) for row in inference.extra["per_count"].values())
    assert {"1", "2", "duplication"} == set(inference.extra["tests"]) and set(reconstruction.extra["tests"]) == \
        {"duplication"}
    # reconstruction samples at most the run's sampling budget, and replays it at every smaller power of two
    assert reconstruction.config["attack"]["samples"] == TINY.samples == 8
    assert [p["samples"] for p in reconstruction.extra["budget"]] == [1, 2, 4, 8] and inference.extra["budget"] is None
    assert set(exposure.metrics) == {"exposure@1", "exposure@2"}
    assert all(m.n == 2 and 0 <= m.mean <= exposure.extra["cap_bits"] + 1e-9 for m in exposure.metrics.values())
    assert exposure.extra["test"]["name"] == "one-sided Mann-Whitney U"
    assert {"precision@perplexity", "precision@zlib", "pii_recall@1", "pii_recall@2"} <= set(extraction.metrics)
    secrets = json.loads((run_folder(TINY) / "canaries.secret.json").read_text())["canaries"]
    from veil.corpora.canaries import Canary, CanaryFormat

    fmt = CanaryFormat(json.loads((run_folder(TINY) / "canaries.secret.json").read_text())["format"])
    texts = [Canary(fmt, v, c).text() for v, c in secrets]
    values = [p.value for p in planted.pii]  # seeded: the values this run planted
    for part in ("utility", "canary-exposure", "extraction", "pii-inference", "pii-reconstruction", "membership"):
        written = record_path(results, TINY, part).read_text()
        assert not any(t in written for t in texts), part
        assert not any(v in written for v in values), part
    assert attack_lm_run(TINY, results, "extraction")[0].created == extraction.created  # kept
    # a reconstruction record of another sample budget (the code's, not a field of the run) is not reused
    import veil.experiments.generation.run as run_module

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_module, "PII_SAMPLES", 4)
        with pytest.raises(StaleResultError, match="samples: stored 8, requested 4"):
            attack_lm_run(TINY, results, "pii-reconstruction")


def test_a_run_without_enough_public_text_is_attacked_without_a_reference_and_says_why(trained, tmp_path,
                                                                                        monkeypatch):
    import veil.experiments.generation.run as run_module

    monkeypatch.setattr(run_module, "MIN_PUBLIC", 10 ** 6)
    extraction, membership = attack_lm_run(TINY, tmp_path, ["extraction", "membership"])
    for rec in (extraction, membership):
        assert rec.config["reference_sha256"] is None and rec.extra["reference"]["model"] is None
        assert "fewer than the 1000000 a reference needs" in rec.extra["reference"]["why"]
    assert "precision@reference" not in extraction.metrics and "reference_auc" not in membership.metrics
    assert set(membership.extra["tests"]) == {"loss", "zlib"}


def test_a_missing_or_damaged_model_is_a_typed_error_naming_the_command(trained):
    other = dataclasses.replace(TINY, seed=9)
    with pytest.raises(ResourceMissingError, match="veil lm train --corpus rt-polarity --defense lm-plain"):
        load_run_model(other)
    weights = run_folder(TINY) / "model.safetensors"
    kept = weights.read_bytes()
    try:
        weights.write_bytes(kept[: len(kept) // 2])
        with pytest.raises(DataFormatError, match="damaged"):
            load_run_model(TINY)
    finally:
        weights.write_bytes(kept)


def test_bad_runs_are_refused_before_any_work(home, tmp_path):
    with pytest.raises(InvalidParameterError,
                       match="not a language model; use one of lm-dedup, lm-dpsgd, lm-plain, lm-scrub"):
        train_lm_run(dataclasses.replace(TINY, defense="dpsgd"), tmp_path)
    with pytest.raises(InvalidParameterError, match="the language-model attacks are canary-exposure, extraction"):
        attack_lm_run(TINY, tmp_path, ["membership-loss"])
    assert not any(tmp_path.iterdir())


def test_a_dp_run_is_accounted_unseeded_and_its_exposure_is_set_beside_its_bound(home, tmp_path):
    """lm-dpsgd through the run: the CLI's run carries its epsilon and DP-SGD's learning rate; the lots and noise
    come from the OS CSPRNG (no seed, not resumable), the manifest keeps the accounting, and the exposure record
    puts each count's mean exposure beside the most its guarantee allows."""
    from veil.defenses.lm import exposure_bound
    from veil.experiments.generation import DP_LR, lm_run

    run = lm_run(defense="lm-dpsgd", epsilon=3, quick=True)
    assert dict(run.settings) == {"epsilon": 3.0} and run.lr == DP_LR and "-lm-dpsgd-epsilon3-" in run.run_id
    tiny = dataclasses.replace(TINY, defense="lm-dpsgd", settings={"epsilon": 3.0}, lr=DP_LR)
    lines: list[str] = []
    rec = train_lm_run(tiny, tmp_path, log=lines.append)
    assert any("not resumable" in line for line in lines) and any(line.startswith("DP-SGD: epsilon") for line in lines)
    _, manifest = load_run_model(tiny)
    acc = manifest["accounting"]
    assert acc["epsilon"] <= 3.0 and acc["steps"] == tiny.steps and manifest["guarantee"]["epsilon"] == acc["epsilon"]
    assert rec.extra["defense"]["noise"] == "OS CSPRNG" and rec.extra["guarantee"]["kind"] == "epsilon-delta-dp"
    (exposure,) = attack_lm_run(tiny, tmp_path, ["canary-exposure"])
    space = 2 ** exposure.extra["space_bits"]
    for count in tiny.counts:
        row = exposure.extra["per_count"][str(count)]
        bound = exposure_bound(acc["epsilon"], acc["delta"], count, round(space))
        assert row["dp_bound_bits"] == pytest.approx(bound, abs=1e-3)
        assert row["exceeds_dp_bound"] == (exposure.metrics[f"exposure@{count}"].ci_low > row["dp_bound_bits"])
