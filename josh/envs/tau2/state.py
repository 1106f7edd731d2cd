"""Per-branch τ² state: a τ² ``Environment`` shared copy-on-write between branches, and the executed calls.

``fork()`` shares the environment object and makes both sides forget that they own it; the first state-changing
call on either side deep-copies it first (``own``), so an environment shared by two branches is never mutated.
Reads, think and calculate run on the shared object. ``calls`` are the (josh call id, τ² ``ToolCall``, τ²
``ToolMessage``) triples in execution order, the user's own calls included: the trajectory the final reward replays.
``ended`` is why the conversation ended, as josh's runner sets it before the final reward (``None``: by the user).
"""

from __future__ import annotations

import copy
from typing import Any, cast

from josh.envs.base import ConversationState
from josh.types import Task


class Tau2State(ConversationState):
    """A conversation on a τ² environment (see the module docstring)."""

    __slots__ = ("environment", "calls", "ended", "_owned")

    def __init__(self, task: Task, environment: Any) -> None:
        super().__init__(task)
        self.environment = environment
        self.calls: list[tuple[str, Any, Any]] = []
        self.ended: str | None = None
        self._owned = False

    def fork(self) -> Tau2State:
        child = cast(Tau2State, super().fork())
        child.environment = self.environment
        child.calls = list(self.calls)
        child.ended = self.ended
        child._owned = self._owned = False
        return child

    def own(self) -> Any:
        """This branch's own environment, copied on first use after a fork or a reset."""
        if not self._owned:
            self.environment = copy.deepcopy(self.environment)
            self._owned = True
        return self.environment
