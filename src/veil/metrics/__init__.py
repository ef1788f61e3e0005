"""Utility metrics (accuracy, F1, MCC, correlations) and leakage metrics (identity, Jaccard, TF-IDF, label, SBERT)."""

from veil.metrics.leakage import (LEAKAGE_METRICS, PAPER_NAMES, TfidfScorer, leakage_metrics, leakage_scores,
                                  summarize_scores)
from veil.metrics.utility import TASK_METRICS, utility_metrics

__all__ = ["TASK_METRICS", "utility_metrics", "LEAKAGE_METRICS", "PAPER_NAMES", "TfidfScorer", "leakage_metrics",
           "leakage_scores", "summarize_scores"]
