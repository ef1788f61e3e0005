"""How one bench cell is run and scored, keyed by the release kind its attack observes (and the utility of each
task and kind).

A cell function takes a :class:`~veil.bench.plan.Cell` and the corpus' :class:`~veil.bench.data.BenchData` and
returns a :class:`~veil.results.ResultRecord` whose ``extra["bench"]`` block says what the bench needs: the
attack's ``success`` (a named metric with its CI), whether that success is a re-identification rate comparable
across attacks, the random rate and the test against it, or the utility of the setting.

- :mod:`~veil.bench.cells.common`: defense keys, the defense, :class:`AttackResources`, query counts, the record.
- :mod:`~veil.bench.cells.vectors`: every runnable release read as vectors; the retrieval and inversion cells
  (and inversion after TextHide's masks are recovered).
- :mod:`~veil.bench.cells.training_encodings`: TextHide's mask recovery and unmixing on a training run.
- :mod:`~veil.bench.cells.document_embeddings`: the exact SentDP audit.
- :mod:`~veil.bench.cells.obfuscated_text`: word recovery on obfuscated sentences, and the parsers' utility.
- :mod:`~veil.bench.cells.representations`: the attribute attackers on r(x), their inversion, and the main
  task's utility.
- :mod:`~veil.bench.cells.text`: infilling of redacted spans (released text read as text; it is also read as
  vectors by :mod:`~veil.bench.cells.vectors`).
- :mod:`~veil.bench.cells.model`: membership inference on a released model (plain training, DP-SGD), and its test
  accuracy.
- :mod:`~veil.bench.cells.generative_model`: a fine-tuned language model's utility (next-token accuracy) and every
  attack on it (membership, canary exposure, PII inference and reconstruction, extraction).
- :mod:`~veil.bench.cells.utility`: utility by (corpus task, release kind).

An attack names its cell in :attr:`~veil.attacks.base.Attack.bench_cell` (``"module:function"``); the names below
are re-exported so ``veil.bench.cells:retrieval_cell`` and ``from veil.bench.cells import ...`` keep working.
"""

from __future__ import annotations

from veil.bench.cells.common import AttackResources, key_rng, make_defense
from veil.bench.cells.document_embeddings import audit_cell
from veil.bench.cells.generative_model import (exposure_cell, extraction_cell, lm_membership_cell, lm_utility,
                                               pii_cell)
from veil.bench.cells.model import membership_cell, model_utility
from veil.bench.cells.training_encodings import mask_recovery_cell, unmix_cell
from veil.bench.cells.utility import (UTILITY_CELLS, UTILITY_MEASURES, document_utility_cell, sentence_utility_cell,
                                      utility_cell)
from veil.bench.cells.obfuscated_text import parsing_utility, word_recovery_cell
from veil.bench.cells.representations import (attribute_cell, representations_inversion_cell,
                                              representations_utility)
from veil.bench.cells.text import infill_cell
from veil.bench.cells.vectors import (AS_VECTORS, inversion_cell, release_vectors, retrieval_cell,
                                      unmasked_inversion_cell)

#: the release kinds whose bench cells are built: those read as vectors, and the four read in their own form; the
#: plan still lists cells of any other kind (``veil bench --list``), and ``veil bench`` says which it cannot run
#: ("text" is among AS_VECTORS)
RUNNABLE_RELEASES = (*AS_VECTORS, "obfuscated-text", "representations", "model", "generative-model")

__all__ = ["AttackResources", "retrieval_cell", "inversion_cell", "unmasked_inversion_cell", "mask_recovery_cell",
           "unmix_cell", "audit_cell",
           "word_recovery_cell", "parsing_utility", "attribute_cell", "representations_inversion_cell",
           "representations_utility", "infill_cell",
           "membership_cell", "model_utility", "lm_membership_cell", "exposure_cell", "pii_cell", "extraction_cell",
           "lm_utility",
           "sentence_utility_cell", "document_utility_cell", "utility_cell", "UTILITY_CELLS", "UTILITY_MEASURES",
           "RUNNABLE_RELEASES", "key_rng", "make_defense", "release_vectors"]
