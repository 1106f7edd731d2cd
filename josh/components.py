"""Build the environment, LLMs, agent and user simulator of a run from names (the CLI and recipes use this).

LLMs are built only for the components that need one: the scripted ``oracle`` / ``replay`` agents and the
rule-based ``agenda`` / ``scripted`` users run without a model, so no model is loaded for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from josh.agents.base import Agent
from josh.envs.base import Env
from josh.llm.base import LLM, Sampling
from josh.types import Task
from josh.users.base import UserSimulator

LLM_FREE_AGENTS = frozenset({"oracle", "replay"})
LLM_FREE_USERS = frozenset({"agenda", "scripted", "retail_scripted"})


class ComponentOptions(BaseModel):
    """Names of the pieces of a run; the factories check them and say what is valid."""

    model_config = ConfigDict(extra="forbid")

    env: str = "toolwoz"
    data: str = "mini"
    split: str = "test"
    agent: str = "react"
    backend: str = "hf"
    model: str | None = "smollm2"
    user: str = "agenda"
    user_backend: str | None = None
    user_model: str | None = None
    base_url: str | None = Field(None, description="the agent's OpenAI-compatible endpoint (openai backend)")
    user_base_url: str | None = Field(
        None, description="the user's endpoint (default: base_url when the user shares the agent's backend and model)"
    )
    llm_options: dict[str, Any] = Field(
        default_factory=dict,
        description="settings of the agent's backend (LLMConfig fields, e.g. dtype, load_in_4bit, max_batch_size); "
        "a user simulator on the same backend and model shares that backend",
    )
    limit: int | None = Field(None, ge=1)
    agent_sampling: Sampling | None = None
    user_sampling: Sampling | None = None


@dataclass
class Components:
    """A built run: the env, the tasks of the chosen split, the agent, the user and the LLMs in use."""

    env: Env
    tasks: list[Task]
    agent: Agent
    user: UserSimulator
    llms: list[LLM]

    def cost(self) -> float:
        return sum(llm.usage.cost for llm in self.llms)


def build_env(name: str, data: str) -> Env:
    """The environment ``name`` over data source ``data`` (ToolWOZ: ``mini`` or a folder; retail, airline: a
    folder, or ``default`` for ``envs/<name>`` / ``$JOSH_<NAME>_DATA``)."""
    if name == "toolwoz":
        from josh.envs.toolwoz.data import load_toolwoz
        from josh.envs.toolwoz.env import ToolWOZEnv

        loaded = load_toolwoz(data)
        return ToolWOZEnv(loaded.db_dir, tasks=loaded.splits)
    if name == "retail":
        from josh.envs.retail import RetailEnv

        return RetailEnv(None if data in ("", "default", "mini") else data)
    if name == "airline":
        from josh.envs.airline import AirlineEnv

        return AirlineEnv(None if data in ("", "default", "mini") else data)
    raise ValueError(f"unknown environment {name!r}; choose toolwoz, retail or airline")


def build_components(options: ComponentOptions) -> Components:
    """Build everything ``options`` names; a bad name raises ``ValueError`` before any model loads."""
    from josh.agents import make_agent
    from josh.llm.factory import make_llm
    from josh.users import make_user

    env = build_env(options.env, options.data)
    tasks = env.tasks(options.split)[: options.limit]
    llms: dict[tuple[str, str | None, str | None], LLM] = {}
    agent_key = (options.backend, options.model, options.base_url)

    def llm_for(backend: str, model: str | None, base_url: str | None) -> LLM:
        key = (backend, model, base_url)
        if base_url and backend != "openai":
            raise ValueError(f"a base URL ({base_url}) only applies to the openai backend, not {backend!r}")
        if key not in llms:
            settings = options.llm_options if key == agent_key else {}
            llms[key] = make_llm(backend, model, **settings, **({"base_url": base_url} if base_url else {}))
        return llms[key]

    agent_llm = None
    if options.agent not in LLM_FREE_AGENTS:
        agent_llm = llm_for(*agent_key)
    user_llm = None
    if options.user not in LLM_FREE_USERS:
        shared = options.user_backend is None and options.user_model is None
        user_url = options.user_base_url or (options.base_url if shared else None)
        user_llm = llm_for(options.user_backend or options.backend, options.user_model or options.model, user_url)
    agent_opts = {"sampling": options.agent_sampling} if options.agent_sampling and agent_llm else {}
    user_opts = {"sampling": options.user_sampling} if options.user_sampling and user_llm else {}
    agent = make_agent(options.agent, env, agent_llm, **agent_opts)
    user_sim = make_user(options.user, user_llm, **user_opts)
    return Components(env=env, tasks=tasks, agent=agent, user=user_sim, llms=list(llms.values()))
