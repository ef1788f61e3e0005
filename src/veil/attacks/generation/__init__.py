"""Attacks on a released language model (the ``generative-model`` kind, issue 52): canary exposure
(:mod:`.exposure`, Carlini et al. 2019), training-data extraction (:mod:`.extraction`, Carlini et al. 2021), and PII
inference and reconstruction (:mod:`.pii`, Lukas et al. 2023), and membership inference (:mod:`.membership`).
Each observes the model only through :class:`.observe.LMAccess`: samples and the likelihood of given texts."""

from veil.attacks.generation.exposure import CanaryExposure, CandidateScores, score_exposure
from veil.attacks.generation.extraction import (Extracted, TrainingDataExtraction, score_extraction,
                                                score_pii_extraction, tag_pii)
from veil.attacks.generation.membership import LMMembership, LMMembershipReference, LMMembershipZlib
from veil.attacks.generation.observe import LMAccess
from veil.attacks.generation.pii import PIIGuesses, PIIInference, PIIReconstruction, score_pii

__all__ = ["LMAccess", "CanaryExposure", "CandidateScores", "score_exposure", "TrainingDataExtraction", "Extracted",
           "score_extraction", "tag_pii", "score_pii_extraction", "PIIInference", "PIIReconstruction", "PIIGuesses",
           "score_pii", "LMMembership", "LMMembershipZlib", "LMMembershipReference"]
