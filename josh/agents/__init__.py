"""Agents: strategies that turn an LLM into a tool-using dialogue agent, and the ``make_agent`` factory.

    make_agent(strategy, env, llm, **options) -> Agent

Built-in strategies: one prompted agent per registered protocol (``react``, ``function_calling`` alias ``fc``,
``act``; options are ``AgentConfig`` fields: ``sampling``, ``max_generations``, ``max_calls_per_generation``,
``examples``, ``examples_as_turns``, ``constrain``); ``oracle``, the scripted ToolWOZ agent that knows the goals (no
LLM; options ``reveal_only``, ``noise``, ``seed``); ``replay`` (a task's gold calls). Other modules add strategies
with ``register_agent(name, builder)`` and protocols with ``register_protocol(protocol)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from josh.agents.act import ActProtocol
from josh.agents.base import Agent, AgentTurn
from josh.agents.function_calling import FunctionCallingProtocol
from josh.agents.prompted import AgentConfig, AgentPrompt, PromptedAgent
from josh.agents.protocol import AgentProtocol
from josh.agents.react import ReactProtocol
from josh.envs.base import Env
from josh.llm.base import LLM

AgentBuilder = Callable[..., Agent]

_BUILDERS: dict[str, AgentBuilder] = {}
_PROTOCOLS: dict[str, AgentProtocol] = {}
_ALIASES = {"fc": "function_calling", "function-calling": "function_calling"}


def register_agent(name: str, builder: AgentBuilder) -> None:
    """Make ``make_agent(name, env, llm, **options)`` call ``builder(env, llm, **options)``."""
    _BUILDERS[name] = builder


def register_protocol(protocol: AgentProtocol) -> None:
    """Make ``protocol`` known (to the viewer and the warm start) and a strategy of its name: ``make_agent(name,
    env, llm, **options)`` builds a ``PromptedAgent`` writing under it, ``options`` being ``AgentConfig`` fields."""
    _PROTOCOLS[protocol.name] = protocol

    def build(env: Env, llm: LLM, **options: Any) -> Agent:
        return PromptedAgent(protocol, env, llm, AgentConfig.of(protocol.name, options))

    register_agent(protocol.name, build)


def protocol_named(name: str) -> AgentProtocol:
    """The registered protocol ``name``; ``ValueError`` naming the known ones when there is none."""
    if name not in _PROTOCOLS:
        raise ValueError(f"unknown agent protocol {name!r}; known: {', '.join(sorted(_PROTOCOLS))}")
    return _PROTOCOLS[name]


def protocols() -> list[AgentProtocol]:
    return list(_PROTOCOLS.values())


def agent_prompt(strategy: str, env: Env, **options: Any) -> AgentPrompt:
    """What the prompted agent ``strategy`` shows its model (system prompt, preamble, tools), without a model."""
    key = agent_key(strategy)
    if key not in _PROTOCOLS:
        raise ValueError(f"the {key} agent is not prompted: choose one of {', '.join(sorted(_PROTOCOLS))}")
    return AgentPrompt(_PROTOCOLS[key], env, AgentConfig.of(key, options))


def _oracle(env: Env, llm: LLM | None, **options: Any) -> Agent:
    from josh.envs.toolwoz.oracle import OracleAgent

    try:
        return OracleAgent(env, llm, **options)
    except TypeError as exc:
        raise ValueError(f"oracle agent: {exc}") from None


def _replay(env: Env, llm: LLM | None, **options: Any) -> Agent:
    from josh.agents.replay import ReplayAgent

    try:
        return ReplayAgent(env, **options)
    except TypeError as exc:
        raise ValueError(f"replay agent: {exc}") from None


register_protocol(ReactProtocol())
register_protocol(FunctionCallingProtocol())
register_protocol(ActProtocol())
register_agent("oracle", _oracle)
register_agent("replay", _replay)


def agent_strategies() -> list[str]:
    return sorted(_BUILDERS)


def make_agent(strategy: str, env: Env, llm: LLM | None = None, **options: Any) -> Agent:
    """Build the agent for ``strategy``; unknown strategies and options raise ``ValueError``."""
    return _BUILDERS[agent_key(strategy)](env, llm, **options)


def agent_key(strategy: str) -> str:
    """The registered name of ``strategy`` (aliases resolved); ``ValueError`` when there is none."""
    key = _ALIASES.get(strategy.strip().lower(), strategy.strip().lower())
    if key not in _BUILDERS:
        raise ValueError(
            f"unknown agent strategy {strategy!r} (--agent); choose one of {', '.join(agent_strategies())}"
        )
    return key


__all__ = [
    "Agent",
    "AgentTurn",
    "agent_key",
    "agent_prompt",
    "agent_strategies",
    "make_agent",
    "protocol_named",
    "protocols",
    "register_agent",
    "register_protocol",
]
