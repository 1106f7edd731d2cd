"""A run spec's names and options checked against the registries when a recipe is read, before anything runs.

A recipe's ``setup`` (and a GRPO recipe's ``grpo:`` section, and a judge's settings) carries the options of the
environment, the agent, the user simulator and the LLM backend as plain mappings, since which keys are valid depends on
the names chosen beside them. ``spec_problems`` checks them here, each problem as one line with its full recipe path
(``setup.agent_options.max_generatoins``) and the closest valid key, so a misspelt option is a refused recipe rather
than a default silently used. Whether a model or a server is there is the preflight's (``josh.run.components``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from josh.agents import AGENTS
from josh.envs import ENVIRONMENTS
from josh.envs.openenv import is_remote
from josh.llm.factory import BACKENDS
from josh.registry import Registry, parse_backend_model
from josh.run.env_judge import JUDGE_OPTION, JUDGE_SETTINGS_OPTION
from josh.run.spec import JudgeSpec
from josh.users import USERS
from josh.util.strict import Loc, explain


def options_problems(registry: Registry, name: str, options: Mapping[str, Any], where: Loc, name_at: Loc) -> list[str]:
    """The problems of ``options`` (at ``where``) for the entry ``name`` (at ``name_at``) of ``registry``: an unknown
    name, an unknown key with its path and the closest valid one, a key that its own setting gives, a bad value."""
    try:
        entry = registry.get(name)
    except ValueError as exc:
        return [f"{_path(name_at)}: {exc}"]
    about = f"the {entry.name} {registry.noun}"
    problems = [
        f"{_path((*where, key))}: set by its own key, not here ({about})" for key in options if key in registry.fixed
    ]
    try:
        entry.options.model_validate({k: v for k, v in options.items() if k not in registry.fixed})
    except ValidationError as exc:
        problems += explain(exc, entry.options, where, about)
    return problems


def _path(loc: Loc) -> str:
    return ".".join(map(str, loc))


def _supports(registry: Registry, name: str, env: str, where: Loc) -> list[str]:
    """An agent or user that does not run on ``env``, as a problem at ``where``."""
    try:
        problem = registry.unsupported(registry.get(name), env)
    except ValueError:
        return []  # options_problems names it
    return [f"{_path(where)}: {problem}"] if problem else []


def _env_judge_problems(env_options: Mapping[str, Any], where: Loc) -> list[str]:
    """The problems of the backend settings of the judge an environment's options name (τ²'s ``judge_options``)."""
    judge = env_options.get(JUDGE_OPTION)
    if not isinstance(judge, str):
        return []
    try:
        backend, _ = parse_backend_model(judge, _path((*where, JUDGE_OPTION)))
    except ValueError:
        return []  # the environment's own options name it
    settings = env_options.get(JUDGE_SETTINGS_OPTION) or {}
    if not isinstance(settings, Mapping):
        return []
    return options_problems(BACKENDS, backend, settings, (*where, JUDGE_SETTINGS_OPTION), (*where, JUDGE_OPTION))


def spec_problems(spec: BaseModel, where: Loc) -> list[str]:
    """Every problem of the names and options of ``spec`` (a ``RunSpec`` or any of its parts, e.g. a GRPO section),
    which sits at ``where`` in its recipe; empty when there is none."""
    fields = type(spec).model_fields
    env = getattr(spec, "env", None)
    problems: list[str] = []
    local = env is not None and not is_remote(env)
    if local and "env_options" in fields:
        problems += options_problems(ENVIRONMENTS, env, spec.env_options, (*where, "env_options"), (*where, "env"))
        problems += _env_judge_problems(spec.env_options, (*where, "env_options"))
    for registry, key in ((AGENTS, "agent"), (USERS, "user")):
        if f"{key}_options" not in fields:
            continue
        name = getattr(spec, key)
        options = getattr(spec, f"{key}_options")
        problems += options_problems(registry, name, options, (*where, f"{key}_options"), (*where, key))
        if local:
            problems += _supports(registry, name, env, (*where, key))
    if "llm_options" in fields and "backend" in fields:
        problems += options_problems(
            BACKENDS, spec.backend, spec.llm_options, (*where, "llm_options"), (*where, "backend")
        )
    if "user_backend" in fields and spec.user_backend is not None:
        problems += options_problems(
            BACKENDS, spec.user_backend, {}, (*where, "user_options"), (*where, "user_backend")
        )
    return problems


def judge_problems(judge: JudgeSpec, where: Loc) -> list[str]:
    """The problems of a judge's backend and settings at ``where`` (e.g. ``extract.judge``)."""
    return options_problems(BACKENDS, judge.backend, judge.llm_options, (*where, "llm_options"), (*where, "backend"))
