"""Retrieval attacks on protected representations (TextHide paper, Sec. 4.4 and App. C).

* :mod:`.index`: :class:`SimilaritySearch`, exact cosine search (torch or faiss);
* :mod:`.rss`: :class:`RSS`, :class:`RandomGuess`, scoring (:func:`evaluate_retrieval`) and the paper's tables;
* :mod:`.reprecon`: :class:`RepRecon`, the learned reconstruction attack;
* :mod:`.observe`: what an attacker observes (protected vectors) and query sampling.
"""

from veil.attacks.retrieval.rss import (PAPER_SETTINGS, RSS, RandomGuess, RepRecon, RetrievalResult, Retrieved,
                                        SimilaritySearch, evaluate_retrieval, observe, observe_original, protect,
                                        protect_with_texthide, reprecon_table, rss_table, sample_queries)

__all__ = ["RSS", "RepRecon", "RandomGuess", "RetrievalResult", "SimilaritySearch", "Retrieved",
           "evaluate_retrieval", "rss_table", "reprecon_table", "PAPER_SETTINGS", "observe", "observe_original",
           "protect", "protect_with_texthide", "sample_queries"]
