"""Retrieval attacks on protected representations (TextHide paper, Sec. 4.4 and App. C).

* :mod:`.index`: :class:`SimilaritySearch`, exact cosine search (torch or faiss);
* :mod:`.rss`: :class:`RSS`, :class:`RandomGuess`, scoring (:func:`evaluate_retrieval`) and the paper's tables;
* :mod:`.abs_rss`: :class:`AbsRSS`, sign-invariant search (Carlini et al. 2020's absolute-value step);
* :mod:`.reprecon`: :class:`RepRecon`, the learned reconstruction attack;
* :mod:`.observe`: what an attacker observes (protected vectors), the scorer's ground truth kept apart
  (:class:`MixTruth`, :func:`protect_with_truth`) and query sampling.
"""

from veil.attacks.retrieval.rss import (PAPER_SETTINGS, RSS, TABLE_ATTACKS, AbsRSS, MixTruth, Protected, RandomGuess,
                                        RepRecon, RetrievalResult, Retrieved, SimilaritySearch, compare_to_random,
                                        evaluate_retrieval, observe, observe_original, protect, protect_with_texthide,
                                        protect_with_texthide_truth, protect_with_truth, reprecon_table, rss_table,
                                        sample_queries)

__all__ = ["RSS", "AbsRSS", "RepRecon", "RandomGuess", "RetrievalResult", "SimilaritySearch", "Retrieved",
           "evaluate_retrieval", "compare_to_random", "rss_table", "reprecon_table", "PAPER_SETTINGS",
           "TABLE_ATTACKS", "observe", "observe_original", "protect", "protect_with_texthide", "protect_with_truth",
           "protect_with_texthide_truth", "MixTruth", "Protected", "sample_queries"]
