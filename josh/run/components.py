"""Build the environment, LLMs, agent and user simulator of a run from its ``RunSpec`` (the CLI and recipes use this).

LLMs are built only for the components whose registry entry needs one (the scripted agents and the rule-based
users run without a model). Every name, option and backend setting is checked against the registries before
anything loads, and an HTTP backend is asked once whether it can be reached, so a typo or a server that is down
stops the run at once with one line.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import Field

from josh.agents import AGENTS, Agent, make_agent
from josh.core.env import Env
from josh.core.llm import LLM, Sampling, run_with_llms
from josh.envs import ENVIRONMENTS, build_env, check_data
from josh.envs.openenv import is_remote, served_name
from josh.llm.config import LLMConfig, LLMKey
from josh.llm.factory import BACKENDS, build_llm, check_buildable, llm_config
from josh.llm.health import check_connections
from josh.run.env_judge import attach_judge, env_judge
from josh.run.info import RunInfo, run_info
from josh.run.spec import RunSpec
from josh.types import Task
from josh.users import USERS, UserSimulator, make_user

T = TypeVar("T")


class ComponentOptions(RunSpec):
    """A run spec plus what one stage takes from it: the task split (its first ``limit`` tasks) and the sampling."""

    split: str = "test"
    limit: int | None = Field(None, ge=1)
    agent_sampling: Sampling | None = None
    user_sampling: Sampling | None = None

    def run_info(self, **extra: Any) -> RunInfo:
        """The provenance record of a run built from these options (``extra``: e.g. ``recipe``)."""
        needs_agent_llm, needs_user_llm = AGENTS.get(self.agent).needs_model, USERS.get(self.user).needs_model
        return run_info(
            env=self.env, data=self.data, env_options=self.env_options or None, split=self.split, agent=self.agent,
            backend=self.backend if needs_agent_llm else None,
            model=self.model if needs_agent_llm else None, user=self.user,
            user_backend=(self.user_backend or self.backend) if needs_user_llm else None,
            user_model=(self.user_model or self.model) if needs_user_llm else None, **extra,
        )  # fmt: skip


@dataclass
class Components:
    """One agent/user pair built and ready to run (``build_components``): the env, the tasks of the chosen split, the
    agent, the user and the LLMs in use. Several pairs on one environment are built from a ``SharedComponents``."""

    env: Env
    tasks: list[Task]
    agent: Agent
    user: UserSimulator
    llms: list[LLM]

    def cost(self) -> float:
        return sum(llm.usage.cost for llm in self.llms)

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """``asyncio.run(work)``; the backends' async HTTP connections are closed in that loop before it ends."""
        return run_with_llms(self.llms, work)

    def close(self, *, cancel: bool = True) -> None:
        """Stop the local backends' worker threads (with ``cancel``, queued requests fail and a generation stops at its
        next token); called when a run ends or is interrupted."""
        for llm in self.llms:
            llm.close(cancel=cancel)


def check_names(options: ComponentOptions) -> None:
    """Raise ``ValueError`` for an unknown environment, agent or user, an agent or user that does not run on the
    environment, or an option it (or the agent's backend, ``--llm-option``) does not take (before anything is
    loaded). An OpenEnv server (``openenv:URL``) is asked its name, which the agent is checked against; its own user
    answers, so ``--user`` stays rule-based. A ``--data`` the environment would ignore is refused."""
    check_data(options.env, options.data)
    if is_remote(options.env):
        AGENTS.check(options.agent, env=served_name(options.env), options=options.agent_options)
        if USERS.get(options.user).needs_model:
            raise ValueError(f"--env {options.env}: the server's own user answers; drop --user {options.user}")
        return
    ENVIRONMENTS.check(options.env, options=options.env_options)
    AGENTS.check(options.agent, env=options.env, options=options.agent_options)
    USERS.check(options.user, env=options.env, options=options.user_options)
    BACKENDS.check(options.backend, options=options.llm_options)  # also when no component needs the LLM


def llm_keys(options: ComponentOptions) -> tuple[LLMKey | None, LLMKey | None]:
    """(backend, model, base URL) of the agent's and the user's LLM; None for a component that needs none."""
    agent = (options.backend, options.model, options.base_url) if AGENTS.get(options.agent).needs_model else None
    user = None
    if USERS.get(options.user).needs_model:
        shared = options.user_backend is None and options.user_model is None
        url = options.user_base_url or (options.base_url if shared else None)
        user = (options.user_backend or options.backend, options.user_model or options.model, url)
    for key in (agent, user):
        if key is not None and key[2] and key[0] != "openai":
            raise ValueError(f"--base-url {key[2]} only applies to the openai backend, not {key[0]!r}")
    return agent, user


def check_llms(wanted: dict[LLMKey, dict[str, Any]], *, check_connection: bool = True) -> dict[LLMKey, LLMConfig]:
    """The config of each LLM in ``wanted`` (key: backend, model, base URL; value: its backend settings), each checked
    (``ValueError``: a bad setting, a backend package missing) and every HTTP endpoint asked once whether it answers
    (``LLMError``), without loading a model. Every josh run builds its LLMs from these (``build_llms``)."""
    configs: dict[LLMKey, LLMConfig] = {}
    for key, settings in wanted.items():
        configs[key] = llm_config(key[0], key[1], **settings, **({"base_url": key[2]} if key[2] else {}))
        check_buildable(configs[key])
    if check_connection:
        check_connections(build_llm(config) for config in configs.values() if config.backend == "openai")
    return configs


def build_llms(configs: dict[LLMKey, LLMConfig]) -> dict[LLMKey, LLM]:
    """One LLM per checked config (``check_llms``)."""
    return {key: build_llm(config) for key, config in configs.items()}


def wanted_judge(options: ComponentOptions) -> tuple[LLMKey, dict[str, Any]] | None:
    """The key and settings of the LLM judge the run's environment options name (``josh.run.env_judge``), as the
    run wants it built (``_wanted``); None without a judge. Nothing is built here."""
    return env_judge(options.env_options, (options.backend, options.model, options.base_url), options.llm_options)


def _wanted(cells: Sequence[ComponentOptions]) -> dict[LLMKey, dict[str, Any]]:
    """Every LLM the cells need, keyed by (backend, model, base URL), with its settings: the agents' (with their
    ``llm_options``), then the users' and the judge of the first cell (their backend's defaults unless they share
    an agent's LLM)."""
    keys = [llm_keys(options) for options in cells]
    wanted: dict[LLMKey, dict[str, Any]] = {}
    for options, (agent_key, _) in zip(cells, keys, strict=True):
        if agent_key is not None:
            wanted[agent_key] = options.llm_options
    for _, user_key in keys:
        if user_key is not None:
            wanted.setdefault(user_key, {})
    judge = wanted_judge(cells[0])
    if judge is not None:
        wanted.setdefault(*judge)
    return wanted


def preflight(options: ComponentOptions, *, check_connection: bool = True) -> dict[LLMKey, LLMConfig]:
    """Check every name and backend setting (``ValueError``) and that HTTP backends answer (``LLMError``), without
    loading a model; returns the LLM configs the run needs, keyed by (backend, model, base URL)."""
    return preflight_cells([options], check_connection=check_connection)


def preflight_cells(cells: Sequence[ComponentOptions], *, check_connection: bool = True) -> dict[LLMKey, LLMConfig]:
    """``preflight`` for several agent/user pairs on one environment (the matrix's cells), their LLMs merged."""
    if not cells:
        raise ValueError("nothing to build: no agent/user pair given")
    first = cells[0]
    for options in cells:
        shared = ("env", "data", "env_options", "split", "limit")
        if any(getattr(options, field) != getattr(first, field) for field in shared):
            raise ValueError("the agent/user pairs built together must share the environment, its data and split")
        check_names(options)
    return check_llms(_wanted(cells), check_connection=check_connection)


def build_agent(
    env: Env, name: str, llm: LLM | None, options: Mapping[str, Any], sampling: Sampling | None = None
) -> Agent:
    """The agent ``name`` on ``env`` with ``llm`` (``sampling`` when it has one), as every josh run builds it."""
    opts = dict(options)
    if sampling and llm:
        opts["sampling"] = sampling
    return make_agent(name, env, llm, **opts)


def build_user(
    env: Env, name: str, llm: LLM | None, options: Mapping[str, Any], sampling: Sampling | None = None
) -> UserSimulator:
    """The user simulator ``name`` with ``llm`` (``sampling`` when it has one) and ``env``'s user tools (τ² telecom's
    device), as every josh run builds it."""
    opts = dict(options)
    if sampling and llm:
        opts["sampling"] = sampling
    return make_user(name, llm, user_tools=env.user_tools or None, **opts)


@dataclass
class SharedComponents:
    """What several agent/user pairs on one environment share, built once (``build_shared``): the environment, its
    tasks and the LLMs of every pair, keyed by (backend, model, base URL). It holds no agent or user: ``agent`` and
    ``user`` build one pair's on these LLMs (the user with the environment's user tools); ``Components`` is one
    pair, complete."""

    env: Env
    tasks: list[Task]
    llms: dict[LLMKey, LLM]

    def agent(self, options: ComponentOptions) -> Agent:
        """The agent ``options`` names, on its LLM (with the agent sampling)."""
        agent_key, _ = llm_keys(options)
        llm = self.llms[agent_key] if agent_key else None
        return build_agent(self.env, options.agent, llm, options.agent_options, options.agent_sampling)

    def user(self, options: ComponentOptions) -> UserSimulator:
        """The user simulator ``options`` names, on its LLM, with the environment's user tools."""
        _, user_key = llm_keys(options)
        llm = self.llms[user_key] if user_key else None
        return build_user(self.env, options.user, llm, options.user_options, options.user_sampling)

    def cost(self) -> float:
        return sum(llm.usage.cost for llm in self.llms.values())


def build_shared(cells: Sequence[ComponentOptions], *, check_connection: bool = True) -> SharedComponents:
    """The environment, tasks and LLMs for agent/user pairs on one environment, after ``preflight_cells`` (so a bad
    name, a bad setting or an unreachable HTTP backend stops the run before any model loads); the judge the first
    pair's environment options name is attached."""
    configs = preflight_cells(cells, check_connection=check_connection)
    first = cells[0]
    env = build_env(first.env, first.data, first.env_options)
    tasks = env.tasks(first.split)[: first.limit]
    llms = build_llms(configs)
    judge = wanted_judge(first)
    if judge is not None:
        attach_judge(env, llms[judge[0]])
    return SharedComponents(env=env, tasks=tasks, llms=llms)


def build_judged_env(name: str, data: str, options: Mapping[str, Any], *, check_connection: bool = True) -> Env:
    """The environment ``name`` with the judge its ``options`` name (``judge``, with ``judge_options`` or its
    backend's defaults) checked, built and attached, for a command that builds no other LLM (``josh check-env``)."""
    judge = env_judge(options, ("", "", None), {})
    configs = check_llms(dict([judge]), check_connection=check_connection) if judge else {}
    env = build_env(name, data, options)
    if judge is not None:
        attach_judge(env, build_llm(configs[judge[0]]))
    return env


def build_components(options: ComponentOptions, *, check_connection: bool = True) -> Components:
    """Build everything ``options`` names: ``build_shared`` for its one agent/user pair, then that pair."""
    shared = build_shared([options], check_connection=check_connection)
    agent, user = shared.agent(options), shared.user(options)
    return Components(env=shared.env, tasks=shared.tasks, agent=agent, user=user, llms=list(shared.llms.values()))
