"""A third-party-style OpenEnv environment, built only from OpenEnv's own classes (``MCPEnvironment``, FastMCP tools,
``create_app``) the way its docs and templates build one: no task API, no user, actions are OpenEnv's MCP actions.

Each episode (``reset(seed=...)``) draws a target (3 or 5) from its seed and says so in the reset observation's
metadata; ``add(n)`` adds to a running total; ``submit()`` ends the episode with reward 1.0 when the total is the
target, else 0.0. ``add`` also pays 0.1 per call, so a conversation that ends before ``submit`` has step rewards.
``add`` waits at ``counter_rules.TOGETHER`` when it is set and records in ``counter_rules.ADDS`` whether the other calls
came while it waited (the concurrency test's proof that conversations are in flight at once).
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import FastAPI
from fastmcp import FastMCP
from openenv.core.env_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State

from tests.fakes import counter_rules
from tests.fakes.counter_rules import STEP_REWARD, target


class CounterEnvironment(MCPEnvironment):
    """See the module docstring."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("counter")

        @mcp.tool
        def add(n: int) -> int:
            """Add n to the running total; returns the total."""
            met = True
            if counter_rules.TOGETHER is not None:
                try:
                    counter_rules.TOGETHER.wait()
                except threading.BrokenBarrierError:
                    met = False
            counter_rules.ADDS.append(met)
            self.total += n
            return self.total

        @mcp.tool
        def submit() -> str:
            """Submit the total: the episode ends."""
            self.submitted = True
            return f"submitted {self.total}"

        super().__init__(mcp)
        self.total, self.target, self.submitted = 0, 0, False
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self.total, self.target, self.submitted = 0, target(seed), False
        self._state = State(episode_id=episode_id, step_count=0)
        return Observation(done=False, reward=0.0, metadata={"prompt": f"Make the total {self.target}, then submit."})

    def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": f"unknown action {type(action).__name__}"})

    def _scored(self, observation: Observation) -> Observation:
        self._state.step_count += 1
        if self.submitted:
            observation.done, observation.reward = True, 1.0 if self.total == self.target else 0.0
        elif isinstance(observation, CallToolObservation) and observation.tool_name == "add" and not observation.error:
            observation.reward = STEP_REWARD
        return observation

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return self._scored(super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return self._scored(await super().step_async(action, timeout_s=timeout_s, **kwargs))

    @property
    def state(self) -> State:
        return self._state


def counter_app() -> FastAPI:
    """The environment's OpenEnv app, as its own ``server/app.py`` would make it."""
    return create_app(
        CounterEnvironment, CallToolAction, CallToolObservation, env_name="counter", max_concurrent_envs=16
    )


class ListedCounterEnvironment(CounterEnvironment):
    """The same environment with OpenEnv's task API, listing task records of its own shape (not josh's)."""

    def list_splits(self) -> list[str]:
        return ["test"]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [{"seed": 0, "question": "Make the total 5."}]


def listed_counter_app() -> FastAPI:
    return create_app(
        ListedCounterEnvironment, CallToolAction, CallToolObservation, env_name="counter", max_concurrent_envs=2
    )
