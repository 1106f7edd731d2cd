"""The instruction-following LLM user for tau-bench-style tasks: ``task.user_goal`` is a hidden instruction it
acts out one short line at a time, ending with ``###STOP###``."""

from __future__ import annotations

from josh.users import register_user
from josh.users.goal import GoalUser, UserConfig

STOP_MARKER = "###STOP###"


class InstructionUser(GoalUser):
    """A user following a hidden instruction; otherwise it behaves like ``GoalUser``."""

    prompt_name = "instruction"
    default_marker = STOP_MARKER


register_user(
    "instruction", InstructionUser, options=UserConfig, needs_model=True, summary="an LLM acting a hidden instruction"
)
