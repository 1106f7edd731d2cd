"""Whether what one tool call reports agrees with itself: the ``ToolResult`` the environment returned, the entry it
left in ``state.log`` and the goals ``state.completed`` gained. ``EnvBase.call`` derives the log and the completed
goals from the result (``josh.core.env.record``), so they agree by construction; an environment that overrides
``call`` (or does not subclass ``EnvBase``) states them itself, and ``josh check-env`` holds it to this."""

from __future__ import annotations

from josh.core.env import ConversationState
from josh.types import ToolCall, ToolResult

FIX = "implement step(state, call) and let EnvBase.call record the result"


def disagreement(
    state: ConversationState, call: ToolCall, result: ToolResult, completed_before: set[int], logged_before: int
) -> str | None:
    """What disagrees after ``call`` returned ``result`` on ``state`` (which had ``completed_before`` goals and
    ``logged_before`` log entries), in words; ``None`` when everything agrees."""
    goals = tuple(result.completed_goals)
    if invalid := [g for g in goals if not isinstance(g, int) or not 0 <= g < len(state.task.goals)]:
        return f"completed_goals names {invalid}, not goals of the task (it has {len(state.task.goals)})"
    if already := sorted(set(goals) & completed_before):
        return f"completed_goals repeats goals {already} completed before the call"
    gained = state.completed - completed_before
    if gained != set(goals) or not completed_before <= state.completed:
        return f"completed_goals says {sorted(goals)}, but state.completed gained {sorted(gained)}"
    added = len(state.log) - logged_before
    if added != 1:
        return f"the call added {added} entries to state.log, not one"
    entry = state.log[-1]
    logged = (entry.name, entry.content, entry.error, tuple(entry.completed_goals))
    returned = (call.name, result.content, result.error, goals)
    for field, was, said in zip(("name", "content", "error", "completed_goals"), logged, returned, strict=True):
        if was != said:
            return f"the log entry's {field} is {_short(was)}, the call's result says {_short(said)}"
    if result.terminal and not state.terminated:
        return "the result is terminal but state.terminated is False"
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."
