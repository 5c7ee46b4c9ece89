"""Regression verdicts: per-step summaries of traces (`summary`), the bootstrap and verdict
rules (`stats`) and the comparison of two sides (`compare`)."""
