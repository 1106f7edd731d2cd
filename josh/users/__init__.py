"""User simulators and the ``make_user`` factory.

    make_user(kind, llm=None, **options) -> UserSimulator

``USERS`` holds one entry per simulator (builder, options model, needs an LLM, environments). Each simulator
registers itself in its own module with ``register_user``: the registry imports every module of this package (and
the environments' own simulators) the first time a name is looked up, so a new simulator is one file here. LLM
users: ``goal`` (a customer with a goal text), ``guide`` (coached by the original dialogue), ``instruction`` (a
tau-bench-style hidden instruction), with ``UserConfig`` options. Rule-based users (no LLM): ``scripted`` (replays
``utterances`` or the task's original user turns), ``agenda`` (ToolWOZ, goal-driven; ``josh.envs.toolwoz.agenda``),
``retail_scripted`` (τ-bench: opens with the task's request, confirms, stops; ``josh.envs.taubench.user``) and
``tau2_scripted`` (τ² envs: the same talk, plus the task's user-side gold calls on the user's device).
"""

from __future__ import annotations

from typing import Any

from josh.llm.base import LLM
from josh.registry import Registry
from josh.users.base import UserSimulator, UserTurn

USERS = Registry(
    "user simulator",
    "--user",
    noun="user",
    options_flag="--user-option; setup.user_options in a loop recipe",
    discover=("josh.users", "josh.envs.toolwoz.agenda", "josh.envs.taubench.user"),
    free_label="rule-based",
    builder_args=1,
)


register_user = USERS.register
"""``register_user(kind, builder, *, options=None, needs_model=False, envs=None, summary="")``: make
``make_user(kind, llm, **options)`` call ``builder(llm, **options)``; without ``options`` the options model is read
off the builder's parameters after ``llm``."""


def user_kinds() -> list[str]:
    return USERS.names()


def make_user(kind: str, llm: LLM | None = None, **options: Any) -> UserSimulator:
    """Build the user simulator ``kind``; unknown kinds and options raise ``ValueError``."""
    return USERS.build(kind, llm, options=options)


__all__ = ["USERS", "UserSimulator", "UserTurn", "make_user", "register_user", "user_kinds"]
