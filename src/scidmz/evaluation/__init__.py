"""Evaluation: the papers' metrics, experiments, plots and reports."""
