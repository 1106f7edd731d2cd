"""Evaluation: the runner, metrics, per-call diagnostics, claims, paired comparison and the agent x user matrix."""
