"""User simulators and the ``make_user`` factory.

    make_user(kind, llm=None, **options) -> UserSimulator

Built-in LLM users: ``goal`` (customer with a goal text), ``guide`` (coached by the original dialogue),
``instruction`` (tau-bench-style hidden instruction); options are ``UserConfig`` fields (``sampling``,
``stop_marker``). Rule-based users (no LLM): ``agenda`` (ToolWOZ goal-driven; options ``chunk``, ``patience``)
``scripted`` (replays ``utterances`` or the task's original user turns) and ``retail_scripted`` (opens with the
task's request, confirms, stops). Other modules add kinds with
``register_user(kind, builder)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from josh.llm.base import LLM
from josh.users.base import UserSimulator, UserTurn

UserBuilder = Callable[..., UserSimulator]

_BUILDERS: dict[str, UserBuilder] = {}


def register_user(kind: str, builder: UserBuilder) -> None:
    """Make ``make_user(kind, llm, **options)`` call ``builder(llm, **options)``."""
    _BUILDERS[kind] = builder


def _goal(llm: LLM | None, **options: Any) -> UserSimulator:
    from josh.users.goal import GoalUser

    return GoalUser(llm, **options)


def _guide(llm: LLM | None, **options: Any) -> UserSimulator:
    from josh.users.guide import GuideUser

    return GuideUser(llm, **options)


def _instruction(llm: LLM | None, **options: Any) -> UserSimulator:
    from josh.users.instruction import InstructionUser

    return InstructionUser(llm, **options)


def _agenda(llm: LLM | None, **options: Any) -> UserSimulator:
    from josh.envs.toolwoz.agenda import AgendaUser

    try:
        return AgendaUser(llm, **options)
    except TypeError as exc:
        raise ValueError(f"agenda user: {exc}") from None


def _scripted(llm: LLM | None, **options: Any) -> UserSimulator:
    from josh.users.scripted import ScriptedUser

    try:
        return ScriptedUser(llm, **options)
    except TypeError as exc:
        raise ValueError(f"scripted user: {exc}") from None


def _retail_scripted(llm: LLM | None, **options: Any) -> UserSimulator:
    from josh.envs.taubench.user import TauScriptedUser

    try:
        return TauScriptedUser(**options)
    except TypeError as exc:
        raise ValueError(f"retail_scripted user: {exc}") from None


register_user("goal", _goal)
register_user("guide", _guide)
register_user("instruction", _instruction)
register_user("agenda", _agenda)
register_user("scripted", _scripted)
register_user("retail_scripted", _retail_scripted)


def user_kinds() -> list[str]:
    return sorted(_BUILDERS)


def make_user(kind: str, llm: LLM | None = None, **options: Any) -> UserSimulator:
    """Build the user simulator ``kind``; unknown kinds and options raise ``ValueError``."""
    builder = _BUILDERS.get(kind.strip().lower())
    if builder is None:
        raise ValueError(f"unknown user simulator {kind!r}; choose one of {', '.join(user_kinds())}")
    return builder(llm, **options)


__all__ = ["UserSimulator", "UserTurn", "make_user", "register_user", "user_kinds"]
