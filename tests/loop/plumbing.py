"""The scripted loop's recipe (``tests.fakes.loop.recipe``) with a smaller held-out evaluation (4 tasks x 1 trial,
not 10 x 2), for the tests that check what the loop trains on, from where, and what its report says, never how well
a model scores: every stage still runs, on the same components."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.loop.recipe import LoopRecipe
from tests.fakes.loop import recipe as full_recipe

SMALL_EVAL = {"split": "test", "limit": 4, "max_turns": 10, "trials": 1}


def recipe(tmp_path: Path, **changes: Any) -> LoopRecipe:
    """``tests.fakes.loop.recipe`` with ``SMALL_EVAL`` unless ``changes`` give their own ``eval``."""
    return full_recipe(tmp_path, **{"eval": SMALL_EVAL, **changes})
