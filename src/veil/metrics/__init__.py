"""Utility and leakage metrics."""

from veil.metrics.utility import TASK_METRICS, utility_metrics

__all__ = ["TASK_METRICS", "utility_metrics"]
