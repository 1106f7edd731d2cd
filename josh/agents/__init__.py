"""Agents: strategies that turn an LLM into a tool-using dialogue agent, and the ``make_agent`` factory.

    make_agent(strategy, env, llm, **options) -> Agent

``AGENTS`` holds one entry per strategy (builder, options model, needs an LLM, environments). Built-in: one prompted
agent per registered protocol (``react``, ``function_calling`` alias ``fc``, ``act``; options are ``AgentConfig``
fields: ``sampling``, ``max_generations``, ``max_calls_per_generation``, ``examples``, ``examples_as_turns``,
``constrain``); ``oracle``, the scripted ToolWOZ agent that knows the goals (no LLM; the entry ``josh.envs.toolwoz.oracle:ORACLE``,
named here like an entry point, so the environment never imports this package); ``replay`` (a task's gold calls). Other modules add strategies with
``register_agent(name, builder)`` and protocols with ``register_protocol(protocol)``.
"""

from __future__ import annotations

from typing import Any

from josh.agents.act import ActProtocol
from josh.agents.function_calling import FunctionCallingProtocol
from josh.agents.prompted import AgentConfig, AgentPrompt, PromptedAgent
from josh.agents.protocol import AgentProtocol
from josh.agents.react import ReactProtocol
from josh.core.agent import Agent, AgentTurn
from josh.core.env import Env
from josh.core.llm import LLM
from josh.plugins import GROUPS
from josh.registry import Registry

AGENTS = Registry(
    "agent strategy",
    "--agent",
    noun="agent",
    options_flag="--agent-option; setup.agent_options in a loop recipe",
    discover=("josh.agents.replay", "josh.envs.toolwoz.oracle:ORACLE"),
    builder_args=2,
    group=GROUPS["agent"],
)
_PROTOCOLS: dict[str, AgentProtocol] = {}


register_agent = AGENTS.register
"""``register_agent(name, builder, *, options=None, needs_model=False, envs=None, summary="", aliases=())``: make
``make_agent(name, env, llm, **options)`` call ``builder(env, llm, **options)``; without ``options`` the options
model is read off the builder's parameters after ``env`` and ``llm``."""


def register_protocol(protocol: AgentProtocol, *, aliases: tuple[str, ...] = ()) -> None:
    """Make ``protocol`` known (to the viewer and the warm start) and a strategy of its name: ``make_agent(name,
    env, llm, **options)`` builds a ``PromptedAgent`` writing under it, ``options`` being ``AgentConfig`` fields."""
    _PROTOCOLS[protocol.name] = protocol

    def build(env: Env, llm: LLM, **options: Any) -> Agent:
        return PromptedAgent(protocol, env, llm, AgentConfig.of(protocol.name, options))

    summary = f"prompted, {protocol.name} protocol"
    register_agent(protocol.name, build, options=AgentConfig, needs_model=True, summary=summary, aliases=aliases)


def protocol_named(name: str) -> AgentProtocol:
    """The registered protocol ``name``; ``ValueError`` naming the known ones when there is none."""
    if name not in _PROTOCOLS:
        raise ValueError(f"unknown agent protocol {name!r}; known: {', '.join(sorted(_PROTOCOLS))}")
    return _PROTOCOLS[name]


def protocols() -> list[AgentProtocol]:
    return list(_PROTOCOLS.values())


def agent_prompt(strategy: str, env: Env, **options: Any) -> AgentPrompt:
    """What the prompted agent ``strategy`` shows its model (system prompt, preamble, tools), without a model."""
    key = AGENTS.get(strategy).name
    if key not in _PROTOCOLS:
        raise ValueError(f"the {key} agent is not prompted: choose one of {', '.join(sorted(_PROTOCOLS))}")
    return AgentPrompt(_PROTOCOLS[key], env, AgentConfig.of(key, options))


register_protocol(ReactProtocol())
register_protocol(FunctionCallingProtocol(), aliases=("fc", "function-calling"))
register_protocol(ActProtocol())


def agent_strategies() -> list[str]:
    return AGENTS.names()


def make_agent(strategy: str, env: Env, llm: LLM | None = None, **options: Any) -> Agent:
    """Build the agent for ``strategy``; unknown strategies and options raise ``ValueError``."""
    return AGENTS.build(strategy, env, llm, options=options)


__all__ = [
    "AGENTS",
    "Agent",
    "AgentTurn",
    "agent_prompt",
    "agent_strategies",
    "make_agent",
    "protocol_named",
    "protocols",
    "register_agent",
    "register_protocol",
]
