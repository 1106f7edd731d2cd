"""What a run would do, resolved without running it (``--plan``).

``plan_run`` checks everything a run checks before its first conversation (names, options, backend settings and
packages, that HTTP backends answer), then resolves what the run would load: the environment and the size of each of
its splits, and the model folder every local backend would load (a model that is not installed fails here with the
same line the run would print). ``conversation_bound`` and ``search_bound`` bound what a conversation or one task's
search can cost: at most this many agent and user LLM calls and generated tokens (a ceiling: conversations that end
early cost less; prompt tokens depend on the conversation and are not bounded). No model is loaded and nothing is
written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from josh.agents import AGENTS
from josh.core.llm import Sampling
from josh.envs import build_env
from josh.envs.openenv import is_remote
from josh.llm.config import LLMConfig
from josh.llm.models import is_adapter_dir, resolve_model
from josh.run.components import ComponentOptions, llm_keys, preflight
from josh.types import Task
from josh.users import USERS

LOCAL_BACKENDS = ("hf", "vllm")


@dataclass(frozen=True)
class Bound:
    """At most this many agent and user LLM calls, and generated tokens, of some part of a run."""

    agent_calls: int = 0
    user_calls: int = 0
    tokens: int = 0

    @property
    def calls(self) -> int:
        return self.agent_calls + self.user_calls

    def __add__(self, other: Bound) -> Bound:
        return Bound(
            self.agent_calls + other.agent_calls, self.user_calls + other.user_calls, self.tokens + other.tokens
        )

    def __mul__(self, times: int) -> Bound:
        return Bound(self.agent_calls * times, self.user_calls * times, self.tokens * times)


@dataclass
class RunPlan:
    """A run resolved: its environment and splits, the tasks it would run, its components and the model each LLM
    would load."""

    env: str
    data: str
    splits: dict[str, int]
    split: str
    chosen: list[Task]
    agent: str
    user: str
    llms: dict[str, str] = field(default_factory=dict)  # role -> 'backend:model (what loads)'

    @property
    def tasks(self) -> int:
        return len(self.chosen)

    def lines(self) -> dict[str, str]:
        """The plan's lines for the run: environment, splits, tasks, components and what each LLM loads."""
        lines = {
            "environment": f"{self.env} (data {self.data})",
            "splits": ", ".join(f"{name} {size}" for name, size in self.splits.items()) or "(served)",
            "tasks": f"{self.tasks} of {self.split}",
            "agent": self.agent,
            "user": self.user,
        }
        return lines | {f"{role} LLM": loads for role, loads in self.llms.items()}


def _sampling_tokens(options: object, given: Sampling | None) -> int:
    """The most tokens one call generates: the stage's sampling, else the component's own default."""
    if given is not None:
        return given.max_new_tokens
    sampling = getattr(options, "sampling", None)
    return sampling.max_new_tokens if isinstance(sampling, Sampling) else Sampling().max_new_tokens


def turn_bound(options: ComponentOptions) -> Bound:
    """At most what one agent turn and the user's reply after it cost."""
    agent, user = AGENTS.get(options.agent), USERS.get(options.user)
    bound = Bound()
    if agent.needs_model:
        parsed = AGENTS.parse(agent, options.agent_options)
        calls = int(getattr(parsed, "max_generations", 1))
        bound += Bound(agent_calls=calls, tokens=calls * _sampling_tokens(parsed, options.agent_sampling))
    if user.needs_model:
        parsed = USERS.parse(user, options.user_options)
        bound += Bound(user_calls=1, tokens=_sampling_tokens(parsed, options.user_sampling))
    return bound


def conversation_bound(options: ComponentOptions, max_turns: int) -> Bound:
    """At most what one conversation of ``max_turns`` agent turns costs (the user's opening message included)."""
    return turn_bound(options) * max_turns + opening_bound(options)


def search_bound(options: ComponentOptions, turns: int) -> Bound:
    """At most what one task's search costs when it expands at most ``turns`` agent turns
    (``SearchConfig.expanded_turns``), each followed by a user reply."""
    return turn_bound(options) * turns + opening_bound(options)


def opening_bound(options: ComponentOptions) -> Bound:
    """The user simulator's first message, when an LLM writes it."""
    user = USERS.get(options.user)
    if not user.needs_model:
        return Bound()
    return Bound(user_calls=1, tokens=_sampling_tokens(USERS.parse(user, options.user_options), options.user_sampling))


def _loads(config: LLMConfig) -> str:
    """What a backend would load: the resolved model folder of a local backend (``ModelNotFoundError`` when it is
    not installed), the endpoint of an HTTP one."""
    if config.backend not in LOCAL_BACKENDS or config.model is None:
        return f"{config.backend}:{config.model}" + (
            f" at {config.base_url}" if getattr(config, "base_url", None) else ""
        )
    model = config.model
    if is_adapter_dir(model):
        return f"{config.backend}: adapter {model}"
    adapter = getattr(config, "adapter", None)
    if adapter and not is_adapter_dir(adapter):
        raise ValueError(f"llm_options adapter {adapter}: not a PEFT adapter folder (no adapter_config.json)")
    return f"{config.backend}: {resolve_model(model)}" + (f" + adapter {adapter}" if adapter else "")


def plan_run(options: ComponentOptions) -> RunPlan:
    """``options`` checked and resolved as a run would (see the module docstring); raises what the run would."""
    configs = preflight(options)
    agent_key, user_key = llm_keys(options)
    llms = {}
    for role, key in (("agent", agent_key), ("user", user_key)):
        if key is not None:
            llms[role] = _loads(configs[key])
    if is_remote(options.env):
        return RunPlan(options.env, options.data, {}, options.split, [], options.agent, options.user, llms)
    env = build_env(options.env, options.data, options.env_options)
    loaded = {split: env.tasks(split) for split in env.splits}
    if options.split not in loaded:
        raise ValueError(f"--split {options.split}: {options.env} has the splits {', '.join(loaded)}")
    splits = {split: len(tasks) for split, tasks in loaded.items()}
    chosen = loaded[options.split][: options.limit]
    return RunPlan(options.env, options.data, splits, options.split, chosen, options.agent, options.user, llms)
