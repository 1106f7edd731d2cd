"""Evaluation: the runner, metrics, the summary table, paired comparison and the agent x user-simulator matrix."""
