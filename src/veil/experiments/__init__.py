"""Experiment runners and the result-record schema they write."""

from veil.results import Metric, ResultRecord, environment, git_commit, load_records

__all__ = ["Metric", "ResultRecord", "environment", "git_commit", "load_records"]
