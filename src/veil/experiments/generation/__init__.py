"""Generation leakage (issue 52): a language model fine-tuned on a corpus with planted secrets, its utility and
its attacks (:mod:`.run`; ``veil lm train``, ``veil lm attack``)."""

from veil.experiments.generation.run import (ATTACKS, DP_LR, METHOD, QUICK, LMRun, attack_lm_run, lm_run,
                                             load_run_model, record_path, run_folder, train_lm_run)

__all__ = ["ATTACKS", "DP_LR", "METHOD", "QUICK", "LMRun", "attack_lm_run", "lm_run", "load_run_model", "record_path",
           "run_folder", "train_lm_run"]
