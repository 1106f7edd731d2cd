"""The counter environment's rules (``counter_env.py``), apart from OpenEnv's classes: a test module reads them without
importing OpenEnv's server stack at collection."""

from __future__ import annotations

import random
import threading

TOGETHER: threading.Barrier | None = None
"""When set, each ``add`` call waits there for the others' (calls that can only finish while in flight at once)."""
STEP_REWARD = 0.1
ADDS: list[bool] = []
"""Whether each ``add`` call met the others at ``TOGETHER`` (False: the barrier timed out or broke)."""


def target(seed: int | None) -> int:
    """The episode's target, from its seed."""
    return random.Random(seed).choice([3, 5])
