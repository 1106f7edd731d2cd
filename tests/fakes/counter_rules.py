"""The counter environment's rules (``counter_env.py``), apart from OpenEnv's classes: a test module reads them without
importing OpenEnv's server stack at collection."""

from __future__ import annotations

import random

DELAY = 0.0
"""Seconds each ``add`` call sleeps (a slow server)."""
STEP_REWARD = 0.1
ADDS: list[tuple[float, float]] = []
"""(start, end) of every ``add`` call, in ``time.monotonic`` seconds."""


def target(seed: int | None) -> int:
    """The episode's target, from its seed."""
    return random.Random(seed).choice([3, 5])
