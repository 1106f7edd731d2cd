"""The instruction-following LLM user for tau-bench-style tasks: ``task.user_goal`` is a hidden instruction it
acts out one short line at a time, ending with ``###STOP###``."""

from __future__ import annotations

from josh.users.goal import GoalUser

STOP_MARKER = "###STOP###"


class InstructionUser(GoalUser):
    """A user following a hidden instruction; otherwise it behaves like ``GoalUser``."""

    prompt_name = "instruction"
    default_marker = STOP_MARKER
