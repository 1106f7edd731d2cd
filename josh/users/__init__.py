"""User simulators and the ``make_user`` factory.

    make_user(kind, llm=None, *, user_tools=None, **options) -> UserSimulator

``USERS`` holds one entry per simulator (builder, options model, needs an LLM, environments). Each simulator
registers itself in its own module with ``register_user``: the registry imports every module of this package the
first time a name is looked up, so a new simulator is one file here. An environment's own simulators are declared
in the environment's package as entries (``josh.registry.entry``) that ``USERS`` names like entry points
(``module:ENTRY``), so neither package imports the other. LLM
users: ``goal`` (a customer with a goal text), ``guide`` (coached by the original dialogue), ``instruction`` (a
tau-bench-style hidden instruction), with ``UserConfig`` options. Rule-based users (no LLM): ``scripted`` (replays
``utterances`` or the task's original user turns), ``agenda`` (ToolWOZ, goal-driven; ``josh.envs.toolwoz.agenda``),
``retail_scripted`` (τ-bench: opens with the task's request, confirms, stops; ``josh.envs.taubench.user``) and
``tau2_scripted`` (τ² envs: the same talk, plus the task's user-side gold calls on the user's device;
``josh.envs.taubench.tau2_user``). The LLM users
``goal`` and ``instruction`` are ``ToolUser``s: given an environment's ``user_tools`` (τ² telecom's device) they call
them through the backend's function calling.
"""

from __future__ import annotations

from typing import Any

from josh.core.llm import LLM
from josh.core.user import ToolUser, UserSimulator, UserTurn
from josh.plugins import GROUPS
from josh.registry import Registry

USERS = Registry(
    "user simulator",
    "--user",
    noun="user",
    options_flag="--user-option; setup.user_options in a loop recipe",
    discover=(
        "josh.users",
        "josh.envs.taubench.user:RETAIL_SCRIPTED",
        "josh.envs.taubench.tau2_user:TAU2_SCRIPTED",
        "josh.envs.toolwoz.agenda:AGENDA",
    ),
    free_label="rule-based",
    builder_args=1,
    group=GROUPS["user"],
)


register_user = USERS.register
"""``register_user(kind, builder, *, options=None, needs_model=False, envs=None, summary="")``: make
``make_user(kind, llm, **options)`` call ``builder(llm, **options)``; without ``options`` the options model is read
off the builder's parameters after ``llm``."""


def user_kinds() -> list[str]:
    return USERS.names()


def make_user(
    kind: str, llm: LLM | None = None, *, user_tools: list[dict[str, Any]] | None = None, **options: Any
) -> UserSimulator:
    """Build the user simulator ``kind``; unknown kinds and options raise ``ValueError``. ``user_tools``: the
    environment's tools of the user's own device, given to a simulator that can call them (a ``ToolUser``)."""
    built = USERS.build(kind, llm, options=options)
    return built.with_tools(user_tools) if user_tools and isinstance(built, ToolUser) else built


__all__ = ["USERS", "ToolUser", "UserSimulator", "UserTurn", "make_user", "register_user", "user_kinds"]
