"""Agents: strategies that turn an LLM into a tool-using dialogue agent, and the ``make_agent`` factory.

    make_agent(strategy, env, llm, **options) -> Agent

Built-in strategies: ``react``, ``function_calling`` (alias ``fc``), ``act``; options are ``AgentConfig`` fields
(``sampling``, ``max_generations``, ``max_calls_per_generation``, ``examples``). ``oracle`` is the scripted
ToolWOZ agent that knows the goals (no LLM; options ``reveal_only``, ``noise``, ``seed``). Other modules add
strategies with ``register_agent(name, builder)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from josh.agents.base import Agent, AgentTurn
from josh.envs.base import Env
from josh.llm.base import LLM

AgentBuilder = Callable[..., Agent]

_BUILDERS: dict[str, AgentBuilder] = {}
_ALIASES = {"fc": "function_calling", "function-calling": "function_calling"}


def register_agent(name: str, builder: AgentBuilder) -> None:
    """Make ``make_agent(name, env, llm, **options)`` call ``builder(env, llm, **options)``."""
    _BUILDERS[name] = builder


def _react(env: Env, llm: LLM, **options: Any) -> Agent:
    from josh.agents.react import ReactAgent

    return ReactAgent(env, llm, **options)


def _function_calling(env: Env, llm: LLM, **options: Any) -> Agent:
    from josh.agents.function_calling import FunctionCallingAgent

    return FunctionCallingAgent(env, llm, **options)


def _act(env: Env, llm: LLM, **options: Any) -> Agent:
    from josh.agents.act import ActAgent

    return ActAgent(env, llm, **options)


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


register_agent("react", _react)
register_agent("function_calling", _function_calling)
register_agent("act", _act)
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


__all__ = ["Agent", "AgentTurn", "agent_key", "agent_strategies", "make_agent", "register_agent"]
